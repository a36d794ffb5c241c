"""A checkpoint's weights from its config.json alone: every tensor the Hugging Face safetensors files store, at the
dtype they store it, summed as ``model.safetensors.index.json`` ``metadata.total_size`` sums them (each tensor's
bytes, shared tensors once, no header or padding: huggingface_hub ``split_state_dict_into_shards_factory``).

The tensors per family follow transformers' modeling code (``models/<family>/modeling_<family>.py``; hub names):
embeddings ``[V, H]``, the final norm, ``lm_head`` unless ``tie_word_embeddings``; per layer the attention (q / k / v
/ o, their biases where the family or ``attention_bias`` has them, Qwen3's and Gemma 3's q / k norms, Phi-3's fused
qkv, MLA's low-rank projections and norms, gpt-oss's sinks), the MLP (gate / up / down, Phi-3's fused gate_up, the
routed experts, shared experts, the router and its bias), and the norms (two, Gemma 2 / 3 four). A quantized
checkpoint stores what its ``quantization_config`` says: DeepSeek's fp8 (e4m3, every Linear but the router,
``eh_proj`` and the heads, with an fp32 ``weight_scale_inv`` of ``ceil(out/128) x ceil(in/128)``), gpt-oss's mxfp4
experts (uint8 blocks of 16 bytes and one scale byte per 32 values, the expert biases in bf16), MiniMax-M2's fp8
(128 x 128 blocks on the attention and expert Linears; the router ``gate`` and its ``e_score_correction_bias`` in fp32,
as its quantization_config's modules_to_not_convert keeps them). Qwen3-VL's checkpoint adds its vision tower
(``model.visual.*``, transformers ``models/qwen3_vl/modeling_qwen3_vl.py`` Qwen3VLVisionModel). MTP layers stored in
the checkpoint (DeepSeek's ``model.layers.{L}``: a whole decoder layer plus ``embed_tokens``, ``enorm``, ``hnorm``,
``eh_proj``, ``shared_head``) count in the checkpoint's total; the weights an engine loads leave them out (vLLM loads
them only for speculative decoding), and the config says both.

Checked (``dispatch.checkpoint_bytes``) against published ``total_size`` figures (tests/config/hf/test_weights.py), e.g. Llama-3.1-8B 16,060,522,496.
A family, or a quantization, kvcalc does not derive is refused in one line naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..schema import MAX_EXPERTS, MAX_LAYERS
from .fields import _Fields, _fail

#: bytes per stored element
SIZES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "int8": 1}
_TORCH = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
#: the config class defaults these families' weights read where config.json omits them (transformers 5.x)
_DEFAULTS = {
    "llama": {"tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False},
    "mistral": {"tie_word_embeddings": False},
    "mixtral": {"tie_word_embeddings": False},
    "qwen2": {"tie_word_embeddings": False},
    "qwen2_moe": {"tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": [], "qkv_bias": True},
    "qwen3": {"tie_word_embeddings": False, "attention_bias": False},
    "qwen3_moe": {"tie_word_embeddings": False, "attention_bias": False, "decoder_sparse_step": 1,
                  "mlp_only_layers": []},
    "phi3": {"tie_word_embeddings": False},
    "gemma": {"tie_word_embeddings": True, "attention_bias": False},
    "gemma2": {"tie_word_embeddings": True, "attention_bias": False},
    "gemma3_text": {"tie_word_embeddings": True, "attention_bias": False, "vocab_size": 262_208},
    "gpt_oss": {"tie_word_embeddings": False, "attention_bias": True},
    "deepseek_v2": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 0,
                    "moe_layer_freq": 1, "topk_method": "greedy"},
    "deepseek_v3": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 3,
                    "moe_layer_freq": 1, "topk_method": "noaux_tc", "num_nextn_predict_layers": 0},
}
_DEFAULTS["minimax_m2"] = {"tie_word_embeddings": False, "attention_bias": False, "use_qk_norm": True,
                           "use_routing_bias": True, "shared_intermediate_size": 0}
_DEFAULTS["gemma3"] = _DEFAULTS["gemma3_text"]
#: families whose text stack is another family's layers (their own defaults are that family's)
_TEXT_AS = {"qwen3_vl": "qwen3", "qwen3_vl_text": "qwen3", "qwen3_vl_moe": "qwen3_moe",
            "qwen3_vl_moe_text": "qwen3_moe"}
for _mt, _as in _TEXT_AS.items():
    _DEFAULTS[_mt] = _DEFAULTS[_as]
#: families kvcalc imports but does not derive the weights of: what is missing (one line each)
NOT_DERIVED = {
    "qwen3_next": "no published total_size to hold its gated-DeltaNet and MTP (mtp.*) tensors to",
    "qwen3_5": "no published total_size to hold its DeltaNet, MTP (mtp.*) and vision tensors to",
    "llama4": "no published total_size to hold its MoE interleave and vision tower to",
    "deepseek_v32": "its indexer's tensors (and ue8m0 fp8 scales) are not checked against a published total_size",
    "glm_moe_dsa": "its indexer's and nextn layers' tensors are not checked against a published total_size",
    "deepseek_v4": "its compressor and indexer tensors are not checked against a published total_size",
    "minimax": "no published total_size to hold its lightning-attention tensors to",
    "mimo": "no published total_size to hold its MTP layers (model.mtp_layers.*) to",
    "mimo_v2_flash": "no published total_size to hold its fp8 tensors, sinks and MTP layers to",
    "nemotron_h": "no published total_size to hold its Mamba-2, MLP / MoE and MTP tensors to",
    "jamba": "no published total_size to hold its Mamba and MoE tensors to",
    "falcon_h1": "no published total_size to hold its Mamba-2 tensors to",
    "kimi_linear": "no published total_size to hold its KDA and MLA tensors to",
}
for _a, _b in (("qwen3_5_text", "qwen3_5"), ("qwen3_5_moe", "qwen3_5"), ("qwen3_5_moe_text", "qwen3_5"),
               ("llama4_text", "llama4"), ("minimax_m1", "minimax")):
    NOT_DERIVED[_a] = NOT_DERIVED[_b]
_DEFAULTS["kimi_k2"] = _DEFAULTS["deepseek_v3"]
FAMILIES = sorted(_DEFAULTS)


@dataclass
class Tally:
    """Stored elements by dtype: the dense weights, the routed experts (expert parallelism shards those), and the
    MTP layers (in the checkpoint, not in what an engine loads by default)."""

    dense: dict = field(default_factory=dict)
    experts: dict = field(default_factory=dict)
    mtp: dict = field(default_factory=dict)
    tensors: int = 0

    def add(self, elements: int, dtype: str, part: str = "dense", times: int = 1) -> None:
        """``times`` tensors of ``elements`` each."""
        d = getattr(self, part)
        d[dtype] = d.get(dtype, 0) + elements * times
        self.tensors += times

    @staticmethod
    def nbytes(d: dict) -> int:
        return sum(n * SIZES[t] for t, n in d.items())

    @property
    def checkpoint_bytes(self) -> int:
        return self.nbytes(self.dense) + self.nbytes(self.experts) + self.nbytes(self.mtp)


class _W:
    """One config's fields as the weights read them: its own values, else the family's class default."""

    def __init__(self, fields: _Fields, mt: str):
        self.f, self.mt = fields, mt
        self.defaults = _DEFAULTS[mt]

    def get(self, key: str, default=None):
        if key in self.f.cfg and self.f.cfg[key] is not None:
            return self.f.cfg[key]
        if key == "tie_word_embeddings" and self.f.inner is not None and self.f.top.get(key) is not None:
            return self.f.top[key]  # the model around text_config ties (or not) its own lm_head
        if key in self.defaults:
            return self.defaults[key]
        return default

    def int(self, key: str, minimum: int = 1, maximum: int = 1 << 40) -> int:
        v = self.get(key)
        if v is None:
            raise _fail(f"weights: {self.f.where(key)}: missing; the checkpoint's {key} sizes its tensors")
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
            raise _fail(f"weights: {self.f.where(key)}: expected a whole number from {minimum} to {maximum:,}, got "
                        f"{str(v)[:40]}")
        return v

    def ints(self, key: str) -> list:
        """A list of whole numbers (layer indices); empty where absent."""
        v = self.get(key) or []
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
            raise _fail(f"weights: {self.f.where(key)}: expected a list of layer indices, got {str(v)[:60]}")
        return v

    def flag(self, key: str) -> bool:
        v = self.get(key, False)
        if not isinstance(v, bool):
            raise _fail(f"weights: {self.f.where(key)}: expected true or false, got {v!r}"[:200])
        return v


def _dtype(fields: _Fields) -> str:
    raw = fields.raw("torch_dtype") or fields.raw("dtype") or fields.top.get("torch_dtype") or fields.top.get("dtype")
    if raw is None:
        return "bf16"
    if not isinstance(raw, str) or raw not in _TORCH:
        raise _fail(f"weights: {fields.file}: torch_dtype {raw!r} is not one kvcalc sizes (bfloat16, float16, "
                    f"float32)"[:200])
    return _TORCH[raw]


def _quant(fields: _Fields, mt: str) -> str | None:
    """The quantization the checkpoint stores: None, 'fp8_block128' (DeepSeek's) or 'mxfp4' (gpt-oss's)."""
    q = fields.top.get("quantization_config") or fields.cfg.get("quantization_config")
    if q is None:
        return None
    method = q.get("quant_method") if isinstance(q, dict) else None
    method = method if isinstance(method, str) else None
    if method == "fp8" and mt in ("deepseek_v3", "kimi_k2") and q.get("weight_block_size") == [128, 128]:
        return "fp8_block128"
    if method == "mxfp4" and mt == "gpt_oss":
        return "mxfp4"
    if method == "fp8" and mt == "minimax_m2" and q.get("weight_block_size") == [128, 128] \
            and q.get("fmt", "float8_e4m3fn") == "float8_e4m3fn" and q.get("scale_fmt") is None:
        return "fp8_block128"
    what = repr(method) if method is not None else ("without a quant_method" if isinstance(q, dict) else
                                                       f"of type {type(q).__name__}")
    raise _fail(f"weights: {fields.file}: quantization_config {what} of {mt}: kvcalc derives DeepSeek's and "
                "MiniMax-M2's fp8 (128 x 128 blocks) and gpt-oss's mxfp4 checkpoints; give the weights (the index's "
                "total_size)"[:240])


def tally(fields: _Fields, mt: str) -> Tally:
    """Every tensor of the checkpoint, by dtype and part."""
    if mt not in _DEFAULTS:
        why = f": {NOT_DERIVED[mt]}" if mt in NOT_DERIVED else ""
        raise _fail(f"weights: {fields.file}: model_type {mt!r}: kvcalc does not derive this family's checkpoint "
                    f"tensors yet{why} (it does: {', '.join(FAMILIES)}); give the weights (the index's total_size)")
    quant = _quant(fields, mt)
    mt = _TEXT_AS.get(mt, mt)
    w = _W(fields, mt)
    dt = _dtype(fields)
    t = Tally()
    top = fields.top.get("model_type")
    if fields.inner is not None or fields.top.get("vision_config") is not None:
        if top == "gemma3":
            _siglip(fields, t, dt)
        elif top in ("qwen3_vl", "qwen3_vl_moe"):
            _qwen3_vl_vision(fields, t, dt)
        else:  # a checkpoint with a vision tower (or a text_config nested in another model)
            raise _fail(f"weights: {fields.file}: model_type {str(top)[:40]!r}: the checkpoint's other towers "
                        "(vision_config, or the model around text_config) are not derived")
    H, V, L = w.int("hidden_size"), w.int("vocab_size"), w.int("num_hidden_layers", 1, MAX_LAYERS)
    t.add(V * H, dt)  # embed_tokens
    t.add(H, dt)  # the final norm
    if not w.flag("tie_word_embeddings"):
        t.add(V * H, dt)  # lm_head
    if mt in ("deepseek_v2", "deepseek_v3", "kimi_k2"):
        _mla_stack(w, t, dt, quant, H, V, L)
    elif mt == "minimax_m2":
        for _ in range(L):
            _minimax_m2_layer(w, t, dt, quant, H)
    else:
        for i in range(L):
            _gqa_layer(w, t, dt, quant, H, i)
    return t


def _linear(t: Tally, out: int, inp: int, dt: str, fp8: bool, part: str = "dense", times: int = 1) -> None:
    """``times`` nn.Linear weights [out, in]: in the checkpoint's dtype, or fp8 with their fp32 block scales."""
    if fp8:
        t.add(out * inp, "fp8", part, times)
        t.add(math.ceil(out / 128) * math.ceil(inp / 128), "fp32", part, times)
    else:
        t.add(out * inp, dt, part, times)


