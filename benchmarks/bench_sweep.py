#!/usr/bin/env python
"""`kvcalc sweep` throughput: (model, context) evaluations per second, vectorised, against a per-point Python
loop (one `estimate` call per context) in the same run. Target: >= 1,000,000 evaluations per second on the
2-core CI machine, with contexts beyond each model's maximum included (one warning per model).

    python benchmarks/bench_sweep.py            # writes reports/bench_sweep.json
    python benchmarks/bench_sweep.py --no-write
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from kvcalc.config import config_names, load_model  # noqa: E402
from kvcalc.estimate import estimate  # noqa: E402
from kvcalc.sweep import sweep  # noqa: E402

TARGET = 1_000_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contexts", type=int, default=200_000, help="contexts per model (1 .. 2M, evenly spaced)")
    ap.add_argument("--loop-points", type=int, default=2_000, help="points timed in the per-point loop")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()

    models = [load_model(n) for n in config_names()]
    ctx = np.linspace(1, 2 << 20, a.contexts).astype(np.int64)  # up to 2M: beyond most models' maximum
    evals = len(models) * ctx.size
    best = float("inf")
    warnings = 0
    for _ in range(a.repeat):
        t = time.perf_counter()
        cols = sweep(models, ctx)
        best = min(best, time.perf_counter() - t)
        warnings = len(cols["warnings"])
    rate = evals / best

    sample = ctx[:: max(1, ctx.size // a.loop_points)][: a.loop_points]
    t = time.perf_counter()
    for m in models:
        for c in sample.tolist():
            estimate(m, [c])
    loop_rate = len(models) * sample.size / (time.perf_counter() - t)

    # the two paths agree point for point on the loop's sample
    cols = sweep(models, sample)
    loop = np.array([int(estimate(m, [c]).per_sequence[0]) for m in models for c in sample.tolist()])
    agree = bool(np.array_equal(cols["bytes_per_sequence"].astype(np.int64), loop))

    out = {
        "models": len(models), "contexts_per_model": int(ctx.size), "evaluations": int(evals),
        "best_seconds": best, "evaluations_per_second": rate, "target": TARGET, "meets_target": rate >= TARGET,
        "per_point_loop_evaluations_per_second": loop_rate, "speedup": rate / loop_rate,
        "warnings": warnings, "vectorised_equals_loop": agree,
        "machine": {"python": platform.python_version(), "cpu_count": __import__("os").cpu_count(),
                    "platform": platform.platform()},
    }
    print(json.dumps(out, indent=2))
    if not a.no_write:
        (ROOT / "reports" / "bench_sweep.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
