"""TensorRT-LLM 1.1 (PyTorch backend): the pool as KvCacheCreator and KVCacheManager size it, by hand arithmetic and
against a published start-up log (tests/fixtures/logs/trtllm/SOURCES.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.engines.trtllm import sizing as Z
from kvcalc.errors import KvcalcError

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "trtllm"
GIB = 1 << 30
F32_09 = 0.8999999761581421  # 0.9 as a C++ float: the log's "fraction is set 0.8999999761581421"


def test_the_fraction_is_a_float32():
    assert Z.f32(0.9) == F32_09


def test_llama_3_1_8b_on_one_h100_by_hand():
    """Device 85,520,809,984 B (the catalogue's H100 SXM), weights 16,060,522,496 B, reserve 4 GiB; the profiling
    run's cache cancels: int((85,520,809,984 - 16,060,522,496 - 4,294,967,296) x 0.8999999761581421) =
    58,648,786,619 B; kv size 2 x 32 layers x 8 heads x 128 x 2 B = 131,072; max_tokens 58,648,786,619 // 131,072 =
    447,454; ceil(447,454 / 32) = 13,983 blocks = 447,456 tokens; 32k requests take 1,024 blocks: 13."""
    cap = capacity("llama-3.1-8b", 32768, engine="trtllm", gpu="h100-sxm")
    f = cap.fit.figures
    assert cap.kv_pool_bytes_per_gpu == int(65_165_320_192 * F32_09) == 58_648_786_619
    assert f.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072
    assert f.max_tokens == 58_648_786_619 // 131_072 == 447_454
    assert f.blocks == math.ceil(447_454 / 32) == 13_983
    assert cap.cache_tokens == 13_983 * 32 == 447_456
    assert f.kv_cache_bytes == 447_456 * 131_072
    assert cap.requests_per_replica == 13_983 // 1024 == 13
    # the profiling run: one dummy request of max_num_tokens 8,192, 2 extra tokens (overlap scheduler on)
    assert (f.estimation_requests, f.estimation_tokens) == (1, math.ceil(8194 / 32) * 32) == (1, 8224)
    assert cap.log_line == ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 54.62 GiB for max tokens in paged KV "
                            "cache (447456).")
    assert f"{447_456 * 131_072 / GIB:.2f}" == "54.62"


def test_the_published_gpt_oss_120b_log_by_its_own_figures():
    """The 1.1.0rc3 log (SOURCES.md): device 119.70 GiB, peak 113.65 GiB, overlap scheduler off, max_batch_size 64,
    max_seq_len inferred 131,072. Its two-decimal GiB figures give max_tokens within the rounding (the log: 86,711);
    the blocks, tokens, bytes and the shortened max_seq_len are the log's exactly."""
    cap = capacity("gpt-oss-120b", 8192, engine="trtllm", gpu="h100-sxm",
                   settings={"device_memory_gib": 119.70, "peak_memory_gib": 113.65, "disable_overlap_scheduler": True,
                             "max_batch_size": 64, "max_seq_len": 131072})
    f = cap.fit.figures
    assert f.kv_bytes_per_token == 2 * 36 * 8 * 64 * 2 == 73_728  # "kv size is 73728"
    assert f.estimation_tokens == math.ceil(8193 / 32) * 32 == 8224  # "max_tokens are set (to ... and 8224"
    assert f.estimation_bytes == 8224 * 73_728 == 606_339_072  # "tmp kv_mem 0.56 GiB"
    assert abs(f.max_tokens - 86_711) < 0.01 * GIB * 0.9 / 73_728
    assert f.blocks == math.ceil(86_711 / 32) == 2710  # "(86720)": 1.1 rounds up
    assert f.kv_cache_bytes == 86_720 * 73_728 == 6_393_692_160  # "Allocated 5.95 GiB"
    assert f.max_seq_len == 86_720  # "Adjusted max_seq_len to 86720"
    assert cap.log_line.endswith("Allocated 5.95 GiB for max tokens in paged KV cache (86720).")
    assert f.running_per_replica == min(2710 // 256, 64) == 10


def test_check_log_agrees_with_the_published_log(cli):
    r = cli("check-log", str(LOGS / "gpt-oss-120b-gb10-1.1.0rc3.log"), "--model", "gpt-oss-120b", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["kvcalc_trtllm_version"] == "1.1" and d["log_trtllm_version"] == "1.1.0rc3" and d["verdict"] == "agrees"
    figures = {row["figure"] for row in d["rows"]}
    assert {"kv size per token", "profiling run's cache", "tmp kv_mem", "available KV cache memory", "max_tokens",
            "tokens in the paged KV cache", "Allocated", "max_seq_len"} <= figures


@pytest.mark.parametrize("old, new, figure", [
    ("paged KV cache (86720)", "paged KV cache (86688)", "tokens in the paged KV cache"),  # floor, not 1.1's ceil
    ("kv size is 73728", "kv size is 36864", "kv size per token"),
    ("Adjusted max_seq_len to 86720\n", "Adjusted max_seq_len to 86720\n", None),
    ("max_seq_len=86720, max_num_requests=64", "max_seq_len=86688, max_num_requests=64", "max_seq_len"),
])
def test_an_edited_figure_differs_on_its_row(cli, tmp_path, old, new, figure):
    text = (LOGS / "gpt-oss-120b-gb10-1.1.0rc3.log").read_text()
    assert old in text
    log = tmp_path / "edited.log"
    log.write_text(text.replace(old, new))
    d = cli("check-log", str(log), "--model", "gpt-oss-120b", "--json").json()
    differs = [row["figure"] for row in d["rows"] if row["agrees"] is False]
    assert differs == ([] if figure is None else [figure]), d["rows"]


def test_mla_is_one_latent_row_on_every_rank():
    """DeepSeek-V3: kv_lora_rank 512 + rope 64 = 576 per layer, kv_factor 1, not split over tp: 61 x 576 x 2 B
    (bf16) = 70,272; fp8 35,136."""
    for prec, bpt in (("bf16", 61 * 576 * 2), ("fp8", 61 * 576)):
        cap = capacity("deepseek-v3", 32768, engine="trtllm", gpu="h200", precision=prec, parallel=Parallel(tp=8))
        assert cap.fit.figures.kv_bytes_per_token == cap.fit.figures.pool_bytes_per_token == bpt


def test_the_creator_and_the_pool_count_heads_differently_past_the_heads():
    """Qwen2.5-7B (28 layers, 4 KV heads of 128) at tp 8: the creator counts 2 x 28 x (128 x 4 // 8) x 2 B = 7,168 a
    token, the pool builds ceil(4 / 8) = 1 head a layer: 2 x 28 x 128 x 2 B = 14,336."""
    cap = capacity("qwen2.5-7b", 8192, engine="trtllm", gpu="h100-sxm", parallel=Parallel(tp=8))
    f = cap.fit.figures
    assert (f.kv_bytes_per_token, f.pool_bytes_per_token) == (2 * 28 * 64 * 2, 2 * 28 * 128 * 2) == (7168, 14336)
    # KvCacheCreator's max_tokens is the memory at 7,168 B; KVCacheManager then keeps min(that, the memory at
    # 14,336 B a token): half, and the blocks are of that (the pool is never larger than the memory)
    pool = cap.kv_pool_bytes_per_gpu
    assert f.max_tokens == pool // 7168
    assert f.blocks == math.ceil(pool / 14336 / 32) and f.kv_cache_bytes <= pool + 32 * 14336
    assert cap.plan.bytes_per_block == 32 * 14336


def test_nvfp4_values_and_scales():
    """Llama-3.1-8B nvfp4: e = 2 x 32 x 8 x 128 = 65,536 elements a token: 65,536 / 2 + 65,536 / 16 = 36,864 B."""
    cap = capacity("llama-3.1-8b", 32768, engine="trtllm", gpu="b200", precision="nvfp4")
    assert cap.fit.figures.kv_bytes_per_token == 32_768 + 4_096 == 36_864


def test_max_tokens_caps_the_pool_and_the_host_pool_is_counted():
    """max_tokens 100,000 caps KvCacheCreator's tokens (the memory stays the 58,648,786,619 B it computes):
    ceil(100,000 / 32) = 3,125 blocks;
    host_cache_size 10 GiB: int((10,737,418,240 / 131,072) / 32) = 2,560 secondary blocks."""
    cap = capacity("llama-3.1-8b", 32768, engine="trtllm", gpu="h100-sxm",
                   settings={"max_tokens": 100_000, "host_cache_size": 10 * GIB})
    f = cap.fit.figures
    assert cap.kv_pool_bytes_per_gpu == 58_648_786_619 and f.max_tokens == 100_000 and f.blocks == 3125
    (tier,) = cap.tiers
    assert (tier.units_per_rank, tier.tokens_per_rank, tier.bytes_per_rank) == (2560, 2560 * 32, 10 * GIB)
    assert tier.requests == 2560 // 1024 == 2 and tier.json["secondary_blocks"] == 2560


def test_estimation_requests_for_a_short_max_seq_len():
    """max_seq_len 4,096, max_num_tokens 8,192: dummy requests of 4,095, 4,095 and 2 tokens, each 2 more: ceil(4,097 /
    32) x 2 + ceil(4 / 32) = 259 blocks = 8,288 tokens."""
    assert Z.estimation_tokens(8192, 4096, 32, True) == (3, 259 * 32)
    assert Z.estimation_tokens(8192, 131072, 32, False) == (1, 8224)
    # max_seq_len 1: 10^8 dummy requests of one token, each 3 tokens in one block (counted, not listed)
    assert Z.estimation_tokens(10**8, 1, 32, True) == (10**8, 10**8 * 32)


def test_pipeline_stages_take_the_first_ranks_extra_layer():
    """Mapping.pp_layers: torch.tensor_split: 36 layers over 5 stages are 8, 7, 7, 7, 7."""
    from kvcalc.engines import get_engine

    assert [len(r) for r in get_engine("trtllm").pp_stages(36, 5)] == [8, 7, 7, 7, 7]


@pytest.mark.parametrize("args, fragment", [
    (["qwen3-next-80b-a3b", "--gpu", "h200", "-c", "8k"], "not modelled"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "256k"], "larger than what the model can support"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "16k", "--max-seq-len", "8192"], "max_seq_len is 8,192"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--max-attention-window", "128"], "last 128 tokens only"),
    (["gpt-oss-120b", "--gpu", "h200", "-c", "8k", "--max-attention-window", "8192,128"], "layer 1 (full"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--max-attention-window", "12x"], "--max-attention-window"),
    (["deepseek-v3", "--gpu", "b200", "--tp", "8", "-c", "8k", "-p", "nvfp4"], "nvfp4"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "128k", "--max-tokens", "1000"], "not served"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--peak-memory-gib", "90"], "leave none"),
])
def test_refusals_are_one_line(cli, args, fragment):
    r = cli("capacity", *args, "--engine", "trtllm")
    assert r.code == 2 and r.err.count("\n") == 1 and fragment in r.err, r.err


def test_fit_searches_trtllm_and_rows_rerun(cli):
    r = cli("fit", "llama-3.1-8b", "-c", "32k", "-n", "20", "--gpu", "h100-sxm", "--engine", "trtllm", "-p", "bf16",
            "--json")
    assert r.code == 0, r.err
    best = r.json()["deployments"][0]
    again = cli(*best["command"].split()[1:], "--json")
    assert again.code == 0 and json.loads(again.out)["total_requests"] == best["total_requests"] >= 20


def test_variable_sliding_windows_split_the_memory_by_window_and_bytes():
    """gpt-oss-120b with max_attention_window 128,131072 (18 layers each, 36,864 B a token each): the shares are
    window x (36,864 / 73,728) normalised, 64 / 65,600 and 65,536 / 65,600; the window 128 pool takes
    int(M x 64 / 65,600 / 36,864) tokens, the full one is capped by KvCacheCreator's max_tokens M // 73,728; blocks
    rounded up. A 128k request holds ceil(128 / 32) = 4 and 4,096 blocks."""
    cap = capacity("gpt-oss-120b", 131072, engine="trtllm", gpu="h200", settings={"max_attention_window": "128,131072"})
    m = cap.kv_pool_bytes_per_gpu
    small = int(Z.f32(m * Z.f32(Z.f32(Z.f32(0.5) * 128) / Z.f32(Z.f32(0.5) * 128 + Z.f32(0.5) * 131072))) / 36_864)
    assert small == int(m * 64 / 65_600 / 36_864) or abs(small - int(m * 64 / 65_600 / 36_864)) <= 1
    blocks = cap.plan.window_blocks(m)
    assert blocks == {128: math.ceil(small / 32), 131072: math.ceil((m // 73_728) / 32)}
    assert [g.blocks_per_request for g in cap.plan.groups] == [4, 4096]
    assert cap.requests_per_replica == min(blocks[128] // 4, blocks[131072] // 4096)


def test_check_log_reads_a_log_without_the_profiling_lines(cli):
    """The ai-dynamo README's pre-1.0 log (SOURCES.md): 64 tokens a block, "(220480)" tokens = 28,898,754,560 B at
    Llama-3.1-8B's 131,072 B ("26.91 GiB"), 2,048 blocks a sequence = 131,072 / 64."""
    d = cli("check-log", str(LOGS / "llama-3.1-8b-dynamo-h100.log"), "--model", "llama-3.1-8b", "--json").json()
    rows = {r["figure"]: r for r in d["rows"]}
    assert d["verdict"] == "agrees" and set(rows) == {"tokens per block", "Allocated", "blocks per sequence"}
    assert f"{220_480 * 131_072 / GIB:.2f}" == "26.91" and rows["blocks per sequence"]["kvcalc"] == "2,048"


def test_the_reverse_search_with_a_given_peak():
    """With the peak given, the profiling run's cache (and so the pool) depends on max_seq_len: the longest context
    at which 50 requests fit is searched on capacity itself; 50 fit there and not one token more."""
    from kvcalc.capacity import max_context

    args = {"model": "llama-3.1-8b", "engine": "trtllm", "gpu": "h200", "settings": {"peak_memory_gib": 30.0}}
    best, cap = max_context(args, 50, 131072)
    assert cap.requests_per_replica >= 50 and cap.plan.context == best
    assert capacity(context=best + 1, **args).requests_per_replica < 50


def test_max_num_tokens_is_clamped_to_max_seq_len_times_max_batch_size():
    """model_engine.py _init_max_num_tokens: -c 2k with max_batch_size 1 takes max_num_tokens 2,048, the dummy
    requests 2,047 + 1 tokens, each 2 more: ceil(2,049 / 32) + ceil(3 / 32) = 65 + 1 blocks = 2,112 tokens."""
    cap = capacity("llama-3.1-8b", 2048, engine="trtllm", gpu="h100-sxm", settings={"max_batch_size": 1})
    f = cap.fit.figures
    assert (f.estimation_requests, f.estimation_tokens) == (2, (65 + 1) * 32) == (2, 2112)
    assert cap.plan.settings_json["max_num_tokens"] == 2048


def test_the_host_pool_splits_over_the_windows_like_the_gpus():
    """gpt-oss-120b, max_attention_window 128,131072, host_cache_size 10 GiB: each window w gets
    int(10 GiB x share_w / 36,864) // 32 blocks, share_128 = 64 / 65,600: int(163,840 x 64 / 65,600 ... ) = 8."""
    cap = capacity("gpt-oss-120b", 131072, engine="trtllm", gpu="h200",
                   settings={"max_attention_window": "128,131072", "host_cache_size": 10 * GIB})
    per = Z.window_secondary_blocks(10 * GIB, {128: 36_864, 131072: 36_864}, 32)
    assert per[128] == int(10 * GIB * 64 / 65_600 / 36_864) // 32 == 8
    assert abs(per[131072] - int(10 * GIB * 65_536 / 65_600 / 36_864) // 32) <= 1
    (tier,) = cap.tiers
    assert tier.json["secondary_blocks"] == per[131072] and tier.requests == min(8 // 4, per[131072] // 4096)


@pytest.mark.parametrize("args, fragment", [
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--peak-memory-gib", "10"], "less than the weights"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--peak-memory-gib", "30", "--max-num-tokens", "1000000"],
     "does not fit under the peak"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "-p", "nvfp4"], "Blackwell"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--mtp"], "speculative decoding"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--max-attention-window", "9" * 5000], "--max-attention-window"),
    (["llama-3.1-8b", "--gpu", "h100-sxm", "-c", "8k", "--max-attention-window", "\u00b2"], "--max-attention-window"),
])
def test_more_refusals_are_one_line(cli, args, fragment):
    r = cli("capacity", *args, "--engine", "trtllm")
    assert r.code == 2 and r.err.count("\n") == 1 and fragment in r.err, r.err


def test_fit_refuses_a_measured_peak_and_bad_values_up_front(cli):
    for extra, flag in ((["--peak-memory-gib", "70"], "--peak-memory-gib"), (["--max-tokens", "-1"], "--max-tokens")):
        r = cli("fit", "llama-3.1-8b", "-c", "8k", "-n", "1", "--gpu", "h100-sxm", "--engine", "trtllm", *extra)
        assert r.code == 2 and r.err.startswith(f"kvcalc: error: {flag}:") and r.err.count("\n") == 1, r.err


def test_a_max_seq_len_past_the_models_is_set_to_it():
    """_init_max_seq_len: --max-seq-len 1M for Llama-3.1-8B (131,072) is lowered to 131,072 and requests of 8k are
    still served; a request past 131,072 is refused."""
    cap = capacity("llama-3.1-8b", 8192, engine="trtllm", gpu="h100-sxm", settings={"max_seq_len": 1 << 20})
    assert cap.fit.figures.max_seq_len_asked == 131072
    assert any("larger than what the model can support (131072)" in n for n in cap.notes)


def test_a_mamba_hybrid_keeps_its_state_in_max_batch_size_slots():
    """Nemotron-H 56B at tp 4 (MambaCacheManager): a Mamba layer's slot on a rank is conv (16,384 + 2 x 8 x 256) / 4
    x 3 + ssm 256 / 4 x 64 x 256 values, in bf16: (15,360 + 1,048,576) x 2 = 2,127,872 B; 54 layers = 114,905,088 B
    a request; max_batch_size 32 slots = 3,676,962,816 B, allocated before the profiling run, so off the memory the
    fraction takes. The KV cache pages the 10 attention layers: 2 x 10 x (128 x 8 // 4) x 2 B = 10,240 a token."""
    cap = capacity("nemotron-h-56b", 8192, engine="trtllm", gpu="h200", parallel=Parallel(tp=4),
                   weights_bytes=104 * GIB, settings={"enable_block_reuse": False, "max_batch_size": 32})
    f = cap.fit.figures
    assert cap.plan.state_bytes == (15_360 + 1_048_576) * 2 * 54 == 114_905_088
    assert f.kv_bytes_per_token == 2 * 10 * 256 * 2 == 10_240
    free = cap.gpu.memory_bytes - cap.weights_bytes_per_gpu - 4 * GIB - 32 * 114_905_088
    assert cap.kv_pool_bytes_per_gpu == int(free * F32_09)
    assert cap.requests_per_replica == min(f.blocks // 256, 32) == 32
    # block reuse on (TensorRT-LLM's default) is what the hybrid manager asserts against; 2,048 slots do not fit
    with pytest.raises(KvcalcError, match="requires block reuse to be disabled"):
        capacity("nemotron-h-56b", 8192, engine="trtllm", gpu="h200", parallel=Parallel(tp=4), weights_bytes=104 * GIB)
    with pytest.raises(KvcalcError, match="Mamba state of max_batch_size 2,048"):
        capacity("nemotron-h-56b", 8192, engine="trtllm", gpu="h200", parallel=Parallel(tp=4),
                 weights_bytes=104 * GIB, settings={"enable_block_reuse": False})
