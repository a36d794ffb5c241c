"""The TensorRT-LLM 1.1 engine profile (PyTorch backend): settings, the plan, the budget, the count, the words.

TensorRT-LLM sizes its paged KV cache after a profiling run (``_torch/pyexecutor/_util.py`` KvCacheCreator): it runs
dummy requests of ``max_num_tokens`` through a temporary cache, measures the peak memory (torch's peak plus what is
used outside torch: CUDA graphs, NCCL), and gives the cache ``int((total - peak + temporary) x fraction)`` bytes,
``max_tokens = bytes // kv size per token`` tokens, in blocks of ``tokens_per_block`` (rounded up in 1.1). kvcalc
cannot measure that peak: it takes the log's figure (``peak_memory_gib``), or weights + kvcalc's reserve + the
temporary cache (the temporary cache then cancels out: the pool is ``(total - weights - reserve) x fraction``), and
says which. A pool shorter than ``max_seq_len`` shortens it (``Adjusted max_seq_len to N``). The arithmetic, with its
sources, is :mod:`.sizing`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...errors import KvcalcError, NoRoom, quote
from ...specs import FullAttention, Mamba2State, MLALatent, SlidingWindowAttention
from ...units import GIB
from ..base import Budget, BudgetStep, BlockPoolMixin, Engine, Fit
from . import sizing as Z
from .plan import TrtFigures, secondary_tier, trt_fit, trt_plan
from .options import NAME, OPTIONS, SUMMARY, TITLE, VERSION
from . import logs as _logs

MAX_WINDOWS = 4096


@dataclass(frozen=True)
class Settings:
    """TensorRT-LLM's settings that change the plan (llm_args.py KvCacheConfig / BaseLlmArgs names)."""

    pp: int = 1
    free_gpu_memory_fraction: float = 0.9
    tokens_per_block: int = 32
    max_tokens: int | None = None
    max_batch_size: int = 2048
    max_num_tokens: int = 8192
    max_seq_len: int | None = None  # None: the context asked (kvcalc's max_model_len), set by _at_context
    host_cache_size: int | None = None
    max_gpu_total_bytes: int = 0
    max_attention_window: str | None = None
    peak_memory_gib: float | None = None
    device_memory_gib: float | None = None
    disable_overlap_scheduler: bool = False
    enable_block_reuse: bool = True
    max_seq_len_given: bool = False  # max_seq_len is the user's (--max-seq-len), not the context's
    arch: str | None = None  # the GPU's architecture (kvcalc/data/gpus.yaml); the cache does not depend on it here

    def __post_init__(self) -> None:
        self.windows()  # refuse a malformed window list where the settings are made

    def windows(self) -> tuple[int, ...] | None:
        """max_attention_window as sizes (None: every layer at max_seq_len)."""
        if self.max_attention_window is None:
            return None
        parts = [p.strip() for p in str(self.max_attention_window).split(",")]
        if not parts or len(parts) > MAX_WINDOWS or \
                not all(re.fullmatch(r"[0-9]{1,10}", p) and 0 < int(p) <= 1 << 32 for p in parts):
            raise KvcalcError(f"max_attention_window: window sizes in tokens, comma-separated (e.g. 128,131072), got "
                              f"{quote(self.max_attention_window)}", param="max_attention_window")
        return tuple(int(p) for p in parts)

    @property
    def fraction(self) -> float:
        """The fraction as TensorRT-LLM computes with it (a C++ float)."""
        return Z.f32(self.free_gpu_memory_fraction)


