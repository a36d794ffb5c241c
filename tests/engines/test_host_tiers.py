"""The tiers below the GPU pool (Engine.host_tiers): vLLM 0.33's CPU offloading (OffloadingConnector's chunks),
LMCache 0.5.6's CPU and disk tiers (its MP server, as vLLM's lmcache backend starts it, and in process), SGLang
0.5.23's HiCache host pools; their refusals and check-log lines. Every expected figure is worked out by hand here,
and the published ones (LMCache issue #2901, vLLM issue #44888, SGLang PR #8102 and issue #31600) are reproduced."""

from pathlib import Path

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.engines import lmcache as LM
from kvcalc.engines.sglang.tiers import host_pool_tokens
from kvcalc.engines.vllm.tiers import native_offload
from kvcalc.errors import KvcalcError

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
GIB = 1 << 30
# Llama-3.1-8B bf16: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B a token; at tp 2, 4 heads: 65,536 B
LLAMA_TOKEN = 32 * 8 * 128 * 2 * 2
assert LLAMA_TOKEN == 131_072


def _vllm(model="llama-3.1-8b", context=32768, tp=1, pp=1, dp=1, gpu="h100-sxm", **settings):
    return capacity(model, context, gpu=gpu, parallel=Parallel(tp=tp, pp=pp, dp=dp), settings=settings)


def _sglang(model="llama-3.1-8b", context=32768, tp=1, gpu="h100-sxm", **settings):
    return capacity(model, context, gpu=gpu, engine="sglang", parallel=Parallel(tp=tp),
                    settings={"enable_hierarchical_cache": True, **settings})


# ---- vLLM native: CPUOffloadingSpec -----------------------------------------------------------------------------
def test_vllm_native_llama_tp2_10_gib_is_the_facts_worked_example():
    # a worker's block: 32 layers x 16 tokens x 4 heads x 128 x 2 x 2 B = 1,048,576 B; a row holds both workers'
    # slices: 2,097,152 B (a multiple of 4,096); 10 x 2^30 // 2,097,152 = 5,120 chunks of 16 tokens = 81,920
    c = _vllm(tp=2, kv_offloading_size=10)
    (t,) = c.tiers
    assert c.plan.bytes_per_block == 32 * 16 * 4 * 128 * 2 * 2 == 1_048_576
    assert t.json["cpu_chunk_bytes"] == 2_097_152
    assert t.json["cpu_chunks"] == 10 * GIB // 2_097_152 == 5120
    assert t.json["cpu_tokens"] == t.tokens_per_rank == 5120 * 16 == 81_920
    assert t.json["cpu_bytes"] == t.host_bytes == 5120 * 2_097_152 == 10_737_418_240
    assert t.json["cpu_bytes_per_rank"] == 5120 * 1_048_576  # one worker's slots of every row
    assert t.ranks == 2 and t.unit == "chunk" and t.unit_tokens == 16
    assert t.requests == 5120 // (32768 // 16) == 2  # 2,048 whole blocks a 32k prompt
    assert t.json["cpu_log_line"].endswith("(10.74 GB)")  # 10,737,418,240 / 1e9
    assert any("--kv-offloading-size" not in line and "{{kv_offloading_size}} 10 GiB" in line for line in t.lines)


def test_vllm_issue_44888_three_gib_logs_3_22_gb():
    # vLLM issue #44888: cpu_bytes_to_use 3221225472 (3 GiB) -> "Created mmap file ... (3.22 GB)": the region is
    # whole rows of at most 3 GiB, printed / 1e9. Llama-3.1-8B on one GPU: a row is one 2,097,152 B block, which
    # divides 3 GiB: 1,536 chunks, 3,221,225,472 B -> 3.22 GB
    off = native_offload(3, LLAMA_TOKEN * 16, world=1)
    assert off.cpu_bytes == 3_221_225_472 and off.row == 2_097_152 and off.num_chunks == 1536
    assert f"{off.region_bytes / 1e9:.2f}" == "3.22"
    assert _vllm(kv_offloading_size=3).tiers[0].json["cpu_log_line"].endswith("(3.22 GB)")


