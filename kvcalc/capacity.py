"""GPUs + weights + parallel layout + pool plan -> how many requests fit, as the engine counts them.

Per GPU, vLLM's memory budget (v1/worker/gpu_worker.py determine_available_memory) is
``ceil(total * gpu_memory_utilization)`` less what the model needs besides the cache (weights, activation
peak, CUDA graphs, workspace), or exactly ``--kv-cache-memory-bytes`` when given. kvcalc takes the weights
from the model config (or ``weights_bytes``) sharded by the parallel layout, and an explicit, printed
reserve for everything else; a pool given directly (``kv_memory``) replaces all of that.

Parallelism (vLLM 0.33): tensor parallelism splits full-attention KV heads over the ranks (replicated when
tp exceeds them, config/model.py get_num_kv_heads) and replicates latent (MLA, DeepSeek V4) caches whole on
every rank; pipeline parallelism splits the layers (distributed/utils.py get_pp_indices) and every stage
takes the smallest block count (kv_cache_planning.py get_kv_cache_configs); data parallelism runs
independent replicas. Expert parallelism shards the routed experts over tp x dp ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import ModelSpec, as_model
from .engines import vllm as V
from .errors import KvcalcError
from .hardware import GPU, get_gpu
from .plan import PoolPlan, plan

GIB = 1 << 30
#: activations, workspace and CUDA graphs per GPU unless told otherwise: kvcalc's assumption, printed
DEFAULT_RESERVE_BYTES = 4 * GIB
MAX_PARALLEL = 4096


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
                raise KvcalcError(f"{name}: must be an integer from 1 to {MAX_PARALLEL}, got {v!r}", param=name)


@dataclass(frozen=True)
class Capacity:
    model: ModelSpec
    plan: PoolPlan  # the fullest pipeline stage's plan (one rank)
    parallel: Parallel
    gpu: GPU | None
    gpu_memory_utilization: float | None
    requested_bytes: int | None  # ceil(total * utilisation) per GPU
    weights_bytes_per_gpu: int | None
    weights_total_bytes: int | None
    weights_source: str
    reserve_bytes: int | None
    kv_pool_bytes_per_gpu: int
    pool_given: bool  # the pool was given directly (--kv-memory)
    num_blocks: int  # per rank, the smallest over pipeline stages (vLLM: null block included)
    notes: tuple[str, ...] = field(default=())

    @property
    def max_concurrency(self) -> float:
        """vLLM's "Maximum concurrency for L tokens per request" for one replica."""
        return self.plan.max_concurrency(self.num_blocks)

    @property
    def requests_per_replica(self) -> int:
        return self.plan.requests_that_fit(self.num_blocks)

    @property
    def total_requests(self) -> int:
        return self.requests_per_replica * self.parallel.dp

    @property
    def cache_tokens(self) -> int:
        """vLLM's "GPU KV cache size: N tokens" for one replica."""
        return self.plan.cache_tokens(self.num_blocks)

    @property
    def log_line(self) -> str:
        return (f"GPU KV cache size: {self.cache_tokens:,} tokens, Maximum concurrency for {self.plan.context:,} "
                f"tokens per request: {self.max_concurrency:.2f}x")


