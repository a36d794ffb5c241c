"""What an engine is: the interface every engine profile implements, and the pieces they share.

An engine turns a model's cache specs into a :class:`kvcalc.plan.PoolPlan` the way one serving engine, at
one pinned version, lays its caches out; it says how much device memory becomes the cache budget, what it
refuses (with the engine's own message), what it notes, and which start-up log lines it prints. Everything
engine-specific lives in the engine's folder (``kvcalc/engines/NAME/``); the rest of kvcalc asks the engine
through this interface and never names an engine's settings.

Options are declared once, by the engine (:class:`Option`): the command line builds its flags from them and
maps a library parameter back to the engine's own flag in messages.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import KvcalcError, NoRoom, quote
from ..units import GIB
from .options import Option  # noqa: F401  (engines declare their options with it)

if TYPE_CHECKING:  # pragma: no cover
    from ..config import ModelSpec
    from ..hardware import GPU
    from ..pool import PoolPlan
    from ..workload import WorkloadFigures


@dataclass(frozen=True)
class BudgetStep:
    """One line of how a device's memory becomes the engine's request: a label, its bytes, and the engine
    option it comes from (the renderer names the option's flag)."""

    label: str
    bytes: int
    option: str | None = None


@dataclass(frozen=True)
class Budget:
    """What the engine asks of one GPU before weights and kvcalc's reserve come off."""

    requested_bytes: int
    steps: tuple[BudgetStep, ...]
    formula: str  # '0.92 x 139.81 GiB', for the refusal when nothing is left
    json: dict = field(default_factory=dict)  # the engine's own budget figures, by their names

    def pool(self, weights: int, reserve: int) -> int:
        """The cache's bytes once the weights and kvcalc's reserve come off what the engine asks for."""
        return self.requested_bytes - weights - reserve

    def table_rows(self, weights: int, reserve: int, pool: int) -> list[tuple[str, int, str]] | None:
        """The capacity table's rows from the device's memory to the KV pool (label, bytes, basis), where the
        engine's arithmetic is not 'the budget's steps, less weights and reserve' (None: that one)."""
        return None


class EngineFigures:
    """An engine's own figures of a fit, by the engine's own names (SGLang's max_total_num_tokens, vLLM's
    max_num_seqs): a frozen dataclass of each engine's, read as attributes, never by string key. ``to_json`` gives
    the keys it adds to capacity's JSON object, in order; ``schema`` their JSON Schema (properties and required), so
    the output schema is built from the engines without naming one."""

    def to_json(self) -> dict:
        raise NotImplementedError

    @classmethod
    def schema(cls) -> dict:
        """{"properties": ..., "required": [...]}: the keys :meth:`to_json` writes."""
        raise NotImplementedError


@dataclass(frozen=True)
class Fit:
    """How many requests a pool holds, as the engine counts them (per replica, on the fullest rank).

    ``num_blocks`` is the pool in the plan's units (blocks; pages of tokens; bytes); ``lines`` the engine's
    sentences for the capacity text (its figures in its own words); ``table`` an engine-specific table (headers,
    rows) shown instead of the plan's group table; ``figures`` the engine's own figures (:class:`EngineFigures`);
    ``workload`` the count under a workload (:class:`kvcalc.workload.WorkloadFigures`), where one was asked."""

    num_blocks: int
    requests_per_replica: int
    max_concurrency: float
    cache_tokens: int
    lines: tuple[str, ...] = ()
    table: tuple[tuple[str, ...], tuple[tuple[str, ...], ...]] | None = None
    figures: EngineFigures | None = None
    log_line: str | None = None
    notes: tuple[str, ...] = ()
    workload: "WorkloadFigures | None" = None

    def to_json(self) -> dict:
        """The engine's figures, then the workload's, as capacity's JSON object carries them."""
        out = self.figures.to_json() if self.figures is not None else {}
        if self.workload is not None:
            out["workload"] = self.workload.to_json()
        return out


@dataclass(frozen=True)
class HostTier:
    """A tier below the GPU's KV pool that an engine keeps a request's blocks in (vLLM's CPU offloading, LMCache's
    local CPU and disk backends, SGLang's HiCache host pool, TensorRT-LLM's secondary pool): its capacity per rank in
    tokens, bytes and its own units (chunks, pages, blocks), how many ranks of a replica hold one, the host memory
    the deployment needs for it, and how many requests' prefixes of the plan's context it keeps beside the GPU's.

    ``json`` is what the tier adds to capacity's JSON object at the top level (the engine's names: ``cpu_tokens``,
    ``lmcache_tokens``, ``hicache_host_tokens`` ...); ``lines`` its sentences under the capacity text."""

    name: str
    tokens_per_rank: int
    bytes_per_rank: int
    unit: str  # 'chunk', 'page', 'block'
    units_per_rank: int
    unit_tokens: int
    unit_bytes: int
    ranks: int
    host_bytes: int  # host memory (or disk, for a disk tier) the whole replica's tier takes
    requests: int  # requests whose context's tokens the tier holds at once, per replica
    medium: str = "host memory"  # or 'disk'
    lines: tuple[str, ...] = ()
    json: dict = field(default_factory=dict)
    source: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "medium": self.medium, "tokens_per_rank": self.tokens_per_rank,
                "bytes_per_rank": self.bytes_per_rank, "unit": self.unit, "units_per_rank": self.units_per_rank,
                "unit_tokens": self.unit_tokens, "unit_bytes": self.unit_bytes, "ranks": self.ranks,
                "host_bytes": self.host_bytes, "requests": self.requests, "source": self.source}


