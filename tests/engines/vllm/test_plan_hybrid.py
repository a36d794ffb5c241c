"""vLLM's plan for models with fixed per-request state (Mamba-1/2, gated DeltaNet, KDA) next to attention:
the attention block grows until one page holds a state page, the state page is padded to it, and each state
group reserves a fixed number of blocks (platforms/interface.py _align_hybrid_block_size; v1/kv_cache_interface.py
MambaSpec). Every expected number is worked out by hand in the test."""

import json

import pytest

from kvcalc import KvcalcError, load_model
from kvcalc.engines import vllm as V
from kvcalc.plan import plan

K256 = 262_144


def test_qwen3_next_on_hopper():
    # state per layer (bf16): conv 3 x (2 x 16 x 128 + 32 x 128) = 24,576 values, recurrent 32 x 128 x 128 =
    # 524,288 values: 1,097,728 B. Attention: 2 KV heads x 256 x (K + V) x 2 B = 2,048 B per token.
    # Prefix caching (align mode) with FlashInfer's GDN prefill: blocks on lcm(16, 64) = 64 tokens;
    # block = 64 x ceil(1,097,728 / (64 x 2,048)) = 64 x 9 = 576; page 576 x 2,048 = 1,179,648 (the state page
    # padded from 1,097,728). 36 DeltaNet layers, 12 attention: groups of 12 -> 3 state groups and 1 attention.
    p = plan("qwen3-next-80b-a3b", K256)
    assert p.settings_json["block_size"] == 576 and p.settings_json["mamba_cache_mode"] == "align"
    assert [g.kind for g in p.groups] == ["state", "state", "state", "full"]
    assert [len(g.layers) for g in p.groups] == [12, 12, 12, 12]
    assert p.groups[0].pages[0].real_page_bytes == 1_097_728 and p.groups[0].pages[0].page_bytes == 1_179_648
    assert p.bytes_per_block == 12 * 1_179_648 == 14_155_776
    # each state group: 2 running blocks + 1 checkpoint; attention ceil(262,144 / 576) = 456
    assert [g.blocks_per_request for g in p.groups] == [3, 3, 3, 456]
    assert p.per_request_bytes == 465 * 14_155_776


def test_qwen3_next_without_prefix_caching_and_with_triton():
    # no prefix caching: 16-token kernel blocks, block 16 x ceil(1,097,728 / 32,768) = 16 x 34 = 544; one block
    # per state group; attention ceil(262,144 / 544) = 482
    p = plan("qwen3-next-80b-a3b", K256, settings=V.Settings(prefix_caching=False))
    assert p.settings_json["block_size"] == 544 and [g.blocks_per_request for g in p.groups] == [1, 1, 1, 482]
    # prefix caching with Triton's GDN prefill (no checkpoints exported): 544 tokens, 2 running blocks each
    p = plan("qwen3-next-80b-a3b", K256, settings=V.Settings(gdn_prefill_backend="triton"))
    assert p.settings_json["block_size"] == 544 and [g.blocks_per_request for g in p.groups] == [2, 2, 2, 482]


def test_qwen3_next_tensor_parallel():
    # tp 2: state per rank: conv 24,576 / 2 values, recurrent 16 heads x 128 x 128: 12,288 x 2 + 262,144 x 2 =
    # 548,864 B; attention: 2 KV heads split to 1 per rank, 1,024 B per token.
    # block = 64 x ceil(548,864 / 65,536) = 64 x 9 = 576, page 576 x 1,024 = 589,824
    p = plan("qwen3-next-80b-a3b", K256, tp=2)
    assert p.settings_json["block_size"] == 576
    assert p.groups[0].pages[0].real_page_bytes == 548_864 and p.groups[0].pages[0].page_bytes == 589_824
    with pytest.raises(KvcalcError, match="tp: 3 ranks cannot split"):
        plan("qwen3-next-80b-a3b", K256, tp=3)


