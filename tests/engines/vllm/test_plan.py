"""The vLLM 0.33 pool plan against hand arithmetic and published vLLM log lines.

Every expected number is written out from vLLM's formulas (cited in kvcalc/engines/vllm.py):
page = entries per block x bytes per entry, rounded up to 576 B for DeepSeek V4's fp8_ds_mla pages;
full attention needs cdiv(L, block) blocks, a sliding window cdiv(min(W - 1 + in_flight, L), block) + 1;
in_flight = 2 x max_num_batched_tokens with async scheduling; bytes per block = the widest group's pages.
"""

import pytest

from kvcalc.engines import vllm as V
from kvcalc.errors import KvcalcError
from kvcalc.plan import plan

M = 1 << 20


def _cdiv(a, b):
    return -(-a // b)


def _pages(p):
    return {(pg.component, pg.page_bytes, pg.real_page_bytes) for g in p.groups for pg in g.pages}


def test_v4_pro_fp8_pages_as_vllm_pads_them():
    p = plan("deepseek-v4-pro", M, precision="fp8", settings=V.Settings(max_num_batched_tokens=8192))
    assert p.layout.value == "block-outermost"
    assert _pages(p) == {
        ("window", 65 * 576, 64 * 584),  # 64-token SWA block of 584 B entries: 37,376 -> 37,440
        ("c4_entries", 65 * 576, (256 // 4) * 584),  # 256-token block, 64 entries
        ("c128_entries", 3 * 576, (256 // 128) * 584),  # 2 entries: 1,168 -> 1,728
        ("c4_indexer", 15 * 576, 64 * 132),  # vLLM's default fp8 indexer slot: 8,448 -> 8,640
        ("c4_state", 57 * 576, 4 * (2 * 2 * 512 * 4)),  # 4 slots of 2*coff*512 fp32: 32,768 -> 32,832
        ("c4_indexer_state", 15 * 576, 4 * (2 * 2 * 128 * 4)),  # 8,192 -> 8,640
        ("c128_state", 57 * 576, 8 * (2 * 1 * 512 * 4)),  # 8 slots of 2*1*512 fp32: 32,768 -> 32,832
    }
    assert (37440, 8640, 1728) == (65 * 576, 15 * 576, 3 * 576)  # the three size buckets
    # packed groups: windows split 31 + 30 (approximate gcd 31), one MLA group, two state groups
    sizes = sorted(len(g.members) for g in p.groups)
    assert sizes == [30, 31, 31, 60, 91]
    assert p.bytes_per_block == 30 * 37440 + 31 * 1728 + 30 * 8640 == 1_435_968
    in_flight = 2 * 8192
    blocks = (_cdiv(M, 256)  # compressed entries and indexer
              + 2 * (_cdiv(128 - 1 + in_flight, 64) + 1)  # two window groups
              + (_cdiv(8 - 1 + in_flight, 4) + 1)  # c4 compressor states (window 8, block 4)
              + (_cdiv(128 - 1 + in_flight, 8) + 1))  # c128 compressor states (window 128, block 8)
    assert blocks == 4096 + 2 * 259 + 4099 + 2065 == 10_778
    assert p.blocks_per_request == blocks
    assert p.per_request_bytes == 10_778 * 1_435_968 == 15_476_863_104
    assert V.format_gib(p.per_request_bytes) == "14.41"
    # the window and state groups reserve more than the compressed cache itself
    full = sum(g.blocks_per_request for g in p.groups if g.kind == "full")
    assert sum(g.blocks_per_request for g in p.groups if g.kind != "full") > full


def test_async_scheduling_doubles_the_tokens_in_flight():
    on = plan("deepseek-v4-pro", M, precision="fp8", settings=V.Settings(max_num_batched_tokens=8192))
    off = plan("deepseek-v4-pro", M, precision="fp8",
               settings=V.Settings(max_num_batched_tokens=8192, async_scheduling=False))
    assert off.settings_json["max_in_flight_tokens"] == 8192 and on.settings_json["max_in_flight_tokens"] == 16384
    assert off.blocks_per_request == (4096 + 2 * (_cdiv(127 + 8192, 64) + 1) + (_cdiv(7 + 8192, 4) + 1)
                                      + (_cdiv(127 + 8192, 8) + 1)) == 7450
    assert off.bytes_per_block == on.bytes_per_block


def test_v4_flash_packs_into_one_million_byte_blocks():
    p = plan("deepseek-v4-flash", M, precision="fp8", settings=V.Settings(max_num_batched_tokens=8192))
    # 21 c4a + 20 c128a main caches and 21 indexers in one group: the widest
    assert p.bytes_per_block == 21 * 37440 + 20 * 1728 + 21 * 8640 == 1_002_240
    assert sorted(len(g.members) for g in p.groups) == [20, 21, 22, 42, 62]  # 43 windows split 22 + 21


def test_v4_mxfp4_indexer_uses_68_byte_slots():
    p = plan("deepseek-v4-pro", M, precision="fp8", settings=V.Settings(indexer_dtype="mxfp4"))
    assert ("c4_indexer", 8 * 576, 64 * 68) in _pages(p)  # 4,352 -> 4,608
    assert not any("fp8_indexer" in n for n in p.notes)


def test_v32_one_uniform_group_of_122_layers():
    p = plan("deepseek-v3.2", 163_840, precision="fp8")
    (g,) = p.groups
    assert len(g.members) == 122 and g.block_size == 64
    assert p.bytes_per_block == 61 * 64 * 656 + 61 * 64 * 132 == 3_076_352
    assert p.blocks_per_request == 163_840 // 64 == 2560
    assert p.per_request_bytes == p.analytic_bytes  # no window, no padding: paging costs nothing at 160k
    bf16 = plan("deepseek-v3.2", 163_840, precision="bf16")
    # the indexer stays fp8 (132 B) in vLLM whatever the precision: the plan says so
    assert bf16.bytes_per_block == 61 * 64 * 1152 + 61 * 64 * 132
    assert any("fp8_indexer" in n for n in bf16.notes)


def test_llama_one_group_16_token_blocks():
    p = plan("llama-3.1-8b", 131_072, precision="bf16")
    assert p.bytes_per_block == 32 * 16 * 8 * (128 + 128) * 2 == 2 * M
    assert p.blocks_per_request == 131_072 // 16 == 8192
    assert V.format_gib(p.per_request_bytes) == "16.0"  # vLLM's format_gib: str(round(x, 2))
    half = plan("llama-3.1-8b", 131_072, precision="bf16", tp=2)  # 4 KV heads per rank
    assert half.bytes_per_block == 32 * 16 * 4 * 256 * 2
    rep = plan("llama-3.1-8b", 131_072, precision="bf16", tp=16)  # 8 heads, 16 ranks: one head each
    assert rep.bytes_per_block == 32 * 16 * 1 * 256 * 2
    with pytest.raises(KvcalcError, match=r"^tp: 3 ranks cannot split the 8 KV heads"):
        plan("llama-3.1-8b", 131_072, tp=3)


def test_gpt_oss_two_groups_window_admission():
    p = plan("gpt-oss-120b", 131_072, settings=V.Settings(max_num_batched_tokens=8192))
    assert sorted((g.kind_name, len(g.members)) for g in p.groups) == [("full", 18), ("window 128", 18)]
    assert p.bytes_per_block == 18 * 16 * 8 * 128 * 2 == 589_824
    window = _cdiv(min(128 - 1 + 16_384, 131_072), 16) + 1
    assert window == 1033
    assert p.blocks_per_request == 8192 + window == 9225


def test_gemma3_groups_padded_to_equal_layer_counts():
    p = plan("gemma-3-27b", 131_072, settings=V.Settings(max_num_batched_tokens=8192))
    # 52 local + 10 global layers; group size 10 (52 >= 1.5 x 10): 52 local layers in 6 groups of 9,9,9,9,8,8
    assert sorted(len(g.members) for g in p.groups) == [8, 8, 9, 9, 9, 9, 10]
    assert p.padding_layers == 6 * 10 - 52 == 8
    assert p.bytes_per_block == 10 * 16 * 16 * 256 * 2 == 1_310_720
    local = _cdiv(1024 - 1 + 16_384, 16) + 1
    assert p.blocks_per_request == 8192 + 6 * local == 14_726


def test_published_log_lines():
    # vLLM PR #12569 (V1, Jan 2025): Llama-3.1-70B w8a8, --max-model-len 2048:
    # "# GPU blocks: 1381" and "Maximum concurrency for 2048 tokens per request: 10.79x"
    p = plan("llama-3.1-70b", 2048)
    assert p.blocks_per_request == 2048 // 16
    assert f"{p.max_concurrency(1381):.2f}" == "10.79"
    # vLLM PR #13596 (the log line's introduction): "GPU KV cache size: 2,042,016 tokens" with
    # "Maximum concurrency for 2,048 tokens per request: 997.08x" -> 2,042,016 / 16 = 127,626 blocks
    p = plan("llama-3.1-8b", 2048)
    assert f"{p.cache_tokens(127_626):,}" == "2,042,016"
    assert f"{p.max_concurrency(127_626):.2f}" == "997.08"


def test_block_size_option_is_checked_against_the_backends():
    assert plan("llama-3.1-8b", 4096, settings=V.Settings(block_size=32)).bytes_per_block == 32 * 32 * 8 * 256 * 2
    with pytest.raises(KvcalcError, match=r"^block_size: .* multiple of 16"):
        plan("llama-3.1-8b", 4096, settings=V.Settings(block_size=24))
    with pytest.raises(KvcalcError, match=r"^block_size: .* at the 256-token block only"):
        plan("deepseek-v4-pro", 4096, settings=V.Settings(block_size=64))
    # V3's latent page at 128 tokens: 128 x 576 x 2 B (bf16) per layer, 61 layers
    assert plan("deepseek-v3", 4096, settings=V.Settings(block_size=128)).bytes_per_block == 128 * 576 * 2 * 61
    # dense MLA takes any multiple of 16: FLASH_ATTN_MLA (MultipleOf(16)) on Hopper in bf16; in fp8 FlashMLA's [64]
    # refuses 96 and vLLM falls back to TRITON_MLA (MultipleOf(16)); 24 no MLA backend takes
    assert plan("deepseek-v3", 4096, settings=V.Settings(block_size=96)).bytes_per_block == 96 * 576 * 2 * 61
    assert plan("deepseek-v3", 4096, precision="fp8", settings=V.Settings(block_size=96)).bytes_per_block == \
        96 * 576 * 61
    with pytest.raises(KvcalcError, match=r"^block_size: .* multiple of 16"):
        plan("deepseek-v3", 4096, settings=V.Settings(block_size=24))
    # DSA keeps the indexer's [64]: 96 is refused
    with pytest.raises(KvcalcError, match=r"^block_size: .* need a multiple of 64 tokens"):
        plan("deepseek-v3.2", 4096, settings=V.Settings(block_size=96))


def test_exact_engine_is_the_estimate():
    from kvcalc.estimate import estimate

    from kvcalc.capacity import Parallel
    from kvcalc.engines import get_engine

    p = plan("deepseek-v4-pro", M, precision="fp8", engine="exact")
    f = p.figures()  # capacity's JSON keeps the shape every engine reports: a one-byte "block", none kept back
    assert (f.layout, f.unit_bytes, f.null_units) == ("exact", 1, 0)
    assert p.per_request_bytes == int(estimate("deepseek-v4-pro", M, precision="fp8").per_sequence[0]) == 5_299_115_008
    eng = get_engine("exact")
    assert eng.fit([p], 3 * 5_299_115_008 + 5, p.settings, Parallel()).requests_per_replica == 3


def test_tensors_tile_the_block():
    p = plan("deepseek-v4-pro", 4096, precision="fp8")
    tensors = p.tensors(num_blocks=3)
    for g in p.groups:  # block-outermost: each group's pages sit side by side within one block
        ts = [t for t in tensors if t.group == g.index]
        assert sum(len(t.layers) * t.page_bytes for t in ts) == g.page_bytes <= p.bytes_per_block
        assert all(t.block_stride == p.bytes_per_block for t in ts)
    q = plan("llama-3.1-8b", 4096).tensors(num_blocks=5)
    (t,) = q
    assert (t.shape, t.layer_stride, t.block_stride) == ((32, 5, 65536), 5 * 65536, 65536)


@pytest.mark.parametrize("engine", ["exact", "vllm"])
def test_blocks_at_the_plans_context_is_the_plans_count(engine):
    # the reverse search re-asks the plan at other contexts: it must count the same caches (MTP, tp)
    for kw in ({"mtp": True}, {"tp": 2}):
        model = "deepseek-v4-pro" if "mtp" in kw else "llama-3.1-8b"
        p = plan(model, 65_536, engine=engine, **kw)
        assert p.units_at_context(65_536) == p.units_per_request
    # V4-Pro's MTP layer is a 128-token window of 584 B entries (fp8): exact bytes grow by 128 x 584
    with_mtp = plan("deepseek-v4-pro", M, precision="fp8", engine="exact", mtp=True)
    assert with_mtp.units_at_context(M) == 5_299_115_008 + 128 * 584


def _on(arch, model, precision=None, context=4096):
    return plan(model, context, precision=precision, settings=V.ENGINE.settings({"arch": arch}))


def test_the_mla_backend_and_its_block_follow_the_gpu():
    # platforms/cuda.py _get_backend_priorities, the first valid backend and its preferred block
    # (backend.py get_preferred_block_size: 16 where it accepts 16, else its smallest):
    # Hopper: FLASH_ATTN_MLA (MultipleOf(16), bf16 only) -> 16; an fp8 cache FLASHMLA [64] -> 64
    assert _on("sm90", "deepseek-v3").bytes_per_block == 16 * 576 * 2 * 61 == 1_124_352
    assert _on("sm90", "deepseek-v3", "fp8").bytes_per_block == 64 * 576 * 61
    # Blackwell: FLASHINFER_MLA [32, 64] -> 32; A100, RTX 5090, ROCm: TRITON_MLA (MultipleOf(16)) -> 16
    assert _on("sm100", "deepseek-v3").bytes_per_block == 32 * 576 * 2 * 61
    assert {a: _on(a, "deepseek-v3").settings_json["block_size"] for a in ("sm80", "sm120", "gfx942")} == \
        {"sm80": 16, "sm120": 16, "gfx942": 16}
    # no GPU named: Hopper
    assert plan("deepseek-v3", 4096).settings_json["block_size"] == 16


def test_dsa_rows_and_refusals_follow_the_gpu():
    # V3.2: latent + 132 B of fp8 indexer keys, 61 layers, the indexer's [64] block on CUDA
    assert _on("sm90", "deepseek-v3.2", "fp8").bytes_per_block == 64 * (656 + 132) * 61  # FlashMLA: fp8_ds_mla
    # Blackwell's FLASHINFER_MLA_SPARSE keeps a plain fp8 row (576 B); ROCm's AITER sparse backend too, at 16
    assert _on("sm100", "deepseek-v3.2", "fp8").bytes_per_block == 64 * (576 + 132) * 61 == 2_764_032
    assert _on("gfx942", "deepseek-v3.2", "fp8").bytes_per_block == 16 * (576 + 132) * 61 == 691_008
    # RTX 5090: FLASHINFER_MLA_SPARSE_SM120 stores fp8_ds_mla, its auto too; bf16 refused; A100: no sparse backend
    assert _on("sm120", "deepseek-v3.2").precision == "fp8"
    with pytest.raises(KvcalcError, match=r"refuses a bf16 cache"):
        _on("sm120", "deepseek-v3.2", "bf16")
    with pytest.raises(KvcalcError, match=r"no sparse MLA backend for DeepSeek DSA on sm80"):
        _on("sm80", "deepseek-v3.2")
    # DeepSeek V4: auto is its fp8_ds_mla layout on every GPU (models/deepseek_v4/attention.py)
    assert plan("deepseek-v4-flash", 4096).precision == "fp8"
    with pytest.raises(KvcalcError, match=r"V4 kernels need compute capability 9, 10 or 12"):
        _on("sm89", "deepseek-v4-flash")


def test_a_window_page_that_does_not_divide_the_full_page_is_padded(cli, tmp_path):
    """unify_kv_cache_spec_page_size: a non-MLA attention page that does not divide the largest is padded to it.
    Sliding layers of 3 KV heads x 128 x (K, V) x 2 B = 1,536 B a token (24,576 B a 16-token page) beside full
    layers of 8 heads: 4,096 B a token, 65,536 B a page; 65,536 / 24,576 is no whole number."""
    cfg = tmp_path / "s4.yaml"
    cfg.write_text("""kvcalc: 1
name: s4
precisions: {bf16: {kv: bf16}}
default_precision: bf16
max_context: 131072
architecture: LlamaForCausalLM
components:
  g: {cache: full_attention, kv_heads: 8, head_dim: 128}
  l: {cache: sliding_attention, kv_heads: 3, head_dim: 128, window: 1024}
layer_kinds: {global: [g], local: [l]}
layers: [{pattern: [local, global], layers: 32}]
""")
    r = cli("capacity", str(cfg), "--gpu", "h200", "-c", "65536", "--kv-memory", "20GiB",
            "--max-num-batched-tokens", "8192", "--json")
    assert r.code == 0, r.err
    j = r.json()
    # a block holds 16 layers' pages of 65,536 B: 1,048,576 B; 20 GiB / 1,048,576 = 20,480 blocks. A request: the
    # window group cdiv(min(1,023 + 2 x 8,192, 65,536), 16) + 1 = 1,089 blocks, the full group 65,536 / 16 = 4,096
    assert j["bytes_per_block"] == 16 * 65_536 and j["num_blocks"] == 20_480
    assert [g["blocks_per_request"] for g in j["pages"]] == [1_089, 4_096]
    assert j["requests_per_replica"] == (20_480 - 1) // 5_185 == 3
    assert j["engine_log_line"].startswith("GPU KV cache size: 258,857 tokens")  # int(20,480 / 5,185 x 65,536)
    assert any("pads each l page from 24,576 to 65,536 B" in n for n in j["notes"])
