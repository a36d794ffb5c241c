"""kvcalc import-hf of MiniMax-M2 (minimax_m2), Qwen3-VL (qwen3_vl, qwen3_vl_moe and their *_text configs) and
MiMo-7B (mimo): verbatim config.json fixtures (tests/fixtures/hf, provenance in SOURCES.md). Every expected number
is hand arithmetic written here: layers x KV heads x head_dim x 2 (K, V) x bytes per value x tokens."""

import json
import re
from pathlib import Path

import pytest

from kvcalc.config import load_hf
from kvcalc.config.hf import import_config
from kvcalc.errors import KvcalcError
from kvcalc.estimate import estimate

HF = Path(__file__).parents[2] / "fixtures" / "hf"
K8 = 8192


def _data(name):
    return json.loads((HF / f"{name}.json").read_text())


def _bytes(name, ctx=K8, precision="bf16", mtp=False):
    return int(estimate(load_hf(HF / f"{name}.json"), [ctx], precision=precision, mtp=mtp).per_sequence[0])


def _refused(data, pattern):
    with pytest.raises(KvcalcError, match=pattern) as info:
        import_config(data, "config.json")
    assert "\n" not in str(info.value) and str(info.value).startswith("config.json: ")


# ---- MiniMax-M2.5 / M2.7 (minimax_m2) ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, max_pos", [("minimax-m2.5", 196_608), ("minimax-m2.7", 204_800)])
def test_minimax_m2_every_layer_full_gqa(name, max_pos):
    # 62 layers x 8 KV heads x head_dim 128 x 2 (K, V) x 2 B = 253,952 B per token, every layer softmax attention
    # (vLLM minimax_m2.py passes no window; the transformers class has none)
    per_token = 62 * 8 * 128 * 2 * 2
    assert per_token == 253_952
    assert _bytes(name) == K8 * per_token == 2_080_374_784
    # fp8: 1 B per value, half of it
    assert _bytes(name, precision="fp8") == K8 * 62 * 8 * 128 * 2 == 1_040_187_392
    spec = load_hf(HF / f"{name}.json")
    assert set(spec.layers) == {"global"} and len(spec.layers) == 62
    # num_mtp_modules 3: no engine runs them (vLLM drops their weights), so there is no MTP layer to count
    assert not spec.mtp_layers
    assert _bytes(name, mtp=True) == _bytes(name)
    cfg = import_config(_data(name))
    assert cfg["max_context"]["value"] == max_pos
    assert cfg["architecture"]["value"] == "MiniMaxM2ForCausalLM"
    assert cfg["components"]["full"]["head_dim"] == {"value": 128, "source": "config.json head_dim"}
    assert "MTP modules" in cfg["layers"][0]["note"]


def test_minimax_m2_attn_type_list_and_windows():
    # M2.7 lists attn_type_list, every entry 1 (softmax); the note cites it
    assert "config.json attn_type_list: all 62 layers 1" in import_config(_data("minimax-m2.7"))["layers"][0]["note"]
    # a 0 (MiniMax-M1's lightning attention) is ignored by vLLM's and SGLang's minimax_m2.py: refused, not guessed
    data = _data("minimax-m2.7")
    data["attn_type_list"] = [1, 1, 1, 0] + [1] * 58
    _refused(data, re.escape("attn_type_list[3]: int 0; minimax_m2 layers are all softmax attention"))
    data["attn_type_list"] = [1] * 61
    _refused(data, re.escape("attn_type_list: must list 62 attention types (num_hidden_layers), got 61 entries"))
    # a stated window would slide every layer in vLLM and none in SGLang: refused
    _refused(dict(_data("minimax-m2.5"), sliding_window=4096), re.escape("sliding_window: int 4096 stated, but"))


def test_minimax_m2_omitted_fields_take_the_class_defaults():
    # transformers MiniMaxM2Config: head_dim 128 (not 3072 / 48 = 64), 8 KV heads, 196,608 positions
    data = {k: v for k, v in _data("minimax-m2.5").items()
            if k not in ("head_dim", "num_key_value_heads", "max_position_embeddings")}
    cfg = import_config(data)
    full = cfg["components"]["full"]
    assert full["head_dim"]["value"] == 128 and full["kv_heads"]["value"] == 8
    assert "MiniMaxM2Config default" in full["head_dim"]["source"]
    assert cfg["max_context"]["value"] == 196_608


