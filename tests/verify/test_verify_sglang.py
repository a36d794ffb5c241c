"""kvcalc verify --engine sglang: SGLang 0.5.23's token pools for exactly a batch, allocated as SGLang allocates
them (mem_cache/memory_pool.py), filled, counted in memory and read back.

Expected figures are hand arithmetic, written out in each test: a pool of T tokens on pages of P has T + P rows
per layer (the padding page, the first page: SGLang's allocators hand out pages from 1)."""

import dataclasses

import pytest

from kvcalc.verify.faults import planted

from kvcalc.errors import KvcalcError
from kvcalc.plan import plan

torch = pytest.importorskip("torch")


def _verify(model, ctx, prec=None, **kw):
    from kvcalc.verify import verify

    return verify(plan(model, ctx, precision=prec, engine="sglang"), device="cpu", **kw)


def _failed(out):
    return [c.name for c in out.checks if not c.passed]


def test_llama_allocation_by_hand():
    out = _verify("llama-3.1-8b", 64, batch=2, fill="none")
    # 2 requests x 64 tokens, page 1: max_total_num_tokens 128, + 1 padding row = 129 rows; 8 KV heads of 128
    # in bf16: K per layer 129 x 8 x 128 x 2 B = 264,192 B, V the same, 32 layers
    k_layer = 129 * 8 * 128 * 2
    assert k_layer == 264_192
    assert out.planned_bytes == out.allocated_bytes == 32 * 2 * k_layer == 16_908_288
    assert out.predicted_bytes == 2 * 64 * 32 * 8 * 128 * 2 * 2 == 16_777_216  # exact: no padding row
    assert [(g.pool["name"], g.blocks, g.planned_bytes, g.pool["shape"]) for g in out.groups] == [
        ("KV Cache K", 128, 32 * k_layer, [129, 8, 128]), ("KV Cache V", 128, 32 * k_layer, [129, 8, 128])]
    # K and V of one layer are the halves of one (2, 129, 8, 128) tensor, as SGLang allocates matching shapes
    assert {g.pool["tensors"] for g in out.groups} == {"kv_pair"}
    assert [g.pool["padding_page_bytes"] for g in out.groups] == [32 * 8 * 128 * 2] * 2
    assert out.token_pools["max_total_num_tokens"] == 128 and out.token_pools["page_size"] == 1
    assert out.written_bytes == 0 and out.verdict == "pass", _failed(out)
    assert out.planned_blocks is None and out.bytes_per_block is None  # no shared block pool


def test_llama_sample_fill_by_hand():
    out = _verify("llama-3.1-8b", 64, batch=2, fill="sample")
    # the first and last layer of each pool: 2 layers x 2 requests x 64 rows x (8 x 128 x 2 B = 2,048 B)
    assert [g.written_bytes for g in out.groups] == [2 * 2 * 64 * 2048] * 2 == [524_288] * 2
    assert out.expected_written_bytes == out.written_bytes == 1_048_576
    assert [g.pool["padding_page_written_bytes"] for g in out.groups] == [0, 0] and out.stray_written_bytes == 0
    assert out.readback and all(c.passed for c in out.readback)
    assert out.verdict == "pass", _failed(out)


def test_llama_fp8_rows_are_stored_as_uint8():
    out = _verify("llama-3.1-8b", 64, "fp8", batch=1, fill="sample")
    # fp8_e4m3: 65 rows x 8 x 128 x 1 B per layer; the first and last layer written: 2 x 64 x 1,024 B per pool
    assert out.planned_bytes == out.allocated_bytes == 2 * 32 * 65 * 8 * 128
    assert [g.written_bytes for g in out.groups] == [2 * 64 * 1024] * 2
    assert {(g.pool["dtype"], g.pool["store_dtype"]) for g in out.groups} == {("float8_e4m3fn", "uint8")}
    assert out.verdict == "pass", _failed(out)


def test_v32_fp8_sample_by_hand():
    pytest.importorskip("triton")  # kvcalc_kernels' reference quantiser
    out = _verify("deepseek-v3.2", 128, "fp8", batch=2, fill="sample")
    g = {x.pool["name"]: x for x in out.groups}
    # DSA pages of 64: 2 x 128 = 256 tokens, 256 + 64 rows of the 656 B FlashMLA row (512 fp8 + 4 fp32 scales
    # + 64 bf16 RoPE) per layer; indexer keys (256 + 64 + 1) // 64 = 5 pages of 64 x 132 B per layer; 61 layers
    assert g["KV Cache"].planned_bytes == 320 * 656 * 61 == 12_805_120
    assert g["Indexer keys"].planned_bytes == 5 * 64 * 132 * 61 == 2_576_640
    assert out.allocated_bytes == out.planned_bytes == 12_805_120 + 2_576_640
    assert g["KV Cache"].pool["shape"] == [320, 1, 656] and g["Indexer keys"].pool["shape"] == [5, 8448]
    # sample: 2 layers x 2 requests x 128 tokens x 656 B, and x 132 B of indexer keys
    assert g["KV Cache"].written_bytes == 2 * 2 * 128 * 656 == 335_872
    assert g["Indexer keys"].written_bytes == 2 * 2 * 128 * 132 == 67_584
    assert out.fill_info.formats == {"KV Cache": "fp8_ds_mla_fp32log2", "Indexer keys": "fp8_indexer_v32_fp32log2"}
    assert out.readback and all(c.passed for c in out.readback)
    assert out.verdict == "pass", _failed(out)


