"""Entry points reject bad shapes, dtypes and strides with one-line errors that name the argument."""

import pytest
import torch

from kvcalc_kernels import compressor as K
from kvcalc_kernels import paged as P
from kvcalc_kernels import quant as Q
from kvcalc_kernels import _checks


def one_line(exc):
    return "\n" not in str(exc.value)


@pytest.mark.parametrize("call,exc,arg", [
    (lambda d: Q.quantize(torch.zeros(3, 512, dtype=torch.float16, device=d), "fp8_ds_mla_v4"), TypeError, "x"),
    (lambda d: Q.quantize(torch.zeros(3, 500, device=d), "fp8_ds_mla_v4"), ValueError, "x"),
    (lambda d: Q.quantize(torch.zeros(512, device=d), "fp8_ds_mla_v4"), ValueError, "x"),
    (lambda d: Q.quantize(torch.zeros(512, 3, device=d).t(), "fp8_ds_mla_v4"), ValueError, "x"),
    (lambda d: Q.quantize([[0.0] * 512], "fp8_ds_mla_v4"), TypeError, "x"),
    (lambda d: Q.quantize(torch.zeros(3, 512, device=d), "fp9"), ValueError, "fmt"),
    (lambda d: Q.quantize(torch.zeros(2, 512, device=d), "fp8_ds_mla_v4",
                          cache=torch.zeros(2, 37440, dtype=torch.uint8, device=d),
                          slot_mapping=torch.tensor([0, 200], device=d), block_size=64), ValueError, "slot_mapping"),
    (lambda d: Q.quantize(torch.zeros(2, 512, device=d), "fp8_ds_mla_v4",
                          cache=torch.zeros(2, 37440, dtype=torch.uint8, device=d),
                          slot_mapping=torch.tensor([0.0, 1.0], device=d), block_size=64), TypeError, "slot_mapping"),
    (lambda d: Q.quantize(torch.zeros(2, 512, device=d), "fp8_ds_mla_v4",
                          cache=torch.zeros(2, 37440, dtype=torch.uint8, device=d),
                          slot_mapping=torch.tensor([0, 1], device=d)), ValueError, "block_size"),
    (lambda d: Q.quantize(torch.zeros(2, 512, device=d), "fp8_ds_mla_v4",
                          cache=torch.zeros(2, 1000, dtype=torch.uint8, device=d),
                          slot_mapping=torch.tensor([0, 1], device=d), block_size=64), ValueError, "page_bytes"),
    (lambda d: Q.quantize(torch.zeros(2, 512, device=d), "fp8_ds_mla_v4",
                          cache=torch.zeros(2, 37440, dtype=torch.float32, device=d),
                          slot_mapping=torch.tensor([0, 1], device=d), block_size=64), TypeError, "cache"),
    (lambda d: Q.dequantize(torch.zeros(2, 583, dtype=torch.uint8, device=d), "fp8_ds_mla_v4"), ValueError, "src"),
    (lambda d: Q.dequantize(torch.zeros(2, 1024, dtype=torch.uint8, device=d), "bf16"), ValueError, "dim"),
    (lambda d: P.scatter_records(torch.zeros(2, 584, dtype=torch.uint8, device=d), "fp8_ds_mla_v4",
                                 torch.zeros(1, 37440, dtype=torch.uint8, device=d),
                                 torch.tensor([0, 1, 2], device=d), 64), ValueError, "records"),
    (lambda d: P.ring_slots(0, 3, torch.tensor([], dtype=torch.int64), 64), ValueError, "pages"),
])
def test_entry_point_errors(call, exc, arg, device):
    with pytest.raises(exc, match=rf"^{arg}:") as info:
        call(device)
    assert one_line(info)


def test_compressor_errors(device):
    st = K.CompressorState.allocate(128, 4, device=device)
    kv = torch.zeros(5, 256, device=device)
    kv9 = torch.zeros(9, 256, device=device)
    ape = torch.zeros(4, 256, device=device)
    cases = [
        (lambda: K.compress(kv, torch.zeros(5, 128, device=device), ape, st), ValueError, "score"),
        (lambda: K.compress(kv[:, :128], kv[:, :128], ape, st), ValueError, "kv"),
        (lambda: K.compress(kv, kv, torch.zeros(3, 256, device=device), st), ValueError, "ape"),
        (lambda: K.compress(kv, kv, ape, st, start_pos=4), ValueError, "start_pos"),
        (lambda: K.compress(kv, kv, ape, st, rope_dim=64), ValueError, "cos_sin"),
        (lambda: K.compress(kv, kv, ape, st, rope_dim=63, cos_sin=torch.zeros(10, 64, device=device)),
         ValueError, "rope_dim"),
        (lambda: K.compress(kv9, kv9, ape, st, rope_dim=64, cos_sin=torch.zeros(4, 64, device=device)),
         ValueError, "cos_sin"),
        (lambda: K.compress(kv, kv, ape, st, norm_weight=torch.zeros(64, device=device)), ValueError,
         "norm_weight"),
        (lambda: K.compress(kv, kv, ape, st, out_dtype=torch.float16), TypeError, "out_dtype"),
        (lambda: K.compress(kv, kv, ape, st, rows_tile=3), ValueError, "rows_tile"),
        (lambda: K.compress(kv.int(), kv, ape, st), TypeError, "kv"),
        (lambda: K.compress(kv, kv, ape, "state"), TypeError, "state"),
        (lambda: K.CompressorState.allocate(100, 4, device=device), ValueError, "head_dim"),
        (lambda: K.CompressorState.allocate(128, 6, device=device), ValueError, "ratio"),
        (lambda: K.CompressorState.allocate(128, 4, device=device, block_size=3), ValueError, "block_size"),
    ]
    for call, exc, arg in cases:
        with pytest.raises(exc, match=rf"^{arg}:") as info:
            call()
        assert one_line(info)
    assert st.next_pos == 0  # failed calls leave the state alone


def test_cpu_without_interpreter_is_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="^x: CPU tensors need the Triton interpreter"):
        _checks.check_tensor("x", torch.zeros(2))
