"""Prefill/decode disaggregation (`kvcalc transfer`): the bytes of one request's cache that move from the prefill
GPU to the decode GPU once its prompt is prefilled, at the granularity the engine's connector moves them, and the
time that takes over a link.

Each engine says what its connector moves (``Engine.transfer_groups``): whole blocks or pages, padding included,
per cache group. Every decode rank reads its own rank's share (an MLA latent is replicated, so each of ``tp``
ranks reads a whole copy): with one link per GPU the ranks move in parallel, so the time is one rank's bytes
over one link, and the wire carries ``tp`` times them. Links (``kvcalc/data/links.yaml``) are peak per-direction
data rates with their sources: no protocol overhead, no congestion, no overlap with compute. Torch-free.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from .engines import DEFAULT_ENGINE
from .handoff import TransferPlan
from .errors import KvcalcError, quote, with_names
from .paths import DATA
from .yamlio import load_yaml

#: --bandwidth in decimal GB/s: more than this is a typo (1 PB/s), less is no link (1 kB/s)
MAX_GBPS, MIN_GBPS = 1_000_000, 1e-6


@dataclass(frozen=True)
class Link:
    key: str
    name: str
    bytes_per_s: int  # one direction
    stated: str  # the figure as its source states it
    source: str

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Transfer:
    model: str
    engine: str
    engine_title: str
    precision: str
    prompt_tokens: int
    tp: int
    plan: TransferPlan
    stored_bytes: int  # the exact bytes of the request's cache on one rank (complete basis), in the engine's formats
    reserved_bytes: int  # what the request's blocks / pages cost in the engine's pool on one rank
    link: Link | None
    gpu: str | None = None  # the catalogue GPU on both sides (None: none named, the engine's Hopper rules)
    arch: str | None = None  # the architecture whose kernels set the layout (None: Hopper's, no GPU named)
    stored_formats: dict | None = None  # component -> the format the engine stores it in (Engine.stored_formats)

    @property
    def cache_bytes(self) -> int:
        return sum(g.bytes for g in self.plan.groups)

    @property
    def transfer_bytes(self) -> int:
        """One rank's bytes over its link: the cache groups plus the connector's metadata."""
        return self.cache_bytes + self.plan.aux_bytes

    @property
    def wire_bytes(self) -> int:
        return self.transfer_bytes * self.tp

    @property
    def transfer_seconds(self) -> float | None:
        return None if self.link is None else self.transfer_bytes / self.link.bytes_per_s

    def seconds_over(self, link: Link) -> float:
        return self.transfer_bytes / link.bytes_per_s

    def to_json(self) -> dict:
        return {"model": self.model, "engine": self.engine, "engine_title": self.engine_title,
                "precision": self.precision, "prompt_tokens": self.prompt_tokens, "tp": self.tp,
                "tokens_moved": self.plan.tokens_moved, "groups": [g.to_json() for g in self.plan.groups],
                "cache_bytes": self.cache_bytes, "aux_bytes": self.plan.aux_bytes,
                "transfer_bytes": self.transfer_bytes, "wire_bytes": self.wire_bytes,
                "stored_bytes": self.stored_bytes, "stored_formats": dict(self.stored_formats or {}),
                "reserved_bytes": self.reserved_bytes,
                "reserved_as": self.plan.reserved_as, "gpu": self.gpu, "arch": self.arch,
                "link": None if self.link is None else self.link.to_json(),
                "transfer_seconds": self.transfer_seconds,
                "links": [{"key": k.key, "bytes_per_s": k.bytes_per_s, "seconds": self.seconds_over(k)}
                          for k in links().values()],
                "notes": [with_names(n) for n in self.plan.notes],
                "basis": BASIS if self.plan.basis is None else self.plan.basis}


BASIS = ("one request's cache as the engine's connector moves it after prefill: whole blocks or pages, padding "
         "included, per cache group, on one tensor-parallel rank (every decode rank reads its own share; the wire "
         "carries tp times it); the time is one rank's bytes over one link at its peak per-direction rate (no "
         "protocol overhead, congestion or overlap); no decode-side prefix hit, no speculative decoding; stored_bytes: "
         "what the request holds, exact, in the formats the engine stores (notes name those that are not the "
         "precision's); bytes exact, binary units; link rates decimal")

_LINKS: dict[str, Link] | None = None


def links() -> dict[str, Link]:
    global _LINKS
    if _LINKS is None:
        data = load_yaml(DATA / "links.yaml")
        _LINKS = {k: Link(key=k, **v) for k, v in data["links"].items()}
    return _LINKS


def get_link(name: str) -> Link:
    key = str(name).strip().lower()
    known = links()
    if key not in known:
        close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.4)
        hint = f"; closest: {', '.join(close)}" if close else f"; known: {', '.join(known)}"
        raise KvcalcError(f"link: unknown link {quote(str(name))}{hint}", param="link")
    return known[key]


def bandwidth_link(gbps) -> Link:
    """A link of ``gbps`` decimal GB/s per direction (``--bandwidth``)."""
    if isinstance(gbps, bool) or not isinstance(gbps, (int, float)) or not (MIN_GBPS <= gbps <= MAX_GBPS):
        raise KvcalcError(f"bandwidth: must be a number of GB/s from {MIN_GBPS:g} (1 kB/s) to {MAX_GBPS:,}, got "
                          f"{quote(gbps)}"[:200], param="bandwidth")
    return Link("given", f"{gbps:g} GB/s", round(gbps * 1e9), f"{gbps:g} GB/s", "given by the caller")


def transfer(model, prompt_tokens: int, *, engine: str = DEFAULT_ENGINE, precision: str | None = None, tp: int = 1,
             link: str | None = None, bandwidth: float | None = None, settings=None, gpu=None) -> Transfer:
    """The bytes one request of ``prompt_tokens`` moves from prefill to decode on ``engine``, and the time over
    ``link`` (a catalogue name) or ``bandwidth`` (GB/s per direction). ``gpu`` (a catalogue name or GPU, both
    sides alike) sets the architecture whose kernels pick the block / page layout; None plans on Hopper's rules."""
    from .config import as_model
    from .engines import get_engine
    from .engines.base import format_differences, format_notes
    from .plan import precision_notes
    from .hardware import resolve_gpu
    from .plan import plan
    from .units import MAX_TOKENS
    from . import args

    spec = as_model(model)
    args.integer(prompt_tokens, "context", 1, MAX_TOKENS)
    if link is not None and bandwidth is not None:
        raise KvcalcError("bandwidth: give a link or a bandwidth, not both ({{link}} or {{bandwidth}})",
                          param="bandwidth")
    chosen = get_link(link) if link is not None else (bandwidth_link(bandwidth) if bandwidth is not None else None)
    eng = get_engine(engine)
    dev = resolve_gpu(gpu)
    settings = eng.resolve(settings, gpu=dev, model=spec)
    # the plan's max_model_len is the prompt; an engine that needs room past the prompt (vLLM: one output token)
    # refuses a prompt its context check would let through
    eng.check_prompt(spec, prompt_tokens, settings)
    p = plan(spec, prompt_tokens, precision=precision, engine=eng.name, settings=settings, tp=tp)
    tplan = eng.transfer_groups(p, spec, prompt_tokens)
    # the bytes held are counted in the formats the engine stores: say where they are not the precision's
    prec = spec.precision(p.precision)
    tplan = replace(tplan, notes=tplan.notes + precision_notes(eng, spec, prec, asked=precision is not None) + tuple(
        format_notes(eng, spec, prec, format_differences(spec, prec, p.stored_formats))))
    return Transfer(spec.name, eng.name, eng.title, p.precision, prompt_tokens, tp, tplan, p.analytic_bytes,
                    p.per_request_bytes, chosen, dev.key if dev is not None else None,
                    getattr(settings, "arch", None), dict(p.stored_formats))
