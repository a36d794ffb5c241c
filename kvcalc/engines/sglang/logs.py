"""SGLang's start-up log, as ``kvcalc check-log`` reads it (0.5.23 wording; older releases' lines too).

Lines read:

* ``server_args={'model_path': 'org/name', 'tp_size': 2, 'mem_fraction_static': 0.83, 'page_size': 1, ...}``
  (entrypoints/engine.py, the resolved dict; older releases print ``ServerArgs(model_path='...', ...)``), the
  Mamba state options among them (``mamba_radix_cache_strategy``, ``disable_overlap_schedule``,
  ``disable_radix_cache``, ``max_mamba_cache_size``)
* ``KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, K size: X GB, V size: Y GB`` or ``... KV size:
  X GB`` for MLA (mem_cache/memory_pool.py ``KVCache._finalize_allocation_log``; GB = 2^30 B, 2 decimals;
  older releases print no dtype); ``Full KV Cache ...`` with split SWA pools
* ``Use sliding window memory pool. full_layer_tokens=F, swa_layer_tokens=S`` (pool_configurator.py)
* ``Mamba Cache is allocated. max_mamba_cache_size: N, ...`` (memory_pool.py ``MambaPool``)
* ``max_total_num_tokens=T, chunked_prefill_size=C, max_prefill_tokens=P, max_running_requests=R,
  context_len=L, ...`` (managers/scheduler.py)
* HiCache (tiers.py): ``Allocating kv hierarchical KV host pool: N tokens, X GB host memory.`` (``full`` and ``swa``
  beside a split SWA pool; mem_cache/pool_host/base.py ``_allocate_host_buffer``, GB = 10^9 B), ``Allocating X GB host
  memory for hierarchical Mamba cache (N state slots, layout=L).`` (pool_host/mamba.py), older releases' ``Allocating
  X GB host memory for hierarchical KV cache.``, ``HiCache auto-sizing: ratio 2.000 -> R; ...``
  (mem_cache/hicache_auto_size.py), and the server_args' ``enable_hierarchical_cache``, ``hicache_ratio``,
  ``hicache_size``, ``hicache_mem_layout``

The log states the token count, not the byte budget, so the reader checks what follows from the logged
tokens exactly: the pool's GB (the bytes per token of each layer), the SWA pool (``int(full x ratio)`` on the
page) and ``max_running_requests`` (``resolve_max_num_reqs``, with the logged Mamba slots).
"""

from __future__ import annotations

import re

from ...errors import KvcalcError, quote
from ..logs import NOTHING, After, LogFacts, LogReader, Quantity, Row, word
from . import sizing as S
from .defaults import HICACHE_MEM_LAYOUTS, VERSION, Settings, check_hicache
from .dsv4 import V4Layout

#: (?:server_args|ServerArgs\() written from their common "erver", so that a search of a whole log skips ahead to it;
#: no pattern matches across a line break ([^\S\n] for \s, [^'\n] for [^']): a search of the whole log stays in a line
_ARGS = r"erver(?:(?<=server)_args|(?<=Server)Args\()"
_ARG = r"""\b['"]?{key}['"]?[^\S\n]*[:=][^\S\n]*"""
#: "KV Cache is allocated." not preceded by "SWA " ((?<!SWA )KV ...), literal-first likewise
_KV = r"KV Cache is allocated\.(?<!SWA KV Cache is allocated\.)"


def _arg(key: str, value: str) -> After:
    """``<server_args or ServerArgs(>.*?<key>: <value>``, searched in two steps (logs.After)."""
    return After(_ARGS, ".*?" + _ARG.format(key=key) + value)


def _bool(text: str | None) -> bool | None:
    return None if text is None else text == "True"