@dataclass(frozen=True)
class TrtBudget(Budget):
    """TensorRT-LLM's memory: the device's total as it reads it, less the profiling run's peak (given, or weights +
    reserve + the temporary cache), the temporary cache added back, times the fraction (KvCacheCreator
    _cal_max_memory). ``pool`` gives what is left before the fraction; :meth:`TrtllmEngine.kv_cache_memory` the rest."""

    device_bytes: int = 0
    fraction: float = 0.9
    peak_bytes: int | None = None
    device_given: bool = False
    temporary_bytes: int = 0  # the profiling run's cache (added back where the peak is given)
    state_bytes: int = 0  # Mamba state of max_batch_size slots, where the peak is modelled
    available_bytes: int = 0  # int((total - peak + temporary) x fraction)
    max_tokens_bytes: int | None = None  # max_tokens x kv size per token, where max_tokens caps it

    def pool(self, weights: int, reserve: int) -> int:
        if self.peak_bytes is not None and self.peak_bytes < weights:
            raise NoRoom(f"{{{{engine}}}} {NAME}: the peak given, {self.peak_bytes / GIB:.2f} GiB ({{{{peak_memory_gib}}}}), is "
                         f"less than the weights a GPU holds, {weights / GIB:.2f} GiB: a peak measured on another "
                         "deployment (the profiling peak holds the weights)", "weights")
        free = self.device_bytes - (self.peak_bytes if self.peak_bytes is not None else weights + reserve)
        if free <= 0:
            used = (f"the peak {self.peak_bytes / GIB:.2f} GiB ({{{{peak_memory_gib}}}})" if self.peak_bytes is not None
                    else f"weights {weights / GIB:.2f} GiB + reserve {reserve / GIB:.2f} GiB")
            raise NoRoom(f"{{{{engine}}}} {NAME}: {used} leave none of the device's {self.device_bytes / GIB:.2f} GiB "
                         f"for the KV cache (more GPUs, a larger tp, or a smaller reserve)", "weights")
        return free

    def table_rows(self, weights: int, reserve: int, pool: int) -> list:
        device = "given ({{device_memory_gib}})" if self.device_given else "the GPU's total (torch.cuda.mem_get_info)"
        rows = [("device memory", self.device_bytes, device)]
        if self.peak_bytes is not None:
            rows += [("- peak (profiling run)", self.peak_bytes, "given ({{peak_memory_gib}}): torch's peak + outside "
                                                                 "torch"),
                     ("+ temporary cache", self.temporary_bytes, "the profiling run's, freed before the pool is made")]
        else:
            rows += [("- weights", weights, "the model's, split by the layout"),
                     ("- reserve", reserve, "activations and memory outside torch (CUDA graphs, NCCL) ({{reserve}}); "
                                            "the profiling run's temporary cache cancels out")]
            if self.state_bytes:
                rows.append(("- Mamba state", self.state_bytes, "max_batch_size slots of every Mamba layer "
                                                                "(MambaCacheManager), allocated before the profiling run"))
        rows.append((f"x {self.fraction} fraction", self.available_bytes,
                     "free_gpu_memory_fraction ({{free_gpu_memory_fraction}}), a float32"))
        rows.append(("= KV cache memory", pool, f"{pool:,} B (TensorRT-LLM's \"available KV cache memory\")"))
        if self.max_tokens_bytes is not None and self.max_tokens_bytes < self.available_bytes:
            rows.append(("max_tokens cap", self.max_tokens_bytes, "max_tokens x kv size per token ({{max_tokens}})"))
        return rows


def _dtype(fmt: str) -> str:
    if fmt not in Z.DTYPE_OF_FORMAT:
        raise KvcalcError(f"{{{{engine}}}} {NAME}: {TITLE} stores the KV cache as the model's dtype (bf16 / fp16), fp8 "
                          f"or nvfp4, not {quote(fmt)}; choose one of those ({{{{precision}}}})", param="precision")
    return Z.DTYPE_OF_FORMAT[fmt]


def _model_dtype(spec) -> str:
    """The model's dtype as TensorRT-LLM keeps Mamba state in it (conv: the model dtype; ssm: mamba_ssm_cache_dtype
    auto, the model dtype): the default precision's 16-bit KV format, else bf16."""
    base = spec.precisions.get(spec.default_precision)
    fmt = base.formats.get("kv") if base is not None else None
    return fmt.name if fmt is not None and fmt.name in ("bf16", "fp16") else "bf16"


