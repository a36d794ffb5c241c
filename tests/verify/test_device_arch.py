"""verify on CUDA plans the engine's layout for the device's own architecture (its kernels pick the blocks and
rows); the CPU plans Hopper's. No GPU here: torch's device queries are stood in for."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from kvcalc.engines import get_engine
from kvcalc.errors import KvcalcError
from kvcalc.plan import plan
from kvcalc.verify import on_arch
from kvcalc.verify import measure

MODELS = sorted(p.stem for p in (Path(__file__).parents[2] / "kvcalc" / "data" / "configs").glob("*.yaml"))


def _fake_torch(capability=(9, 0), hip=None, gcn=""):
    props = SimpleNamespace(gcnArchName=gcn)
    cuda = SimpleNamespace(get_device_capability=lambda *a: capability, current_device=lambda: 0,
                           get_device_properties=lambda i: props)
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(hip=hip))


@pytest.mark.parametrize("capability,hip,gcn,want", [
    ((9, 0), None, "", "sm90"), ((10, 0), None, "", "sm100"), ((12, 0), None, "", "sm120"),
    ((8, 9), None, "", "sm89"), ((8, 0), None, "", "sm80"),
    ((9, 4), "6.2", "gfx942:sramecc+:xnack-", "gfx942"),  # ROCm: the gfx target, its feature flags dropped
])
def test_the_device_architecture_in_the_catalogue_spelling(monkeypatch, capability, hip, gcn, want):
    monkeypatch.setattr(measure, "_torch", lambda: _fake_torch(capability, hip, gcn))
    assert measure.device_arch("cuda") == want
    assert measure.device_arch("cpu") is None


def test_the_architecture_sets_the_layout_where_left_unset():
    # DeepSeek-V3 bf16 on vLLM: FLASH_ATTN_MLA's blocks of 16 on Hopper, FlashInfer MLA's 32 on Blackwell
    assert plan("deepseek-v3", 8192, settings=on_arch("vllm", None, None)).groups[0].block_size == 16
    assert plan("deepseek-v3", 8192, settings=on_arch("vllm", None, "sm100")).groups[0].block_size == 32
    given = get_engine("vllm").settings({"arch": "sm90"})
    assert on_arch("vllm", given, "sm100").arch == "sm90"  # set by the caller: kept
    assert not hasattr(on_arch("exact", None, "sm100"), "arch")  # no kernels: nothing to set
    with pytest.raises(KvcalcError, match="sm80"):  # vLLM has no DeepSeek V4 kernel on Ampere, as it refuses
        plan("deepseek-v4-flash", 8192, settings=on_arch("vllm", None, "sm80"))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_hopper_by_name_plans_as_no_gpu_named(engine):
    """gpu-check.sh runs on an H200 (sm90): its plans must be the ones the CPU tests pin (arch None)."""
    for model in MODELS:
        def shape(arch):
            try:
                p = plan(model, 8192, engine=engine, settings=on_arch(engine, None, arch))
            except KvcalcError as exc:
                return str(exc)
            return (p.precision, p.per_request_bytes, p.unit_bytes,
                    [(g.block_size, g.page_bytes) for g in p.groups])
        assert shape("sm90") == shape(None), model
