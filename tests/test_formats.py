"""Entry sizes against the published layouts, each written out by hand."""

import pytest

from kvcalc.errors import KvcalcError
from kvcalc.formats import FORMATS, get_format


def test_v32_fp8_ds_mla_is_656_bytes():
    # FlashMLA: 512 fp8 NoPE + 4 fp32 scales (one per 128) + 64 bf16 RoPE
    assert FORMATS["fp8_ds_mla"].entry_bytes(576, 64) == 512 * 1 + 4 * 4 + 64 * 2 == 656


def test_v4_fp8_ds_mla_is_584_bytes():
    # vLLM flashmla_sparse.py: 448 fp8 NoPE + 64 bf16 RoPE + 7 ue8m0 scales + 1 B pad
    assert FORMATS["fp8_ds_mla_v4"].entry_bytes(512, 64) == 448 + 64 * 2 + 7 + 1 == 584


def test_indexer_formats():
    assert FORMATS["fp8_indexer"].entry_bytes(128) == 128 + 4 == 132  # fp8 + one fp32 scale
    assert FORMATS["fp4_indexer"].entry_bytes(128) == 128 // 2 + 128 // 32 == 68  # e2m1 packed + ue8m0 per 32


def test_other_published_layouts():
    # vLLM flashmla_sparse.py notes: V4.1 528 B (512 fp8 + 16 ue8m0), nvfp4_ds_mla 352 B (256 + 64 + 32)
    assert FORMATS["mxfp8_ds_mla"].entry_bytes(512, 64) == 512 + 16 == 528
    assert FORMATS["nvfp4_ds_mla"].entry_bytes(576, 64) == 256 + 64 + 32 == 352


def test_plain_dtypes():
    assert FORMATS["bf16"].entry_bytes(576, 64) == 1152
    assert FORMATS["bf16"].entry_bytes(512, 64) == 1024
    assert FORMATS["fp32"].entry_bytes(512) == 2048
    assert FORMATS["fp8_e4m3"].entry_bytes(128) == 128


def test_group_size_must_divide():
    with pytest.raises(KvcalcError, match="groups of 64"):
        FORMATS["fp8_ds_mla_v4"].entry_bytes(500, 64)


def test_bad_dims():
    with pytest.raises(KvcalcError, match="dim must be positive"):
        FORMATS["bf16"].entry_bytes(0)
    with pytest.raises(KvcalcError, match="rope_dim"):
        FORMATS["fp8_ds_mla_v4"].entry_bytes(64, 128)


def test_unknown_format_lists_known():
    with pytest.raises(KvcalcError, match="fp8_ds_mla_v4"):
        get_format("fp7")


def test_docs_format_table_agrees_with_the_core():
    # docs/config-format.md repeats the entry sizes for readers: every "N wide ... = B B" example must be
    # what the core computes (the core is the single source)
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "config-format.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9_]+)`[^|]*\|[^|]*\| ([^|]*) \|$", doc, re.M)
    checked = 0
    for name, example in rows:
        m = re.search(r"(\d+) wide(?: \((\d+) RoPE\))? = ([\d,]+) B", example)
        if name in FORMATS and m:
            dim, rope, size = int(m.group(1)), int(m.group(2) or 0), int(m.group(3).replace(",", ""))
            assert FORMATS[name].entry_bytes(dim, rope) == size, (name, example)
            checked += 1
    assert checked >= 6


def test_record_layouts_by_hand():
    # offsets written out from the published layouts (vLLM flashmla_sparse.py docstring, FlashMLA README)
    v4 = FORMATS["fp8_ds_mla_v4"].layout(512, 64)
    assert v4.regions() == [("quant", 0, 448), ("rope", 448, 576), ("scales", 576, 583), ("pad", 583, 584)]
    assert (v4.split_pages, v4.data_part_bytes, v4.scale_part_bytes) == (True, 576, 8)
    v32 = FORMATS["fp8_ds_mla"].layout(576, 64)
    assert v32.regions() == [("quant", 0, 512), ("scales", 512, 528), ("rope", 528, 656)]
    assert not v32.split_pages
    idx = FORMATS["fp4_indexer"].layout(128)
    assert idx.regions() == [("quant", 0, 64), ("scales", 64, 68)] and idx.split_pages


def test_per_token_head_formats_by_hand():
    """vLLM 0.33's per-token-head KV dtypes (Triton backend customize_spec): per head and K/V side, the data
    plus one fp32 scale. A 128-wide head: int8 128 + 4 = 132 B, int4 64 + 4 = 68 B, fp8 128 + 4 = 132 B."""
    from kvcalc.config import parse_model
    from kvcalc.estimate import estimate
    from kvcalc.formats import FORMATS

    assert FORMATS["int8_per_token_head"].entry_bytes(128) == 132
    assert FORMATS["int4_per_token_head"].entry_bytes(128) == 68
    assert FORMATS["fp8_per_token_head"].entry_bytes(64) == 68
    lay = FORMATS["int4_per_token_head"].layout(128)
    assert (lay.quant_offset, lay.quant_bytes, lay.scale_offset, lay.num_scales) == (0, 64, 64, 1)
    cfg = {"kvcalc": 1, "name": "g", "default_precision": "int8",
           "precisions": {"int8": {"kv": "int8_per_token_head"}, "int4": {"kv": "int4_per_token_head"}},
           "components": {"kv": {"cache": "full_attention", "kv_heads": 8, "head_dim": 128}},
           "layer_kinds": {"g": ["kv"]}, "layers": [{"pattern": ["g"], "layers": 32}]}
    m = parse_model(cfg, "g.yaml")
    # 32 layers x 8 heads x 2 sides x 132 B per token
    assert int(estimate(m, [1000], precision="int8").per_sequence[0]) == 1000 * 32 * 8 * 2 * 132
    assert int(estimate(m, [1000], precision="int4").per_sequence[0]) == 1000 * 32 * 8 * 2 * 68


