"""Every command's --help ends with real examples (kvcalc/cli/examples.py), and every example runs: the files an
example names (vllm.log, sglang.log, config.json) are given from the fixtures, in a temporary folder. verify's
examples run with --fill none (the plan and the allocation; the fill is verify's own tests' subject)."""

import shlex
import shutil
from pathlib import Path

import pytest

from kvcalc.cli.app import app
from kvcalc.cli.examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
FILES = {"vllm.log": "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log",
         "sglang.log": "tests/fixtures/logs/synthetic-sglang-0.5.23-llama-3.1-8b.log",
         "config.json": "tests/fixtures/hf/qwen3-8b.json", "model.gguf": "tests/fixtures/gguf/llamacpp-gpt-oss.gguf"}


def _commands() -> set[str]:
    return {c.name for c in app.registered_commands}


def test_every_command_has_two_or_three_examples_of_itself():
    assert set(EXAMPLES) == _commands()
    for name, lines in EXAMPLES.items():
        assert 1 <= len(lines) <= 3, name
        assert all(line.startswith(f"kvcalc {name}") for line in lines), name
    assert sum(len(v) for v in EXAMPLES.values()) >= 2 * len(EXAMPLES) - 2  # report has one (its other forms need a checkout)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_help_ends_with_the_examples(cli, name):
    out = cli(name, "--help").out
    tail = out[out.index("Examples:"):].splitlines()
    assert tail == ["Examples:"] + [f"  {line}" for line in EXAMPLES[name]]


@pytest.mark.parametrize("line", [line for lines in EXAMPLES.values() for line in lines])
def test_every_example_runs(cli, tmp_path, monkeypatch, line):
    for name, src in FILES.items():
        shutil.copy(ROOT / src, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line)[1:]
    if argv[0] == "verify":
        argv += ["--fill", "none"]
    r = cli(*argv)
    assert r.code == 0, (line, r.err)


def test_capacity_help_groups_its_options_by_engine(cli):
    out = cli("capacity", "--help").out
    sections = [line for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert sections[:5] == ["Arguments:", "Model and context:", "GPUs and parallelism:", "Workload:", "Options:"]
    assert "vLLM 0.33.0 options:" in sections and "SGLang 0.5.23 options:" in sections
    vllm = out[out.index("vLLM 0.33.0 options:"):out.index("SGLang 0.5.23 options:")]
    sglang = out[out.index("SGLang 0.5.23 options:"):out.index("Examples:")]
    assert "--block-size" in vllm and "--mem-fraction-static" not in vllm
    assert "--mem-fraction-static" in sglang and "--block-size" not in sglang