def test_gpt_oss_split_swa_pool_by_hand():
    out = _verify("gpt-oss-20b", 256, batch=1, fill="full")
    g = {x.pool["name"]: x for x in out.groups}
    # full pool 256 tokens (+1 row); SWA pool int(256 x 0.8) = 204 tokens (+1 row); 8 KV heads of 64 in bf16
    # (1,024 B a row), 12 layers each
    assert g["Full KV Cache K"].planned_bytes == 257 * 1024 * 12 == 3_158_016
    assert g["SWA KV Cache K"].planned_bytes == 205 * 1024 * 12 == 2_519_040
    assert g["SWA KV Cache K"].kind == "window 127"  # gpt-oss attends window - 1 tokens back
    # every layer written: all 256 tokens in the full pool, the last 127 in the SWA pool
    assert g["Full KV Cache V"].written_bytes == 256 * 1024 * 12
    assert g["SWA KV Cache V"].written_bytes == 127 * 1024 * 12 == 1_560_576
    assert out.verdict == "pass", _failed(out)


def test_mamba_state_pools_by_hand():
    out = _verify("qwen3.5-9b", 64, batch=1, fill="sample")
    g = {x.pool["name"]: x for x in out.groups}
    # 5 state slots per running request (3 + 2 radix-tracking) + 1 padding slot = 6; 24 linear-attention layers;
    # conv (16 x 128 x 2 + 32 x 128) x (4 - 1) bf16 = 49,152 B, ssm 32 x 128 x 128 fp32 = 2,097,152 B per slot
    assert g["Mamba conv state"].planned_bytes == 6 * 49_152 * 24
    assert g["Mamba ssm state"].planned_bytes == 6 * 2_097_152 * 24
    assert g["Mamba ssm state"].pool["tensors"] == "stacked"  # one (layers, slots + 1, ...) tensor
    assert g["Mamba conv state"].blocks == 5 and out.token_pools["max_mamba_cache_size"] == 5
    # one slot per request in the first and last state layer
    assert g["Mamba ssm state"].written_bytes == 2 * 2_097_152 and g["Mamba conv state"].written_bytes == 2 * 49_152
    # 8 full-attention layers: 65 rows x 4 KV heads x 256 x 2 B
    assert g["KV Cache K"].planned_bytes == 65 * 4 * 256 * 2 * 8
    assert out.verdict == "pass", _failed(out)


def test_the_mamba_strategy_sets_the_state_slots_verify_allocates():
    """--disable-overlap-schedule: auto resolves to no_buffer (overrides.py _mamba_radix_cache_resolution), 3 state
    slots per running request (kv_cache_configurator.py _calculate_mamba_ratio); extra_buffer kept without the
    overlap scheduler tracks 1 slot, 3 + 1 (allocation_sizing.py get_mamba_tracking_slots)."""
    from kvcalc.engines import get_engine
    from kvcalc.verify import verify

    for settings, slots in (({"disable_overlap_schedule": True}, 3),
                            ({"disable_overlap_schedule": True, "mamba_radix_cache_strategy": "extra_buffer"}, 4)):
        p = plan("qwen3.5-9b", 64, engine="sglang", settings=get_engine("sglang").settings(settings))
        out = verify(p, device="cpu", batch=1, fill="sample")
        g = {x.pool["name"]: x for x in out.groups}
        # slots + 1 padding slot, 24 linear-attention layers, 49,152 B of conv state a slot
        assert g["Mamba conv state"].planned_bytes == (slots + 1) * 49_152 * 24
        assert out.token_pools["max_mamba_cache_size"] == slots and out.verdict == "pass", _failed(out)


def test_a_planted_extra_row_fails():
    with planted(extra_pages=1):
        out = _verify("llama-3.1-8b", 64, batch=2, fill="sample")
    # one row more in K (and so in V, its other half): 2 x 32 layers x 2,048 B
    assert out.allocated_bytes - out.planned_bytes == 2 * 32 * 2048
    assert out.verdict == "fail"
    assert _failed(out) == ["allocated_bytes == planned_bytes",
                            "every pool's tensors hold its planned bytes"]