def test_vllm_mla_keeps_one_copy_on_cuda_and_one_per_worker_on_rocm():
    # DeepSeek-V3 bf16: a block of 61 layers x 16 tokens x 576 x 2 B = 1,124,352 B on every TP rank (the latent is
    # replicated). CUDA, tp 8 only: replicated_layout, one copy a row: round_up(1,124,352, 4,096) = 1,126,400 B;
    # 100 GiB // 1,126,400 = 95,325 chunks (95,326 x 1,126,400 = 107,375,206,400 > 107,374,182,400)
    c = _vllm("deepseek-v3", tp=8, gpu="h200", kv_offloading_size=100)
    assert c.plan.bytes_per_block == 61 * 16 * 576 * 2 == 1_124_352
    j = c.tiers[0].json
    assert j["cpu_chunk_bytes"] == 275 * 4096 == 1_126_400 and j["cpu_chunks"] == 95_325
    assert j["cpu_bytes_per_rank"] == j["cpu_bytes"] == 95_325 * 1_126_400  # each rank maps the single copy
    # ROCm (MI300X, gfx942): no shared region, no dedup: a row is 8 x 1,124,352 = 8,994,816 B (2,196 pages);
    # 107,374,182,400 // 8,994,816 = 11,937 chunks, each worker its own 11,937 x 1,124,352 B tensor
    r = _vllm("deepseek-v3", tp=8, gpu="mi300x", kv_offloading_size=100).tiers[0].json
    assert r["cpu_chunk_bytes"] == 8_994_816 == 2196 * 4096 and r["cpu_chunks"] == 11_937
    assert r["cpu_bytes"] == 8 * 11_937 * 1_124_352 and r["cpu_log_line"] is None


def test_vllm_hybrid_takes_the_widest_groups_block_and_counts_every_groups_chunks():
    # gpt-oss-120b tp 2: 18 sliding-window (128) and 18 full layers, 4 KV heads x 64 a rank: a page is
    # 16 x 4 x 64 x 2 x 2 B = 16,384 B; two groups of 18 layers alias one block of 18 x 16,384 = 294,912 B (the widest
    # group's, not the sum); a row 2 x 294,912 = 589,824 B = 144 pages; 100 GiB // 589,824 = 182,044 chunks.
    # cpu_kv_cache_size_tokens at 32,768: full cdiv(32768, 16) = 2,048 chunks + window cdiv(128, 16) = 8 -> 2,056;
    # 182,044 x 32,768 // 2,056 = 2,901,370
    c = _vllm("gpt-oss-120b", tp=2, kv_offloading_size=100)
    assert sorted(g.kind.value for g in c.plan.groups) == ["full", "window"]
    assert c.plan.bytes_per_block == 18 * 16 * 4 * 64 * 2 * 2 == 294_912
    j = c.tiers[0].json
    assert j["cpu_chunk_bytes"] == 589_824 and j["cpu_chunks"] == 100 * GIB // 589_824 == 182_044
    assert j["cpu_tokens"] == 182_044 * 32768 // 2056 == 2_901_370
    assert c.tiers[0].requests == 182_044 // 2056 == 88


def test_vllm_pp_counts_every_worker_of_the_replica():
    # Llama-3.1-70B tp 4 x pp 2: 40 layers a stage x 16 x 2 heads x 128 x 2 x 2 B = 655,360 B a worker's block;
    # 8 workers: a row of 5,242,880 B; 100 GiB // 5,242,880 = 20,480 chunks, 13,421,772,800 B a worker
    j = _vllm("llama-3.1-70b", tp=4, pp=2, kv_offloading_size=100).tiers[0].json
    assert j["cpu_chunk_bytes"] == 8 * 40 * 16 * 2 * 128 * 2 * 2 == 5_242_880
    assert j["cpu_chunks"] == 20_480 and j["cpu_bytes_per_rank"] == 20_480 * 655_360


def test_vllm_without_a_size_has_no_tier():
    assert _vllm().tiers == ()


