"""The vLLM 0.33 engine profile: settings, the plan, the budget, the refusal and the words (see the package
docstring for the rules, module by module)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...pool import GroupKind
from ..base import BlockPoolMixin, Engine, EngineFigures, even_stages, fraction_budget
from .defaults import (NAME, VERSION, Settings, default_gdn_prefill_backend,
                       default_max_num_batched_tokens, default_max_num_seqs, format_gib)
from .options import OPTIONS, SUMMARY, flag
from .planner import vllm_plan
from . import logs as _logs


def pp_stages(num_layers: int, pp: int) -> list[range]:
    """distributed/utils.py get_pp_indices: num_layers // pp per stage, the remainder added one layer each
    to the stages before the last (partitions[-2], partitions[-3], ...)."""
    return even_stages(num_layers, pp)


#: the groups whose blocks per request are capped whatever the context: (kind, name, the explanation's name for
#: them, the tokens they hold)
_CAPPED = ((GroupKind.WINDOW, "window", "Window and state", "window - 1"),
           (GroupKind.CHUNK, "chunked", "Chunked", "chunk"))


@dataclass(frozen=True)
class VllmFigures(EngineFigures):
    """vLLM's fit beside the memory's count: the scheduler's cap (max_num_seqs) and the requests it runs at once
    of those that fit (v1/core/sched/scheduler.py max_num_running_reqs)."""

    max_num_seqs: int
    running_per_replica: int

    def to_json(self) -> dict:
        return {"max_num_seqs": self.max_num_seqs, "running_per_replica": self.running_per_replica}

    @classmethod
    def schema(cls) -> dict:
        from ...jsonschema import COUNT, POS

        props = {"max_num_seqs": POS, "running_per_replica": COUNT}
        return {"properties": props, "required": list(props)}


class VllmEngine(BlockPoolMixin, Engine):
    name = NAME
    version = VERSION
    title = f"vLLM {VERSION}"
    summary = SUMMARY
    Settings = Settings
    budget_keys = ("gpu_memory_utilization",)
    Figures = VllmFigures
    logs = _logs.READER
    @property
    def cache_kinds(self):  # specs.py _RULES: the kinds vLLM pages, by exact type
        from .specs import CACHE_KINDS

        return CACHE_KINDS

    def refuse_kind(self, comp):
        from .specs import refuse_kind

        return refuse_kind(comp)
    options = OPTIONS

    def defaults(self, given, *, gpu=None, model=None) -> dict:
        out = {}
        mem, name = (gpu.memory_bytes, gpu.name) if gpu else (None, "")
        if "max_num_batched_tokens" not in given:
            out["max_num_batched_tokens"] = default_max_num_batched_tokens(mem, name)
            out["batched_tokens_defaulted"] = True
        if "max_num_seqs" not in given:  # unset: capped by the token budget, as vLLM defaults it
            budget = given.get("max_num_batched_tokens", out.get("max_num_batched_tokens"))
            out["max_num_seqs"] = min(default_max_num_seqs(mem, name), budget)
        if "arch" not in given and gpu is not None and gpu.arch:
            out["arch"] = gpu.arch
        if "gdn_prefill_backend" not in given:
            out["gdn_prefill_backend"] = default_gdn_prefill_backend(gpu, model)
        return out

    def pp_stages(self, num_layers: int, pp: int) -> list[range]:
        return pp_stages(num_layers, pp)

    def default_precision(self, spec, settings=None) -> str | None:
        """fp8 where vLLM's kv-cache dtype auto stores it whatever the config's default: DeepSeek V4 (its
        attention backends keep the fp8_ds_mla layout: models/deepseek_v4/attention.py turns auto into
        fp8_ds_mla) and DeepSeek DSA on compute capability 12 (FLASHINFER_MLA_SPARSE_SM120's auto)."""
        from ...specs import CompressedMLA, IndexerCache

        if "fp8" not in spec.precisions:
            return None
        comps = spec.components.values()
        if any(isinstance(c, CompressedMLA) for c in comps):
            return "fp8"
        if getattr(settings, "sm_major", None) == 12 and any(isinstance(c, IndexerCache) for c in comps):
            return "fp8"
        return None

    def plan(self, job):
        return vllm_plan(job)

    def stored_formats(self, spec, precision, settings) -> dict[str, str]:
        """The precision's formats, but the DSA indexer keys in vLLM's indexer dtype and a DSA latent in its
        backend's row (specs.py stored_format)."""
        from .specs import stored_formats

        return {**super().stored_formats(spec, precision, settings), **stored_formats(spec, precision, settings)}

    def format_hint(self, component: str, fmt: str) -> str:
        return f" ({flag('indexer_dtype')} mxfp4 selects 68 B)" if fmt == "fp8_indexer" else ""

    def budget(self, settings, gpu, model=None, parallel=None):
        return fraction_budget(gpu, settings.gpu_memory_utilization, "gpu_memory_utilization")

    def refusal(self, p, pool: int) -> str:
        """kv_cache_planning.py _check_enough_kv_cache_memory, with kvcalc's reasons."""
        usable = pool - p.null_blocks * p.bytes_per_block
        best = p.max_context(pool)
        est = f" Based on the available memory, the estimated maximum model length is {best}." if best > 0 else ""
        return (
            f"{p.model}: to serve one request at max_model_len {p.context:,}, {format_gib(p.per_request_bytes)} GiB "
            f"({p.per_request_bytes:,} B = {p.blocks_per_request:,} blocks x {p.bytes_per_block:,} B) of KV cache is "
            f"needed, more than the {format_gib(max(usable, 0))} GiB available ({usable:,} B after the null block)."
            f"{est} vLLM {p.engine_version} refuses to start here too."
        )

    def log_line(self, p, num_blocks: int) -> str:
        """v1/core/kv_cache_utils.py update_kv_cache_capacity."""
        return (f"GPU KV cache size: {p.cache_tokens(num_blocks):,} tokens, Maximum concurrency for {p.context:,} "
                f"tokens per request: {p.max_concurrency(num_blocks):.2f}x")

    long_context = "planned as vLLM plans it with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"

    def context_limit(self, spec) -> int | None:
        from .defaults import derived_max_model_len

        return derived_max_model_len(spec)

    def default_context(self, spec, settings=None) -> int | None:
        """config/model.py _get_and_verify_max_len: with no max_model_len given, a LongRoPE model defaults to
        original_max_position_embeddings ("to avoid performance degradation for shorter sequences"), the
        derived maximum staying its limit."""
        if spec.rope_scaling is not None and spec.rope_scaling.type == "longrope" \
                and spec.original_max_position_embeddings is not None:
            return spec.original_max_position_embeddings
        return self.context_limit(spec)

    context_override = "allow_long_max_model_len"
    #: v1/engine/input_processor.py InputProcessor._validate_prompt_len: a generating model's prompt plus at least
    #: one output token must fit in max_model_len
    prompt_room = 1
    prompt_rule = "the prompt plus at least one output token must fit in max_model_len"

    def context_refusal(self, spec, context: int, derived: int) -> str:
        """config/model.py _get_and_verify_max_len: refused unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."""
        from .defaults import derived_len_and_key

        key = derived_len_and_key(spec)[1] or "max_position_embeddings"
        mml = spec.context_fields.get("model_max_length")
        return (f"{{{{engine}}}} vllm: User-specified max_model_len ({context}) is greater than the derived max_model_len "
                f"({key}={float(derived)} or model_max_length={mml} in model's config.json). To allow "
                f"overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
                f"({{{{allow_long_max_model_len}}}} here).")

    def summary_line(self, cap) -> str:
        p = cap.plan
        s = p.settings
        in_flight = p.settings_json['max_in_flight_tokens']
        admits = [f"{name} groups admit {what} + {in_flight:,} in-flight tokens" for kind, name, _, what in _CAPPED
                  if any(g.kind is kind for g in p.groups)]
        budget = "the KV pool as given" if cap.pool_given else \
            f"{s.gpu_memory_utilization:g} of the device's total memory less weights"
        return (f"{budget}; one shared pool of "
                f"{p.bytes_per_block:,} B blocks; a request reserves {p.blocks_per_request:,} blocks"
                + (f" ({'; '.join(admits)})" if admits else "") + "; block 0 is null")

    def host_tiers(self, cap) -> tuple:
        """CPU offloading (--kv-offloading-size: OffloadingConnector, or LMCache's MP server) and in-process LMCache
        (tiers.py)."""
        from .tiers import host_tiers

        return host_tiers(cap)

    def transfer_groups(self, p, spec, tokens: int):
        from .transfer import nixl_transfer

        return nixl_transfer(p, spec, tokens)

    def request_blocks(self, p, tokens: int) -> tuple[int, ...]:
        """A request of ``tokens`` (T) in blocks, as vLLM's scheduler admits it: scheduler_reserve_full_isl (on by
        default, config/scheduler.py) reserves the whole sequence with apply_admission_cap=True
        (v1/core/kv_cache_manager.py KVCacheManager.allocate_slots), and v1/core/single_type_kv_cache_manager.py
        SingleTypeKVCacheManager.get_num_blocks_to_allocate counts min(cdiv(T, block),
        max_admission_blocks_per_request):

        * a full group: cdiv(T, block) (no cap);
        * a sliding-window or chunked local attention group: min(cdiv(T, block), cap), the cap being
          SlidingWindowSpec's / ChunkedLocalAttentionSpec's max_admission_blocks_per_request at the configured
          max_model_len (get_manager_for_kv_cache_spec), which is the plan's reservation ``g.blocks_per_request``
          (a group the planner wrapped in
          UniformTypeKVCacheSpecs reaches the scheduler as its first layer's SlidingWindowSpec:
          v1/core/kv_cache_utils.py generate_scheduler_kv_cache_config, so the cap holds for it too);
        * a state (Mamba) group: its fixed share ``g.blocks_per_request``, the blocks a request holds at its peak
          (MambaSpec.max_memory_usage_bytes: 2 + checkpoint blocks in align mode, 1 without prefix caching), not
          the fewer MambaManager.get_num_blocks_to_allocate admits in one step."""
        def blocks(g) -> int:
            if g.kind is GroupKind.STATE:
                return g.blocks_per_request
            need = -(-tokens // g.block_size)
            return min(need, g.blocks_per_request) if g.kind.local else need

        return tuple(blocks(g) for g in p.groups)

    def running_limit(self, settings) -> tuple[str, int]:
        """v1/core/sched/scheduler.py: max_num_running_reqs = max_num_seqs (the scheduler's cap per replica)."""
        return "max_num_seqs", settings.num_seqs

    def fit(self, plans, pool: int, settings, parallel):
        """The memory's count, as vLLM logs its maximum concurrency, and beside it the requests the scheduler
        runs at once: at most max_num_seqs."""
        f = super().fit(plans, pool, settings, parallel)
        cap = settings.num_seqs
        running = min(f.requests_per_replica, cap)
        notes = f.notes
        if f.requests_per_replica > cap:
            notes += (f"of the {f.requests_per_replica:,} requests of {plans[0].context:,} tokens that fit, vLLM's "
                      f"scheduler runs at most max_num_seqs {cap:,} at once per replica ({flag('max_num_seqs')}); the "
                      "rest wait",)
        return replace(f, notes=notes, figures=VllmFigures(cap, running))

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """As the base engine counts a request's blocks; the scheduler runs at most max_num_seqs requests at
        once (v1/core/sched/scheduler.py max_num_running_reqs)."""
        cost = super().workload_cost(p, pool, settings, fit, tokens, shared)
        return replace(cost, limits={**cost.limits, "max_num_seqs": settings.num_seqs})

    def explain(self, p, num_blocks: int) -> list[str]:
        from ...units import format_bytes

        out = []
        s = p.settings_json
        fixed = [g for g in p.groups if g.kind is GroupKind.STATE]
        if fixed:
            out.append(f"Fixed-state groups reserve {format_bytes(sum(g.blocks_per_request for g in fixed) * p.bytes_per_block)}"
                       f" of it: {'/'.join(sorted({str(g.blocks_per_request) for g in fixed}))} blocks per request in "
                       f"each of {len(fixed)} group(s), whatever the context (mamba_cache_mode "
                       f"{s.get('mamba_cache_mode', 'none')}).")
        batches = (f"max_num_batched_tokens {s['max_num_batched_tokens']:,} x "
                   f"{s['max_in_flight_tokens'] // s['max_num_batched_tokens']}"
                   f"{', async scheduling' if s['async_scheduling'] else ''}")
        for kind, _, label, what in _CAPPED:
            capped = [g for g in p.groups if g.kind is kind]
            if capped:
                held = format_bytes(sum(g.blocks_per_request for g in capped) * p.bytes_per_block)
                out.append(f"{label} groups reserve {held} of it: they admit {what} + {s['max_in_flight_tokens']:,} "
                           f"in-flight tokens ({batches}), whatever the context.")
        out.append(f"Pool: {num_blocks:,} blocks of {p.bytes_per_block:,} B (block 0 is vLLM's null block); "
                   f"layout {p.layout.value}; {p.grouping}.")
        out.append(f"vLLM would log: {self.log_line(p, num_blocks)}")
        return out


ENGINE = VllmEngine()
