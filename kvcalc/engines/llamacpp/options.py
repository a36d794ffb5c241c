"""llama.cpp's settings a user may set, with llama.cpp's own flags (llama-server, common/arg.cpp), declared once
(the command line reads them without loading the engine). ``--frontend`` says whose defaults fill the rest:
llama-server's, the C API's (llama_context_default_params), llama-cpp-python's ``Llama()``, or ollama's (which
launches llama-server with flags of its own)."""

from __future__ import annotations

from ..options import Option

NAME = "llama.cpp"
VERSION = "0c1e57098"  # ggml-org/llama.cpp, as bundled in llama-cpp-python 0.3.36
BUNDLE = "llama-cpp-python 0.3.36"
TITLE = f"llama.cpp {VERSION}"
SUMMARY = (f"llama.cpp {VERSION} ({BUNDLE}): n_ctx cells per stream in every layer, a sliding-window cache, "
           "recurrent state rows; llama-server, the C API, llama-cpp-python or ollama defaults")
FRONTENDS = ("llama-server", "llama-cpp-python", "c-api", "ollama")
CACHE_TYPE_NAMES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")

_ALL = ("capacity", "transfer", "verify")
OPTIONS = (
    Option("frontend", "--frontend", "llama.cpp: whose defaults apply where a flag is not given: llama-server "
           "(default), llama-cpp-python (Llama()), c-api (llama_context_default_params) or ollama.", str, _ALL,
           choices=FRONTENDS),
    Option("ctx_size", "--ctx-size", "llama.cpp: the context size, n_ctx, over all slots (0: the model's training "
           "context; default: the front end's).", int, _ALL, minimum=0, maximum=1 << 32),
    Option("parallel", "--parallel", "llama.cpp: sequences (slots), n_seq_max (default: the most that fit; "
           "llama-server runs 4 when not told).", int, _ALL, minimum=1, maximum=1 << 20),
    Option("kv_unified", "--kv-unified", "llama.cpp: one KV stream shared by every slot (llama-server: on only "
           "when --parallel is not given).", bool, _ALL, negative="--no-kv-unified"),
    Option("cache_type_k", "--cache-type-k", "llama.cpp: the K cache type (f32, f16, bf16, q8_0, q4_0, q4_1, "
           "iq4_nl, q5_0, q5_1; default f16).", str, _ALL),
    Option("cache_type_v", "--cache-type-v", "llama.cpp: the V cache type (default f16; a quantized V needs flash "
           "attention).", str, _ALL),
    Option("flash_attn", "--flash-attn", "llama.cpp: on, off or auto (default auto; llama-cpp-python: off).", str,
           _ALL, choices=("on", "off", "auto")),
    Option("swa_full", "--swa-full", "llama.cpp: a full-size sliding-window cache (llama-server: off; the C API and "
           "llama-cpp-python: on).", bool, _ALL, negative="--no-swa-full"),
    Option("batch_size", "--batch-size", "llama.cpp: the logical batch, n_batch (default 2048; llama-cpp-python "
           "512).", int, _ALL, minimum=1, maximum=1 << 24),
    Option("ubatch_size", "--ubatch-size", "llama.cpp: the physical batch, n_ubatch (default 512).", int, _ALL,
           minimum=1, maximum=1 << 24),
    Option("n_gpu_layers", "--n-gpu-layers", "llama.cpp: layers on the GPU (-1: all, the default; "
           "llama-cpp-python: 0); a layer's KV sits on its device.", int, ("capacity", "verify"), minimum=-1, maximum=1 << 20),
    Option("no_kv_offload", "--no-kv-offload", "llama.cpp: keep every layer's KV cache in CPU memory.", bool,
           ("capacity", "verify"),
           negative="--kv-offload"),
    Option("num_ctx", "--num-ctx", "ollama: num_ctx, the context of each request (ollama launches llama-server "
           "with -c num_ctx x --num-parallel).", int, _ALL, minimum=1, maximum=1 << 32),
    Option("num_parallel", "--num-parallel", "ollama: OLLAMA_NUM_PARALLEL (default 1).", int, _ALL, minimum=1,
           maximum=256),
    Option("num_batch", "--num-batch", "ollama: num_batch, its -b and -ub (default: ollama's automatic batch by "
           "context and memory).", int, _ALL, minimum=1, maximum=1 << 24),
    Option("kv_cache_type", "--kv-cache-type", "ollama: OLLAMA_KV_CACHE_TYPE, K and V alike (default f16).", str,
           _ALL),
)
