"""An engine of another pool shape is one module and one registry line (issue 27's proof): tests/engines/toycells.py, a
cell cache with keys and values in formats of their own, registered from here, goes through capacity (the API and the
command line, alone and side by side with vLLM), the reverse search, transfer and the JSON schema, with no edit to
kvcalc. A cache kind no engine lists is refused by every engine that pages, in one line naming it; the exact engine
counts it."""

from __future__ import annotations

import pytest

from kvcalc import engines
from kvcalc.errors import KvcalcError
from kvcalc.specs import CACHE_KINDS

import toycells  # noqa: E402  (tests/engines is on the path: the engine under test, one module)
from test_toy_engine import RingCache  # noqa: E402

GIB = 1 << 30
# Llama-3.1-8B: 32 layers of 8 KV heads of 128. ggml-common.h: a q8_0 block holds 32 values in 34 B, a q4_0 block
# 32 in 18 B, so a head's key is 4 x 34 = 136 B and its value 4 x 18 = 72 B; a cell is every layer's:
K_CELL = 32 * 8 * 136  # 34,816 B
V_CELL = 32 * 8 * 72  # 18,432 B
CELL = K_CELL + V_CELL  # 53,248 B
STREAM_8K = 8192 * CELL  # 436,207,616 B
STREAMS_10GIB = 24  # 24 x 436,207,616 = 10,468,982,784 <= 10 GiB = 10,737,418,240 < 25 x 436,207,616


@pytest.fixture
def cells():
    engines.register(toycells.ENGINE)  # the one registry line
    yield toycells.ENGINE
    engines.unregister("cells")


def test_capacity_through_the_api(cells):
    from kvcalc.capacity import capacity

    c = capacity("llama-3.1-8b", 8192, engine="cells", kv_memory=10 * GIB)
    assert (c.plan.k_bytes, c.plan.v_bytes, c.plan.per_request_bytes) == (K_CELL, V_CELL, STREAM_8K)
    assert c.requests_per_replica == STREAMS_10GIB and c.fit.figures.n_seq_max == STREAMS_10GIB
    assert c.plan.analytic_bytes == STREAM_8K  # held, in the engine's formats: a stream's cells exactly
    with pytest.raises(KvcalcError, match=r"one request at 1,048,576 tokens needs .* more than the .* pool"):
        capacity("llama-3.1-8b", 1 << 20, engine="cells", kv_memory=10 * GIB)


def test_capacity_transfer_and_the_schema_on_the_command_line(cells, cli):
    import jsonschema

    from kvcalc.present.schemas import output_schema

    r = cli("capacity", "llama-3.1-8b", "--engine", "cells", "--kv-memory", "10GiB", "-c", "8k", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert (d["engine"], d["total_requests"], d["layout"], d["bytes_per_block"]) == ("cells", 24, "cells", CELL)
    assert (d["n_ctx"], d["n_seq_max"], d["k_bytes_per_cell"], d["v_bytes_per_cell"]) == (8192, 24, K_CELL, V_CELL)
    assert d["stored_formats"] == {"kv": "q8_0/q4_0"}
    jsonschema.validate(d, output_schema("capacity"))  # the schema knows the new engine from its Figures
    text = cli("capacity", "llama-3.1-8b", "--engine", "cells", "--kv-memory", "10GiB", "-c", "8k")
    assert text.code == 0, text.err
    assert "Cells would log: 24 streams of 8192 cells" in text.out

    r = cli("capacity", "llama-3.1-8b", "--engine", "vllm,cells", "--kv-memory", "10GiB", "-c", "8k", "--json")
    assert r.code == 0, r.err
    side = r.json()
    assert [e["engine"] for e in side["engines"]] == ["vllm", "cells"]
    assert side["side_by_side"]["requests per replica"]["cells"] == "24"
    jsonschema.validate(side, output_schema("capacity"))

    # the reverse: the longest context at which 4 streams fit in 10 GiB: 10,737,418,240 // (4 x 53,248) = 50,412
    r = cli("capacity", "llama-3.1-8b", "--engine", "cells", "--kv-memory", "10GiB", "--concurrency", "4", "--json")
    assert r.code == 0 and r.json()["max_context_tokens"] == 10 * GIB // (4 * CELL) == 50_412

    r = cli("transfer", "llama-3.1-8b", "--engine", "cells", "-c", "8k", "--json")
    assert r.code == 0, r.err
    t = r.json()
    assert t["cache_bytes"] == STREAM_8K and t["stored_bytes"] == STREAM_8K == t["reserved_bytes"]
    jsonschema.validate(t, output_schema("transfer"))


@pytest.fixture
def ring_model(monkeypatch):
    from kvcalc.config import parse_model

    monkeypatch.setitem(CACHE_KINDS, "toy_ring", RingCache)  # a kind no engine lists (test_toy_engine.py's)
    return parse_model({
        "kvcalc": 1, "name": "ring-model", "max_context": 1 << 20, "precisions": {"bf16": {"kv": "bf16"}},
        "default_precision": "bf16", "components": {"ring": {"cache": "toy_ring", "dim": 64, "slots": 1000}},
        "layer_kinds": {"ringed": ["ring"]}, "layers": ["ringed"] * 4}, "ring.yaml")


def test_a_kind_no_engine_lists_is_refused_by_each_and_counted_by_the_exact_engine(cells, ring_model):
    from kvcalc.capacity import capacity

    for name, title in (("vllm", "vLLM 0.33.0"), ("sglang", "SGLang 0.5.23"), ("cells", "Cells 0.1")):
        with pytest.raises(KvcalcError, match=f"^engine {name}: cache kind 'toy_ring' \\(component ring\\) is not "
                                              f"modelled for {title}") as e:
            capacity(ring_model, 4096, engine=name, kv_memory=GIB)
        assert "\n" not in str(e.value)
    # the exact engine holds what the estimate counts: 4 layers x min(4096, 1000) x 64 values x 2 B
    c = capacity(ring_model, 4096, engine="exact", kv_memory=GIB)
    assert c.plan.analytic_bytes == 4 * 1000 * 64 * 2 == 512_000 and c.requests_per_replica == GIB // 512_000