# ---- LMCache ------------------------------------------------------------------------------------------------------
def test_lmcache_in_process_default_5_gib_holds_320_chunks_a_worker():
    # a chunk of one rank: 2 (K, V) x 32 layers x 256 tokens x 4 heads x 128 x 2 B = 16,777,216 B (4 KiB-aligned);
    # int(5.0 x 2^30) // 16,777,216 = 320 chunks = 81,920 tokens a worker, every worker its own 5 GiB
    c = _vllm(tp=2, lmcache_mode="in-process")
    (t,) = c.tiers
    assert t.json == {"lmcache_mode": "in-process", "lmcache_chunks": 320, "lmcache_tokens": 81_920,
                      "lmcache_bytes": 2 * 5 * GIB, "lmcache_chunk_bytes": 2 * 32 * 256 * 4 * 128 * 2}
    assert t.host_bytes == 10 * GIB and t.ranks == 2 and t.medium == "host memory"
    assert t.requests == 320 // (32768 // 256) == 2


def test_lmcache_issue_2901_50_gib_stores_409600_tokens():
    # LMCache issue #2901: LMCACHE_MAX_LOCAL_CPU_SIZE=50 at TP 1 -> "Storable tokens 409,600" (a 128 KiB/token model):
    # a chunk 256 x 131,072 = 33,554,432 B; 50 x 2^30 // 33,554,432 = 1,600 chunks x 256 = 409,600 tokens
    t = _vllm(lmcache_mode="in-process", lmcache_max_local_cpu_size=50).tiers[0]
    assert t.json["lmcache_chunk_bytes"] == 256 * LLAMA_TOKEN == 33_554_432
    assert t.json["lmcache_chunks"] == 1600 and t.json["lmcache_tokens"] == 409_600
    pool = LM.ChunkPool(LM.gib_bytes(50), 256, LLAMA_TOKEN)
    assert pool.objects == 1600 and pool.tokens == 409_600


def test_lmcache_disk_tier_and_the_unfull_chunk():
    # disk 100 GiB a worker: 107,374,182,400 // 16,777,216 = 6,400 chunks = 1,638,400 tokens
    tiers = _vllm(tp=2, lmcache_mode="in-process", lmcache_max_local_disk_size=100).tiers
    disk = next(t for t in tiers if t.medium == "disk")
    assert disk.json == {"lmcache_disk_chunks": 6400, "lmcache_disk_tokens": 1_638_400, "lmcache_disk_bytes": 200 * GIB}
    # a 1,000-token prompt at tp 2 (65,536 B a token): 3 whole chunks; save_unfull_chunk stores the last 232 tokens
    # too, at 232 x 65,536 = 15,204,352 B (3,712 pages): 3 x 16,777,216 + 15,204,352 = 65,536,000 B a request;
    # 5 GiB // 65,536,000 = 81 requests, against 320 // 3 = 106 of whole chunks only
    pool = LM.ChunkPool(LM.gib_bytes(5), 256, 65_536)
    assert pool.requests(1000) == 106 and pool.requests(1000, save_unfull=True) == 81
    t = _vllm(context=1000, tp=2, lmcache_mode="in-process", lmcache_save_unfull_chunk=True).tiers[0]
    assert t.requests == 81


def test_lmcache_mp_server_pool_is_shared_by_the_ranks():
    # vLLM 0.33's lmcache backend: LMCacheMPConnector; the size flag is not passed on, the server's --l1-size-gb
    # sizes it: 10 GiB // 16,777,216 = 640 objects, one per rank and chunk: 320 chunks = 81,920 tokens
    t = _vllm(tp=2, kv_offloading_size=10, kv_offloading_backend="lmcache", lmcache_l1_size_gb=10).tiers[0]
    assert t.json == {"lmcache_mode": "mp", "lmcache_chunks": 320, "lmcache_tokens": 81_920,
                      "lmcache_bytes": 10 * GIB, "lmcache_chunk_bytes": 16_777_216}
    assert t.host_bytes == 10 * GIB and "does not pass {{kv_offloading_size}} 10 GiB on" in t.lines[0]
    # MLA: tp does not split the latent, one object a chunk (pp 1): DeepSeek-V3 61 x 256 x 576 x 2 = 17,989,632 B,
    # aligned 17,989,632 (4,392 pages); 100 GiB // 17,989,632 = 5,968 chunks
    m = _vllm("deepseek-v3", tp=8, gpu="h200", lmcache_mode="mp", lmcache_l1_size_gb=100).tiers[0].json
    assert m["lmcache_chunk_bytes"] == 61 * 256 * 576 * 2 == 17_989_632 == 4392 * 4096
    assert m["lmcache_chunks"] == 100 * GIB // 17_989_632 == 5968


