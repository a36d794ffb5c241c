"""scripts/gpu-check.sh --dry-run, as CI runs it: every step of the GPU check printed with its command line
parsed by the CLI itself, the paths it reads, the memory it needs and its expected figures, so the first GPU run
cannot fail on a typo, a missing flag or a wrong path; and a planted typo is caught."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def test_the_dry_run_checks_every_step():
    # the interpreter running the tests, not `python` from PATH (a venv that is not activated has none with kvcalc)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), "--dry-run"], capture_output=True, text=True,
                       env={**os.environ, "PYTHON": sys.executable})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert "0 problem(s)" in r.stdout and "the limit is 8 min" in r.stdout
    # the headline at 1M needs the V3.2-style stack's 1,408 x 2^20 x 61 B = 83.88 GiB and expects the write-up's
    assert "device memory: 83.88 GiB" in r.stdout and "83.9 GiB (kvcalc 83.88 GiB)" in r.stdout
    # V4-Pro bf16 in the exact layout on the article basis: 10,334,371,840 B (claims.yaml's 9.62 GiB)
    assert "allocated == predicted == 10,334,371,840 B (article basis)" in r.stdout


def test_a_typo_or_a_missing_path_is_caught():
    import gpu_check as G

    typo = G.Step("typo", ("-m", "kvcalc", "verify", "llama-3.1-8b", "--fil", "full"), 10)
    assert "No such option: --fil" in G._check_argv(typo)
    gone = G.Step("gone", ("benchmarks/no_such_bench.py",), 10)
    assert G._check_argv(gone) == "no script benchmarks/no_such_bench.py"
    assert all(G._check_argv(s) is None for s in G.STEPS)
    assert sum(s.timeout_s for s in G.STEPS) <= 480
