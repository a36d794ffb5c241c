#!/usr/bin/env python
"""The fuzz run for the record: 20,000+ generated cases over every surface kvcalc reads (tests/fuzzsurfaces.py:
every command's own flags, mutated YAML with aliases and tags, every family's config.json with fields of the wrong
type or size, vLLM and SGLang logs with hostile numbers and lines, every writing command's output paths, the API
with every argument), plus free-form command-line tokens and the engine grid (every model on every engine with
each engine's options). The same contract as tests/test_fuzz.py (which runs a bounded slice of each surface).
Deterministic seeds; the working directory is a scratch folder, so nothing in the checkout is written.
Writes reports/fuzz.json: cases, outcomes and the slowest case per surface, the process's peak memory.

    python scripts/fuzz.py                  # about 24,000 cases
    python scripts/fuzz.py --scale 0.1 --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import fuzzsurfaces as FS  # noqa: E402
from fuzzcases import COMMANDS, FLAGS, VALUES, classify, run_cli  # noqa: E402

JUNK = ["", "\x00", "\u2603", "1" * 5000, "-" * 3, "--context=1M", "=", "{}", "[1,2]", "~", "null"]
#: cases per surface at --scale 1
PLAN = {"flags": 6000, "yaml": 3000, "config.json": 3000, "logs": 3000, "outputs": 1500, "api": 3000, "tokens": 2000,
        "inputs": 400, "gguf": 3000, "engines": 2000}
FS.BIG_BYTES = 64 << 20  # check-log's read limit: every big input file at its full size
LIMIT_S = 5.0
LIMIT_RSS_MB = 500  # the most one case may raise the process's peak resident memory


def _warm() -> None:
    """verify's heavy imports (torch, triton, the kernels) once, before any case: what a case then adds to the
    peak is its own; the imports' share is reported as the baseline."""
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401

        import kvcalc_kernels  # noqa: F401
        from kvcalc.verify import fill  # noqa: F401
    except ImportError:
        pass


def token(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return rng.choice(FLAGS)
    if r < 0.85:
        return rng.choice(VALUES)
    if r < 0.95:
        return rng.choice(JUNK)
    return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(0, 12)))


#: option sets of each engine (and shared ones) that the engine grid crosses with models and layouts
ENGINE_FLAGS = {
    "vllm": [[], ["--block-size", "64"], ["--no-async-scheduling"], ["--no-prefix-caching"],
             ["--no-hybrid-kv-cache-manager"]],
    "sglang": [[], ["--max-running-requests", "64"], ["--page-size", "64"], ["--mem-fraction-static", "0.5"],
               ["--enable-dp-attention", "--dp", "2"], ["--max-total-tokens", "100000"],
               ["--disable-overlap-schedule"], ["--disable-radix-cache", "--max-running-requests", "64"],
               ["--mamba-radix-cache-strategy", "extra_buffer_lazy"], ["--max-mamba-cache-size", "100"]],
    "exact": [[]],
    "vllm,sglang,exact": [[]],
}


#: one GPU of each architecture other than Hopper's: Ampere, Blackwell, Blackwell consumer (SM120), ROCm
ARCH_GPUS = ("a100-80gb", "b200", "rtx-5090", "mi300x")