def test_nemotron_h_mamba2_groups_and_padding():
    # state: conv 3 x (256 x 64 + 2 x 8 x 256) = 61,440 values in bf16 + SSM 256 x 64 x 256 = 4,194,304 values in
    # fp32 (vLLM's Nemotron-H default) = 16,900,096 B. Attention 8 KV heads x 128 x 2 x 2 B = 4,096 B per token.
    # Mamba-2 exports no checkpoint grid: 16-token blocks, block 16 x ceil(16,900,096 / 65,536) = 16 x 258 =
    # 4,128, page 4,128 x 4,096 = 16,908,288.
    # 54 Mamba layers and 10 attention: groups of 10, so 6 state groups of 9 (6 padding layers) and 1 of 10.
    p = plan("nemotron-h-56b", 8192)
    assert p.settings_json["block_size"] == 4128
    assert [len(g.layers) for g in p.groups] == [9] * 6 + [10] and p.padding_layers == 6
    assert p.groups[0].pages[0].real_page_bytes == 16_900_096
    assert p.bytes_per_block == 10 * 16_908_288
    # Mamba-2 keeps a checkpoint block: 2 + 1 per state group; attention ceil(8,192 / 4,128) = 2
    assert [g.blocks_per_request for g in p.groups] == [3] * 6 + [2]


def test_kimi_linear_mla_and_kda(tmp_path):
    # MLA latent 576 x 2 B = 1,152 B per token; KDA state: conv 3 x (3 x 32 x 128) x 2 B + recurrent
    # 32 x 128 x 128 x 4 B (fp32) = 2,170,880 B. MLA: 128-token manager blocks (TRTLLM / FlashInfer MLA decode);
    # KDA exports no checkpoints. block = 128 x ceil(2,170,880 / (128 x 1,152)) = 128 x 15 = 1,920.
    # 20 KDA layers, 7 MLA: groups of 7, so 3 state groups (7, 7, 6 + 1 padding) and 1 MLA group.
    cfg = {"model_type": "kimi_linear", "num_hidden_layers": 27, "hidden_size": 2304, "num_attention_heads": 32,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "linear_attn_config": {
               "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4,
               "kda_layers": [i for i in range(1, 28) if i % 4 and i != 27],
               "full_attn_layers": [i for i in range(1, 28) if i % 4 == 0 or i == 27]}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    p = plan(load_model(str(path)), 131_072)
    assert p.settings_json["block_size"] == 1920
    assert p.groups[0].pages[0].real_page_bytes == 2_170_880 and p.groups[0].pages[0].page_bytes == 1920 * 1152
    assert [len(g.layers) for g in p.groups] == [7, 7, 6, 7] and p.padding_layers == 1
    # 2 running blocks per KDA group; MLA ceil(131,072 / 1,920) = 69
    assert [g.blocks_per_request for g in p.groups] == [2, 2, 2, 69]


def test_default_gdn_backend_follows_the_gpu():
    spec = load_model("qwen3-next-80b-a3b")
    assert V.default_gdn_prefill_backend("h200", spec) == "flashinfer"
    assert V.default_gdn_prefill_backend(None, spec) == "flashinfer"
    assert V.default_gdn_prefill_backend("a100-80gb", spec) == "triton"
    assert V.default_gdn_prefill_backend("b200", spec) == "flashinfer"  # head_k_dim 128
    assert V.default_gdn_prefill_backend("mi300x", spec) == "triton"
    # the 12.x family (RTX 5090) as the 10.x one: qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend
    assert V.default_gdn_prefill_backend("rtx-5090", spec) == "flashinfer"
    assert V.default_gdn_prefill_backend("l40s", spec) == "triton"  # 8.9


def test_capacity_cli_on_a_hybrid(cli):
    r = cli("capacity", "qwen3-next-80b-a3b", "--kv-memory", "20GiB", "-c", "256k", "--json")
    assert r.code == 0, r.err
    d = r.json()
    # 20 GiB / 14,155,776 B = 1,517 blocks (floor); 1,517 / 465 = 3.26x; 1,516 usable blocks hold 3 requests
    assert d["bytes_per_block"] == 14_155_776 and d["num_blocks"] == 20 * 2**30 // 14_155_776 == 1517
    assert d["blocks_per_request"] == 465 and d["requests_per_replica"] == 3
    r = cli("capacity", "qwen3-next-80b-a3b", "--kv-memory", "20GiB", "-c", "256k", "--no-prefix-caching")
    assert r.code == 0 and "(mamba_cache_mode none)" in r.out
    r = cli("capacity", "qwen3-next-80b-a3b", "--kv-memory", "20GiB", "--gdn-prefill-backend", "fast")
    assert r.code == 2 and "--gdn-prefill-backend: choose flashinfer or triton" in r.err


def test_what_the_vllm_engine_still_refuses():
    with pytest.raises(KvcalcError, match="linear_attention.*removed in 0.23"):
        plan("minimax-m1", 8192)
    with pytest.raises(KvcalcError, match="speculative decoding adds state blocks"):
        plan("qwen3.5-9b", 8192, mtp=True)


def test_mamba2_groups_replicated_across_ranks():
    # vLLM's mamba2_state_shape: n_groups that do not divide by tp grow to tp (extra_groups_for_head_shards).
    # Falcon-H1-0.5B-like mixer: d_ssm 1,536, 24 heads x 64, d_state 256, 1 group, conv 4. At tp 2 the groups
    # become 2: conv channels 1,536 + 2 x 2 x 256 = 2,560, half per rank: 3 x 1,280 = 3,840 values; SSM
    # 12 x 64 x 256 = 196,608 values; bf16: (3,840 + 196,608) x 2 = 400,896 B. At tp 1: conv 3 x (1,536 + 512)
    # = 6,144 and SSM 393,216 values: 798,720 B.
    from kvcalc.formats import get_format
    from kvcalc.specs import Mamba2State

    m = Mamba2State(name="m", heads=24, head_dim=64, state_size=256, groups=1, conv_kernel=4, intermediate=1536)
    bf16 = get_format("bf16")
    assert m.fixed_bytes_on_rank(bf16, 1) == 798_720 == m.fixed_bytes(bf16)
    assert m.fixed_bytes_on_rank(bf16, 2) == 400_896
    with pytest.raises(KvcalcError, match="cannot split the 24 recurrent heads"):
        m.fixed_bytes_on_rank(bf16, 16)


def test_settings_refuse_an_unknown_gdn_backend():
    with pytest.raises(KvcalcError, match="gdn_prefill_backend: choose flashinfer or triton"):
        V.Settings(gdn_prefill_backend="cuda")


def test_a_qwen2_model_sliding_in_only_some_layers_is_refused(tmp_path):
    # models/qwen2.py Qwen2Model asserts max_window_layers == num_hidden_layers when the layer types mix: vLLM
    # refuses to build it; the exact engine prices it
    from kvcalc.config import load_hf
    data = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 4, "hidden_size": 512,
            "num_attention_heads": 4, "num_key_value_heads": 2, "use_sliding_window": True, "sliding_window": 64,
            "max_window_layers": 2, "max_position_embeddings": 4096}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    spec = load_hf(str(path))
    with pytest.raises(KvcalcError, match=r"Sliding window for some but all layers is not supported"):
        plan(spec, 1024)
    assert plan(spec, 1024, engine="exact").analytic_bytes == 2 * 1024 * 2 * 128 * 2 * 2 + 2 * 64 * 2 * 128 * 2 * 2
    # every layer sliding (max_window_layers 0) is what vLLM runs
    path.write_text(json.dumps({**data, "max_window_layers": 0}))
    assert plan(load_hf(str(path)), 1024).groups


