"""The Python API refuses every bad argument with kvcalc's own one-line error naming the parameter: the class
(a list, a set, a mapping, bytes, an array, a masked array, a float, a boolean, a huge int where a name, a flag,
a count or a settings object belongs), for every argument of estimate, plan, capacity and check_log."""

import numpy as np
import pytest

import kvcalc
from kvcalc.capacity import Parallel, capacity
from kvcalc.checklog import check_log
from kvcalc.plan import plan

BAD = [["fp8"], {"fp8"}, {"fp8": 1}, 1.5, b"fp8", True, np.array([1]), np.ma.masked_array([1, 2], [0, 1]), 10**30,
       -1, "nope", object()]
GIB = 1 << 30

CALLS = {
    "estimate.model": lambda v: kvcalc.estimate(v, 1024),
    "estimate.context": lambda v: kvcalc.estimate("llama-3.1-8b", v),
    **{f"estimate.{k}": (lambda k: lambda v: kvcalc.estimate("llama-3.1-8b", 1024, **{k: v}))(k)
       for k in ("precision", "basis", "batch", "mtp", "numpy")},
    "plan.context": lambda v: plan("llama-3.1-8b", v),
    **{f"plan.{k}": (lambda k: lambda v: plan("llama-3.1-8b", 1024, **{k: v}))(k)
       for k in ("precision", "engine", "settings", "mtp", "tp", "stage")},
    "capacity.context": lambda v: capacity("llama-3.1-8b", v, kv_memory=GIB),
    **{f"capacity.{k}": (lambda k: lambda v: capacity("llama-3.1-8b", 1024, **{"kv_memory": GIB, k: v}))(k)
       for k in ("precision", "engine", "settings", "parallel", "mtp")},
    **{f"capacity.{k}": (lambda k: lambda v: capacity("llama-3.1-8b", 1024, **{"gpu": "h200", k: v}))(k)
       for k in ("gpu", "kv_memory", "weights_bytes", "reserve_bytes")},
    "Parallel.tp": lambda v: capacity("llama-3.1-8b", 1024, kv_memory=GIB, parallel=Parallel(tp=v)),
    "check_log.text": lambda v: check_log(v),
    **{f"check_log.{k}": (lambda k: lambda v: check_log("INFO GPU KV cache size: 10 tokens", **{k: v}))(k)
       for k in ("source", "engine", "model", "precision", "settings", "tp")},
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_bad_argument_is_kvcalcs_own_error(call):
    fn = CALLS[call]
    param = call.split(".")[1]
    for v in BAD:
        try:
            fn(v)
        except kvcalc.KvcalcError as exc:
            text = str(exc)
            assert "\n" not in text and len(text) < 400, (call, v)
        except Exception as exc:  # the contract: nothing but KvcalcError
            pytest.fail(f"{call}={v!r}: {type(exc).__name__}: {exc}")
    if param in ("precision", "basis", "mtp", "numpy", "settings", "parallel", "text", "source"):
        with pytest.raises(kvcalc.KvcalcError) as info:
            fn(["x"])
        assert info.value.param in (param, "context", None) or param in str(info.value)


def test_the_messages_name_the_parameter():
    cases = [
        (lambda: kvcalc.estimate("llama-3.1-8b", 1024, precision=["fp8"]), "precision: must be a precision's name"),
        (lambda: kvcalc.estimate("llama-3.1-8b", 1024, basis={"article"}), "basis: must be a name (a string), got a set"),
        (lambda: kvcalc.estimate("llama-3.1-8b", 1024, mtp="yes"), "mtp: must be True or False, got a string"),
        (lambda: kvcalc.estimate("llama-3.1-8b", np.ma.masked_array([1, 2], [0, 1])), "got a masked array"),
        (lambda: capacity("llama-3.1-8b", 1024, kv_memory=GIB, parallel={"tp": 2}),
         "parallel: must be a kvcalc.capacity.Parallel, got a mapping"),
        (lambda: capacity("llama-3.1-8b", 1024, gpu={"name": "h200"}), "gpu: must be a GPU name"),
        (lambda: check_log(b"log"), "text: the log's text must be a string, got bytes"),
    ]
    for fn, fragment in cases:
        with pytest.raises(kvcalc.KvcalcError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            fn()


@pytest.mark.parametrize("engine, values, message", [
    ("vllm", {"block_size": "16"}, "block_size: expected a whole number, got '16'"),
    ("vllm", {"block_size": True}, "block_size: expected a whole number, got True"),
    ("vllm", {"hybrid_kv_cache_manager": "no"}, "hybrid_kv_cache_manager: expected a boolean, got 'no'"),
    ("vllm", {"gpu_memory_utilization": "0.9"}, "gpu_memory_utilization: expected a number, got '0.9'"),
    ("sglang", {"page_size": 1.5}, "page_size: expected a whole number, got 1.5"),
])
def test_engine_settings_of_the_wrong_type_are_refused_by_name(engine, values, message):
    # through the API a setting may arrive as any Python value: a string '16' used to reach the planner's
    # arithmetic (a TypeError), and 'no' passed as true
    from kvcalc.engines import get_engine
    from kvcalc.errors import KvcalcError

    with pytest.raises(KvcalcError) as e:
        get_engine(engine).settings(values)
    assert str(e.value) == message and e.value.param == next(iter(values))
    assert get_engine("vllm").settings({"gpu_memory_utilization": 1}).gpu_memory_utilization == 1  # a whole number is a number