def engine_grid(configs) -> list[list[str]]:
    """capacity for every shipped model x engine x tp x budget x option set, plus --concurrency and --json, and on
    one GPU of each other architecture; transfer for every model x engine x tp (and on those GPUs), and decode on
    a GPU; capacity and transfer in JSON at 1 and 100 tokens and with each option set, where classify holds the
    reserve to what it holds."""
    out = []
    for cfg in configs:
        for engine, sets in ENGINE_FLAGS.items():
            for tp in ("1", "8"):
                for budget in (["--gpu", "h200"], ["--kv-memory", "40GiB"]):
                    for extra in sets + [["--concurrency", "2"], ["--json", "-p", "fp8"]]:
                        tp_args = ["--tp", "2" if "--dp" in extra else tp]
                        out.append(["capacity", cfg.stem, "--engine", engine, "-c", "128k", *tp_args, *budget, *extra])
        for engine in ("vllm", "sglang", "exact"):  # the transfer each engine's connector moves, and decode's floor
            for tp in ("1", "8"):
                out.append(["transfer", cfg.stem, "--engine", engine, "-c", "8k", "--tp", tp, "--json"])
            # a reserve against what it holds (classify checks the JSON) where windows and state are not yet full
            for ctx in ("1", "100"):
                out.append(["transfer", cfg.stem, "--engine", engine, "-c", ctx, "--json"])
                out.append(["capacity", cfg.stem, "--engine", engine, "-c", ctx, "--kv-memory", "40GiB", "--json"])
        for engine, sets in ENGINE_FLAGS.items():  # each engine's option sets, in JSON: the reserve checked too
            for extra in sets:
                tp_args = ["--tp", "2" if "--dp" in extra else "8"]
                out.append(["capacity", cfg.stem, "--engine", engine, "-c", "32k", "--kv-memory", "40GiB", *tp_args,
                            *extra, "--json"])
        out.append(["decode", cfg.stem, "--gpu", "h200", "-b", "64", "--json"])
        for engine in ("vllm", "sglang"):  # each architecture's kernels and pages (gpus.yaml arch)
            for gpu in ARCH_GPUS:
                out.append(["capacity", cfg.stem, "--engine", engine, "--gpu", gpu, "--kv-memory", "40GiB", "--tp", "8",
                            "-c", "32k", "--json"])
                out.append(["transfer", cfg.stem, "--engine", engine, "--gpu", gpu, "--tp", "8", "-c", "8k", "--json"])
    return out


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="cases per surface x this (default 1: 21,500 + the grid)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--no-grid", action="store_true", help="leave out the engine grid (for 27 models: 2,997 capacity runs, 540 transfer and 27 decode runs)")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    outcomes: dict[str, Counter] = defaultdict(Counter)
    slowest: dict[str, tuple[float, str]] = {}
    failures: list[str] = []
    t0 = time.perf_counter()
    _warm()
    baseline = _rss_mb()
    options = FS.command_options()
    commands_run: Counter = Counter()

    def record(surface: str, label: str, seconds: float, outcome: str | None, error: str | None) -> None:
        if outcome is not None:
            outcomes[surface][outcome] += 1
        if error is not None:
            outcomes[surface]["FAILED"] += 1
            failures.append(f"{surface}: {error[:600]}")
        if seconds > slowest.get(surface, (0.0, ""))[0]:
            slowest[surface] = (seconds, label[:200])
        if seconds > LIMIT_S:
            failures.append(f"{surface}: {seconds:.1f} s: {label[:300]}")

    steps: list[tuple[float, str]] = []  # (peak-RSS rise in MB, case): what raised the process's peak

    def drive(surface: str, argv: list[str]) -> None:
        commands_run[argv[0] if argv else ""] += 1
        before = _rss_mb()
        res = run_cli(argv)
        rise = _rss_mb() - before
        if rise > 20:
            steps.append((rise, f"{surface}: {argv!r}"[:300]))
        if rise > LIMIT_RSS_MB:
            failures.append(f"{surface}: raised the peak resident memory by {rise:.0f} MB: {argv!r}"[:400])
        try:
            record(surface, repr(argv), res[3], classify(argv, *res, limit_s=1e9), None)
        except AssertionError as exc:
            record(surface, repr(argv), res[3], None, str(exc))

    with tempfile.TemporaryDirectory(prefix="kvcalc-fuzz-") as tmp:
        scratch = Path(tmp)
        old = FS.chdir_scratch(scratch)
        try:
            for surface, n in PLAN.items():
                for _ in range(int(n * a.scale)):
                    if surface == "tokens":
                        drive("tokens", [rng.choice(COMMANDS)] + [token(rng) for _ in range(rng.randrange(0, 7))])
                        continue
                    c = FS.case(surface, rng, scratch, options)
                    if c[0] == "cli":
                        drive(surface, c[1])
                    else:
                        t = time.perf_counter()
                        try:
                            out, err = FS.run_api(c[1], c[2]), None
                        except AssertionError as exc:
                            out, err = None, str(exc)
                        record(surface, c[1], time.perf_counter() - t, out, err)
                if surface == "outputs":
                    if not FS.specials_intact(scratch):
                        failures.append("outputs: a write replaced a FIFO or a device node")
                    if not FS.victim_intact(scratch):
                        failures.append("outputs: a write followed a link and overwrote its target")
                    if FS.leftovers(scratch):
                        failures.append(f"outputs: temporary files left behind: {FS.leftovers(scratch)[:3]}")
            if not a.no_grid:
                for argv in engine_grid(FS.CONFIGS):
                    drive("engines", argv)
        finally:
            os.chdir(old)
    rss = _rss_mb()
    out = {
        "cases": sum(sum(c.values()) for c in outcomes.values()), "seed": a.seed, "scale": a.scale,
        "seconds": round(time.perf_counter() - t0, 1),
        "surfaces": {s: {"cases": sum(c.values()), "outcomes": dict(sorted(c.items())),
                         "slowest_seconds": round(slowest.get(s, (0.0, ""))[0], 3),
                         "slowest_case": slowest.get(s, (0.0, ""))[1]} for s, c in outcomes.items()},
        "commands": dict(sorted(commands_run.items())),
        "commands_not_reached": sorted(set(options) - set(commands_run)),
        "failures": len(failures), "first_failures": failures[:20],
        "baseline_rss_mb": round(baseline), "peak_rss_mb": round(rss),
        "peak_rss_rises": [{"mb": round(mb), "case": c} for mb, c in sorted(steps, reverse=True)[:8]],
        "limits": {"seconds_per_case": LIMIT_S, "peak_rss_rise_mb_per_case": LIMIT_RSS_MB},
        "contract": "exit 0 with finite non-negative numbers (in JSON, no reserve smaller than what it holds: "
                    "capacity, transfer, verify), or exit 2 with one 'kvcalc: error:' line, or a "
                    "claims/check-log/verify verdict (exit 1); the API raises only KvcalcError, one line; never a "
                    "traceback or an internal error; no write follows a link or leaves a temporary file",
    }
    print(json.dumps(out, indent=2))
    if not a.no_write:
        (ROOT / "reports" / "fuzz.json").write_text(json.dumps(out, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
