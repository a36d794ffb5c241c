"""Properties the fuzz suite checks (tests/test_fuzz.py runs a bounded slice, scripts/fuzz.py runs 10,000+
cases for the record). Every input, however hostile, must end in one of:

* success (exit 0) with finite, non-negative numbers, and in JSON no reserve smaller than what it holds (where an
  engine's figure stands beside the exact bytes: :data:`RESERVED_HELD`);
* a rejection: exit 2 and exactly one line on stderr starting ``kvcalc: error:``, short (:data:`MAX_ERROR_LINE`:
  a value it quotes is quoted short, whatever its length) and led by a flag, a file or a model, never by one of the
  library's parameter names (:func:`library_names`);
* a legitimate verdict (exit 1 from ``claims`` or ``check-log`` when a figure differs);

never a traceback, never ``kvcalc: internal error``, never more than a few seconds. No hypothesis import
here, so the script and the tests share one definition.
"""

from __future__ import annotations

import contextlib
import io
import time

#: commands the CLI fuzz drives (verify allocates memory, report/plot/import-hf write files: left out)
COMMANDS = ["estimate", "compare", "show", "capacity", "claims", "models", "gpus", "sweep", "check-log", "schema",
            "decode", "transfer"]
FLAGS = ["--context", "-c", "--precision", "-p", "--basis", "--batch", "-b", "--mtp", "--no-mtp", "--by-layer",
         "--vs", "--json", "--compact", "--gpu", "--gpus", "--tp", "--pp", "--dp", "--ep", "--kv-memory",
         "--gpu-memory-utilization", "--weights-gib", "--reserve-gib", "--block-size", "--max-num-batched-tokens",
         "--concurrency", "--engine", "--indexer-dtype", "--points", "--format", "--hf", "--file", "--model",
         "--precision-b", "--help", "--bogus", "--prefix-caching", "--no-prefix-caching", "--gdn-prefill-backend",
         "--mem-fraction-static", "--page-size", "--swa-full-tokens-ratio", "--max-running-requests",
         "--max-total-tokens", "--enable-dp-attention", "--mamba-full-memory-ratio", "--chunked-prefill-size",
         "--link", "--bandwidth", "--max-num-seqs", "--hybrid-kv-cache-manager", "--no-hybrid-kv-cache-manager"]
VALUES = ["1M", "128k", "0", "-1", "1.5M", "1e9", "nan", "inf", "9" * 60, "", " ", "1,2,3", "1k..1M", "4k..1k",
          "1k..8k:1k", "bf16", "fp8", "all", "article", "complete", "h200", "b200", "mi300x", "a100", "rtx-5090", "nope", "vllm", "exact",
          "deepseek-v4-pro", "deepseek-v3.2", "llama-3.1-8b", "qwen3-next-80b-a3b", "gemma-3-27b", "a" * 300,
          "/dev/null", "/", "/tmp", "kvcalc/data/configs/llama-3.1-8b.yaml", "tests/fixtures/hf/kimi-k2.json", "\u00e9\u00e8",
          "1_048_576", "0x10", "40GiB", "1.0", "0.5", "2", "8", "3", "mxfp4", "json", "csv", "\x7f", "--", "-",
          "flashinfer", "triton", "nemotron-h-56b", "minimax-m1", "qwen3.5-9b", "deepseek-v2-lite", "fp32-state",
          "sglang", "vllm,sglang", "sglang,exact,vllm", "gpt-oss-120b", "llama-4-scout", "0.83", "64", "256", "ib-ndr", "nvlink5",
          "tests/fixtures/logs/synthetic-sglang-0.5.23-llama-3.1-8b.log",
          "tests/fixtures/logs/sglang-vllm21348-qwen3-235b.log", "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log"]
OUTCOMES = {"ok", "rejected", "verdict"}
#: the longest rejection line: errors.quote keeps any value to about 60 characters; engines' own messages are long
MAX_ERROR_LINE = 700


def library_names() -> set[str]:
    """The library's parameter names that the command line shows as something else (kv_memory as --kv-memory,
    request_tokens as --request-tokens): an error led by one leaked the API's name to a command-line user."""
    from kvcalc.present.flags import FLAGS

    return {name for name, flag in FLAGS.items() if flag.lstrip("-") != name}


