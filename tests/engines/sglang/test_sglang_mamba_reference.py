"""kvcalc's SGLang Mamba state options against SGLang 0.5.23's own code.

tests/fixtures/engine-ref/sglang-0.5.23-mamba.json holds what scripts/audit/sglang_mamba_reference.py recorded by
running SGLang's server-argument resolution (ServerArgs.resolve_once: the model overrides, handle_mamba_radix_cache,
validate_mamba_extra_buffer / validate_mamba_no_buffer, _pipeline_parallel_overlap_disable) and its state-pool
sizing (_calculate_mamba_ratio, _handle_max_mamba_cache, resolve_max_num_reqs) on the CPU, SGLang installed in a
scratch environment: Qwen3-Next-80B, Nemotron-H-56B and Qwen3.5-9B at tp 2 on SM90 and SM100, every
--mamba-radix-cache-strategy, with and without --disable-overlap-schedule and --disable-radix-cache, page 1 / 64
/ 100, pp 1 / 2, and --max-running-requests 64 or --max-mamba-cache-size 200, from a 40 GiB budget. The expected
figures are SGLang's, not kvcalc's.
"""

import json
from pathlib import Path

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.engines import get_engine
from kvcalc.errors import KvcalcError
from kvcalc.present.flags import FLAGS

ROOT = Path(__file__).parents[3]
REF = json.loads((ROOT / "tests" / "fixtures" / "engine-ref" / "sglang-0.5.23-mamba.json").read_text())
CASES = REF["cases"]
SG = get_engine("sglang")
GIB = 1 << 30

# the fixture is SGLang's and covers the grid (checked on loading: these hold whatever kvcalc does)
assert REF["sglang_version"] == "0.5.23" and len(CASES) > 500
assert {c["inputs"]["strategy"] for c in CASES} == {"auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"}
assert {c["inputs"]["sm"] for c in CASES} == {90, 100} and {c["inputs"]["pp"] for c in CASES} == {1, 2}
assert {c["sizing"].get("mamba_ratio") for c in CASES if "sizing" in c} - {None} == {1, 3, 4, 5}
assert len({c["refused"] for c in CASES if "refused" in c}) == 5


def _settings(i: dict):
    given = {"mamba_radix_cache_strategy": i["strategy"], "disable_overlap_schedule": i["disable_overlap_schedule"],
             "disable_radix_cache": i["disable_radix_cache"], "page_size": i["page_size"],
             "arch": f"sm{i['sm']}", "max_running_requests": i.get("max_running_requests"),
             "max_mamba_cache_size": i.get("max_mamba_cache_size")}
    return SG.settings({k: v for k, v in given.items() if v is not None})


def _capacity(i: dict):
    return capacity(i["kvcalc_model"], i["context"], engine="sglang", settings=_settings(i),
                    kv_memory=int(i["rest_gib"] * GIB), parallel=Parallel(tp=i["tp"], pp=i["pp"]))


def _sglang_words(refused: str) -> str:
    """The message SGLang raised, without its exception type."""
    return refused.split(": ", 1)[1] if ": " in refused else ""


@pytest.mark.parametrize("case", [c for c in CASES if "refused" in c], ids=lambda c: f"case{c['case']}")
def test_sglangs_refusals_are_kvcalcs(case):
    with pytest.raises(KvcalcError) as e:
        _capacity(case["inputs"])
    words = _sglang_words(case["refused"])
    if words:  # SGLang's own words in kvcalc's one line (as the command line names the flags)
        assert words in e.value.renamed(FLAGS)
    else:  # a bare AssertionError: validate_mamba_extra_buffer's track-interval assert (page 100)
        assert "mamba_track_interval (256) % page_size == 0" in str(e.value)


@pytest.mark.parametrize("case", [c for c in CASES if "sizing" in c], ids=lambda c: f"case{c['case']}")
def test_the_state_pool_and_request_cap_agree_with_sglang(case):
    i, z, r = case["inputs"], case["sizing"], case["resolved"]
    if "refused" in z:  # refused while sizing: the lazy strategy's assert, no room left, no request fits
        with pytest.raises(KvcalcError) as e:
            _capacity(i)
        words = "Loaded weights leave no GPU memory" if z["refused"].startswith("rest_memory") else \
            _sglang_words(z["refused"]).split(" Try:")[0].split(" (total_rest_memory")[0]
        assert words in e.value.renamed(FLAGS)
        return
    c = _capacity(i)
    j, p = c.fit.figures, c.plan  # SGLang's figures (engines/sglang/figures.py)
    lay = p.pools.layout
    assert lay.page == (r["page_size"] or 1)
    assert lay.slots_per_request == z["mamba_ratio"]
    assert j.max_mamba_cache_size == z["max_mamba_cache_size"]
    if i["pp"] == 1:
        assert lay.state_per_request == z["mamba_cache_per_req"]
        assert j.kv_available_bytes == z["available_bytes"] and j.cell_size_bytes == z["cell"]
        assert j.max_total_num_tokens == z["max_total_num_tokens"]
        assert j.max_running_requests == z["max_running_requests"]
    if r["disable_radix_cache"]:
        assert not lay.radix
    else:
        assert lay.mamba_strategy == r["mamba_radix_cache_strategy"]
        assert lay.overlap == (not r["disable_overlap_schedule"])
