"""vLLM's start-up log, as ``kvcalc check-log`` reads it.

Lines read (vLLM 0.33 wording; older versions' separate lines too):

* ``Initializing a V1 LLM engine (v0.33.0) with config: model='org/name', ..., max_seq_len=N, ...,
  tensor_parallel_size=T, pipeline_parallel_size=P, ..., kv_cache_dtype=D, ...`` (v1/engine/core.py,
  config/vllm.py ``VllmConfig.__str__``)
* ``Chunked prefill is enabled with max_num_batched_tokens=N.`` (config/scheduler.py)
* ``Available KV cache memory: X GiB`` (v1/worker/gpu_worker.py; X rounded to 2 decimals)
* ``GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: C.CCx``
  (v1/core/kv_cache_utils.py ``update_kv_cache_capacity``; one line since 2025, two lines before)
* ``# GPU blocks: N`` (V1 logs of early 2025)
* hybrids with Mamba-style state: ``Setting attention block size to N tokens ...`` and ``Padding mamba page
  size by P% ...`` (platforms/interface.py ``_align_hybrid_block_size``), ``enable_prefix_caching=...`` (the
  config line) and ``Using X GDN prefill kernel`` (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py),
  which set the plan's prefix caching and GDN prefill backend
* ``Hybrid KV cache manager is disabled for this hybrid model, ...`` (v1/core/kv_cache_planning.py
  ``unify_hybrid_kv_cache_specs``: --disable-hybrid-kv-cache-manager promoted sliding-window or chunked layers
  to full attention), which plans them so
* CPU offloading: ``Created mmap file /dev/shm/vllm_offload_<engine_id>.mmap (X GB)`` (v1/kv_offload/cpu/
  shared_offload_region.py ``SharedOffloadRegion.__init__``: the region's bytes / 1e9, 2 decimals), and the size and
  backend from ``vllm serve``'s ``non-default args: {..., 'kv_offloading_size': S, 'kv_offloading_backend': B}``
  (entrypoints/common/startup.py), which set the plan's offloading (tiers.py)

The log rounds the pool to 0.01 GiB, so the reader turns that figure into the range of pools it can stand
for and reports the range of block counts, token counts and concurrencies that range gives; a logged figure
agrees when it lies inside.
"""

from __future__ import annotations

import math
import re

from ...pool import GroupKind
from ...units import GIB
from ..logs import NOTHING, LogFacts, LogReader, Quantity, Row, word
from .defaults import Settings, check_offloading

#: max_num_batched_tokens when the log does not say (the H100 / H200 default)
DEFAULT_LOG_BATCHED_TOKENS = 8192


