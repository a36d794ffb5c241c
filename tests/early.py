"""Slow subprocess tests, started in the background as soon as the session knows it will run them.

The suite runs in one single-threaded process (conftest.py sets one torch thread), so on a 2-core machine a
second core is idle. The few tests that run kvcalc in a subprocess for seconds to tens of seconds (the Triton
writer under the interpreter, two gloo ranks, the README's verify samples) are queued when collection finishes
(``conftest.pytest_collection_finish``) and run one at a time by a background thread; each test collects its own
process's result where it stands, asserting on it as before (a test run alone, or selected with -k, queues its
process the same way). One process at a time keeps the suite's memory to the main process plus one kvcalc.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

#: the interpreter's overflow checks off (they double its time); then the CLI
KVCALC_UNCHECKED = """
import dataclasses
try:
    from triton.runtime import interpreter as _interp
    _b = _interp.interpreter_builder
    _b.options = dataclasses.replace(_b.options, sanitize_overflow=False)
except (ImportError, AttributeError, TypeError):
    pass
from kvcalc.cli import main
main()
"""

#: test function name -> (argv, extra environment)
COMMANDS = {
    "test_triton_writer_under_the_interpreter": (
        [sys.executable, "-c", KVCALC_UNCHECKED, "verify", "deepseek-v4-flash", "-c", "128", "-p", "fp8",
         "--max-num-batched-tokens", "256", "--no-async-scheduling", "--writer", "triton", "--json"],
        {"TRITON_INTERPRET": "1"}),
    "test_two_ranks_with_gloo": (
        [sys.executable, "-m", "kvcalc", "verify", "deepseek-v4-flash", "-c", "1k", "-p", "fp8",
         "--max-num-batched-tokens", "256", "--no-async-scheduling", "--tp", "2", "--json"], {}),
    # the README's verify samples, at its 120 columns (tests/test_readme.py)
    "test_readme_verify_sample_matches": (
        [sys.executable, "-m", "kvcalc", "verify", "deepseek-v4-flash", "-p", "fp8", "-c", "2k",
         "--max-num-batched-tokens", "512"], {"COLUMNS": "120"}),
    "test_readme_sglang_verify_sample_matches": (
        [sys.executable, "-m", "kvcalc", "verify", "deepseek-v3.2", "--engine", "sglang", "-p", "fp8", "-c", "1k",
         "--batch", "2"], {"COLUMNS": "120"}),
}
TIMEOUT_S = 600
_QUEUE: list[str] = []
_DONE: dict[str, subprocess.CompletedProcess] = {}
_READY = threading.Condition()
_RUNNING: list[subprocess.Popen] = []
_STOP = threading.Event()


def _run(name: str) -> subprocess.CompletedProcess:
    argv, extra = COMMANDS[name]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **extra))
    _RUNNING.append(proc)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    finally:
        _RUNNING.remove(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _worker() -> None:
    """One process at a time (one spare core, and the memory of one more kvcalc process), in queue order."""
    while not _STOP.is_set():
        with _READY:
            if not _QUEUE:
                return
            name = _QUEUE[0]
        done = _run(name)
        with _READY:
            _QUEUE.remove(name)
            _DONE[name] = done
            _READY.notify_all()


def start(names) -> None:
    """Queue the processes of the tests named (those this session will run), in the order given (the session's:
    the first needed is run first)."""
    wanted = [n for n in dict.fromkeys(names) if n in COMMANDS and n not in _QUEUE and n not in _DONE]
    if not wanted:
        return
    with _READY:
        _QUEUE.extend(wanted)
    threading.Thread(target=_worker, daemon=True).start()


def result(name: str) -> subprocess.CompletedProcess:
    """The finished process of test ``name``: waited for if queued, else run now."""
    with _READY:
        queued = name in _QUEUE
        while name in _QUEUE:
            _READY.wait()
    if not queued and name not in _DONE:
        return _run(name)
    return _DONE.pop(name)


def stop_all() -> None:
    """Kill what is still running (a session that stopped early)."""
    _STOP.set()
    for proc in list(_RUNNING):
        if proc.poll() is None:
            proc.kill()
