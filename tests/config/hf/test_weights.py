"""Weights from config.json, exact to the byte: the checkpoint's tensors summed as model.safetensors.index.json's
metadata.total_size sums them, held to published totals. Each expected figure is a published total_size (or a
published tensor inventory), cited beside it; where the test supplies the config, its fields are the published
config.json's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.config.hf import import_config
from kvcalc.config.hf.fields import _Fields
from kvcalc.config.hf.dispatch import checkpoint_bytes
from kvcalc.config.hf.weights import tally
from kvcalc.errors import KvcalcError

HF = Path(__file__).resolve().parents[2] / "fixtures" / "hf"


def _fixture(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


def _tensors(cfg: dict) -> int:
    f = _Fields(cfg, "config.json")
    f.use_defaults(cfg["model_type"])
    return tally(f, cfg["model_type"]).tensors


#: fixture (a real config.json, tests/fixtures/hf/SOURCES.md) -> (published total_size, published tensor count)
PUBLISHED = {
    "llama-3.1-8b": (16_060_522_496, 291),  # meta-llama/Llama-3.1-8B model.safetensors.index.json
    "mistral-7b-v0.3": (14_496_047_104, 291),  # mistralai/Mistral-7B-v0.3 index: 291 tensors
    "qwen2.5-7b": (15_231_233_024, 339),  # Qwen/Qwen2.5-7B-Instruct index: 339 entries
    "qwen3-8b": (16_381_470_720, 399),  # Qwen/Qwen3-8B index: 399 tensors
    "qwen3-30b-a3b": (61_064_245_248, None),  # Qwen/Qwen3-30B-A3B index (16 shards)
    "mixtral-8x7b": (93_405_585_408, None),  # mistralai/Mixtral-8x7B-v0.1 index
    "gemma-2-9b-it": (18_483_411_968, 464),  # google/gemma-2-9b index: 464 entries (the -it has the same shapes)
    "phi-4": (29_319_014_400, None),  # microsoft/phi-4 index
    "gpt-oss-20b": (13_761_264_768, 459),  # openai/gpt-oss-20b index: 459 tensors (mxfp4 experts)
    "gemma-3-27b": (54_864_813_280, None),  # google/medgemma-27b-it index (Gemma3ForConditionalGeneration, same shapes)
    # deepseek-ai/DeepSeek-R1 (the V3 architecture) header inventory: 91,991 tensors, 684,531,386,000 elements
    # (bf16 3,918,786,560 + fp8 680,571,043,840 + fp32 41,555,600): 688,574,839,360 B, the MTP layer included
    "deepseek-v3": (688_574_839_360, 91_991),
    # Qwen/Qwen3-VL-8B-Instruct model.safetensors.index.json total_size 17,534,247,392 (a report that read the official
    # index through hf-mirror, stored-index file id 70717024019; a test fixture built from that repo's index, id
    # 56940673981): the vision tower (model.visual.*) included
    "qwen3-vl-8b-instruct": (17_534_247_392, None),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_totals_of_real_configs(name):
    total, count = PUBLISHED[name]
    cfg = _fixture(name)
    assert checkpoint_bytes(cfg) == total
    if count is not None:
        assert _tensors(cfg) == count


def _llama(H, L, nh, nkv, inter, V, **kw):
    return {"model_type": "llama", "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": nh,
            "num_key_value_heads": nkv, "intermediate_size": inter, "vocab_size": V, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "max_position_embeddings": 131072, **kw}


#: configs written here from the published config.json fields -> (published total_size, tensors)
WRITTEN = {
    "Llama-3.1-70B": (_llama(8192, 80, 64, 8, 28672, 128256), 141_107_412_992, None),
    "Llama-3.2-3B (tied)": (_llama(3072, 28, 24, 8, 8192, 128256, tie_word_embeddings=True, head_dim=128),
                            6_425_499_648, None),
    "Qwen3-235B-A22B": (_llama(4096, 94, 64, 4, 12288, 151936, head_dim=128, model_type="qwen3_moe",
                               num_experts=128, num_experts_per_tok=8, moe_intermediate_size=1536,
                               decoder_sparse_step=1, mlp_only_layers=[]), 470_187_269_120, 36_945),
    "Qwen1.5-MoE-A2.7B": (_llama(2048, 24, 16, 16, 5632, 151936, model_type="qwen2_moe", num_experts=60,
                                 num_experts_per_tok=4, moe_intermediate_size=1408,
                                 shared_expert_intermediate_size=5632, decoder_sparse_step=1, mlp_only_layers=[]),
                          28_631_568_384, 4_659),
    "Mixtral-8x22B-v0.1": (_llama(6144, 56, 48, 8, 16384, 32000, model_type="mixtral", num_local_experts=8,
                                  num_experts_per_tok=2), 281_241_268_224, 1_739),
    "Phi-3-mini-4k": (_llama(3072, 32, 32, 32, 8192, 32064, model_type="phi3"), 7_642_159_104, 195),
    "gemma-2-2b": (_llama(2304, 26, 8, 4, 9216, 256000, tie_word_embeddings=True, head_dim=256, model_type="gemma2"),
                   5_228_683_776, None),
    "Qwen3-32B": (_llama(5120, 64, 64, 8, 25600, 151936, head_dim=128, model_type="qwen3"), 65_524_246_528, None),
    "gpt-oss-120b": (_llama(2880, 36, 64, 8, 2880, 201088, head_dim=64, model_type="gpt_oss", num_local_experts=128,
                            num_experts_per_tok=4, attention_bias=True,
                            quantization_config={"quant_method": "mxfp4"}), 65_248_815_744, None),
}


#: MiniMaxAI/MiniMax-M2: hf-mem (github.com/alvarobartt/hf-mem README, stored-index file id 51835574452) sums the
#: Hub checkpoint's safetensors headers (prod(shape) x dtype bytes per tensor, src/hf_mem/safetensors/metadata.py):
#: memory=230121630720. Its fp8 checkpoint: e4m3 attention and expert Linears with fp32 128 x 128 block scales, the
#: router and its e_score_correction_bias in fp32 (a header dump of it: "Router (gate): float32", 47,864 scales =
#: 62 layers x (4 + 256 x 3)); no MTP module is stored. MiniMax-M2.5's config.json (the fixture) has M2's geometry.
WRITTEN["MiniMax-M2 (fp8)"] = (_fixture("minimax-m2.5"), 230_121_630_720, None)


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_published_totals_of_written_configs(name):
    cfg, total, count = WRITTEN[name]
    assert checkpoint_bytes(cfg) == total
    if count is not None:
        assert _tensors(cfg) == count


def test_llama_3_1_8b_by_hand():
    # per layer: q 4096 x 4096, k and v 1024 x 4096, o 4096 x 4096, gate / up 14336 x 4096, down 4096 x 14336, two
    # norms of 4096: 218,112,000; 32 layers, embeddings and head 128,256 x 4096 each, the final norm: 8,030,261,248
    # parameters of 2 B
    per_layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    assert per_layer == 218_112_000
    assert 2 * (32 * per_layer + 2 * 128256 * 4096 + 4096) == checkpoint_bytes(_fixture("llama-3.1-8b"))


def test_qwen3_vl_moe_by_hand_from_published_totals():
    # No published total of Qwen3-VL-30B-A3B was found; its parts are published. Its text stack is Qwen3-30B-A3B's
    # (48 layers, hidden 2048, 32 / 4 heads of 128, 128 experts of 768, vocab 151,936, untied): 61,064,245,248 B
    # (Qwen/Qwen3-30B-A3B index). Its vision tower is Qwen3-VL-8B's (27 blocks of 1152, fc 4304, 3 deepstack
    # mergers) but for out_hidden_size 2048, not 4096: Qwen3-VL-8B's index 17,534,247,392 B less Qwen3-8B's
    # 16,381,470,720 B (the same text stack: 36 layers, hidden 4096, 32 / 8 heads, 12288, untied) is that tower;
    # each of the 4 mergers' linear_fc2 (weight [out, 4608], bias [out]) is then 2048 x 4609 values smaller.
    vision_8b = 17_534_247_392 - 16_381_470_720
    assert vision_8b == 1_152_776_672
    expected = 61_064_245_248 + vision_8b - 4 * 2048 * (4608 + 1) * 2
    assert checkpoint_bytes(_fixture("qwen3-vl-30b-a3b-instruct")) == expected == 62_141_508_064
    cfg = import_config(_fixture("qwen3-vl-30b-a3b-instruct"), "q.json")
    assert cfg["weights"]["routing"] == {"experts": 128, "per_token": 8}


def test_minimax_m2_other_than_its_fp8_checkpoint_is_refused():
    bf16 = {k: v for k, v in _fixture("minimax-m2.5").items() if k != "quantization_config"}
    cfg = import_config(bf16, "m.json")
    assert "weights" not in cfg and "only the fp8 checkpoint's tensors" in cfg["notes"]
    ue8m0 = _fixture("minimax-m2.5")
    ue8m0["quantization_config"] = dict(ue8m0["quantization_config"], scale_fmt="ue8m0")
    with pytest.raises(KvcalcError, match="quantization_config 'fp8' of minimax_m2"):
        checkpoint_bytes(ue8m0)


def test_the_yaml_carries_them_and_capacity_uses_them(tmp_path, cli):
    cfg = import_config(_fixture("deepseek-v3"), "deepseek-v3.json")
    w = cfg["weights"]
    # what an engine loads leaves the MTP layer out: 688,574,839,360 - its 15,424,227,552 B
    assert "15,424,227,552 B are left out" in w["source"]
    assert w["routing"] == {"experts": 256, "per_token": 8}
    r = cli("capacity", "deepseek-v3", "--gpu", "h200", "--tp", "8", "-c", "8k", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["weights_total_bytes"] == 688_574_839_360 - 15_424_227_552
    r = cli("capacity", "gpt-oss-20b", "--gpu", "h100", "-c", "8k", "--json")
    assert json.loads(r.out)["weights_total_bytes"] == 13_761_264_768


def test_an_index_beside_the_config_is_the_figure(tmp_path, cli):
    # meta-llama/Llama-2-7b-hf's index says 13,476,839,424 B: 8,192 B more than its config's tensors (each of the 32
    # layers stores its rotary inv_freq, 64 fp32 values, as transformers before 4.31 saved it)
    cfg = _fixture("llama-2-7b")
    assert checkpoint_bytes(cfg) == 13_476_839_424 - 32 * 64 * 4
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 13_476_839_424},
                                                                        "weight_map": {}}))
    r = cli("import-hf", str(tmp_path / "config.json"), "--json")
    assert r.code == 0, r.err
    w = json.loads(r.out)["config"]["weights"]
    assert "8,192 B more than those tensors" in w["source"]
    assert w["params"]["int8"] == 8192 and w["params"]["fp16"] * 2 + 8192 == 13_476_839_424
    # an index smaller than the config's tensors is another checkpoint's: refused in one line
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1000}}))
    r = cli("import-hf", str(tmp_path / "config.json"))
    assert r.code == 2 and "not this config's checkpoint" in r.err and r.err.count("\n") == 1


def test_what_is_not_derived_says_so():
    cfg = import_config(_fixture("qwen3-next-80b-a3b"), "q.json")
    assert "weights" not in cfg and cfg["notes"].startswith("no weights: qwen3_next's checkpoint tensors")
    assert "MTP (mtp.*)" in cfg["notes"]  # what is missing is named
    # a quantization kvcalc does not derive: no weights, the reason kept
    awq = dict(_fixture("qwen3-8b"), quantization_config={"quant_method": "awq", "bits": 4})
    cfg = import_config(awq, "awq.json")
    assert "weights" not in cfg and "quantization_config 'awq'" in cfg["notes"]
    with pytest.raises(KvcalcError, match="quantization_config 'awq'"):
        checkpoint_bytes(awq)


@pytest.mark.parametrize("fixture, field, value", [
    ("llama-3.1-8b", "torch_dtype", ["bfloat16"]), ("llama-3.1-8b", "torch_dtype", {"a": 1}),
    ("qwen3-30b-a3b", "mlp_only_layers", 5), ("qwen3-30b-a3b", "mlp_only_layers", "abc"),
    ("qwen3-30b-a3b", "num_experts", 10 ** 7), ("mixtral-8x7b", "num_local_experts", 10 ** 9),
    ("deepseek-v3", "num_nextn_predict_layers", 10 ** 7), ("llama-3.1-8b", "quantization_config", "fp8"),
    ("gpt-oss-20b", "quantization_config", {"bits": 4}),
])
def test_hostile_weight_fields_never_crash_or_hang(cli, tmp_path, fixture, field, value):
    """Found in review and by the fuzz: a weight field of another type, or a count that would loop for minutes, is
    a note ("no weights: ...") or one error line; never a traceback."""
    cfg = _fixture(fixture)
    cfg[field] = value
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    r = cli("import-hf", str(p), "--json")
    assert "internal error" not in r.err and "Traceback" not in r.err
    if r.code == 0:
        note = json.loads(r.out)["config"].get("notes", "")
        assert note.startswith("no weights:") and field in note, note
    else:
        assert r.code == 2 and r.err.count("\n") == 1


@pytest.mark.parametrize("field, value", [("depth", "27"), ("out_hidden_size", -1), ("deepstack_visual_indexes", 8),
                                          ("patch_size", 10 ** 9)])
def test_a_qwen3_vl_vision_field_of_another_type(field, value):
    cfg = _fixture("qwen3-vl-8b-instruct")
    cfg["vision_config"] = dict(cfg["vision_config"], **{field: value})
    out = import_config(cfg, "q.json")
    assert "weights" not in out and field in out["notes"]


def test_a_gemma3_vision_field_of_another_type():
    cfg = _fixture("gemma-3-27b")
    cfg["vision_config"] = dict(cfg["vision_config"], num_channels="3")
    out = import_config(cfg, "g.json")
    assert "weights" not in out and "num_channels" in out["notes"]