class Capability(str, enum.Enum):
    """What an engine offers besides planning and counting (``Engine.capabilities``)."""

    BLOCK_POOL = "block_pool"  # one shared block pool, laid out as tensors: verify allocates and fills it
    BUFFERS = "buffers"  # its own buffers for a batch (Engine.batch_pools): verify allocates and fills those
    TRANSFER = "transfer"  # what its prefill/decode connector moves (Engine.transfer_groups)


def _what(value) -> str:
    """What a wrong settings value is, in words: another engine's settings by that engine's name."""
    module = type(value).__module__.split(".")
    if len(module) > 2 and module[0] == "kvcalc" and module[1] == "engines":
        return f"{module[2]} settings"
    return type(value).__name__


class Engine(ABC):
    """One serving engine at one pinned version: its identity and declarations, its settings (:meth:`resolve`), its
    plan of one rank, its budget, and how it counts requests in a pool (:meth:`fit`, :meth:`max_context`, the
    workload's cost). An engine of one shared block pool takes that counting from :class:`BlockPoolMixin`."""

    name: ClassVar[str]
    version: ClassVar[str]
    summary: ClassVar[str]  # one line for `--engine` help and the engines list
    title: ClassVar[str]  # 'vLLM 0.33.0': how the output names it
    Settings: ClassVar[type]  # a frozen dataclass; every field has a default
    options: ClassVar[tuple[Option, ...]] = ()
    capabilities: ClassVar[frozenset] = frozenset()  # its Capability members
    logs: ClassVar[Any] = None  # a LogReader (kvcalc.engines.logs) when the engine's start-up log can be read
    budget_keys: ClassVar[tuple[str, ...]] = ()  # the names in Budget.json (null in JSON when the pool is given)
    Figures: ClassVar[type | None] = None  # its fit's EngineFigures class (None: the engine adds no figures)
    #: the cache kinds (kvcalc.specs classes, matched by exact type) the engine pages, as kvcalc models it; any other
    #: kind is refused in one line naming the engine and the kind (None: every kind, as the exact engine counts)
    cache_kinds: ClassVar[frozenset | None] = frozenset()
    #: names its plans use beside the neutral ones (pool.Layout, pool.GroupKind, a transfer's block / page / state
    #: slot / bytes), for the output schemas: {"layouts": (...), "kinds": (...), "units": (...)}
    plan_names: ClassVar[dict] = {}

    # ---- settings ---------------------------------------------------------------------------------------
    def settings(self, values: dict | None = None, *, gpu: "GPU | None" = None, model: "ModelSpec | None" = None):
        """The engine's settings from user values (None or missing: the engine's default, which may depend on
        ``gpu`` and ``model``). Unknown names are refused."""
        from collections.abc import Mapping
        known = {f.name for f in fields(self.Settings)}
        if values is not None and not isinstance(values, Mapping):
            raise KvcalcError(f"settings: the {self.name} engine takes its settings by name (a mapping) or as "
                              f"get_engine({quote(self.name)}).settings(...), got {_what(values)}", param="settings")
        given = {k: v for k, v in (values or {}).items() if v is not None}
        for k in given:
            if not isinstance(k, str):
                raise KvcalcError(f"settings: names must be strings, got {quote(k)}"[:200], param="settings")
        for k in given:
            if k not in known:
                raise KvcalcError(f"{k}: not a setting of the {self.name} engine", param=k)
        by_name = {o.name: o for o in self.options}
        for k, v in given.items():
            if k in by_name:
                by_name[k].check(v)
        return self.Settings(**self.defaults(given, gpu=gpu, model=model), **given)

    def defaults(self, given: dict, *, gpu=None, model=None) -> dict:
        """Defaults that depend on the device or the model, for settings the user did not give."""
        return {}

    def resolve(self, given=None, *, gpu: "GPU | None" = None, model: "ModelSpec | None" = None, parallel=None,
                context: int | None = None, arch: str | None = None, accept_long: bool = False):
        """The engine's settings for one deployment, in one call: ``given`` (the user's values by name, or settings
        already built), then the engine's defaults for ``gpu`` and ``model``, the ``parallel`` layout's stages,
        the device's architecture (``arch``, else the GPU's, where unset), the max_model_len ``context`` where the
        engine's settings depend on it, and with ``accept_long`` the override that lets a context past the derived
        maximum through (a log written with such a context was). Every command resolves settings here."""
        s = given if isinstance(given, self.Settings) else self.settings(given, gpu=gpu, model=model)
        if parallel is not None:
            s = self._with_parallel(s, parallel)
        s = self._with_arch(s, arch if arch is not None else (getattr(gpu, "arch", "") or None if gpu is not None
                                                              else None))
        if context is not None:
            s = self._at_context(s, context)
        if accept_long and self.context_override:
            s = replace(s, **{self.context_override: True})
        return s

    def _with_pp(self, settings, pp: int):
        """The settings with ``pp`` pipeline stages, where the engine's settings carry the stage count."""
        if "pp" in {f.name for f in fields(settings)} and settings.pp != pp:
            return replace(settings, pp=pp)
        return settings

    def _with_arch(self, settings, arch: str | None):
        """The settings on a device of architecture ``arch`` (a gpus.yaml arch), where the engine's settings carry
        one and it was left unset (None)."""
        if arch and "arch" in {f.name for f in fields(settings)} and settings.arch is None:
            return replace(settings, arch=arch)
        return settings

    def _at_context(self, settings, context: int):
        """The settings for max_model_len ``context``, where the engine's own depend on it (by default: as they
        are)."""
        return settings

    def _with_parallel(self, settings, parallel):
        """The settings for a parallel layout (by default: its pipeline stages)."""
        return self._with_pp(settings, parallel.pp)

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    # ---- plans ------------------------------------------------------------------------------------------
    def check_kinds(self, model: "ModelSpec", components=None) -> None:
        """Refuse a cache kind the engine does not list (:attr:`cache_kinds`, by exact type: a subclass is a kind of
        its own), before anything is planned: an engine never drops a cache it does not know."""
        if self.cache_kinds is None:
            return
        for name in (components if components is not None else model.components):
            comp = model.components[name]
            if type(comp) not in self.cache_kinds:
                raise self.refuse_kind(comp)

    def refuse_kind(self, comp) -> KvcalcError:
        """The one line refusing a cache kind the engine does not page."""
        return KvcalcError(f"{{{{engine}}}} {self.name}: cache kind {quote(comp.kind)} (component {comp.name}) is not "
                           f"modelled for {self.title}{self.kind_hint}")

    #: words after a refused kind's line (vLLM: where to go instead)
    kind_hint: ClassVar[str] = ""

    def weights_on_gpu(self, plan) -> tuple[int, int, str] | None:
        """(total, on the fullest GPU, basis) where the engine knows the weights' bytes itself (llama.cpp: a GGUF's
        tensors by layer and --n-gpu-layers); None: the model's declared parameter counts apply."""
        return None

    #: the settings of a deployment of one request (``estimate --engine``), where the engine's own default serves
    #: several at once (llama-server's four slots)
    single_request: ClassVar[dict] = {}

    def request_figures(self, plan) -> dict:
        """What ``estimate --engine`` adds for one request of ``plan``'s context beside the pool's unit figures (by
        default nothing): keys of the engine's own, e.g. llama.cpp's one-slot context and its log lines."""
        return {}

    def check_tp(self, model: "ModelSpec", tp: int) -> None:
        """Refuse a tensor-parallel size the engine cannot shard this model over."""
        check_kv_heads_split(model, tp)

    def default_precision(self, spec, settings=None) -> str | None:
        """The precision the engine stores ``spec`` in when none is asked (None: the model's default)."""
        return None

    def pp_stages(self, num_layers: int, pp: int) -> list[range]:
        """The layers of each pipeline stage."""
        return even_stages(num_layers, pp)

    @abstractmethod
    def plan(self, job: "PlanJob") -> "PoolPlan":
        """The pool plan of one rank."""

    def refusal(self, plan: "PoolPlan", pool: int) -> str:
        """The engine's message when one request does not fit in ``pool`` bytes."""
        best = self.max_context([plan], pool, 1, plan.context, plan.settings, None)
        est = f" Based on the available memory, the estimated maximum model length is {best}." if best > 0 else ""
        return (f"{plan.model}: one request at {plan.context:,} tokens needs {plan.per_request_bytes:,} B of KV "
                f"cache, more than the {pool:,} B pool.{est}")

    def explain(self, plan: "PoolPlan", num_blocks: int) -> list[str]:
        """Sentences on how the engine reserves and counts (printed under the capacity table)."""
        return []

    def log_line(self, plan: "PoolPlan", num_blocks: int) -> str | None:
        """The line the engine logs for this pool at start-up (None: it logs none kvcalc models)."""
        return None

    def running_limit(self, settings) -> tuple[str, int] | None:
        """(its name, requests) the scheduler runs at once per replica whatever the memory holds, where the
        engine keeps such a cap outside its fit (None: none, or the fit counts it)."""
        return None

    @abstractmethod
    def fit(self, plans: list, pool: int, settings, parallel) -> Fit:
        """Requests that fit in ``pool`` bytes per GPU on every pipeline stage's plan, as the engine counts them
        (refused in the engine's words where not one does)."""

    # ---- a workload: requests of T tokens, a shared prefix (kvcalc.workload) ----------------------------------
    @abstractmethod
    def workload_room(self, p, pool: int, fit) -> int:
        """The pool in the unit a request's cost is counted in (:meth:`workload_cost`)."""

    @abstractmethod
    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """A request of ``tokens`` (a :class:`kvcalc.workload.Cost`) in the engine's unit; ``shared`` prefix
        tokens are held once where the engine's prefix caching shares them."""

    # ---- storage ------------------------------------------------------------------------------------------
    def stored_formats(self, spec, precision, settings) -> dict[str, str]:
        """The storage format this engine keeps each cache component in, by component name (a format of
        ``kvcalc.formats``; a recurrent state's 'conv+ssm' dtypes, or one dtype for both): by default the
        precision's. The exact bytes a request holds, which every command sets beside the engine's figures, are
        counted in these formats (``kvcalc.plan.plan``)."""
        return {c: f for c in spec.components if (f := precision_format(spec, precision, c)) is not None}

    def format_hint(self, component: str, fmt: str) -> str:
        """Words after the note that the engine stores ``component`` as ``fmt``: the setting that selects another
        (default: none)."""
        return ""

    def transfer_groups(self, p, spec, tokens: int):
        """What the engine's prefill/decode connector moves for one request of ``tokens`` prompt tokens, as a
        :class:`kvcalc.transfer.TransferPlan` (one rank)."""
        raise KvcalcError(f"engine: kvcalc models no prefill/decode transfer for the {self.name} engine",
                          param="engine")

    @abstractmethod
    def max_context(self, plans: list, pool: int, concurrency: int, limit: int, settings, parallel) -> int:
        """The longest context (<= limit) at which ``concurrency`` requests fit in ``pool`` on every stage."""

    def batch_pools(self, plan, batch: int, model):
        """For an engine with :attr:`Capability.BUFFERS`: the buffers it allocates for ``batch`` requests
        at the plan's context, which verify allocates and fills (torch-free; see kvcalc/verify/tokenpools.py)."""
        raise KvcalcError(f"engine: the {self.name} engine declares no token pools for verify", param="engine")

    def gpus(self, parallel, settings) -> int:
        """GPUs the parallel layout takes (tp x pp x dp; an engine whose data parallelism shares the tensor
        ranks says otherwise)."""
        return parallel.gpus

    #: the engine's own name for the longest context it serves (the capacity and check-log headers say it)
    context_name: ClassVar[str] = "max_model_len"

    #: what the engine does with a context beyond the model's max_position_embeddings (the warning's words)
    long_context: ClassVar[str] = "computed anyway"

    def context_limit(self, spec) -> int | None:
        """The longest context the engine derives for ``spec`` (its default max_model_len); None: unknown."""
        return spec.max_context

    def default_context(self, spec, settings=None) -> int | None:
        """The context the engine runs ``spec`` at when none is given (by default its longest)."""
        return self.context_limit(spec)

    #: the setting that lets a context past the derived maximum through, as the engine's environment variable
    #: does (None: the engine refuses none)
    context_override: ClassVar[str | None] = None

    def context_refusal(self, spec, context: int, derived: int) -> str:
        """The engine's own words when it refuses ``context`` (only with a ``context_override``); check_context
        adds that the engine refuses to start and the longest context it takes."""
        raise NotImplementedError

    def check_context(self, spec, context: int, settings) -> None:
        """Refuse a context past the longest the engine derives, as it does at start-up, unless the override
        is set."""
        if self.context_override is None:
            return
        derived = self.context_limit(spec)
        if derived is not None and context > derived and not getattr(settings, self.context_override):
            raise KvcalcError(f"{self.context_refusal(spec, context, derived)} ({self.title} refuses to start; "
                              f"{spec.name}'s {{{{context}}}} may be at most {derived:,}.)", param="context")

    #: tokens the engine needs past a prompt within its context (the transfer's prompt is refused without them)
    prompt_room: ClassVar[int] = 0
    prompt_rule: ClassVar[str] = ""

    def check_prompt(self, spec, prompt_tokens: int, settings) -> None:
        """Refuse a prompt the engine rejects at its derived context: one needing ``prompt_room`` tokens past it
        (vLLM: an output token), unless the override lifts the derived limit. Settings of another engine are
        left to plan() to refuse."""
        if not self.prompt_room or (settings is not None and not isinstance(settings, self.Settings)):
            return
        derived = self.context_limit(spec)
        if derived is None or prompt_tokens + self.prompt_room <= derived or \
                (self.context_override and getattr(settings, self.context_override, False)):
            return
        raise KvcalcError(
            f"context: {self.title} rejects a prompt of {prompt_tokens:,} tokens for {spec.name}: {self.prompt_rule}, "
            f"so with the {derived:,} it derives the longest prompt it takes is {derived - self.prompt_room:,} "
            f"({{{{{self.context_override}}}}} lets the context past {derived:,})", param="context")

    def summary_line(self, cap) -> str:
        """One line on how this engine counted (the engines side-by-side table's reason)."""
        return ""

    def kv_cache_memory(self, plans: list, budget: Budget, free: int, settings) -> tuple[Budget, int]:
        """The KV pool's bytes per GPU from ``free`` (``budget.pool(weights, reserve)``), where the engine sizes it
        from its own plan as well (TensorRT-LLM: its profiling run's temporary cache, its fraction, max_tokens): the
        budget (with what it learned) and the pool. By default the budget and ``free`` as they are."""
        return budget, free

    def host_tiers(self, cap) -> tuple:
        """The tiers below the GPU pool the engine's settings turn on (:class:`HostTier`), for a capacity answer
        ``cap`` (its plan, fit and parallel layout); none by default. A tier the host cannot hold is refused in the
        engine's own words."""
        return ()

    default_reserve_bytes: ClassVar[int] = 4 * GIB
    reserve_note: ClassVar[str] = "activations, CUDA graphs"

    # ---- memory budget ----------------------------------------------------------------------------------
    def budget(self, settings, gpu: "GPU", model=None, parallel=None) -> Budget:
        """How one GPU's memory becomes what the engine may use (weights and reserve come off it)."""
        raise KvcalcError(f"engine: the {self.name} engine has no memory budget rule; give the KV pool directly "
                          "(kv_memory)", param="engine")


