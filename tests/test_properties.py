"""Properties every model must have, for every shipped config, precision and basis."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvcalc

MODELS = kvcalc.config_names()


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("basis", ["article", "complete"])
def test_bytes_never_decrease_with_context(name, basis):
    # true of every cache but chunked attention, which drops back to one token when a new chunk starts
    model = kvcalc.load_model(name)
    ctxs = np.unique(np.concatenate([np.arange(1, 600), np.geomspace(600, 1 << 22, 400).astype(np.int64)]))
    for p in model.precisions:
        e = kvcalc.estimate(model, ctxs, precision=p, basis=basis)
        chunked = False
        for layer in e.layers:
            if any(c.cache == "chunked_attention" for c in layer.components):
                chunked = True
                chunk = model.components[layer.components[0].name].chunk
                assert np.all(layer.bytes <= layer.components[0].entry_bytes * chunk)  # never more than a chunk
            else:
                assert np.all(np.diff(layer.bytes) >= 0)
        if not chunked:
            assert np.all(np.diff(e.per_sequence) >= 0)


@pytest.mark.parametrize("name", MODELS)
def test_layers_sum_to_total(name):
    e = kvcalc.estimate(name, [1, 4096, 1 << 20], mtp=bool(kvcalc.load_model(name).mtp_layers))
    total = sum(layer.bytes for layer in e.layers)
    assert np.array_equal(total, e.per_sequence)
    for layer in e.layers:
        assert np.array_equal(sum((c.bytes for c in layer.components), np.zeros_like(layer.bytes)), layer.bytes)


@settings(max_examples=60, deadline=None)
@given(a=st.integers(min_value=1, max_value=1 << 24), k=st.integers(min_value=1, max_value=64))
def test_linear_between_window_edges(a, k):
    # Past the 128-token window, a V4 c4a layer grows by exactly (1024 + 256) B per 4 tokens in bf16:
    # between multiples of 4 the slope is linear in the number of completed strides.
    start = 128 + 4 * a
    e = kvcalc.estimate("deepseek-v4-pro", [start, start + 4 * k], precision="bf16", basis="article")
    c4a = next(l for l in e.layers if l.kind == "c4a")
    assert int(c4a.bytes[1] - c4a.bytes[0]) == k * (1024 + 256)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(min_value=1, max_value=1 << 26))
def test_full_attention_exactly_linear(L):
    # Llama-3.1-8B has no window or compression: bytes = 131,072 x L for every L
    assert int(kvcalc.estimate("llama-3.1-8b", L).per_sequence[0]) == 131072 * L


@settings(max_examples=60, deadline=None)
@given(L=st.integers(min_value=1, max_value=1 << 26))
def test_window_caps_at_its_size(L):
    # gpt-oss sliding layers hold min(L, 128) tokens x 8 heads x 64 dims x (K + V) x 2 B
    e = kvcalc.estimate("gpt-oss-120b", L)
    sliding = next(l for l in e.layers if l.kind == "sliding_attention")
    assert int(sliding.bytes[0]) == min(L, 128) * 8 * 64 * 2 * 2
