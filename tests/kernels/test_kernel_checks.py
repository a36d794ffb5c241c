"""Entry points reject bad shapes, dtypes and strides with one-line errors that name the argument."""

import pytest
import torch

from kvcalc_kernels import compressor as K
from kvcalc_kernels import paged as P
from kvcalc_kernels import addressing as A
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
    (lambda d: A.ring_slots(0, 3, torch.tensor([], dtype=torch.int64), 64), ValueError, "pages"),
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


def test_interpreter_switched_on_after_import_is_refused(monkeypatch):
    """triton decides interpreted vs compiled when the kernels are decorated (at import): setting
    TRITON_INTERPRET afterwards must give the one-line error, not a driver error from triton."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(_checks, "KERNELS_INTERPRETED", False)
    with pytest.raises(ValueError, match="^x: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 "
                                         "before kvcalc_kernels is imported"):
        Q.quantize(torch.zeros(2, 512), "fp8_ds_mla_v4")


def _raises(cases):
    for call, exc, arg in cases:
        with pytest.raises(exc, match=rf"^{arg}:") as info:
            call()
        assert one_line(info), info.value


def test_save_states_errors(device):
    d = device
    kv = torch.zeros(3, 256, device=d)
    ape = torch.zeros(4, 256, device=d)
    pos = torch.tensor([0, 1, 2], device=d)
    slots = torch.tensor([0, 1, 2], device=d)
    cache = torch.zeros(2, 4 * 2048, dtype=torch.uint8, device=d)  # 2 pages of 4 rows of 2 * 256 fp32
    ok = dict(kv=kv, score=kv, ape=ape, positions=pos, state_cache=cache, slot_mapping=slots, block_size=4,
              ratio=4)
    K.save_states(**ok)  # the valid call passes

    def bad(**kw):
        return lambda: K.save_states(**{**ok, **kw})

    _raises([
        (bad(kv=kv.half()), TypeError, "kv"),
        (bad(kv=kv[:, :255]), ValueError, "score"),
        (bad(score=torch.zeros(2, 256, device=d)), ValueError, "score"),
        (bad(ape=torch.zeros(3, 256, device=d)), ValueError, "ape"),
        (bad(positions=pos.float()), TypeError, "positions"),
        (bad(positions=pos[:2]), ValueError, "positions"),
        (bad(slot_mapping=torch.tensor([0, 1, 8], device=d)), ValueError, "slot_mapping"),
        (bad(slot_mapping=torch.tensor([0, -2, 1], device=d)), ValueError, "slot_mapping"),
        (bad(state_cache=cache.float()), TypeError, "state_cache"),
        (bad(state_cache=cache[:, ::2]), ValueError, "state_cache"),  # page bytes strided
        (bad(state_cache=torch.zeros(2, 4 * 2048 - 4, dtype=torch.uint8, device=d)), ValueError, "state_cache"),
        (bad(block_size=0), ValueError, "block_size"),
        (bad(ratio=0), ValueError, "ratio"),
        (bad(ratio=4.0), TypeError, "ratio"),
    ])


def test_gather_records_and_paged_dequantize_errors(device):
    d = device
    cache = torch.zeros(2, 37440, dtype=torch.uint8, device=d)
    slots = torch.tensor([0, 64, 127], device=d)
    P.gather_records(cache, "fp8_ds_mla_v4", slots, 64)
    Q.dequantize(cache, "fp8_ds_mla_v4", slot_mapping=slots, block_size=64)
    _raises([
        (lambda: P.gather_records(cache.float(), "fp8_ds_mla_v4", slots, 64), TypeError, "cache"),
        (lambda: P.gather_records(cache[:, ::2], "fp8_ds_mla_v4", slots, 64), ValueError, "cache"),  # page bytes strided
        (lambda: P.gather_records(cache, "fp8_ds_mla_v4", slots.float(), 64), TypeError, "slot_mapping"),
        (lambda: P.gather_records(cache, "fp8_ds_mla_v4", torch.tensor([128], device=d), 64), ValueError,
         "slot_mapping"),
        (lambda: P.gather_records(cache, "fp8_ds_mla_v4", slots, 0), ValueError, "block_size"),
        (lambda: P.gather_records(cache, "fp8_ds_mla_v4", slots, 128), ValueError, "page_bytes"),
        (lambda: P.gather_records(cache, "fp7", slots, 64), ValueError, "fmt"),
        (lambda: Q.dequantize(cache, "fp8_ds_mla_v4", slot_mapping=slots), ValueError, "block_size"),
        (lambda: Q.dequantize(cache, "fp8_ds_mla_v4", slot_mapping=torch.tensor([128], device=d), block_size=64),
         ValueError, "slot_mapping"),
        (lambda: Q.dequantize(cache, "fp8_ds_mla_v4", slot_mapping=slots[None], block_size=64), ValueError,
         "slot_mapping"),
        (lambda: Q.dequantize(cache.view(torch.int8), "fp8_ds_mla_v4", slot_mapping=slots, block_size=64),
         TypeError, "src"),
        (lambda: Q.dequantize(cache, "fp8_ds_mla_v4", slot_mapping=slots, block_size=128), ValueError,
         "page_bytes"),
        (lambda: Q.dequantize(cache, "fp8_ds_mla_v4", slot_mapping=slots, block_size=64, dim=576), ValueError,
         "dim"),
    ])


@pytest.mark.parametrize("name,dim", [("fp8_ds_mla_v4", 576), ("fp8_ds_mla", 512), ("fp8_indexer", 512),
                                      ("fp4_indexer", 64)])
def test_dequantize_refuses_a_dim_the_format_would_ignore(name, dim, device):
    from kvcalc_kernels import formats as F

    f = F.get_format(name)
    rec = torch.zeros(2, f.entry_bytes, dtype=torch.uint8, device=device)
    assert Q.dequantize(rec, name, dim=f.dim).shape == (2, f.dim)  # its own dim is accepted
    with pytest.raises(ValueError, match=rf"^dim: {name} entries have {f.dim} values, got dim={dim}$"):
        Q.dequantize(rec, name, dim=dim)
    with pytest.raises(ValueError, match="^dim:"):
        Q.dequantize(rec, F.get_format(name), dim=dim)
    bf = torch.zeros(2, 1024, dtype=torch.uint8, device=device)
    assert Q.dequantize(bf, "bf16", dim=512).shape == (2, 512)
    with pytest.raises(ValueError, match="^dim:"):
        Q.dequantize(bf, F.get_format("bf16", 512), dim=256)
    with pytest.raises(TypeError, match="^dim:"):
        Q.dequantize(rec, name, dim=float(f.dim))


def test_allocate_cache_errors():
    P.allocate_cache("fp8_ds_mla_v4", 2, 64, alignment=576)
    _raises([
        (lambda: P.allocate_cache("fp8_ds_mla_v4", 0, 64), ValueError, "num_pages"),
        (lambda: P.allocate_cache("fp8_ds_mla_v4", 2.0, 64), TypeError, "num_pages"),
        (lambda: P.allocate_cache("fp8_ds_mla_v4", 2, 0), ValueError, "block_size"),
        (lambda: P.allocate_cache("fp8_ds_mla_v4", 2, 64, alignment=0), ValueError, "alignment"),
        (lambda: P.allocate_cache("fp8_ds_mla_v4", 2, 64, page_bytes=584), ValueError, "page_bytes"),
        (lambda: P.allocate_cache("fp8_e5m2", 2, 64), ValueError, "fmt"),
        (lambda: P.allocate_cache("bf16", 2, 64), ValueError, "fmt"),
        (lambda: P.allocate_cache(None, 2, 64), TypeError, "fmt"),
    ])


def test_compressed_slots_errors():
    table = torch.tensor([3, 1])
    assert A.compressed_slots(0, 16, 4, table, 2).tolist() == [6, 7, 2, 3]
    _raises([
        (lambda: A.compressed_slots(-1, 4, 4, table, 2), ValueError, "start_pos"),
        (lambda: A.compressed_slots(0, -4, 4, table, 2), ValueError, "n_tokens"),
        (lambda: A.compressed_slots(0, 4, 0, table, 2), ValueError, "ratio"),
        (lambda: A.compressed_slots(0, 4, 4, table, 0), ValueError, "block_size"),
        (lambda: A.compressed_slots(0, 4, 4, [3, 1], 2), TypeError, "block_table"),
        (lambda: A.compressed_slots(0, 4, 4, table.float(), 2), TypeError, "block_table"),
        (lambda: A.compressed_slots(0, 20, 4, table, 2), ValueError, "block_table"),  # entry 4 needs block 2
    ])


def test_write_swa_errors(device):
    d = device
    x = torch.zeros(3, 512, device=d)
    cache = torch.zeros(2, 37440, dtype=torch.uint8, device=d)
    pages = torch.tensor([1, 0], device=d)
    P.write_swa(x, "fp8_ds_mla_v4", cache, 0, pages, 64)
    _raises([
        (lambda: P.write_swa(x.half(), "fp8_ds_mla_v4", cache, 0, pages, 64), TypeError, "x"),
        (lambda: P.write_swa([[0.0] * 512], "fp8_ds_mla_v4", cache, 0, pages, 64), TypeError, "x"),
        (lambda: P.write_swa(x[:, :500], "fp8_ds_mla_v4", cache, 0, pages, 64), ValueError, "x"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache, -1, pages, 64), ValueError, "start_pos"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache, 0, pages[:0], 64), ValueError, "pages"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache, 0, torch.tensor([1, 1], device=d), 64), ValueError,
         "pages"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache, 0, pages.float(), 64), TypeError, "pages"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache, 0, torch.tensor([2, 0], device=d), 64), ValueError,
         "slot_mapping"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache, 0, pages, 0), ValueError, "block_size"),
        (lambda: P.write_swa(x, "fp8_ds_mla_v4", cache.float(), 0, pages, 64), TypeError, "cache"),
    ])


def test_compressor_state_constructor_errors(device):
    d = device
    cache = torch.zeros(3, 4 * 2048, dtype=torch.uint8, device=d)  # head_dim 128, ratio 4: rows of 2048 B
    pages = torch.tensor([2, 0], dtype=torch.int32, device=d)
    st = K.CompressorState(cache, pages, 4, 128, 4)
    assert (st.window, st.row_bytes) == (8, 2048)
    _raises([
        (lambda: K.CompressorState(cache.float(), pages, 4, 128, 4), TypeError, "cache"),
        (lambda: K.CompressorState(cache[:, ::2], pages, 4, 128, 4), ValueError, "cache"),  # page bytes strided
        (lambda: K.CompressorState(cache[:, : 4 * 2048 - 4].contiguous(), pages, 4, 128, 4), ValueError, "cache"),
        (lambda: K.CompressorState(torch.zeros(3, 4 * 2048 + 2, dtype=torch.uint8, device=d), pages, 4, 128, 4),
         ValueError, "cache"),  # page_bytes not a multiple of 4
        (lambda: K.CompressorState(cache, pages[:1], 4, 128, 4), ValueError, "pages"),
        (lambda: K.CompressorState(cache, pages.float(), 4, 128, 4), TypeError, "pages"),
        (lambda: K.CompressorState(cache, torch.tensor([2, 3], device=d), 4, 128, 4), ValueError, "pages"),
        (lambda: K.CompressorState(cache, torch.tensor([-1, 0], device=d), 4, 128, 4), ValueError, "pages"),
        (lambda: K.CompressorState(cache, torch.tensor([1, 1], device=d), 4, 128, 4), ValueError, "pages"),
        (lambda: K.CompressorState(cache, pages, 3, 128, 4), ValueError, "block_size"),
        (lambda: K.CompressorState(cache, pages, 0, 128, 4), ValueError, "block_size"),
        (lambda: K.CompressorState(cache, pages, 4, 96, 4), ValueError, "head_dim"),
        (lambda: K.CompressorState(cache, pages, 4, 128, 0), ValueError, "ratio"),
        (lambda: K.CompressorState(cache, pages, 4, 128, 12), ValueError, "ratio"),
        (lambda: K.CompressorState(cache, pages, 4, 128.0, 4), TypeError, "head_dim"),
    ])


def test_eps_errors(device):
    st = K.CompressorState.allocate(128, 4, device=device)
    kv = torch.zeros(5, 256, device=device)
    ape = torch.zeros(4, 256, device=device)
    w = torch.ones(128, device=device)
    _raises([
        (lambda: K.compress(kv, kv, ape, st, norm_weight=w, eps=-1e-6), ValueError, "eps"),
        (lambda: K.compress(kv, kv, ape, st, norm_weight=w, eps=float("nan")), ValueError, "eps"),
        (lambda: K.compress(kv, kv, ape, st, norm_weight=w, eps=float("inf")), ValueError, "eps"),
        (lambda: K.compress(kv, kv, ape, st, norm_weight=w, eps="1e-6"), TypeError, "eps"),
        (lambda: K.compress(kv, kv, ape, st, norm_weight=w, eps=True), TypeError, "eps"),
    ])
    assert st.next_pos == 0
    one = torch.ones(5, 256, device=device)
    assert K.compress(one, one, ape, st, norm_weight=w, eps=0).shape == (1, 128)  # eps 0 is allowed
