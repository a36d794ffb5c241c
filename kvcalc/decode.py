"""Cache bytes one decode step reads (`kvcalc decode`): stored bytes answer "does it fit", these "how much must
every new token look at".

For one sequence of ``context`` tokens, each layer's attention reads, per cached component:

* a dense cache every entry it holds: full attention's K and V (all L), a sliding window's last ``window``, a
  chunked layer's current chunk, a dense MLA latent (all L), DeepSeek V4's c128a entries (all L // 128);
* a cache read sparsely through the lightning indexer the ``index_topk`` entries the indexer selects:
  ``min(entries, topk)`` (DeepSeek V3.2's latent: 2,048 of L; V4's c4a entries: 1,024 (Pro) or 512 (Flash) of
  L // 4). A cache is sparse when its layer holds an indexer with a ``topk`` at the same ratio;
* the indexer's keys: every one, because every key is scored to select the top-k;
* fixed state (compressor state, Mamba / DeltaNet / KDA / lightning state): all of it, once per layer, and it is
  written back.

Writes per step: a per-token cache appends one entry (a compressed cache one entry every ``ratio`` tokens), fixed
state is rewritten. Not counted: weights, activations, compute, the engine's block tables. Exact integers,
torch-free.

With a GPU (``step_floor``), one step of ``batch`` sequences also reads the weights: the dense weights in full and,
for a mixture of experts, the routed experts the batch selects. Under uniform, independent routing of each token
to ``k`` of ``E`` experts, an expert is idle with probability ``(1 - k/E)^B``, so a step reads on average the
share ``1 - (1 - k/E)^B`` of the routed experts' bytes. The step's bytes over the device's peak memory bandwidth
are a floor on its time (no compute, no kernel launches, no overlap lost), and ``batch`` over that time a ceiling
on tokens per second.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import as_model
from .errors import KvcalcError
from .specs import CompressedMLA, FullAttention, IndexerCache, MLALatent, RecurrentState
from .vec import Ints


@dataclass(frozen=True)
class ComponentRead:
    name: str
    cache: str
    rule: str  # what is read: "all L", "top-k 1,024 of L//4", "every key (L//4)", "state"
    entries: int  # entries read (0 for fixed state)
    entry_bytes: int
    read_bytes: int  # one layer
    write_bytes: int  # one layer: bytes written per write
    write_every: int  # tokens between writes (1: every step; a compressed cache: its ratio)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class KindRead:
    kind: str
    layers: int
    components: tuple[ComponentRead, ...]

    @property
    def read_bytes(self) -> int:
        """One layer of this kind."""
        return sum(c.read_bytes for c in self.components)

    def to_json(self) -> dict:
        return {"kind": self.kind, "layers": self.layers, "read_bytes_per_layer": self.read_bytes,
                "read_bytes": self.read_bytes * self.layers, "components": [c.to_json() for c in self.components]}


@dataclass(frozen=True)
class Decode:
    model: str
    precision: str
    context_tokens: int
    batch: int
    kinds: tuple[KindRead, ...]
    stored_bytes: int  # the estimate's bytes of one sequence (complete basis), for comparison
    tp: int = 1  # tensor-parallel ranks: every figure is one rank's

    @property
    def read_bytes_per_token(self) -> int:
        """Cache bytes one decode step reads for one sequence."""
        return sum(k.read_bytes * k.layers for k in self.kinds)

    @property
    def state_write_bytes(self) -> int:
        """Fixed state written back per step, one sequence."""
        return sum(c.write_bytes * k.layers for k in self.kinds for c in k.components if c.rule == "state")

    def to_json(self) -> dict:
        return {"model": self.model, "precision": self.precision, "context_tokens": self.context_tokens,
                "batch": self.batch, "tp": self.tp, "read_bytes_per_token": self.read_bytes_per_token,
                "read_bytes_per_step": self.read_bytes_per_token * self.batch,
                "stored_bytes": self.stored_bytes, "state_write_bytes_per_token": self.state_write_bytes,
                "layers": [k.to_json() for k in self.kinds], "basis": BASIS}


BASIS = ("cache bytes one decode step reads for one new token of one sequence: dense caches every entry, caches "
         "read through the lightning indexer its index_topk entries, every indexer key scored, fixed state read once "
         "per layer (and written back); no weights, no activations, no compute; exact bytes, binary units")


def _sparse_ratios(spec, kind: str) -> dict[int, int]:
    """ratio -> topk of the indexers in a layer kind that select entries."""
    out = {}
    for c in spec.layer_kinds[kind]:
        comp = spec.components[c]
        if isinstance(comp, IndexerCache) and comp.topk:
            out[comp.ratio] = comp.topk
    return out


def _component(spec, name: str, prec, L: int, sparse: dict[int, int], tp: int) -> ComponentRead:
    comp = spec.components[name]
    fmt = prec.formats.get(comp.storage)
    if not comp.per_token:  # one rank's share: recurrent state splits its channels and heads, the rest is whole
        state = comp.fixed_bytes_on_rank(fmt, tp) if isinstance(comp, RecurrentState) else comp.fixed_bytes(fmt)
        return ComponentRead(name, comp.kind, "state", 0, 0, state, state, 1)
    eb = comp.entry_bytes(fmt)
    if isinstance(comp, FullAttention):  # KV heads split over the ranks, replicated when tp exceeds them
        eb = eb // comp.kv_heads * comp.kv_heads_on_rank(tp)
    held = int(comp.entries(Ints([L]))[0])
    ratio = getattr(comp, "ratio", 1) if isinstance(comp, (CompressedMLA, IndexerCache)) else 1
    rule_held = comp.rule()
    if isinstance(comp, IndexerCache):
        n, rule = held, f"every key ({rule_held})"
    elif isinstance(comp, (MLALatent, CompressedMLA)) and ratio in sparse and not _is_window(comp):
        n, rule = min(held, sparse[ratio]), f"top-k {sparse[ratio]:,} of {rule_held}"
    else:
        n, rule = held, f"all {rule_held}"
    return ComponentRead(name, comp.kind, rule, n, eb, n * eb, eb, ratio)


def _is_window(comp) -> bool:
    return getattr(comp, "window", None) is not None


@dataclass(frozen=True)
class StepFloor:
    """One decode step of ``batch`` sequences on one GPU: the bytes it must move and the time that takes at the
    device's peak memory bandwidth."""

    gpu: str
    gpu_name: str
    bandwidth_bytes_per_s: int
    bandwidth_source: str
    batch: int
    dense_weight_bytes: int  # read in full every step
    expert_weight_bytes: int  # all routed experts
    experts: int | None  # routed experts per MoE layer (None: a dense model)
    experts_per_token: int | None
    expert_read_share: float  # expected share of the routed experts' bytes a step reads
    cache_read_bytes: int  # batch x the cache bytes one sequence reads
    state_write_bytes: int  # batch x the fixed state written back
    append_bytes: int  # batch x one entry per per-token component: left out of the floor (see basis)
    weights_source: str
    tp: int = 1  # every byte figure is one rank's; the ranks read in parallel
    memory_bytes: int = 0  # the GPU's memory
    held_bytes: int = 0  # what one GPU must hold for the step: its weights and its batch's caches, exact
    #: why the step cannot run on these GPUs, with the tp that would hold it (parameters as {{name}}: the command
    #: line shows its flags); None where it fits
    does_not_fit_template: str | None = None

    @property
    def fits(self) -> bool:
        return self.does_not_fit_template is None

    @property
    def does_not_fit(self) -> str | None:
        from .errors import with_names

        return None if self.fits else with_names(self.does_not_fit_template)

    @property
    def expert_read_bytes(self) -> int:
        return round(self.expert_weight_bytes * self.expert_read_share)

    @property
    def weights_read_bytes(self) -> int:
        return self.dense_weight_bytes + self.expert_read_bytes

    @property
    def step_bytes(self) -> int:
        return self.weights_read_bytes + self.cache_read_bytes + self.state_write_bytes

    @property
    def step_seconds(self) -> float:
        return self.step_bytes / self.bandwidth_bytes_per_s

    @property
    def tokens_per_second(self) -> float:
        return self.batch / self.step_seconds

    @property
    def expected_experts(self) -> float | None:
        return None if self.experts is None else self.experts * self.expert_read_share

    def to_json(self) -> dict:
        return {"gpu": self.gpu, "gpu_name": self.gpu_name, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
                "bandwidth_source": self.bandwidth_source, "batch": self.batch, "tp": self.tp,
                "dense_weight_bytes": self.dense_weight_bytes, "expert_weight_bytes": self.expert_weight_bytes,
                "routed_experts": self.experts, "experts_per_token": self.experts_per_token,
                "expected_experts_per_layer": self.expected_experts, "expert_read_share": self.expert_read_share,
                "expert_read_bytes": self.expert_read_bytes, "weights_read_bytes": self.weights_read_bytes,
                "cache_read_bytes": self.cache_read_bytes, "state_write_bytes": self.state_write_bytes,
                "append_bytes_left_out": self.append_bytes, "step_bytes": self.step_bytes,
                "step_seconds_floor": self.step_seconds, "tokens_per_second_ceiling": self.tokens_per_second,
                "weights_source": self.weights_source, "memory_bytes": self.memory_bytes, "held_bytes": self.held_bytes,
                "fits": self.fits, "assumption": ROUTING_ASSUMPTION, "basis": FLOOR_BASIS}


