"""The README's sample output must be what the code prints today."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(command: str) -> str:
    text = README.read_text()
    m = re.search(r"```text\n\$ " + re.escape(command) + r"\n(.*?)```", text, re.S)
    assert m, f"README has no sample for {command!r}"
    return m.group(1)


def _run(args):
    env = dict(os.environ, COLUMNS="120")
    r = subprocess.run([sys.executable, "-m", "kvcalc", *args], capture_output=True, text=True, env=env)
    out = r.stderr + r.stdout
    return "".join(line.rstrip() + "\n" for line in out.splitlines())


def test_readme_headline_matches():
    assert _block("kvcalc estimate --context 1M") == _run(["estimate", "--context", "1M"])


def test_readme_breakdown_matches():
    args = ["estimate", "deepseek-v4-pro", "--context", "1M", "--precision", "fp8"]
    assert _block("kvcalc " + " ".join(args)) == _run(args)


def test_readme_commands_are_the_ci_ones():
    text = README.read_text()
    assert "kvcalc estimate --context 1M" in text.split("```")[1]
    assert "pytest" in text.split("```")[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "torch==2.13.0" in ci and "pytest" in ci


def test_readme_capacity_matches():
    args = ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--context", "1M",
            "--precision", "fp8"]
    assert _block("kvcalc " + " ".join(args)) == _run(args)


def test_readme_capacity_table_matches():
    import json

    from kvcalc.units import format_bytes

    text = README.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| deepseek-v") and line.count("|") == 11]
    assert len(rows) == 4
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        model, ctx = cells[0], cells[1]
        out = subprocess.run([sys.executable, "-m", "kvcalc", "capacity", model, "--gpu", "h200", "--gpus", "8",
                              "--tp", "8", "-p", "fp8", "-c", ctx, "--json"], capture_output=True, text=True)
        d = json.loads(out.stdout)
        assert cells[2:] == [format_bytes(d["kv_pool_bytes_per_gpu"]), f"{d['bytes_per_block']:,}",
                             f"{d['num_blocks']:,}", f"{d['blocks_per_request']:,}",
                             format_bytes(d["per_request_bytes"]), format_bytes(d["analytic_bytes"]),
                             f"{d['max_concurrency']:.2f}x", f"{d['requests_per_replica']}"], row


def _mask(text: str) -> str:
    """Figures that differ from run to run: timings and the process's resident-memory growth."""
    text = re.sub(r"resident memory \+[\d,]+ B", "resident memory +N B", text)
    return re.sub(r"Fill: .*\n", "Fill: ...\n", text)


def _early(name: str, args: list[str]) -> str:
    """The output of a sample tests/early.py started in the background (the same command line as ``args``)."""
    import early

    assert early.COMMANDS[name][0][3:] == args
    r = early.result(name)
    return "".join(line.rstrip() + "\n" for line in (r.stderr + r.stdout).splitlines())


def test_readme_verify_sample_matches():
    pytest.importorskip("torch")
    args = ["verify", "deepseek-v4-flash", "-p", "fp8", "-c", "2k", "--max-num-batched-tokens", "512"]
    out = _early("test_readme_verify_sample_matches", args)
    assert _mask(_block("kvcalc " + " ".join(args))) == _mask(out)
    # a fresh process: its resident memory grows by at least the storage it allocated (every page touched)
    m = re.search(r"Allocated: ([\d,]+) B storage; resident memory \+([\d,]+) B", out)
    storage, growth = (int(g.replace(",", "")) for g in m.groups())
    assert growth >= 0.9 * storage


def test_readme_sglang_verify_sample_matches():
    pytest.importorskip("torch")
    args = ["verify", "deepseek-v3.2", "--engine", "sglang", "-p", "fp8", "-c", "1k", "--batch", "2"]
    assert _mask(_block("kvcalc " + " ".join(args))) == _mask(_early("test_readme_sglang_verify_sample_matches", args))