class TrtllmEngine(BlockPoolMixin, Engine):
    name = NAME
    version = VERSION
    title = TITLE
    summary = SUMMARY
    Settings = Settings
    options = OPTIONS
    Figures = TrtFigures
    budget_keys = ("free_gpu_memory_fraction",)
    logs = _logs.READER
    capabilities = frozenset()
    cache_kinds = frozenset({FullAttention, SlidingWindowAttention, MLALatent, Mamba2State})
    kind_hint = ("; TensorRT-LLM 1.1 pages attention (MHA / GQA, sliding windows, MLA) and keeps Mamba-2 state in this "
                 "profile: other recurrent states, DeepSeek's sparse indexer and V4's compressed caches are not "
                 "modelled")
    default_reserve_bytes = 4 * GIB
    reserve_note = "activations and memory outside torch (CUDA graphs, NCCL)"
    context_name = "max_seq_len"
    #: estimate --engine: block reuse changes nothing one request reserves; off, a Mamba hybrid (whose manager asserts
    #: it off) plans as well
    single_request = {"enable_block_reuse": False}
    long_context = "TensorRT-LLM sets max_seq_len to the model's and rejects longer requests"

    # ---- settings ---------------------------------------------------------------------------------------
    def settings(self, values=None, *, gpu=None, model=None):
        given = dict(values or {}) if not isinstance(values, Settings) else values
        if isinstance(given, dict):
            given.pop("max_seq_len_given", None)  # kvcalc's own: set from max_seq_len, never given
            if given.get("max_seq_len") is not None:
                given["max_seq_len_given"] = True
        return super().settings(given, gpu=gpu, model=model)

    def _at_context(self, settings, context: int):
        """-c is max_seq_len unless --max-seq-len gives it."""
        if settings.max_seq_len_given:
            return settings
        return replace(settings, max_seq_len=context)

    def pp_stages(self, num_layers: int, pp: int) -> list[range]:
        """_torch's Mapping.pp_layers: torch.tensor_split, the first num_layers % pp stages one layer more."""
        if pp > num_layers:
            raise KvcalcError(f"pp: {pp} pipeline stages for {num_layers} layers leaves a stage empty", param="pp")
        out, start = [], 0
        for i in range(pp):
            n = num_layers // pp + (1 if i < num_layers % pp else 0)
            out.append(range(start, start + n))
            start += n
        return out

    def context_limit(self, spec) -> int | None:
        """model_engine.py _infer_max_seq_len_from_config (:func:`.sizing.inferred_max_seq_len`)."""
        return Z.inferred_max_seq_len(spec)

    def default_context(self, spec, settings=None) -> int | None:
        if settings is not None and settings.max_seq_len is not None:
            return settings.max_seq_len
        return self.context_limit(spec)

    def check_context(self, spec, context: int, settings) -> None:
        """model_engine.py _init_max_seq_len: a max_seq_len past the model's is set to the model's (the plan says
        so), and a request longer than max_seq_len is rejected."""
        limit = self.context_limit(spec)
        if limit is not None and context > limit:
            raise KvcalcError(f"{TITLE}: Specified max_seq_len={context} is larger than what the model can support "
                              f"({limit}). Setting max_seq_len to {limit}: a request of {context:,} tokens is not "
                              f"served ({spec.name}'s {{{{context}}}} may be at most {limit:,})", param="context")
        seq = settings.max_seq_len if limit is None or settings.max_seq_len is None else \
            min(settings.max_seq_len, limit)
        if seq is not None and context > seq:
            raise KvcalcError(f"{TITLE} rejects a request of {context:,} tokens: max_seq_len is {seq:,} "
                              "({{max_seq_len}})", param="context")

    def running_limit(self, settings) -> tuple[str, int]:
        """The scheduler runs at most max_batch_size requests at once."""
        return "max_batch_size", settings.max_batch_size

    def default_precision(self, spec, settings=None) -> str | None:
        return None

    # ---- the plan ----------------------------------------------------------------------------------------
    def stored_formats(self, spec, precision, settings) -> dict[str, str]:
        """The cache dtype for every attention cache: the precision's, as TensorRT-LLM stores it (fp8 MLA as plain
        fp8 rows of kv_lora_rank + rope: no FlashMLA record)."""
        out = super().stored_formats(spec, precision, settings)
        model = _model_dtype(spec)
        return {c: model if isinstance(spec.components[c], Mamba2State) else Z.FORMAT_OF_DTYPE[_dtype(f)]
                for c, f in out.items()}

    def plan(self, job):
        return trt_plan(job)

    # ---- the budget -------------------------------------------------------------------------------------
    def budget(self, settings, gpu, model=None, parallel=None):
        given = settings.device_memory_gib is not None
        device = int(settings.device_memory_gib * GIB) if given else gpu.memory_bytes
        peak = None if settings.peak_memory_gib is None else int(settings.peak_memory_gib * GIB)
        f = settings.fraction
        formula = (f"{f} x ({device / GIB:.2f} GiB - peak {peak / GIB:.2f} GiB + temporary)" if peak is not None
                   else f"{f} x ({device / GIB:.2f} GiB - weights - reserve)")
        step = BudgetStep(f"x {f:g} free_gpu_memory_fraction of (total - profiling peak)", device,
                          "free_gpu_memory_fraction")
        return TrtBudget(device, (step,), formula, {"free_gpu_memory_fraction": settings.free_gpu_memory_fraction},
                         device_bytes=device, fraction=f, peak_bytes=peak, device_given=given)

    def kv_cache_memory(self, plans, budget, free, settings):
        """KvCacheCreator: ``int((total - peak + temporary) x fraction)``; with the peak modelled as weights + reserve
        + temporary, ``int((total - weights - reserve) x fraction)``. max_tokens caps the tokens the count takes
        (``min(memory // kv size, max_tokens)``, which is the memory capped at max_tokens x kv size)."""
        p = max(plans, key=lambda q: q.creator_bytes_per_token)
        temporary = p.estimation_bytes if budget.peak_bytes is not None else 0
        if temporary > budget.peak_bytes if budget.peak_bytes is not None else False:
            raise NoRoom(f"{{{{engine}}}} {NAME}: the profiling run's temporary cache, {p.estimation_tokens:,} tokens = "
                         f"{temporary / GIB:.2f} GiB, does not fit under the peak given, {budget.peak_bytes / GIB:.2f} "
                         "GiB ({{peak_memory_gib}}): the peak was measured with other settings ({{max_num_tokens}}, "
                         "{{max_seq_len}})", "weights")
        # the Mamba state's slots are allocated before the profiling run: inside a peak given; beside the weights
        # and reserve where the peak is modelled
        state = 0 if budget.peak_bytes is not None else max(q.state_bytes for q in plans) * settings.max_batch_size
        if state and state >= free:
            raise NoRoom(f"{{{{engine}}}} {NAME}: the Mamba state of max_batch_size {settings.max_batch_size:,} requests, "
                         f"{state / GIB:.2f} GiB a GPU (MambaCacheManager allocates every slot), leaves no memory for "
                         "the KV cache; a smaller {{max_batch_size}}", "kv")
        available = Z.available_memory(free - state, 0, temporary, budget.fraction)
        cap = None if settings.max_tokens is None else settings.max_tokens * p.creator_bytes_per_token
        return replace(budget, temporary_bytes=p.estimation_bytes, available_bytes=available, state_bytes=state,
                       max_tokens_bytes=cap), available

    # ---- requests in the pool ---------------------------------------------------------------------------
    def fit(self, plans, pool: int, settings, parallel) -> Fit:
        return trt_fit(plans, pool, settings)

    def max_context(self, plans, pool, concurrency, limit, settings, parallel) -> int:
        return min(p.max_context(pool, concurrency, limit) for p in plans)

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """A request of ``tokens`` in blocks; with block reuse (on by default) a shared prefix's whole blocks are
        held once."""
        from ...workload import Cost

        if p.windows:
            raise KvcalcError(f"{{{{engine}}}} {NAME}: a workload over {TITLE}'s per-window pools "
                              "(max_attention_window) is not modelled; ask for the context's requests without one",
                              param="request_tokens")
        share = shared // p.tokens_per_block if settings.enable_block_reuse else 0
        own = max(p.blocks_at(tokens) - share, 1)
        return Cost("blocks", own, share, {"max_batch_size": settings.max_batch_size})

    def summary_line(self, cap) -> str:
        f = cap.fit.figures
        return (f"{f.blocks:,} blocks of {f.tokens_per_block} tokens x {f.pool_bytes_per_token:,} B; "
                f"max_seq_len {f.max_seq_len:,}")

    def host_tiers(self, cap) -> tuple:
        tier = secondary_tier(cap)
        return () if tier is None else (tier,)


ENGINE = TrtllmEngine()
