"""docs/api.md's examples and kvcalc.api's docstrings run as written: the Python API's results, their text, their
JSON (equal to the command's --json) and their errors. Each figure in them is derived by hand beside it."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import kvcalc
import kvcalc.api

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_document_runs():
    r = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert r.attempted >= 15 and r.failed == 0


def test_the_docstrings_run():
    r = doctest.testmod(kvcalc.api)
    assert r.attempted >= 8 and r.failed == 0


@pytest.mark.parametrize("argv, call", [
    (["capacity", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "-c", "32k"],
     lambda: kvcalc.capacity("llama-3.1-70b", 32768, gpu="h100-sxm", tp=8)),
    (["fit", "gpt-oss-120b", "-c", "128k", "-n", "16", "--gpu", "h100-sxm", "--engine", "vllm", "-p", "fp8"],
     lambda: kvcalc.fit("gpt-oss-120b", 131072, 16, gpus=["h100-sxm"], engines=["vllm"], precisions=["fp8"])),
    (["decode", "deepseek-v4-pro", "-c", "1M"], lambda: kvcalc.decode("deepseek-v4-pro", 1 << 20)),
    (["transfer", "llama-3.1-8b", "-c", "8k", "--engine", "sglang"],
     lambda: kvcalc.transfer("llama-3.1-8b", 8192, engine="sglang")),
])
def test_to_json_is_the_commands_json_and_str_its_text(cli, argv, call):
    r = call()
    out = cli(*argv, "--json")
    assert out.code == 0, out.err
    got, want = r.to_json(), json.loads(out.out)
    got.pop("seconds", None), want.pop("seconds", None)  # fit's time
    assert got == want
    text = cli(*argv)
    first = text.out.splitlines()[0].split(" planned in ")[0]  # fit's first line ends with its time
    assert str(r).splitlines()[0].split(" planned in ")[0] == first
    html = r._repr_html_()
    assert html.startswith('<div class="kvcalc">') and "<table>" in html


def test_the_commands_are_callable_modules():
    import kvcalc.capacity as module

    assert callable(kvcalc.capacity) and module is kvcalc.capacity  # the library module, and the API when called
    assert module.capacity is not kvcalc.capacity  # the library's own function is still there
    assert repr(kvcalc.estimate("llama-3.1-8b", [1024, 2048])).startswith("<kvcalc Estimate: llama-3.1-8b")
    assert len(repr(kvcalc.estimate("deepseek-v4-pro", 1 << 20))) < 300  # not a dump of every layer
