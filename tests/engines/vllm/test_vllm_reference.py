"""kvcalc's vLLM plans of chunked local attention against vLLM 0.33.0's own code.

tests/fixtures/engine-ref/vllm-0.33-llama4.json holds a sample of what scripts/audit/vllm_llama4_reference.py
recorded by running vLLM's planner (get_kv_cache_configs: grouping, PP projection, the minimum over stages, the
null-block check and its refusal), its logged concurrency line, its KV-cache manager's admission
(get_num_blocks_to_allocate with the cap) and the NIXL connector's blocks (the decoder's non-null blocks), on the
CPU with vLLM installed in a scratch environment: Llama-4-Scout and two synthetic Llama 4 stacks (10 layers / 3
full, 12 layers / 5 full, chunk 4,096: padding layers), tp 1-8, pp 1-2, blocks 16-64, bf16 and fp8, contexts 4k-1M,
pools from 0.11 to 60 GiB, with the hybrid manager on and off. The expected figures are vLLM's, not kvcalc's.
"""

import json
import re
from pathlib import Path

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.engines import get_engine
from kvcalc.engines import vllm as V
from kvcalc.errors import KvcalcError
from kvcalc.plan import plan
from kvcalc.transfer import transfer

ROOT = Path(__file__).parents[3]
REF = json.loads((ROOT / "tests" / "fixtures" / "engine-ref" / "vllm-0.33-llama4.json").read_text())
CASES = REF["cases"]
SPEC_KIND = {"ChunkedLocalAttentionSpec": "chunk", "FullAttentionSpec": "full"}


def _model(i):
    name = i["kvcalc_model"]
    return str(ROOT / name) if name.endswith(".yaml") else name


def _settings(i):
    return V.Settings(block_size=i["block_size"], max_num_batched_tokens=i["max_num_batched_tokens"],
                      async_scheduling=i["async_scheduling"], hybrid_kv_cache_manager=i["hybrid_kv_cache_manager"])


def _capacity(i):
    return capacity(_model(i), i["max_model_len"], precision=i["precision"], settings=_settings(i),
                    parallel=Parallel(tp=i["tp"], pp=i["pp"]), kv_memory=i["pool_bytes_per_gpu"],
                    weights_bytes=0)


def test_the_reference_is_vllms_and_covers_the_grid():
    assert REF["vllm_version"] == "0.33.0" and len(CASES) > 300
    inputs = [c["inputs"] for c in CASES]
    assert {i["tp"] for i in inputs} == {1, 2, 4, 8} and {i["pp"] for i in inputs} == {1, 2}
    assert {i["block_size"] for i in inputs} == {16, 32, 64} and {i["precision"] for i in inputs} == {"bf16", "fp8"}
    assert {i["hybrid_kv_cache_manager"] for i in inputs} == {True, False}
    assert any("refused" in c for c in CASES) and any(c.get("nixl") for c in CASES)


@pytest.mark.parametrize("case", [c for c in CASES if "refused" not in c], ids=lambda c: f"case{c['case']}")
def test_the_pool_agrees_with_vllms_planner(case):
    i = case["inputs"]
    c = _capacity(i)
    p = c.plan
    got = dict(bytes_per_block=p.bytes_per_block, num_blocks=c.num_blocks,
               blocks=[g.blocks_per_request for g in p.groups], kinds=[g.kind.value for g in p.groups],
               line=c.log_line)
    want = dict(bytes_per_block=case["bytes_per_block"], num_blocks=case["num_blocks"],
                blocks=case["blocks_per_request_per_group"], kinds=[SPEC_KIND[k] for k in case["group_kinds"]],
                line=case["engine_log_line"])
    assert got == want
    eng = get_engine("vllm")
    for tokens, per_group in case["admission"].items():  # a request longer than max_model_len is never admitted
        if int(tokens) <= i["max_model_len"]:
            assert list(eng.request_blocks(p, int(tokens))) == per_group, tokens


@pytest.mark.parametrize("case", [c for c in CASES if "refused" in c], ids=lambda c: f"case{c['case']}")
def test_a_pool_vllm_refuses_is_refused_with_its_estimate(case):
    with pytest.raises(KvcalcError) as e:
        _capacity(case["inputs"])
    est = re.search(r"estimated maximum model length is ([\d,]+)", str(e.value))
    want = case["refused"]["estimated_max_model_len"]
    assert (int(est.group(1).replace(",", "")) if est else None) == (want or None)


@pytest.mark.parametrize("case", [c for c in CASES if c.get("nixl") and c["inputs"]["pp"] == 1
                                  and c["inputs"]["hybrid_kv_cache_manager"]][:40], ids=lambda c: f"case{c['case']}")
def test_nixl_moves_the_blocks_vllms_decoder_allocates(case):
    i = case["inputs"]
    settings = _settings(i)
    for tokens, per_group in case["nixl"].items():
        t = transfer(_model(i), int(tokens), precision=i["precision"], tp=i["tp"], settings=settings)
        assert [g.units for g in t.plan.groups] == per_group, tokens


def test_a_plan_without_the_manager_is_one_full_group():
    off = [c for c in CASES if not c["inputs"]["hybrid_kv_cache_manager"] and "refused" not in c]
    assert off and all(c["group_kinds"] == ["FullAttentionSpec"] for c in off)
    i = off[0]["inputs"]
    p = plan(_model(i), i["max_model_len"], precision=i["precision"], settings=_settings(i), tp=i["tp"])
    assert len(p.groups) == 1
