"""A GGUF's hyperparameters as llama.cpp loads them (llama.cpp 0c1e57098, as bundled in llama-cpp-python 0.3.36),
the part that shapes its caches, layer by layer.

Sources: ``src/llama-model.cpp`` ``llama_model_base::load_hparams`` (the generic keys: ``{arch}.context_length``,
``embedding_length``, ``block_count``, ``nextn_predict_layers``, ``attention.head_count`` / ``head_count_kv``
(a scalar or one value a layer; head_count_kv defaults to head_count), ``attention.key_length`` /
``value_length`` (default ``n_embd / n_head(0)``), their ``_swa`` variants for sliding-window layers),
``load_swa_pattern`` with ``llama_hparams::set_swa_pattern`` (``src/llama-hparams.cpp``: a per-layer
``attention.sliding_window_pattern`` array, else ``il % n < n - 1`` over the main layers), and each architecture's
``load_arch_hparams`` (``src/models/<arch>.cpp``) for its window, its recurrent layers and its state sizes;
``llama_hparams::n_embd_r`` / ``n_embd_s`` for the recurrent state rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError, quote
from .reader import GgufHeader

LLAMA_MAX_LAYERS = 512  # src/llama-hparams.h

#: architectures whose every layer is recurrent (llm_arch_is_recurrent) / that mix both (llm_arch_is_hybrid)
RECURRENT = {"mamba", "mamba2"}
HYBRID = {"jamba", "falcon-h1", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe", "qwen3next",
          "qwen35", "qwen35moe"}
#: plain attention architectures whose caches kvcalc plans (the default branch of create_memory)
ATTENTION = {"llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "qwen3vl", "qwen3vlmoe", "mistral3", "phi3", "gemma",
             "gemma2", "gemma3", "gemma3n", "gpt-oss", "deepseek2", "llama4", "command-r", "cohere2", "minimax-m2"}
SUPPORTED = ATTENTION | RECURRENT | HYBRID
#: architectures llama.cpp keeps in a cache class of its own, which kvcalc does not model (and why)
NOT_PLANNED = {
    "deepseek32": "llama.cpp keeps DeepSeek V3.2's MLA and indexer caches in a cache class of its own "
                  "(llama-model.cpp create_memory: LLM_ARCH_DEEPSEEK32), which kvcalc does not model",
    "glm-dsa": "llama.cpp keeps GLM's DSA caches in a cache class of its own (create_memory: LLM_ARCH_GLM_DSA), which "
               "kvcalc does not model",
    "deepseek4": "llama.cpp keeps DeepSeek V4's compressed caches in a cache class of its own (create_memory: "
                 "LLM_ARCH_DEEPSEEK4), which kvcalc does not model",
}


@dataclass(frozen=True)
class LayerHp:
    """One layer as llama.cpp sees it."""

    index: int
    n_head: int
    n_head_kv: int
    head_k: int  # n_embd_head_k(il): the SWA head size on a sliding-window layer
    head_v: int
    swa: bool
    recurrent: bool
    n_ff: int
    nextn: bool

    @property
    def k_width(self) -> int:
        return self.head_k * self.n_head_kv

    @property
    def v_width(self) -> int:
        return self.head_v * self.n_head_kv


@dataclass(frozen=True)
class GgufHparams:
    arch: str
    name: str | None  # general.name
    n_ctx_train: int
    n_embd: int
    layers: tuple[LayerHp, ...]  # all n_layer_all, the NextN ones last
    n_layer_nextn: int
    swa_type: str | None  # "standard", "chunked" or None
    n_swa: int
    n_layer_kv_from_start: int  # -1: every layer has KV
    mla: bool
    kv_lora_rank: int
    n_rot: int
    n_embd_r: int
    n_embd_s: int
    ssm: dict  # d_conv, d_inner, d_state, dt_rank, n_group, shortconv (as read)
    head_k_full: int = 0  # n_embd_head_k_full / _v_full (the non-SWA head sizes)
    head_v_full: int = 0
    notes: tuple[str, ...] = ()
    #: what ollama reads of the file for its memory prediction (fs/ggml/ggml.go): block_count, embedding_length,
    #: the largest attention.head_count and the smallest attention.head_count_kv (1 where a key is absent, as
    #: UintOrArrayValueAsArray defaults), and the file's size
    ollama_meta: tuple[int, int, int, int] = (0, 0, 1, 1)
    file_size: int = 0
    path: str = ""  # the file read

    @property
    def n_layer(self) -> int:
        return len(self.layers) - self.n_layer_nextn

    def has_kv(self, il: int) -> bool:
        """llama_hparams::has_kv."""
        return self.n_layer_kv_from_start < 0 or il < self.n_layer_kv_from_start


class _Keys:
    def __init__(self, h: GgufHeader, arch: str, what: str):
        self.h, self.arch, self.what = h, arch, what

    def fail(self, key: str, msg: str) -> KvcalcError:
        return KvcalcError(f"{self.what}: {self.h.path}: {key}: {msg}", param="model")

    def full(self, key: str) -> str:
        return f"{self.arch}.{key}"

    def has(self, key: str) -> bool:
        return self.full(key) in self.h.metadata

    def uint(self, key: str, default: int | None = None, *, required: bool = False) -> int:
        k = self.full(key)
        if k not in self.h.metadata:
            if required:
                raise self.fail(k, "missing (llama.cpp requires it for this architecture)")
            return default
        v = self.h.metadata[k]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1 << 40:
            raise self.fail(k, f"expected a whole number, got {quote(v)}")
        return v

    def per_layer(self, key: str, n: int, default: list[int]) -> list[int]:
        """get_key_or_arr: a scalar for every layer, or an array of exactly ``n`` values."""
        k = self.full(key)
        if k not in self.h.metadata:
            return list(default)
        v = self.h.metadata[k]
        if isinstance(v, list):
            if len(v) != n:
                raise self.fail(k, f"array length {len(v)} for n_layer_all {n} (llama.cpp: wrong array length)")
            out = []
            for x in v:
                if isinstance(x, bool):
                    x = int(x)
                if not isinstance(x, int) or not 0 <= x <= 1 << 40:
                    raise self.fail(k, f"expected whole numbers, got {quote(x)}")
                out.append(x)
            return out
        if v is None:
            raise self.fail(k, "array too long to be per-layer")
        return [self.uint(key)] * n


def load_hparams(h: GgufHeader, what: str = "model") -> GgufHparams:
    # one piece: llama.cpp's load_hparams and each architecture's load_arch_hparams, in their order, so that a
    # reader can hold the two side by side
    arch = h.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise KvcalcError(f"{what}: {h.path}: general.architecture: missing; llama.cpp reads the architecture from it",
                          param="model")
    k = _Keys(h, arch, what)
    n_ctx_train = k.uint("context_length", required=True)
    n_embd = k.uint("embedding_length", required=True)
    n_all = k.uint("block_count", required=True)
    if not 1 <= n_all <= LLAMA_MAX_LAYERS:
        raise k.fail(k.full("block_count"), f"{n_all} (llama.cpp takes 1 to {LLAMA_MAX_LAYERS})")
    nextn = k.uint("nextn_predict_layers", 0)
    if nextn > n_all:
        raise k.fail(k.full("nextn_predict_layers"), f"{nextn} is more than block_count {n_all}")
    n_layer = n_all - nextn
    n_ff = k.per_layer("feed_forward_length", n_all, [0] * n_all)
    n_head = k.per_layer("attention.head_count", n_all, [0] * n_all)
    n_head_kv = k.per_layer("attention.head_count_kv", n_all, n_head)
    if n_head[0] > 0:
        head_k = k.uint("attention.key_length", n_embd // n_head[0])
        head_v = k.uint("attention.value_length", n_embd // n_head[0])
    else:
        head_k = head_v = 0
    head_k_swa = k.uint("attention.key_length_swa", head_k)
    head_v_swa = k.uint("attention.value_length_swa", head_v)
    n_rot = k.uint("rope.dimension_count", head_k)
    notes: list[str] = []

    # sliding windows (each architecture's load_arch_hparams)
    is_swa = [False] * n_all
    swa_type: str | None = None
    n_swa = 0

    def pattern(n_pattern: int, dense_first: bool = False) -> None:
        key = k.full("attention.sliding_window_pattern")
        v = h.metadata.get(key)
        if isinstance(v, list):  # get_arr: BOOL / UINT32 / INT32 items, x != 0
            if len(v) > LLAMA_MAX_LAYERS:
                raise k.fail(key, f"{len(v)} values (llama.cpp holds {LLAMA_MAX_LAYERS})")
            for i, x in enumerate(v[:n_all]):
                is_swa[i] = bool(x)
            return
        if v is not None:
            n_pattern = k.uint("attention.sliding_window_pattern")
        for il in range(n_layer):
            is_swa[il] = n_pattern == 0 or (il % n_pattern != 0 if dense_first else il % n_pattern < n_pattern - 1)

    kv_from_start = -1
    if arch == "gemma2":
        swa_type, n_swa = "standard", k.uint("attention.sliding_window", 4096)
        pattern(2)
    elif arch == "gemma3":
        n_swa = k.uint("attention.sliding_window", 0)
        if n_swa > 0:
            swa_type = "standard"
            pattern(6)
    elif arch == "gemma3n":
        swa_type = "standard"
        pattern(5)
        kv_from_start = 20
        n_swa = k.uint("attention.sliding_window", required=True)
    elif arch == "gpt-oss":
        n_swa = k.uint("attention.sliding_window", required=True)
        swa_type = "standard"
        pattern(2)
    elif arch == "cohere2":
        swa_type = "standard"
        pattern(4)
        n_swa = k.uint("attention.sliding_window", required=True)
    elif arch == "llama4":
        if k.has("attention.sliding_window") and k.uint("attention.sliding_window") == 0:
            swa_type = None
        else:
            swa_type, n_swa = "chunked", 8192
            pattern(4)
    elif arch == "phi3":
        if k.uint("attention.sliding_window", 0) > 0:
            notes.append("llama.cpp turns Phi-3's sliding window off (src/models/phi3.cpp: \"Phi SWA is currently "
                         "disabled\"): every layer caches every token")
    elif arch in ("llama", "mistral3", "qwen2", "qwen3") and k.has("attention.sliding_window"):
        notes.append(f"llama.cpp's {arch} architecture reads no sliding window: every layer caches every token")

    # recurrent layers and state sizes
    is_recr = [arch in RECURRENT] * n_all
    ssm = {}
    if arch in RECURRENT or arch in ("jamba", "falcon-h1", "granitehybrid", "nemotron_h", "nemotron_h_moe",
                                     "qwen3next", "qwen35", "qwen35moe"):
        ssm = {"d_conv": k.uint("ssm.conv_kernel", required=True), "d_inner": k.uint("ssm.inner_size", required=True),
               "d_state": k.uint("ssm.state_size", required=True), "dt_rank": k.uint("ssm.time_step_rank", required=True),
               "n_group": k.uint("ssm.group_count", required=arch not in ("mamba", "jamba")) or 0}
    if arch in ("jamba", "granitehybrid"):  # a layer is recurrent iff its head_count_kv is 0
        is_recr = [il < n_layer and n_head_kv[il] == 0 for il in range(n_all)]
    elif arch == "falcon-h1":
        is_recr = [True] * n_all
    elif arch in ("nemotron_h", "nemotron_h_moe"):
        is_recr = [il < n_layer and n_head_kv[il] == 0 and n_ff[il] == 0 for il in range(n_all)]
    elif arch in ("qwen3next", "qwen35", "qwen35moe"):
        key = k.full("attention.recurrent_layers")
        if key in h.metadata:
            is_recr = [bool(x) for x in k.per_layer("attention.recurrent_layers", n_all, [0] * n_all)]
        else:
            interval = k.uint("full_attention_interval", 4)
            if interval == 0:
                raise k.fail(k.full("full_attention_interval"), "0 (llama.cpp divides by it)")
            is_recr = [il < n_layer and (il + 1) % interval != 0 for il in range(n_all)]
    elif arch in ("lfm2", "lfm2moe"):
        ssm = {"shortconv": k.uint("shortconv.l_cache", required=True)}
        is_recr = [il < n_layer and n_head_kv[il] == 0 for il in range(n_all)]
        if arch == "lfm2" and k.uint("attention.sliding_window", 0) > 0:
            swa_type, n_swa = "standard", k.uint("attention.sliding_window")
            for il in range(n_layer):
                is_swa[il] = not is_recr[il]

    mla = False
    kv_lora = 0
    if arch == "deepseek2":
        kv_lora = k.uint("attention.kv_lora_rank", required=True)
        kmla, vmla = k.uint("attention.key_length_mla", 0), k.uint("attention.value_length_mla", 0)
        mla = kmla != 0 and vmla != 0

    # llama_hparams::n_embd_r / n_embd_s
    if "shortconv" in ssm:
        n_embd_r, n_embd_s = n_embd * (ssm["shortconv"] - 1), 0
    elif ssm:
        n_embd_r = (ssm["d_conv"] - 1 if ssm["d_conv"] > 0 else 0) * (ssm["d_inner"] + 2 * ssm["n_group"] * ssm["d_state"])
        n_embd_s = ssm["d_state"] * ssm["d_inner"]
    else:
        n_embd_r = n_embd_s = 0

    layers = tuple(LayerHp(il, n_head[il], n_head_kv[il], head_k_swa if is_swa[il] else head_k,
                           head_v_swa if is_swa[il] else head_v, is_swa[il], bool(is_recr[il]), n_ff[il], il >= n_layer)
                   for il in range(n_all))
    if swa_type is not None and not any(is_swa):
        raise KvcalcError(f"{what}: {h.path}: {arch} keeps a sliding window but no layer is sliding-window "
                          "(llama.cpp aborts: GGML_ASSERT(hparams.is_swa_any()))", param="model")
    name = h.get("general.name")
    return GgufHparams(arch, name if isinstance(name, str) else None, n_ctx_train, n_embd, layers, nextn, swa_type,
                       n_swa, kv_from_start, mla, kv_lora, n_rot, n_embd_r, n_embd_s, ssm, head_k, head_v, tuple(notes),
                       (n_all, n_embd, _ollama_extreme(h, k.full("attention.head_count"), max),
                        _ollama_extreme(h, k.full("attention.head_count_kv"), min)), h.file_size, str(h.path))


def _ollama_extreme(h: GgufHeader, key: str, pick) -> int:
    """ollama's UintOrMaxArrayValue / UintOrMinArrayValue: the value, or the largest / smallest of an array; 1 where
    the key is absent (a skipped or empty array: 1 too, kvcalc reads no such head counts)."""
    v = h.metadata.get(key)
    if isinstance(v, bool):
        return 1
    if isinstance(v, int):
        return v
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return pick(v)
    return 1
