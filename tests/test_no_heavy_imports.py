"""`kvcalc estimate` must never import torch or triton (they cost seconds and are not needed).

The probe installs an import hook that records (and refuses) any attempt to import them, so the test can
fail whether or not torch happens to be installed.
"""

import subprocess
import sys

PROBE = """
import sys

attempted = []

class Guard:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton", "kvcalc_kernels"):
            attempted.append(name)
            raise ImportError("blocked by test: " + name)
        return None

sys.meta_path.insert(0, Guard())
from kvcalc.cli import main
for argv in (["estimate", "--context", "1M", "--json"], ["estimate", "deepseek-v4-pro", "--by-layer"],
             ["compare", "deepseek-v3.2", "deepseek-v4-pro"], ["show", "deepseek-v4-flash"], ["claims"],
             ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-p", "fp8", "--json"],
             ["capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "-c", "8k", "--concurrency", "4"], ["gpus"],
             ["check-log", "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log"],
             ["sweep", "llama-3.1-8b", "deepseek-v4-pro", "-c", "1k..1M", "--format", "json"],
             ["estimate", "--hf", "tests/fixtures/hf/qwen3-next-80b-a3b.json"], ["report", "--check"]):
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, None), (argv, exc.code)
print("ATTEMPTED:", attempted, file=sys.stderr)
"""


def test_estimate_never_imports_torch_or_triton():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "ATTEMPTED: []" in r.stderr


def test_the_guard_would_catch_an_import():
    # the same guard, proven to see a torch import when one happens
    probe = PROBE.replace("from kvcalc.cli import main", "from kvcalc.cli import main\ntry:\n    import torch\nexcept ImportError:\n    pass")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "ATTEMPTED: ['torch']" in r.stderr
