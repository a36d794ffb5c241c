"""llama.cpp's start-up log, as ``kvcalc check-log`` reads it: llama-server's, llama-cli's, llama-cpp-python's
(``verbose=True``) and ollama's server log (which carries its runner's llama.cpp lines as they are).

Lines read (llama.cpp 0c1e57098 wording, the format strings of the files named):

* ``print_info: arch = llama``, ``print_info: general.name = ...``, ``print_info: n_ctx_train = N``
  (llama-model.cpp print_info); ``llama_model_loader: loaded meta data with ... from PATH (version ...)``
* ``load_tensors: offloaded N/M layers to GPU`` and ``load_tensors: <buffer> model buffer size = X MiB``
  (llama-model.cpp load_tensors)
* ``llama_context: n_seq_max = S``, ``n_ctx``, ``n_ctx_seq``, ``n_batch``, ``n_ubatch``, ``flash_attn``,
  ``kv_unified``, ``n_rs_seq`` (llama-context.cpp llama_context::llama_context)
* ``llama_kv_cache_iswa: using full-size SWA cache ...`` and ``creating non-SWA / SWA KV cache, size = N cells``
  (llama-kv-cache-iswa.cpp)
* every ``llama_kv_cache: <buffer> KV buffer size = X MiB`` and ``llama_kv_cache: size = X MiB (N cells, L layers,
  S/T seqs), K (t): X MiB, V (t): X MiB`` (llama-kv-cache.cpp), and ``llama_memory_recurrent: <buffer> RS buffer
  size = X MiB`` / ``size = X MiB (N cells, L layers, S seqs R rs_seq), R (f32): ..., S (f32): ...``
  (llama-memory-recurrent.cpp)

The log states the context's parameters, so the plan is made from them (the C API's parameters, every one given):
the figures that follow from them are checked, each to the precision llama.cpp prints it (MiB, 2 decimals: the
buffer lines of the double, the size lines of a float, as llama.cpp computes each).
"""

from __future__ import annotations

import bisect
import re

from ...errors import KvcalcError, quote
from ..logs import MAX_LINE, NOTHING, LogFacts, LogReader, Quantity, Row, word
from .options import CACHE_TYPE_NAMES, VERSION

_EQ = r"[^\S\n]*=[^\S\n]*"
_NUM = r"(\d{1,18})"
_MIB = r"(\d{1,15}\.\d{2}) MiB"

#: the lines read in order, one record each (a run's caches and model buffers), each found by its plain text
_LINES = (
    ("create", "llama_kv_cache_iswa: creating ",
     re.compile(r"llama_kv_cache_iswa: creating +(non-SWA|SWA) KV cache, size = " + _NUM + " cells")),
    ("kv_buffer", " KV buffer size = ", re.compile(r"llama_kv_cache: +(\S{1,64}) KV buffer size =[^\S\n]*" + _MIB)),
    ("kv_size", "llama_kv_cache: size = ",
     re.compile(r"llama_kv_cache: size =[^\S\n]*" + _MIB + r" \([^\S\n]*" + _NUM + r" cells,[^\S\n]*" + _NUM +
                r" layers,[^\S\n]*" + _NUM + "/" + _NUM + r" seqs\), K \((\w{1,8})\):[^\S\n]*" + _MIB +
                r", V \((\w{1,8})\):[^\S\n]*" + _MIB)),
    ("rs_buffer", " RS buffer size = ",
     re.compile(r"llama_memory_recurrent: +(\S{1,64}) RS buffer size =[^\S\n]*" + _MIB)),
    ("rs_size", "llama_memory_recurrent: size = ",
     re.compile(r"llama_memory_recurrent: size =[^\S\n]*" + _MIB + r" \([^\S\n]*" + _NUM + r" cells,[^\S\n]*" + _NUM
                + r" layers,[^\S\n]*" + _NUM + r" seqs(?:[^\S\n]*" + _NUM + r" rs_seq)?\), R \(f32\):[^\S\n]*" + _MIB +
                r", S \(f32\):[^\S\n]*" + _MIB)),
    ("model_buffer", " model buffer size = ",
     re.compile(r"load_tensors: +(\S{1,64}) model buffer size =[^\S\n]*" + _MIB)),
)
#: the most such lines one run may hold (a model of 1,000 layers logs a handful: one cache of each kind per buffer)
MAX_RECORDS = 256

#: the buffers kvcalc plans: the CPU's, CUDA's and ROCm's (HIP builds name ggml-cuda's devices so)
_PLANNED_DEVICE = re.compile(r"(CPU|CUDA\d+|ROCm\d+)")
_FA = {"auto": "auto", "enabled": "on", "disabled": "off"}