class SglangLogReader(LogReader):
    engine = "sglang"
    patterns = {
        "model_id": _arg("model_path", r"'([^'\n]+)'"),
        "tp": _arg("tp_size", r"(\d+)"),
        "dp": _arg("dp_size", r"(\d+)"),
        # 0.5.23 moves dp_size into attn_dp_size under DP attention and resets dp_size to 1 (parallel_hook.py)
        "attn_dp": _arg("attn_dp_size", r"(\d+)"),
        "pp": _arg("pp_size", r"(\d+)"),
        "enable_dp_attention": _arg("enable_dp_attention", r"(True|False)"),
        "mem_fraction_static": _arg("mem_fraction_static", r"([\d.]+)"),
        "page_size": _arg("page_size", r"(\d+)"),
        "kv_cache_dtype": _arg("kv_cache_dtype", r"'([\w.]+)'"),
        "swa_full_tokens_ratio": _arg("swa_full_tokens_ratio", r"([\d.]+)"),
        "server_mrr": _arg("max_running_requests", r"(\d+)"),
        # the Mamba state options, as resolution left them (the resolved dict: auto already resolved where SGLang
        # resolves it, disable_overlap_schedule True under pp > 1)
        "mamba_strategy": _arg("mamba_radix_cache_strategy", r"'(auto|no_buffer|extra_buffer|extra_buffer_lazy)'"),
        "disable_overlap_schedule": _arg("disable_overlap_schedule", r"(True|False)"),
        "disable_radix_cache": _arg("disable_radix_cache", r"(True|False)"),
        "max_mamba_cache_size": _arg("max_mamba_cache_size", r"(\d+)"),
        "kv_dtype": re.compile(_KV + r" dtype: torch\.(\w+)"),
        "kv_tokens": re.compile(_KV + r"(?: dtype: [\w.]+,)? #tokens: (\d+)"),
        "k_gib": After(_KV, r".*K size: ([\d.]+) GB"),  # the "<first>.*<rest>" patterns in two steps (logs.After)
        "kv_gib": After(_KV, r".*\bKV size: ([\d.]+) GB"),
        "swa_tokens": re.compile(r"swa_layer_tokens=(\d+)"),
        "swa_k_gib": After(r"SWA KV Cache is allocated\.", r".*\bK size: ([\d.]+) GB"),
        # model_runner_components/load_model_utils.py resolve_sliding_window_size (Llama 4)
        "chunk_window": re.compile(r"Setting sliding_window_size to be attention_chunk_size: (\d+)"),
        "mamba_slots": re.compile(r"max_mamba_cache_size: (\d+)"),
        "max_total_num_tokens": re.compile(r"max_total_num_tokens=(\d+)"),
        "dsv4_full": re.compile(r"DSV4 pool sizes: full=(\d+)"),
        "dsv4_swa": After(r"DSV4 pool sizes: ", r".*\bswa=(\d+)"),
        "dsv4_c4": After(r"DSV4 pool sizes: ", r".*\bc4=(\d+)"),
        "dsv4_c128": After(r"DSV4 pool sizes: ", r".*\bc128=(\d+)"),
        "dsv4_c4_state": After(r"DSV4 pool sizes: ", r".*\bc4_state=(\d+)"),
        "max_running_requests": After(r"max_total_num_tokens=", r".*\bmax_running_requests=(\d+)"),
        # SGLANG_ENABLE_POST_CAPTURE_KV_SIZING (kv_pool_runtime.py): the pool is backed after CUDA-graph capture
        "post_tokens": re.compile(r"Post-capture KV sizing: KV cache allocated\. dtype: [\w.]+, #tokens: (\d+)"),
        "post_kv_gib": word("KV size: ", r"([\d.]+) GB"),  # on the post-capture line (its hint)
        "context_len": word("context_len=", r"(\d+)"),
        # HiCache (tiers.py)
        "hicache_on": _arg("enable_hierarchical_cache", r"(True|False)"),
        "hicache_ratio": _arg("hicache_ratio", r"((?!None\b)[-\w.+]{1,40})"),
        "hicache_size": _arg("hicache_size", r"(\d+)"),
        "hicache_layout": _arg("hicache_mem_layout", r"'(\w+)'"),
        "hicache_kv_tokens": re.compile(r"Allocating (?:kv|full) hierarchical KV host pool: (\d+) tokens"),
        "hicache_kv_gb": After(r"Allocating (?:kv|full) hierarchical KV host pool: ", r".*? tokens, ([\d.]+) GB"),
        "hicache_swa_tokens": re.compile(r"Allocating swa hierarchical KV host pool: (\d+) tokens"),
        "hicache_mamba_slots": re.compile(r"host memory for hierarchical Mamba cache \((\d+) state slots"),
        "hicache_old_gb": re.compile(r"Allocating ([\d.]+) GB host memory for hierarchical KV cache"),
        "hicache_auto_ratio": re.compile(r"HiCache auto-sizing: ratio [\d.]+ -> ([\d.]+);"),
    }
    hints = {**{k: ("server_args", "ServerArgs(") for k in ("model_id", "tp", "dp", "attn_dp", "pp",
                                                          "enable_dp_attention", "mem_fraction_static", "page_size",
                                                          "kv_cache_dtype", "swa_full_tokens_ratio", "server_mrr",
                                                          "mamba_strategy", "disable_overlap_schedule",
                                                          "disable_radix_cache", "max_mamba_cache_size")},
             **{k: "KV Cache is allocated." for k in ("kv_dtype", "kv_tokens", "k_gib", "kv_gib")},
             **{k: "DSV4 pool sizes: " for k in ("dsv4_full", "dsv4_swa", "dsv4_c4", "dsv4_c128", "dsv4_c4_state")},
             "swa_tokens": "swa_layer_tokens=", "swa_k_gib": "SWA KV Cache is allocated.",
             "chunk_window": "Setting sliding_window_size to be", "mamba_slots": "max_mamba_cache_size: ",
             "max_total_num_tokens": "max_total_num_tokens=", "max_running_requests": "max_total_num_tokens=",
             "context_len": "context_len=", "post_tokens": "Post-capture KV sizing: KV cache allocated.",
             "post_kv_gib": "Post-capture KV sizing: KV cache allocated.",
             **{k: ("server_args", "ServerArgs(") for k in ("hicache_on", "hicache_ratio", "hicache_size",
                                                          "hicache_layout")},
             **{k: " hierarchical KV host pool: " for k in ("hicache_kv_tokens", "hicache_kv_gb", "hicache_swa_tokens")},
             "hicache_mamba_slots": "for hierarchical Mamba cache (", "hicache_old_gb": "for hierarchical KV cache",
             "hicache_auto_ratio": "HiCache auto-sizing: ratio "}
    minimums = {"tp": 1, "dp": 1, "attn_dp": 1, "pp": 1, "page_size": 1, "server_mrr": 1, "context_len": 1,
                "max_mamba_cache_size": 1}
    ints = frozenset({"tp", "dp", "attn_dp", "pp", "page_size", "server_mrr", "kv_tokens", "swa_tokens", "mamba_slots",
                      "max_mamba_cache_size",
                      "chunk_window",
                      "max_total_num_tokens", "max_running_requests", "context_len", "dsv4_full", "dsv4_swa",
                      "dsv4_c4", "dsv4_c128", "dsv4_c4_state", "post_tokens", "hicache_size", "hicache_kv_tokens",
                      "hicache_swa_tokens", "hicache_mamba_slots"})
    floats = frozenset({"mem_fraction_static", "k_gib", "kv_gib", "swa_full_tokens_ratio", "post_kv_gib", "swa_k_gib",
                        "hicache_ratio", "hicache_kv_gb", "hicache_old_gb", "hicache_auto_ratio"})
    figures = ("kv_tokens", "max_total_num_tokens", "dsv4_full", "post_tokens")
    run_start = "server_args="
    run_start_twice = True  # entrypoints/engine.py: Engine.__init__ and _launch_subprocesses both log server_args=
    #: managers/scheduler.py: the logger prefix "[<time> DP{d} PP{p} ... TP{t}]" (utils/common.py configure_logger)
    #: (the bracket may follow a collector's prefix: "sglang-1  | [...]", a journald or kubectl timestamp)
    #: a "[" at a line's start or after a blank or "|", written literal-first ((?:^|[\s|])\[ would make the regex
    #: engine try every position of a log): the same ranks found
    rank_tags = {"dp": re.compile(r"\[(?<![^\s|]\[)[^\]\n]{0,80}? DP(\d+)(?=[ \]])"),
                 "pp": re.compile(r"\[(?<![^\s|]\[)[^\]\n]{0,80}? PP(\d+)(?=[ \]])")}
    looked_for = "'KV Cache is allocated', 'max_total_num_tokens='"
    nothing_note = ("the log has no figure kvcalc can check (it needs the 'KV Cache is allocated' line, or the "
                    "token count with the SWA or state lines)")
    context_defaults_to_model = True  # model_config.py: context_len defaults to max_position_embeddings
    no_context = "the log states no context_len (the 'max_total_num_tokens=..., context_len=L' line)"

    def version(self, facts: LogFacts) -> str | None:
        return None  # SGLang's start-up lines do not print its version

    def context(self, facts: LogFacts) -> int | None:
        return facts.values.get("context_len")

    def kv_dtype(self, facts: LogFacts) -> str | None:
        return facts.values.get("kv_dtype") or facts.values.get("kv_cache_dtype")

    def precision_for(self, spec, dtype: str | None) -> str | None:
        """torch.bfloat16 / 'auto' -> the model's own (bf16 or fp16), float8_* / fp8_* -> fp8."""
        if dtype is None or dtype in ("auto", "bfloat16", "bf16", "float16"):
            want = {"float16": "fp16"}.get(dtype or "", spec.default_precision if dtype in (None, "auto") else "bf16")
            return want if want in spec.precisions else None
        if ("float8" in dtype or dtype.startswith("fp8")) and "fp8" in spec.precisions:
            return "fp8"
        return None

    def settings(self, facts: LogFacts, given: dict, spec=None) -> tuple[Settings, dict]:
        v = facts.values
        dp_attention = v.get("enable_dp_attention") == "True"
        dp = v.get("attn_dp", v.get("dp", 1)) if dp_attention else 1
        kw = {"page_size": v.get("page_size"), "swa_full_tokens_ratio": v.get("swa_full_tokens_ratio"),
              "max_running_requests": v.get("server_mrr"), "mem_fraction_static": v.get("mem_fraction_static"),
              "enable_dp_attention": dp_attention, "dp": dp, "pp": v.get("pp", 1),
              "max_mamba_cache_size": v.get("max_mamba_cache_size")}
        # the Mamba state options the log states (kv_cache_configurator.py _calculate_mamba_ratio reads them)
        flags = {"mamba_radix_cache_strategy": v.get("mamba_strategy"),
                 "disable_overlap_schedule": _bool(v.get("disable_overlap_schedule")),
                 "disable_radix_cache": _bool(v.get("disable_radix_cache"))}
        kw.update({k: x for k, x in flags.items() if x is not None})
        kw.update(self._hicache_settings(facts, given))
        kw.update({k: x for k, x in given.items() if k in kw})
        settings = Settings(**kw)
        check_hicache(settings)
        used = {k: x for k, x in kw.items() if x is not None and not (k == "pp" and x == 1)
                and not (k in flags and x in ("auto", False))}
        used["tp"] = self.tp(facts)
        return settings, used

    @staticmethod
    def _hicache_settings(facts: LogFacts, given: dict) -> dict:
        """HiCache's settings: the user's, else the server_args' where HiCache was on (a release before 0.5.23 printed
        its ratio's default with HiCache off)."""
        v = facts.values
        on = given.get("enable_hierarchical_cache") or v.get("hicache_on") == "True"
        if not on:
            return {k: given[k] for k in ("hicache_ratio", "hicache_size", "hicache_mem_layout", "host_memory_gib")
                    if k in given}  # Settings refuses them without HiCache, naming the first
        layout = v.get("hicache_layout")
        if layout is not None and layout not in HICACHE_MEM_LAYOUTS:
            raise KvcalcError(f"{facts.source}:{facts.lines['hicache_layout']}: hicache_mem_layout {quote(layout)} is "
                              f"not one SGLang {VERSION} takes ({', '.join(HICACHE_MEM_LAYOUTS)})", param="file")
        out = {"enable_hierarchical_cache": True, "hicache_ratio": v.get("hicache_ratio"),
               "hicache_size": v.get("hicache_size"), "hicache_mem_layout": v.get("hicache_layout")}
        out.update({k: given[k] for k in ("hicache_ratio", "hicache_size", "hicache_mem_layout", "host_memory_gib")
                    if k in given})
        return {k: x for k, x in out.items() if x is not None}

    def stage_plan(self, facts: LogFacts, plans: list):
        """Each stage logs its own pool (its layers); the token count is the minimum over stages
        (kv_cache_configurator.py _apply_token_constraints): the lines read are the lowest PP rank's."""
        return plans[min(facts.ranks.get("pp", 0), len(plans) - 1)]

    def notes(self, facts: LogFacts, p) -> list[str]:
        if "post_tokens" in facts.values:
            return ["post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1): the logged KV size is the "
                    "VMM-backed bytes (mapped in granules), shown, not checked"]
        return []

    def compare(self, facts: LogFacts, p) -> list[Row]:
        from .tiers import log_rows

        return p.pools.log_rows(facts, p) + log_rows(facts, p)

    @staticmethod
    def _swa_rows(facts: LogFacts, lay: S.Layout, T: int) -> list[Row]:
        """A split SWA pool: the pool's tokens (int(T x ratio) on the page) and, from the logged SWA tokens, its K
        size."""
        v, ln = facts.values, facts.lines.get
        rows = []
        if "swa_tokens" in v:
            want = S.swa_pool_tokens(lay, T)
            rows.append(Row("SWA pool tokens", Quantity(v["swa_tokens"]), Quantity(want), v["swa_tokens"] == want,
                            ln("swa_tokens")))
        if "swa_k_gib" in v and "swa_tokens" in v and lay.full_layers:
            k = S.rows(v["swa_tokens"], lay.page) * lay.swa_heads * lay.swa_head_dim * lay.kv_size * len(lay.swa_layers)
            rows.append(Row("SWA K size (GB = GiB, 2 decimals)", Quantity(v["swa_k_gib"], unit="GiB"),
                            Quantity(k / (1 << 30), unit="GiB"), f"{k / (1 << 30):.2f}" == f"{v['swa_k_gib']:.2f}",
                            ln("swa_k_gib")))
        return rows

    @staticmethod
    def _size_rows(facts: LogFacts, lay: S.Layout, T: int) -> list[Row]:
        """The logged GB of the (full) pool from the logged #tokens: size + page rows of every layer."""
        v, ln = facts.values, facts.lines.get
        rows_n = S.rows(T, lay.page)
        n = len(lay.full_layers)
        if "k_gib" in v and lay.kind == "mha":
            k = rows_n * lay.heads * lay.head_dim * lay.kv_size * n
            return [Row("K size (GB = GiB, 2 decimals)", Quantity(v["k_gib"], unit="GiB"),
                        Quantity(k / (1 << 30), unit="GiB"), f"{k / (1 << 30):.2f}" == f"{v['k_gib']:.2f}",
                        ln("k_gib"))]
        if "kv_gib" in v and lay.kind != "mha":
            kv = rows_n * lay.mla_dim * lay.kv_size * n
            if lay.kind == "dsa":
                kv += S.dsa_index_pages(T, lay.page) * lay.page * lay.indexer_row * n
            return [Row("KV size (GB = GiB, 2 decimals)", Quantity(v["kv_gib"], unit="GiB"),
                        Quantity(kv / (1 << 30), unit="GiB"), f"{kv / (1 << 30):.2f}" == f"{v['kv_gib']:.2f}",
                        ln("kv_gib"))]
        return []


