"""Llama 4's chunked local attention as vLLM 0.33 plans it, against hand arithmetic.

vLLM's formulas (v1/kv_cache_interface.py ChunkedLocalAttentionSpec, v1/core/kv_cache_planning.py):

* model_executor/models/llama4.py gives the RoPE layers ChunkedLocalAttention (attention_chunk_size 8192), the
  NoPE layers (every 4th: 3, 7, ..., 47) plain attention; both register K and V per KV head at the cache block;
* a chunked layer reserves cdiv(min(chunk + in_flight, max_model_len), block) blocks (one chunk plus the tokens in
  flight; no +1, unlike a sliding window), a full layer cdiv(max_model_len, block);
* chunked and full layers are two uniform types of one page size: equal-page groups of the smaller count
  (12 layers): 3 chunked groups and 1 full group, each block holding 12 layers' pages;
* in_flight = max_num_batched_tokens x 2 with async scheduling (the default).

Llama-4-Scout: 48 layers, 8 KV heads of 128, bf16: a layer's page at tp 8 is 16 tokens x 1 head x 128 x 2 (K, V)
x 2 B = 8,192 B, so a block of 12 layers is 98,304 B.
"""

from kvcalc.capacity import Parallel, capacity
from kvcalc.engines import vllm as V
from kvcalc.plan import plan
from kvcalc.transfer import transfer

K, GIB = 1024, 1 << 30
S = V.Settings(max_num_batched_tokens=8192)