class LlamaCppLogReader(LogReader):
    engine = "llama.cpp"
    patterns = {
        "gguf_path": word("llama_model_loader: loaded meta data with", r"[^\n]*? from ([^\n]{1,4096}?) \(version"),
        "arch": word("print_info: arch", _EQ + r"([\w-]{1,64})"),
        "general_name": word("print_info: general.name", _EQ + r"([^\n]{1,256}?)[^\S\n]*$", re.M),
        "n_ctx_train": word("print_info: n_ctx_train", _EQ + _NUM),
        "version": word("build: ", r"\d{1,9} \(([0-9a-f]{7,40})\)"),
        "ngl": word("load_tensors: offloaded ", r"(\d{1,9})/\d{1,9} layers to GPU"),
        "ngl_max": word("load_tensors: offloaded ", r"\d{1,9}/(\d{1,9}) layers to GPU"),
        "n_seq_max": word("llama_context: n_seq_max", _EQ + _NUM),
        "n_ctx": word("llama_context: n_ctx", r"[^\S\n]+=[^\S\n]*" + _NUM),
        "n_ctx_seq": word("llama_context: n_ctx_seq", r"[^\S\n]+=[^\S\n]*" + _NUM),
        "n_batch": word("llama_context: n_batch", _EQ + _NUM),
        "n_ubatch": word("llama_context: n_ubatch", _EQ + _NUM),
        "flash_attn": word("llama_context: flash_attn", _EQ + r"(auto|enabled|disabled)"),
        "kv_unified": word("llama_context: kv_unified", _EQ + r"(true|false)"),
        "n_rs_seq": word("llama_context: n_rs_seq", _EQ + _NUM),
        "swa_full": word("llama_kv_cache_iswa: using full-size SWA cache", "()"),
        "kv_size": word("llama_kv_cache: size = ", r"[^\S\n]*(\d{1,15}\.\d{2}) MiB"),
        "rs_size": word("llama_memory_recurrent: size = ", r"[^\S\n]*(\d{1,15}\.\d{2}) MiB"),
    }
    hints = {"gguf_path": "llama_model_loader: loaded meta data", "arch": "print_info: arch",
             "general_name": "print_info: general.name", "n_ctx_train": "print_info: n_ctx_train",
             "version": "build: ", "ngl": "load_tensors: offloaded ", "ngl_max": "load_tensors: offloaded ",
             **{k: f"llama_context: {k}" for k in ("n_seq_max", "n_ctx", "n_ctx_seq", "n_batch", "n_ubatch",
                                                   "flash_attn", "kv_unified", "n_rs_seq")},
             "swa_full": "llama_kv_cache_iswa: using full-size SWA cache",
             "kv_size": "llama_kv_cache: size = ", "rs_size": "llama_memory_recurrent: size = "}
    ints = frozenset({"n_ctx_train", "ngl", "ngl_max", "n_seq_max", "n_ctx", "n_ctx_seq", "n_batch", "n_ubatch",
                      "n_rs_seq"})
    floats = frozenset({"kv_size", "rs_size"})
    minimums = {"n_seq_max": 1, "n_ctx": 1, "n_ctx_seq": 1, "n_batch": 1, "n_ubatch": 1}
    figures = ("kv_size", "rs_size")
    run_start = "llama_model_loader: loaded meta data"
    model_hint = "FILE.gguf, the GGUF the log loaded, or a config NAME"
    looked_for = "'llama_kv_cache: size = ...', 'llama_memory_recurrent: size = ...'"
    no_context = "the log states no 'llama_context: n_ctx_seq' line"
    nothing_note = ("the log has no figure kvcalc can check (it needs the llama_context lines and the "
                    "'llama_kv_cache: size' or 'llama_memory_recurrent: size' lines)")

    # ---- reading ------------------------------------------------------------------------------------------
    def parse(self, text: str, source: str = "log") -> LogFacts:
        """The base reader's figures, then every cache and model-buffer line of the same run, in order."""
        facts = super().parse(text, source)
        if not self.recognises(facts):
            return facts
        lo, hi = self._run_span(text)
        facts.records = self._records(text, lo, hi, source)
        return facts

    def _run_span(self, text: str) -> tuple[int, int]:
        """The run the base reader read: the first whose lines hold a size line (its start line to the next)."""
        starts = self._run_starts(text)
        cuts = [0] + [text.rfind("\n", 0, at) + 1 for at in starts[1:]] + [len(text)]
        found = [p for p in (text.find("llama_kv_cache: size = "), text.find("llama_memory_recurrent: size = "))
                 if p >= 0]
        run = bisect.bisect_right(cuts, min(found)) - 1 if found else len(cuts) - 2
        return cuts[run], cuts[run + 1]

    def _records(self, text: str, lo: int, hi: int, source: str) -> list[dict]:
        """Each cache or model-buffer line of text[lo:hi] with its line number: one pass, each hint found once per
        line (a line is read up to MAX_LINE characters)."""
        out: list[dict] = []
        nxt = {name: text.find(hint, lo, hi) for name, hint, _ in _LINES}
        line_no, counted = 1 + text.count("\n", 0, lo), lo
        while True:
            live = [p for p in nxt.values() if p >= 0]
            if not live:
                return out
            at = min(live)
            start = text.rfind("\n", lo, at) + 1 or lo
            end = text.find("\n", at, hi)
            end = hi if end < 0 else end
            line = text[start:min(end, start + MAX_LINE)]
            line_no += text.count("\n", counted, start)
            counted = start
            for name, hint, pat in _LINES:
                m = pat.search(line) if hint in line else None
                if m is not None:
                    if len(out) >= MAX_RECORDS:
                        raise KvcalcError(f"{source}:{line_no}: more than {MAX_RECORDS} cache and buffer lines in one "
                                          "llama.cpp start: not a log llama.cpp writes", param="file")
                    out.append({"what": name, "line": line_no, "groups": list(m.groups())})
            for name, hint, _ in _LINES:
                if 0 <= nxt[name] <= end:
                    nxt[name] = text.find(hint, end, hi)

    def caches(self, facts: LogFacts) -> tuple[list[dict], list[dict]]:
        """The run's caches in llama.cpp's order, each with its buffer lines and its size line, and its model
        buffers."""
        caches, models = [], []
        kind, created, buffers = "kv", None, []  # the cache being logged: its kind, its created cells, its buffers
        for r in facts.records:
            what, g = r["what"], r["groups"]
            if what == "create":
                kind, created, buffers = ("kv" if g[0] == "non-SWA" else "swa"), (int(g[1]), r["line"]), []
            elif what in ("kv_buffer", "rs_buffer"):
                buffers.append((g[0], g[1], r["line"]))
            elif what == "kv_size":
                caches.append({"kind": kind, "line": r["line"], "size": g[0], "cells": int(g[1]),
                               "layers": int(g[2]), "seqs": int(g[3]), "streams": int(g[4]), "type_k": g[5],
                               "k": g[6], "type_v": g[7], "v": g[8], "created_cells": created, "buffers": buffers})
                kind, created, buffers = "kv", None, []
            elif what == "rs_size":
                caches.append({"kind": "recurrent", "line": r["line"], "size": g[0], "cells": int(g[1]),
                               "layers": int(g[2]), "seqs": int(g[3]), "rs_seq": int(g[4] or 0), "r": g[5], "s": g[6],
                               "buffers": buffers})
                kind, created, buffers = "kv", None, []
            elif what == "model_buffer":
                models.append({"buffer": g[0], "mib": g[1], "line": r["line"]})
        return caches, models

    # ---- the plan's inputs --------------------------------------------------------------------------------
    def model_id(self, facts: LogFacts) -> str | None:
        name = facts.values.get("general_name")
        if name and name != "n/a":
            return name
        path = facts.values.get("gguf_path")
        return path.rsplit("/", 1)[-1] if path else None

    def version(self, facts: LogFacts) -> str | None:
        v = facts.values.get("version")
        if v and (VERSION.startswith(v) or v.startswith(VERSION)):
            return VERSION  # llama-server prints the commit's first 8 hex digits
        return v

    def context(self, facts: LogFacts) -> int | None:
        """n_ctx_seq; where an older llama.cpp does not log it, n_ctx over the streams."""
        v = facts.values
        if "n_ctx_seq" in v or "n_ctx" not in v:
            return v.get("n_ctx_seq")
        unified = v.get("kv_unified", "false") == "true"
        return v["n_ctx"] if unified else v["n_ctx"] // v.get("n_seq_max", 1) or None

    def kv_dtype(self, facts: LogFacts) -> str | None:
        caches, _ = self.caches(facts)
        kv = next((c for c in caches if c["kind"] != "recurrent"), None)
        if kv is None:
            return None
        return kv["type_k"] if kv["type_k"] == kv["type_v"] else f"{kv['type_k']}/{kv['type_v']}"

    def precision_for(self, spec, dtype: str | None) -> str | None:
        """The cache types as kvcalc's ggml precision (``q8_0``, ``q8_0/f16``); no stated type: the model's own."""
        if dtype is None or dtype == "auto":
            return spec.default_precision
        return dtype if all(p in CACHE_TYPE_NAMES for p in dtype.split("/")) else None

    def check(self, facts: LogFacts, source: str) -> None:
        caches, models = self.caches(facts)
        for c in caches:
            for dev, _, line in c["buffers"]:
                if not _PLANNED_DEVICE.fullmatch(dev):
                    raise KvcalcError(f"{source}:{line}: a {quote(dev)} KV buffer: kvcalc plans llama.cpp's CPU, CUDA "
                                      "and ROCm buffers (not Metal, Vulkan or SYCL: their alignment differs)",
                                      param="file")
        for key in ("n_ctx", "n_seq_max"):
            if key not in facts.values:
                raise KvcalcError(f"{source}: the log has llama.cpp's cache lines but no 'llama_context: {key}' "
                                  "line: kvcalc plans from the context's parameters", param="file")
        devices = {dev for c in caches for dev, _, _ in c["buffers"] if dev != "CPU"}
        if len(devices) > 1:
            raise KvcalcError(f"{source}: KV buffers on {len(devices)} GPUs ({', '.join(sorted(devices))}): kvcalc "
                              "plans llama.cpp on one GPU (--tensor-split is not modelled)", param="file")

    def settings(self, facts: LogFacts, given: dict, spec=None):
        from .settings import Settings

        v = facts.values
        caches, _ = self.caches(facts)
        kv = next((c for c in caches if c["kind"] != "recurrent"), None)
        devices = {dev for c in caches for dev, _, _ in c["buffers"]}
        gpu = sorted(d for d in devices if d != "CPU")
        ngl = v.get("ngl")
        if ngl is None:
            ngl = -1 if gpu else 0
        kw = {"frontend": "c-api", "ctx_size": v["n_ctx"], "parallel": v["n_seq_max"],
              "kv_unified": v.get("kv_unified", "false") == "true", "batch_size": v.get("n_batch"),
              "ubatch_size": v.get("n_ubatch"), "flash_attn": _FA.get(v.get("flash_attn", "auto")),
              "swa_full": "swa_full" in v, "n_gpu_layers": ngl,
              "no_kv_offload": bool(ngl) and bool(caches) and not gpu, "n_rs_seq": v.get("n_rs_seq")}
        if kv is not None:
            kw.update(cache_type_k=kv["type_k"], cache_type_v=kv["type_v"])
        if gpu and gpu[0].startswith("ROCm"):
            kw["arch"] = "gfx"  # a HIP build: ggml-cuda's buffers named ROCm0 (engine.backend_of)
        from dataclasses import fields as _fields

        known = {f.name for f in _fields(Settings)}
        for k, x in given.items():
            if x is not None and k not in known:
                raise KvcalcError(f"{k}: not a setting of the llama.cpp engine (the log sets llama.cpp's own)",
                                  param=k)
        kw.update({k: x for k, x in given.items() if x is not None})
        settings = Settings(**{k: x for k, x in kw.items() if x is not None})
        used = {k: x for k, x in kw.items() if x is not None and k != "arch"}
        return settings, used

    # ---- the comparison -----------------------------------------------------------------------------------
    def compare(self, facts: LogFacts, p) -> list[Row]:
        from .layout import MIB, _f32_mib

        v, ln = facts.values, facts.lines.get
        a = p.allocation
        cp = a.cparams
        rows = [Row(k, Quantity(v[k]), Quantity(getattr(cp, k)), v[k] == getattr(cp, k), ln(k))
                for k in ("n_seq_max", "n_ctx", "n_ctx_seq", "n_batch", "n_ubatch") if k in v]
        if "arch" in v:  # the model planned must be the log's architecture
            rows.insert(0, Row("architecture", Quantity(v["arch"]), Quantity(a.model.arch), v["arch"] == a.model.arch,
                               ln("arch")))
        if "n_rs_seq" in v:
            rows.append(Row("n_rs_seq", Quantity(v["n_rs_seq"]), Quantity(cp.n_rs_seq), v["n_rs_seq"] == cp.n_rs_seq,
                            ln("n_rs_seq")))
        logged, models = self.caches(facts)
        planned = list(a.caches)
        if len(logged) != len(planned):
            rows.append(Row("caches", Quantity(", ".join(c["kind"] for c in logged) or "none"),
                            Quantity(", ".join(c.kind for c in planned) or "none"), False))
        buf = lambda b: f"{b / MIB:.2f}"  # noqa: E731  (double) / (1024.0 * 1024.0), "%8.2f"
        f32 = lambda b: f"{_f32_mib(b):.2f}"  # noqa: E731  the size lines' float
        for c, q in zip(logged, planned):
            name = {"kv": "KV cache", "swa": "SWA KV cache", "recurrent": "recurrent state"}[c["kind"]]
            if c["kind"] != q.kind:
                rows.append(Row(f"{name}: kind", Quantity(c["kind"]), Quantity(q.kind), False, c["line"]))
                continue
            if c.get("created_cells") is not None:
                rows.append(_eq(f"{name}: cells created", *c["created_cells"][:1], q.cells, c["created_cells"][1]))
            rows.append(_eq(f"{name}: cells", c["cells"], q.cells, c["line"]))
            rows.append(_eq(f"{name}: layers", c["layers"], q.logged_layers, c["line"]))
            rows.append(_eq(f"{name}: seqs", c["seqs"], cp.n_seq_max, c["line"]))
            if c["kind"] == "recurrent":
                rows.append(_eq(f"{name}: rs_seq", c["rs_seq"], cp.n_rs_seq, c["line"]))
            else:
                rows.append(_eq(f"{name}: streams", c["streams"], cp.n_stream, c["line"]))
            rows.append(_mib(f"{name}: size", c["size"], f32(q.size_bytes), q.size_bytes, c["line"]))
            if c["kind"] == "recurrent":
                rows.append(_mib(f"{name}: R (f32)", c["r"], f32(q.r_bytes), q.r_bytes, c["line"]))
                rows.append(_mib(f"{name}: S (f32)", c["s"], f32(q.s_bytes), q.s_bytes, c["line"]))
            else:
                rows.append(_mib(f"{name}: K ({c['type_k']})", c["k"], f32(q.k_bytes), q.k_bytes, c["line"]))
                rows.append(_mib(f"{name}: V ({c['type_v']})", c["v"], f32(q.v_bytes), q.v_bytes, c["line"]))
            plan_bufs = q.buffers()
            for dev, mib, line in c["buffers"]:
                b = plan_bufs.get(dev)
                rows.append(_mib(f"{name}: {dev} buffer", mib, None if b is None else buf(b), b, line))
            for dev in sorted(set(plan_bufs) - {d for d, _, _ in c["buffers"]}):
                rows.append(Row(f"{name}: {dev} buffer", Quantity(None, missing="not logged"),
                                Quantity(plan_bufs[dev], unit="B"), False, c["line"]))
        rows += self._model_rows(models, p)
        return rows

    @staticmethod
    def _model_rows(models: list[dict], p) -> list[Row]:
        """The weights' buffers where the plan knows the GGUF's tensors: the CPU_Mapped file range and the GPU's own
        buffer; any other buffer (CPU_REPACK, a host buffer) is shown, not checked."""
        from .layout import MIB

        w = getattr(p, "weights", None)
        rows = []
        for m in models:
            name = f"model buffer {m['buffer']}"
            if w is None:
                rows.append(Row(name, Quantity(float(m["mib"]), unit="MiB"), Quantity(None, missing="(give the GGUF)"),
                                None, m["line"]))
                continue
            planned = {"CPU_Mapped": w[2], p.allocation.cparams.device: w[1]}.get(m["buffer"])
            rows.append(_mib(name, m["mib"], None if planned is None else f"{planned / MIB:.2f}", planned,
                             m["line"], check=planned is not None))
        return rows

    def notes(self, facts: LogFacts, p) -> list[str]:
        out = ["planned with the log's own context parameters (n_ctx, n_seq_max, kv_unified, n_batch, n_ubatch, "
               "flash_attn, the cache types, the layers offloaded)"]
        if "ngl" not in facts.values and p.allocation.gpu_bytes:
            out.append("the log has no 'offloaded N/M layers to GPU' line: every layer was taken as offloaded")
        return out


def _eq(figure: str, logged: int, planned: int, line: int | None) -> Row:
    return Row(figure, Quantity(logged), Quantity(planned), logged == planned, line)


def _mib(figure: str, logged: str, planned: str | None, planned_bytes: int | None, line: int | None,
         check: bool = True) -> Row:
    """A MiB figure as logged (2 decimals) against the plan's bytes printed the same way."""
    if planned is None:
        return Row(figure, Quantity(float(logged), unit="MiB"), Quantity(None, missing="not planned"),
                   False if check else None, line)
    return Row(figure, Quantity(float(logged), unit="MiB"), Quantity(float(planned), unit="MiB", each=None),
               planned == logged if check else None, line)


READER = LlamaCppLogReader()
