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
