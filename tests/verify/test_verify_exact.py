"""verify --engine exact: the analytic layout allocated as a straightforward implementation would (one tensor per
cached component and layer, entries x bytes per entry, fixed state its bytes, no pages), filled through the same
writers, counted and read back. The expected figures are hand arithmetic; for every shipped model the measured
storage equals kvcalc's estimate (itself recomputed by hand formulas in tests/test_audit.py)."""

from pathlib import Path

import pytest

from kvcalc.verify.faults import planted

from kvcalc.estimate import estimate
from kvcalc.plan import plan

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted(p.stem for p in (ROOT / "kvcalc" / "data" / "configs").glob("*.yaml"))


def _verify(model, ctx, prec=None, basis="complete", **kw):
    from kvcalc.engines import get_engine
    from kvcalc.verify import verify

    settings = get_engine("exact").settings({})
    from dataclasses import replace

    p = plan(model, ctx, precision=prec, engine="exact", settings=replace(settings, basis=basis))
    return verify(p, device="cpu", **kw)


def _failed(out):
    return [c.name for c in out.checks if not c.passed]


def test_llama_by_hand():
    out = _verify("llama-3.1-8b", 1024, batch=2, fill="none")
    # 2 requests x 1,024 tokens, one (2,048, 8 x 128 x 2) bf16 tensor of K and V per layer: 2,048 x 4,096 B x 32
    assert out.allocated_bytes == out.planned_bytes == out.predicted_bytes == 2048 * 8 * 128 * 2 * 2 * 32
    assert [(g.pool["shape"], g.layers) for g in out.groups] == [([2048, 2 * 8 * 128], 32)]
    assert out.verdict == "pass", _failed(out)


def test_v4_pro_article_basis_by_hand():
    pytest.importorskip("triton")  # the reference quantiser (fp8 records)
    out = _verify("deepseek-v4-pro", 4096, "fp8", basis="article", fill="sample")
    g = {x.pool["name"]: x for x in out.groups}
    # the article basis: window 128 x 584 B in 61 layers; c4a 1,024 entries x 584 B + indexer 1,024 x 68 B (fp4)
    # in 30; c128a 32 x 584 B in 31; no compressor state
    assert g["window"].planned_bytes == 61 * 128 * 584
    assert g["c4_entries"].planned_bytes == 30 * 1024 * 584 and g["c4_indexer"].planned_bytes == 30 * 1024 * 68
    assert g["c128_entries"].planned_bytes == 31 * 32 * 584
    assert "c4_state" not in g
    total = 61 * 128 * 584 + 30 * 1024 * (584 + 68) + 31 * 32 * 584
    assert out.allocated_bytes == out.predicted_bytes == total
    # sample: the first and last layer of each tensor kind, every entry of the request
    assert g["c4_entries"].written_bytes == 2 * 1024 * 584 and g["c4_indexer"].written_bytes == 2 * 1024 * 68
    assert out.fill_info.formats == {"window": "fp8_ds_mla_v4", "c4_entries": "fp8_ds_mla_v4",
                                     "c4_indexer": "fp4_indexer", "c128_entries": "fp8_ds_mla_v4"}
    assert out.readback and all(c.passed for c in out.readback)
    assert out.verdict == "pass", _failed(out)


def test_complete_basis_adds_the_state_and_fills_it():
    out = _verify("deepseek-v4-pro", 4096, basis="complete", fill="sample")
    g = {x.pool["name"]: x for x in out.groups}
    # V4's compressor state: c4a 2 x 2 x 512 fp32 x 8 rows = 64 KiB (+ the indexer's 16 KiB), c128a 2 x 512 x 128 rows
    # x 4 B = 512 KiB per layer; one row of it per request, written as deterministic bytes
    assert g["c4_state"].planned_bytes == 30 * 64 * 1024 and g["c4_indexer_state"].planned_bytes == 30 * 16 * 1024
    assert g["c128_state"].planned_bytes == 31 * 512 * 1024
    assert g["c128_state"].written_bytes == 2 * 512 * 1024 and g["c128_state"].kind == "state"
    assert out.verdict == "pass", _failed(out)


def test_hybrid_state_is_filled():
    out = _verify("qwen3.5-9b", 1024, fill="sample")
    g = {x.pool["name"]: x for x in out.groups}
    state = [x for x in out.groups if x.kind == "state"]
    assert state and all(x.written_bytes == x.expected_written_bytes > 0 for x in state)
    # 8 full-attention layers: 1,024 tokens x 4 KV heads x 256 x 2 (K, V) x 2 B
    assert g["full"].planned_bytes == 8 * 1024 * 4 * 256 * 2 * 2
    assert out.verdict == "pass", _failed(out)


@pytest.mark.parametrize("model", MODELS)
def test_every_shipped_model_allocates_its_estimate(model):
    out = _verify(model, 300, fill="none")  # past every model's window start, past a c128a entry: all kinds held
    want = int(estimate(model, 300, basis="complete").per_sequence[0])
    assert out.allocated_bytes == out.planned_bytes == out.predicted_bytes == want
    assert out.verdict == "pass", _failed(out)


def test_planted_faults_fail(monkeypatch):
    with planted(extra_pages=1):
        out = _verify("llama-3.1-8b", 1024, fill="none")
    # one row more in every layer's tensor: 32 x 4,096 B
    assert out.allocated_bytes - out.planned_bytes == 32 * 4096 and out.verdict == "fail"
    # a writer that puts request 1 over request 0's rows writes half the bytes expected
    from kvcalc.engines.buffers import Buffer

    monkeypatch.setattr(Buffer, "first_slot", lambda self, r: 0)
    out = _verify("llama-3.1-8b", 256, batch=2, fill="sample")
    assert out.verdict == "fail" and out.written_bytes == out.expected_written_bytes // 2


def test_basis_is_refused_for_the_paged_engines(cli):
    r = cli("verify", "llama-3.1-8b", "-c", "1k", "--basis", "article", "--fill", "none")
    assert r.code == 2 and "--basis: 'article' is for --engine exact" in r.err
    r = cli("verify", "llama-3.1-8b", "-c", "1k", "--engine", "exact", "--basis", "nope", "--fill", "none")
    assert r.code == 2 and "basis: choose complete or article" in r.err
