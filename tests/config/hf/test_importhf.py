"""kvcalc import-hf: real Hugging Face config.json files (tests/fixtures/hf, provenance in SOURCES.md) read
into kvcalc configs. Expected bytes are hand arithmetic written in each test: layers x entries x bytes."""

import json
from pathlib import Path

import numpy as np
import pytest

from kvcalc.config import load_hf, load_model
from kvcalc.config.hf import import_config, read_config
from kvcalc.errors import KvcalcError
from kvcalc.estimate import estimate

HF = Path(__file__).parents[2] / "fixtures" / "hf"
K = 4096  # context for the per-model figures


def _bytes(name, ctx=K, precision="bf16", mtp=False):
    return int(estimate(load_hf(HF / f"{name}.json"), [ctx], precision=precision, mtp=mtp).per_sequence[0])


@pytest.mark.parametrize("name, layers, kv_heads, head_dim", [
    ("llama-2-7b", 32, 32, 4096 // 32),    # no head_dim stated: hidden_size / num_attention_heads
    ("llama-3.1-8b", 32, 8, 4096 // 32),
    ("mixtral-8x7b", 32, 8, 4096 // 32),   # sliding_window null: every layer full
    ("qwen3-8b", 36, 8, 128),              # head_dim stated (128, not 4096 / 32)
    ("qwen3-30b-a3b", 48, 4, 128),         # head_dim 128 stated, hidden_size / heads would give 64
    ("qwen2.5-7b", 28, 4, 3584 // 28),     # sliding_window stated but use_sliding_window false: every layer full
])
def test_gqa_families(name, layers, kv_heads, head_dim):
    # K and V, 2 B each in bf16, for every token in every layer
    assert _bytes(name) == layers * K * 2 * kv_heads * head_dim * 2
    # fp8: 1 B per value
    assert _bytes(name, precision="fp8") == layers * K * 2 * kv_heads * head_dim


def test_head_dim_derived_only_when_not_stated():
    cfg = import_config(json.loads((HF / "qwen3-30b-a3b.json").read_text()))
    assert cfg["components"]["full"]["head_dim"] == {"value": 128, "source": "config.json head_dim"}
    cfg = import_config(json.loads((HF / "llama-3.1-8b.json").read_text()))
    assert cfg["components"]["full"]["head_dim"]["source"].startswith("derived: config.json hidden_size 4096")


def test_gpt_oss_layer_types():
    # 24 layers alternating sliding (128 tokens) and full, 8 KV heads of 64: 2 x 8 x 64 x 2 B = 2,048 B per token
    per_token = 2 * 8 * 64 * 2
    assert _bytes("gpt-oss-20b") == 12 * K * per_token + 12 * 128 * per_token
    spec = load_hf(HF / "gpt-oss-20b.json")
    assert spec.layers[:2] == ("local", "global")


@pytest.mark.parametrize("name, layers, mtp", [("deepseek-v3", 61, 1), ("kimi-k2", 61, 0), ("deepseek-v2-lite", 27, 0)])
def test_mla_families(name, layers, mtp):
    # one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values per token per layer
    assert _bytes(name) == layers * K * 576 * 2
    assert _bytes(name, precision="fp8") == layers * K * 576
    assert _bytes(name, mtp=True) == (layers + mtp) * K * 576 * 2


def test_dsa_families():
    # MLA latent + a 128-wide indexer key per token: bf16 576 x 2 + 128 x 2 = 1,408 B; fp8 656 + 132 = 788 B
    assert _bytes("deepseek-v3.2") == 61 * K * 1408
    assert _bytes("glm-dsa") == 78 * K * 1408
    assert _bytes("glm-dsa", precision="fp8") == 78 * K * 788


def test_deepseek_v4_flash():
    # window 128 in all 43 layers; 21 c4a layers: K / 4 entries + K / 4 indexer keys + state; 20 c128a: K / 128
    # entries + state. bf16: 512 x 2 B entries, 128 x 2 B keys; state fp32 [8, 2, 2, 512] (c4),
    # [8, 2, 2, 128] (c4 indexer), [128, 2, 1, 512] (c128)
    entry, key = 1024, 256
    c4_state = 8 * 2 * 2 * 512 * 4 + 8 * 2 * 2 * 128 * 4
    c128_state = 128 * 2 * 1 * 512 * 4
    want = 43 * 128 * entry + 21 * (K // 4 * (entry + key) + c4_state) + 20 * (K // 128 * entry + c128_state)
    assert _bytes("deepseek-v4-flash") == want


@pytest.mark.parametrize("fixture, shipped", [("deepseek-v4-flash", "deepseek-v4-flash"),
                                              ("deepseek-v3.2", "deepseek-v3.2"), ("llama-3.1-8b", "llama-3.1-8b"),
                                              ("qwen3-8b", "qwen3-8b"), ("gemma-3-27b", "gemma-3-27b")])
def test_imports_agree_with_the_hand_written_configs(fixture, shipped):
    """Two independent routes to the same model: the config kvcalc ships (written by hand from the model's
    report and config) and the importer reading config.json. Every precision both have, with and without
    MTP, at contexts around the window and block edges."""
    a, b = load_hf(HF / f"{fixture}.json"), load_model(shipped)
    ctx = [1, 127, 128, 129, 4096, 65536, 1 << 20]
    for prec in set(a.precisions) & set(b.precisions):
        for mtp in (False, True):
            assert np.array_equal(estimate(a, ctx, precision=prec, mtp=mtp).per_sequence,
                                  estimate(b, ctx, precision=prec, mtp=mtp).per_sequence), (prec, mtp)


def test_every_value_cites_its_field():
    cfg = import_config(json.loads((HF / "deepseek-v4-flash.json").read_text()))
    c4 = cfg["components"]["c4_indexer"]
    assert c4["dim"] == {"value": 128, "source": "config.json index_head_dim"}
    assert cfg["layers"]["select"]["source"].startswith("config.json compress_ratios")
    assert cfg["max_context"] == {"value": 1048576, "source": "config.json max_position_embeddings"}


def test_nested_text_config_and_default_pattern(tmp_path):
    # a Gemma 3 style config: text_config nested, sliding_window_pattern omitted (transformers default 6)
    cfg = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 12,
                                                   "num_attention_heads": 8, "num_key_value_heads": 4,
                                                   "head_dim": 256, "hidden_size": 2560, "sliding_window": 1024}}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    spec = load_hf(tmp_path)
    assert spec.layers == ("local",) * 5 + ("global",) + ("local",) * 5 + ("global",)
    per_token = 2 * 4 * 256 * 2
    assert int(estimate(spec, [K]).per_sequence[0]) == 2 * K * per_token + 10 * 1024 * per_token


def test_non_strict_json_tokens(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, '
                 '"rope_scaling": null, "initializer_range": Infinity, "foo": NaN}')
    data, _ = read_config(p)
    assert data["initializer_range"] == float("inf")
    assert int(estimate(load_hf(p), [10]).per_sequence[0]) == 2 * 10 * 2 * 4 * 64 * 2


@pytest.mark.parametrize("patch, field", [
    ({"model_type": "mamba"}, "model_type: 'mamba' is not a family"),
    ({"model_type": None}, "model_type: missing"),
    ({"num_hidden_layers": None}, "num_hidden_layers: required"),
    ({"num_hidden_layers": 2.5}, "num_hidden_layers: expected an integer"),
    ({"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}, "layer_types[0]: 'linear_attention'"),
    ({"hidden_size": 100, "num_attention_heads": 3}, "head_dim: not stated"),
])
def test_fail_closed(tmp_path, patch, field):
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}
    cfg.update(patch)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(KvcalcError, match=f": {__import__('re').escape(field)}") as info:
        load_hf(p)
    assert "\n" not in str(info.value)


def test_cli(cli, tmp_path):
    out = tmp_path / "m.yaml"
    r = cli("import-hf", str(HF / "kimi-k2.json"), "-o", str(out))
    assert r.code == 0, r.err
    text = out.read_text()
    assert "name: m\n" in text and "config.json kv_lora_rank" in text
    r = cli("estimate", str(out), "-c", "4k", "--json")
    assert r.json()[0]["total_bytes"] == 61 * K * 576 * 2
    r = cli("estimate", "--hf", str(HF / "kimi-k2.json"), "-c", "4k", "--json")
    assert r.json()[0]["total_bytes"] == 61 * K * 576 * 2
    r = cli("show", "--hf", str(HF / "gpt-oss-20b.json"), "--json")
    assert r.code == 0
    r = cli("import-hf", str(tmp_path / "nope.json"))
    assert r.code == 2 and "does not exist (no such file)" in r.err and r.err.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = cli("import-hf", str(bad))
    assert r.code == 2 and "not valid JSON" in r.err and r.err.count("\n") == 1
    r = cli("show", "llama-3.1-8b", "--hf", str(HF / "kimi-k2.json"))
    assert r.code == 2 and "one of the two" in r.err


def test_qwen3_next_gated_deltanet():
    # 48 layers, full_attention_interval 4: 12 full attention (2 KV heads x 256, K and V, bf16: 2,048 B per
    # token) and 36 gated DeltaNet layers with fixed state (vLLM gated_delta_net_state_shape):
    # conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 24,576 values, recurrent 32 x 128 x 128 = 524,288 values
    per_state = 3 * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128
    assert per_state == 548_864
    assert _bytes("qwen3-next-80b-a3b") == 12 * K * 2 * 2 * 256 * 2 + 36 * per_state * 2  # state bf16
    assert _bytes("qwen3-next-80b-a3b", precision="fp32-state") == 12 * K * 2048 + 36 * per_state * 4
    spec = load_hf(HF / "qwen3-next-80b-a3b.json")
    assert spec.layers[:4] == ("linear", "linear", "linear", "attention")


def test_nemotron_h_pattern(tmp_path):
    """Nemotron-H-8B's published architecture fields (nvidia/Nemotron-H-8B-Base-8K config.json; no verbatim
    copy of the file was available offline, so this test writes the fields it needs)."""
    cfg = {"model_type": "nemotron_h", "num_hidden_layers": 52,
           "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
           "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
           "max_position_embeddings": 8192}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    spec = load_hf(p)
    assert spec.layers.count("mamba") == 24 and spec.layers.count("attention") == 4 and spec.layers.count("mlp") == 24
    assert spec.layers[3] == "mlp" and spec.layers[7] == "attention"  # the model's own layer indices
    # Mamba-2 (vLLM mamba2_state_shape): conv (4 - 1) x (128 x 64 + 2 x 8 x 128) = 30,720 values in bf16,
    # SSM 128 x 64 x 128 = 1,048,576 values in fp32 (vLLM's Nemotron-H default when the config states none)
    mamba = 3 * (128 * 64 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 4
    assert mamba == 4_255_744
    attn_per_token = 2 * 8 * 128 * 2
    assert int(estimate(spec, [K]).per_sequence[0]) == 24 * mamba + 4 * K * attn_per_token
    bad = dict(cfg, hybrid_override_pattern="M-M")
    p.write_text(json.dumps(bad))
    with pytest.raises(KvcalcError, match="hybrid_override_pattern: must be a string of 52 layer codes"):
        load_hf(p)


def test_nemotron_h_56b_verbatim():
    # nvidia/Nemotron-H-56B-Base-8K (a verbatim file): 118 layer codes, 10 '*' attention (8 KV heads of
    # attention_head_dim 128: 2 x 8 x 128 x 2 B = 4,096 B per token), 54 'M' Mamba-2, 54 '-' MLP without cache.
    # Mamba-2 (vLLM mamba2_state_shape): conv (4 - 1) x (256 heads x 64 + 2 x 8 groups x 256 state) = 61,440
    # values in bf16, SSM 256 x 64 x 256 = 4,194,304 values in fp32 (vLLM NemotronHForCausalLMConfig: the config
    # states no mamba_ssm_cache_dtype, so float32): 16,900,096 B per layer
    spec = load_hf(HF / "nemotron-h-56b-base-8k.json")
    assert (spec.layers.count("attention"), spec.layers.count("mamba"), spec.layers.count("mlp")) == (10, 54, 54)
    mamba = 61_440 * 2 + 4_194_304 * 4
    assert mamba == 16_900_096
    assert _bytes("nemotron-h-56b-base-8k", ctx=8192) == 10 * 8192 * 4096 + 54 * mamba == 1_248_149_504
    # fp32-state: the conv state goes to fp32 too, attention stays bf16
    assert _bytes("nemotron-h-56b-base-8k", ctx=8192, precision="fp32-state") == \
        10 * 8192 * 4096 + 54 * (61_440 + 4_194_304) * 4
    # a stated mamba_ssm_cache_dtype wins
    data = json.loads((HF / "nemotron-h-56b-base-8k.json").read_text(), parse_constant=float)
    cfg = import_config(dict(data, mamba_ssm_cache_dtype="bfloat16"))
    assert cfg["components"]["mamba"]["ssm_dtype"] == "bf16"


def test_layers_without_cache_have_their_own_row(cli):
    r = cli("estimate", "nemotron-h-56b", "-c", "8k")
    assert r.code == 0, r.err
    row = next(line for line in r.out.splitlines() if line.lstrip().startswith("mlp"))
    assert row.split() == ["mlp", "54", "(no", "cache)", "0", "B", "0", "B"]
    assert "1,248,149,504 B" in r.out


def test_minimax_m1_verbatim():
    # MiniMax-M1 (model_type minimax_m1, MiniMax's own file): attn_type_list puts softmax attention in every
    # 8th layer (10 of 80; 8 KV heads of 128, 4,096 B per token in bf16); the other 70 hold one lightning
    # attention state of 64 heads x 128 x 128 values, 2,097,152 B in bf16
    spec = load_hf(HF / "minimax-m1.json")
    assert spec.layers.count("softmax") == 10 and spec.layers[7] == "softmax" and spec.layers[0] == "linear"
    assert _bytes("minimax-m1", ctx=8192) == 10 * 8192 * 4096 + 70 * 64 * 128 * 128 * 2 == 482_344_960


def test_zoo_configs_are_the_importers_output():
    """kvcalc/data/configs/<zoo>.yaml are generated from the fixtures by scripts/make_zoo.py; a stale file fails here."""
    import subprocess
    import sys

    root = HF.parents[2]
    r = subprocess.run([sys.executable, str(root / "scripts" / "make_zoo.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_zoo_models_load_by_name():
    # llama-2-7b: 32 layers x 2 x 32 heads x 128 x 2 B (fp16, the checkpoint's dtype, is its default)
    spec = load_model("llama-2-7b")
    assert spec.default_precision == "fp16"
    assert int(estimate(spec, [K]).per_sequence[0]) == 32 * K * 2 * 32 * 128 * 2
    assert int(estimate(load_model("glm-5"), [K]).per_sequence[0]) == 78 * K * 1408


@pytest.mark.parametrize("fixture", sorted(p.stem for p in HF.glob("*.json")))
def test_round_trip_through_yaml(fixture, cli, tmp_path):
    """import-hf -> YAML file -> estimate equals estimate --hf on the config.json directly, every precision."""
    out = tmp_path / f"{fixture}.yaml"
    r = cli("import-hf", str(HF / f"{fixture}.json"), "-o", str(out))
    assert r.code == 0, r.err
    a, b = load_model(str(out)), load_hf(HF / f"{fixture}.json")
    ctx = [1, 100, 4096, 1 << 17, 1 << 20]
    for prec in b.precisions:
        for mtp in (False, True):
            assert np.array_equal(estimate(a, ctx, precision=prec, mtp=mtp).per_sequence,
                                  estimate(b, ctx, precision=prec, mtp=mtp).per_sequence), (prec, mtp)


def test_gemma3_from_the_published_minimal_config():
    """google/gemma-3-27b-it publishes a minimal config: text_config without sliding_window_pattern, so the
    transformers default (6: five local layers, then one global) applies. 62 layers: 52 local over 1,024
    tokens, 10 global; 16 KV heads of 128, K and V in bf16: 8,192 B per token per layer."""
    per_token = 2 * 16 * 128 * 2
    assert _bytes("gemma-3-27b") == 10 * K * per_token + 52 * 1024 * per_token
    cfg = import_config(json.loads((HF / "gemma-3-27b.json").read_text()))
    assert "default sliding_window_pattern 6" in cfg["layers"]["source"]
    assert cfg["components"]["sliding"]["window"]["source"] == "config.json text_config.sliding_window"


def test_qwen3_5_state_dtype_and_mtp():
    # 32 layers in layer_types: 8 full attention (4 KV heads x 256, K and V, bf16: 4,096 B per token) and 24
    # gated DeltaNet layers: conv 3 x (2 x 16 x 128 + 32 x 128) = 24,576 values in the state role (bf16),
    # recurrent 32 x 128 x 128 = 524,288 values in fp32 (config.json mamba_ssm_dtype float32)
    per_state = 24_576 * 2 + 524_288 * 4
    assert _bytes("qwen3.5-9b") == 8 * K * 4096 + 24 * per_state
    # the MTP layer is one more full-attention layer
    assert _bytes("qwen3.5-9b", mtp=True) == 9 * K * 4096 + 24 * per_state


def test_phi4_and_mistral_v03():
    # phi-4: 40 layers, 10 KV heads, head_dim 5120 / 40 = 128 (derived), no sliding window
    assert _bytes("phi-4") == 40 * K * 2 * 10 * 128 * 2
    # Mistral-7B v0.3: sliding_window null, every layer full; 32 layers, 8 KV heads of 4096 / 32 = 128
    assert _bytes("mistral-7b-v0.3") == 32 * K * 2 * 8 * 128 * 2


# ---- families without a verbatim config.json fixture (none could be found offline): the test writes the
# architecture fields of the published config, and the expected bytes by hand ------------------------------
def _load(tmp_path, cfg):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return load_hf(p)


def test_llama4_chunked_attention(tmp_path):
    # Llama-4-Scout text model: 48 layers, every 4th NoPE (global), the others chunked over 8,192 tokens;
    # 8 KV heads of 128: 4,096 B per token per layer in bf16
    spec = _load(tmp_path, {"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "hidden_size": 5120, "attention_chunk_size": 8192}})
    assert spec.layers[:4] == ("chunked", "chunked", "chunked", "global")
    # at 20,000 tokens a chunked layer keeps the last chunk's 20,000 - 2 x 8,192 = 3,616 tokens
    assert int(estimate(spec, [20_000]).per_sequence[0]) == 12 * 20_000 * 4096 + 36 * 3_616 * 4096
    # at exactly 16,384 the second chunk is full: 8,192 tokens
    assert int(estimate(spec, [16_384]).per_sequence[0]) == 12 * 16_384 * 4096 + 36 * 8_192 * 4096


def test_jamba_mamba1(tmp_path):
    # Jamba v0.1: 32 layers, attention where i % 8 == 4 (4 layers); Mamba-1 with d_state 16, d_conv 4,
    # expand 2 x hidden 4096 = 8,192: conv 3 x 8,192 + SSM 8,192 x 16 values (vLLM mamba1_state_shape), bf16
    spec = _load(tmp_path, {"model_type": "jamba", "num_hidden_layers": 32, "attn_layer_period": 8,
                            "attn_layer_offset": 4, "hidden_size": 4096, "num_attention_heads": 32,
                            "num_key_value_heads": 8, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2})
    mamba = (3 * 8192 + 8192 * 16) * 2
    assert int(estimate(spec, [K]).per_sequence[0]) == 4 * K * 2 * 8 * 128 * 2 + 28 * mamba


def test_falcon_h1_parallel_hybrid(tmp_path):
    # every layer holds attention (2 KV heads of 128) and a Mamba-2 state (24 heads x 64, d_state 256,
    # 1 group, conv 4, d_ssm 1,536): conv 3 x (1,536 + 2 x 256) + SSM 24 x 64 x 256 values
    spec = _load(tmp_path, {"model_type": "falcon_h1", "num_hidden_layers": 24, "hidden_size": 1024,
                            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "mamba_d_ssm": 1536,
                            "mamba_n_heads": 24, "mamba_d_head": 64, "mamba_d_state": 256, "mamba_n_groups": 1,
                            "mamba_d_conv": 4})
    mamba = (3 * (1536 + 2 * 256) + 24 * 64 * 256) * 2
    assert int(estimate(spec, [K]).per_sequence[0]) == 24 * (K * 2 * 2 * 128 * 2 + mamba)


def test_minimax_lightning_attention(tmp_path):
    # 8 layers, softmax attention every 4th (attn_type_list 1), lightning attention elsewhere: one 128 x 128
    # state per head (64 heads), vLLM linear_attention_state_shape; softmax layers 8 KV heads of 128
    types = [0, 0, 0, 1] * 2
    spec = _load(tmp_path, {"model_type": "minimax", "num_hidden_layers": 8, "attn_type_list": types,
                            "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 6144})
    assert int(estimate(spec, [K]).per_sequence[0]) == 2 * K * 2 * 8 * 128 * 2 + 6 * 64 * 128 * 128 * 2
    bad = {"model_type": "minimax", "num_hidden_layers": 8, "attn_type_list": [0, 2] * 4, "num_attention_heads": 64,
           "head_dim": 128, "hidden_size": 6144}
    with pytest.raises(KvcalcError, match="attn_type_list: must list 8 values of 0"):
        _load(tmp_path, bad)


def test_an_imported_llama4_plans_its_chunked_layers_on_vllm(tmp_path):
    from kvcalc.engines import vllm as V
    from kvcalc.plan import plan

    spec = _load(tmp_path, {"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 8,
                            "num_key_value_heads": 2, "head_dim": 64, "hidden_size": 512, "attention_chunk_size": 64})
    p = plan(spec, 4096, settings=V.Settings(max_num_batched_tokens=256, async_scheduling=False))
    # layers 0-2 chunked (RoPE), layer 3 full (NoPE): groups of min(3, 1) = 1 layer; a chunked group reserves
    # cdiv(min(64 + 256, 4096), 16) = 20 blocks, the full one cdiv(4096, 16) = 256; a page: 16 x 2 x 64 x 2 x 2 B
    assert [g.kind_name for g in p.groups] == ["chunk 64"] * 3 + ["full"]
    assert [g.blocks_per_request for g in p.groups] == [20, 20, 20, 256]
    assert p.bytes_per_block == 16 * 2 * 64 * 2 * 2 == 8192


KIMI_LINEAR = {  # the published fields of Kimi-Linear-48B-A3B (written here by hand, not a verbatim file)
    "model_type": "kimi_linear", "num_hidden_layers": 27, "hidden_size": 2304, "num_attention_heads": 32,
    "head_dim": 72, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "mla_use_nope": True, "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4,
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]}}


def test_kimi_linear_kda_and_mla(tmp_path):
    # layers 4, 8, ..., 24 and 27 (numbered from 1) are MLA: a 512 + 64 = 576-wide latent per token, 2 B in bf16.
    # The other 20 are Kimi Delta Attention: conv state 3 x (32 heads x 128 x 3 for q, k, v) values in bf16, and a
    # recurrent state 32 x 128 x 128 values in fp32 whatever the precision (vLLM kda_state_shape, kda_state_dtype)
    spec = _load(tmp_path, KIMI_LINEAR)
    assert spec.layers[:4] == ("kda", "kda", "kda", "mla") and spec.layers[26] == "mla"
    kda = 3 * 32 * 128 * 3 * 2 + 32 * 128 * 128 * 4
    assert kda == 2_170_880
    assert int(estimate(spec, [K]).per_sequence[0]) == 7 * K * 576 * 2 + 20 * kda
    assert int(estimate(spec, [K], precision="fp8").per_sequence[0]) == 7 * K * 576 + 20 * kda


@pytest.mark.parametrize("patch, fragment", [
    ({"linear_attn_config": None}, "linear_attn_config: required for kimi_linear"),
    ({"linear_attn_config": {"kda_layers": [0, 1], "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4}},
     "kda_layers: must list distinct layer numbers from 1 to 27"),
    ({"linear_attn_config": {"kda_layers": [1, 2], "full_attn_layers": [3], "num_heads": 32, "head_dim": 128,
                             "short_conv_kernel_size": 4}}, "full_attn_layers: with kda_layers must number every"),
    ({"linear_attn_config": {"kda_layers": [1], "full_attn_layers": list(range(2, 28)), "num_heads": 32,
                             "head_dim": 128}}, "linear_attn_config.short_conv_kernel_size: required"),
    ({"linear_attn_config": {"kda_layers": [1], "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4}},
     "full_attn_layers: with kda_layers must number every layer"),  # vLLM's KimiLinearConfig asserts it
    ({"linear_attn_config": dict(KIMI_LINEAR["linear_attn_config"], use_full_rank_gate=True)},
     "use_full_rank_gate: Kimi-K3's KDA layer"),
])
def test_kimi_linear_fails_closed(tmp_path, patch, fragment):
    with pytest.raises(KvcalcError, match=fragment):
        _load(tmp_path, dict(KIMI_LINEAR, **patch))


def test_hub_id_through_huggingface_hub_without_the_network(cli, monkeypatch, tmp_path):
    """--hf org/name and `import-hf org/name` ask huggingface_hub for the repo's config.json. A stand-in module
    serves a fixture here, so no test touches the network; the real one reads its cache or downloads."""
    import sys
    import types

    calls = []
    fake = types.ModuleType("huggingface_hub")

    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "config.json").write_text((HF / "qwen3-8b.json").read_text())

    def hf_hub_download(repo_id, filename):
        calls.append((repo_id, filename))
        if repo_id == "Qwen/Qwen3-8B" and filename == "config.json":
            return str(snapshot / "config.json")
        if repo_id == "Qwen/Qwen3-8B" and filename == "model.safetensors.index.json":
            # Qwen/Qwen3-8B's published index: metadata.total_size 16,381,470,720 (399 tensors)
            (snapshot / filename).write_text('{"metadata": {"total_size": 16381470720}, "weight_map": {}}')
            return str(snapshot / filename)
        raise OSError("We couldn't connect to 'https://huggingface.co' (offline)")

    fake.hf_hub_download = hf_hub_download
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    r = cli("estimate", "--hf", "Qwen/Qwen3-8B", "-c", "4k", "--json", "--compact")
    assert r.code == 0, r.err
    assert r.json()[0]["per_sequence_bytes"] == [36 * 4096 * 2 * 8 * 128 * 2]  # qwen3-8b, as from the file
    assert calls == [("Qwen/Qwen3-8B", "config.json"), ("Qwen/Qwen3-8B", "model.safetensors.index.json")]
    cfg = cli("import-hf", "Qwen/Qwen3-8B", "--json").json()["config"]
    assert cfg["components"]["full"]["head_dim"]["value"] == 128
    # the index fetched beside it is the weights' figure, and the config's tensors agree with it to the byte
    assert "equal to" in cfg["weights"]["source"] and "total_size" in cfg["weights"]["source"]
    assert cfg["weights"]["params"] == {"bf16": 16381470720 // 2}
    r = cli("estimate", "--hf", "nobody/missing", "-c", "4k")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "'nobody/missing' is not a local file, and fetching it as a Hugging Face hub id failed (OSError" in r.err
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    r = cli("import-hf", "Qwen/Qwen3-8B")
    assert r.code == 2 and "fetching a hub id needs huggingface_hub" in r.err
    r = cli("estimate", "--hf", "not a hub id!")
    assert r.code == 2 and "is neither a config.json, a folder holding one, nor a hub id" in r.err


def test_name_from_the_hub_cache_layout(tmp_path):
    # huggingface_hub keeps files at models--Org--Name/snapshots/<commit>/config.json: the name is the repo's
    snap = tmp_path / "models--Qwen--Qwen3-8B" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((HF / "qwen3-8b.json").read_text())
    assert load_hf(snap / "config.json").name == "qwen3-8b"


def test_llama4_scout_from_the_trimmed_copy():
    # aiconfigurator's copy of Llama-4-Scout (trimmed, SOURCES.md): 48 layers, every 4th global (NoPE), the other
    # 36 chunked over 8,192 tokens; 8 KV heads of 128: 4,096 B per token per layer in bf16. At 1M tokens the
    # chunk holding the last token is full: 1,048,576 - 8,192 x floor(1,048,575 / 8,192) = 8,192 tokens
    spec = load_hf(HF / "llama-4-scout.json")
    assert spec.layers.count("chunked") == 36 and spec.layers[3] == "global"
    assert _bytes("llama-4-scout", ctx=1 << 20) == 36 * 8192 * 4096 + 12 * (1 << 20) * 4096
    # one token into a new chunk: 1M + 1 tokens keep 1 in every chunked layer
    assert _bytes("llama-4-scout", ctx=(1 << 20) + 1) == 36 * 1 * 4096 + 12 * ((1 << 20) + 1) * 4096


GEMMA2_9B = {  # the published architecture fields of google/gemma-2-9b (written here by hand, no verbatim file)
    "model_type": "gemma2", "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 256, "hidden_size": 3584, "sliding_window": 4096, "max_position_embeddings": 8192,
    "query_pre_attn_scalar": 256, "torch_dtype": "float32"}


def test_gemma2_alternating_local_and_global(tmp_path):
    # Gemma 2 states no layer types: transformers' Gemma2Config makes even layers (0, 2, ...) sliding over
    # 4,096 tokens and odd layers global. 8 KV heads x 256 x (K + V) x 2 B = 8,192 B per token per layer (bf16;
    # the float32 checkpoint dtype is not an fp16 one, so bf16 is the default precision)
    spec = _load(tmp_path, GEMMA2_9B)
    assert spec.layers[:2] == ("local", "global") and spec.layers.count("local") == 21
    assert spec.default_precision == "bf16"
    assert int(estimate(spec, [8192]).per_sequence[0]) == 21 * 8192 * 8192 + 21 * 4096 * 8192
    assert int(estimate(spec, [1000]).per_sequence[0]) == 42 * 1000 * 8192


SYNTHETIC = {  # the in-test configs of the families without a fixture file, for the YAML round trip
    "gemma-2-9b": GEMMA2_9B,
    "kimi-linear": KIMI_LINEAR,
    "jamba-v0.1": {"model_type": "jamba", "num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_d_state": 16,
                   "mamba_d_conv": 4, "mamba_expand": 2},
    "falcon-h1": {"model_type": "falcon_h1", "num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 8,
                  "num_key_value_heads": 2, "head_dim": 128, "mamba_d_ssm": 1536, "mamba_n_heads": 24,
                  "mamba_d_head": 64, "mamba_d_state": 256, "mamba_n_groups": 1, "mamba_d_conv": 4},
    "mistral-7b-v0.1": {"model_type": "mistral", "num_hidden_layers": 32, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "hidden_size": 4096, "sliding_window": 4096,
                        "max_position_embeddings": 32768},
}


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_round_trip_of_the_in_test_configs(name, cli, tmp_path):
    """import-hf -> YAML -> estimate equals estimate --hf for the families tested on written-out fields."""
    src = tmp_path / "config.json"
    src.write_text(json.dumps(SYNTHETIC[name]))
    out = tmp_path / f"{name}.yaml"
    r = cli("import-hf", str(src), "-o", str(out))
    assert r.code == 0, r.err
    a, b = load_model(str(out)), load_hf(src)
    ctx = [1, 100, 4096, 1 << 17, 1 << 20]
    for prec in b.precisions:
        assert np.array_equal(estimate(a, ctx, precision=prec).per_sequence,
                              estimate(b, ctx, precision=prec).per_sequence), prec


def test_mistral_v01_sliding_window():
    # Mistral-7B-v0.1: sliding_window 4,096 in every layer; 8 KV heads of 4,096 / 32 = 128: 4,096 B per token
    spec = import_config(SYNTHETIC["mistral-7b-v0.1"])
    assert spec["components"]["sliding"]["window"]["value"] == 4096
    from kvcalc.config import parse_model

    m = parse_model(spec, "mistral.json")
    assert int(estimate(m, [32768]).per_sequence[0]) == 32 * 4096 * 4096  # the window caps it at 4,096 tokens
    assert int(estimate(m, [1000]).per_sequence[0]) == 32 * 1000 * 4096


def test_storage_line_names_state_with_its_own_dtype(tmp_path):
    # KDA keeps its recurrent state in fp32 whatever the precision's state role says (bf16): the Storage line
    # says so, since the narrow layout drops the format column
    spec = _load(tmp_path, KIMI_LINEAR)
    e = estimate(spec, [4096])
    from kvcalc.present.estimate import formats_text

    assert formats_text(e) == "kv: bf16 (1,152 B/entry); state: bf16 (kda: bf16 conv + fp32 ssm)"


def test_gemma2_9b_it_verbatim():
    # google/gemma-2-9b-it (verbatim, an early revision): even layers slide over 4,096 tokens, odd layers are
    # global (transformers Gemma2Config; the file states no layer types); 8 KV heads x 256 x 2 x 2 B = 8,192 B
    # per token per layer, bf16 as the checkpoint
    assert _bytes("gemma-2-9b-it", ctx=8192) == 21 * 8192 * 8192 + 21 * 4096 * 8192
    assert load_model("gemma-2-9b").layers[:2] == ("local", "global")


def test_hf_on_compare_sweep_and_plot(cli):
    # --hf wherever MODEL is taken: compare fills B (or A and B), sweep and plot append to MODEL...
    q = str(HF / "qwen3-8b.json")
    r = cli("compare", "llama-3.1-8b", "--hf", q, "-c", "4k", "--json")
    assert r.code == 0, r.err
    # llama-3.1-8b 32 layers x 4,096 B vs qwen3-8b 36 layers x 4,096 B per token: 36 / 32
    assert r.json()["ratio_b_over_a"] == [36 / 32]
    r = cli("sweep", "llama-3.1-8b", "--hf", q, "-c", "1k", "--json")
    assert r.json()["bytes_per_sequence"] == [1024 * 32 * 4096, 1024 * 36 * 4096]
    r = cli("compare", "llama-3.1-8b")
    assert r.code == 2 and "compare takes two models" in r.err


def test_a_field_the_config_omits_takes_its_transformers_class_default():
    # google/gemma-3-4b-it writes its text_config as a diff against transformers' Gemma3TextConfig (as quoted in
    # public tests): no head counts, no head_dim, no max_position_embeddings. vLLM reads them through the class:
    # 8 heads, 4 KV heads, head_dim 256 (not 2560 / 8 = 320), 131,072 positions (configuration_gemma3.py)
    data = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                            "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                            "sliding_window": 1024},
            "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27, "model_type": "siglip_vision_model"}}
    cfg = import_config(data)
    full = cfg["components"]["full"]
    assert full["kv_heads"]["value"] == 4 and full["head_dim"]["value"] == 256
    assert "Gemma3TextConfig default" in full["head_dim"]["source"]
    assert cfg["max_context"]["value"] == 131072
    assert cfg["multimodal"] == {"text_config": True, "vision_config": True, "vision_num_hidden_layers": 27,
                                 "vision_hidden_size": 1152, "source": "config.json vision_config"}
    # 34 layers, every 6th global: 5 global, 29 local of 1,024 tokens
    assert cfg["layers"]["select"].count("full_attention") == 34 // 6 == 5
    # a value the config states wins over the class default, and an explicit null stays null (no window)
    data["text_config"].update(head_dim=128, num_key_value_heads=2)
    assert import_config(data)["components"]["full"]["head_dim"]["value"] == 128
    mistral = {"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
               "num_key_value_heads": 2, "sliding_window": None}
    assert "sliding" not in import_config(mistral)["components"]
    # MistralConfig's default window is 4096: a config without the key slides at 4096, as vLLM does
    del mistral["sliding_window"]
    assert import_config(mistral)["components"]["sliding"]["window"]["value"] == 4096


def test_malformed_context_fields_are_refused_not_dropped():
    data = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
            "max_position_embeddings": "32768"}
    with pytest.raises(KvcalcError, match=r"max_position_embeddings: expected a whole number of tokens, got '32768'"):
        import_config(data)


def test_a_zero_window_is_none_and_a_llama_window_slides_every_layer():
    base = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
            "num_key_value_heads": 2}
    # config/model.py: sliding_window 0 means disabled (vLLM sets it to None)
    assert set(import_config({**base, "sliding_window": 0})["components"]) == {"full"}
    assert set(import_config({**base, "model_type": "mistral", "sliding_window": 0})["components"]) == {"full"}
    # a llama config with a window: no layer_types, so vLLM slides every layer at it
    cfg = import_config({**base, "sliding_window": 4096})
    assert set(cfg["components"]) == {"sliding"} and cfg["components"]["sliding"]["window"]["value"] == 4096


def test_qwen3_5_moe_imports_as_its_dense_sibling():
    # Qwen/Qwen3.5-35B-A3B (model_type qwen3_5_moe, text_config qwen3_5_moe_text): every 4th of 40 layers full
    # attention, 2 KV heads x 256 x (K, V) x 2 B = 2,048 B a token; 30 gated DeltaNet layers of conv
    # (2 x 16 x 128 + 32 x 128) x (4 - 1) x 2 B = 49,152 B and state 32 x 128 x 128 x 4 B (mamba_ssm_dtype float32)
    per_gdn = (2 * 16 * 128 + 32 * 128) * 3 * 2 + 32 * 128 * 128 * 4
    assert per_gdn == 2_146_304
    assert _bytes("qwen3.5-35b-a3b", 32768) == 10 * 32768 * 2048 + 30 * per_gdn == 735_477_760


def test_longrope_defaults_vllm_to_the_original_context(tmp_path, cli):
    # config/model.py _get_and_verify_max_len: with no max_model_len, a LongRoPE model defaults to
    # original_max_position_embeddings (4,096) while the derived 131,072 stays its limit; SGLang runs 131,072
    data = {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 512,
            "num_attention_heads": 4, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}}
    cfg = import_config(data)
    assert cfg["original_max_position_embeddings"]["value"] == 4096
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    r = cli("capacity", "--hf", str(path), "--kv-memory", "1GiB", "--json")
    assert r.code == 0 and r.json()["context_tokens"] == 4096
    r = cli("capacity", "--hf", str(path), "--kv-memory", "1GiB", "--engine", "sglang", "--json")
    assert r.code == 0 and r.json()["context_tokens"] == 131072
    # the --concurrency search runs to the limit, not the default: one request of 131,072 tokens (2 layers x 4 KV
    # heads x 128 x (K, V) x 2 B = 4 KiB a token, 512 MiB) fits in 1 GiB
    r = cli("capacity", "--hf", str(path), "--kv-memory", "1GiB", "--concurrency", "1", "--json")
    assert r.code == 0 and r.json()["max_context_tokens"] == 131072
    with pytest.raises(KvcalcError, match=r"rope_scaling: expected a mapping"):
        import_config({**data, "rope_scaling": "longrope"})


def test_nemotron_h_in_transformers_5_form_and_its_mtp_step():
    # nvidia/NVIDIA-Nemotron-3-Ultra-550B: a layers_block_type list, no num_hidden_layers: 108 layers, 48 Mamba-2 of
    # conv (256 x 64 + 2 x 8 x 128) x (4 - 1) x 2 B + state 256 x 64 x 128 x 4 B (fp32), 12 attention of
    # 2 KV heads x 128 x (K, V) x 2 B
    mamba = (256 * 64 + 2 * 8 * 128) * 3 * 2 + 256 * 64 * 128 * 4
    assert mamba == 8_499_200
    assert _bytes("nemotron-3-ultra-550b", 32768) == 12 * 32768 * 1024 + 48 * mamba
    # its MTP step (mtp_layers_block_type [attention, moe], one step) adds one attention layer; Super's
    # mtp_hybrid_override_pattern "*E" the same (vLLM nemotron_h_mtp.py)
    assert _bytes("nemotron-3-ultra-550b", 32768, mtp=True) - _bytes("nemotron-3-ultra-550b", 32768) == 32768 * 1024
    assert _bytes("nemotron-3-super-120b", 32768, mtp=True) - _bytes("nemotron-3-super-120b", 32768) == 32768 * 1024
    with pytest.raises(KvcalcError, match=r"layers_block_type\[0\]: 'rnn' is not a layer type"):
        import_config({"model_type": "nemotron_h", "layers_block_type": ["rnn"]})
    # found by the fuzz (reports/fuzz.json): a list where a layer type stands was looked up as a key
    with pytest.raises(KvcalcError, match=r"layers_block_type\[0\]: a list of 1 entries is not a layer type"):
        import_config({"model_type": "nemotron_h", "layers_block_type": [[1]]})


def test_falcon_h1_without_d_ssm_and_a_list_text_config_are_refused():
    # FalconH1Config's mamba_d_ssm default is 1024; 24 heads x 128 = 3,072 does not match it, and transformers
    # refuses the config (validate_architecture), so vLLM never loads it: no silent expand x hidden
    data = {"model_type": "falcon_h1", "num_hidden_layers": 2, "hidden_size": 1536, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 64, "mamba_n_heads": 24, "mamba_d_head": 128, "mamba_d_state": 256,
            "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2}
    with pytest.raises(KvcalcError, match=r"mamba_d_ssm: the Mamba intermediate 1024 .* is not mamba_n_heads 24 x "
                                          r"mamba_d_head 128"):
        import_config(data)
    # an explicit null means expand x hidden (2 x 1536 = 3072 = 24 x 128)
    assert import_config({**data, "mamba_d_ssm": None})["components"]["mamba"]["intermediate"]["value"] == 3072
    with pytest.raises(KvcalcError, match=r"text_config: expected a mapping"):
        import_config({"model_type": "llama", "text_config": [1, 2]})