def test_a_stage_without_a_groups_layers_still_counts_its_blocks(cli):
    """pp 16 puts 3 of Qwen3-Next's 48 layers on each stage; stage 0 (layers 0-2) is all DeltaNet. vLLM keeps every
    group on every stage (kv_cache_planning.py _project_kv_cache_groups_to_worker) and its scheduler counts all
    four groups' blocks: 3 state groups x 3 + the attention group's ceil(262,144 / 576) = 456 -> 465 a request."""
    from kvcalc.capacity import Parallel, capacity
    from kvcalc.engines import get_engine

    s0 = plan("qwen3-next-80b-a3b", K256, settings=get_engine("vllm").settings({"pp": 16}), stage=0)
    assert [(g.kind, len(g.layers), g.blocks_per_request) for g in s0.groups] == [
        ("state", 1, 3), ("state", 1, 3), ("state", 1, 3), ("full", 0, 456)]
    assert s0.blocks_per_request == 465 and s0.bytes_per_block == 1_179_648  # one layer's page per group
    assert any("group 3 (full) has no layers in this pipeline stage" in n for n in s0.notes)
    c = capacity("qwen3-next-80b-a3b", K256, engine="vllm", kv_memory=30 << 30,
                 parallel=Parallel(pp=16))
    blocks = (30 << 30) // 1_179_648  # 27,306
    assert c.fit.num_blocks == blocks == 27_306
    assert c.fit.requests_per_replica == (blocks - 1) // 465 == 58  # the null block kept back
    r = cli("capacity", "qwen3-next-80b-a3b", "--gpu", "h200", "--pp", "16", "-c", "256k", "--kv-memory", "30GiB")
    assert r.code == 0, r.err
    # int(27,306 / 465 x 262,144) = 15,393,772 tokens; 27,306 / 465 = 58.72x
    assert "GPU KV cache size: 15,393,772 tokens, Maximum concurrency for 262,144 tokens per request: 58.72x" in r.out
