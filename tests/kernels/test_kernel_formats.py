"""Byte layouts as constants: they must reproduce the published entry sizes and tile each record."""

import pytest

from kvcalc_kernels import formats as F


@pytest.mark.parametrize("fmt,size", [("fp8_ds_mla_v4", 584), ("fp8_ds_mla", 656), ("fp8_indexer", 132),
                                      ("fp4_indexer", 68)])
def test_entry_bytes(fmt, size):
    f = F.get_format(fmt)
    assert f.entry_bytes == size
    assert f.quant_bytes + f.rope_bytes + f.scale_part_bytes == size


def test_bf16_entry_bytes():
    assert F.get_format("bf16", 512).entry_bytes == 1024
    assert F.get_format("bf16", 576).entry_bytes == 1152
    with pytest.raises(ValueError, match="^fmt:"):
        F.get_format("bf16")


@pytest.mark.parametrize("fmt", ["fp8_ds_mla_v4", "fp8_ds_mla", "fp8_indexer", "fp4_indexer"])
def test_regions_tile_the_record(fmt):
    f = F.get_format(fmt)
    at = 0
    for _, start, end in f.regions():
        assert start == at and end > start
        at = end
    assert at == f.entry_bytes


def test_exact_offsets():
    v4 = dict((n, (a, b)) for n, a, b in F.FP8_DS_MLA_V4.regions())
    assert v4 == {"quant": (0, 448), "rope": (448, 576), "scales": (576, 583), "pad": (583, 584)}
    v32 = dict((n, (a, b)) for n, a, b in F.FP8_DS_MLA_V32.regions())
    assert v32 == {"quant": (0, 512), "scales": (512, 528), "rope": (528, 656)}
    assert dict((n, (a, b)) for n, a, b in F.FP8_INDEXER.regions()) == {"quant": (0, 128), "scales": (128, 132)}
    assert dict((n, (a, b)) for n, a, b in F.FP4_INDEXER.regions()) == {"quant": (0, 64), "scales": (64, 68)}


def test_page_layouts():
    v4 = F.page_layout("fp8_ds_mla_v4", 64, F.V4_PAGE_ALIGNMENT)
    assert (v4.page_bytes, v4.data_offset(3), v4.scale_offset(3)) == (37440, 3 * 576, 64 * 576 + 24)
    assert v4.record_spans(3) == [(0, 1728, 576), (576, 36864 + 24, 8)]
    v32 = F.page_layout("fp8_ds_mla", 64)
    assert (v32.page_bytes, v32.data_offset(3), v32.scale_offset(3)) == (64 * 656, 3 * 656, 3 * 656 + 512)
    idx = F.page_layout("fp4_indexer", 64, 576)
    assert (idx.page_bytes, idx.scale_offset(1)) == (4608, 64 * 64 + 4)
    rec = F.record_layout("fp8_ds_mla_v4")
    assert (rec.page_bytes, rec.scale_offset(0)) == (584, 576)
    with pytest.raises(ValueError, match="^page_bytes:"):
        F.page_layout("fp8_ds_mla_v4", 64, page_bytes=1000)
    with pytest.raises(ValueError, match="^block_size:"):
        F.page_layout("fp8_ds_mla_v4", 0)


@pytest.mark.parametrize("fmt,dim,rope", [("fp8_ds_mla_v4", 512, 64), ("fp8_ds_mla", 576, 64),
                                          ("fp8_indexer", 128, 0), ("fp4_indexer", 128, 0)])
def test_kernel_layouts_agree_with_the_analytic_core(fmt, dim, rope):
    # the bytes the kernels write per entry are the bytes kvcalc estimate counts per entry
    from kvcalc.formats import FORMATS

    assert F.get_format(fmt).entry_bytes == FORMATS[fmt].entry_bytes(dim, rope)
    assert F.get_format("bf16", dim).entry_bytes == FORMATS["bf16"].entry_bytes(dim, rope)


def test_kernel_modules_import_without_cycles():
    # addressing is the bottom layer: writers import it, it imports no writer (issue 6: paged and quant
    # used to import each other)
    import ast
    import pathlib

    import kvcalc_kernels

    root = pathlib.Path(kvcalc_kernels.__file__).parent
    graph = {}
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module] if node.module else [a.name for a in node.names])
        graph[path.stem] = {d for d in deps if d != "__init__"}
    assert "quant" not in graph["addressing"] and "paged" not in graph["addressing"]
    assert "addressing" in graph["quant"] and "addressing" in graph["paged"]

    def reaches(a, b, seen=()):
        return any(d == b or (d not in seen and reaches(d, b, seen + (d,))) for d in graph.get(a, ()))

    assert not [m for m in graph if reaches(m, m)], graph


def test_layout_comes_from_the_core_single_source():
    # the kernels hold no byte offsets of their own: change the core's record and the kernels follow
    from kvcalc.formats import FORMATS

    for name, dim, rope in [("fp8_ds_mla_v4", 512, 64), ("fp8_ds_mla", 576, 64), ("fp8_indexer", 128, 0),
                            ("fp4_indexer", 128, 0)]:
        assert F.get_format(name).layout == FORMATS[name].layout(dim, rope)