def test_lmcache_refusals():
    with pytest.raises(KvcalcError, match="the server's --l1-size-gb sizes the tier") as e:
        _vllm(tp=2, kv_offloading_size=10, kv_offloading_backend="lmcache")
    assert e.value.param == "lmcache_l1_size_gb" and "2 x 16,777,216 B" in str(e.value)
    with pytest.raises(KvcalcError, match="chunk size 100 must be a multiple of group 0 tokens_per_block 16"):
        _vllm(lmcache_mode="mp", lmcache_l1_size_gb=1, lmcache_chunk_size=100)
    with pytest.raises(KvcalcError, match="LMCache's object groups for hybrid and sparse-attention models"):
        _vllm("gpt-oss-120b", tp=2, lmcache_mode="in-process")


# ---- SGLang HiCache ----------------------------------------------------------------------------------------------
def test_sglang_host_pool_rounding_from_the_facts():
    # base.py HostKVCache.__init__: int(device x ratio) // page + 1 pages
    assert host_pool_tokens(200_000, 1, 65_536, 2.0) == 400_001  # ratio 2, page 1: 400,000 + 1
    assert 400_001 * 65_536 == 26_214_465_536  # "26.21 GB"
    assert host_pool_tokens(100_000, 64, 65_536, 2.0) == (200_000 // 64 + 1) * 64 == 200_064
    # --hicache-size 30 (GB = 1e9): 30e9 // 65,536 = 457,763 tokens + 1 = 457,764 -> 30,000,021,504 B, "30.00 GB"
    assert host_pool_tokens(1, 1, 65_536, None, 30) == 457_764 and 457_764 * 65_536 == 30_000_021_504


def test_sglang_ratio_2_is_twice_the_device_pool_plus_a_page():
    c = _sglang(tp=2, hicache_ratio=2.0)
    n = c.fit.figures.max_total_num_tokens
    (t,) = c.tiers
    assert t.json["hicache_host_tokens"] == 2 * n + 1 == t.tokens_per_rank
    assert t.json["hicache_host_pages"] == 2 * n + 1
    assert t.json["hicache_host_bytes"] == (2 * n + 1) * 65_536  # (128 + 128) x 4 heads x 32 layers x 2 B
    assert t.host_bytes == 2 * t.json["hicache_host_bytes"] and t.ranks == 2
    assert t.requests == (2 * n + 1) // 32768
    assert f"Allocating kv hierarchical KV host pool: {2 * n + 1} tokens" in " ".join(t.lines)


def test_sglang_hicache_size_30_gb_per_rank():
    t = _sglang(tp=2, hicache_size=30).tiers[0]
    assert t.json["hicache_host_tokens"] == 457_764 and t.json["hicache_host_bytes"] == 30_000_021_504
    assert t.json["hicache_ratio"] is None


def test_sglang_auto_sizes_the_ratio_from_the_hosts_memory():
    # hicache_auto_size.py: budget = int(((200 GiB - 10 GiB) // 2 ranks) x 0.8) = int(102,005,473,280 x 0.8)
    # = 81,604,378,624 B; device bytes (N + 1 rows) x 65,536; ratio = min(2, budget x 0.95 / device bytes)
    c = _sglang(tp=2, host_memory_gib=200)
    n = c.fit.figures.max_total_num_tokens
    budget = int((200 * GIB - 10 * GIB) // 2 * 0.8)
    assert budget == 81_604_378_624
    ratio = min(2.0, budget * 0.95 / ((n + 1) * 65_536))
    assert ratio < 2.0
    assert c.tiers[0].json["hicache_host_tokens"] == int(n * ratio) + 1
    assert c.tiers[0].json["hicache_ratio"] == ratio
    # without the host's memory: 2.0, and the lines say the auto-size needs it
    t = _sglang(tp=2).tiers[0]
    assert t.json["hicache_host_tokens"] == 2 * n + 1
    assert any("give {{host_memory_gib}} to size and check it" in line for line in t.lines)


def test_sglang_pr_8102_refusal():
    # SGLang PR #8102: "Not enough host memory available. Requesting 40.00 GB but only have 44.87 GB free." The fix
    # (0.5.23's host_memory_budget_bytes) takes the 10 GiB reserve off first: 44.87e9 - 10,737,418,240 = 34.13e9 B
    # free for one rank, and --hicache-size 40 asks for (int(40e9 // 131,072) + 1) x 131,072 = 40,000,028,672 B
    with pytest.raises(KvcalcError) as e:
        _sglang(hicache_size=40, host_memory_gib=44.87e9 / GIB)
    msg = str(e.value)
    assert (305_175 + 1) * LLAMA_TOKEN == 40_000_028_672
    assert ("Not enough host memory available. Requesting 40.00 GB but only have 34.13 GB free. Please reduce the "
            "size of the hierarchical cache.") in msg
    assert e.value.param == "host_memory_gib" and "\n" not in msg
    # a host of 45 GiB less the reserve: 35 GiB = 37,580,963,840 B, still short; 48 GiB holds it
    with pytest.raises(KvcalcError, match="only have 37.58 GB free"):
        _sglang(hicache_size=40, host_memory_gib=45)
    assert _sglang(hicache_size=40, host_memory_gib=48).tiers[0].json["hicache_host_bytes"] == 40_000_028_672


def test_sglang_hybrid_pools_each_get_their_host_pool():
    # gpt-oss-120b: split SWA pools, each host pool int(device x 2) + 1 (page 1)
    c = _sglang("gpt-oss-120b", tp=2, hicache_ratio=2.0)
    f = c.fit.figures
    j = c.tiers[0].json
    assert j["hicache_host_tokens"] == 2 * f.max_total_num_tokens + 1
    assert j["hicache_swa_host_tokens"] == 2 * f.swa_max_total_num_tokens + 1
    # 18 layers x 4 heads x (64 + 64) x 2 B = 18,432 B a token in each
    assert j["hicache_host_bytes"] == j["hicache_host_tokens"] * 18_432
    assert j["hicache_host_bytes_per_rank"] == j["hicache_host_bytes"] + j["hicache_swa_host_bytes"]
    # a Mamba hybrid: the state pool's slots too (page 1)
    m = capacity("qwen3-next-80b-a3b", 32768, kv_memory=40 * GIB, engine="sglang", parallel=Parallel(tp=4),
                 settings={"enable_hierarchical_cache": True, "hicache_ratio": 2.0})
    assert m.tiers[0].json["hicache_mamba_host_slots"] == 2 * m.fit.figures.max_mamba_cache_size + 1


def test_sglang_refusals():
    with pytest.raises(KvcalcError, match="DeepSeek DSA's"):
        _sglang("deepseek-v3.2", tp=8, gpu="h200")
    with pytest.raises(KvcalcError, match="Unsupported layout: page_head"):
        _sglang("deepseek-v3", tp=8, gpu="h200", hicache_mem_layout="page_head")


# ---- the command line ---------------------------------------------------------------------------------------------
def test_cli_json_keys(cli):
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100", "-c", "32k", "--kv-offloading-size", "10", "--json")
    assert r.code == 0, r.err
    out = r.json()
    # one GPU: a row is one 2,097,152 B block; 10 GiB // 2,097,152 = 5,120 chunks of 16 tokens
    assert (out["cpu_chunks"], out["cpu_tokens"], out["cpu_bytes"]) == (5120, 81_920, 10 * GIB)
    assert out["host_tiers"][0]["name"] == "vllm-cpu-offloading" and out["host_tiers"][0]["requests"] == 2
    assert out["engine_settings"]["kv_offloading_size"] == 10
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100", "-c", "32k", "--tp", "2", "--engine", "sglang",
            "--enable-hierarchical-cache", "--hicache-size", "30", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert (out["hicache_host_tokens"], out["hicache_host_bytes"], out["hicache_host_pages"]) == \
        (457_764, 30_000_021_504, 457_764)
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100", "-c", "32k", "--tp", "2", "--lmcache-mode", "in-process",
            "--json")
    assert r.code == 0, r.err
    assert (r.json()["lmcache_chunks"], r.json()["lmcache_tokens"]) == (320, 81_920)


def test_cli_text_names_the_flags(cli):
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "-c", "32k", "--tp", "2", "--kv-offloading-size", "10")
    assert r.code == 0, r.err
    assert "--kv-offloading-size 10 GiB = 10,737,418,240 B" in r.out and "5,120 chunks" in r.out
    assert "(10.74 GB)" in r.out and "{{" not in r.out


