"""`kvcalc estimate` must never import torch or triton (they cost seconds and are not needed), and a small job
(one or a few contexts) imports neither numpy nor rich (issue 9.4: together about 85 ms of start-up).

The probe installs an import hook that records (and refuses) any attempt to import them, so the test can
fail whether or not the package happens to be installed.
"""

import subprocess
import sys

PROBE = """
import sys

BLOCKED = ("torch", "triton", "kvcalc_kernels")

attempted = []

class Guard:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
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
             ["capacity", "deepseek-v4-pro", "--engine", "vllm,sglang,exact", "--gpu", "h200", "--tp", "8"],
             ["capacity", "qwen3-next-80b-a3b", "--engine", "sglang", "--kv-memory", "40GiB", "--tp", "2"],
             ["check-log", "tests/fixtures/logs/synthetic-sglang-0.5.23-llama-3.1-8b.log"],
             ["sweep", "llama-3.1-8b", "deepseek-v4-pro", "-c", "1k..1M", "--format", "json"],
             ["estimate", "--hf", "tests/fixtures/hf/qwen3-next-80b-a3b.json"],
             ["decode", "deepseek-v4-pro", "-p", "fp8", "--gpu", "h200", "--tp", "8", "-c", "128k", "-b", "16"],
             ["transfer", "deepseek-v4-pro", "-p", "fp8", "-c", "1048575"], ["transfer", "qwen3.5-9b", "--engine", "sglang"],
             ["report", "--check"]):
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


SMALL_JOBS = [
    ["estimate", "deepseek-v4-pro", "--context", "1M"], ["estimate", "--context", "1M"],
    ["estimate", "--context", "1M", "--json"], ["estimate", "deepseek-v4-flash", "--by-layer", "-c", "4k,1M"],
    ["estimate", "--hf", "tests/fixtures/hf/qwen3-next-80b-a3b.json"], ["compare", "deepseek-v3.2", "deepseek-v4-pro"],
    ["show", "deepseek-v4-flash"], ["models"], ["claims"], ["gpus"],
    ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-p", "fp8"],
    ["capacity", "deepseek-v3.2", "--engine", "sglang", "--gpu", "h200", "--tp", "8"],
    ["check-log", "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log"],
    ["decode", "deepseek-v4-pro", "-p", "fp8", "--gpu", "h200", "--tp", "8", "-c", "128k", "-b", "16"],
    ["transfer", "deepseek-v4-pro", "-p", "fp8", "-c", "1M", "--allow-long-max-model-len", "--link", "ib-ndr"],
]


def _small_job_probe() -> str:
    jobs = "(" + ", ".join(repr(a) for a in SMALL_JOBS) + ",)"
    start = PROBE.index("for argv in (")
    end = PROBE.index(":\n", PROBE.index('["report", "--check"])'))
    return (PROBE[:start].replace('BLOCKED = ("torch", "triton", "kvcalc_kernels")',
                                  'BLOCKED = ("torch", "triton", "kvcalc_kernels", "numpy", "rich")')
            + f"for argv in {jobs}" + PROBE[end:])


def test_small_jobs_import_neither_numpy_nor_rich():
    probe = _small_job_probe()
    assert '"numpy", "rich")' in probe and "gpus" in probe and '"sweep"' not in probe
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ATTEMPTED: []" in r.stderr


def test_many_contexts_do_use_numpy_and_agree():
    # above kvcalc.vec.SMALL contexts the command line computes on numpy arrays; the totals are the same
    # numbers: 300 contexts of llama-3.1-8b bf16 at L = 1..300 tokens are 32 layers x 8 heads x 2 x 128 x 2 B
    # = 131,072 B per token
    probe = ("import sys, json, io, contextlib\nfrom kvcalc.cli import main\nbuf = io.StringIO()\n"
             "with contextlib.redirect_stdout(buf):\n"
             "    try:\n        main(['estimate', 'llama-3.1-8b', '-c', ','.join(map(str, range(1, 301))), '--json', "
             "'--compact'])\n    except SystemExit as e:\n        assert e.code in (0, None)\n"
             "out = json.loads(buf.getvalue())\nprint('numpy' in sys.modules, out[0]['per_sequence_bytes'][-1], "
             "len(out[0]['context_tokens']))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", str(300 * 131_072), "300"]
