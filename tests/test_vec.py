"""kvcalc.vec: the Python-int vectors the command line computes on for a few contexts, and their agreement
with the numpy path on every shipped config."""

import numpy as np
import pytest

from kvcalc import config_names, estimate, load_model
from kvcalc.specs import ChunkedAttention
from kvcalc.vec import Ints, as_vector, minimum, zeros_like


def test_ints_arithmetic_is_exact_past_int64():
    v = Ints([1, 2**62])
    assert (v * 4).tolist() == [4, 2**64]  # int64 would wrap to 0
    assert (v + v).tolist() == [2, 2**63]
    assert (10 - Ints([3, 4])).tolist() == [7, 6]
    assert (3 * Ints([5])).tolist() == [15]
    assert (Ints([7, 8, 9]) // 4).tolist() == [1, 2, 2]
    assert (Ints([0, 1, 8192, 8193]) % 8192).tolist() == [0, 1, 0, 1]
    assert (Ints([-1]) % 8192).tolist() == [8191]  # floor modulo, as numpy's


def test_ints_masks_and_reductions():
    v = Ints([100, 200, 300])
    assert v[v > 150].tolist() == [200, 300]
    assert v[v >= 300].tolist() == [300] and v[v < 100].size == 0 and v[v <= 100].tolist() == [100]
    assert (v.max(), v.min(), v.size, len(v), v[1], v.ndim) == (300, 100, 3, 3, 200, 1)
    assert v[1:].tolist() == [200, 300]
    assert minimum(v, 128).tolist() == [100, 128, 128]
    assert minimum(v, Ints([300, 1, 300])).tolist() == [100, 1, 300]
    assert zeros_like(v).tolist() == [0, 0, 0]
    assert np.asarray(v).tolist() == [100, 200, 300] and np.asarray(v).dtype == np.int64
    with pytest.raises(ValueError):
        v + Ints([1])
    with pytest.raises(IndexError):
        v[Ints([True])]


def test_as_vector_keeps_the_kind():
    v = Ints([5])
    assert as_vector(v) is v
    a = as_vector([1, 2])
    assert isinstance(a, np.ndarray) and a.dtype == np.int64


@pytest.mark.parametrize("vector", [lambda xs: Ints(xs), lambda xs: np.array(xs, dtype=np.int64)])
def test_chunked_entries_by_hand(vector):
    # Llama 4's chunked attention over 8,192 tokens keeps the tokens of the current chunk:
    # L=0 -> 0, 1 -> 1, 8,192 -> 8,192 (the first chunk full), 8,193 -> 1 (a new chunk), 20,000 -> 20,000 - 16,384
    spec = ChunkedAttention(name="c", kv_heads=8, head_dim=128, chunk=8192)
    got = spec.entries(vector([0, 1, 8192, 8193, 20000]))
    assert list(got) == [0, 1, 8192, 1, 3616]


CONTEXTS = [1, 127, 128, 129, 4095, 4096, 65_537, 1 << 20, 1 << 30]


@pytest.mark.parametrize("name", config_names())
def test_python_ints_and_numpy_agree_on_every_shipped_config(name):
    # the same formulas run on both kinds of vector (kvcalc.vec); this pins that neither path drifts
    spec = load_model(name)
    for p in spec.precisions:
        for mtp in (False, True) if spec.mtp_layers else (False,):
            a = estimate(spec, CONTEXTS, precision=p, mtp=mtp, batch=3)
            b = estimate(spec, CONTEXTS, precision=p, mtp=mtp, batch=3, numpy=False)
            assert isinstance(a.per_sequence, np.ndarray) and isinstance(b.per_sequence, Ints)
            assert a.total.tolist() == b.total.tolist()
            assert a.to_dicts() == b.to_dicts()
            assert a.to_columns() == b.to_columns()
            assert a.context_warning == b.context_warning


def test_python_int_path_refuses_what_the_numpy_path_refuses():
    from kvcalc import KvcalcError

    for bad in (0, [1, 0], [True], 1.5, b"1024", [], [1 << 60], np.array([0])):
        for use_numpy in (True, False):
            with pytest.raises(KvcalcError):
                estimate("llama-3.1-8b", bad, numpy=use_numpy)


def test_ints_refuse_floats_and_compare_elementwise():
    v = Ints([10, 20])
    with pytest.raises(TypeError):
        v * 0.5  # numpy would give floats; counts never are
    with pytest.raises(TypeError):
        minimum(v, 1.9)
    assert (v == Ints([10, 21])).tolist() == [True, False] and (v != 20).tolist() == [True, False]
    assert (v * np.int64(3)).tolist() == [30, 60]
    with pytest.raises(ValueError):
        bool(v)
    assert bool(Ints([1])) and not bool(Ints([0]))


def test_numpy_flag_must_be_a_bool():
    from kvcalc import KvcalcError

    for bad in ("yes", None, 1):
        with pytest.raises(KvcalcError, match="numpy: must be True or False"):
            estimate("llama-3.1-8b", 1024, numpy=bad)
