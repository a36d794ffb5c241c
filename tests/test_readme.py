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