def run_cli(argv: list[str]) -> tuple[int, str, str, float]:
    """Run the CLI in-process: (exit code, stdout, stderr, seconds)."""
    from kvcalc.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


#: (reserve, held) keys an engine's JSON sets side by side, in one object: capacity's request and its groups (and
#: each engine's object side by side), transfer's request, verify's groups and totals (planned for the batch vs
#: predicted). The held bytes are counted in the formats the engine stores, so the reserve is never the smaller.
RESERVED_HELD = (("per_request_bytes", "analytic_bytes"), ("reserved_bytes_per_request", "analytic_bytes_per_request"),
                 ("reserved_bytes", "stored_bytes"), ("planned_bytes", "predicted_bytes"))


def check_reserve_holds(obj, where: str = "") -> int:
    """Every object in a command's JSON output that holds a reserve and the exact bytes beside it
    (:data:`RESERVED_HELD`): the reserve is no smaller. Returns the pairs checked."""
    checked, stack = 0, [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            for r, h in RESERVED_HELD:
                if isinstance(o.get(r), int) and isinstance(o.get(h), int):
                    assert o[r] >= o[h], f"a reserve below what it holds: {r} {o[r]:,} < {h} {o[h]:,}: {where}"
                    checked += 1
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return checked


def classify(argv: list[str], code: int, out: str, err: str, seconds: float, limit_s: float = 5.0) -> str:
    """The outcome, or raise AssertionError naming what broke the contract."""
    where = f"argv={argv!r}"
    assert "Traceback" not in err and "Traceback" not in out, f"traceback: {where}\n{err[-2000:]}"
    assert "internal error" not in err, f"internal error: {where}\n{err[-500:]}"
    assert seconds <= limit_s, f"{seconds:.1f} s (limit {limit_s} s): {where}"
    if code == 0:
        if "--json" in argv and out.lstrip().startswith(("{", "[")):
            import json

            try:
                doc = json.loads(out)
            except ValueError:
                doc = None
            check_reserve_holds(doc, where)
        return "ok"
    if code == 2:
        lines = err.strip("\n").split("\n")
        errors = [line for line in lines if line.startswith("kvcalc: error:")]
        assert len(errors) == 1 and lines[-1] == errors[0], f"rejection is not one error line: {where}\n{err[-500:]}"
        assert len(errors[0]) <= MAX_ERROR_LINE, f"a {len(errors[0]):,}-character error line: {where}\n{err[:300]}"
        lead = errors[0][len("kvcalc: error: "):].split(":", 1)[0]
        assert lead not in library_names(), f"the error names the API's {lead!r}, not its flag: {where}\n{err[:300]}"
        return "rejected"
    if code == 1 and argv and (argv[0] in ("claims", "check-log") or (argv[0] == "report" and "--check" in argv)):
        return "verdict"
    raise AssertionError(f"exit code {code}: {where}\n{err[-500:]}")


def mutate_yaml(text: str, choice: int, value: str) -> str:
    """One of a dozen mutations of a config's text, picked by ``choice``."""
    lines = text.splitlines()
    n = max(1, len(lines))
    i = choice % n
    kinds = [
        lambda: "\n".join(lines[:i] + lines[i + 1:]),  # drop a line
        lambda: "\n".join(lines[:i] + [lines[i]] + lines[i:]),  # duplicate a line (duplicate keys)
        lambda: text.replace(": 1", f": {value}", 1),
        lambda: text.replace(": 8", f": {value}", 1),
        lambda: text.replace("bf16", value, 1),
        lambda: "\n".join(lines[:i] + [f"  {value}: {value}"] + lines[i:]),
        lambda: text.replace("kvcalc: 1", f"kvcalc: !!{value or 'str'} 1", 1),
        lambda: text + f"\nnotes: &a [{value!r}, {value!r}]\nx: [*a, *a]\n",
        lambda: text.replace("layers:", "layers: !!set", 1),
        lambda: text[: (choice * 7) % max(1, len(text))],  # truncated
        lambda: text.replace(":", ": [", 1),
        lambda: text.replace("kv_heads: ", "kv_heads: -", 1),
    ]
    return kinds[choice % len(kinds)]()