READER = SglangLogReader()


def token_pool_rows(facts: LogFacts, p, lay: S.Layout) -> list[Row]:
    """The default and split-SWA pools' figures beside the plan's."""
    v, ln = facts.values, facts.lines.get
    T = v.get("kv_tokens", v.get("post_tokens", v.get("max_total_num_tokens")))
    rows = [Row("context_len", Quantity(p.context), Quantity(p.context), None, ln("context_len")),
            Row("bytes per token (cell)", NOTHING, Quantity(lay.cell if isinstance(lay.cell, int)
                                                            else round(lay.cell, 2)), None)]
    if "max_total_num_tokens" in v and ("kv_tokens" in v or "post_tokens" in v):
        rows.append(Row("max_total_num_tokens = #tokens", Quantity(v["max_total_num_tokens"]), Quantity(T),
                        v["max_total_num_tokens"] == T, ln("max_total_num_tokens")))
    if "post_kv_gib" in v:
        rows.append(Row("KV size, post-capture (GB = GiB, VMM-backed)", Quantity(v["post_kv_gib"], unit="GiB"),
                        NOTHING, None, ln("post_kv_gib")))
    if "chunk_window" in v:  # resolve_sliding_window_size logs any model's attention_chunk_size at load
        rows.append(Row("sliding_window_size = attention_chunk_size", Quantity(v["chunk_window"]),
                        Quantity(lay.attention_chunk) if lay.attention_chunk is not None else NOTHING,
                        v["chunk_window"] == lay.attention_chunk, ln("chunk_window")))
    if T is None:  # the GB and SWA figures follow from the token count: without it nothing to check
        return rows
    rows += SglangLogReader._size_rows(facts, lay, T)
    if lay.swa_layers:
        rows += SglangLogReader._swa_rows(facts, lay, T)
    if "max_running_requests" in v:
        slots = v.get("mamba_slots", 0)
        if lay.state_layers and not slots:
            rows.append(Row("max_running_requests", Quantity(v["max_running_requests"]), NOTHING, None,
                            ln("max_running_requests")))
        else:
            mrr, _ = S.max_running_requests(T, p.context, p.settings, slots, lay)
            rows.append(Row("max_running_requests", Quantity(v["max_running_requests"]), Quantity(mrr),
                            v["max_running_requests"] == mrr, ln("max_running_requests")))
    return rows


