#!/usr/bin/env python
"""Every command's output over a fixed grid, written to a folder, to prove a reshaping changed nothing: run it
before, run it after, compare. The grid: every shipped model through estimate, show, capacity (each engine, a
given pool and a GPU budget, text and JSON, a workload, a reverse search), transfer and decode; the engines side by
side; check-log on every fixture log; claims, models, gpus and the README's commands; verify's plans (--fill none,
timings and memory figures masked).

    python scripts/snapshot.py OUT_DIR              # write one file per command
    python scripts/snapshot.py OUT_DIR --compare OLD_DIR   # and list every file that differs (exit 1 if any)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = sorted(p.stem for p in (ROOT / "kvcalc" / "data" / "configs").glob("*.yaml"))
LOGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "fixtures" / "logs").glob("*.log"))
ENGINES = ("vllm", "sglang", "exact")
#: figures that change from run to run: masked before comparing
VOLATILE = re.compile(r"(\d[\d,.]*\s*(s|ms|µs)\b|\"[a-z_]*(seconds|elapsed|rss|time|wall|allocate|fill|resident|growth|"
                      r"free|delta)[a-z_]*\": [\d.e+-]+|resident memory \+[\d,]+ B|[\d.]+ GB/s)")


def grid() -> list[list[str]]:
    out: list[list[str]] = [["estimate", "--context", "1M"], ["models"], ["models", "--json"], ["gpus", "--json"],
                            ["claims"], ["claims", "--json"]]
    for m in MODELS:
        out += [["estimate", m, "-c", "1k,128k,1M", "--json"], ["estimate", m, "-c", "128k"], ["show", m, "--json"],
                ["decode", m, "-c", "8k", "--json"], ["sweep", m, "-c", "1k,8k,1M", "-p", "all"]]
        for e in ENGINES:
            out += [["capacity", m, "--engine", e, "--kv-memory", "40GiB", "-c", "32k"],
                    ["capacity", m, "--engine", e, "--kv-memory", "24GiB", "-c", "4k", "--json"],
                    ["capacity", m, "--engine", e, "--kv-memory", "40GiB", "-c", "32k", "--json"],
                    ["capacity", m, "--engine", e, "--gpu", "h200", "--tp", "8", "-c", "128k", "--json"],
                    ["capacity", m, "--engine", e, "--kv-memory", "40GiB", "-c", "128k", "--request-tokens", "8k",
                     "--shared-prefix-tokens", "1k", "--json"],
                    ["capacity", m, "--engine", e, "--kv-memory", "40GiB", "-c", "128k", "--concurrency", "4"],
                    ["transfer", m, "--engine", e, "-c", "8k", "--json"],
                    ["transfer", m, "--engine", e, "-c", "8k", "--tp", "8"]]
        out.append(["capacity", m, "--engine", "vllm,sglang,exact", "--kv-memory", "40GiB", "-c", "32k"])
        out.append(["capacity", m, "--engine", "vllm,sglang,exact", "--kv-memory", "40GiB", "-c", "32k", "--json"])
    for log in LOGS:
        out += [["check-log", log], ["check-log", log, "--json"]]
    readme = (ROOT / "README.md").read_text()
    for line in re.findall(r"^\$ kvcalc (.+)$", readme, flags=re.M):
        import shlex

        argv = shlex.split(line)
        if argv and argv[0] != "verify":
            out.append(argv)
    for m, e in (("llama-3.1-8b", "vllm"), ("deepseek-v4-flash", "vllm"), ("qwen3-next-80b-a3b", "vllm"),
                 ("deepseek-v3.2", "sglang"), ("gpt-oss-20b", "sglang"), ("deepseek-v4-flash", "exact")):
        out.append(["verify", m, "-c", "1k", "--engine", e, "--fill", "none", "--json"])
    return out


def run(argv: list[str]) -> str:
    from kvcalc.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    return VOLATILE.sub("#", f"$ kvcalc {' '.join(argv)}\nexit {code}\n--- stdout\n{out.getvalue()}--- stderr\n"
                            f"{err.getvalue()}")


def main() -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--compare", help="a folder an earlier run wrote")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["COLUMNS"] = "120"
    os.chdir(ROOT)
    for argv in grid():
        name = hashlib.sha1(" ".join(argv).encode()).hexdigest()[:16] + ".txt"
        (out / name).write_text(run(argv))
    n = len(list(out.glob("*.txt")))
    print(f"{n} outputs in {out}")
    if a.compare:
        old = Path(a.compare)
        differ = [p.name for p in sorted(out.glob("*.txt")) if not (old / p.name).exists()
                  or (old / p.name).read_text() != p.read_text()]
        for name in differ:
            print(f"differs: {name}: {(out / name).read_text().splitlines()[0]}")
        print(f"{len(differ)} of {n} differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