@pytest.mark.parametrize("args, fragment", [
    (("--kv-offloading-size", "-1"), "--kv-offloading-size: must be from 0"),
    (("--kv-offloading-size", "0"), "cpu_bytes_to_use must be specified"),
    (("--kv-offloading-backend", "lmcache"), "--kv-offloading-backend: vLLM turns KV offloading on only when"),
    (("--lmcache-max-local-cpu-size", "5"), "--lmcache-max-local-cpu-size: an LMCache setting, but LMCache is not on"),
    (("--kv-offloading-size", "10", "--lmcache-chunk-size", "128"), "the offloading backend is native"),
    (("--lmcache-mode", "mp", "--lmcache-max-local-cpu-size", "3"), "a setting of LMCache's in-process deployment"),
    (("--kv-offloading-size", "10", "--kv-offloading-backend", "lmcache", "--lmcache-mode", "in-process"),
     "vLLM 0.33 starts LMCacheMPConnector"),
    (("--engine", "sglang", "--enable-hierarchical-cache", "--hicache-ratio", "0"), "--hicache-ratio: must be from"),
    (("--engine", "sglang", "--hicache-ratio", "2"), "--hicache-ratio: a HiCache setting, but HiCache is off "
                                                     "(--enable-hierarchical-cache turns it on)"),
    (("--hicache-ratio", "2"), "a setting of the sglang engine"),
    (("--engine", "sglang", "--enable-hierarchical-cache", "--disable-radix-cache"), "mutually exclusive"),
    (("--engine", "sglang", "--enable-hierarchical-cache", "--hicache-ratio", "2", "--host-memory-gib", "100"),
     "Not enough host memory available."),
    (("--engine", "sglang", "--enable-hierarchical-cache", "--host-memory-gib", "5"),
     "No host memory is left for HiCache after the 10 GiB reserve; set --hicache-ratio or --hicache-size"),
])
def test_cli_refusals_are_one_line_exit_2(cli, args, fragment):
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "-c", "32k", "--tp", "2", *args)
    assert r.code == 2 and r.out == "", r.err
    assert r.err.startswith("kvcalc: error: ") and r.err.count("\n") == 1 and fragment in r.err, r.err