def test_readme_verify_table_is_the_committed_reports():
    """The README's verify table is what scripts/verify_table.py makes of reports/verify/*.json."""
    root = README.parent
    r = subprocess.run([sys.executable, str(root / "scripts" / "verify_table.py"), str(root / "reports" / "verify")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    made = [line for line in r.stdout.splitlines() if line.startswith("| deepseek-")]
    shown = [line for line in README.read_text().splitlines() if line.startswith("| deepseek-") and line.count("|") == 16]
    assert made and shown == made


def test_readme_check_log_matches():
    args = ["check-log", "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log"]
    env = dict(os.environ, COLUMNS="120")
    r = subprocess.run([sys.executable, "-m", "kvcalc", *args], capture_output=True, text=True, env=env,
                       cwd=README.parent)
    out = "".join(line.rstrip() + "\n" for line in (r.stderr + r.stdout).splitlines())
    assert _block("kvcalc " + " ".join(args)) == out


def test_readme_command_table_lists_every_flag():
    """Each command's row in the README's command table names every option the command takes (`--[no-]x`
    covers --x and --no-x; any of an option's spellings counts)."""
    import typer

    from kvcalc.cli import app

    rows = [line for line in README.read_text().splitlines() if line.startswith("| `kvcalc ")]
    missing = {}
    for name, command in typer.main.get_command(app).commands.items():
        row = next((r for r in rows if r.startswith(f"| `kvcalc {name}")), None)
        assert row is not None, f"no README row for `kvcalc {name}`"
        for param in command.params:
            spellings = [o for o in param.opts + param.secondary_opts if o.startswith("-")]
            if not spellings or "--help" in spellings:
                continue
            def named(o):
                return o in row or (o.startswith("--no-") and f"--[no-]{o[5:]}" in row) or f"--[no-]{o[2:]}" in row
            if not any(named(o) for o in spellings):
                missing.setdefault(name, []).append(spellings[0])
    assert not missing, missing


@pytest.mark.parametrize("args", [
    ["capacity", "deepseek-v3.2", "--engine", "sglang", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--context", "128k"],
    ["capacity", "deepseek-v3.2", "--engine", "vllm,sglang,exact", "--gpu", "h200", "--gpus", "8", "--tp", "8",
     "--context", "128k"],
    ["capacity", "llama-3.1-70b", "--engine", "vllm,sglang,exact", "--gpu", "h100", "--gpus", "4", "--tp", "4",
     "--context", "128k"],
    ["capacity", "deepseek-v4-pro", "--engine", "vllm,sglang", "--gpu", "h200", "--gpus", "8", "--tp", "8",
     "--context", "1M", "--precision", "fp8"],
])
def test_readme_sglang_samples_match(args):
    assert _block("kvcalc " + " ".join(args)) == _run(args)


def test_readme_sglang_check_log_sample_matches():
    args = ["check-log", "tests/fixtures/logs/sglang-vllm21348-qwen3-235b.log", "--model",
            "tests/fixtures/qwen3-235b-a22b.yaml", "--tp", "4"]
    assert _block("kvcalc " + " ".join(args)) == _run(args)


@pytest.mark.parametrize("args", [
    ["decode", "deepseek-v4-pro", "-p", "fp8", "--gpu", "h200", "--tp", "8", "--batch", "4"],
    ["capacity", "llama-3.1-8b", "--gpu", "h200", "-c", "128k", "--request-tokens", "8k", "--shared-prefix-tokens", "2k"],
    ["transfer", "deepseek-v4-pro", "-p", "fp8", "-c", "1M", "--allow-long-max-model-len", "--link", "ib-ndr"],
])
def test_readme_beyond_the_footprint_samples_match(args):
    """These samples leave lines out (marked `...`): every line shown is in the real output, in order, and the
    runs of lines between the marks are consecutive there."""
    real = _run(args).splitlines()
    runs, cur = [], []
    for line in _block("kvcalc " + " ".join(args)).splitlines():
        if line == "...":
            runs, cur = runs + [cur] if cur else runs, []
        else:
            cur.append(line)
    runs += [cur] if cur else []
    at = 0
    for run in runs:
        starts = [i for i in range(at, len(real) - len(run) + 1) if real[i:i + len(run)] == run]
        assert starts, f"not in the output of kvcalc {' '.join(args)} (in order): {run}"
        at = starts[0] + len(run)


@pytest.mark.parametrize("args", [
    ["capacity", "llama-3.1-70b", "--engine", "trtllm", "--gpu", "h100-sxm", "--gpus", "4", "--tp", "4", "--context",
     "32k", "--host-cache-size", "53687091200"],
    ["check-log", "tests/fixtures/logs/trtllm/gpt-oss-120b-gb10-1.1.0rc3.log", "--model", "gpt-oss-120b"],
])
def test_readme_trtllm_samples_match(args):
    os.chdir(README.parent)
    assert _block("kvcalc " + " ".join(args)) == _run(args)