class BlockPoolMixin:
    """How an engine of one shared block pool counts (vLLM; TensorRT-LLM's pool alike): its plans are
    :class:`kvcalc.pool.BlockPoolPlan`; every stage takes the pool's block count, each must hold one request's
    blocks, a request's cost is its blocks, and a shared prefix's whole blocks in the full-attention groups are held
    once where prefix caching is on. Put before :class:`Engine` in the bases (``class E(BlockPoolMixin, Engine)``)."""

    capabilities = frozenset({Capability.BLOCK_POOL, Capability.TRANSFER})

    def refusal(self, plan: "PoolPlan", pool: int) -> str:
        """The engine's message when one request does not fit in ``pool`` bytes."""
        best = plan.max_context(pool)
        est = f" Based on the available memory, the estimated maximum model length is {best}." if best > 0 else ""
        return (f"{plan.model}: one request at {plan.context:,} tokens needs {plan.per_request_bytes:,} B of KV "
                f"cache, more than the {pool:,} B pool.{est}")

    def fit(self, plans: list, pool: int, settings, parallel) -> Fit:
        """Requests that fit in ``pool`` bytes per GPU: every pipeline stage's plan takes the smallest block
        count, and each must hold one request (else the engine's refusal)."""
        num_blocks = min(p.num_blocks(pool) for p in plans)
        fullest = max(plans, key=lambda p: p.bytes_per_block)
        for p in plans:
            if not p.fits_one(pool) or p.requests_that_fit(num_blocks) < 1:
                raise NoRoom(self.refusal(p, pool), "kv")
        return Fit(num_blocks, fullest.requests_that_fit(num_blocks), fullest.max_concurrency(num_blocks),
                   fullest.cache_tokens(num_blocks), tuple(self.explain(fullest, num_blocks)),
                   log_line=self.log_line(fullest, num_blocks))

    def workload_room(self, p, pool: int, fit) -> int:
        """The pool in the unit the cost is counted in: blocks (a paged engine), the null block(s) kept back."""
        return max(0, fit.num_blocks - p.null_blocks)

    def request_blocks(self, p, tokens: int) -> tuple[int, ...]:
        """The blocks of each group a request of ``tokens`` takes: as the planner counts its reservation at that
        length (full groups cdiv(T, block), window and state groups their fixed share)."""
        return p.blocks_at_context(tokens)

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """A request of ``tokens`` in blocks (:meth:`request_blocks`); with prefix caching the whole blocks of a
        ``shared`` prefix in the full-attention groups are held once."""
        from ..pool import GroupKind
        from ..workload import Cost

        on = getattr(settings, "prefix_caching", True)
        share = [shared // g.block_size if (on and g.kind is GroupKind.FULL) else 0 for g in p.groups]
        own = sum(max(b - s, 0) for b, s in zip(self.request_blocks(p, tokens), share))
        return Cost("blocks", max(own, 1), sum(share), {})

    def max_context(self, plans: list, pool: int, concurrency: int, limit: int, settings, parallel) -> int:
        """The longest context (<= limit) at which ``concurrency`` requests fit in ``pool`` on every stage."""
        return min(p.max_context(pool, concurrency, limit) for p in plans)


@dataclass(frozen=True)
class PlanJob:
    """Everything :meth:`Engine.plan` needs, gathered once by :func:`kvcalc.plan.plan`."""

    model: "ModelSpec"
    precision: Any  # the model's Precision
    context: int
    settings: Any
    mtp: bool
    tp: int
    stage_layers: frozenset[int]
    analytic: dict  # (layer, component) -> exact bytes this rank holds at ``context``
    analytic_at: Any  # ctx -> that dict at another context
    precision_asked: str | None = None  # the precision as asked (None: the model's default; an engine may differ)
    #: component -> the format the engine stores it in (Engine.stored_formats), the formats ``analytic`` counts
    stored_formats: dict = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.analytic.values())