# ---- check-log ----------------------------------------------------------------------------------------------------
def test_check_log_vllm_offload_region(cli, tmp_path):
    log = LOGS / "synthetic-0.33-llama-3.1-8b-offload.log"
    r = cli("check-log", str(log), "--json")
    assert r.code == 0, r.err
    out = r.json()
    rows = {x["figure"]: x for x in out["rows"]}
    region = rows["CPU offload region (GB = 10^9 B, 2 decimals)"]
    assert region["logged"] == region["kvcalc"] == "3.22 GB" and region["agrees"] is True
    assert rows["CPU offload chunks"]["kvcalc"].startswith("1,536")
    assert out["settings"]["kv_offloading_size"] == 3.0 and out["verdict"] == "agrees"
    # a wrong figure differs (exit 1)
    bad = tmp_path / "bad.log"
    bad.write_text(log.read_text().replace("(3.22 GB)", "(3.25 GB)"))
    r = cli("check-log", str(bad), "--json")
    assert r.code == 1 and r.json()["verdict"] == "differs"
    # no size in the log: the whole chunk counts the figure stands for: 3.215e9 .. 3.225e9 B over 2,097,152 B a row
    # = 1,533.03 .. 1,537.79, so 1,534 .. 1,537
    bare = tmp_path / "bare.log"
    bare.write_text("".join(x for x in log.read_text().splitlines(True) if "non-default args" not in x))
    out = cli("check-log", str(bare), "--json").json()
    stands = next(x for x in out["rows"] if x["figure"].startswith("CPU offload chunks it stands for"))
    assert stands["kvcalc"].startswith("1,534 .. 1,537") and stands["agrees"] is True
    # the size given on the command line sets it as the log would
    out = cli("check-log", str(bare), "--kv-offloading-size", "3", "--json").json()
    assert next(x for x in out["rows"] if x["figure"].startswith("CPU offload region"))["agrees"] is True