ROUTING_ASSUMPTION = ("each token of each MoE layer goes to k of E routed experts uniformly and independently of the "
                      "other tokens: a step reads 1 - (1 - k/E)^B of the routed experts' bytes on average")
FLOOR_BASIS = ("each GPU reads its bytes of the step once at its peak memory bandwidth (with tp ranks: the weights "
               "split evenly, KV heads and recurrent state split, latents, indexer keys and compressor state whole "
               "on every rank, all ranks in parallel): the dense weights in full (the input embedding table "
               "included, though a step reads only B of its rows), the expected routed experts, every sequence's "
               "cache reads and its fixed state written back; the entries appended this step, activations, compute, "
               "kernel launches, communication between ranks and the MTP layer are left out, so the time is a floor "
               "and the tokens per second a ceiling")


def step_floor(d: Decode, spec, gpu, *, weights_bytes: int | None = None) -> StepFloor:
    """The decode step ``d`` at its batch on ``gpu``: bytes moved and the bandwidth floor."""
    from . import args
    from .config import ModelSpec
    from .errors import KvcalcError
    from .hardware import GPU

    args.instance(d, "decode", Decode, "a Decode (kvcalc.decode.decode)")
    args.instance(spec, "model", ModelSpec, "a ModelSpec")
    args.instance(gpu, "gpu", GPU, "a GPU (kvcalc.hardware.get_gpu)")
    args.integer(weights_bytes, "weights", 0, 1 << 60, optional=True)
    if gpu.bandwidth_bytes_per_s is None:
        raise KvcalcError(f"gpu: the catalogue has no memory bandwidth for {gpu.key}", param="gpu")
    B, tp = d.batch, d.tp
    experts = per_token = None
    share = 0.0
    if weights_bytes is not None:
        dense, expert, source = weights_bytes, 0, "given by the caller, read in full every step"
    elif spec.weights is None:
        raise KvcalcError(f"weights: {spec.name} declares no weights; give their size ({{{{weights}}}}, read in full "
                          "every step)", param="weights")
    else:
        w = spec.weights
        dense, expert, source = w.dense_bytes, w.expert_bytes, w.source
        if expert:
            if w.routing is None:
                raise KvcalcError(f"weights: {spec.name} has routed experts but no weights.routing (experts, "
                                  "per_token): the experts a step reads cannot be counted", param="weights")
            experts, per_token = w.routing.experts, w.routing.per_token
            share = 1.0 - (1.0 - per_token / experts) ** B
    append = sum(c.write_bytes * k.layers for k in d.kinds for c in k.components if c.rule != "state")
    if dense + expert + d.read_bytes_per_token == 0:
        raise KvcalcError("weights: a step that reads no byte has no bandwidth floor (give the weights)",
                          param="weights")
    held = _held_per_gpu(d, dense, expert, tp)
    return StepFloor(gpu.key, gpu.name, gpu.bandwidth_bytes_per_s, gpu.bandwidth_source, B, -(-dense // tp),
                     -(-expert // tp), experts, per_token, share, d.read_bytes_per_token * B,
                     d.state_write_bytes * B, append * B, source, tp, gpu.memory_bytes, held,
                     None if held <= gpu.memory_bytes else _does_not_fit(d, spec, gpu, dense, expert))


#: the tensor-parallel sizes a suggestion tries (a floor for a step no GPU can hold is not an answer)
_SUGGEST_TP = (2, 4, 8, 16, 32, 64)


def _held_per_gpu(d: Decode, dense: int, expert: int, tp: int) -> int:
    """What one rank must hold for the step: its share of the weights and its batch's caches (exact bytes, no
    engine's pool or activations: a lower bound on what an engine needs)."""
    return -(-dense // tp) + -(-expert // tp) + d.stored_bytes * d.batch


def _does_not_fit(d: Decode, spec, gpu, dense: int, expert: int) -> str:
    """Why a step whose weights and caches cannot sit in the GPUs given has no floor worth printing (capacity
    refuses the same set-up), naming the smallest tensor-parallel size that holds them."""
    from .engines.base import check_kv_heads_split
    from .errors import KvcalcError
    from .units import format_bytes

    where = "one" if d.tp == 1 else f"each of {d.tp} (tp {d.tp})"
    text = (f"gpu: {spec.name}'s step does not fit on {where} {gpu.name} ({format_bytes(gpu.memory_bytes)}): "
            f"{format_bytes(-(-(dense + expert) // d.tp))} of weights and {format_bytes(d.stored_bytes * d.batch)} "
            f"of cache a GPU; a bandwidth floor for it would be no answer")
    for tp in (t for t in _SUGGEST_TP if t > d.tp):
        try:
            check_kv_heads_split(spec, tp)
        except KvcalcError:
            continue
        wider = decode(spec, d.context_tokens, precision=d.precision, batch=d.batch, tp=tp)
        need = _held_per_gpu(wider, dense, expert, tp)
        if need <= gpu.memory_bytes:
            return (f"{text}; {{{{tp}}}} {tp} ({tp} GPUs) holds {format_bytes(need)} a GPU (before the engine's own "
                    "reserve: `kvcalc capacity` plans it)")
    widest = decode(spec, d.context_tokens, precision=d.precision, batch=d.batch, tp=_SUGGEST_TP[-1])
    if widest.stored_bytes * d.batch > gpu.memory_bytes:  # latents, indexer keys: whole on every rank
        return (f"{text}, at any {{{{tp}}}}: its caches alone take {format_bytes(widest.stored_bytes * d.batch)} a GPU "
                f"even at tp {_SUGGEST_TP[-1]} (what is not split over tp is whole on every rank); fewer sequences "
                "({{batch}}) or a shorter {{context}} would fit")
    return f"{text}, nor at {{{{tp}}}} {_SUGGEST_TP[-1]}"


def decode(model, context: int, *, precision: str | None = None, batch: int = 1, tp: int = 1) -> Decode:
    """The cache bytes one decode step of ``model`` at ``context`` tokens reads, per layer kind and component;
    with ``tp`` ranks, one rank's (KV heads and recurrent state split, latents, indexer keys and compressor state
    whole on every rank)."""
    from . import args
    from .engines.base import check_kv_heads_split
    from .estimate import MAX_BATCH, estimate
    from .plan import MAX_RANKS
    from .units import MAX_TOKENS

    spec = as_model(model)
    args.integer(context, "context", 1, MAX_TOKENS)
    args.integer(batch, "batch", 1, MAX_BATCH)
    args.integer(tp, "tp", 1, MAX_RANKS)
    check_kv_heads_split(spec, tp)
    prec = spec.precision(precision)
    counts: dict[str, int] = {}
    for k in spec.layers:
        counts[k] = counts.get(k, 0) + 1
    kinds = []
    for kind, n in counts.items():
        sparse = _sparse_ratios(spec, kind)
        comps = tuple(_component(spec, c, prec, context, sparse, tp) for c in spec.layer_kinds[kind])
        kinds.append(KindRead(kind, n, comps))
    if not kinds:
        raise KvcalcError(f"{spec.name}: no layers")
    if tp == 1:
        stored = int(estimate(spec, context, precision=prec.name, numpy=False).per_sequence[0])
    else:  # one rank's share, as the plans count it
        from .plan import bytes_on_rank

        stored = bytes_on_rank(spec, context, prec.name, tp)
    return Decode(spec.name, prec.name, context, batch, tuple(kinds), stored, tp)
