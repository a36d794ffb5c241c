"""`kvcalc check-log`: a second oracle. Read a vLLM start-up log and compare the figures it printed with
kvcalc's plan for the same model and settings.

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

The log rounds the pool to 0.01 GiB, so kvcalc turns that figure into the range of pools it can stand for
and reports the range of block counts, token counts and concurrencies that range gives; a logged figure
agrees when it lies inside. Torch-free.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .config import config_names, as_model, load_model
from .engines import vllm as V
from .errors import KvcalcError
from .plan import plan

GIB = 1 << 30

_PATTERNS = {
    "version": re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\)"),
    "model_id": re.compile(r"with config: model='([^']+)'"),
    "max_model_len": re.compile(r"\bmax_seq_len=(\d+)"),
    "tp": re.compile(r"\btensor_parallel_size=(\d+)"),
    "pp": re.compile(r"\bpipeline_parallel_size=(\d+)"),
    "kv_cache_dtype": re.compile(r"\bkv_cache_dtype=([\w.]+)"),
    "max_num_batched_tokens": re.compile(r"max_num_batched_tokens=(\d+)"),
    "available_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "cache_tokens": re.compile(r"KV cache size: ([\d,]+) tokens"),
    "concurrency_context": re.compile(r"Maximum concurrency for ([\d,]+) tokens per request"),
    "concurrency": re.compile(r"tokens per request: ([\d.]+)x"),
    "gpu_blocks": re.compile(r"# GPU blocks: (\d+)"),
    "block_size": re.compile(r"\bblock_size=(\d+)"),
    "prefix_caching": re.compile(r"\benable_prefix_caching=(True|False)"),
    "gdn_backend": re.compile(r"Using (FlashInfer|Triton/FLA|CuteDSL|AITER FlyDSL|SYCL|CPU) GDN prefill kernel"),
    "attn_block_size": re.compile(r"Setting attention block size to (\d+) tokens"),
    "mamba_padding_pct": re.compile(r"Padding mamba page size by ([\d.]+)%"),
}
_INTS = {"max_model_len", "tp", "pp", "max_num_batched_tokens", "cache_tokens", "concurrency_context",
         "gpu_blocks", "block_size", "attn_block_size"}
_FLOATS = {"available_gib", "concurrency", "mamba_padding_pct"}


@dataclass
class LogFacts:
    values: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)  # field -> 1-based line number


def parse_log(text: str) -> LogFacts:
    """The first occurrence of each figure (a restart's second set would be a different run)."""
    facts = LogFacts()
    for no, line in enumerate(text.splitlines(), 1):
        for key, pat in _PATTERNS.items():
            if key in facts.values:
                continue
            m = pat.search(line)
            if not m:
                continue
            raw = m.group(1)
            try:
                val = int(raw.replace(",", "")) if key in _INTS else (float(raw) if key in _FLOATS else raw)
            except ValueError:
                continue
            if isinstance(val, float) and not math.isfinite(val):
                continue
            facts.values[key] = val
            facts.lines[key] = no
    return facts


def _model_for(model_id: str | None):
    """The kvcalc config whose config.json source names this Hugging Face id (exact, case-insensitive)."""
    if not model_id:
        return None
    want = model_id.strip("/").lower()
    for name in config_names():
        spec = load_model(name)
        src = " ".join(str(v) for v in spec.sources.values()).lower()
        if f"huggingface.co/{want}/" in src or want == name:
            return spec
    return None


def _precision_for(spec, dtype: str | None) -> str | None:
    if dtype is None:
        return None
    names = set(spec.precisions)
    if dtype == "auto":
        for cand in ("bf16", "fp16"):
            if cand in names:
                return cand
    if dtype.startswith("fp8") and "fp8" in names:
        return "fp8"
    return dtype if dtype in names else None


@dataclass
class Row:
    figure: str
    logged: str
    kvcalc: str
    agrees: bool | None  # None: shown for information
    line: int | None = None


def check_log(text: str, source: str = "log", *, model=None, precision: str | None = None,
              max_num_batched_tokens: int | None = None, async_scheduling: bool = True,
              block_size: int | None = None) -> dict:
    facts = parse_log(text)
    v = facts.values
    if not any(k in v for k in ("cache_tokens", "concurrency", "gpu_blocks", "available_gib")):
        raise KvcalcError(f"{source}: no vLLM KV cache lines found (looked for 'GPU KV cache size', 'Maximum "
                          "concurrency', 'Available KV cache memory', '# GPU blocks')", param="file")
    spec = as_model(model) if model is not None else None
    if spec is None:
        spec = _model_for(v.get("model_id"))
        if spec is None:
            raise KvcalcError(f"model: the log's model {v.get('model_id', '(not logged)')!r} matches no kvcalc "
                              "config by its Hugging Face id; name one with --model", param="model")
    context = v.get("max_model_len") or v.get("concurrency_context")
    if not context:
        raise KvcalcError(f"{source}: the log states no max_model_len (max_seq_len=... or 'Maximum concurrency "
                          "for L tokens')", param="file")
    prec = precision or _precision_for(spec, v.get("kv_cache_dtype"))
    if prec is None:
        raise KvcalcError(f"precision: the log's kv_cache_dtype {v.get('kv_cache_dtype', '(not logged)')!r} maps to "
                          f"no precision of {spec.name} ({', '.join(spec.precisions)}); name one with --precision",
                          param="precision")
    mnbt = max_num_batched_tokens or v.get("max_num_batched_tokens") or 8192
    bs = block_size or v.get("block_size")
    hybrid = {}
    if "prefix_caching" in v:
        hybrid["prefix_caching"] = v["prefix_caching"] == "True"
    if "gdn_backend" in v:  # only FlashInfer's prefill exports checkpoints; the others plan alike
        hybrid["gdn_prefill_backend"] = "flashinfer" if v["gdn_backend"] == "FlashInfer" else "triton"
    settings = V.Settings(max_num_batched_tokens=mnbt, async_scheduling=async_scheduling, block_size=bs, **hybrid)
    tp = v.get("tp", 1)
    p = plan(spec, context, precision=prec, settings=settings, tp=tp)
    bpr = p.blocks_per_request
    rows: list[Row] = []
    ln = facts.lines.get
    rows.append(Row("max_model_len", f"{context:,}", f"{p.context:,}", None, ln("max_model_len")))
    rows.append(Row("blocks per request", "-", f"{bpr:,} ({p.bytes_per_block:,} B each)", None))
    state = [pg for g in p.groups if g.kind == "state" for pg in g.pages]
    if "attn_block_size" in v:
        n = v["attn_block_size"]
        rows.append(Row("attention block size (hybrid)", f"{n:,} tokens", f"{p.settings['block_size']:,} tokens",
                        n == p.settings["block_size"], ln("attn_block_size")))
    if "mamba_padding_pct" in v and state:
        real, padded = state[0].real_page_bytes, state[0].page_bytes
        pct = 100 * (padded - real) / real
        rows.append(Row("state page padding", f"{v['mamba_padding_pct']:.2f}%",
                        f"{pct:.2f}% ({real:,} -> {padded:,} B)", f"{pct:.2f}" == f"{v['mamba_padding_pct']:.2f}",
                        ln("mamba_padding_pct")))

    blocks_lo = blocks_hi = None
    if "available_gib" in v:
        x = v["available_gib"]
        lo_b, hi_b = math.ceil((x - 0.005) * GIB), math.floor((x + 0.005) * GIB)
        blocks_lo, blocks_hi = p.num_blocks(max(lo_b, 0)), p.num_blocks(hi_b)
        rows.append(Row("KV pool per GPU (GiB, 2 decimals)", f"{x:.2f} GiB", f"{lo_b:,} .. {hi_b:,} B", None,
                        ln("available_gib")))
        rows.append(Row("blocks in the pool", "-", f"{blocks_lo:,} .. {blocks_hi:,}", None))
    if "gpu_blocks" in v:
        n = v["gpu_blocks"]
        ok = None if blocks_lo is None else blocks_lo <= n <= blocks_hi
        rows.append(Row("# GPU blocks", f"{n:,}", f"{blocks_lo:,} .. {blocks_hi:,}" if blocks_lo is not None else "-",
                        ok, ln("gpu_blocks")))
        blocks_lo = blocks_hi = n
    if "cache_tokens" in v:
        t = v["cache_tokens"]
        if blocks_lo is not None:
            lo, hi = p.cache_tokens(blocks_lo), p.cache_tokens(blocks_hi)
            rows.append(Row("GPU KV cache size (tokens)", f"{t:,}", f"{lo:,} .. {hi:,}" if lo != hi else f"{lo:,}",
                            lo <= t <= hi, ln("cache_tokens")))
        else:  # no pool in the log: the block counts the logged tokens stand for
            n = [b for b in range(max(0, t * bpr // context - 2), t * bpr // context + 3) if p.cache_tokens(b) == t]
            rows.append(Row("GPU KV cache size (tokens)", f"{t:,}",
                            f"{n[0]:,} blocks" if n else "no whole block count gives it", bool(n), ln("cache_tokens")))
            if n:
                blocks_lo, blocks_hi = n[0], n[-1]
    if "concurrency" in v:
        c = v["concurrency"]
        lc = v.get("concurrency_context", context)
        same_len = lc == context
        if blocks_lo is not None and same_len:
            lo, hi = p.max_concurrency(blocks_lo), p.max_concurrency(blocks_hi)
            text_k = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x .. {hi:.2f}x"
            rows.append(Row(f"Maximum concurrency at {lc:,}", f"{c:.2f}x", text_k,
                            round(lo, 2) <= c <= round(hi, 2), ln("concurrency")))
        else:
            rows.append(Row(f"Maximum concurrency at {lc:,}", f"{c:.2f}x", "-", None, ln("concurrency")))
    version = v.get("version")
    notes = []
    if version and version != V.VERSION:
        notes.append(f"the log is from vLLM {version}; kvcalc models {V.VERSION}: planner changes between versions "
                     "can move these figures")
    compared = [r for r in rows if r.agrees is not None]
    if not compared:
        notes.append("the log has no figure kvcalc can compare (it needs the pool, the block count or the token "
                     "count together with max_model_len)")
    verdict = "agrees" if compared and all(r.agrees for r in compared) else ("differs" if compared else "nothing to compare")
    return {
        "file": source,
        "model": spec.name,
        "log_model": v.get("model_id"),
        "log_vllm_version": version,
        "kvcalc_vllm_version": V.VERSION,
        "precision": prec,
        "context_tokens": context,
        "settings": {"max_num_batched_tokens": mnbt, "async_scheduling": async_scheduling, "tp": tp,
                     "block_size": bs, **hybrid},
        "parsed": v,
        "rows": [r.__dict__ for r in rows],
        "notes": notes,
        "verdict": verdict,
    }
