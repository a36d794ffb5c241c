"""TensorRT-LLM's start-up log (PyTorch backend), as ``kvcalc check-log`` reads it.

Lines read (TensorRT-LLM 1.1 wording; the Python lines ``[TRT-LLM] [I]``, the C++ ones ``[TensorRT-LLM][INFO]``):

* ``TensorRT-LLM version: V``; ``max_seq_len is not specified, using inferred value N`` (model_engine.py)
* ``Both free_gpu_memory_fraction and max_tokens are set (to F and N, respectively)`` (resource_manager.py
  ``calculate_max_num_blocks``): N is the profiling run's cache before the ``Peak memory`` line, KvCacheCreator's
  max_tokens after it
* ``Number of tokens per block: N.`` and ``[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N).``
  (kvCacheManager.cpp ``allocatePools``: X the pool's bytes / 2^30, N its blocks x tokens per block), once for the
  profiling run's cache and once for the pool
* ``Peak memory during memory usage profiling (torch + non-torch): P GiB, available KV cache memory when calculating
  max tokens: M GiB, fraction is set F, kv size is B. device total memory T GiB, , tmp kv_mem A GiB`` (_util.py
  ``_cal_max_memory``)
* ``Attention window size W exceeds upper bound U ...`` / ``Adjusted max_seq_len to U`` (the window cap) and
  ``max_seq_len=S, max_num_requests=R, max_num_tokens=N, max_batch_size=B``
* ``max_tokens=N is provided`` (a user's max_tokens), ``Max KV cache blocks per sequence: N`` (older: pages) and
  ``secondary blocks=N`` (the host pool; C++ BlockManager)

The log prints GiB to two decimals, so the memory it reports stands for a range; the rows compare the token and
block counts exactly where the log gives what they are computed from (the kv size, the profiling run's tokens,
max_tokens), and as a range where only the rounded GiB figures do.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ...units import GIB
from ..logs import LogFacts, LogReader, Quantity, Row
from . import sizing as Z

_PEAK = "Peak memory during memory usage profiling"
#: figures read again after the Peak line (the pool's, not the profiling run's)
_FINAL = ("both_tokens", "allocated_gib", "allocated_tokens", "seq_len_line", "adjusted_seq_len", "tokens_per_block",
          "secondary_blocks", "max_batch_size", "max_num_tokens", "blocks_per_seq", "estimated_gib")


class TrtllmLogReader(LogReader):
    engine = "trtllm"
    patterns = {
        "version": re.compile(r"TensorRT-LLM version: ([\w.+-]{1,40})"),
        "inferred_seq_len": re.compile(r"max_seq_len is not specified, using inferred value (\d+)"),
        "window_asked": re.compile(r"Attention window size (\d+) exceeds upper bound"),
        "both_tokens": re.compile(r"Both free_gpu_memory_fraction and max_tokens are set \(to [\d.e-]+ and (\d+)"),
        "tokens_per_block": re.compile(r"Number of tokens per block: (\d+)\."),
        "allocated_gib": re.compile(r"\[MemUsageChange\] Allocated ([\d.]+) GiB for max tokens in paged KV cache"),
        "allocated_tokens": re.compile(r"for max tokens in paged KV cache \((\d+)\)"),
        "seq_len_line": re.compile(r"(?<![\w.])max_seq_len=(\d+), max_num_requests="),
        "max_num_tokens": re.compile(r"max_num_requests=\d+, max_num_tokens=(\d+)"),
        "max_batch_size": re.compile(r"max_num_tokens=\d+, max_batch_size=(\d+)"),
        "peak_gib": re.compile(r"Peak memory during memory usage profiling \(torch \+ non-torch\): ([\d.]+) GiB"),
        "available_gib": re.compile(r"available KV cache memory when calculating max tokens: ([\d.]+) GiB"),
        "fraction": re.compile(r"fraction is set ([\d.]+)"),
        "kv_size": re.compile(r"kv size (?:per token )?is (\d+)"),
        "device_gib": re.compile(r"device total memory ([\d.]+) GiB"),
        "tmp_gib": re.compile(r"(?:tmp kv_mem|temporary kv cache memory during profiling) ([\d.]+) GiB"),
        "adjusted_seq_len": re.compile(r"Adjusted max_seq_len to (\d+)"),
        "max_tokens_given": re.compile(r"max_tokens=(\d+) is provided"),
        "secondary_blocks": re.compile(r"secondary blocks=(\d+)"),
        "blocks_per_seq": re.compile(r"Max KV cache (?:pages|blocks) per sequence: (\d+)"),
        "estimated_gib": re.compile(r"Estimated max memory in KV cache : ([\d.]+) GiB"),
    }
    hints = {"version": "TensorRT-LLM version: ", "inferred_seq_len": "using inferred value ",
             "window_asked": "Attention window size ", "both_tokens": "Both free_gpu_memory_fraction and max_tokens",
             "tokens_per_block": "Number of tokens per block: ", "allocated_gib": "[MemUsageChange] Allocated ",
             "allocated_tokens": "for max tokens in paged KV cache (", "seq_len_line": "max_num_requests=",
             "max_num_tokens": "max_num_tokens=", "max_batch_size": "max_batch_size=", "peak_gib": _PEAK,
             "available_gib": "available KV cache memory when calculating max tokens: ",
             "fraction": "fraction is set ", "kv_size": "kv size ", "device_gib": "device total memory ",
             "tmp_gib": " GiB", "adjusted_seq_len": "Adjusted max_seq_len to ", "max_tokens_given": " is provided",
             "secondary_blocks": "secondary blocks=", "blocks_per_seq": "Max KV cache ",
             "estimated_gib": "Estimated max memory in KV cache : "}
    ints = frozenset({"inferred_seq_len", "window_asked", "both_tokens", "tokens_per_block", "allocated_tokens",
                      "seq_len_line", "max_num_tokens", "max_batch_size", "kv_size", "adjusted_seq_len",
                      "max_tokens_given", "secondary_blocks", "blocks_per_seq"})
    floats = frozenset({"allocated_gib", "peak_gib", "available_gib", "fraction", "device_gib", "tmp_gib",
                        "estimated_gib"})
    minimums = {"tokens_per_block": 1, "kv_size": 1}
    figures = ("allocated_tokens", "kv_size", "peak_gib")
    looked_for = "'[MemUsageChange] Allocated ... GiB for max tokens in paged KV cache', 'kv size is'"
    no_context = "the log states no max_seq_len (max_seq_len=..., or 'using inferred value N')"
    model_hint = "NAME (the TensorRT-LLM log does not name the model)"
    run_start = "TensorRT-LLM version: "

    def parse(self, text: str, source: str = "log") -> LogFacts:
        """The first of each figure, then, after the Peak line, the pool's own (``final_*``): the profiling run
        logs the same lines for its temporary cache first."""
        facts = super().parse(text, source)
        at = text.find(_PEAK)
        if at < 0 or "peak_gib" not in facts.values:
            # no profiling line: the pool is the last one allocated (a log of the profiling run alone is said so)
            last = text.rfind("[MemUsageChange] Allocated ")
            before_last = text.rfind("[MemUsageChange] Allocated ", 0, last) if last >= 0 else -1
            if before_last < 0:
                facts.values.update({f"final_{k}": facts.values[k] for k in _FINAL if k in facts.values})
                facts.lines.update({f"final_{k}": facts.lines[k] for k in _FINAL if k in facts.lines})
                return facts
            facts.notes.append("the log has two pools and no 'Peak memory' line: the last one is read as the pool")
            at = text.find("\n", before_last) + 1
        start = text.rfind("\n", 0, at) + 1
        before = text.count("\n", 0, start)
        after = super().parse(text[start:], source)
        for k in _FINAL:
            if k in after.values:
                facts.values[f"final_{k}"] = after.values[k]
                facts.lines[f"final_{k}"] = after.lines[k] + before
        return facts

    def context(self, facts: LogFacts) -> int | None:
        """The pool's max_seq_len (after the window cap): the requests the pool serves are at most that long."""
        v = facts.values
        return v.get("final_seq_len_line") or v.get("final_adjusted_seq_len") or self._asked(facts)

    def _asked(self, facts: LogFacts) -> int | None:
        v = facts.values
        return v.get("inferred_seq_len") or v.get("window_asked") or v.get("seq_len_line")

    def kv_dtype(self, facts: LogFacts) -> str | None:
        return None  # the log does not state it: auto, the model's dtype

    def precision_for(self, spec, dtype: str | None) -> str | None:
        """auto -> the model's dtype: its default precision where that is bf16 or fp16, else bf16 (or fp16)."""
        names = set(spec.precisions)
        for cand in (spec.default_precision, "bf16", "fp16"):
            if cand in ("bf16", "fp16") and cand in names:
                return cand
        return None

    def settings(self, facts: LogFacts, given: dict, spec=None):
        from .. import get_engine

        engine = get_engine(self.engine)
        v = facts.values
        vals = {k: given.get(k) if given.get(k) is not None else v.get(f"final_{k}", v.get(k))
                for k in ("tokens_per_block", "max_num_tokens", "max_batch_size")}
        vals["max_seq_len"] = given.get("max_seq_len") or self._asked(facts)
        if "fraction" in v:
            vals["free_gpu_memory_fraction"] = v["fraction"]
        if "peak_gib" in v:
            vals["peak_memory_gib"] = v["peak_gib"]
        if "device_gib" in v:
            vals["device_memory_gib"] = v["device_gib"]
        if "max_tokens_given" in v:
            vals["max_tokens"] = v["max_tokens_given"]
        vals.update({k: x for k, x in given.items() if x is not None})
        s = engine.settings({k: x for k, x in vals.items() if x is not None})  # each value checked
        if "disable_overlap_scheduler" not in given:
            s = replace(s, disable_overlap_scheduler=self._overlap_off(facts, s))
        used = {k: getattr(s, k) for k in ("tokens_per_block", "max_num_tokens", "max_batch_size", "max_seq_len",
                                           "free_gpu_memory_fraction", "disable_overlap_scheduler",
                                           "peak_memory_gib", "device_memory_gib", "max_tokens")}
        return s, used

    def _overlap_off(self, facts: LogFacts, s) -> bool:
        """Whether the overlap scheduler was off: the profiling run's logged tokens are those of one extra token
        a request (off), not two (on, the default)."""
        logged = facts.values.get("both_tokens") if "peak_gib" in facts.values else None
        seq, n, tpb = s.max_seq_len, s.max_num_tokens, s.tokens_per_block
        if logged is None or seq is None:
            return False
        on = Z.estimation_tokens(n, seq, tpb, True)[1]
        off = Z.estimation_tokens(n, seq, tpb, False)[1]
        return logged == off and logged != on

    def notes(self, facts: LogFacts, p) -> list[str]:
        out = []
        s = p.settings
        if s.disable_overlap_scheduler:
            out.append("the overlap scheduler was off: the profiling run's cache is one extra token a request, as "
                       "the log's first max_tokens shows")
        if s.peak_memory_gib is not None:
            out.append("the available memory is computed from the log's device total and peak, printed to 0.01 GiB: "
                       "a range; the pool's tokens and blocks from its exact max_tokens")
        return out

    def compare(self, facts: LogFacts, p) -> list[Row]:
        v, ln = facts.values, facts.lines
        rows = []

        def row(figure, key, mine, exact=True, unit=""):
            if key not in v:
                return
            logged = v[key]
            if isinstance(mine, tuple):
                lo, hi = mine
                agrees = lo <= logged <= hi
                rows.append(Row(figure, Quantity(logged, unit=unit), Quantity(lo, hi, unit=unit, collapse=True),
                                agrees, ln.get(key)))
                return
            agrees = logged == mine if exact else None
            rows.append(Row(figure, Quantity(logged, unit=unit), Quantity(mine, unit=unit), agrees, ln.get(key)))

        tpb = p.tokens_per_block
        row("kv size per token", "kv_size", p.creator_bytes_per_token, unit="B")
        row("tokens per block", "final_tokens_per_block", tpb)
        if "peak_gib" in v:
            row("profiling run's cache", "both_tokens", p.estimation_tokens, unit="tokens")
            row("tmp kv_mem", "tmp_gib", float(Z.gib(p.estimation_bytes)), unit="GiB")
        memory = self._memory(v, p)
        if memory is not None:
            lo, hi = memory
            row("available KV cache memory", "available_gib", (float(Z.gib(lo)), float(Z.gib(hi))), unit="GiB")
            if not p.settings.max_tokens and not p.settings.max_gpu_total_bytes:  # the same memory, logged again
                row("Estimated max memory", "final_estimated_gib", (float(Z.gib(lo)), float(Z.gib(hi))), unit="GiB")
            row("max_tokens", "final_both_tokens", (lo // p.creator_bytes_per_token, hi // p.creator_bytes_per_token),
                unit="tokens")
        max_tokens = v.get("final_both_tokens")
        if max_tokens is not None:
            blocks = Z.primary_blocks(max_tokens, tpb)
            row("tokens in the paged KV cache", "final_allocated_tokens", blocks * tpb, unit="tokens")
            row("Allocated", "final_allocated_gib", float(Z.gib(blocks * tpb * p.manager_bytes_per_token)),
                unit="GiB")
            seq = p.settings.max_seq_len
            row("max_seq_len", "final_seq_len_line", min(seq, blocks * tpb) if seq else blocks * tpb, unit="tokens")
            if seq and seq > blocks * tpb:
                row("Adjusted max_seq_len", "final_adjusted_seq_len", blocks * tpb, unit="tokens")
        elif "final_allocated_tokens" in v:
            tokens = v["final_allocated_tokens"]
            row("Allocated", "final_allocated_gib", float(Z.gib(tokens * p.manager_bytes_per_token)), unit="GiB")
        if "final_blocks_per_seq" in v and not p.windows:  # BlockManager: ceil(max_seq_len / tokens_per_block)
            row("blocks per sequence", "final_blocks_per_seq", -(-p.context // tpb))
        if "final_secondary_blocks" in v and p.settings.host_cache_size:
            row("secondary blocks", "final_secondary_blocks",
                Z.secondary_blocks(p.settings.host_cache_size, p.manager_bytes_per_token, tpb))
        return rows

    @staticmethod
    def _memory(v: dict, p) -> tuple[int, int] | None:
        """``int((total - peak + temporary) x fraction)`` over the range the log's two-decimal total and peak stand
        for (each +- 0.005 GiB)."""
        s = p.settings
        if s.device_memory_gib is None or s.peak_memory_gib is None:
            return None
        f = s.fraction
        half = 0.005 * GIB  # the log's two decimals (a figure given on the command line is read the same way)
        t, peak = s.device_memory_gib * GIB, s.peak_memory_gib * GIB
        lo = Z.available_memory(int(t - half), int(peak + half), p.estimation_bytes, f)
        hi = Z.available_memory(int(t + half), int(peak - half), p.estimation_bytes, f)
        return lo, hi


READER = TrtllmLogReader()