def test_lmdeploy_int_kv_with_zero_points():
    """LMDeploy's --quant-policy 8 / 4 (PyTorch engine, cache_engine.get_cache_block_size): per token, head and
    K/V side, uint8 values (int4: head_dim / 2 bytes) plus a scale and a zero point in the model dtype, 2 B each.
    Llama-3.1-8B (32 layers, 8 KV heads of 128): int8 (128 + 4) and int4 (64 + 4) bytes per head side."""
    from kvcalc.config import parse_model
    from kvcalc.estimate import estimate
    from kvcalc.formats import FORMATS

    assert FORMATS["lmdeploy_int8"].entry_bytes(128) == 128 + 2 * 2
    assert FORMATS["lmdeploy_int4"].entry_bytes(128) == 64 + 2 * 2
    assert FORMATS["lmdeploy_int4"].entry_bytes(96) == 48 + 4
    cfg = {"kvcalc": 1, "name": "l", "default_precision": "q8",
           "precisions": {"q8": {"kv": "lmdeploy_int8"}, "q4": {"kv": "lmdeploy_int4"}},
           "components": {"kv": {"cache": "full_attention", "kv_heads": 8, "head_dim": 128}},
           "layer_kinds": {"g": ["kv"]}, "layers": [{"pattern": ["g"], "layers": 32}]}
    m = parse_model(cfg, "l.yaml")
    assert int(estimate(m, [4096], precision="q8").per_sequence[0]) == 4096 * 32 * 8 * 2 * 132
    assert int(estimate(m, [4096], precision="q4").per_sequence[0]) == 4096 * 32 * 8 * 2 * 68
    from kvcalc.errors import KvcalcError
    from kvcalc.plan import plan

    with pytest.raises(KvcalcError, match="lmdeploy_int8 is LMDeploy's KV layout"):
        plan(m, 4096, precision="q8")
    assert plan(m, 4096, precision="q8", engine="exact").per_request_bytes == 4096 * 32 * 8 * 2 * 132


# ---- issue 27: the byte facts once (torch dtypes, page alignment), ggml's block formats, K and V apart -------------
@pytest.mark.parametrize("name,block_bytes", [
    # ggml/src/ggml-common.h (llama.cpp 0c1e57098): sizeof(block_q8_0) = sizeof(ggml_half) + QK8_0 = 2 + 32;
    # block_q4_0 = 2 + QK4_0 / 2 = 18; block_q4_1 = 2 * 2 + 16 = 20; block_q5_0 = 2 + 4 (qh) + 16 = 22;
    # block_q5_1 = 2 * 2 + 4 + 16 = 24; block_iq4_nl = 2 + QK4_NL / 2 = 18 (QK = 32 for all)
    ("q8_0", 34), ("q4_0", 18), ("q4_1", 20), ("q5_0", 22), ("q5_1", 24), ("iq4_nl", 18)])
def test_ggml_block_formats(name, block_bytes):
    fmt = FORMATS[name]
    assert fmt.entry_bytes(32) == block_bytes and fmt.entry_bytes(128) == 4 * block_bytes and fmt.blocked
    with pytest.raises(KvcalcError, match="divide|groups of 32"):
        fmt.entry_bytes(48)
    with pytest.raises(KvcalcError, match="ggml's block formats"):
        fmt.layout(128)


def test_keys_and_values_in_two_formats():
    from kvcalc.config import load_model
    from kvcalc.formats import KVFormat, get_format

    pair = get_format("q8_0/q4_0")
    assert isinstance(pair, KVFormat) and pair.name == "q8_0/q4_0"
    # Llama-3.1-8B: 8 KV heads of 128; a token's K in q8_0 is 4 x 34 = 136 B a head, its V in q4_0 4 x 18 = 72 B
    kv = load_model("llama-3.1-8b").components["kv"]
    assert kv.entry_bytes(pair) == 8 * (136 + 72) == 1664
    assert kv.entry_bytes(get_format("q8_0")) == 8 * 2 * 136
    latent = next(c for c in load_model("deepseek-v3.2").components.values() if c.kind == "mla")
    with pytest.raises(KvcalcError, match="keys and values in different formats .* one vector for both"):
        latent.entry_bytes(pair)
    with pytest.raises(KvcalcError, match="unknown storage format 'q9_0'"):
        get_format("q8_0/q9_0")


def test_torch_dtypes_and_page_alignment_are_the_formats():
    assert {n: (f.torch_dtype, f.element_bytes) for n, f in FORMATS.items() if f.torch_dtype} == {
        "fp32": ("float32", 4), "bf16": ("bfloat16", 2), "fp16": ("float16", 2),
        "fp8_e4m3": ("float8_e4m3fn", 1), "fp8_e5m2": ("float8_e5m2", 1)}
    # vLLM sparse_swa.py DeepseekV4SWACache: packed_page_alignment 576; the kernels and both engines read it here
    from kvcalc.engines.sglang.dsv4 import V4_PAGE_ALIGN
    from kvcalc.engines.vllm.defaults import V4_PAGE_ALIGNMENT

    assert FORMATS["fp8_ds_mla_v4"].page_align == 576 == V4_PAGE_ALIGN == V4_PAGE_ALIGNMENT
    assert pytest.importorskip("kvcalc_kernels").V4_PAGE_ALIGNMENT == 576
