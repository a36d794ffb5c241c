"""`kvcalc check-log` on 64 MiB inputs (the most it reads): wall time and peak memory, one fresh process each.

    python benchmarks/bench_checklog.py [--runs 3] [--out reports/bench_checklog.json] [--keep DIR]
                                        [--baseline DIR [--baseline-runs 1]]

The inputs are built in a temporary folder (or DIR, kept), each exactly 64 MiB:

* ``log-like``: a vLLM 0.33 log of two data-parallel ranks, its start-up lines first (the figures of
  tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log), then serving lines up to the size, rank tags throughout
* ``sglang-log-like``: the same for SGLang 0.5.23 with DP attention ("[time DP0 TP0]" prefixes)
* ``restarts``: a vLLM log of a crashing engine, thousands of starts without KV lines, the last with them
* ``printable``: random printable ASCII (string.printable, so short lines)
* ``one-line``: the log-like text with every line break a space: one 64 MiB line
* ``nul``: NUL bytes (what /dev/zero gives)
* ``random-bytes``: random bytes (binary data)
* hostile ones: ``starts-one-line`` (one line of SGLang's "server_args=" three million times),
  ``server-args-lines`` (64 KiB lines each holding it 3,000 times), ``other-rank`` (1.3 million figure lines of
  DP rank 1, then rank 0's start-up lines)

Each is run as ``python -m kvcalc check-log FILE --json`` under ``/usr/bin/time`` (wall seconds, peak RSS);
the median of --runs runs is kept. Target (issue 26): every input answered in under 3 s. Exit status 1 if a
median misses it. ``--baseline DIR`` times another checkout on the same inputs too (``git archive <commit> kvcalc
| tar -x -C DIR`` makes one; before issue 26 one 64 MiB line took 5 minutes), each run cut off after
--baseline-timeout seconds. Run it from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import string
import subprocess
import sys
import tempfile
from pathlib import Path

SIZE = 64 << 20
TARGET_S = 3.0

VLLM_HEAD = (
    "(EngineCore_DP{r} pid={pid}) INFO 11-30 12:00:00 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with "
    "config: model='meta-llama/Llama-3.1-8B', speculative_config=None, tokenizer='meta-llama/Llama-3.1-8B', "
    "dtype=torch.bfloat16, max_seq_len=131072, download_dir=None, load_format=auto, tensor_parallel_size=1, "
    "pipeline_parallel_size=1, data_parallel_size=2, decode_context_parallel_size=1, quantization=None, "
    "kv_cache_dtype=auto, device_config=cuda, seed=0, enable_prefix_caching=True, enable_chunked_prefill=True\n"
    "(EngineCore_DP{r} pid={pid}) INFO 11-30 12:00:00 [scheduler.py:311] Chunked prefill is enabled with "
    "max_num_batched_tokens=8192.\n"
    "(EngineCore_DP{r} pid={pid}) INFO 11-30 12:00:41 [gpu_worker.py:773] Available KV cache memory: 20.00 GiB\n"
    "(EngineCore_DP{r} pid={pid}) INFO 11-30 12:00:41 [kv_cache_utils.py:1149] GPU KV cache size: 163,840 "
    "tokens, Maximum concurrency for 131,072 tokens per request: 1.25x\n")
VLLM_SERVE = (
    "(APIServer pid=100) INFO 11-30 12:{m:02d}:{s:02d} [loggers.py:236] Engine 00{r}: Avg prompt throughput: "
    "{a}.4 tokens/s, Avg generation throughput: {b}.2 tokens/s, Running: {c} reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: {d}.1%, Prefix cache hit rate: 41.3%\n"
    "(APIServer pid=100) INFO:     127.0.0.1:{port} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
    "(EngineCore_DP{r} pid=20{r}) DEBUG 11-30 12:{m:02d}:{s:02d} [core.py:880] EngineCore loop active, "
    "{c} requests scheduled, kv cache blocks in use {a}\n")
SGLANG_HEAD = (
    "[2026-12-01 10:00:00] server_args={{'model_path': 'meta-llama/Llama-3.1-8B', 'tp_size': 2, 'dp_size': 2, "
    "'enable_dp_attention': True, 'mem_fraction_static': 0.83, 'page_size': 1, 'kv_cache_dtype': 'auto', "
    "'max_running_requests': None}}\n"
    "[2026-12-01 10:00:20 DP{r} TP{r}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 327680, "
    "K size: 20.00 GB, V size: 20.00 GB\n"
    "[2026-12-01 10:00:40 DP{r} TP{r}] max_total_num_tokens=327680, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=2048, context_len=131072, available_gpu_mem=6.12 GB\n")
SGLANG_SERVE = (
    "[2026-12-01 10:{m:02d}:{s:02d} DP{r} TP{r}] Decode batch. #running-req: {c}, #token: {a}, token usage: 0.{d}, "
    "cuda graph: True, gen throughput (token/s): {b}.31, #queue-req: 0\n"
    "[2026-12-01 10:{m:02d}:{s:02d}] INFO:     127.0.0.1:{port} - \"POST /generate HTTP/1.1\" 200 OK\n"
    "[2026-12-01 10:{m:02d}:{s:02d} DP{r} TP{r}] Prefill batch. #new-seq: 1, #new-token: {a}, #cached-token: "
    "{b}, token usage: 0.{d}, #running-req: {c}, #queue-req: 0\n")
CRASH = (
    "INFO 11-30 12:{m:02d}:{s:02d} [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
    "model='meta-llama/Llama-3.1-8B', dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size=1, "
    "kv_cache_dtype=auto, enable_prefix_caching=True\n"
    "ERROR 11-30 12:{m:02d}:{s:02d} [core.py:700] EngineCore failed to start.\n"
    "ERROR 11-30 12:{m:02d}:{s:02d} [core.py:700] Traceback (most recent call last):\n"
    "ERROR 11-30 12:{m:02d}:{s:02d} [core.py:700]   File \"vllm/v1/engine/core.py\", line 691, in run_engine_core\n"
    "ERROR 11-30 12:{m:02d}:{s:02d} [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "{a} MiB\n")


def _fill(head: str, body: str, tail: str = "") -> bytes:
    """``head``, then ``body`` filled in with varying numbers until SIZE, then ``tail``; exactly SIZE bytes."""
    rnd = random.Random(26)
    parts, n, want = [head], len(head), SIZE - len(tail)
    i = 0
    while n < want:
        x = body.format(m=i // 60 % 60, s=i % 60, r=i % 2, a=rnd.randrange(10, 99999), b=rnd.randrange(10, 9999),
                        c=rnd.randrange(1, 256), d=rnd.randrange(0, 99), port=rnd.randrange(1024, 65535))
        parts.append(x)
        n += len(x)
        i += 1
    data = "".join(parts).encode()
    cut = data[:want]
    cut = cut[:cut.rfind(b"\n") + 1]  # whole lines, then pad the last line to the size
    return cut + b"." * (want - len(cut)) + tail.encode()


def inputs() -> dict[str, bytes]:
    """The inputs by kind, SIZE bytes each."""
    vllm_head = "".join(VLLM_HEAD.format(r=r, pid=200 + r) for r in (1, 0))
    log = _fill(vllm_head, VLLM_SERVE)
    rnd = random.Random(26)
    table = bytes(ord(string.printable[i % len(string.printable)]) for i in range(256))
    tail = VLLM_HEAD.format(r=0, pid=200).replace("(EngineCore_DP0 pid=200) ", "")
    return {
        "log-like": log,
        "sglang-log-like": _fill("".join(SGLANG_HEAD.format(r=r) for r in (0, 1)), SGLANG_SERVE),
        "restarts": _fill("", CRASH, tail=tail),
        "printable": rnd.randbytes(SIZE).translate(table),
        "one-line": log.replace(b"\n", b" "),
        "nul": bytes(SIZE),
        "random-bytes": rnd.randbytes(SIZE),
        "starts-one-line": _repeat("server_args={'a': 1} "),
        "server-args-lines": _repeat("server_args={'a': 1} " * 3000 + "\n"),
        "other-rank": _repeat("(EngineCore_DP1 pid=1) INFO GPU KV cache size: 5 tokens\n",
                              VLLM_HEAD.format(r=0, pid=200)),
    }


def _repeat(unit: str, tail: str = "") -> bytes:
    """``unit`` repeated (whole), blanks, then ``tail``: SIZE bytes (ASCII)."""
    body = unit * ((SIZE - len(tail)) // len(unit))
    return (body + " " * (SIZE - len(body) - len(tail)) + tail).encode()


ROOT = Path(__file__).resolve().parents[1]


def _run(path: Path, tree: Path = ROOT, timeout: float | None = None) -> dict:
    """One check-log run of the kvcalc in ``tree`` under /usr/bin/time: wall seconds, peak RSS, exit status, its
    verdict or first error."""
    cmd = ["/usr/bin/time", "-f", "@@time %e %M", sys.executable, "-m", "kvcalc", "check-log", str(path), "--json"]
    env = dict(os.environ, PYTHONPATH=str(tree), COLUMNS="120")
    # -m: the cwd comes first on the path; a session of its own: a run cut off is ended with /usr/bin/time's child
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tree,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"wall_s": None, "peak_rss_mib": None, "exit": None, "verdict": None,
                "error": f"cut off after {timeout:g} s"}
    r = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    stats = next(line for line in r.stderr.splitlines() if line.startswith("@@time "))
    wall, rss = stats.split()[1:]
    err = "".join(line for line in r.stderr.splitlines(keepends=True) if not line.startswith(("@@time", "Command ")))
    verdict = json.loads(r.stdout)["verdict"] if r.stdout.strip().startswith("{") else None
    return {"wall_s": float(wall), "peak_rss_mib": round(int(rss) / 1024, 1), "exit": r.returncode,
            "verdict": verdict, "error": err.strip()[:300] or None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    ap.add_argument("--keep", default=None, help="build the inputs in this folder and keep them")
    ap.add_argument("--only", default=None, help="comma-separated kinds to run")
    ap.add_argument("--baseline", default=None, help="another kvcalc checkout to time on the same inputs")
    ap.add_argument("--baseline-runs", type=int, default=1)
    ap.add_argument("--baseline-timeout", type=float, default=600.0)
    ap.add_argument("--baseline-label", default=None, help="what the baseline is (a commit), for the JSON")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    tmp = None
    if args.keep:
        folder = Path(args.keep).resolve()
        folder.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_checklog.")
        folder = Path(tmp.name)
    try:
        kinds = {}
        for kind, data in inputs().items():
            if args.only and kind not in args.only.split(","):
                continue
            path = folder / f"{kind}.log"
            if not (path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data):
                path.write_bytes(data)
            runs = [_run(path) for _ in range(args.runs)]
            wall = statistics.median(r["wall_s"] for r in runs)
            kinds[kind] = {"bytes": len(data), "wall_s_median": wall, "wall_s_runs": [r["wall_s"] for r in runs],
                           "peak_rss_mib_max": max(r["peak_rss_mib"] for r in runs), "exit": runs[0]["exit"],
                           "verdict": runs[0]["verdict"], "error": runs[0]["error"]}
            print(f"{kind:16} {wall:6.2f} s  {kinds[kind]['peak_rss_mib_max']:7.1f} MiB  exit {runs[0]['exit']}  "
                  f"{runs[0]['verdict'] or (runs[0]['error'] or '')[:90]}", flush=True)
            if args.baseline:
                old = [_run(path, Path(args.baseline).resolve(), args.baseline_timeout)
                       for _ in range(args.baseline_runs)]
                kinds[kind]["baseline"] = old if len(old) > 1 else old[0]
                print(f"{'  baseline':16} {old[0]['wall_s'] or 0:6.2f} s  {old[0]['peak_rss_mib'] or 0:7.1f} MiB  "
                      f"exit {old[0]['exit']}  {old[0]['verdict'] or (old[0]['error'] or '')[:90]}", flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    result = {
        "command": "kvcalc check-log FILE --json",
        "baseline": args.baseline_label or args.baseline,
        "input_bytes": SIZE,
        "runs": args.runs,
        "target_s": TARGET_S,
        "kinds": kinds,
        "passed": all(k["wall_s_median"] < TARGET_S for k in kinds.values()),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        # other work on the machine slows every figure alike: the 1-minute load before and after
        "load_average_1min": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
            fh.write("\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
