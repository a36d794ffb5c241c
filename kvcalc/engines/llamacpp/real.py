"""``kvcalc verify --engine llama.cpp``: llama.cpp itself, through llama-cpp-python (the ``kvcalc[llamacpp]`` extra;
it builds llama.cpp from source), loads the GGUF with the parameters kvcalc planned, and what it allocated is held
to the plan:

* exactly: the context's parameters (``llama_n_ctx``, ``llama_n_ctx_seq``, ``llama_n_batch``, ``llama_n_ubatch``,
  ``llama_n_seq_max``), the model's tensor bytes (``llama_model_size``), and one sequence's state after a short
  prompt (``llama_state_seq_get_size``: every cache's cells at their row bytes, state.py) — the K / V / R / S row
  widths and types, to the byte;
* to the precision llama.cpp prints them: every cache's log lines (cells, layers, size, K / V / R / S MiB and each
  buffer's MiB), read by the check-log reader (logs.py).

Nothing here imports llama_cpp until a run asks for it; without it, one line says how to get it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import KvcalcError
from ..logs import Quantity, Row

PINNED = "0.3.36"
#: the prompt decoded into sequence 0 before its state is measured (tokens; fewer where the context is shorter)
PROMPT = 16
_FA = {"auto": -1, "disabled": 0, "enabled": 1}


@dataclass(frozen=True)
class LlamaVerify:
    model: str
    path: str
    context: int
    llama_cpp_python: str
    command: str
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def verdict(self) -> str:
        checked = [r for r in self.rows if r.agrees is not None]
        return "pass" if checked and all(r.agrees for r in checked) else "fail"

    def to_json(self) -> dict:
        from ...present.checklog import quantity_text

        return {"engine": "llama.cpp", "model": self.model, "path": self.path, "context_tokens": self.context,
                "llama_cpp_python": self.llama_cpp_python, "command": self.command,
                "rows": [{"figure": r.figure, "measured": quantity_text(r.logged), "kvcalc": quantity_text(r.kvcalc),
                          "agrees": r.agrees} for r in self.rows],
                "notes": list(self.notes), "verdict": self.verdict}


def _import():
    try:
        import llama_cpp
    except ImportError:
        raise KvcalcError("engine: verify {{engine}} llama.cpp loads the model through llama.cpp itself: install "
                          "llama-cpp-python (pip install 'kvcalc[llamacpp]'; it builds llama.cpp from source, several "
                          "minutes)", param="engine") from None
    return llama_cpp


def _check_file(spec) -> str:
    """The GGUF's path, where it holds its tensors' data (llama.cpp reads them)."""
    hp = getattr(spec, "gguf", None)
    if hp is None:
        raise KvcalcError("model: verify {{engine}} llama.cpp loads a GGUF file: give the .gguf (a config has no "
                          "tensors for llama.cpp to load)", param="model")
    path, w = hp.path, getattr(spec, "gguf_weights", None)
    if w is not None and not w.complete:
        raise KvcalcError(f"model: {path}: a metadata-only GGUF (its tensors' data ends past the file's "
                          f"{w.file_size:,} B): llama.cpp loads only whole files", param="model")
    return path


def planned(spec, context: int, *, precision=None, settings=None, cpu_build: bool = False):
    """The plan verify holds llama.cpp to, and what it noted: on a CPU build of llama.cpp every layer is on the
    CPU."""
    from dataclasses import replace

    from ...plan import plan
    from .. import get_engine

    notes = []
    settings = get_engine("llama.cpp").resolve(settings)
    if cpu_build:
        if settings.n_gpu_layers:
            notes.append(f"a CPU build of llama.cpp: planned with every layer on the CPU, not n_gpu_layers "
                         f"{settings.n_gpu_layers}")
        settings = replace(settings, n_gpu_layers=0)
    return plan(spec, context, precision=precision, engine="llama.cpp", settings=settings), notes


def measure(lib, path: str, p) -> dict:
    """Make ``p``'s context with llama.cpp (the module ``lib``: llama_cpp), decode a short prompt into sequence 0, and
    read what it made: the context's parameters, the model's bytes, the sequence's state, and every line it logged."""
    a, ln = p.allocation, p.launch
    cp = a.cparams
    version = getattr(lib, "__version__", "?")
    pieces: list[str] = []

    @lib.llama_log_callback
    def _log(level, text, user):  # noqa: ARG001
        pieces.append(text.decode("utf-8", errors="replace"))

    lib.llama_log_set(_log, None)
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = cp.n_gpu_layers if cp.device != "CPU" else 0
    model = lib.llama_model_load_from_file(path.encode(), mp)
    if not model:
        lib.llama_log_set(_quiet(lib), None)
        raise KvcalcError(f"model: llama.cpp {version} did not load {path}: {_last(pieces)}", param="model")
    ctx = None
    try:
        c = lib.llama_context_default_params()
        c.n_ctx, c.n_batch, c.n_ubatch, c.n_seq_max = p.n_ctx_asked, ln.n_batch, ln.n_ubatch, cp.n_seq_max
        c.kv_unified, c.swa_full, c.offload_kqv = cp.kv_unified, cp.swa_full, cp.offload_kqv
        c.flash_attn_type = _FA[ln.flash_attn]
        c.type_k, c.type_v = cp.type_k.type_id, cp.type_v.type_id
        ctx = lib.llama_init_from_model(model, c)
        if not ctx:
            raise KvcalcError(f"engine: llama.cpp {version} refused the planned context: {_last(pieces)}",
                              param="engine")
        out = {"n_ctx": lib.llama_n_ctx(ctx), "n_ctx_seq": lib.llama_n_ctx_seq(ctx), "n_batch": lib.llama_n_batch(ctx),
               "n_ubatch": lib.llama_n_ubatch(ctx), "n_seq_max": lib.llama_n_seq_max(ctx),
               "model_size": lib.llama_model_size(model)}
        n = min(PROMPT, cp.n_ctx_seq, cp.n_batch)
        n_vocab = max(lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model)), 2)
        tokens = (lib.llama_token * n)(*[1 + i % (n_vocab - 1) for i in range(n)])
        if lib.llama_decode(ctx, lib.llama_batch_get_one(tokens, n)) != 0:
            raise KvcalcError(f"engine: llama.cpp {version} did not decode a {n}-token prompt: {_last(pieces)}",
                              param="engine")
        out["prompt_tokens"] = n
        out["seq_state_bytes"] = lib.llama_state_seq_get_size(ctx, 0)
    finally:
        if ctx:
            lib.llama_free(ctx)
        lib.llama_model_free(model)
        lib.llama_log_set(_quiet(lib), None)  # _log is freed with this frame: llama.cpp must not call it again
    out["log"] = [x for x in "".join(pieces).splitlines() if _kept(x)]
    return out