class VllmLogReader(LogReader):
    engine = "vllm"
    patterns = {
        # no pattern matches across a line break ([^)\n], not [^)]): a search of the whole log stays in a line
        "version": re.compile(r"Initializing a V1 LLM engine \(v([^)\n]+)\)"),
        "model_id": re.compile(r"with config: model='([^'\n]+)'"),
        "max_model_len": word("max_seq_len=", r"(\d+)"),
        "tp": word("tensor_parallel_size=", r"(\d+)"),
        "pp": word("pipeline_parallel_size=", r"(\d+)"),
        "kv_cache_dtype": word("kv_cache_dtype=", r"([\w.]+)"),
        "max_num_batched_tokens": re.compile(r"max_num_batched_tokens=(\d+)"),
        "available_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
        "cache_tokens": re.compile(r"KV cache size: ([\d,]+) tokens"),
        "concurrency_context": re.compile(r"Maximum concurrency for ([\d,]+) tokens per request"),
        "concurrency": re.compile(r"tokens per request: ([\d.]+)x"),
        "gpu_blocks": re.compile(r"# GPU blocks: (\d+)"),
        # the config line only: other lines print other block sizes (weight_utils.py's prefetch: 16,777,216 bytes)
        "block_size": word("block_size=", r"(\d+)\b(?! bytes)"),
        "dcp": word("decode_context_parallel_size=", r"(\d+)"),
        "autofit_context": re.compile(r"Auto-fit max_model_len: reduced from \d+ to (\d+)"),
        "blocks_override": re.compile(r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(\d+)"),
        "reserved_gib": re.compile(r"reserved ([\d.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes"),
        "group_block_sizes": re.compile(r"kv cache group sizes \(([\d, ]{1,400})\)"),
        "lcm_block_size": re.compile(r"kv lcm block sizes (\d+)"),
        "prefix_caching": word("enable_prefix_caching=", r"(True|False)"),
        "gdn_backend": re.compile(r"Using (FlashInfer|Triton/FLA|CuteDSL|AITER FlyDSL|SYCL|CPU) GDN prefill kernel"),
        "attn_block_size": re.compile(r"Setting attention block size to (\d+) tokens"),
        "mamba_padding_pct": re.compile(r"Padding mamba page size by ([\d.]+)%"),
        # kv_cache_planning.py unify_hybrid_kv_cache_specs, where --disable-hybrid-kv-cache-manager promoted layers
        "hybrid_off": re.compile(r"(Hybrid KV cache manager is disabled) for this hybrid model"),
        # CPU offloading (tiers.py): the region's line and the serve command's sizes
        "offload_gb": re.compile(r"Created mmap file [^\s(]*vllm_offload_[^\s(]* \(([\d.]+) GB\)"),
        "offload_size": re.compile(r"'kv_offloading_size': ((?!None\b)[-\w.+]{1,40})"),
        "offload_backend": re.compile(r"'kv_offloading_backend': '(native|lmcache)'"),
    }
    hints = {"version": "Initializing a V1 LLM engine", "model_id": "with config: model='",
             "max_model_len": "max_seq_len=", "tp": "tensor_parallel_size=", "pp": "pipeline_parallel_size=",
             "kv_cache_dtype": "kv_cache_dtype=", "max_num_batched_tokens": "max_num_batched_tokens=",
             "available_gib": "Available KV cache memory: ", "cache_tokens": "KV cache size: ",
             "concurrency_context": "Maximum concurrency for ", "concurrency": "tokens per request: ",
             "gpu_blocks": "# GPU blocks: ", "block_size": "with config: ", "prefix_caching": "enable_prefix_caching=",
             "gdn_backend": " GDN prefill kernel", "attn_block_size": "Setting attention block size to ",
             "mamba_padding_pct": "Padding mamba page size by ", "dcp": "decode_context_parallel_size=",
             "autofit_context": "Auto-fit max_model_len: ", "blocks_override": "num_gpu_blocks_override=",
             "reserved_gib": "as specified by kv_cache_memory_bytes", "group_block_sizes": "kv cache group sizes (",
             "lcm_block_size": "kv lcm block sizes ", "hybrid_off": "Hybrid KV cache manager is disabled",
             "offload_gb": "Created mmap file ", "offload_size": "'kv_offloading_size': ",
             "offload_backend": "'kv_offloading_backend': "}
    run_start = "Initializing a V1 LLM engine"
    #: utils/system_utils.py decorate_logs, logging_utils/formatter.py "(%(vllm_process_name)s pid=%(process)d)":
    #: EngineCore_DP{n}, Worker_DP{n}_PP{m}_TP{k} (v1/engine/core.py, v1/executor/multiproc_executor.py)
    rank_tags = {"dp": re.compile(r"\((?:EngineCore|Worker|DPEngineCoreActor)_DP(\d+)"),
                 "pp": re.compile(r"\(Worker(?:_DP\d+)?_PP(\d+)")}
    minimums = {"max_model_len": 1, "tp": 1, "pp": 1, "max_num_batched_tokens": 1, "block_size": 1,
                "attn_block_size": 1, "concurrency_context": 1, "dcp": 1, "autofit_context": 1, "lcm_block_size": 1,
                "blocks_override": 1}
    ints = frozenset({"max_model_len", "tp", "pp", "max_num_batched_tokens", "cache_tokens", "concurrency_context",
                      "gpu_blocks", "block_size", "attn_block_size", "dcp", "autofit_context", "blocks_override",
                      "lcm_block_size"})
    floats = frozenset({"available_gib", "concurrency", "mamba_padding_pct", "reserved_gib", "offload_gb",
                        "offload_size"})
    figures = ("cache_tokens", "concurrency", "gpu_blocks", "available_gib", "reserved_gib")
    looked_for = "'GPU KV cache size', 'Maximum concurrency', 'Available KV cache memory', '# GPU blocks'"
    no_context = "the log states no max_model_len (max_seq_len=... or 'Maximum concurrency for L tokens')"

    def context(self, facts: LogFacts) -> int | None:
        """max_model_len as the pool was sized for it: the auto-fit's reduced length, else the capacity line's (printed
        after any auto-fit), else the config line's (printed before it)."""
        v = facts.values
        return v.get("autofit_context") or v.get("concurrency_context") or v.get("max_model_len")

    def precision_for(self, spec, dtype: str | None) -> str | None:
        """auto -> the model's own dtype: its default precision where that is bf16 or fp16 (a float16 checkpoint
        such as Llama 2 is served in fp16, its KV cache likewise), else bf16 (or fp16); bfloat16 / float16 as
        named, fp8* -> fp8 (config/cache.py CacheDType)."""
        if dtype is None:
            return None
        names = set(spec.precisions)
        if dtype == "auto":
            for cand in (spec.default_precision, "bf16", "fp16"):
                if cand in ("bf16", "fp16") and cand in names:
                    return cand
        dtype = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(dtype, dtype)
        if dtype.startswith("fp8") and "fp8" in names:
            return "fp8"
        return dtype if dtype in names else None

    def check(self, facts: LogFacts, source: str) -> None:
        from ...errors import KvcalcError

        dcp = facts.values.get("dcp", 1)
        if dcp > 1:
            raise KvcalcError(f"{source}:{facts.lines['dcp']}: decode_context_parallel_size={dcp}: vLLM shards each "
                              f"request's KV blocks over {dcp} decode-context-parallel ranks; kvcalc does not plan "
                              "decode context parallelism", param="file")

    def notes(self, facts: LogFacts, p) -> list[str]:
        v = facts.values
        out = []
        logged = v.get("max_model_len")
        if logged is not None and logged != p.context and "autofit_context" in v:
            out.append(f"max_model_len {logged:,} was auto-fitted to {p.context:,} to fit the KV cache memory "
                       f"(line {facts.lines['autofit_context']})")
        elif logged is not None and logged != p.context:
            out.append(f"the config line's max_model_len {logged:,} differs from the capacity line's {p.context:,}: "
                       "planned at the capacity line's")
        if "group_block_sizes" in v and "block_size" not in v and set(self._group_sizes(facts)) == {p.settings.block_size}:
            out.append(f"the block size, {p.settings.block_size}, is the one the log's 'kv cache group sizes' line "
                       f"states (line {facts.lines['group_block_sizes']})")
        if "hybrid_off" in v and not p.settings.hybrid_kv_cache_manager:
            out.append(f"the hybrid KV-cache manager was off (line {facts.lines['hybrid_off']}: \"Hybrid KV cache "
                       "manager is disabled\"): the sliding-window and chunked layers are planned as full attention")
        if "blocks_override" in v:
            out.append(f"num_gpu_blocks_override set the pool to {v['blocks_override']:,} blocks "
                       f"(line {facts.lines['blocks_override']}): the logged memory does not size it")
        return out

    def settings(self, facts: LogFacts, given: dict, spec=None) -> tuple[Settings, dict]:
        v = facts.values
        mnbt = given.get("max_num_batched_tokens") or v.get("max_num_batched_tokens") or DEFAULT_LOG_BATCHED_TOKENS
        bs = given.get("block_size") or v.get("block_size") or self._logged_block(facts, spec)
        asyn = given.get("async_scheduling")
        asyn = Settings.async_scheduling if asyn is None else asyn
        hybrid = {}
        if "prefix_caching" in v:
            hybrid["prefix_caching"] = v["prefix_caching"] == "True"
        if "gdn_backend" in v:  # only FlashInfer's prefill exports checkpoints; the others plan alike
            hybrid["gdn_prefill_backend"] = "flashinfer" if v["gdn_backend"] == "FlashInfer" else "triton"
        manager = given.get("hybrid_kv_cache_manager")
        if manager is None and "hybrid_off" in v:
            manager = False
        if manager is not None:
            hybrid["hybrid_kv_cache_manager"] = manager
        pp = v.get("pp", 1)
        tiers = self._tier_settings(facts, given)
        settings = Settings(max_num_batched_tokens=mnbt, async_scheduling=asyn, block_size=bs, pp=pp, **hybrid,
                            **tiers)
        check_offloading(settings)
        used = {"max_num_batched_tokens": mnbt, "async_scheduling": asyn, "tp": self.tp(facts), "block_size": bs,
                **hybrid, **tiers}
        if pp > 1:
            used["pp"] = pp
        return settings, used

    @staticmethod
    def _tier_settings(facts: LogFacts, given: dict) -> dict:
        """The offloading settings: the user's, else the serve command's non-default args (its size and backend)."""
        from .defaults import LMCACHE_SETTINGS

        v = facts.values
        out = {"kv_offloading_size": given.get("kv_offloading_size", v.get("offload_size")),
               "kv_offloading_backend": given.get("kv_offloading_backend", v.get("offload_backend"))}
        out.update({k: given.get(k) for k in ("lmcache_mode", *LMCACHE_SETTINGS)})
        return {k: x for k, x in out.items() if x is not None}

    def _group_sizes(self, facts: LogFacts) -> list[int]:
        """The block sizes of "kv cache group sizes (b, ...)", each a block size within bounds (or refused with its
        line)."""
        raw = facts.values.get("group_block_sizes")
        where = f"{facts.source}:{facts.lines.get('group_block_sizes')}"
        return [self._value("lcm_block_size", x.strip(), where) for x in raw.split(",") if x.strip()] if raw else []

    def _logged_block(self, facts: LogFacts, spec) -> int | None:
        """The block size 0.33 states only in "kv cache group sizes (b, ...)": taken where every group has it and
        no state page sets it (a hybrid's attention block is vLLM's own alignment, planned, then compared)."""
        sizes = set(self._group_sizes(facts))
        stateful = spec is None or any(not c.per_token for c in spec.components.values())
        return sizes.pop() if len(sizes) == 1 and not stateful else None

    def compare(self, facts: LogFacts, p) -> list[Row]:
        v, ln = facts.values, facts.lines.get
        context = p.context
        rows = [Row("max_model_len", Quantity(self.context(facts)), Quantity(p.context), None, ln("max_model_len")),
                Row("blocks per request", NOTHING, Quantity(p.blocks_per_request, each=p.bytes_per_block), None)]
        rows += self._hybrid_rows(facts, p)
        rows += self._block_size_rows(facts, p)
        rows += self._offload_rows(facts, p)
        blocks, pool_rows = self._pool_rows(facts, p)
        rows += pool_rows
        if "cache_tokens" in v:
            row, blocks = self._tokens_row(facts, p, blocks, context)
            rows.append(row)
        if "concurrency" in v:
            c = v["concurrency"]
            lc = v.get("concurrency_context", context)
            figure = f"Maximum concurrency at {lc:,}"
            if blocks is not None and lc == context:
                lo, hi = p.max_concurrency(blocks[0]), p.max_concurrency(blocks[1])
                # printed as f"{x:.2f}x" (kv_cache_utils.py): one of the block counts the pool allows must print it
                ok = _any_block(blocks, lambda b: f"{p.max_concurrency(b):.2f}" == f"{c:.2f}",
                                round(lo, 2) <= c <= round(hi, 2))
                rows.append(Row(figure, Quantity(c, unit="x"), Quantity(lo, hi, "x", collapse=True), ok,
                                ln("concurrency")))
            else:
                rows.append(Row(figure, Quantity(c, unit="x"), NOTHING, None, ln("concurrency")))
        return rows

    def _block_size_rows(self, facts: LogFacts, p) -> list[Row]:
        """kv_cache_utils.py: "kv cache group sizes (b, ...)" (each group's block size, in vLLM's group order) and
        "kv lcm block sizes B" (the scheduler's block, their lcm)."""
        v, ln = facts.values, facts.lines.get
        sizes = [g.block_size for g in p.groups]
        rows = []
        if "group_block_sizes" in v:
            logged = self._group_sizes(facts)
            rows.append(Row("block size of each KV cache group", Quantity(", ".join(map(str, logged)) or "-"),
                            Quantity(", ".join(map(str, sizes))), sorted(logged) == sorted(sizes),
                            ln("group_block_sizes")))
        if "lcm_block_size" in v:
            lcm = math.lcm(*sizes)
            rows.append(Row("scheduler block size (lcm of the groups')", Quantity(v["lcm_block_size"], unit="tokens"),
                            Quantity(lcm, unit="tokens"), v["lcm_block_size"] == lcm, ln("lcm_block_size")))
        return rows

    def _offload_rows(self, facts: LogFacts, p) -> list[Row]:
        """The CPU offloading region's logged GB beside CPUOffloadingSpec's (tiers.py): with the size known, the
        region it gives; without it, the whole chunk counts the logged figure stands for."""
        from .tiers import NativeOffload, native_offload, replicated_layout

        v, ln = facts.values, facts.lines.get
        if "offload_gb" not in v:
            return []
        x, tp, pp = v["offload_gb"], self.tp(facts), v.get("pp", 1)
        rep = replicated_layout(p, tp, pp)
        size = p.settings.kv_offloading_size
        figure = "CPU offload region (GB = 10^9 B, 2 decimals)"
        if size is not None and p.settings.offloading_backend == "native":
            off = native_offload(size, p.bytes_per_block, tp * pp, rep)
            want = f"{off.region_bytes / 1e9:.2f} GB"
            return [Row(figure, Quantity(f"{x:.2f} GB"), Quantity(want), want == f"{x:.2f} GB", ln("offload_gb")),
                    Row("CPU offload chunks", NOTHING, Quantity(off.num_chunks, each=off.row), None)]
        row = NativeOffload(0, p.bytes_per_block, tp * pp, 1 if rep else tp * pp).row
        lo, hi = math.ceil((x - 0.005) * 1e9 / row), math.floor((x + 0.005) * 1e9 / row)
        lo = max(lo, 1)
        found = Quantity(lo, hi, unit="", each=row, collapse=True) if lo <= hi else \
            Quantity(None, missing="no whole chunk count gives it")
        return [Row(figure, Quantity(f"{x:.2f} GB"), NOTHING, None, ln("offload_gb")),
                Row("CPU offload chunks it stands for (no offloading size given)", NOTHING, found, lo <= hi)]

    @staticmethod
    def _hybrid_rows(facts: LogFacts, p) -> list[Row]:
        v, ln = facts.values, facts.lines.get
        rows = []
        state = [pg for g in p.groups if g.kind is GroupKind.STATE for pg in g.pages]
        if "attn_block_size" in v:
            n, planned = v["attn_block_size"], p.settings_json["block_size"]
            rows.append(Row("attention block size (hybrid)", Quantity(n, unit="tokens"),
                            Quantity(planned, unit="tokens"), n == planned, ln("attn_block_size")))
        if "mamba_padding_pct" in v and state:
            real, padded = state[0].real_page_bytes, state[0].page_bytes
            pct = 100 * (padded - real) / real
            rows.append(Row("state page padding", Quantity(v["mamba_padding_pct"], unit="%"),
                            Quantity(pct, unit="%", pages=(real, padded)),
                            f"{pct:.2f}" == f"{v['mamba_padding_pct']:.2f}", ln("mamba_padding_pct")))
        return rows

    @staticmethod
    def _pool_rows(facts: LogFacts, p) -> tuple[tuple[int, int] | None, list[Row]]:
        """The pool the logged GiB figure stands for, and the block counts (lo, hi) it gives."""
        v, ln = facts.values, facts.lines.get
        rows, blocks = [], None
        key = "available_gib" if "available_gib" in v else ("reserved_gib" if "reserved_gib" in v else None)
        if key is not None:  # gpu_worker.py format_gib: round(bytes / GiB, 2)
            x = v[key]
            lo_b, hi_b = math.ceil((x - 0.005) * GIB), math.floor((x + 0.005) * GIB)
            blocks = (p.num_blocks(max(lo_b, 0)), p.num_blocks(hi_b))
            label = "KV pool per GPU (GiB, 2 decimals)" if key == "available_gib" else \
                "KV pool per GPU, kv_cache_memory_bytes (GiB, 2 decimals)"
            rows.append(Row(label, Quantity(x, unit="GiB"), Quantity(lo_b, hi_b, "B"), None, ln(key)))
            rows.append(Row("blocks in the pool", NOTHING, Quantity(*blocks), None))
        if "blocks_override" in v:  # kv_cache_planning.py: the override replaces the count the memory gives
            n = v["blocks_override"]
            rows.append(Row("num_gpu_blocks_override", Quantity(n), NOTHING, None, ln("blocks_override")))
            blocks = (n, n)
        if "gpu_blocks" in v:
            n = v["gpu_blocks"]
            ok = None if blocks is None else blocks[0] <= n <= blocks[1]
            rows.append(Row("# GPU blocks", Quantity(n), NOTHING if blocks is None else Quantity(*blocks), ok,
                            ln("gpu_blocks")))
            blocks = (n, n)
        return blocks, rows

    @staticmethod
    def _tokens_row(facts: LogFacts, p, blocks, context) -> tuple[Row, tuple[int, int] | None]:
        t, line = facts.values["cache_tokens"], facts.lines.get("cache_tokens")
        figure = "GPU KV cache size (tokens)"
        if blocks is not None:  # one of the block counts the pool allows must give the logged tokens
            lo, hi = p.cache_tokens(blocks[0]), p.cache_tokens(blocks[1])
            ok = _any_block(blocks, lambda b: p.cache_tokens(b) == t, lo <= t <= hi)
            return Row(figure, Quantity(t), Quantity(lo, hi, collapse=True), ok, line), blocks
        # no pool in the log: the block counts the logged tokens stand for
        bpr = p.blocks_per_request
        n = [b for b in range(max(0, t * bpr // context - 2), t * bpr // context + 3) if p.cache_tokens(b) == t]
        found = Quantity(n[0], unit="blocks") if n else Quantity(None, missing="no whole block count gives it")
        return Row(figure, Quantity(t), found, bool(n), line), ((n[0], n[-1]) if n else None)


#: block counts tried one by one; a wider range (a tiny block) is checked by its ends
MAX_BLOCKS_TRIED = 100_000


def _any_block(blocks: tuple[int, int], gives, between: bool) -> bool:
    """Whether a whole block count in ``blocks`` gives the logged figure (``gives(b)``); past MAX_BLOCKS_TRIED
    counts, whether it lies ``between`` the ends."""
    lo, hi = blocks
    if hi - lo >= MAX_BLOCKS_TRIED:
        return between
    return between and any(gives(b) for b in range(lo, hi + 1))


READER = VllmLogReader()