# ---- Qwen3-VL (qwen3_vl / qwen3_vl_moe, text_config qwen3_vl_text / qwen3_vl_moe_text) ---------------------------
def test_qwen3_vl_dense_and_moe():
    # Qwen3-VL-8B: 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 147,456 B per token
    assert _bytes("qwen3-vl-8b-instruct") == K8 * 36 * 8 * 128 * 2 * 2 == 1_207_959_552
    # Qwen3-VL-30B-A3B (MoE): 48 layers x 4 KV heads x 128 x 2 x 2 B = 98,304 B per token
    assert _bytes("qwen3-vl-30b-a3b-instruct") == K8 * 48 * 4 * 128 * 2 * 2 == 805_306_368
    for name in ("qwen3-vl-8b-instruct", "qwen3-vl-30b-a3b-instruct"):
        cfg = import_config(_data(name))
        assert cfg["components"]["full"]["head_dim"] == {"value": 128, "source": "config.json text_config.head_dim"}
        assert cfg["max_context"] == {"value": 262_144, "source": "config.json text_config.max_position_embeddings"}
        # multimodal: the vision tower's hidden_size 1152 as stated; its depth (27) is not num_hidden_layers, which
        # Qwen3VLVisionConfig lacks, so SGLang's getattr(..., "num_hidden_layers", 24) takes 24
        assert cfg["multimodal"] == {"text_config": True, "vision_config": True, "vision_num_hidden_layers": None,
                                     "vision_hidden_size": 1152, "source": "config.json vision_config"}
        assert set(cfg["components"]) == {"full"}


def test_qwen3_vl_on_sglang_is_multimodal(cli):
    # SGLang lists Qwen3VLForConditionalGeneration as multimodal: the memory fraction x 0.95 x (1 - 0.1 x
    # (24 x 1152^2 / (24 x 1024^2) - 1)) = x 0.95 x 0.9734375, and 100 MB off the KV budget; the text model
    # Qwen3-8B on the same GPU keeps the plain fraction
    args = ["--gpu", "h200", "--engine", "sglang", "--weights-gib", "16", "--json"]
    vl = cli("capacity", "--hf", str(HF / "qwen3-vl-8b-instruct.json"), *args)
    text = cli("capacity", "--hf", str(HF / "qwen3-8b.json"), *args)
    assert vl.code == 0 and text.code == 0, vl.err + text.err
    assert vl.json()["mem_fraction_static"] == pytest.approx(text.json()["mem_fraction_static"] * 0.95 * 0.9734375,
                                                             rel=1e-12)
    assert vl.json()["context_tokens"] == 262_144


def test_qwen3_vl_windows_refused_and_class_defaults():
    data = _data("qwen3-vl-8b-instruct")
    data["text_config"]["sliding_window"] = 4096
    _refused(data, re.escape("config.json: text_config.sliding_window: int 4096 stated, but qwen3_vl_text has no "
                             "sliding window"))
    data = _data("qwen3-vl-30b-a3b-instruct")
    data["text_config"]["layer_types"] = ["sliding_attention"] + ["full_attention"] * 47
    _refused(data, re.escape("text_config.layer_types[0]: 'sliding_attention' stated"))
    # omitted fields: Qwen3VLTextConfig states head_dim 128 and 32 KV heads (hidden 2560 / 32 heads would be 80)
    data = _data("qwen3-vl-8b-instruct")
    for key in ("head_dim", "num_key_value_heads"):
        del data["text_config"][key]
    data["text_config"]["hidden_size"] = 2560
    full = import_config(data)["components"]["full"]
    assert (full["head_dim"]["value"], full["kv_heads"]["value"]) == (128, 32)
    assert "Qwen3VLTextConfig default head_dim" in full["head_dim"]["source"]
    # Qwen3VLMoeTextConfig's head_dim is None: hidden_size 2048 / 32 heads = 64, derived as __post_init__ does
    data = _data("qwen3-vl-30b-a3b-instruct")
    del data["text_config"]["head_dim"]
    assert import_config(data)["components"]["full"]["head_dim"]["value"] == 64
    # a text config without its own model_type takes the outer one's family and class
    data = _data("qwen3-vl-8b-instruct")
    del data["text_config"]["model_type"]
    assert import_config(data)["components"]["full"]["kv_heads"]["value"] == 8


