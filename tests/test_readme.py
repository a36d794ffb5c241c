"""The README's sample output must be what the code prints today."""

import os
import re
import subprocess
import sys
from pathlib import Path

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
    rows = [line for line in text.splitlines() if line.startswith("| deepseek-v")]
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