def _cdiv(a, b):
    return -(-a // b)


def test_scout_tp8_at_128k_four_groups_and_the_chunk_cap():
    p = plan("llama-4-scout", 128 * K, settings=S, tp=8)
    assert [g.kind_name for g in p.groups] == ["chunk 8192"] * 3 + ["full"]
    assert [g.layers for g in p.groups[:3]] == [tuple(range(i, 48, 4)) for i in range(3)]
    assert p.groups[3].layers == tuple(range(3, 48, 4))
    page = 16 * 1 * 128 * 2 * 2
    assert p.bytes_per_block == 12 * page == 98_304
    in_flight = 2 * 8192
    chunked = _cdiv(min(8192 + in_flight, 128 * K), 16)
    assert chunked == 1536
    assert [g.blocks_per_request for g in p.groups] == [chunked] * 3 + [128 * K // 16]
    assert p.blocks_per_request == 3 * 1536 + 8192 == 12_800


def test_scout_on_a_60_gib_pool_fits_51():
    c = capacity("llama-4-scout", 128 * K, settings=S, parallel=Parallel(tp=8), kv_memory=60 * GIB)
    assert c.num_blocks == 60 * GIB // 98_304 == 655_360
    # the pool's blocks less vLLM's null block, over 12,800 a request: 51.19...
    assert c.requests_per_replica == (655_360 - 1) // 12_800 == 51
    assert "Maximum concurrency for 131,072 tokens per request: 51.20x" in c.log_line  # 655,360 / 12,800


def test_a_context_inside_one_chunk_reserves_as_full_attention():
    p = plan("llama-4-scout", 4096, settings=S, tp=8)
    # min(8192 + 16384, 4096) = 4096 tokens: 256 blocks in every group
    assert [g.blocks_per_request for g in p.groups] == [4096 // 16] * 4


def test_the_cap_follows_the_tokens_in_flight_block_and_precision():
    off = plan("llama-4-scout", 128 * K, settings=V.Settings(max_num_batched_tokens=2048, async_scheduling=False),
               tp=8)
    assert off.groups[0].blocks_per_request == _cdiv(8192 + 2048, 16) == 640
    big = plan("llama-4-scout", 128 * K, settings=V.Settings(max_num_batched_tokens=8192, block_size=32), tp=8)
    assert big.groups[0].blocks_per_request == (8192 + 16384) // 32 == 768
    assert big.bytes_per_block == 12 * 32 * 128 * 2 * 2 == 196_608
    fp8 = plan("llama-4-scout", 128 * K, precision="fp8", settings=S, tp=8)
    assert fp8.bytes_per_block == 12 * 16 * 128 * 2 * 1 == 49_152


def test_the_scheduler_admits_a_short_request_by_its_own_blocks():
    from kvcalc.engines import get_engine

    p = plan("llama-4-scout", 128 * K, settings=S, tp=8)
    eng = get_engine("vllm")
    # a chunked group admits min(cdiv(T, block), its cap); a full group cdiv(T, block)
    assert eng.request_blocks(p, 5000) == (313, 313, 313, 313)  # cdiv(5000, 16)
    assert eng.request_blocks(p, 100_000) == (1536, 1536, 1536, 6250)


def test_nixl_moves_the_current_chunk_only():
    t = transfer("llama-4-scout", 20_000, tp=8, settings=S)
    groups = t.plan.groups
    # ChunkedLocalAttentionManager.get_num_skipped_tokens(20,000) = 20,000 // 8,192 x 8,192 = 16,384 tokens,
    # 1,024 null blocks of cdiv(20,000, 16) = 1,250
    assert [g.units for g in groups] == [1250 - 1024] * 3 + [1250]
    assert sum(g.bytes for g in groups) == (3 * 226 + 1250) * 98_304
    # what the request holds in the pool: every group's min(cdiv(20,000, 16), cap) = 1,250 blocks
    assert t.reserved_bytes == 4 * 1250 * 98_304
    assert not any("end a chunk" in n for n in t.plan.notes)
    # a prompt of one whole chunk: 8,192 // 8,192 x 8,192 tokens skipped, no chunked block moves, and the note says
    # the decoder's recompute of token 8,191 then finds its chunk null
    whole = transfer("llama-4-scout", 8192, tp=8, settings=S)
    assert [g.units for g in whole.plan.groups] == [0, 0, 0, 8192 // 16]
    assert any("8,192 tokens end a chunk of 8,192" in n for n in whole.plan.notes)


def test_the_capacity_table_names_the_chunked_groups(cli):
    r = cli("capacity", "llama-4-scout", "--tp", "8", "--context", "128k", "--kv-memory", "60GiB",
            "--max-num-batched-tokens", "8192")
    assert r.code == 0, r.err
    assert "0 chunk 8192" in r.out and "3 full" in r.out
    assert "Chunked groups reserve 432.00 MiB" in r.out  # 3 x 1,536 blocks x 98,304 B
    assert "Fits: 51 whole request(s)" in r.out


def test_without_the_hybrid_manager_every_layer_is_full_attention():
    # --disable-hybrid-kv-cache-manager: the chunked layers become FullAttentionSpec, one group of all 48 layers;
    # a block 48 x 8,192 B = 393,216 B, a request cdiv(131,072, 16) = 8,192 of them: 60 GiB holds 163,840 blocks
    off = capacity("llama-4-scout", 128 * K, settings=V.Settings(max_num_batched_tokens=8192,
                                                                 hybrid_kv_cache_manager=False),
                   parallel=Parallel(tp=8), kv_memory=60 * GIB)
    p = off.plan
    assert [g.kind_name for g in p.groups] == ["full"] and len(p.groups[0].layers) == 48
    assert p.bytes_per_block == 48 * 8192 == 393_216 and p.blocks_per_request == 8192
    assert off.num_blocks == 60 * GIB // 393_216 == 163_840
    assert "Maximum concurrency for 131,072 tokens per request: 20.00x" in off.log_line  # 163,840 / 8,192
    assert off.requests_per_replica == (163_840 - 1) // 8192 == 19
    assert any("Hybrid KV cache manager is disabled" in n for n in p.notes)
    # a model without local layers plans as before, and DeepSeek V4 is refused in one line naming the setting
    llama = plan("llama-3.1-8b", 8192, settings=V.Settings(hybrid_kv_cache_manager=False))
    assert llama.blocks_per_request == 8192 // 16 and not any("Hybrid KV" in n for n in llama.notes)
    import pytest

    from kvcalc.errors import KvcalcError
    with pytest.raises(KvcalcError, match="DeepSeek V4 on vLLM 0.33.0 only with the hybrid KV-cache manager on .* does not model V4 without it") as e:
        plan("deepseek-v4-flash", 8192, precision="fp8", settings=V.Settings(hybrid_kv_cache_manager=False))
    assert e.value.param == "hybrid_kv_cache_manager"


_CONFIG = ("INFO 11-30 12:00:00 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
           "model='meta-llama/Llama-4-Scout-17B-16E-Instruct', dtype=torch.bfloat16, max_seq_len=131072, "
           "tensor_parallel_size=8, pipeline_parallel_size=1, kv_cache_dtype=auto, enable_prefix_caching=True\n"
           "INFO 11-30 12:00:00 [scheduler.py:311] Chunked prefill is enabled with max_num_batched_tokens=8192.\n")
_WARNING = ("WARNING 11-30 12:00:40 [kv_cache_planning.py:870] Hybrid KV cache manager is disabled for this hybrid "
            "model, This means we do not enable any optimizations for saving KV cache memory (e.g., dropping the KV "
            "cache outside the sliding window). The compute of layers like sliding window is still saved.\n")
# 60.00 GiB over 393,216 B blocks = 163,840 blocks; / 8,192 a request = 20.00x; x 131,072 = 2,621,440 tokens
_OFF_LINES = ("INFO 11-30 12:00:41 [gpu_worker.py:773] Available KV cache memory: 60.00 GiB\n"
              "INFO 11-30 12:00:41 [kv_cache_utils.py:1149] GPU KV cache size: 2,621,440 tokens, Maximum "
              "concurrency for 131,072 tokens per request: 20.00x\n")


def test_check_log_reads_the_hybrid_manager_warning(cli, tmp_path):
    log = tmp_path / "scout-off.log"
    log.write_text(_CONFIG + _WARNING + _OFF_LINES)
    r = cli("check-log", str(log), "-m", "llama-4-scout", "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    assert out["settings"]["hybrid_kv_cache_manager"] is False and out["verdict"] == "agrees"
    text = cli("check-log", str(log), "-m", "llama-4-scout").out
    assert "the hybrid KV-cache manager was off (line 3" in " ".join(text.split())
    # the same figures without the warning are not what the hybrid manager plans (51.20x, 655,360 blocks)
    bare = tmp_path / "scout-bare.log"
    bare.write_text(_CONFIG + _OFF_LINES)
    r = cli("check-log", str(bare), "-m", "llama-4-scout")
    assert r.code == 1 and "DIFFERS" in r.out