def _gqa_layer(w: _W, t: Tally, dt: str, quant, H: int, i: int) -> None:
    """One decoder layer of the GQA families: attention, MLP (dense or experts), norms."""
    mt = w.mt
    nh = w.int("num_attention_heads")
    nkv = w.int("num_key_value_heads") if w.get("num_key_value_heads") is not None else nh
    hd = w.int("head_dim") if w.get("head_dim") is not None else H // nh
    q, kv = nh * hd, nkv * hd
    if mt == "phi3":
        t.add((q + 2 * kv) * H, dt)  # qkv_proj
        t.add(H * q, dt)  # o_proj
    else:
        for out in (q, kv, kv):
            t.add(out * H, dt)
        t.add(H * q, dt)
        if mt == "qwen2" or (mt == "qwen2_moe" and w.flag("qkv_bias")):  # q / k / v biases, no o bias
            for n in (q, kv, kv):
                t.add(n, dt)
        elif mt not in ("mistral", "mixtral", "qwen2", "qwen2_moe") and w.flag("attention_bias"):
            for n in (q, kv, kv, H):  # bias=config.attention_bias on all four
                t.add(n, dt)
    if mt in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
        t.add(hd, dt)  # q_norm
        t.add(hd, dt)  # k_norm
    if mt == "gpt_oss":
        t.add(nh, dt)  # sinks
    t.add(H, dt)  # input_layernorm
    t.add(H, dt)  # post_attention_layernorm
    if mt in ("gemma2", "gemma3", "gemma3_text"):
        t.add(H, dt)  # pre_feedforward_layernorm
        t.add(H, dt)  # post_feedforward_layernorm
    _gqa_mlp(w, t, dt, quant, H, i)


