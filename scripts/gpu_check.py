#!/usr/bin/env python
"""The GPU check's steps, declared once (scripts/gpu-check.sh runs this): on one CUDA GPU, in one command under
8 minutes on an H200, every figure written under reports/.

    python scripts/gpu_check.py            # on a CUDA machine: run every step
    python scripts/gpu_check.py --dry-run  # anywhere (CI runs it): every step, its command line checked against
                                           # the CLI's own options, the paths it reads, the device memory it
                                           # needs and the figures it is expected to print; nothing allocated

Steps: the kernel tests on CUDA; the kernel benchmark (bandwidth against a device copy); the fp32-log2 probe;
vLLM-pool verifies (V3.2 bf16 / fp8 at 160k, V4-Flash and V4-Pro fp8 at 1M); the exact-layout verifies (V4-Flash
fp8 at 1M, V4-Pro bf16 at 1M); the headline (V3.2-style bf16 vs V4-Pro bf16 and fp8 at 1M, article basis); the
verify table. Exit status: 0 when every step passed, 1 otherwise (each step still runs), 2 without a GPU (not
in --dry-run).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]  # after the Python interpreter: a module (-m ...) or a script path
    timeout_s: int
    needs: tuple = ()  # (model, precision, context, engine, basis) of a verify, for the memory and the figures
    headline: bool = False
    env: tuple[tuple[str, str], ...] = ()


def _verify(model, prec, ctx, engine="vllm", basis=None) -> Step:
    label = f"{model}-{prec}-{ctx}-cuda" + (f"-{engine}" if engine != "vllm" else "") + (f"-{basis}" if basis else "")
    argv = ["-m", "kvcalc", "verify", model, "-p", prec, "-c", ctx, "--device", "cuda", "--fill", "full",
            "--report", f"reports/verify/{label}.json"]
    if engine != "vllm":
        argv += ["--engine", engine]
    if basis:
        argv += ["--basis", basis]
    return Step(f"verify {model} {prec} at {ctx} ({engine}{', ' + basis if basis else ''})", tuple(argv), 40,
                needs=(model, prec, ctx, engine, basis or "complete"))


STEPS = (
    Step("kernel tests on CUDA", ("-m", "pytest", "tests/kernels", "-q", "-x", "-p", "no:cacheprovider"), 80,
         env=(("KVCALC_KERNEL_TEST_DEVICE", "cuda"),)),
    Step("kernel benchmark", ("benchmarks/bench_kernels.py", "--tokens", "262144", "--rep", "20"), 40),
    Step("fp32 log2 probe", ("scripts/probe_log2.py", "--out", "reports/log2-probe.json"), 25),
    _verify("deepseek-v3.2", "bf16", "160k"),
    _verify("deepseek-v3.2", "fp8", "160k"),
    _verify("deepseek-v4-flash", "fp8", "1M"),
    _verify("deepseek-v4-pro", "fp8", "1M"),
    _verify("deepseek-v4-flash", "fp8", "1M", engine="exact"),
    _verify("deepseek-v4-pro", "bf16", "1M", engine="exact", basis="article"),
    Step("headline at 1M", ("-m", "kvcalc", "verify", "--headline", "-c", "1M", "--device", "cuda", "--report",
                            "reports/verify/headline-1M-cuda.json"), 90, headline=True),
)


def _check_argv(step: Step) -> str | None:
    """The step's command line against what it runs: kvcalc's own options (parsed by the CLI, nothing run), a
    script's path, pytest's test folder. None when sound, else why not."""
    argv = list(step.argv)
    if argv[:2] == ["-m", "kvcalc"]:
        import typer

        from kvcalc.cli.app import app

        group = typer.main.get_command(app)
        cmd = group.commands.get(argv[2])
        if cmd is None:
            return f"kvcalc has no command {argv[2]!r}"
        try:
            cmd.make_context(argv[2], argv[3:], resilient_parsing=False)
        except Exception as exc:  # click's usage errors (typer may vendor click: matched by its public API)
            if not callable(getattr(exc, "format_message", None)):
                raise
            return f"kvcalc {argv[2]}: {exc.format_message()}"
        return None
    if argv[:2] == ["-m", "pytest"]:
        return None if (ROOT / argv[2]).is_dir() else f"no test folder {argv[2]}"
    return None if (ROOT / argv[0]).is_file() else f"no script {argv[0]}"


def _memory_and_figures(step: Step) -> tuple[int | None, str]:
    """(device bytes the step allocates at its peak, the figures it should print)."""
    from kvcalc.units import parse_tokens

    if step.headline:
        from kvcalc.verify.headline import needed_bytes, rows

        ctx = parse_tokens("1M")
        figures = "; ".join(f"{r.figure}: {r.published or '-'} (kvcalc {r.estimate:.2f} {r.unit})"
                            for r in rows(ctx, {}))
        return needed_bytes(ctx), figures
    if not step.needs:
        return None, "pass/fail and figures under reports/"
    from dataclasses import replace

    from kvcalc.engines import get_engine
    from kvcalc.plan import plan

    model, prec, ctx, engine, basis = step.needs
    eng = get_engine(engine)
    settings = eng.settings({})
    if engine == "exact":
        settings = replace(settings, basis=basis)
    p = plan(model, parse_tokens(ctx), precision=prec, engine=engine, settings=settings)
    from kvcalc.engines.base import Capability

    if Capability.BLOCK_POOL in eng.capabilities:
        planned = (p.blocks_per_request + p.null_blocks) * p.bytes_per_block
        return planned, (f"planned {planned:,} B = {p.blocks_per_request + p.null_blocks:,} blocks x "
                         f"{p.bytes_per_block:,} B; predicted {p.analytic_bytes:,} B")
    from kvcalc.estimate import estimate

    want = int(estimate(model, parse_tokens(ctx), precision=prec, basis=basis).per_sequence[0])
    return want, f"allocated == predicted == {want:,} B ({basis} basis)"


def dry_run() -> int:
    bad, total_s = 0, 0
    for i, step in enumerate(STEPS, 1):
        problem = _check_argv(step)
        mem, figures = _memory_and_figures(step)
        env = " ".join(f"{k}={v}" for k, v in step.env)
        print(f"{i:2}. {step.name}  (timeout {step.timeout_s} s)")
        print(f"    {env + ' ' if env else ''}python {shlex.join(step.argv)}")
        print(f"    device memory: {f'{mem / GIB:.2f} GiB' if mem is not None else 'its own (small)'}")
        print(f"    expected: {figures}")
        if problem:
            bad += 1
            print(f"    PROBLEM: {problem}")
        total_s += step.timeout_s
    print(f"{len(STEPS)} steps; the timeouts add up to {total_s} s ({total_s / 60:.1f} min; the limit is 8 min); "
          f"{bad} problem(s)")
    return 1 if bad or total_s > 480 else 0


def run() -> int:
    py = os.environ.get("PYTHON", sys.executable)
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        print("gpu-check: needs a CUDA GPU with torch (CUDA build) and triton; on a CPU run the test suite, or "
              "--dry-run", file=sys.stderr)
        return 2
    (ROOT / "reports" / "verify").mkdir(parents=True, exist_ok=True)
    status = 0
    for step in STEPS:
        t0 = time.monotonic()
        print(f"== {step.name}", flush=True)
        env = dict(os.environ, **dict(step.env))
        try:
            rc = subprocess.run([py, *step.argv], cwd=ROOT, env=env, timeout=step.timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        print(f"   rc={rc}, {time.monotonic() - t0:.0f} s", flush=True)
        status |= rc != 0
    table = subprocess.run([py, "scripts/verify_table.py", "reports/verify"], cwd=ROOT, capture_output=True,
                           text=True)
    (ROOT / "reports" / "verify" / "README.md").write_text(table.stdout)
    print(table.stdout)
    return 1 if status or table.returncode else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print and check every step; run nothing")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    return dry_run() if a.dry_run else run()


if __name__ == "__main__":
    sys.exit(main())
