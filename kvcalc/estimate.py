"""Bytes of every cache component of every layer at one or many contexts.

Everything is ``entries(L) x entry_bytes + fixed_bytes`` per component, summed over the layers the basis
counts, times the batch. Contexts are a vector: numpy int64 by default, so a sweep over thousands of
lengths is one pass, or exact Python ints (``numpy=False``, what the command line uses for a few contexts, so
it never imports numpy); the same formulas run on both (``kvcalc.vec``). Layers of the same kind share their
component arrays: the work is per kind, not per layer.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Literal, Mapping, Sequence, Union

from .config import ModelSpec, as_model
from .errors import KvcalcError, quote
from .formats import get_format
from .specs import CompressorState, CompressorStateSlots, FixedState, RecurrentState
from .units import MAX_TOKENS, tokens_text
from .vec import Ints, is_array, zeros_like

if TYPE_CHECKING:
    import numpy as np

#: a vector of token or byte counts: numpy int64 (the API's default) or exact Python ints (see ``kvcalc.vec``)
Vector = Union["np.ndarray", Ints]

Basis = Literal["article", "complete"]
BASES: dict[str, str] = {
    "complete": "every cache a request holds in every main layer: per-token caches (K/V, latents, windows, "
    "compressed entries, indexer keys) and fixed per-request state (compressor partials, SSM / linear-attention "
    "state), plus the MTP layers when {{mtp}} is set",
    "article": "what vLLM's DeepSeek V4 write-up counts: window, compressed entries and indexer keys of the "
    "main layers; no per-request state, no MTP layer",
}
PAGING = "exact bytes (no page or block rounding)"
#: Byte counts are int64; anything near 2^63 B (8 EiB) is a typo in a config or an argument.
MAX_BYTES = (1 << 63) - 1
MAX_BATCH = 1 << 32
#: contexts in one call: a million take seconds and a few hundred MB (a vector per cache kind); ten million, GBs
MAX_CONTEXTS = 1_000_000


@dataclass(frozen=True)
class ComponentBytes:
    name: str
    cache: str  # the spec kind, e.g. compressed_mla
    storage: str  # the role the precision maps to a format (kv, indexer, state)
    rule: str  # token rule, e.g. L//4 (entries after L tokens)
    format: str  # storage format name (the dtype for fixed state)
    entry_bytes: int
    fixed_bytes: int
    entries: Vector  # per context
    bytes: Vector  # per context, one sequence


@dataclass(frozen=True)
class LayerBytes:
    index: int  # main layers 0..n-1; MTP layers follow
    kind: str
    mtp: bool
    components: tuple[ComponentBytes, ...]
    bytes: Vector  # per context, one sequence


@dataclass(frozen=True)
class Estimate:
    model: ModelSpec
    precision: str
    basis: str
    mtp: bool
    batch: int
    contexts: Vector
    layers: tuple[LayerBytes, ...]
    per_sequence: Vector  # bytes per context for one sequence
    context_warning: str | None = None  # one line for every context beyond the model's max_context

    def __repr__(self) -> str:
        n = len(self.per_sequence)
        first = f"{int(self.per_sequence[0]):,} B at {int(self.contexts[0]):,} tokens" if n else "no context"
        more = f" (+{n - 1:,} more contexts)" if n > 1 else ""
        return (f"<kvcalc Estimate: {self.model.name}, {self.precision}, {self.basis} basis, batch {self.batch}: "
                f"{first} per sequence{more}>")

    @property
    def warnings(self) -> tuple[str, ...]:
        return (self.context_warning,) if self.context_warning else ()

    @property
    def total(self) -> Vector:
        return self.per_sequence * self.batch

    def kinds(self) -> dict[str, tuple[int, tuple[ComponentBytes, ...], Vector]]:
        """kind label -> (layer count, components, bytes of one layer); MTP layers get their own label.
        Ordered as the config declares its layer kinds, main layers before MTP layers."""
        groups: dict[tuple[bool, str], list] = {}
        for layer in self.layers:
            group = groups.setdefault((layer.mtp, layer.kind), [0, layer.components, layer.bytes])
            group[0] += 1
        order = {k: i for i, k in enumerate(self.model.layer_kinds)}
        return {
            (f"{kind} (MTP)" if mtp else kind): (n, comps, b)
            for (mtp, kind), (n, comps, b) in sorted(groups.items(), key=lambda kv: (kv[0][0], order[kv[0][1]]))
        }

    def entry_sizes(self) -> dict[str, list[int]]:
        """role -> distinct bytes per entry, e.g. {'kv': [584], 'indexer': [68]}."""
        out: dict[str, list[int]] = {}
        for c in (c for layer in self.layers for c in layer.components if c.entry_bytes):
            sizes = out.setdefault(c.storage, [])
            if c.entry_bytes not in sizes:
                sizes.append(c.entry_bytes)
        return out

    def to_dicts(self) -> list[dict]:
        """One JSON-ready object per context."""
        out = []
        for i, ctx in enumerate(self.contexts.tolist()):
            out.append(
                {
                    "model": self.model.name,
                    "display_name": self.model.display_name,
                    "context_tokens": int(ctx),
                    "precision": self.precision,
                    "basis": self.basis,
                    "basis_detail": BASES[self.basis],
                    "mtp_counted": self.mtp,
                    "paging": "exact",
                    "units": "bytes",
                    "batch": self.batch,
                    "total_bytes": int(self.total[i]),
                    "per_sequence_bytes": int(self.per_sequence[i]),
                    "storage": {
                        role: fmt.name for role, fmt in self.model.precision(self.precision).formats.items()
                    },
                    "layers": [
                        {
                            "index": layer.index,
                            "kind": layer.kind,
                            "mtp": layer.mtp,
                            "bytes": int(layer.bytes[i]),
                            "components": [
                                {
                                    "name": c.name,
                                    "cache": c.cache,
                                    "rule": c.rule,
                                    "format": c.format,
                                    "entries": int(c.entries[i]),
                                    "entry_bytes": c.entry_bytes,
                                    "fixed_bytes": c.fixed_bytes,
                                    "bytes": int(c.bytes[i]),
                                }
                                for c in layer.components
                            ],
                        }
                        for layer in self.layers
                    ],
                    "warnings": list(self.warnings_for(int(ctx))),
                }
            )
        return out

    def to_columns(self) -> dict:
        """One object for every context at once, as columns: no per-layer breakdown, so 10,000 contexts cost
        a few arrays (the ``--json --compact`` form)."""
        return {
            "model": self.model.name,
            "precision": self.precision,
            "basis": self.basis,
            "batch": self.batch,
            "mtp": self.mtp,
            "paging": PAGING,
            "context_tokens": self.contexts.tolist(),
            "per_sequence_bytes": self.per_sequence.tolist(),
            "total_bytes": self.total.tolist(),
            "kinds": {label: {"layers": n, "components": [c.name for c in comps], "per_layer_bytes": b.tolist()}
                      for label, (n, comps, b) in self.kinds().items()},
            "warnings": list(self.warnings),
        }

    def warnings_for(self, context: int) -> list[str]:
        mc = self.model.max_context
        return [self.context_warning] if self.context_warning and mc is not None and context > mc else []


def _contexts(context: int | Iterable[int], numpy: bool):
    """Token counts as a vector: an int, or a flat sequence / array of ints; numpy int64 if ``numpy``, else
    exact Python ints (:class:`Ints`). Floats, booleans, strings, bytes, mappings and nested lists are refused
    (b"1024" would otherwise read as the byte values 49, 48, 50, 52)."""
    def bad(what: str) -> KvcalcError:
        return KvcalcError(f"context: token counts must be integers (an int or a list of ints), got {what}",
                           param="context")

    def too_many(n: int | None) -> KvcalcError:
        count = f"{n:,}" if n is not None else f"more than {MAX_CONTEXTS:,}"
        return KvcalcError(f"context: {count} contexts at once; kvcalc computes at "
                           f"most {MAX_CONTEXTS:,} in one call (each holds a vector per cache kind): split them",
                           param="context")

    def outside(v) -> KvcalcError:
        return KvcalcError(f"context: {int(v)} is outside 1 .. {MAX_TOKENS:,} tokens", param="context")

    np = sys.modules.get("numpy")  # a numpy value can only exist if numpy is loaded: no import for ints
    np_int = (np.integer,) if np is not None else ()
    if isinstance(context, bool) or (np is not None and isinstance(context, np.bool_)):
        raise bad("a boolean")
    if type(context).__name__ == "MaskedArray" or any(type(c).__name__ == "MaskedConstant" for c in (
            context if isinstance(context, (list, tuple)) else ())):
        raise bad("a masked array (its masked entries hold no token count; pass context.compressed())")
    if is_array(context):
        if context.ndim > 1 or context.dtype.kind not in "iu":
            raise bad(f"an array of {context.dtype} with shape {context.shape}")
        if context.dtype.kind == "u" and context.size and int(context.max()) > MAX_TOKENS:
            raise outside(context.max())  # before the cast to int64 could wrap it
        if context.size > MAX_CONTEXTS:
            raise too_many(context.size)
        arr = np.atleast_1d(context.astype(np.int64))
        if arr.size == 0:
            raise KvcalcError("context: give at least one context length", param="context")
        out_of_range = arr[(arr < 1) | (arr > MAX_TOKENS)]
        if out_of_range.size:
            raise outside(out_of_range[0])
        return arr if numpy else Ints(arr.tolist())
    if isinstance(context, (str, bytes, bytearray, dict, set, frozenset)) or not (
            isinstance(context, (Iterable, int, *np_int))):
        raise bad(type(context).__name__)
    # an int or a flat sequence: checked in Python ints, before numpy could wrap them into int64
    if hasattr(context, "__len__") and len(context) > MAX_CONTEXTS:
        raise too_many(len(context))
    values = [context] if isinstance(context, (int, *np_int)) else list(itertools.islice(context, MAX_CONTEXTS + 1))
    if len(values) > MAX_CONTEXTS:
        raise too_many(None)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, *np_int)):  # numpy.bool_ is no numpy.integer
            raise bad(f"an element of type {type(v).__name__}")
    if not values:
        raise KvcalcError("context: give at least one context length", param="context")
    for v in values:
        if v < 1 or v > MAX_TOKENS:
            raise outside(v)
    if numpy:
        import numpy as np

        return np.asarray(values, dtype=np.int64)
    return Ints([int(v) for v in values])


def _check(spec, numpy, basis: str, batch, mtp: bool) -> None:
    from . import args

    if not isinstance(numpy, bool):
        raise KvcalcError(f"numpy: must be True or False, got {quote(numpy)}"[:200], param="numpy")
    args.name(basis, "basis")
    args.flag(mtp, "mtp")
    if basis not in BASES:
        raise KvcalcError(f"basis: unknown basis {quote(basis)}; choose one of: {', '.join(BASES)}", param="basis")
    np = sys.modules.get("numpy")
    if isinstance(batch, bool) or not isinstance(batch, (int, *((np.integer,) if np else ()))) or \
            not 1 <= batch <= MAX_BATCH:
        raise KvcalcError(f"batch: must be an integer from 1 to {MAX_BATCH:,}, got {quote(batch)}", param="batch")
    if mtp and basis != "complete":
        raise KvcalcError("mtp: the article basis leaves the MTP layer out by definition; use the complete basis",
                          param="mtp")


#: after a dtype: a compressor state kept as one row per token of its span (:class:`kvcalc.specs.CompressorStateSlots`)
PER_TOKEN = " per token"


def stored_component(comp, prec, formats: Mapping[str, str] | None):
    """(the component, its format) as stored: the precision's format for its role, or where ``formats`` names one
    for it (an engine's storage, :meth:`kvcalc.engines.base.Engine.stored_formats`), that one; a recurrent state's
    'conv+ssm' dtypes (or one dtype for both) become the component's own dtypes; a compressor state's
    '<dtype> per token' keeps a row per token of its span (:class:`kvcalc.specs.CompressorStateSlots`)."""
    from dataclasses import fields, replace

    fmt = prec.formats.get(comp.storage)
    name = formats.get(comp.name) if formats else None
    if name is None:
        return comp, fmt
    where = f"formats.{comp.name}"
    if comp.per_token:
        return comp, get_format(name, where)
    if isinstance(comp, RecurrentState):
        conv, _, ssm = name.partition("+")
        get_format(conv, where), get_format(ssm or conv, where)
        return replace(comp, dtype=conv, ssm_dtype=ssm or conv), fmt
    if isinstance(comp, CompressorState) and name.endswith(PER_TOKEN):
        dtype = name[:-len(PER_TOKEN)]
        get_format(dtype, where)
        return CompressorStateSlots(**{f.name: getattr(comp, f.name) for f in fields(comp)} | {"dtype": dtype}), fmt
    if isinstance(comp, FixedState):
        get_format(name, where)
        return replace(comp, dtype=name), fmt
    return comp, fmt


def _check_formats(spec: ModelSpec, formats) -> None:
    if formats is None:
        return
    if not isinstance(formats, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in formats.items()):
        raise KvcalcError("formats: must map component names to storage format names (strings)", param="formats")
    for k, v in formats.items():
        if k not in spec.components:
            raise KvcalcError(f"formats: {spec.name} has no component {k[:80]!r}", param="formats")
        for part in v.removesuffix(PER_TOKEN).split("+"):
            get_format(part, f"formats.{k}")


def _kind_components(spec: ModelSpec, kind: str, prec, basis: str, contexts,
                     formats: Mapping[str, str] | None = None) -> tuple[tuple[ComponentBytes, ...], int]:
    """The components one layer of ``kind`` holds on ``basis``, and their exact bytes at the largest context
    (a Python-int bound, checked before numpy could wrap int64), each in its stored format (``formats``)."""
    comps, bound = [], 0
    for cname in spec.layer_kinds[kind]:
        comp = spec.components[cname]
        if not comp.per_token and basis == "article":
            continue
        comp, fmt = stored_component(comp, prec, formats)
        if comp.per_token:
            eb, fmt_name = comp.entry_bytes(fmt), fmt.name
        elif isinstance(comp, RecurrentState):
            conv, ssm = comp.dtypes(fmt)
            eb, fmt_name = 0, conv if conv == ssm else f"{conv} conv + {ssm} ssm"
        else:  # fixed state: its bytes are fixed, unless an engine keeps a row per token (CompressorStateSlots)
            eb, fmt_name = comp.entry_bytes(fmt), getattr(comp, "dtype", "")
        entries = comp.entries(contexts)
        fixed = comp.fixed_bytes(fmt)
        bound += int(entries.max()) * eb + fixed
        if bound > MAX_BYTES:  # exact Python ints, before numpy could wrap int64
            raise KvcalcError(
                f"{spec.path}: components.{cname}: {int(entries.max()):,} entries x {eb:,} B + {fixed:,} B "
                "exceeds 8 EiB; check the config's values"
            )
        comps.append(ComponentBytes(name=cname, cache=comp.kind, storage=comp.storage, rule=comp.rule(),
                                    format=fmt_name, entry_bytes=eb, fixed_bytes=fixed, entries=entries,
                                    bytes=entries * eb + fixed))
    return tuple(comps), bound


def context_warning(spec: ModelSpec, contexts) -> str | None:
    """One line per estimate, however many contexts it covers (vectorised, no per-context scan)."""
    if spec.max_context is None:
        return None
    over = contexts[contexts > spec.max_context]
    if not over.size:
        return None
    limit = f"the model's max_context {tokens_text(spec.max_context)}; computed anyway"
    if over.size == 1:
        return f"{spec.name}: context {tokens_text(int(over[0]))} exceeds {limit}"
    lo, hi = int(over.min()), int(over.max())
    return f"{spec.name}: {over.size:,} contexts, from {tokens_text(lo)} to {tokens_text(hi)}, exceed {limit}"


def estimate(
    model: ModelSpec | str,
    context: int | Sequence[int] = 1 << 20,
    *,
    precision: str | None = None,
    basis: Basis = "complete",
    batch: int = 1,
    mtp: bool = False,
    what: str = "precision",
    numpy: bool = True,
    formats: Mapping[str, str] | None = None,
) -> Estimate:
    """KV cache bytes of ``model`` after ``context`` tokens (an int or a sequence of ints).

    ``basis='complete'`` counts everything a request holds; ``'article'`` reproduces vLLM's write-up
    (window + compressed entries + indexer of the main layers only). ``mtp=True`` adds the model's MTP
    layers (speculative decoding on); it needs the complete basis. ``what`` names the precision argument
    in error messages. ``numpy=False`` gives the vectors as :class:`kvcalc.vec.Ints` (exact Python ints with
    the same indexing, ``tolist`` and arithmetic) and never imports numpy. ``formats`` maps a component to the
    storage format an engine stores it in where that differs from the precision's (a recurrent state: its
    'conv+ssm' dtypes; ``kvcalc.plan.plan`` passes the engine's own, :meth:`Engine.stored_formats`).
    """
    spec = as_model(model)
    _check(spec, numpy, basis, batch, mtp)
    _check_formats(spec, formats)
    prec = spec.precision(precision, what)
    contexts = _contexts(context, numpy)

    per_kind: dict[str, tuple[tuple[ComponentBytes, ...], Vector]] = {}
    bound: dict[str, int] = {}  # exact Python-int bytes of one layer of each kind at the largest context
    for kind in dict.fromkeys(spec.layers + (spec.mtp_layers if mtp else ())):
        comps, bound[kind] = _kind_components(spec, kind, prec, basis, contexts, formats)
        per_kind[kind] = (comps, sum((c.bytes for c in comps), zeros_like(contexts)))

    layers = [LayerBytes(i, k, False, *per_kind[k]) for i, k in enumerate(spec.layers)]
    if mtp:
        n = len(spec.layers)
        layers += [LayerBytes(n + j, k, True, *per_kind[k]) for j, k in enumerate(spec.mtp_layers)]
    # the same bound for the whole request and the batch, again in exact Python ints
    largest = sum(bound[layer.kind] for layer in layers)
    if largest * int(batch) > MAX_BYTES:
        raise KvcalcError(
            f"{spec.name}: {largest:,} B per sequence x batch {int(batch):,} exceeds 8 EiB; "
            "check {{context}}, {{batch}} and the config"
        )
    per_seq = sum((layer.bytes for layer in layers), zeros_like(contexts))
    return Estimate(model=spec, precision=prec.name, basis=basis, mtp=mtp, batch=int(batch), contexts=contexts,
                    layers=tuple(layers), per_sequence=per_seq, context_warning=context_warning(spec, contexts))