# ---- MiMo-7B (mimo) --------------------------------------------------------------------------------------------
def test_mimo_qwen2_layers_and_mtp():
    # 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 147,456 B per token; use_sliding_window false, so the stated
    # sliding_window 32768 is dropped (Qwen2Config.__post_init__) and every layer is full
    assert _bytes("mimo-7b-base") == K8 * 36 * 8 * 128 * 2 * 2 == 1_207_959_552
    # num_nextn_predict_layers 1: the MTP layer is one more Qwen2 decoder layer (vLLM mimo_mtp.py)
    assert _bytes("mimo-7b-base", mtp=True) == K8 * 37 * 8 * 128 * 2 * 2 == 1_241_513_984
    assert _bytes("mimo-7b-base", precision="fp8") == K8 * 36 * 8 * 128 * 2 == 603_979_776
    cfg = import_config(_data("mimo-7b-base"))
    assert cfg["mtp"]["layers"] == 1 and cfg["mtp"]["kind"] == "global"
    assert cfg["max_context"]["value"] == 32_768 and set(cfg["components"]) == {"full"}


def test_mimo_refusals_and_defaults():
    base = _data("mimo-7b-base")
    # vLLM's Qwen2 layers slide with use_sliding_window, SGLang's never: refused
    _refused(dict(base, use_sliding_window=True), re.escape("use_sliding_window: true; a sliding MiMo is not imported"))
    # vLLM's Qwen2Attention takes hidden_size / heads (4096 / 32 = 128) and ignores head_dim; SGLang reads it
    _refused(dict(base, head_dim=96), re.escape("head_dim: 96 is not hidden_size 4096 / num_attention_heads 32"))
    # omitted num_key_value_heads: Qwen2Config's default 32 (MiMoConfig subclasses it), not 8
    data = {k: v for k, v in base.items() if k != "num_key_value_heads"}
    assert import_config(data)["components"]["full"]["kv_heads"]["value"] == 32
    # no MTP layers stated: none
    assert "mtp" not in import_config({k: v for k, v in base.items() if k != "num_nextn_predict_layers"})


