"""GPUs + weights + parallel layout + pool plan -> how many requests fit, as the engine counts them.

Per GPU, the engine says what it asks of the device (``Engine.budget``: vLLM's is a fraction of the total,
v1/worker/gpu_worker.py determine_available_memory); the cache gets that less what
the model needs besides the cache (weights, activation peak, CUDA graphs, workspace). kvcalc takes the
weights from the model config (or ``weights_bytes``) sharded by the parallel layout, and an explicit,
printed reserve for everything else; a pool given directly (``kv_memory``, like vLLM's
``--kv-cache-memory-bytes``) replaces all of that.

Parallelism (vLLM 0.33): tensor parallelism splits full-attention KV heads over the ranks (replicated when
tp exceeds them, config/model.py get_num_kv_heads) and replicates latent (MLA, DeepSeek V4) caches whole on
every rank; pipeline parallelism splits the layers (distributed/utils.py get_pp_indices) and every stage
takes the smallest block count (kv_cache_planning.py get_kv_cache_configs); data parallelism runs
independent replicas. Expert parallelism shards the routed experts over tp x dp ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .config import ModelSpec, as_model
from .engines import DEFAULT_ENGINE, get_engine
from .engines.base import Budget, Engine, Fit
from .errors import KvcalcError, NoRoom, quote
from .hardware import GPU, resolve_gpu
from .plan import MAX_RANKS, PoolPlan, plan
from .units import GIB
MAX_PARALLEL = MAX_RANKS  # one bound for every parallel size


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def check(self) -> None:
        for name in ("tp", "pp", "dp"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PARALLEL:
                raise KvcalcError(f"{name}: must be an integer from 1 to {MAX_PARALLEL}, got {quote(v)}", param=name)


@dataclass(frozen=True)
class Capacity:
    """The capacity answer: per GPU unless named total."""

    model: ModelSpec
    plan: PoolPlan  # the fullest pipeline stage's plan (one rank)
    parallel: Parallel
    gpu: GPU | None
    budget: Budget | None  # what the engine asks of each GPU (None: the pool was given)
    weights_bytes_per_gpu: int | None
    weights_total_bytes: int | None
    weights_source: str
    reserve_bytes: int | None
    kv_pool_bytes_per_gpu: int
    pool_given: bool  # the pool was given directly (kv_memory)
    fit: Fit  # how the engine counts requests in that pool
    notes: tuple[str, ...] = field(default=())
    tiers: tuple = field(default=())  # the engine's tiers below the GPU pool (engines.base.HostTier)

    @property
    def num_blocks(self) -> int:
        """Per rank, the smallest over pipeline stages (vLLM: null block included)."""
        return self.fit.num_blocks

    @property
    def engine(self) -> Engine:
        return get_engine(self.plan.engine)

    @property
    def gpus(self) -> int:
        """GPUs the layout takes, as the engine counts them (SGLang's DP attention shares the tp GPUs)."""
        return self.engine.gpus(self.parallel, self.plan.settings)

    @property
    def requested_bytes(self) -> int | None:
        return None if self.budget is None else self.budget.requested_bytes

    @property
    def max_concurrency(self) -> float:
        """The engine's "Maximum concurrency for L tokens per request" for one replica."""
        return self.fit.max_concurrency

    @property
    def requests_per_replica(self) -> int:
        return self.fit.requests_per_replica

    @property
    def total_requests(self) -> int:
        return self.requests_per_replica * self.parallel.dp

    @property
    def cache_tokens(self) -> int:
        """Tokens the cache holds for one replica (vLLM's "GPU KV cache size: N tokens")."""
        return self.fit.cache_tokens

    @property
    def stages_uneven(self) -> bool:
        """The pipeline's stages hold different layer counts (as the engine splits them)."""
        stages = self.engine.pp_stages(len(self.model.layers), self.parallel.pp) if self.parallel.pp > 1 else []
        return len({len(r) for r in stages}) > 1

    @property
    def log_line(self) -> str | None:
        """The line the engine logs at start-up for this pool (None where it logs none kvcalc models)."""
        return self.fit.log_line


def _bytes(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 1 << 60:
        raise KvcalcError(f"{name}: must be a whole number of bytes from 0 to 2^60, got {quote(value)}", param=name)
    return value


def capacity(
    model: ModelSpec | str,
    context: int,
    *,
    precision: str | None = None,
    engine: str = DEFAULT_ENGINE,
    settings=None,
    parallel: Parallel = Parallel(),
    gpu: str | GPU | None = None,
    kv_memory: int | None = None,
    weights_bytes: int | None = None,
    reserve_bytes: int | None = None,
    mtp: bool = False,
    request_tokens=None,
    shared_prefix_tokens: int = 0,
) -> Capacity:
    """How many requests of ``context`` tokens fit, per GPU and in total. Either ``gpu`` (a catalogue
    name: the pool is the engine's budget - weights - reserve) or ``kv_memory`` (the pool of each GPU,
    given directly) must be given. ``settings``: the engine's (``get_engine(engine).settings(...)``)."""
    from . import args

    spec = as_model(model)
    eng = get_engine(engine)
    args.instance(parallel, "parallel", Parallel, "a kvcalc.capacity.Parallel")
    args.flag(mtp, "mtp")
    args.instance(gpu, "gpu", (str, GPU), "a GPU name or a kvcalc.hardware.GPU", optional=True)
    args.name(precision, "precision", optional=True)
    parallel.check()
    dev = resolve_gpu(gpu)
    # the engine's defaults for this GPU and model (vLLM's batch limits, SGLang's chunk), as the CLI builds them
    settings = eng.resolve(settings, gpu=dev, model=spec, parallel=parallel, context=context)
    notes: list[str] = []
    if dev is None and kv_memory is None:
        raise KvcalcError("gpu: name a GPU, or give the KV pool of each GPU directly ({{kv_memory}})", param="gpu")

    stages = eng.pp_stages(len(spec.layers), parallel.pp) if parallel.pp > 1 else [range(len(spec.layers))]
    plans = _stage_plans(spec, context, precision, eng, settings, mtp, parallel)

    budget = w_gpu = w_total = reserve = None
    w_source = ""
    if kv_memory is not None:
        pool = _bytes(kv_memory, "kv_memory")
        if dev is not None:
            notes.append("the KV pool was given directly: device memory, weights and reserve are not used")
    else:
        budget = eng.budget(settings, dev, model=spec, parallel=parallel)
        reserve = _bytes(eng.default_reserve_bytes if reserve_bytes is None else reserve_bytes, "reserve")
        own = eng.weights_on_gpu(plans[0]) if weights_bytes is None else None
        w_total, w_gpu, w_source = own or _weights_per_gpu(spec, parallel, stages, weights_bytes)
        pool = budget.pool(w_gpu, reserve)
        if pool <= 0:
            raise NoRoom(
                f"{spec.name}: does not fit on {dev.name}: {budget.formula} = "
                f"{budget.requested_bytes / GIB:.2f} GiB per GPU, weights {w_gpu / GIB:.2f} GiB + reserve "
                f"{reserve / GIB:.2f} GiB leave no KV cache memory (more GPUs, a larger tp, or a smaller reserve)",
                "weights")
        budget, pool = eng.kv_cache_memory(plans, budget, pool, settings)
    fit = eng.fit(plans, pool, settings, parallel)
    if request_tokens is not None or shared_prefix_tokens:
        from .workload import apply

        lengths = _lengths(request_tokens, context)
        args.integer(shared_prefix_tokens, "shared_prefix_tokens", 0, 1 << 40)
        fit = apply(eng, plans, pool, settings, parallel, fit, lengths, shared_prefix_tokens, context)
    fullest = max(plans, key=lambda p: p.unit_bytes)  # the stage whose unit is widest (every stage's, alike)
    cap = Capacity(spec, fullest, parallel, dev, budget, w_gpu, w_total, w_source, reserve, pool,
                   kv_memory is not None, fit, tuple(notes) + fullest.notes + fit.notes)
    tiers = eng.host_tiers(cap)
    return replace(cap, tiers=tuple(tiers)) if tiers else cap


def _lengths(request_tokens, context: int) -> list[int]:
    """The requests' lengths: one token count, or a sequence of them (a distribution; a
    :class:`kvcalc.workload.Lengths` read from a file keeps each one's line); default the context. A length
    longer than the context is refused by :func:`kvcalc.workload.apply`, naming it."""
    from . import args

    if request_tokens is None:
        return [context]
    if isinstance(request_tokens, (list, tuple)):
        if not request_tokens or len(request_tokens) > 1_000_000:
            raise KvcalcError("request_tokens: give 1 to 1,000,000 lengths", param="request_tokens")
        from .workload import where

        checked = [args.integer(t, where(request_tokens, i)[0], 1, 1 << 40) for i, t in enumerate(request_tokens)]
        return request_tokens if hasattr(request_tokens, "where") else checked  # a file's lengths keep their lines
    return [args.integer(request_tokens, "request_tokens", 1, 1 << 40)]


#: plans kept while a search runs (:func:`plans_kept`): (model, context, precision, engine, settings, mtp, tp, pp) ->
#: the stages' plans; None outside a search
_KEPT: dict | None = None


def _stage_plans(spec, context, precision, engine, settings, mtp, par: Parallel) -> list[PoolPlan]:
    """One rank's plan for every pipeline stage (one plan without pipeline parallelism); inside
    :func:`plans_kept`, each is made once."""
    key = None
    if _KEPT is not None:
        key = (id(spec), context, precision, engine.name, settings, mtp, par.tp, par.pp)
        if key in _KEPT:
            kept = _KEPT[key][1]
            if isinstance(kept, KvcalcError):
                raise kept
            return kept
    try:
        out = [plan(spec, context, precision=precision, engine=engine.name, settings=settings, mtp=mtp, tp=par.tp,
                    stage=i if par.pp > 1 else None) for i in range(par.pp)]
    except KvcalcError as e:
        if key is not None:
            _KEPT[key] = (spec, e)  # a refusal is the same each time it is asked
        raise
    if key is not None:
        _KEPT[key] = (spec, out)  # the model held with its plans: its id is not reused while the search runs
    return out


class plans_kept:
    """``with plans_kept():`` a search's capacity calls make each pool plan once (a plan depends on the model,
    context, precision, engine settings and tp / pp, not on the GPU's memory)."""

    def __enter__(self):
        global _KEPT
        from . import plan as P

        self._outer = (_KEPT, P._KEPT)
        if _KEPT is None:
            _KEPT, P._KEPT = {}, {}
        return self

    def __exit__(self, *exc):
        global _KEPT
        from . import plan as P

        _KEPT, P._KEPT = self._outer
        return False


def _weights_per_gpu(spec: ModelSpec, par: Parallel, stages, override: int | None) -> tuple[int, int, str]:
    """Weights on the fullest GPU: dense weights split over tp (and over pp by layer share), routed experts
    also over dp when expert parallelism is on."""
    share = max(len(s) for s in stages) / len(spec.layers)
    if override is not None:
        total = _bytes(override, "weights")
        per = math.ceil(total * share / par.tp)
        return total, per, "given ({{weights}}), split evenly over tp and pp"
    if spec.weights is None:
        why = f" ({spec.notes.removeprefix('no weights: ')[:160]})" if spec.notes.startswith("no weights:") else ""
        raise KvcalcError(
            f"weights: {spec.name} declares no weights{why}; give them ({{{{weights}}}}) or the KV pool directly "
            "({{kv_memory}})", param="weights"
        )
    w = spec.weights
    experts_split = par.tp * (par.dp if par.ep else 1)
    per = math.ceil(w.dense_bytes * share / par.tp) + math.ceil(w.expert_bytes * share / experts_split)
    how = "dense / tp" + (", experts / (tp x dp)" if par.ep and w.expert_bytes else (", experts / tp" if w.expert_bytes else ""))
    return w.total_bytes, per, f"{how}; {w.source}" if w.source else how


def max_context(cap_args: dict, concurrency: int, limit: int) -> tuple[int, Capacity | None]:
    """The longest max_model_len (<= limit) at which ``concurrency`` requests fit, and the capacity there."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise KvcalcError(f"concurrency: must be a positive integer, got {quote(concurrency)}", param="concurrency")
    probe = capacity(context=1, **cap_args)  # the pool, where it does not depend on the context (checked below)
    pool = probe.kv_pool_bytes_per_gpu
    spec = probe.model
    par = probe.parallel
    eng = get_engine(cap_args.get("engine", DEFAULT_ENGINE))
    # the settings as capacity() builds them, at the search's limit (the probe's are shaped by its 1-token context:
    # vLLM caps a defaulted batch budget at max_num_seqs x max_model_len)
    given = cap_args.get("settings")
    settings = eng.resolve(given, gpu=probe.gpu, model=spec, parallel=par, context=limit)
    plans = _stage_plans(spec, limit, cap_args.get("precision"), eng, settings, cap_args.get("mtp", False), par)
    best = eng.max_context(plans, pool, concurrency, limit, settings, par)
    if best < 1:
        return 0, None
    cap = capacity(context=best, **cap_args)
    if cap.kv_pool_bytes_per_gpu != pool:
        # the pool depends on the context (TensorRT-LLM's profiling run, with its peak given, is sized by
        # max_seq_len): search on capacity itself, whose count never grows with the context
        from .pool import longest_context

        def holds(ctx: int) -> bool:
            try:
                return capacity(context=ctx, **cap_args).requests_per_replica >= concurrency
            except NoRoom:
                return False

        best = longest_context(holds, limit)
        return (best, capacity(context=best, **cap_args)) if best else (0, None)
    return best, cap


# ---- several engines side by side, and the reverse question ---------------------------------------------------
@dataclass(frozen=True)
class Refused:
    """An engine that refuses the deployment: its column says so; ``error`` is its refusal."""

    engine: Engine
    error: KvcalcError


@dataclass(frozen=True)
class Reverse:
    """The longest context (<= ``limit``) at which ``concurrency`` requests fit (``--concurrency``), and the
    scheduler's cap that memory alone does not see (``running``: its name and requests), where it binds."""

    concurrency: int
    context: int
    limit: int
    running: tuple[str, int] | None = None


@dataclass(frozen=True)
class SideBySide:
    """One deployment on one or more engines: each engine's answer (or its refusal), each engine's longest context
    where the reverse question was asked, and warnings (a context past what an engine derives)."""

    answers: tuple  # Capacity or Refused, in the engines' order
    reverses: tuple  # Reverse or None, per answer
    warnings: tuple[str, ...] = ()


def default_context(engines: list, model, longest: bool = False, settings: dict | None = None, gpu=None) -> int:
    """The engines' own default max_model_len (the longest context each derives, or vLLM's LongRoPE default; with
    ``longest``, for the reverse search, the longest each takes; the shortest side by side); 1M where none is.
    ``settings[name]``: an engine's settings where its default depends on them (llama.cpp's --ctx-size, ollama's
    num_ctx and the GPU's memory)."""
    settings = settings or {}

    def own(e):
        if longest:
            return e.context_limit(model)
        given = settings.get(e.name)
        if given is None and gpu is None:
            return e.default_context(model)
        return e.default_context(model, e.resolve(given, gpu=resolve_gpu(gpu), model=model))

    limits = [n for n in (own(e) for e in engines) if n is not None]
    return min(limits) if limits else 1 << 20


def compare(model, engines: list, *, settings: dict, context: int | None = None, concurrency: int | None = None,
            **kwargs) -> SideBySide:
    """:func:`capacity` (or with ``concurrency`` the longest context at which that many requests fit) on each of
    ``engines`` (names or engines), each with its own ``settings[name]`` (the engine's settings; missing: its
    defaults); ``kwargs`` are capacity's (precision, parallel, gpu, kv_memory, weights_bytes, reserve_bytes, mtp,
    request_tokens, shared_prefix_tokens). With one engine its refusal is raised; with several it becomes that
    engine's :class:`Refused` column."""
    spec = as_model(model)
    engs = [get_engine(e) for e in engines]
    ctx = context if context is not None else default_context(engs, spec, longest=concurrency is not None,
                                                              settings=settings, gpu=kwargs.get("gpu"))
    answers, reverses = [], []
    for eng in engs:
        args = dict(kwargs, model=spec, engine=eng.name, settings=settings.get(eng.name))
        try:
            if concurrency is None:
                answers.append(capacity(context=ctx, **args))
                reverses.append(None)
                continue
            best, cap = max_context(args, concurrency, ctx)
            if cap is None:
                raise KvcalcError(f"concurrency: {concurrency:,} requests do not fit at any context on this pool",
                                  param="concurrency")
            running = eng.running_limit(cap.plan.settings)
            answers.append(cap)
            reverses.append(Reverse(concurrency, best, ctx, running if running and concurrency > running[1] else None))
        except KvcalcError as exc:
            if len(engs) == 1:
                raise
            answers.append(Refused(eng, exc))
            reverses.append(None)
    warnings = []
    for eng, cap in zip(engs, answers):
        limit = None if isinstance(cap, Refused) else eng.context_limit(spec)
        if limit is not None and cap.plan.context > limit:
            warnings.append(f"{spec.name}: max_model_len {cap.plan.context:,} exceeds the {limit:,} {eng.name} derives "
                            f"for the model; {eng.long_context}")
    return SideBySide(tuple(answers), tuple(reverses), tuple(warnings))