def test_a_planted_write_into_the_padding_page_fails():
    with planted(stray_write=True):
        out = _verify("llama-3.1-8b", 64, batch=2, fill="sample")
    assert out.verdict == "fail" and _failed(out) == ["the padding page still holds the sentinel"]
    assert out.stray_written_bytes == 1


def test_rows_written_from_slot_0_are_caught(monkeypatch):
    """A writer that forgets the padding page (request 0 from slot 0) writes the same number of bytes: the
    padding check catches it."""
    from kvcalc.engines.sglang.buffers import Buffer

    monkeypatch.setattr(Buffer, "first_slot", lambda self, r: self.page * r * -(-self.rows_per_request // self.page))
    out = _verify("llama-3.1-8b", 64, batch=2, fill="sample")
    assert out.written_bytes == out.expected_written_bytes
    assert out.verdict == "fail" and "the padding page still holds the sentinel" in _failed(out)


def test_a_pool_planned_without_its_padding_page_is_caught(monkeypatch):
    from kvcalc.engines.sglang import buffers as B

    real = B.token_pool_buffers

    def short(p, lay, batch, model):
        pools = real(p, lay, batch, model)
        bufs = tuple(dataclasses.replace(b, shape=(b.tokens, *b.shape[1:])) for b in pools.buffers)
        return dataclasses.replace(pools, buffers=bufs)

    monkeypatch.setattr(B, "token_pool_buffers", short)
    out = _verify("llama-3.1-8b", 64, batch=2, fill="none")
    assert out.planned_bytes - out.allocated_bytes == 2 * 32 * 2048 and out.verdict == "fail"


def test_refusals(cli):
    from kvcalc.verify import run, verify

    with pytest.raises(KvcalcError, match="^writer: token pools are filled through the torch reference"):
        _verify("llama-3.1-8b", 64, fill="sample", writer="triton")
    with pytest.raises(KvcalcError, match="^tp: verify allocates one rank's token pools"):
        run("llama-3.1-8b", 64, engine="sglang", tp=2)
    # V4's default SWA ratio 0.1 of 1,024 tokens leaves 0 SWA tokens, under window 128 + page 256
    r = cli("verify", "deepseek-v4-flash", "--engine", "sglang", "-c", "1k", "--fill", "none")
    assert r.code == 2 and "SWA pool (0 tokens) cannot hold even one request" in r.err
    assert "--swa-full-tokens-ratio" in r.err


def test_the_result_round_trips_and_the_vllm_json_keeps_its_keys():
    from kvcalc.engines import vllm as V
    from kvcalc.verify import verify
    from kvcalc.verify.result import VerifyResult

    out = _verify("llama-3.1-8b", 64, batch=2, fill="sample")
    assert VerifyResult.from_json(out.to_json()).to_json() == out.to_json()
    assert out.to_json()["engine"] == "sglang" and "token_pools" in out.to_json()
    v = verify(plan("llama-3.1-8b", 1024, settings=V.Settings(max_num_batched_tokens=256, async_scheduling=False)))
    j = v.to_json()
    assert list(j) == ["model", "context_tokens", "precision", "engine", "engine_version", "device", "arch",
                       "fill", "writer", "batch", "complete", "predicted_bytes", "planned_bytes", "planned_blocks",
                       "bytes_per_block", "allocated_bytes", "expected_written_bytes", "written_bytes",
                       "stray_written_bytes", "measured", "seconds", "fill_bytes_per_second",
                       "device_copy_bytes_per_second", "fill_info", "groups", "readback", "tolerances", "checks",
                       "verdict", "basis"]
    assert all("pool" not in g for g in j["groups"])


def test_cli_text_and_json(cli):
    r = cli("verify", "llama-3.1-8b", "--engine", "sglang", "-c", "64", "--batch", "2")
    assert r.code == 0, r.err
    assert "SGLang 0.5.23 token pools on cpu (Hopper's kernels), page 1; fill sample, writer torch" in " ".join(r.out.split())
    assert "SGLang's padding page" in r.out and "Verdict: pass." in r.out
    r = cli("verify", "llama-3.1-8b", "--engine", "sglang", "-c", "64", "--fill", "none", "--json")
    assert r.code == 0, r.err
    assert r.json()["planned_bytes"] == 2 * 32 * 65 * 8 * 128 * 2


def test_v4_flash_pools_allocated_as_deepseek_v4_token_to_kv_pool_by_hand():
    """mem_cache/deepseek_v4_memory_pool.py on CUDA (KVLayout.V4, not unified): every pool is one uint8 or fp32
    tensor per layer; a paged pool of size S on pages of p slots has ceil((S + 256) / p) pages (the padding page
    counted at the 256-token logical page)."""
    pytest.importorskip("triton")  # kvcalc_kernels' reference quantiser
    from kvcalc.engines import get_engine
    from kvcalc.verify import verify

    sg = get_engine("sglang")
    p = plan("deepseek-v4-flash", 2048, engine="sglang", settings=sg.settings({"swa_full_tokens_ratio": 0.5}))
    out = verify(p, device="cpu", fill="sample")
    g = {x.pool["name"]: x for x in out.groups}
    # 1 request of 2,048 tokens: full 2,048; SWA int(2,048 x 0.5) = 1,024; c4 2,048 // 4 = 512 entries; c128 16;
    # the c4 indexer c128 x 32 = 512; the c4 state 1,024 // 256 SWA pages x 8 rows = 32; max_running_requests =
    # the batch, 1, so the c128 state (1 + 1) x 128 = 256 rows
    assert [(x.pool["name"], x.blocks) for x in out.groups] == [
        ("SWA KV Cache", 1024), ("c4 KV Cache", 512), ("c128 KV Cache", 16), ("c4 Indexer keys", 512),
        ("c4 compressor state", 32), ("c4 indexer compressor state", 32), ("c128 compressor state", 256)]
    # a V4 record is 448 fp8 + 64 bf16 + 8 B = 584 B; a page of p records rounded up to 576 B
    assert -(-256 * 584 // 576) * 576 == 149_760 and -(-64 * 584 // 576) * 576 == 37_440
    assert -(-2 * 584 // 576) * 576 == 1_728
    shapes = {
        "SWA KV Cache": [(1024 + 256) // 256, 149_760],  # 5 pages, all 43 layers
        "c4 KV Cache": [(512 + 256) // 64, 37_440],  # 12 pages of 64 entries, 21 c4 layers
        "c128 KV Cache": [(16 + 256) // 2, 1_728],  # 136 pages of 2 entries, 20 c128 layers
        "c4 Indexer keys": [(512 + 256) // 64, 64 * 132],  # 12 pages of 64 x (128 fp8 + 4 B scale)
        "c4 compressor state": [-(-(32 + 8 + 1) // 4) * 4, 2 * 2 * 512],  # 44 fp32 rows, overlapping windows
        "c4 indexer compressor state": [44, 2 * 2 * 128],
        "c128 compressor state": [-(-(256 + 128 + 1) // 128) * 128, 2 * 512],  # 512 rows
    }
    assert {k: x.pool["shape"] for k, x in g.items()} == shapes
    total = (5 * 149_760 * 43 + 12 * 37_440 * 21 + 136 * 1_728 * 20 + 12 * 8_448 * 21 + 44 * 2_048 * 4 * 21
             + 44 * 512 * 4 * 21 + 512 * 1_024 * 4 * 20)
    assert out.planned_bytes == out.allocated_bytes == total == 99_867_136
    # sample fill, the first and last layer of each pool: the last 128 tokens' records in the SWA cache,
    # 512 / 16 compressed entries, 512 indexer keys, one ring of each state (8 rows for c4, 128 for c128)
    assert [g[k].written_bytes for k in shapes] == [
        2 * 128 * 584, 2 * 512 * 584, 2 * 16 * 584, 2 * 512 * 132, 2 * 8 * 2048 * 4, 2 * 8 * 512 * 4,
        2 * 128 * 1024 * 4]
    assert out.stray_written_bytes == 0 and out.readback and all(c.passed for c in out.readback)
    assert out.fill_info.formats["c4 KV Cache"] == "fp8_ds_mla_v4"
    assert out.fill_info.formats["c4 Indexer keys"] == "fp8_indexer"
    assert out.verdict == "pass", _failed(out)


def _v4_flash(**kw):
    from kvcalc.engines import get_engine
    from kvcalc.verify import verify

    sg = get_engine("sglang")
    p = plan("deepseek-v4-flash", 2048, engine="sglang", settings=sg.settings({"swa_full_tokens_ratio": 0.5}))
    return verify(p, device="cpu", **kw)


def test_v4_planted_faults_fail(monkeypatch):
    with planted(extra_pages=1):
        out = _v4_flash(fill="none")
    # one page row more in every layer of the SWA cache: 43 x 149,760 B
    assert out.allocated_bytes - out.planned_bytes == 43 * 149_760 and out.verdict == "fail"
    pytest.importorskip("triton")
    with planted(stray_write=True):
        out = _v4_flash(fill="sample")
    assert out.verdict == "fail" and _failed(out) == ["the padding page still holds the sentinel"]
    # a writer that starts request 0 in page 0 writes as many bytes, into the padding page
    from kvcalc.engines.sglang.buffers import Buffer

    monkeypatch.setattr(Buffer, "first_slot", lambda self, r: 0)
    out = _v4_flash(fill="sample")
    assert out.written_bytes == out.expected_written_bytes
    assert out.verdict == "fail" and "the padding page still holds the sentinel" in _failed(out)