# ---- shared rules --------------------------------------------------------------------------------------------
def precision_format(spec, precision, component: str) -> str | None:
    """The format the precision names for ``component`` (a recurrent state: 'conv+ssm', or one dtype for both; fixed
    state: its dtype); None where the precision maps no format to its role."""
    from ..specs import FixedState, RecurrentState

    comp = spec.components[component]
    fmt = precision.formats.get(comp.storage)
    if comp.per_token:
        return fmt.name if fmt is not None else None
    if isinstance(comp, RecurrentState):
        if comp.dtype is None and fmt is None:
            return None
        conv, ssm = comp.dtypes(fmt)
        return conv if conv == ssm else f"{conv}+{ssm}"
    if isinstance(comp, FixedState):
        return comp.dtype
    return None


def format_differences(spec, precision, stored: dict[str, str]) -> dict[str, str]:
    """The components an engine stores (``stored``: :meth:`Engine.stored_formats`) in another format than the
    precision names, with the engine's format."""
    return {c: f for c, f in stored.items() if f != precision_format(spec, precision, c)}


def format_notes(engine: "Engine", spec, precision, differs: dict[str, str]) -> list[str]:
    """One note for each cache the engine stores in another format than the precision names (``differs``:
    component -> the engine's format), with the bytes of an entry (of a layer's state) each way."""
    from ..estimate import PER_TOKEN, stored_component
    from ..formats import get_format

    notes = []
    for name, fmt in sorted(differs.items()):
        comp = spec.components[name]
        mine = precision_format(spec, precision, name)
        if fmt.removesuffix(PER_TOKEN) == mine:
            continue  # the same dtype, a row per token of the span (vLLM's V4 compressor state): no other format
        if comp.per_token:
            was = precision.formats[comp.storage]
            notes.append(f"{engine.title} stores {name} as {fmt} ({comp.entry_bytes(get_format(fmt)):,} B), not the "
                         f"precision's {mine} ({comp.entry_bytes(was):,} B){engine.format_hint(name, fmt)}")
            continue
        held, was = stored_component(comp, precision, {name: fmt}), stored_component(comp, precision, None)
        notes.append(f"{engine.title} stores {name}'s state as {_state_words(fmt)} ({held[0].fixed_bytes(held[1]):,} "
                     f"B a layer), not the precision's {_state_words(mine or '?')} ({was[0].fixed_bytes(was[1]):,} B)"
                     f"{engine.format_hint(name, fmt)}")
    return notes