def test_mimo_capacity_with_mtp_on_vllm_and_refused_on_sglang(cli):
    # vLLM, 40 GiB pool, --mtp: a block of 16 tokens x 37 layers x 4,096 B = 2,424,832 B;
    # 42,949,672,960 // 2,424,832 = 17,712 blocks; a 32,768-token request 2,048 blocks; (17,712 - 1) // 2,048 = 8
    r = cli("capacity", "--hf", str(HF / "mimo-7b-base.json"), "--kv-memory", "40GiB", "--mtp", "--json")
    assert r.code == 0, r.err
    j = r.json()
    assert (j["bytes_per_block"], j["num_blocks"], j["blocks_per_request"], j["requests_per_replica"]) == \
        (16 * 37 * 4096, 42_949_672_960 // 2_424_832, 32_768 // 16, (17_712 - 1) // 2048)
    r = cli("capacity", "--hf", str(HF / "mimo-7b-base.json"), "--kv-memory", "40GiB", "--mtp", "--engine", "sglang")
    assert r.code == 2 and "not modelled for SGLang" in r.err


@pytest.mark.parametrize("name", ["minimax-m2.5", "minimax-m2.7", "qwen3-vl-8b-instruct", "mimo-v2-flash",
                                  "qwen3-vl-30b-a3b-instruct", "mimo-7b-base"])
def test_estimate_and_capacity_on_both_engines(cli, name):
    path = str(HF / f"{name}.json")
    assert cli("estimate", "--hf", path, "-c", "8k").code == 0
    for engine in ("vllm", "sglang"):
        r = cli("capacity", "--hf", path, "--gpu", "h200", "--engine", engine, "--weights-gib", "16", "--json")
        assert r.code == 0, (engine, r.err)
        assert r.json()["requests_per_replica"] >= 1


# ---- MiMo-V2-Flash (mimo_v2_flash) -------------------------------------------------------------------------------
def test_mimo_v2_flash_full_and_window_layers_with_narrow_values():
    # hybrid_layer_pattern: 9 full layers (0) of 4 KV heads x (K 192 + V 128) x 2 B = 2,560 B per token; 39 sliding
    # layers (1) of swa_num_key_value_heads 8 x (192 + 128) x 2 B = 5,120 B per token over sliding_window_size 128
    full, swa = 4 * (192 + 128) * 2, 8 * (192 + 128) * 2
    assert (full, swa) == (2_560, 5_120)
    assert _bytes("mimo-v2-flash") == 9 * K8 * full + 39 * 128 * swa == 214_302_720
    assert _bytes("mimo-v2-flash", ctx=100) == 9 * 100 * full + 39 * 100 * swa == 22_272_000
    assert _bytes("mimo-v2-flash", precision="fp8") == 214_302_720 // 2
    # vLLM runs one MTP layer (mimo_v2_mtp.py), a sliding layer with the SWA heads
    assert _bytes("mimo-v2-flash", mtp=True) == 214_302_720 + 128 * swa == 214_958_080
    spec = load_hf(HF / "mimo-v2-flash.json")
    assert [i for i, k in enumerate(spec.layers) if k == "global"] == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    cfg = import_config(_data("mimo-v2-flash"))
    assert cfg["components"]["sliding"]["kv_heads"] == {"value": 8, "source": "config.json swa_num_key_value_heads"}
    assert cfg["components"]["sliding"]["window"] == {"value": 128, "source": "config.json sliding_window_size"}
    assert cfg["components"]["full"]["v_head_dim"] == {"value": 128, "source": "config.json v_head_dim"}
    assert cfg["max_context"]["value"] == 262_144


def test_mimo_v2_flash_on_vllm_unifies_the_pages(cli):
    # per-layer pages at vLLM's 16-token block: full 16 x 2,560 = 40,960 B, sliding 16 x 5,120 = 81,920 B; the
    # full page divides the sliding one, so the full layers take blocks of 16 x 81,920 / 40,960 = 32 tokens
    r = cli("capacity", "--hf", str(HF / "mimo-v2-flash.json"), "--kv-memory", "40GiB", "--json")
    assert r.code == 0, r.err
    rows = {(lp["component"], lp["block_size"], lp["entry_bytes"], lp["page_bytes"])
            for p in r.json()["pages"] for lp in p["layer_pages"]}
    assert rows == {("full", 32, 2_560, 81_920), ("sliding", 16, 5_120, 81_920)}


def test_mimo_v2_flash_refusals_and_defaults():
    base = _data("mimo-v2-flash")
    _refused({k: v for k, v in base.items() if k != "hybrid_layer_pattern"},
             re.escape("hybrid_layer_pattern: required for this model type"))
    _refused(dict(base, hybrid_layer_pattern=[0, 1, 2] + [1] * 45),
             re.escape("hybrid_layer_pattern[2]: int 2 is neither 0 (full attention) nor 1"))
    _refused(dict(base, hybrid_layer_pattern=[0, 1]), re.escape("hybrid_layer_pattern: must list 48 layer codes"))
    _refused(dict(base, swa_num_key_value_heads=5), re.escape("swa_num_key_value_heads: 5 KV heads must divide"))
    # omitted v_head_dim: MiMoV2FlashConfig's 128; omitted swa_v_head_dim: vLLM's MiMoV2Attention takes the K width
    cfg = import_config({k: v for k, v in base.items() if k not in ("v_head_dim", "swa_v_head_dim")})
    assert cfg["components"]["full"]["v_head_dim"]["value"] == 128
    assert "MiMoV2FlashConfig default v_head_dim" in cfg["components"]["full"]["v_head_dim"]["source"]
    assert cfg["components"]["sliding"]["v_head_dim"] == {"value": 192, "source": "config.json swa_head_dim"}


@pytest.mark.parametrize("data, reason", [
    ({"model_type": "gemma4", "text_config": {"model_type": "gemma4_text", "num_hidden_layers": 30}},
     "'gemma4_text': Gemma 4 is not imported yet"),
    ({"model_type": "gemma4_text", "num_hidden_layers": 30}, "'gemma4_text': Gemma 4 is not imported yet"),
    ({"model_type": "nemotron-nas", "num_hidden_layers": 80}, "'nemotron-nas': Nemotron-NAS (DeciLM) is not imported"),
])
def test_families_refused_with_their_reason(data, reason):
    # their caches are known, but kvcalc's SGLang engine would price them wrong: one line naming the reason
    _refused(data, re.escape(f"config.json: model_type: {reason}"))