def _kept(line: str) -> bool:
    """The log lines the comparison reads (the context's, the caches', the model buffers')."""
    return line.startswith(("llama_context: n_", "llama_kv_cache", "llama_memory_recurrent", "load_tensors: ",
                            "print_info: arch", "llama_model_loader: loaded"))


def compare(p, measured: dict, source: str = "llama.cpp") -> list[Row]:
    """What llama.cpp made (``measured``) beside the plan ``p``: exact figures first, then its log lines."""
    from . import state as S
    from .logs import READER

    a = p.allocation
    cp = a.cparams
    rows = [Row(k, Quantity(measured[k]), Quantity(getattr(cp, k)), measured[k] == getattr(cp, k))
            for k in ("n_ctx", "n_ctx_seq", "n_batch", "n_ubatch", "n_seq_max")]
    if p.weights is not None:
        size, want = measured["model_size"], p.weights[0]
        rows.append(Row("model size (llama_model_size, B)", Quantity(size, unit="B"), Quantity(want, unit="B"),
                        size == want))
    n = measured["prompt_tokens"]
    got, want = measured["seq_state_bytes"], S.seq_get_size(a.model, cp, n)
    rows.append(Row(f"sequence state after {n} tokens (llama_state_seq_get_size, B)", Quantity(got, unit="B"),
                    Quantity(want, unit="B"), got == want))
    facts = READER.parse("\n".join(measured["log"]) + "\n", source)
    if not READER.recognises(facts):
        raise KvcalcError(f"engine: llama.cpp logged no cache size line ({source})", param="engine")
    return rows + [r for r in READER.compare(facts, p) if not r.figure.startswith(("n_", "model buffer"))]


def run(spec, context: int, *, precision=None, settings=None) -> LlamaVerify:
    """Plan ``spec`` at ``context`` on llama.cpp, make the same context with llama.cpp, and compare."""
    path = _check_file(spec)
    lib = _import()
    version = getattr(lib, "__version__", "?")
    p, notes = planned(spec, context, precision=precision, settings=settings,
                       cpu_build=not lib.llama_supports_gpu_offload())
    rows = compare(p, measure(lib, path, p), path)
    notes = [f"llama-cpp-python {version} (llama.cpp as it bundles it)"] + notes
    if version != PINNED:
        notes.append(f"kvcalc models llama.cpp as llama-cpp-python {PINNED} bundles it; this is {version}")
    return LlamaVerify(spec.name, path, context, version, p.launch.command(p.allocation.cparams.n_ctx), tuple(rows),
                       tuple(notes))


_QUIET = []


def _quiet(lib):
    """A log callback that drops every line, kept for the process's life."""
    if not _QUIET:
        _QUIET.append(lib.llama_log_callback(lambda level, text, user: None))
    return _QUIET[0]


def _last(pieces: list[str]) -> str:
    lines = [x.strip() for x in "".join(pieces).splitlines() if x.strip()]
    return (lines[-1] if lines else "no message")[:300]