def _gqa_mlp(w: _W, t: Tally, dt: str, quant, H: int, i: int) -> None:
    mt = w.mt
    if mt == "mixtral":
        E, inter = w.int("num_local_experts", 1, MAX_EXPERTS), w.int("intermediate_size")
        t.add(E * H, dt)  # block_sparse_moe.gate
        for out, inp in ((inter, H), (H, inter), (inter, H)):  # w1, w2, w3 of each expert
            t.add(out * inp, dt, "experts", E)
        return
    if mt == "gpt_oss":
        E, inter = w.int("num_local_experts", 1, MAX_EXPERTS), w.int("intermediate_size")
        t.add(E * H, dt)  # router.weight
        t.add(E, dt)  # router.bias
        if quant == "mxfp4":  # blocks [E, 2I, H/32, 16] + scales [E, 2I, H/32]; down [E, H, I/32, 16] + [E, H, I/32]
            if H % 32 or inter % 32:
                raise _fail(f"weights: {w.f.file}: mxfp4 experts need hidden_size and intermediate_size in blocks of "
                            f"32, got {H} and {inter}")
            for rows, cols in ((2 * inter, H), (H, inter)):
                t.add(E * rows * cols // 32 * 16, "int8", "experts")
                t.add(E * rows * cols // 32, "int8", "experts")
        else:
            t.add(E * 2 * inter * H, dt, "experts")
            t.add(E * H * inter, dt, "experts")
        t.add(E * 2 * inter, dt, "experts")  # gate_up_proj_bias
        t.add(E * H, dt, "experts")  # down_proj_bias
        return
    moe = mt in ("qwen2_moe", "qwen3_moe") and w.int("num_experts", 0, MAX_EXPERTS) > 0 and \
        i not in w.ints("mlp_only_layers") and (i + 1) % w.int("decoder_sparse_step") == 0
    if not moe:
        inter = w.int("intermediate_size")
        if mt == "phi3":
            t.add(2 * inter * H, dt)  # gate_up_proj
            t.add(H * inter, dt)
        else:
            for out, inp in ((inter, H), (inter, H), (H, inter)):
                t.add(out * inp, dt)
            if mt == "llama" and w.flag("mlp_bias"):
                for n in (inter, inter, H):
                    t.add(n, dt)
        return
    E, mi = w.int("num_experts", 1, MAX_EXPERTS), w.int("moe_intermediate_size")
    t.add(E * H, dt)  # mlp.gate
    for out, inp in ((mi, H), (mi, H), (H, mi)):  # gate, up, down of each expert
        t.add(out * inp, dt, "experts", E)
    if mt == "qwen2_moe":
        si = w.int("shared_expert_intermediate_size")
        for out, inp in ((si, H), (si, H), (H, si)):
            t.add(out * inp, dt)
        t.add(H, dt)  # shared_expert_gate [1, H]


def _mla_stack(w: _W, t: Tally, dt: str, quant, H: int, V: int, L: int) -> None:
    """DeepSeek V2 / V3 (and Kimi K2): MLA attention, dense then MoE MLPs, and the MTP layers the checkpoint holds."""
    fp8 = quant == "fp8_block128"
    nh = w.int("num_attention_heads")
    qr = w.get("q_lora_rank")
    kvr, nope, rope, vh = (w.int("kv_lora_rank"), w.int("qk_nope_head_dim"), w.int("qk_rope_head_dim"),
                           w.int("v_head_dim"))
    inter, mi = w.int("intermediate_size"), w.int("moe_intermediate_size")
    E, shared = w.int("n_routed_experts", 1, MAX_EXPERTS), w.int("n_shared_experts", 0, MAX_EXPERTS)
    first, freq = w.int("first_k_dense_replace", 0), w.int("moe_layer_freq")
    noaux = w.get("topk_method") == "noaux_tc"
    mtp = w.int("num_nextn_predict_layers", 0, MAX_LAYERS) if w.mt != "deepseek_v2" else 0
    for i in range(L + mtp):
        part = "mtp" if i >= L else "dense"
        experts = "mtp" if i >= L else "experts"
        if i >= L:  # the MTP layer's own tensors (stored, in bf16)
            t.add(V * H, dt, part)  # embed_tokens
            t.add(H, dt, part)  # enorm
            t.add(H, dt, part)  # hnorm
            t.add(H * 2 * H, dt, part)  # eh_proj
            t.add(H, dt, part)  # shared_head.norm
            t.add(V * H, dt, part)  # shared_head.head
        if qr is not None:
            qr = w.int("q_lora_rank")
            _linear(t, qr, H, dt, fp8, part)  # q_a_proj
            t.add(qr, dt, part)  # q_a_layernorm
            _linear(t, nh * (nope + rope), qr, dt, fp8, part)  # q_b_proj
        else:
            _linear(t, nh * (nope + rope), H, dt, fp8, part)  # q_proj
        _linear(t, kvr + rope, H, dt, fp8, part)  # kv_a_proj_with_mqa
        t.add(kvr, dt, part)  # kv_a_layernorm
        _linear(t, nh * (nope + vh), kvr, dt, fp8, part)  # kv_b_proj
        _linear(t, H, nh * vh, dt, fp8, part)  # o_proj
        t.add(H, dt, part)  # input_layernorm
        t.add(H, dt, part)  # post_attention_layernorm
        if i < first or i % freq:
            for out, inp in ((inter, H), (inter, H), (H, inter)):
                _linear(t, out, inp, dt, fp8, part)
            continue
        t.add(E * H, dt, part)  # mlp.gate.weight (the router, not quantized)
        if noaux:
            t.add(E, "fp32", part)  # mlp.gate.e_score_correction_bias
        for out, inp in ((mi, H), (mi, H), (H, mi)):  # gate, up, down of each routed expert
            _linear(t, out, inp, dt, fp8, experts, E)
        if shared:
            s = mi * shared
            for out, inp in ((s, H), (s, H), (H, s)):
                _linear(t, out, inp, dt, fp8, part)


def _minimax_m2_layer(w: _W, t: Tally, dt: str, quant, H: int) -> None:
    """One MiniMax-M2 decoder layer (transformers ``models/minimax_m2/modeling_minimax_m2.py``: MiniMaxM2Attention,
    MiniMaxM2SparseMoeBlock; hub names ``block_sparse_moe.experts.{e}.w1 / w2 / w3``): q / k / v / o, the q and k
    norms over all heads (``qk_norm_type`` per_layer), the router ``gate`` and ``e_score_correction_bias`` (fp32 in
    the fp8 checkpoint), the routed experts, two norms. Its MTP modules (``num_mtp_modules``) are not in the
    published checkpoint: its fp8 scales are those of the 62 layers alone (62 x (4 + 256 x 3) = 47,864)."""
    if quant != "fp8_block128":
        raise _fail(f"weights: {w.f.file}: minimax_m2 without its fp8 quantization_config: only the fp8 checkpoint's "
                    "tensors (MiniMaxAI/MiniMax-M2) are published; give the weights (the index's total_size)")
    if w.get("shared_intermediate_size") or not w.flag("use_qk_norm") or not w.flag("use_routing_bias"):
        raise _fail(f"weights: {w.f.file}: minimax_m2 with a shared expert, or without use_qk_norm / "
                    "use_routing_bias: not the published checkpoint's layout; give the weights (the index's "
                    "total_size)")
    if w.get("qk_norm_type", "per_layer") != "per_layer":
        raise _fail(f"weights: {w.f.where('qk_norm_type')}: {str(w.get('qk_norm_type'))[:40]!r}: kvcalc derives "
                    "per_layer q / k norms only")
    nh, nkv, hd = w.int("num_attention_heads"), w.int("num_key_value_heads"), w.int("head_dim")
    E, inter = w.int("num_local_experts", 1, MAX_EXPERTS), w.int("intermediate_size")
    for out, inp in ((nh * hd, H), (nkv * hd, H), (nkv * hd, H), (H, nh * hd)):
        _linear(t, out, inp, dt, True)
    t.add(nh * hd, dt)  # q_norm
    t.add(nkv * hd, dt)  # k_norm
    t.add(E * H, "fp32")  # block_sparse_moe.gate.weight
    t.add(E, "fp32")  # block_sparse_moe.e_score_correction_bias
    for out, inp in ((inter, H), (H, inter), (inter, H)):  # w1, w2, w3 of each expert
        _linear(t, out, inp, dt, True, "experts", E)
    t.add(H, dt)  # input_layernorm
    t.add(H, dt)  # post_attention_layernorm


def _qwen3_vl_vision(fields: _Fields, t: Tally, dt: str) -> None:
    """Qwen3-VL's vision tower (transformers ``models/qwen3_vl/modeling_qwen3_vl.py``: Qwen3VLVisionModel, hub names
    ``model.visual.*``) as vision_config states it: the Conv3d patch embedding (with bias), the learned position
    embedding, ``depth`` blocks (LayerNorms with bias, fused qkv and proj with biases, fc1 / fc2 with biases), the
    merger and one deepstack merger per ``deepstack_visual_indexes`` entry (LayerNorm over D, or over D x merge^2 in
    the deepstack ones, then two Linears with biases to ``out_hidden_size``)."""
    vc = fields.top.get("vision_config")
    if not isinstance(vc, dict):
        raise _fail(f"weights: {fields.file}: vision_config: missing; Qwen3-VL's checkpoint stores its vision tower")
    need = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "in_channels": 3, "patch_size": 16,
            "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 2304,
            "out_hidden_size": 3584}  # Qwen3VLVisionConfig defaults (transformers 5.x)
    v = {}
    for k, default in need.items():
        x = vc.get(k, default)
        if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= (MAX_LAYERS if k == "depth" else 1 << 24):
            raise _fail(f"weights: {fields.file}: vision_config.{k}: expected a whole number, got {str(x)[:40]}; the "
                        "vision tower's tensors are sized by it")
        v[k] = x
    deep = vc.get("deepstack_visual_indexes", [8, 16, 24])
    if not isinstance(deep, list) or len(deep) > MAX_LAYERS or any(
            isinstance(i, bool) or not isinstance(i, int) for i in deep):
        raise _fail(f"weights: {fields.file}: vision_config.deepstack_visual_indexes: expected a list of block "
                    f"indices, got {str(deep)[:60]}")
    D, Iv, out, m = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"], v["spatial_merge_size"]
    t.add(D * v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2, dt)  # patch_embed.proj.weight
    t.add(D, dt)  # patch_embed.proj.bias
    t.add(v["num_position_embeddings"] * D, dt)  # pos_embed.weight
    for _ in range(v["depth"]):
        for n in (D, D, D, D):  # norm1 / norm2 weight and bias
            t.add(n, dt)
        for rows, cols in ((3 * D, D), (D, D), (Iv, D), (D, Iv)):  # attn.qkv, attn.proj, mlp.linear_fc1 / fc2
            t.add(rows * cols, dt)
            t.add(rows, dt)
    Dm = D * m * m
    for norm in [D] + [Dm] * len(deep):  # merger, then deepstack_merger_list
        t.add(norm, dt)  # norm.weight
        t.add(norm, dt)  # norm.bias
        for rows, cols in ((Dm, Dm), (out, Dm)):  # linear_fc1, linear_fc2
            t.add(rows * cols, dt)
            t.add(rows, dt)


def _siglip(fields: _Fields, t: Tally, dt: str) -> None:
    """Gemma 3's vision tower (SigLIP, no head) and its multimodal projector, as vision_config states them."""
    vc = fields.top.get("vision_config")
    if not isinstance(vc, dict):
        raise _fail(f"weights: {fields.file}: vision_config: missing; Gemma 3's checkpoint stores its vision tower")
    need = ("hidden_size", "intermediate_size", "num_hidden_layers", "image_size", "patch_size")
    vals = {}
    for k in need:
        v = vc.get(k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise _fail(f"weights: {fields.file}: vision_config.{k}: missing or not a whole number; the vision "
                        "tower's tensors are sized by it")
        vals[k] = v
    if vc.get("vision_use_head"):
        raise _fail(f"weights: {fields.file}: vision_config.vision_use_head: a SigLIP head is not derived")
    D, Iv, Lv, img, patch = (vals[k] for k in need)
    if Lv > MAX_LAYERS:
        raise _fail(f"weights: {fields.file}: vision_config.num_hidden_layers: {Lv:,} is more than {MAX_LAYERS:,}")
    ch = vc.get("num_channels", 3)
    if isinstance(ch, bool) or not isinstance(ch, int) or not 1 <= ch <= 64:
        raise _fail(f"weights: {fields.file}: vision_config.num_channels: expected a whole number from 1 to 64, got "
                    f"{str(ch)[:40]}")
    t.add(D * ch * patch * patch, dt)  # patch_embedding.weight
    t.add(D, dt)  # patch_embedding.bias
    t.add((img // patch) ** 2 * D, dt)  # position_embedding
    for _ in range(Lv):
        for n in (D, D, D, D):  # layer_norm1 / 2 weight and bias
            t.add(n, dt)
        for _ in range(4):  # q, k, v, out_proj weight and bias
            t.add(D * D, dt)
            t.add(D, dt)
        t.add(Iv * D, dt)
        t.add(Iv, dt)  # fc1
        t.add(D * Iv, dt)
        t.add(D, dt)  # fc2
    t.add(D, dt)  # post_layernorm.weight
    t.add(D, dt)  # post_layernorm.bias
    H = fields.int("hidden_size")
    t.add(D * H, dt)  # multi_modal_projector.mm_input_projection_weight
    t.add(D, dt)  # mm_soft_emb_norm


#: model_type -> (the routed experts' field, the experts-per-token field)
_ROUTING = {"mixtral": ("num_local_experts", "num_experts_per_tok"), "gpt_oss": ("num_local_experts",
                                                                                  "num_experts_per_tok"),
            "qwen2_moe": ("num_experts", "num_experts_per_tok"), "qwen3_moe": ("num_experts", "num_experts_per_tok"),
            "deepseek_v2": ("n_routed_experts", "num_experts_per_tok"),
            "deepseek_v3": ("n_routed_experts", "num_experts_per_tok"), "kimi_k2": ("n_routed_experts",
                                                                                   "num_experts_per_tok"),
            "minimax_m2": ("num_local_experts", "num_experts_per_tok"),
            "qwen3_vl_moe": ("num_experts", "num_experts_per_tok"),
            "qwen3_vl_moe_text": ("num_experts", "num_experts_per_tok")}


def weights_config(fields: _Fields, mt: str, index_total: int | None = None, index_file: str = "") -> dict:
    """The config's ``weights`` entry: params by stored dtype (dense, and the routed experts apart), the routing,
    and the basis (the checkpoint's total, and the MTP layers left out of what an engine loads). ``index_total``:
    model.safetensors.index.json's total_size, where one is at hand: it is the figure, and the derived one is
    checked against it (the difference, if any, is dense bytes the config cannot show, said in the basis)."""
    t = tally(fields, mt)
    out: dict = {"params": {k: v for k, v in sorted(t.dense.items()) if v}}
    if any(t.experts.values()):
        out["expert_params"] = {k: v for k, v in sorted(t.experts.items()) if v}
    if mt in _ROUTING and any(t.experts.values()):
        w = _W(fields, mt)
        out["routing"] = {"experts": w.int(_ROUTING[mt][0]), "per_token": w.int(_ROUTING[mt][1])}
    loaded = Tally.nbytes(t.dense) + Tally.nbytes(t.experts)
    basis = (f"derived from config.json ({mt}): {t.tensors:,} tensors of the checkpoint, {t.checkpoint_bytes:,} B "
             "as model.safetensors.index.json total_size sums them")
    if t.mtp:
        basis += (f"; the MTP layer's {Tally.nbytes(t.mtp):,} B are left out of the {loaded:,} B an engine loads "
                  "(vLLM and SGLang load it only for speculative decoding)")
    if index_total is not None:
        diff = index_total - t.checkpoint_bytes
        if diff == 0:
            basis += f"; equal to {index_file} total_size"
        elif diff > 0:
            out["params"]["int8"] = out["params"].get("int8", 0) + diff
            basis += (f"; {index_file} total_size is {index_total:,} B, {diff:,} B more than those tensors (tensors "
                      "the config does not show, e.g. an old checkpoint's rotary inv_freq): counted as dense bytes")
        else:
            raise _fail(f"weights: {index_file}: total_size {index_total:,} B is {-diff:,} B less than the "
                        f"{t.checkpoint_bytes:,} B of the tensors config.json implies: the index is not this "
                        "config's checkpoint")
    out["source"] = basis
    return out


def read_index(config_file: str) -> tuple[int, str] | None:
    """model.safetensors.index.json beside a local config.json: its metadata.total_size (None: no index there)."""
    import json
    from pathlib import Path

    from ...inputs import read_bytes

    p = Path(config_file).with_name("model.safetensors.index.json")
    try:
        if not p.is_file():
            return None
    except (OSError, ValueError):
        return None
    raw = read_bytes(p, None, 64 << 20)
    try:
        data = json.loads(raw.decode("utf-8"))
        total = data["metadata"]["total_size"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError):
        raise _fail(f"weights: {p}: not an index with metadata.total_size") from None
    if isinstance(total, bool) or not isinstance(total, int) or not 0 < total < 1 << 50:
        raise _fail(f"weights: {p}: metadata.total_size must be a whole number of bytes, got {str(total)[:40]}")
    return total, str(p)