def test_check_log_sglang_hicache_pool(cli, tmp_path):
    log = LOGS / "synthetic-sglang-0.5.23-llama-3.1-8b-hicache.log"
    r = cli("check-log", str(log), "--json")
    assert r.code == 0, r.err
    rows = {x["figure"].split(" (")[0] + x["figure"].split(" (")[1][:6]: x for x in r.json()["rows"] if " (" in x["figure"]}
    # 120 GB a rank: int(120e9 // 131,072) = 915,527 + 1 = 915,528 tokens x 131,072 = 120,000,086,016 B
    tokens = rows["HiCache kv host pooltokens"]
    assert tokens["logged"] == tokens["kvcalc"] == "915,528" and tokens["agrees"] is True
    gb = next(x for x in r.json()["rows"] if x["figure"].startswith("HiCache kv host pool (GB"))
    assert gb["logged"] == gb["kvcalc"] == "120.00 GB" and gb["agrees"] is True
    # SGLang issue #31600's wording of the same size (a release before 0.5.23): "Allocating 120.00 GB host memory for
    # hierarchical KV cache."
    old = tmp_path / "old.log"
    old.write_text(log.read_text().replace("Allocating kv hierarchical KV host pool: 915528 tokens, 120.00 GB host "
                                           "memory.", "Allocating 120.00 GB host memory for hierarchical KV cache."))
    out = cli("check-log", str(old), "--json").json()
    gb = next(x for x in out["rows"] if x["figure"].startswith("HiCache kv host pool (GB"))
    assert gb["logged"] == gb["kvcalc"] == "120.00 GB" and gb["agrees"] is True
    # one token short differs
    bad = tmp_path / "bad.log"
    bad.write_text(log.read_text().replace("915528 tokens", "915527 tokens"))
    assert cli("check-log", str(bad)).code == 1


# ---- after a review ------------------------------------------------------------------------------------------------
def test_the_mp_servers_lazy_l1_is_pinned_in_64_mib_steps(cli):
    """LMCache's lazy allocator (the MP server's default) rounds L1 up to 64 MiB: 10.3 GiB = int(10.3 x 2^30) =
    11,059,540,787 B -> 165 x 67,108,864 = 11,072,962,560 B; Llama-3.1-8B at tp 2 stores 256 tokens x 65,536 B =
    16 MiB a rank and chunk: 660 objects, 330 chunks of the replica."""
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "-c", "32k", "--tp", "2", "--kv-offloading-size", "10",
            "--kv-offloading-backend", "lmcache", "--lmcache-l1-size-gb", "10.3", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert int(10.3 * 2**30) == 11_059_540_787 and -(-11_059_540_787 // 2**26) * 2**26 == 11_072_962_560
    assert d["lmcache_chunks"] == 11_072_962_560 // (256 * 65_536) // 2 == 330


def test_uneven_pipeline_stages_are_refused_for_vllms_offloading(cli):
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "-c", "32k", "--pp", "5", "--kv-offloading-size", "10")
    assert r.code == 2 and r.err.count("\n") == 1 and "worker 0's block" in r.err


def test_sglang_says_when_its_replicas_together_outgrow_the_host(cli):
    """SGLang checks one replica's tp x pp ranks against the host: 4 replicas of 109,843,447,808 B each pass that
    check on a 400 GiB host, and together take more than 400 GiB less 10 GiB."""
    r = cli("capacity", "llama-3.1-8b", "--engine", "sglang", "--gpu", "h100-sxm", "-c", "32k", "--dp", "4",
            "--enable-hierarchical-cache", "--hicache-ratio", "2", "--host-memory-gib", "400")
    assert r.code == 0, r.err
    assert "4 replicas on this host take" in " ".join(r.out.split()) and 4 * 109_843_447_808 > 390 * 2**30


@pytest.mark.parametrize("value", ["-1.0", "nan"])
def test_check_log_refuses_a_damaged_offloading_size(cli, tmp_path, value):
    src = LOGS / "synthetic-0.33-llama-3.1-8b-offload.log"
    log = tmp_path / "o.log"
    log.write_text(src.read_text().replace("'kv_offloading_size': 3.0", f"'kv_offloading_size': {value}"))
    r = cli("check-log", str(log))
    assert r.code == 2 and r.err.count("\n") == 1 and "offload_size" in r.err
