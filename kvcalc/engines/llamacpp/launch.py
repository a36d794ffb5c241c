"""How each front end launches llama.cpp: the flags it passes, and its defaults for the ones a user leaves out.

* llama-server (``common/common.h`` common_params; ``common/arg.cpp``; ``tools/server/server.cpp``): ``-c`` 0 (the
  training context), ``-np`` auto, which runs 4 slots in one unified stream ("n_parallel is set to auto, using
  n_parallel = 4 and kv_unified = true"), an explicit ``-np N`` N slots in N streams unless ``-kvu``; ``-b`` 2048,
  ``-ub`` 512, ``-fa auto``, ``--swa-full`` off, f16 / f16, ``-ngl`` auto (every layer where it fits). With ``-c``
  left at 0 its memory fit (``common/fit.cpp``) asks for ``n_ctx_train x n_streams`` cells (and shortens them when
  the device is short: not modelled; kvcalc shows the longest ``--ctx-size`` that fits instead).
* the C API (``llama_context_default_params``, llama-context.cpp): n_ctx 512, n_batch 2048, n_ubatch 512, one
  sequence, not unified, flash attention auto, ``swa_full`` true, f16 / f16; ``llama_model_default_params``:
  every layer on the GPU.
* llama-cpp-python ``Llama()`` (llama_cpp/llama.py): n_ctx 512, n_batch 512, n_ubatch 512, ``flash_attn=False``
  (flash attention disabled, so V is transposed), ``n_gpu_layers=0`` (every layer, and its KV, on the CPU), the C
  defaults for the rest (``swa_full`` true, f16 / f16).
* ollama v0.33.0-rc2 (``llm/llama_server.go`` startLlamaServer, ``server/sched.go``, ``server/routes.go``,
  ``envconfig/config.go``): launches llama-server with ``-c num_ctx x OLLAMA_NUM_PARALLEL -np OLLAMA_NUM_PARALLEL``
  (not unified; parallel forced to 1 for the architectures sched.go lists), ``-b`` and ``-ub`` num_batch (where not
  set: automaticGenerationBatch, see ollama.py), ``--cache-type-k/-v OLLAMA_KV_CACHE_TYPE`` (K and V alike, when set),
  ``--flash-attn`` from OLLAMA_FLASH_ATTENTION (else auto); num_ctx defaults to 4,096, 32,768 or 262,144 by the
  GPUs' total memory (routes.go: >= 47 GiB, >= 23 GiB) and is capped at the model's context; OLLAMA_NUM_PARALLEL
  defaults to 1; ``-ngl`` is left to llama-server's fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError
from ...units import GIB
from .ggml import GgmlType, cache_type
from .ollama import SINGLE_PARALLEL

#: server/routes.go: the default num_ctx by the GPUs' total memory (>= 47 GiB, >= 23 GiB, else)
OLLAMA_NUM_CTX = ((47 * GIB, 262_144), (23 * GIB, 32_768), (0, 4_096))


@dataclass(frozen=True)
class Launch:
    """The parameters one front end gives llama.cpp, and which of them were its defaults."""

    frontend: str
    n_ctx: int | None  # the context asked for (0: the training context); None: per request x streams
    n_seq_max: int
    kv_unified: bool
    type_k: GgmlType
    type_v: GgmlType
    flash_attn: str  # "auto", "enabled", "disabled"
    swa_full: bool
    n_batch: int
    n_ubatch: int
    n_gpu_layers: int  # -1: every layer
    offload_kqv: bool
    defaults: tuple[str, ...]  # the front end's defaults taken, in words
    passed: frozenset = frozenset()  # ollama: the optional flags it passes (cache types, -ngl)

    def streams(self) -> int:
        return 1 if self.kv_unified else self.n_seq_max

    def command(self, n_ctx: int) -> str:
        """The llama-server command line that starts this context (or the front end's own call)."""
        if self.frontend == "llama-cpp-python":
            args = [f"n_ctx={n_ctx}", f"n_batch={self.n_batch}", f"n_ubatch={self.n_ubatch}",
                    f"flash_attn={self.flash_attn == 'enabled'}", f"swa_full={self.swa_full}",
                    f"type_k={self.type_k.name!r}", f"type_v={self.type_v.name!r}",
                    f"n_gpu_layers={self.n_gpu_layers}", f"offload_kqv={self.offload_kqv}"]
            if self.n_seq_max != 1 or self.kv_unified:
                args += [f"n_seq_max={self.n_seq_max}", f"kv_unified={self.kv_unified}"]
            return f"Llama(model_path, {', '.join(args)})"
        fa = {"enabled": "on", "disabled": "off", "auto": "auto"}[self.flash_attn]
        if self.frontend == "ollama":  # llm/llama_server.go startLlamaServer's order (port, host, logs left out)
            parts = ["llama-server", "--model", "MODEL.gguf", "-c", str(n_ctx), "-np", str(self.n_seq_max)]
            if "cache_type" in self.passed:
                parts += ["--cache-type-k", self.type_k.name, "--cache-type-v", self.type_v.name]
            parts += ["--flash-attn", fa, "-b", str(self.n_batch), "-ub", str(self.n_ubatch)]
            parts += ["-ngl", str(self.n_gpu_layers)] if "ngl" in self.passed else []
            return " ".join(parts)
        parts = ["llama-server", "-m", "MODEL.gguf", "-c", str(n_ctx), "-np", str(self.n_seq_max)]
        parts += ["--kv-unified"] if self.kv_unified else []
        parts += ["-b", str(self.n_batch), "-ub", str(self.n_ubatch), "-fa", fa]
        parts += ["-ctk", self.type_k.name, "-ctv", self.type_v.name]
        parts += ["--swa-full"] if self.swa_full else []
        parts += ["-ngl", "all" if self.n_gpu_layers < 0 else str(self.n_gpu_layers)]
        parts += ["--no-kv-offload"] if not self.offload_kqv else []
        return " ".join(parts)


def _fa(value: str | None) -> str | None:
    return None if value is None else {"on": "enabled", "off": "disabled", "auto": "auto"}[value]


def launch(s, *, gpu_memory: int | None = None, n_ctx_train: int | None = None, arch: str | None = None,
           predict=None, cuda: bool = True) -> Launch:
    """The parameters front end ``s.frontend`` gives llama.cpp for settings ``s`` (the engine's Settings). For ollama:
    ``arch`` the GGUF's architecture (parallel forced to 1 for some), ``predict(n_ctx)`` ollama's own prediction of
    the load in bytes (None where no GGUF gives its file), ``cuda`` a CUDA GPU (not ROCm): its automatic batch."""
    f = s.frontend
    took: list[str] = []

    def pick(value, default, words: str):
        if value is not None:
            return value
        took.append(words)
        return default

    ollama_only = [o for o in ("num_ctx", "num_parallel", "kv_cache_type", "num_batch") if getattr(s, o) is not None]
    if f != "ollama" and ollama_only:
        raise KvcalcError(f"{ollama_only[0]}: an ollama setting; llama.cpp's own front ends take {{{{ctx_size}}}}, "
                          "{{parallel}} and {{cache_type_k}} / {{cache_type_v}} ({{frontend}} ollama to plan ollama)",
                          param=ollama_only[0])
    if f == "ollama":
        return _ollama(s, pick, took, gpu_memory=gpu_memory, n_ctx_train=n_ctx_train, arch=arch, predict=predict,
                       cuda=cuda)
    server = f == "llama-server"
    python = f == "llama-cpp-python"
    if server and s.parallel is None:
        parallel, unified = 4, True
        took.append("-np auto: 4 slots in one unified stream")
        if s.kv_unified is False:
            raise KvcalcError("kv_unified: llama-server turns the unified cache on when -np is auto (server.cpp); "
                              "give {{parallel}} too", param="kv_unified")
    else:
        parallel = pick(s.parallel, 1, "one sequence")
        unified = pick(s.kv_unified, False, "kv_unified off")
    n_ctx = s.ctx_size
    if n_ctx is None and not server:
        n_ctx = 512
        took.append("n_ctx 512" + (" (Llama())" if python else " (llama_context_default_params)"))
    tk = cache_type(s.cache_type_k, "cache_type_k") if s.cache_type_k is not None else None
    tv = cache_type(s.cache_type_v, "cache_type_v") if s.cache_type_v is not None else None
    if tk is None or tv is None:
        took.append("f16 cache")
    fa = pick(_fa(s.flash_attn), "disabled" if python else "auto",
              "flash_attn=False (Llama())" if python else "-fa auto")
    swa_full = pick(s.swa_full, not server, "no --swa-full" if server else "swa_full true (the C default)")
    n_batch = pick(s.batch_size, 512 if python else 2048, f"n_batch {512 if python else 2048}")
    n_ubatch = pick(s.ubatch_size, 512, "n_ubatch 512")
    ngl = pick(s.n_gpu_layers, 0 if python else -1,
               "n_gpu_layers=0 (Llama(): every layer on the CPU)" if python else "every layer on the GPU")
    return Launch(f, n_ctx, parallel, unified, tk or cache_type("f16", "cache_type_k"),
                  tv or cache_type("f16", "cache_type_v"), fa, swa_full, n_batch, n_ubatch, ngl,
                  not s.no_kv_offload if s.no_kv_offload is not None else True, tuple(took))


def _ollama(s, pick, took: list, *, gpu_memory, n_ctx_train, arch, predict, cuda) -> Launch:
    """ollama's launch of llama-server (see the module's docstring)."""
    for own, theirs in (("ctx_size", "num_ctx"), ("parallel", "num_parallel"), ("cache_type_k", "kv_cache_type"),
                        ("cache_type_v", "kv_cache_type"), ("kv_unified", None), ("swa_full", None),
                        ("batch_size", None), ("ubatch_size", None)):
        if getattr(s, own) is not None:
            instead = f"; give {theirs}" if theirs else ""
            raise KvcalcError(f"{own}: ollama sets it itself when it launches llama-server (llm/llama_server.go)"
                              f"{instead}", param=own)
    parallel = pick(s.num_parallel, 1, "OLLAMA_NUM_PARALLEL 1")
    if arch in SINGLE_PARALLEL and parallel != 1:
        took.append(f"OLLAMA_NUM_PARALLEL {parallel} forced to 1: ollama runs {arch} one request at a time "
                    "(server/sched.go load)")
        parallel = 1
    if s.num_ctx is not None:
        num_ctx = s.num_ctx
    else:
        total = gpu_memory or 0
        num_ctx = next(n for floor, n in OLLAMA_NUM_CTX if total >= floor)
        took.append(f"num_ctx {num_ctx:,} (ollama's default for {total / GIB:.0f} GiB of GPU memory)"
                    if gpu_memory else f"num_ctx {num_ctx:,} (ollama's default where no GPU is named)")
    if n_ctx_train and num_ctx > n_ctx_train:  # llm/server.go: NumCtx capped at the model's context_length
        took.append(f"num_ctx capped at the model's context_length {n_ctx_train:,}")
        num_ctx = n_ctx_train
    kv = cache_type(s.kv_cache_type, "kv_cache_type") if s.kv_cache_type is not None else None
    if kv is None:
        took.append("f16 cache (OLLAMA_KV_CACHE_TYPE unset)")
    fa = pick(_fa(s.flash_attn), "auto", "--flash-attn auto")
    if s.num_batch is not None:
        batch = s.num_batch
    else:
        from .ollama import automatic_batch

        predicted = predict(num_ctx * parallel) if predict is not None else 0
        batch, why = automatic_batch(num_ctx * parallel, predicted, gpu_memory or 0, fa, cuda)
        took.append(f"num_batch {why} (server/sched.go automaticGenerationBatch"
                    + ("" if predict is not None else "; without the GGUF its file size is unknown, so the "
                       "prediction's memory checks are left out") + ")")
    return Launch("ollama", num_ctx * parallel, parallel, False, kv or cache_type("f16", "kv_cache_type"),
                  kv or cache_type("f16", "kv_cache_type"), fa, False, batch, batch,
                  pick(s.n_gpu_layers, -1, "no -ngl: llama-server's fit places the layers (planned: every layer)"),
                  not s.no_kv_offload if s.no_kv_offload is not None else True, tuple(took),
                  frozenset(x for x, on in (("cache_type", kv is not None), ("ngl", s.n_gpu_layers is not None))
                            if on))