def v4_rows(facts: LogFacts, p, lay: V4Layout) -> list[Row]:
    """DeepSeek V4: the "DSV4 pool sizes" line follows from its full token count (pool_configurator.py
    _compute_dsv4_sizes), and max_running_requests from the declared 256 (resolve_max_num_reqs)."""
    v, ln = facts.values, facts.lines.get
    full = v.get("dsv4_full", v.get("max_total_num_tokens"))
    rows = [Row("context_len", Quantity(p.context), Quantity(p.context), None, ln("context_len")),
            Row("bytes per full token", NOTHING, Quantity(round(lay.bytes_per_full_token, 2)), None)]
    if full is None:
        return rows
    swa = S.swa_pool_tokens(lay, full)
    want = {"dsv4_swa": ("SWA pool tokens", swa), "dsv4_c4": ("c4 pool tokens", full // 4),
            "dsv4_c128": ("c128 pool tokens", full // 128),
            "dsv4_c4_state": ("c4 state rows", swa // lay.page * (8 if lay.n(4) else 0)),
            "max_running_requests": ("max_running_requests", min(lay.mrr_per_worker, full // 2))}
    for key, (figure, value) in want.items():
        if key in v:
            rows.append(Row(figure, Quantity(v[key]), Quantity(value), v[key] == value, ln(key)))
    return rows