def _fraction(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value <= 1:
        raise KvcalcError(f"{name}: must be a fraction in (0, 1], got {value!r}", param=name)
    return float(value)


def _bytes(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 1 << 60:
        raise KvcalcError(f"{name}: must be a whole number of bytes from 0 to 2^60, got {value!r}", param=name)
    return value


def capacity(
    model: ModelSpec | str,
    context: int,
    *,
    precision: str | None = None,
    engine: str = "vllm",
    settings: V.Settings | None = None,
    parallel: Parallel = Parallel(),
    gpu: str | GPU | None = None,
    gpu_memory_utilization: float = V.DEFAULT_GPU_MEMORY_UTILIZATION,
    kv_memory: int | None = None,
    weights_bytes: int | None = None,
    reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    mtp: bool = False,
) -> Capacity:
    """How many requests of ``context`` tokens fit, per GPU and in total. Either ``gpu`` (a catalogue
    name: the pool is utilisation x memory - weights - reserve) or ``kv_memory`` (the pool of each GPU,
    given directly, like vLLM's --kv-cache-memory-bytes) must be given."""
    spec = as_model(model)
    parallel.check()
    settings = settings or V.Settings()
    if settings.pp != parallel.pp:
        settings = V.Settings(**{**settings.__dict__, "pp": parallel.pp})
    notes: list[str] = []
    dev = get_gpu(gpu) if isinstance(gpu, str) else gpu
    if dev is None and kv_memory is None:
        raise KvcalcError("gpu: name a GPU or give the KV pool of each GPU directly (kv_memory)", param="gpu")

    stages = V.pp_stages(len(spec.layers), parallel.pp) if parallel.pp > 1 else [range(len(spec.layers))]
    plans = _stage_plans(spec, context, precision, engine, settings, mtp, parallel)

    requested = w_gpu = w_total = reserve = None
    w_source = ""
    if kv_memory is not None:
        pool = _bytes(kv_memory, "kv_memory")
        if dev is not None:
            notes.append("the KV pool was given directly: device memory, weights and reserve are not used")
    else:
        util = _fraction(gpu_memory_utilization, "gpu_memory_utilization")
        requested = math.ceil(dev.memory_bytes * util)
        reserve = _bytes(reserve_bytes, "reserve")
        w_total, w_gpu, w_source = _weights_per_gpu(spec, parallel, stages, weights_bytes)
        pool = requested - w_gpu - reserve
        if pool <= 0:
            raise KvcalcError(
                f"{spec.name}: does not fit on {dev.name}: {util:g} x {dev.memory_bytes / GIB:.2f} GiB = "
                f"{requested / GIB:.2f} GiB per GPU, weights {w_gpu / GIB:.2f} GiB + reserve {reserve / GIB:.2f} "
                f"GiB leave no KV cache memory (more GPUs, a larger tp, or a smaller reserve)"
            )
    num_blocks = min(p.num_blocks(pool) for p in plans)
    fullest = max(plans, key=lambda p: p.bytes_per_block)
    for p in plans:  # every rank checks its own stage (vLLM: each worker, then the smallest block count)
        if not p.fits_one(pool) or p.requests_that_fit(num_blocks) < 1:
            raise KvcalcError(_refusal(p, pool))
    return Capacity(spec, fullest, parallel, dev, None if kv_memory is not None else gpu_memory_utilization,
                    requested, w_gpu, w_total, w_source, reserve, pool, kv_memory is not None, num_blocks,
                    tuple(notes) + fullest.notes)


def _stage_plans(spec, context, precision, engine, settings, mtp, par: Parallel) -> list[PoolPlan]:
    """One rank's plan for every pipeline stage (one plan without pipeline parallelism)."""
    return [plan(spec, context, precision=precision, engine=engine, settings=settings, mtp=mtp, tp=par.tp,
                 stage=i if par.pp > 1 else None) for i in range(par.pp)]


def _weights_per_gpu(spec: ModelSpec, par: Parallel, stages, override: int | None) -> tuple[int, int, str]:
    """Weights on the fullest GPU: dense weights split over tp (and over pp by layer share), routed experts
    also over dp when expert parallelism is on."""
    share = max(len(s) for s in stages) / len(spec.layers)
    if override is not None:
        total = _bytes(override, "weights")
        per = math.ceil(total * share / par.tp)
        return total, per, "given (--weights-gib), split evenly over tp and pp"
    if spec.weights is None:
        raise KvcalcError(
            f"weights: {spec.name} declares no weights; give them (--weights-gib) or the KV pool directly "
            "(--kv-memory)", param="weights"
        )
    w = spec.weights
    experts_split = par.tp * (par.dp if par.ep else 1)
    per = math.ceil(w.dense_bytes * share / par.tp) + math.ceil(w.expert_bytes * share / experts_split)
    how = "dense / tp" + (", experts / (tp x dp)" if par.ep and w.expert_bytes else (", experts / tp" if w.expert_bytes else ""))
    return w.total_bytes, per, f"{how}; {w.source}" if w.source else how


def _refusal(p: PoolPlan, pool: int) -> str:
    """vLLM's start-up refusal (kv_cache_planning.py _check_enough_kv_cache_memory), with kvcalc's reasons."""
    usable = pool - p.null_blocks * p.bytes_per_block
    best = p.max_context(pool)
    est = f" Based on the available memory, the estimated maximum model length is {best}." if best > 0 else ""
    return (
        f"{p.model}: to serve one request at max_model_len {p.context:,}, {V.format_gib(p.per_request_bytes)} GiB "
        f"({p.per_request_bytes:,} B = {p.blocks_per_request:,} blocks x {p.bytes_per_block:,} B) of KV cache is "
        f"needed, more than the {V.format_gib(max(usable, 0))} GiB available ({usable:,} B after the null block)."
        f"{est} vLLM {p.engine_version} refuses to start here too."
        if p.engine == "vllm" else
        f"{p.model}: one request at {p.context:,} tokens needs {p.per_request_bytes:,} B of KV cache, more than "
        f"the {pool:,} B pool.{est}"
    )


def max_context(cap_args: dict, concurrency: int, limit: int) -> tuple[int, Capacity | None]:
    """The longest max_model_len (<= limit) at which ``concurrency`` requests fit, and the capacity there."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise KvcalcError(f"concurrency: must be a positive integer, got {concurrency!r}", param="concurrency")
    probe = capacity(context=1, **cap_args)  # the pool does not depend on the context
    pool = probe.kv_pool_bytes_per_gpu
    spec = probe.model
    par = probe.parallel
    settings = V.Settings(**{**(cap_args.get("settings") or V.Settings()).__dict__, "pp": par.pp})
    plans = _stage_plans(spec, limit, cap_args.get("precision"), cap_args.get("engine", "vllm"), settings,
                         cap_args.get("mtp", False), par)
    best = min(p.max_context(pool, concurrency, limit) for p in plans)
    if best < 1:
        return 0, None
    return best, capacity(context=best, **cap_args)
