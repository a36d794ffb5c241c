"""kvcalc decode: the cache bytes one decode step reads, by hand for each rule (dense, sliding, top-k through the
indexer, every indexer key, fixed state read and written back)."""

import pytest

from kvcalc.decode import decode
from kvcalc.errors import KvcalcError

M = 1 << 20


def _kind(d, name):
    return next(k for k in d.kinds if k.kind == name)


def test_v4_pro_fp8_at_1m_by_hand():
    d = decode("deepseek-v4-pro", M, precision="fp8")
    c4a = _kind(d, "c4a")
    # one c4a layer: the 128-token window x 584 B; the indexer's top 1,024 of the 2^18 compressed entries x 584 B;
    # every one of the 2^18 indexer keys scored (fp4: 68 B); its compressor state, 64 KiB + 16 KiB, read
    assert c4a.read_bytes == 128 * 584 + 1024 * 584 + (M // 4) * 68 + (64 + 16) * 1024 == 18_580_480
    c128a = _kind(d, "c128a")
    # c128a reads densely: the window and all 2^13 entries, and its 512 KiB state
    assert c128a.read_bytes == 128 * 584 + (M // 128) * 584 + 512 * 1024 == 5_383_168
    assert d.read_bytes_per_token == 30 * 18_580_480 + 31 * 5_383_168 == 724_292_608
    # the state is written back every step: 30 x 80 KiB + 31 x 512 KiB
    assert d.state_write_bytes == 30 * 80 * 1024 + 31 * 512 * 1024
    rules = {c.name: (c.rule, c.entries) for c in c4a.components}
    assert rules["c4_entries"] == ("top-k 1,024 of L//4", 1024) and rules["c4_indexer"] == ("every key (L//4)", M // 4)


def test_v32_reads_its_top_2048_latents_and_every_indexer_key():
    d = decode("deepseek-v3.2", M, precision="fp8")
    # 61 layers x (2,048 x 656 B FlashMLA rows + 2^20 x 132 B indexer keys)
    assert d.read_bytes_per_token == 61 * (2048 * 656 + M * 132) == 8_525_086_720
    # V4-Pro reads 11.8x less per token than V3.2 (724,292,608 B)
    assert round(d.read_bytes_per_token / 724_292_608, 1) == 11.8


def test_gqa_reads_everything_it_stores_and_a_window_only_its_window():
    d = decode("llama-3.1-8b", 131072)
    assert d.read_bytes_per_token == d.stored_bytes == 32 * 131072 * 8 * 128 * 2 * 2
    g = decode("gpt-oss-120b", 131072)
    # 18 full layers read all 131,072 tokens; 18 sliding layers their 128-token window (8 KV heads of 64, K and V)
    entry = 8 * 64 * 2 * 2
    assert g.read_bytes_per_token == 18 * 131072 * entry + 18 * 128 * entry


def test_state_is_read_whatever_the_context():
    a, b = decode("qwen3.5-9b", 1024), decode("qwen3.5-9b", 4096)
    la, lb = _kind(a, "linear"), _kind(b, "linear")
    # gated DeltaNet: conv 49,152 B + recurrent 2,097,152 B a layer at any context
    assert la.read_bytes == lb.read_bytes == 49_152 + 2_097_152


def test_batch_and_refusals(cli):
    r = cli("decode", "deepseek-v4-pro", "-p", "fp8", "--batch", "8", "--json")
    assert r.code == 0 and r.json()["read_bytes_per_step"] == 8 * 724_292_608
    for bad in (dict(context=0), dict(context=True), dict(batch=0), dict(batch=1.5)):
        kw = dict(context=1024, batch=1) | bad
        with pytest.raises(KvcalcError):
            decode("llama-3.1-8b", kw["context"], batch=kw["batch"])
    r = cli("decode", "llama-3.1-8b", "-c", "0")
    assert r.code == 2 and r.err.count("\n") == 1


# ---- decode --gpu: the weights a step reads at batch B and the bandwidth floor -------------------------------

def _floor(model, context, gpu, **kw):
    from kvcalc.config import load_model
    from kvcalc.decode import step_floor
    from kvcalc.hardware import get_gpu

    spec = load_model(model)
    return step_floor(decode(spec, context, **kw), spec, get_gpu(gpu))


def test_dense_model_reads_all_its_weights_and_its_cache():
    f = _floor("llama-3.1-8b", 8192, "h100")
    # 8,030,261,248 bf16 parameters (the safetensors index) + 32 layers x 8,192 tokens x 8 heads x 128 x K,V x 2 B
    assert f.weights_read_bytes == 8_030_261_248 * 2 == 16_060_522_496
    assert f.cache_read_bytes == 32 * 8192 * 8 * 128 * 2 * 2 == 1_073_741_824
    assert f.step_bytes == 17_134_264_320 and f.experts is None
    # over the H100 SXM's 3.35 TB/s (decimal): 5.115 ms, so at most 195.5 tokens/s for one sequence
    assert f.step_seconds == pytest.approx(17_134_264_320 / 3.35e12) and round(f.tokens_per_second, 1) == 195.5


def test_moe_reads_the_experts_a_batch_selects():
    one = _floor("deepseek-v3.2", 131072, "h200", precision="fp8")
    # one token reads k/E = 8/256 of the routed experts: 653,894,418,432 fp8 parameters with a 4 B scale per
    # 128 x 128 block, i.e. ceil(n x 16,388 / 16,384) B
    experts = -(-653_894_418_432 * 16388 // 16384)
    assert one.expert_weight_bytes == experts and one.expert_read_bytes == round(experts / 32)
    assert one.dense_weight_bytes == -(-17_105_581_568 * 16388 // 16384)
    # 625 GiB of weights on one 140.40 GiB H200: the floor is computed, and says the step cannot run there
    assert not one.fits and "does not fit on one NVIDIA H200" in one.does_not_fit and "tp 8 (8 GPUs)" in one.does_not_fit
    # V4-Pro at 64 sequences: an expert is idle with probability (1 - 6/384)^64 = 0.36499..., so 63.5% of the
    # routed experts (243.8 of 384 a layer) are read
    f = _floor("deepseek-v4-pro", 1 << 20, "h200", precision="fp8", batch=64)
    share = 1 - (378 / 384) ** 64
    assert round(share, 4) == 0.6350 and f.expert_read_share == pytest.approx(share)
    assert round(f.expected_experts, 1) == 243.8
    # 1,476e9 MXFP4 parameters at 17 B per 32 (16 B of pairs + one e8m0 scale)
    assert f.expert_weight_bytes == 1_476_000_000_000 * 17 // 32
    # the cache: 64 x 724,292,608 B read, and 64 x the 30 x 80 KiB + 31 x 512 KiB of state written back
    assert f.cache_read_bytes == 64 * 724_292_608
    assert f.state_write_bytes == 64 * (30 * 80 + 31 * 512) * 1024
    assert f.step_bytes == f.dense_weight_bytes + round(f.expert_weight_bytes * share) + f.cache_read_bytes + \
        f.state_write_bytes
    assert f.tokens_per_second == pytest.approx(64 * 4.8e12 / f.step_bytes)
    # a large batch reads (nearly) every expert
    assert _floor("deepseek-v4-pro", 4096, "h200", batch=4096).expert_read_share > 0.999999


def test_decode_gpu_cli(cli):
    r = cli("decode", "llama-3.1-8b", "-c", "8k", "--gpu", "h100", "--json")
    assert r.code == 0 and r.json()["step"]["step_bytes"] == 17_134_264_320
    assert r.json()["step"]["bandwidth_bytes_per_s"] == 3_350_000_000_000
    r = cli("decode", "qwen3.5-9b", "--gpu", "h100")
    assert r.code == 2 and "--weights-gib" in r.err and r.err.count("\n") == 1
    r = cli("decode", "qwen3.5-9b", "-c", "8k", "--gpu", "h100", "--weights-gib", "16", "--json")
    assert r.code == 0 and r.json()["step"]["weights_read_bytes"] == 16 << 30
    r = cli("decode", "qwen3.5-9b", "--weights-gib", "16")
    assert r.code == 2 and "--gpu" in r.err
    r = cli("decode", "llama-3.1-8b", "--gpu", "h900")
    assert r.code == 2 and "h900" in r.err
    r = cli("decode", "deepseek-v4-flash", "-p", "fp8", "--gpu", "b200", "-b", "32", "--tp", "4")
    assert r.code == 0 and "tokens/s" in r.out and "of 256 experts" in r.out and "uniform" in r.out


def test_decode_refuses_a_step_the_gpus_cannot_hold(cli):
    # V4-Pro: 845.79 GiB of weights (the config's) on one 140.40 GiB H200 cannot run; capacity refuses the same
    # set-up. At tp 8 a GPU holds 845.79 / 8 = 105.72 GiB of weights + 9.64 GiB of bf16 cache (the MLA-style
    # cache is whole on every rank) = 115.37 GiB: the smallest tp that fits
    r = cli("decode", "deepseek-v4-pro", "-c", "1M", "--gpu", "h200")
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("kvcalc: error: --gpu: ")
    assert "845.79 GiB of weights" in r.err and "--tp 8 (8 GPUs) holds 115.37 GiB a GPU" in r.err
    r = cli("decode", "deepseek-v4-pro", "-c", "1M", "--gpu", "h200", "--tp", "8", "--json")
    assert r.code == 0 and r.json()["step"]["fits"] is True
    # Llama-3.1-70B in bf16 on an RTX 4090 (23.99 GiB): 131.42 GiB of weights; 8 ranks hold 16.43 + 0.31 GiB
    r = cli("decode", "llama-3.1-70b", "-c", "8k", "--gpu", "rtx-4090")
    assert r.code == 2 and "--tp 8 (8 GPUs) holds 16.74 GiB a GPU" in r.err


def test_routing_is_checked(tmp_path):
    from kvcalc.config import load_model

    src = open("kvcalc/data/configs/gpt-oss-120b.yaml").read()
    bad = tmp_path / "m.yaml"
    bad.write_text(src.replace("per_token: {value: 4", "per_token: {value: 400"))
    with pytest.raises(KvcalcError, match="weights.routing.per_token"):
        load_model(str(bad))
    bad.write_text(src.replace("  routing:", "  routes:"))
    with pytest.raises(KvcalcError, match="routing"):
        load_model(str(bad))
    import re

    bad.write_text(re.sub(r"  routing:\n(    .*\n)+", "", src))
    spec = load_model(str(bad))
    from kvcalc.decode import step_floor
    from kvcalc.hardware import get_gpu

    with pytest.raises(KvcalcError, match="no weights.routing"):
        step_floor(decode(spec, 1024), spec, get_gpu("h200"))


def test_tensor_parallel_figures_are_one_ranks():
    f = _floor("llama-3.1-70b", 8192, "h100", tp=4)
    # 80 layers x 8,192 tokens x 8 / 4 = 2 KV heads x 128 x K,V x 2 B; the bf16 weights (141,107,412,992 B) / 4
    assert f.cache_read_bytes == 80 * 8192 * 2 * 128 * 2 * 2 == 671_088_640
    assert f.weights_read_bytes == 141_107_412_992 // 4 and f.step_bytes == 35_947_941_888
    # MLA latents and indexer keys are whole on every rank: tp 8 reads what tp 1 reads
    assert decode("deepseek-v3.2", M, precision="fp8", tp=8).read_bytes_per_token == 8_525_086_720
    # gated DeltaNet state splits its channels and heads: half of conv 49,152 + recurrent 2,097,152 B a layer
    half = _kind(decode("qwen3.5-9b", 1024, tp=2), "linear")
    assert half.read_bytes == (49_152 + 2_097_152) // 2
    with pytest.raises(KvcalcError, match="cannot split"):
        decode("llama-3.1-8b", 1024, tp=3)
