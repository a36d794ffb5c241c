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
