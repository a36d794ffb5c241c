#!/usr/bin/env python
"""The fuzz run for the record: 10,000+ generated cases (CLI arguments, mutated configs, API calls), the same
properties as tests/test_fuzz.py (tests/fuzzcases.py), deterministic seeds. Writes reports/fuzz.json.

    python scripts/fuzz.py                 # about 12,000 cases, a few minutes on 2 cores
    python scripts/fuzz.py --cases 2000 --no-write
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402

import kvcalc  # noqa: E402
from fuzzcases import COMMANDS, FLAGS, VALUES, classify, mutate_yaml, run_cli  # noqa: E402

JUNK = ["", "\x00", "\u2603", "1" * 5000, "-" * 3, "--context=1M", "=", "{}", "[1,2]", "~", "null"]


def token(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return rng.choice(FLAGS)
    if r < 0.85:
        return rng.choice(VALUES)
    if r < 0.95:
        return rng.choice(JUNK)
    return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(0, 12)))


def api_value(rng: random.Random):
    return rng.choice([None, 1.5, float("nan"), float("inf"), -1, 0, 1, 1 << 40, 1 << 70, True, "1024", b"1024",
                       [1, 2], [True], [1.0], [[1]], {"a": 1}, np.int64(5), np.array([1, 2]), np.array([[1]]),
                       np.array([1.5]), np.array([2**63 - 1], dtype=np.uint64), "llama-3.1-8b", Path("x")])


#: option sets of each engine (and shared ones) that the engine grid crosses with models and layouts
ENGINE_FLAGS = {
    "vllm": [[], ["--block-size", "64"], ["--no-async-scheduling"], ["--no-prefix-caching"]],
    "sglang": [[], ["--max-running-requests", "64"], ["--page-size", "64"], ["--mem-fraction-static", "0.5"],
               ["--enable-dp-attention", "--dp", "2"], ["--max-total-tokens", "100000"]],
    "exact": [[]],
    "vllm,sglang,exact": [[]],
}


def engine_grid(configs) -> list[list[str]]:
    """capacity for every shipped model x engine x tp x budget x option set, plus --concurrency and --json."""
    out = []
    for cfg in configs:
        for engine, sets in ENGINE_FLAGS.items():
            for tp in ("1", "8"):
                for budget in (["--gpu", "h200"], ["--kv-memory", "40GiB"]):
                    for extra in sets + [["--concurrency", "2"], ["--json", "-p", "fp8"]]:
                        tp_args = ["--tp", "2" if "--dp" in extra else tp]
                        out.append(["capacity", cfg.stem, "--engine", engine, "-c", "128k", *tp_args, *budget, *extra])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=12_000)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    configs = sorted((ROOT / "kvcalc" / "data" / "configs").glob("*.yaml"))
    outcomes: Counter = Counter()
    failures: list[str] = []
    slowest = 0.0

    def drive(label: str, argv: list[str], prefix: str = "") -> None:
        """Run one command line and record its outcome, or the contract it broke."""
        nonlocal slowest
        res = run_cli(argv)
        slowest = max(slowest, res[3])
        try:
            outcomes[f"{label} " + classify(argv, *res)] += 1
        except AssertionError as exc:
            failures.append(f"{prefix}{str(exc)[:600]}")

    n_cli, n_cfg = int(a.cases * 0.5), int(a.cases * 0.25)
    n_api = a.cases - n_cli - n_cfg
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(n_cli):
            drive("cli", [rng.choice(COMMANDS)] + [token(rng) for _ in range(rng.randrange(0, 7))])
        for i in range(n_cfg):
            cfg = rng.choice(configs)
            path = Path(tmp) / f"m{i % 50}.yaml"
            path.write_text(mutate_yaml(cfg.read_text(), rng.randrange(10_000), rng.choice(VALUES)))
            argv = [rng.choice(["estimate", "show", "capacity"]), str(path)] + (
                ["--kv-memory", "40GiB", "-c", "128k"] if rng.random() < 0.3 else [])
            if argv[0] == "capacity" and "--kv-memory" not in argv:
                argv += ["--kv-memory", "40GiB", "-c", "128k"]
            drive("config", argv, f"{cfg.name}: ")
        for argv in engine_grid(configs):  # every model on every engine, with each engine's own options
            drive("engines", argv)
        for _ in range(n_api):
            model, context = rng.choice(["llama-3.1-8b", "deepseek-v4-pro", api_value(rng)]), api_value(rng)
            use_numpy = rng.random() < 0.5  # both vector kinds (kvcalc.vec): numpy arrays and Python ints
            t = time.perf_counter()
            try:
                e = kvcalc.estimate(model, context, numpy=use_numpy)
                seq = np.asarray(e.per_sequence)
                ok = seq.dtype.kind == "i" and bool((seq >= 0).all()) and all(math.isfinite(float(x)) for x in seq)
                outcomes["api ok" if ok else "api BAD NUMBERS"] += 1
                if not ok:
                    failures.append(f"api numbers: {model!r} {context!r}")
            except kvcalc.KvcalcError as exc:
                outcomes["api rejected"] += 1
                if "\n" in str(exc):
                    failures.append(f"api multi-line error: {model!r} {context!r}")
            except Exception as exc:  # the contract: only KvcalcError
                outcomes["api EXCEPTION"] += 1
                failures.append(f"api {type(exc).__name__}: {exc} for {model!r} {context!r}"[:300])
            slowest = max(slowest, time.perf_counter() - t)
    out = {
        "cases": a.cases, "seed": a.seed, "seconds": round(time.perf_counter() - t0, 1),
        "outcomes": dict(sorted(outcomes.items())), "failures": len(failures), "first_failures": failures[:20],
        "slowest_case_seconds": round(slowest, 3), "limit_seconds": 5.0,
        "contract": "exit 0 with finite non-negative numbers, or exit 2 with one 'kvcalc: error:' line, or a "
                    "claims/check-log verdict (exit 1); never a traceback or an internal error",
    }
    print(json.dumps(out, indent=2))
    if not a.no_write:
        (ROOT / "reports" / "fuzz.json").write_text(json.dumps(out, indent=2) + "\n")
    return 1 if failures or slowest > 5.0 else 0


if __name__ == "__main__":
    sys.exit(main())
