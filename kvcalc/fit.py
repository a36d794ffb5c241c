"""`kvcalc fit`: every way to serve a model, as each engine plans it. For each GPU type, engine and precision, the
smallest deployment (GPU count, then tp x pp x dp, and expert parallelism for a mixture of experts) whose requests
hold the asked concurrency at the context, with why each smaller one fails; or, with no concurrency asked, the most
requests each deployment holds. Every row is one :func:`kvcalc.capacity.capacity` call, so it can be re-run as
``kvcalc capacity`` with the same settings (the presentation prints that command).

The search shares the pool plans between GPUs (:func:`kvcalc.capacity.plans_kept`): a plan depends on the model,
context, precision, engine settings and tp / pp, and only the budget on the GPU. Torch-free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from .capacity import Parallel, capacity, plans_kept
from .config import ModelSpec, as_model
from .errors import KvcalcError, NoRoom, quote

#: GPU counts tried: powers of two up to the largest asked
MAX_GPUS = 64
DEFAULT_ENGINES = ("vllm", "sglang")


@dataclass(frozen=True)
class Layout:
    gpus: int
    tp: int
    pp: int
    dp: int
    ep: bool

    @property
    def parallel(self) -> Parallel:
        return Parallel(self.tp, self.pp, self.dp, self.ep)



@dataclass(frozen=True)
class Deployment:
    """One deployment that serves the workload (or, with no concurrency asked, any that starts)."""

    gpu: str
    layout: Layout
    engine: str
    precision: str
    context: int
    total_requests: int
    requests_per_replica: int
    kv_pool_bytes_per_gpu: int
    weights_bytes_per_gpu: int | None
    spare: int | None  # requests served beyond the concurrency asked
    #: the scheduler's cap on requests running at once per replica (vLLM's max_num_seqs), where the engine keeps
    #: one outside its memory count (Engine.running_limit); None: none
    running_limit: int | None = None
    #: the tiers below the GPU the engine's options turn on (capacity's HostTier: its name, tokens per rank, the
    #: requests' prefixes it keeps beside the GPU's)
    tiers: tuple = ()

    @property
    def served(self) -> int:
        """Requests running at once over the deployment: what memory holds, capped per replica by the scheduler."""
        per = self.requests_per_replica if self.running_limit is None else \
            min(self.requests_per_replica, self.running_limit)
        return per * self.layout.dp

    def to_json(self) -> dict:
        lay = self.layout
        return {"gpu": self.gpu, "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep,
                "engine": self.engine, "precision": self.precision, "context_tokens": self.context,
                "total_requests": self.total_requests, "requests_per_replica": self.requests_per_replica,
                "running_limit_per_replica": self.running_limit, "served_requests": self.served,
                "spare_requests": self.spare, "kv_pool_bytes_per_gpu": self.kv_pool_bytes_per_gpu,
                "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
                "host_tiers": [{"name": t.name, "tokens_per_rank": t.tokens_per_rank, "bytes_per_rank": t.bytes_per_rank,
                                "host_bytes": t.host_bytes, "requests": t.requests} for t in self.tiers]}


@dataclass(frozen=True)
class Miss:
    """A smaller deployment that does not serve the workload, and why: ``weights`` (weights and reserve leave no
    KV memory), ``kv`` (the pool holds fewer requests), ``running`` (the pool holds them but the scheduler's cap
    runs fewer at once), ``layout`` (the engine refuses the layout), ``engine`` (it refuses otherwise)."""

    gpu: str
    layout: Layout
    engine: str
    precision: str
    why: str
    detail: str

    def to_json(self) -> dict:
        lay = self.layout
        return {"gpu": self.gpu, "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep,
                "engine": self.engine, "precision": self.precision, "why": self.why, "detail": self.detail}


@dataclass(frozen=True)
class FitResult:
    model: str
    context: int
    concurrency: int | None
    deployments: tuple[Deployment, ...]  # ranked: fewest GPUs, then most spare requests (or most requests)
    misses: tuple[Miss, ...]
    searched: int
    seconds: float
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict:
        return {"model": self.model, "context_tokens": self.context, "concurrency": self.concurrency,
                "deployments": [d.to_json() for d in self.deployments], "misses": [m.to_json() for m in self.misses],
                "searched": self.searched, "seconds": round(self.seconds, 3), "notes": list(self.notes),
                "basis": BASIS}


BASIS = ("each row is kvcalc capacity for that GPU, layout, engine and precision (the engine's own budget, the "
         "model's weights split by the layout, the engine's default reserve); GPU counts are powers of two, tp x pp "
         "x dp in powers of two, expert parallelism tried for a mixture of experts; ranked by GPUs, then spare "
         "requests")


def layouts(n: int, moe: bool) -> list[Layout]:
    """Every tp x pp x dp of ``n`` GPUs (powers of two), with and without expert parallelism for a mixture of
    experts (where experts span more than one rank)."""
    out = []
    tp = 1
    while tp <= n:
        pp = 1
        while tp * pp <= n:
            dp = n // (tp * pp)
            if tp * pp * dp == n:
                out.append(Layout(n, tp, pp, dp, False))
                if moe and tp * dp > 1:
                    out.append(Layout(n, tp, pp, dp, True))
            pp *= 2
        tp *= 2
    return out


#: engines fit searches: those whose capacity answer is the requests a deployment holds at once (llama.cpp's is its
#: slot count, set by --parallel, not by memory)
FIT_ENGINES = ("vllm", "sglang", "trtllm", "exact")


def _settings(settings, engs) -> dict:
    """Engine options by name (None values dropped); one that no engine of the search takes is refused, naming
    the engine whose option it is."""
    from collections.abc import Mapping

    from .engines import engine_names, engine_options

    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise KvcalcError(f"settings: engine options by name (a mapping), got {type(settings).__name__}",
                          param="settings")
    given = {k: v for k, v in settings.items() if v is not None}
    for k in given:
        if not any(k == o.name for e in engs for o in e.options):
            owner = next((n for n in engine_names() for o in engine_options(n) if o.name == k), None)
            whose = f"a setting of the {owner} engine, which this search does not plan on" if owner else \
                "not a setting of any engine"
            raise KvcalcError(f"{k}: {whose} (engines searched: {', '.join(e.name for e in engs)})"[:300], param=k)
    for k in MEASURED:
        if k in given:
            raise KvcalcError(f"{k}: a figure measured on one deployment; fit plans every GPU and layout, each with "
                              "its own (give it to capacity for the deployment it was measured on)", param=k)
    for e in engs:  # each engine's values checked once, before the search (a bad one is refused, not a miss)
        e.settings({k: v for k, v in given.items() if k in {o.name for o in e.options}})
    return given


#: engine settings that state what one deployment measured (TensorRT-LLM's profiling peak, the device's memory as it
#: read it): fit, which plans every deployment, does not take them
MEASURED = ("peak_memory_gib", "device_memory_gib")


def _checked(spec, engines, precisions, weights_bytes=None):
    """The engines and precisions of a search, each checked; the model must have weights (or be given them)."""
    from .engines import get_engine

    engs = [get_engine(e) for e in _names(engines, "engines")]
    for eng in engs:
        if eng.name not in FIT_ENGINES:
            raise KvcalcError(f"engine: fit searches {', '.join(FIT_ENGINES)}; {eng.name} serves as many requests as "
                              "its {{parallel}} slots, not as memory allows (use capacity with {{parallel}})",
                              param="engine")
    precs = list(spec.precisions) if precisions is None else [spec.precision(p).name
                                                              for p in _names(precisions, "precisions")]
    if spec.weights is None and getattr(spec, "gguf_weights", None) is None and weights_bytes is None:
        why = spec.notes.removeprefix("no weights: ") if spec.notes.startswith("no weights:") else \
            "the config declares none"
        raise KvcalcError(f"model: fit needs {spec.name}'s weights to size a deployment ({why}); give them "
                          "({{weights}})", param="model")
    return engs, precs


def _counts(max_gpus: int) -> list[int]:
    out, n = [], 1
    while n <= max_gpus:
        out.append(n)
        n *= 2
    return out


def _why(e: KvcalcError) -> str:
    """A refusal's kind: the engine's own reason where memory cannot hold the deployment (errors.NoRoom), else the
    layout (a refusal naming tp / pp / dp / ep) or the engine."""
    if isinstance(e, NoRoom):
        return e.reason
    if e.param in ("tp", "pp", "dp", "ep", "parallel") or "tp" in str(e).split(":")[0]:
        return "layout"
    return "engine"


def fit(model: ModelSpec | str, context: int, concurrency: int | None = None, *, gpus=None,
        engines=DEFAULT_ENGINES, precisions=None, max_gpus: int = 8, settings: dict | None = None,
        count: int | None = None, request_tokens=None, shared_prefix_tokens: int = 0,
        weights_bytes: int | None = None, reserve_bytes: int | None = None) -> FitResult:
    """Every deployment of ``model`` at ``context`` tokens that holds ``concurrency`` requests: for each GPU in
    ``gpus`` (catalogue names; None: every one), engine and precision (None: every precision the model declares),
    the smallest by GPU count (layouts up to ``max_gpus``), ranked, with the smaller ones' failures; without
    ``concurrency``, every deployment that starts, ranked by GPUs and requests held. ``count``: only fleets of
    exactly that many GPUs (a power of two). ``settings``: engine options by name, each applied to the engines that
    take it (one no engine searched takes is refused). ``request_tokens`` (one length or a distribution) and
    ``shared_prefix_tokens``: a workload, as capacity takes it (the requests held are then the workload's).
    ``weights_bytes`` (all ranks together) and ``reserve_bytes`` (per GPU): as capacity takes them, for a model
    whose config declares no weights or a reserve of one's own.

    Llama-3.1-8B at 8k tokens holds 1 GiB a request (32 layers x 8 KV heads x 128 x 2 x 2 B x 8,192); one H100's
    pool after 14.96 GiB of weights and 4 GiB of reserve holds 54, so 32 requests need one GPU:

    >>> r = fit("llama-3.1-8b", 8192, 32, gpus=["h100-sxm"], engines=["vllm"], precisions=["bf16"])
    >>> d = r.deployments[0]
    >>> (d.gpu, d.layout.gpus, d.engine, d.total_requests)
    ('h100-sxm', 1, 'vllm', 54)
    """
    from . import args
    from .hardware import catalogue, get_gpu

    t0 = time.perf_counter()
    spec = as_model(model)
    args.integer(context, "context", 1, 1 << 40)
    args.integer(concurrency, "concurrency", 1, 1 << 30, optional=True)
    args.integer(max_gpus, "max_gpus", 1, MAX_GPUS)
    args.integer(count, "count", 1, MAX_GPUS, optional=True)
    if count is not None and count & (count - 1):
        raise KvcalcError(f"count: fleets of a power of two GPUs are searched, got {count}", param="count")
    gpu_names = list(catalogue()) if gpus is None else [get_gpu(g).key for g in _names(gpus, "gpus")]
    engs, precs = _checked(spec, engines, precisions, weights_bytes)
    moe = spec.weights is not None and bool(spec.weights.experts)
    given = _settings(settings, engs)
    found: list[Deployment] = []
    misses: list[Miss] = []
    searched = 0
    notes: list[str] = []
    with plans_kept():
        for gpu in gpu_names:
            for eng in engs:
                own = {k: v for k, v in given.items() if k in {o.name for o in eng.options}}
                for prec in precs:
                    best, tried, n_tried = _search(spec, context, concurrency, gpu, eng, own, prec,
                                                   [count] if count is not None else _counts(max_gpus), moe,
                                                   {"request_tokens": request_tokens,
                                                    "shared_prefix_tokens": shared_prefix_tokens,
                                                    "weights_bytes": weights_bytes, "reserve_bytes": reserve_bytes})
                    searched += n_tried
                    found += best
                    smallest = min((d.layout.gpus for d in best), default=None)
                    misses += [m for m in tried if smallest is None or m.layout.gpus < smallest]
    key = (lambda d: (d.layout.gpus, -(d.spare or 0), d.layout.pp, d.layout.tp)) if concurrency is not None else \
        (lambda d: (d.layout.gpus, -d.served, d.layout.pp, d.layout.tp))
    found.sort(key=key)
    if not found:
        notes.append("no deployment searched serves it" + (f" (up to {max_gpus} GPUs)" if concurrency else "")
                      + (f"; e.g. {misses[0].detail}" if misses else ""))
    return FitResult(spec.name, context, concurrency, tuple(found), tuple(misses), searched,
                     time.perf_counter() - t0, tuple(notes))


@dataclass(frozen=True)
class Longest:
    """The reverse question: on a fleet, the longest context at which ``concurrency`` requests fit (``per_replica``
    of them on each of its dp replicas)."""

    gpu: str
    layout: Layout
    engine: str
    precision: str
    context: int  # 0: none fits
    per_replica: int = 0

    def to_json(self) -> dict:
        lay = self.layout
        return {"gpu": self.gpu, "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep,
                "engine": self.engine, "precision": self.precision, "context_tokens": self.context,
                "requests_per_replica": self.per_replica}


def longest(model: ModelSpec | str, concurrency: int, *, gpus, count: int, engines=DEFAULT_ENGINES,
            precisions=None, settings: dict | None = None, weights_bytes: int | None = None,
            reserve_bytes: int | None = None) -> list[Longest]:
    """For each GPU in ``gpus``, layout of ``count`` GPUs, engine and precision: the longest context (up to the
    model's) at which ``concurrency`` requests fit over the fleet, ``ceil(concurrency / dp)`` on each replica
    (:func:`kvcalc.capacity.max_context`), longest first; where none fits, the refusals (as :class:`Miss`).
    ``settings``, ``weights_bytes``, ``reserve_bytes``: as :func:`fit` takes them."""
    from . import args
    from .capacity import max_context
    from .hardware import get_gpu

    spec = as_model(model)
    args.integer(concurrency, "concurrency", 1, 1 << 30)
    args.integer(count, "count", 1, MAX_GPUS)
    if count & (count - 1):
        raise KvcalcError(f"count: fleets of a power of two GPUs are searched, got {count}", param="count")
    gpu_names = [get_gpu(g).key for g in _names(gpus, "gpus")]
    engs, precs = _checked(spec, engines, precisions, weights_bytes)
    moe = spec.weights is not None and bool(spec.weights.experts)
    given = _settings(settings, engs)
    out, refused = [], []
    with plans_kept():
        for gpu in gpu_names:
            for eng in engs:
                own = {k: v for k, v in given.items() if k in {o.name for o in eng.options}}
                for prec in precs:
                    for lay in layouts(count, moe):
                        each = -(-concurrency // lay.dp)
                        cap_args = {"model": spec, "precision": prec, "engine": eng.name, "parallel": lay.parallel,
                                    "gpu": gpu, "settings": own or None,
                                    "weights_bytes": weights_bytes, "reserve_bytes": reserve_bytes}
                        try:
                            best, cap = max_context(cap_args, each, eng.context_limit(spec) or spec.max_context)
                        except KvcalcError as e:
                            refused.append(Miss(gpu, lay, eng.name, prec, _why(e), str(e)))
                            continue
                        running = eng.running_limit(cap.plan.settings) if cap is not None else None
                        if running and each > running[1]:
                            refused.append(Miss(gpu, lay, eng.name, prec, "running",
                                                f"{each:,} request(s) a replica, but {eng.name} runs at most "
                                                f"{running[1]:,} at once ({running[0]})"))
                            continue
                        if best:
                            out.append(Longest(gpu, lay, eng.name, prec, best, each))
                        else:
                            refused.append(Miss(gpu, lay, eng.name, prec, "kv", f"{each:,} request(s) a replica fit "
                                                                                "at no context"))
    out.sort(key=lambda x: (-x.context, x.layout.pp, x.layout.tp))
    return out, refused


def _search(spec, context, concurrency, gpu, eng, own, prec, counts, moe, workload) -> tuple[list, list, int]:
    """One GPU, engine and precision: the deployments that serve it at the smallest GPU count that does (every one
    without a concurrency), the layouts that did not, and how many were planned."""
    best: list[Deployment] = []
    tried: list[Miss] = []
    n = 0
    for count in counts:
        for lay in layouts(count, moe):
            n += 1
            try:
                cap = capacity(spec, context, precision=prec, engine=eng.name,
                               settings=own or None, parallel=lay.parallel, gpu=gpu, **workload)
            except KvcalcError as e:
                tried.append(Miss(gpu, lay, eng.name, prec, _why(e), str(e)))
                continue
            total = cap.total_requests
            running = eng.running_limit(cap.plan.settings)
            d = Deployment(gpu, lay, eng.name, prec, context, total, cap.requests_per_replica,
                           cap.kv_pool_bytes_per_gpu, cap.weights_bytes_per_gpu, None,
                           running[1] if running else None, cap.tiers)
            if concurrency is not None and d.served < concurrency:
                if total >= concurrency:  # memory holds them; the scheduler's cap runs fewer at once
                    tried.append(Miss(gpu, lay, eng.name, prec, "running",
                                      f"holds {total:,} request(s) of {context:,} tokens but runs at most "
                                      f"{running[1]:,} a replica ({running[0]}): {d.served:,}, not {concurrency:,}"))
                else:
                    tried.append(Miss(gpu, lay, eng.name, prec, "kv",
                                      f"holds {total:,} request(s) of {context:,} tokens, not {concurrency:,}"))
                continue
            best.append(replace(d, spare=None if concurrency is None else d.served - concurrency))
        if best and concurrency is not None:
            break  # the smallest GPU count that serves it; larger ones are not needed
    return best, tried, n


def _names(value, what: str) -> list[str]:
    """A list of names, or one comma-separated string of them."""
    if isinstance(value, str):
        value = [x.strip() for x in value.split(",") if x.strip()]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(x, str) for x in value):
        raise KvcalcError(f"{what}: a list of names (or one comma-separated string), got {quote(value)}", param=what)
    return list(dict.fromkeys(value))


def best_per(result: FitResult) -> list[Deployment]:
    """The first (smallest, most spare) deployment of each GPU, engine and precision, in the ranking's order."""
    seen, out = set(), []
    for d in result.deployments:
        k = (d.gpu, d.engine, d.precision)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out