def _state_words(fmt: str) -> str:
    """'bf16+fp32' -> 'bf16 conv + fp32 recurrent'; one dtype for both as it is."""
    conv, _, ssm = fmt.partition("+")
    return f"{conv} conv + {ssm} recurrent" if ssm else conv


def check_kv_heads_split(model: "ModelSpec", tp: int) -> None:
    """KV heads shard over TP ranks: the heads must divide by tp, or tp by the heads (then each rank holds a
    replica of one head; vLLM model_executor/layers/linear.py QKVParallelLinear, SGLang alike). Latent caches
    are replicated whole on every rank."""
    from ..specs import FullAttention

    for comp in model.components.values():
        if isinstance(comp, FullAttention):
            h = comp.kv_heads
            if (h >= tp and h % tp) or (h < tp and tp % h):
                raise KvcalcError(
                    f"tp: {tp} ranks cannot split the {h} KV heads of component {comp.name} (the heads must "
                    f"divide by tp, or tp by the heads)", param="tp"
                )


def even_stages(num_layers: int, pp: int, *, extra_to_last: bool = False) -> list[range]:
    """num_layers // pp per stage, the remainder added one layer each to the stages before the last (vLLM
    distributed/utils.py get_pp_indices: partitions[-2], partitions[-3], ...), or with ``extra_to_last`` to the
    last stages (SGLang distributed/utils.py get_pp_indices: "the last 'remainder' partitions")."""
    if pp > num_layers:
        raise KvcalcError(f"pp: {pp} pipeline stages for {num_layers} layers leaves a stage empty", param="pp")
    sizes = [num_layers // pp] * pp
    extra = num_layers % pp
    for i in (range(1, extra + 1) if extra_to_last else range(2, extra + 2)):
        sizes[-i] += 1
    out, start = [], 0
    for n in sizes:
        out.append(range(start, start + n))
        start += n
    return out


def fraction_budget(gpu: "GPU", fraction: float, option: str) -> Budget:
    """``ceil(total * fraction)``: what an engine that takes a fraction of the device's total memory asks for
    (vLLM v1/worker/gpu_worker.py determine_available_memory)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction) \
            or not 0 < fraction <= 1:
        raise KvcalcError(f"{option}: must be a fraction in (0, 1], got {quote(fraction)}", param=option)
    requested = math.ceil(gpu.memory_bytes * float(fraction))
    return Budget(requested, (BudgetStep(f"x {fraction:g} utilisation", requested, option),),
                  f"{fraction:g} x {gpu.memory_bytes / GIB:.2f} GiB", {option: fraction})
