"""Published numbers and hand arithmetic, written out here, against kvcalc.estimate."""

import numpy as np
import pytest

import kvcalc
from kvcalc.errors import KvcalcError

from configcases import mutate, one_line_error, write

M = 1 << 20  # 1M tokens
GIB, MIB, KIB = 1 << 30, 1 << 20, 1 << 10


def seq(model, ctx=M, **kw):
    return int(kvcalc.estimate(model, ctx, **kw).per_sequence[0])


def layer_of(model, kind, ctx=M, **kw):
    e = kvcalc.estimate(model, ctx, **kw)
    return int(next(l for l in e.layers if l.kind == kind).bytes[0])


# ---- vLLM write-up appendix (bf16, article basis) ------------------------------------------------------
def test_v32_stack_bf16_is_83_875_gib():
    # (512 + 64) x 2 B MLA + 128 x 2 B indexer = 1408 B per token per layer, x 61 layers x 1M = 83.875 GiB
    got = seq("deepseek-v3.2", precision="bf16", basis="article")
    assert got == ((512 + 64) * 2 + 128 * 2) * 61 * M
    assert got / GIB == 83.875


def test_v4_c4a_layer_is_320_125_mib():
    got = layer_of("deepseek-v4-pro", "c4a", precision="bf16", basis="article")
    assert got == (128 + M // 4) * 1024 + (M // 4) * 256
    assert got / MIB == 320.125


def test_v4_c128a_layer_is_8_125_mib():
    got = layer_of("deepseek-v4-pro", "c128a", precision="bf16", basis="article")
    assert got == (128 + M // 128) * 1024
    assert got / MIB == 8.125


def test_v4_pro_sequence_is_9_62_gib_and_8_7x():
    c4a = (128 + M // 4) * 1024 + (M // 4) * 256
    c128a = (128 + M // 128) * 1024
    expected = 30 * c4a + 31 * c128a
    got = seq("deepseek-v4-pro", precision="bf16", basis="article")
    assert got == expected
    assert round(got / GIB, 2) == 9.62
    assert round(1408 * 61 * M / got, 1) == 8.7


def test_v4_flash_article_bf16():
    c4a = (128 + M // 4) * 1024 + (M // 4) * 256
    c128a = (128 + M // 128) * 1024
    swa = 128 * 1024
    assert seq("deepseek-v4-flash", precision="bf16", basis="article") == 21 * c4a + 20 * c128a + 2 * swa


# ---- production precision (fp8 + fp4) -------------------------------------------------------------------
def test_v4_pro_fp8_article():
    c4a = (128 + M // 4) * 584 + (M // 4) * 68
    c128a = (128 + M // 128) * 584
    got = seq("deepseek-v4-pro", precision="fp8", basis="article")
    assert got == 30 * c4a + 31 * c128a
    # "roughly another 2x" against bf16
    assert 1.9 < seq("deepseek-v4-pro", precision="bf16", basis="article") / got < 2.0


def test_report_ratios_at_production_precision():
    v32 = (656 + 132) * 61 * M
    assert seq("deepseek-v3.2", precision="fp8", basis="article") == v32
    pro = seq("deepseek-v4-pro", precision="fp8", basis="article")
    flash = seq("deepseek-v4-flash", precision="fp8", basis="article")
    assert round(100 * pro / v32) == 10  # report: 10%
    assert round(100 * flash / v32) == 7  # report: 7%
    gqa61 = 2 * 8 * 128 * 2 * 61 * M  # K and V, 8 heads x 128 dims, bf16
    gqa43 = 2 * 8 * 128 * 2 * 43 * M
    assert seq("gqa8-hd128-l61", precision="bf16") == gqa61
    assert round(100 * pro / gqa61) == 2  # report: ~2%
    assert round(100 * flash / gqa43) == 2


# ---- complete basis: compressor state and the MTP layer -------------------------------------------------
def test_complete_adds_compressor_state():
    # c4a: 8 slots x (kv + score) x coff 2 x 512 fp32 + indexer 8 x 2 x 2 x 128 fp32; c128a: 128 x 2 x 1 x 512 fp32
    c4a_state = 8 * 2 * 2 * 512 * 4 + 8 * 2 * 2 * 128 * 4
    c128a_state = 128 * 2 * 1 * 512 * 4
    article = seq("deepseek-v4-pro", precision="bf16", basis="article")
    complete = seq("deepseek-v4-pro", precision="bf16", basis="complete")
    assert complete - article == 30 * c4a_state + 31 * c128a_state


def test_mtp_layer_is_opt_in_and_complete_only():
    base = seq("deepseek-v4-pro", precision="fp8")
    with_mtp = seq("deepseek-v4-pro", precision="fp8", mtp=True)
    assert with_mtp - base == 128 * 584  # window-only MTP layer
    v32 = seq("deepseek-v3.2", precision="bf16", mtp=True)
    assert v32 == 1408 * 62 * M
    with pytest.raises(KvcalcError, match="^mtp: "):
        kvcalc.estimate("deepseek-v4-pro", M, basis="article", mtp=True)


def test_state_is_constant_in_context():
    e = kvcalc.estimate("deepseek-v4-pro", [1, 1000, M])
    c128a = next(l for l in e.layers if l.kind == "c128a")
    state = next(c for c in c128a.components if c.name == "c128_state")
    assert state.bytes.tolist() == [512 * KIB] * 3


# ---- other architectures ---------------------------------------------------------------------------------
def test_llama_3_1_8b_is_128_kib_per_token():
    # 32 layers x 8 KV heads x 128 dims x (K + V) x 2 B = 131,072 B per token
    got = seq("llama-3.1-8b", 128 * 1024)
    assert got == 32 * 8 * 128 * 2 * 2 * 128 * 1024
    assert got == 16 * GIB


def test_gpt_oss_120b_alternating_window():
    L = 131072
    full = 18 * L * 8 * 64 * 2 * 2
    sliding = 18 * 128 * 8 * 64 * 2 * 2
    assert seq("gpt-oss-120b", L) == full + sliding
    e = kvcalc.estimate("gpt-oss-120b", L)
    assert [l.kind for l in e.layers[:4]] == ["sliding_attention", "full_attention"] * 2


def test_qwen3_uses_stated_head_dim():
    assert seq("qwen3-8b", 1000) == 36 * 8 * 128 * 2 * 2 * 1000


def test_small_contexts_round_down_compressed_entries():
    # 7 tokens: window holds 7, c4a holds 1 entry (tokens 0-3 done, 4-6 pending), c128a holds none
    e = kvcalc.estimate("deepseek-v4-pro", 7, precision="bf16", basis="article")
    c4a = next(l for l in e.layers if l.kind == "c4a")
    assert {c.name: int(c.entries[0]) for c in c4a.components} == {"window": 7, "c4_entries": 1, "c4_indexer": 1}
    assert int(c4a.bytes[0]) == 7 * 1024 + 1 * 1024 + 1 * 256


def test_batch_multiplies():
    e = kvcalc.estimate("llama-3.1-8b", 1024, batch=3)
    assert int(e.total[0]) == 3 * int(e.per_sequence[0]) == 3 * 1024 * 131072


def test_vectorised_matches_scalar():
    ctxs = [1, 127, 128, 129, 4096, 100_000, M]
    e = kvcalc.estimate("deepseek-v4-flash", ctxs, precision="fp8")
    for i, c in enumerate(ctxs):
        assert int(e.per_sequence[i]) == seq("deepseek-v4-flash", c, precision="fp8")


def test_warning_beyond_max_context():
    e = kvcalc.estimate("deepseek-v3.2", M)
    assert any("163,840" in w for w in e.warnings)
    assert not kvcalc.estimate("deepseek-v3.2", 163840).warnings


def test_json_shape():
    d = kvcalc.estimate("deepseek-v4-pro", M, precision="bf16", basis="article").to_dicts()[0]
    for key in ("model", "context_tokens", "precision", "basis", "total_bytes", "layers"):
        assert key in d
    assert d["total_bytes"] == 30 * ((128 + M // 4) * 1024 + (M // 4) * 256) + 31 * (128 + M // 128) * 1024
    assert len(d["layers"]) == 61
    assert {l["kind"] for l in d["layers"]} == {"c4a", "c128a"}
    assert sum(l["bytes"] for l in d["layers"]) == d["total_bytes"]
    assert [l["index"] for l in d["layers"]] == list(range(61))


@pytest.mark.parametrize("bad", [dict(batch=0), dict(batch=-1), dict(basis="paged"), dict(precision="int3")])
def test_bad_arguments(bad):
    with pytest.raises(KvcalcError):
        kvcalc.estimate("deepseek-v4-pro", M, **bad)


def test_bad_contexts():
    for ctx in ([0], [-5], [], [1 << 40]):
        with pytest.raises(KvcalcError):
            kvcalc.estimate("llama-3.1-8b", ctx)
    with pytest.raises(KvcalcError):
        kvcalc.estimate("llama-3.1-8b", np.array([1.5]))


def test_overflow_caught_across_components(tmp_path, cli):
    # two states of 2^60 fp32 values = 2^62 B each: each fits int64, their sum (2^63 B) does not
    data = mutate(lambda d: d["components"].update(
        big1={"cache": "state", "shape": [1 << 20] * 3}, big2={"cache": "state", "shape": [1 << 20] * 3}))
    data["layer_kinds"]["swa"] = ["win", "big1", "big2"]
    path = write(tmp_path, data)
    one_line_error(cli("estimate", path, "-c", "1k"), "exceeds 8 EiB")
