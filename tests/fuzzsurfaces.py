"""The fuzz's input surfaces, shared by scripts/fuzz.py (20,000+ cases for the record, reports/fuzz.json) and
tests/test_fuzz.py (a bounded slice of each). Every surface kvcalc reads is generated:

* ``flags``: every command (all of ``kvcalc --help``), each with a random subset of its own options, read from
  the command line app itself (so a new flag is fuzzed the day it lands), with values of every kind;
* ``yaml``: shipped configs mutated (lines dropped, duplicated, values swapped), with aliases (bombs, recursive
  ones), explicit tags, huge numbers;
* ``config.json``: every family's Hugging Face fixture with one or two fields replaced by a value of another
  type or size (lists, mappings, strings, 10^8, 2^40, floats, booleans, nested, deleted), or its family swapped;
* ``logs``: vLLM's, SGLang's, llama.cpp's and TensorRT-LLM's start-up logs (published and synthetic) with numbers replaced (0, negative,
  hundreds of digits, floats), lines duplicated, dropped or made huge, the model id changed;
* ``outputs``: every command that writes, to an existing file, a folder, a link, a dangling link, a missing
  folder, a NUL byte, a very long name, a FIFO (read by a thread) and a private character device node (mknod
  1,3, where this user may make one): the specials must still be what they were;
* ``inputs``: every file a command reads (check-log's log, --request-tokens-file, a model YAML or config.json as
  MODEL, --hf, import-hf's CONFIG, claims' --file) given /dev/zero, a folder, a 100 kB path, and files of
  :data:`BIG_BYTES` (64 MiB for the record) of log text, random printable text, one single line, NUL bytes and
  lengths;
* ``api``: estimate, plan, capacity, check_log, decode (with its GPU floor), transfer and verify's argument checks
  with every argument, valid and not;
* ``gguf``: the 26 synthetic GGUFs (tests/fixtures/gguf) rewritten with one or two metadata values replaced (another
  type, 0, huge, negative, an array where a number stands, the architecture changed), a tensor's dimensions or type
  changed, bytes flipped or the file cut anywhere, then given to every command that reads a model (estimate, show,
  capacity and transfer --engine llama.cpp with llama.cpp's flags, decode, import-gguf, verify --engine llama.cpp) and
  to check-log with a llama.cpp log.

* ``engines``: TensorRT-LLM's options (every one, valid and not) on every shipped model through capacity, fit and
  check-log with its published log mutated.

A case is ``("cli", argv)`` or ``("api", label, callable)``. Cases run with the working directory set to a
scratch folder, so nothing in the checkout is written.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "kvcalc" / "data" / "configs").glob("*.yaml"))
HF = sorted((ROOT / "tests" / "fixtures" / "hf").glob("*.json"))
LOGS = sorted((ROOT / "tests" / "fixtures" / "logs").glob("*.log")) + sorted(
    (ROOT / "tests" / "fixtures" / "logs" / "llamacpp").glob("*.log")) + sorted(
    (ROOT / "tests" / "fixtures" / "logs" / "trtllm").glob("*.log"))
GGUFS = sorted((ROOT / "tests" / "fixtures" / "gguf").glob("llamacpp-*.gguf"))
MODELS = [c.stem for c in CONFIGS]

#: values of every kind an option may be given
VALUES = ["1M", "128k", "4k", "1k", "64", "0", "-1", "1.5M", "1e9", "nan", "inf", "9" * 60, "9" * 5000, "", " ",
          "1,2,3", "1k..1M", "4k..1k", "1k..8k:1k", "bf16", "fp8", "fp32-state", "all", "article", "complete", "h200",
          "h100", "b200", "nope", "vllm", "sglang", "exact", "vllm,sglang", "sglang,exact,vllm", "a" * 300, "/dev/null",
          "/", "\u00e9\u00e8", "1_048_576", "0x10", "40GiB", "1.0", "0.5", "2", "8", "3", "mxfp4", "json", "csv",
          "\x7f", "--", "-", "flashinfer", "triton", "torch", "cpu", "cuda", "none", "sample", "0.83", "256", "1e400",
          "ib-ndr", "nvlink4", "pcie5-x16", "l4", "mi300x", "llama.cpp", "q8_0", "q4_0", "q8_0/q4_0", "iq4_nl", "q4_k",
          "ollama", "llama-server", "llama-cpp-python", "c-api", "on", "off", "auto", "rtx-4090", str(GGUFS[0]),
          "trtllm", "vllm,trtllm", "nvfp4", "128,131072", "0.9", "113.65", "53687091200",
          *MODELS[:6], str(HF[0]), str(LOGS[0])]
JUNK = ["\x00", "\u2603", "--context=1M", "=", "{}", "[1,2]", "~", "null", "--bogus"]
#: a 100 kB value: any string field may get it (the error that quotes it stays short)
HUGE = "x" * 100_000
VALUES += [HUGE, "/dev/zero"]

#: small contexts for the commands that allocate (verify): a fuzz case must stay under 500 MB
SMALL_CONTEXTS = ["64", "256", "512", "1k", "0", "-5", "nan", "1e400", "9" * 50, "x"]


def command_options() -> dict[str, list[tuple[list[str], str, bool]]]:
    """Every command and its options, from the CLI itself: command -> [(flags, type name, is a flag)]."""
    import typer

    from kvcalc.cli.app import app

    group = typer.main.get_command(app)
    out = {}
    for name, cmd in sorted(group.commands.items()):
        opts = []
        for p in cmd.params:
            if p.param_type_name != "option":
                continue
            flags = list(p.opts) + list(getattr(p, "secondary_opts", []))
            opts.append((flags, getattr(p.type, "name", "text"), bool(getattr(p, "is_flag", False))))
        out[name] = opts
    return out


def _value(rng: random.Random, type_name: str) -> str:
    if type_name == "integer" and rng.random() < 0.5:
        return rng.choice(["0", "1", "2", "8", "-1", "3", "64", "4096", "9" * 30, "9" * 5000, "1.5", "x"])
    if type_name == "float" and rng.random() < 0.5:
        return rng.choice(["0", "0.5", "0.9", "1", "1.5", "-0.1", "nan", "inf", "1e-300", "1e400", "x"])
    return rng.choice(VALUES)


# ---- flags: every command, its own options --------------------------------------------------------------------
def flags_case(rng: random.Random, scratch: Path, options: dict) -> tuple:
    command = rng.choice(sorted(options))
    argv = [command]
    positional = {"estimate": MODELS, "compare": MODELS, "show": MODELS, "capacity": MODELS, "sweep": MODELS,
                  "plot": MODELS, "decode": MODELS, "transfer": MODELS, "verify": ["llama-3.1-8b", "gpt-oss-20b", "qwen3.5-9b", "deepseek-v3.2"],
                  "import-hf": [str(p) for p in HF], "check-log": [str(p) for p in LOGS],
                  "import-gguf": [str(p) for p in GGUFS]}
    for c in ("estimate", "show", "capacity", "transfer", "decode", "verify"):  # a GGUF as MODEL, one time in five
        positional[c] = positional[c] + [str(p) for p in GGUFS[:: max(1, len(GGUFS) // (len(positional[c]) // 4 + 1))]]
    if command in positional and rng.random() < 0.9:
        argv.append(rng.choice(positional[command]))
        if command == "compare" and rng.random() < 0.8:
            argv.append(rng.choice(MODELS))
    for flags, type_name, is_flag in rng.sample(options[command], min(len(options[command]), rng.randrange(0, 6))):
        flag = rng.choice(flags)
        argv.append(flag)
        if not is_flag:
            argv.append(_value(rng, type_name))
    if rng.random() < 0.05:
        argv.append(rng.choice(JUNK))
    return ("cli", _safe(argv, scratch, rng))


def _safe(argv: list[str], scratch: Path, rng: random.Random) -> list[str]:
    """A command line that cannot touch the checkout or allocate gigabytes: writes go under ``scratch``
    (report's --out, -o, --report), verify keeps a small context, fills at most a sample, on the CPU."""
    out = list(argv)
    cmd = out[0]
    for flag in ("--output", "-o", "--out", "--report"):
        while flag in out:
            i = out.index(flag)
            del out[i:i + 2]
    if cmd == "verify":
        for flag in ("--context", "-c", "--batch", "-b", "--tp", "--device", "--fill"):
            while flag in out:
                i = out.index(flag)
                del out[i:i + 2]
        # allocation at small contexts; a sampled fill (seconds on a CPU, by design) only at 64 tokens
        ctx = rng.choice(SMALL_CONTEXTS)
        fill = "sample" if ctx == "64" and rng.random() < 0.5 else "none"
        out += ["-c", ctx, "--fill", fill, "--device", "cpu"]
        if rng.random() < 0.3:
            out += ["--batch", rng.choice(["1", "2", "0", "x"])]
    if cmd in ("import-hf", "sweep", "plot") and rng.random() < 0.7:
        out += ["-o", str(scratch / f"out{rng.randrange(5)}.{'svg' if cmd == 'plot' else 'txt'}")]
    if cmd == "plot" and "-o" not in out:
        out += ["-o", str(scratch / "p.svg")]
    if cmd == "report":
        out += ["--out", str(scratch / f"rep{rng.randrange(3)}"), "--no-plots"]
    if cmd == "verify" and rng.random() < 0.2:
        out += ["--report", str(scratch / "v.json")]
    if "--points" in out:  # a plot or sweep of 10^6 points is slow by request, not a defect
        i = out.index("--points")
        if i + 1 < len(out) and out[i + 1].isdigit() and len(out[i + 1]) < 6 and int(out[i + 1]) > 64:
            out[i + 1] = "64"
    return out


# ---- YAML: mutated configs, aliases, tags ----------------------------------------------------------------------
def _alias_bomb(levels: int = 8) -> str:
    return "[&a0 [x, x, x, x, x, x, x, x, x]" + "".join(
        f", &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)) + "]"


def yaml_text(rng: random.Random) -> str:
    from fuzzcases import mutate_yaml

    text = rng.choice(CONFIGS).read_text()
    lines = text.splitlines()
    r = rng.random()
    if r < 0.55:
        return mutate_yaml(text, rng.randrange(10_000), rng.choice(VALUES))
    i = rng.randrange(len(lines))
    m = re.match(r"^(\s*[\w.-]+:)\s*(.*)$", lines[i])
    if not m:
        return text
    value = rng.choice([_alias_bomb(), _alias_bomb(5), "&r [*r]", "!!set {a: null}", "!!binary aGk=",
                        "!!timestamp 2001-13-45", "!!float 1e400", "9" * 5000, "-" + "9" * 30, "[" * 50 + "]" * 50,
                        "{a: &x [1, 2], b: *x}", "!!python/object:os.system 'x'", "2026-04-24", "~", "[]", "{}"])
    lines[i] = f"{m.group(1)} {value}"
    return "\n".join(lines) + "\n"


def yaml_case(rng: random.Random, scratch: Path) -> tuple:
    path = scratch / f"m{rng.randrange(20)}.yaml"
    path.write_text(yaml_text(rng))
    cmd = rng.choice(["estimate", "show", "capacity", "compare", "sweep"])
    argv = [cmd, str(path)]
    if cmd == "compare":
        argv.append(rng.choice(MODELS))
    if cmd == "capacity":
        argv += ["--kv-memory", "40GiB", "-c", rng.choice(["4k", "128k"]), "--engine",
                 rng.choice(["vllm", "sglang", "exact", "trtllm"])]
    if cmd in ("estimate", "sweep"):
        argv += ["-c", rng.choice(["1k", "1k,1M", "4k..64k"])]
    return ("cli", argv)


# ---- config.json: every family, fields of the wrong type or size ------------------------------------------------
HOSTILE = [None, True, False, 0, -1, 1, 3, 10**8, 2**40, 2**70, 1.5, float("nan"), "x", "float32", "", [], [1], ["a"],
           [[1]], {}, {"a": 1}, "1" * 300, 1e308, [1, "2", None], {"kda_layers": "x"}]


def hf_data(rng: random.Random) -> dict:
    data = json.loads(rng.choice(HF).read_text())
    target = data["text_config"] if isinstance(data.get("text_config"), dict) and rng.random() < 0.7 else data
    for _ in range(rng.choice([1, 1, 2, 3])):
        keys = list(target)
        r = rng.random()
        if r < 0.1:
            target["model_type"] = rng.choice(["llama", "deepseek_v3", "nemotron_h", "kimi_linear", "qwen3_next",
                                               "deepseek_v4", "gemma3", "minimax", "falcon_h1", "jamba", "llama4"])
        elif r < 0.2 and keys:
            del target[rng.choice(keys)]
        elif keys:
            key = rng.choice(keys)
            value = target[key]
            if isinstance(value, dict) and value and rng.random() < 0.5:  # one level down (linear_attn_config)
                value[rng.choice(list(value))] = rng.choice(HOSTILE)
            else:
                target[key] = rng.choice(HOSTILE)
    return data


def hf_case(rng: random.Random, scratch: Path) -> tuple:
    path = scratch / f"c{rng.randrange(20)}.json"
    text = json.dumps(hf_data(rng), allow_nan=True)
    if rng.random() < 0.05:
        text = rng.choice(["[" * 100_000, text[: len(text) // 2], "\ufeff" + text, '{"a": ' + "9" * 5000 + "}"])
    path.write_text(text)
    cmd = rng.choice(["import-hf", "estimate", "show", "capacity"])
    if cmd == "import-hf":
        argv = ["import-hf", str(path)] + (["-o", str(scratch / "imported.yaml")] if rng.random() < 0.3 else [])
    else:
        argv = [cmd, "--hf", str(path)]
    if cmd == "capacity":
        argv += ["--kv-memory", "40GiB", "-c", "8k", "--engine", rng.choice(["vllm", "sglang", "exact", "trtllm"])]
    if cmd == "estimate":
        argv += ["-c", "8k"]
    return ("cli", argv)


# ---- logs: numbers, lines and ids of both engines' start-up logs -------------------------------------------------
def log_text(rng: random.Random) -> str:
    text = rng.choice(LOGS).read_text()
    lines = text.splitlines()
    for _ in range(rng.choice([1, 1, 2, 3])):
        r = rng.random()
        if r < 0.5:
            nums = list(re.finditer(r"\d[\d,.]*", text))
            if nums:
                m = rng.choice(nums)
                text = text[:m.start()] + rng.choice(["0", "-1", "9" * 400, "9" * 300 + ".5", "1e400", "0.0", "nan",
                                                      "18446744073709551616", "1,0,0", "", "x"]) + text[m.end():]
        elif r < 0.6 and lines:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif r < 0.7 and lines:
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif r < 0.8:
            text = "GPU KV cache size: " + "x" * rng.choice([70_000, 2_000_000]) + "\n" + text
        elif r < 0.9:
            text = re.sub(r"model(_path)?'?[:=] ?'[^']+'", "model='acme/x'", text, count=1)
        else:
            text = text.replace("\n", "\r\n") if rng.random() < 0.5 else text + "\x00" * 10
        lines = text.splitlines()
    return text


def log_case(rng: random.Random, scratch: Path) -> tuple:
    path = scratch / f"l{rng.randrange(20)}.log"
    path.write_text(log_text(rng), encoding="utf-8", errors="replace")
    argv = ["check-log", str(path)]
    for flag, values in (("-m", MODELS), ("-p", ["bf16", "fp8", "x"]),
                         ("--engine", ["vllm", "sglang", "exact", "trtllm", "x"]),
                         ("--tp", ["1", "0", "8", "x"]), ("--block-size", ["16", "0", "64"]), ("--json", None)):
        if rng.random() < 0.2:
            argv += [flag] + ([rng.choice(values)] if values else [])
    return ("cli", argv)


# ---- outputs: every command that writes, to every kind of path ---------------------------------------------------
def output_path(rng: random.Random, scratch: Path, suffix: str) -> str:
    kind = rng.choice(["new", "existing", "folder", "link", "dangling", "missing-dir", "nul", "long", "dot", "fifo",
                       "device"])
    base = scratch / "outs"
    base.mkdir(exist_ok=True)
    p = base / f"{kind}{rng.randrange(3)}{suffix}"
    if kind == "existing":
        p.write_text("old")
    elif kind == "folder":
        p.mkdir(exist_ok=True)
    elif kind in ("link", "dangling"):
        victim = base / "victim.txt"
        victim.write_text("precious")
        if p.is_symlink() or p.exists():
            p.unlink()
        p.symlink_to(victim if kind == "link" else base / "nothing-here")
    elif kind == "missing-dir":
        return str(base / f"sub{rng.randrange(99)}" / "deeper" / f"f{suffix}")
    elif kind == "nul":
        return str(base / f"a\x00b{suffix}")
    elif kind == "long":
        return str(base / ("n" * 300 + suffix))
    elif kind == "dot":
        return "."
    elif kind == "fifo":
        return special_fifo(base)
    elif kind == "device":
        return special_device(base) or str(p)
    return str(p)


def special_fifo(base: Path) -> str:
    """A FIFO with a thread reading it (as a pipe's reader would), so a write to it completes."""
    import stat
    import threading

    p = base / "fifo"
    if not p.exists():
        os.mkfifo(p)
    if stat.S_ISFIFO(p.stat().st_mode):
        def drain():
            with open(p, "rb") as f:
                while f.read(1 << 16):
                    pass
        threading.Thread(target=drain, daemon=True).start()
    return str(p)


def special_device(base: Path) -> str | None:
    """A private character device with /dev/null's numbers (1, 3), made here once; None where mknod is refused."""
    import stat

    p = base / "null-device"
    if not p.exists():
        try:
            os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError:
            return None
    return str(p)


def specials_intact(scratch: Path) -> bool:
    """No write replaced the FIFO or the device node: they are still a FIFO and a character device."""
    import stat

    base = scratch / "outs"
    fifo, dev = base / "fifo", base / "null-device"
    ok = not fifo.exists() or stat.S_ISFIFO(os.lstat(fifo).st_mode)
    return ok and (not dev.exists() or stat.S_ISCHR(os.lstat(dev).st_mode))


def outputs_case(rng: random.Random, scratch: Path) -> tuple:
    cmd = rng.choice(["import-hf", "sweep", "plot", "verify", "report"])
    if cmd == "import-hf":
        return ("cli", ["import-hf", str(rng.choice(HF)), "-o", output_path(rng, scratch, ".yaml")])
    if cmd == "sweep":
        return ("cli", ["sweep", rng.choice(MODELS), "-c", "1k,2k", "-o", output_path(rng, scratch, ".csv")])
    if cmd == "plot":
        return ("cli", ["plot", rng.choice(MODELS), "-c", "1k..8k", "--points", "3", "-o",
                        output_path(rng, scratch, rng.choice([".svg", ".png", ".txt"]))])
    if cmd == "verify":
        return ("cli", ["verify", "llama-3.1-8b", "-c", "64", "--fill", "none", "--report",
                        output_path(rng, scratch, ".json")])
    return ("cli", ["report", "--no-plots", "--out", output_path(rng, scratch, "")])


def victim_intact(scratch: Path) -> bool:
    """A write to a link went through it, as the shell's ``>`` does, and left the links as they were: the links
    ``output_path`` planted are still links (a dangling one created nothing), and the file they name is a file."""
    base = scratch / "outs"
    if not base.is_dir():
        return True
    links = [p for p in base.iterdir() if p.name.startswith(("link", "dangling"))]
    victim = base / "victim.txt"
    return all(p.is_symlink() for p in links) and not (base / "nothing-here").exists() and \
        (not victim.exists() or victim.is_file())


def leftovers(scratch: Path) -> list[str]:
    """Temporary files a write left behind (kvcalc.safewrite names them .<name>.<random>.tmp)."""
    return [str(p) for p in scratch.rglob("*.tmp") if p.name.startswith(".")]


# ---- the API, every argument -----------------------------------------------------------------------------------
def api_value(rng: random.Random):
    import numpy as np

    return rng.choice([None, 1.5, float("nan"), float("inf"), -1, 0, 1, 1 << 40, 1 << 70, True, "1024", b"1024",
                       [1, 2], [True], [1.0], [[1]], {"a": 1}, {"fp8"}, np.int64(5), np.array([1, 2]), np.array([[1]]),
                       np.array([1.5]), np.array([2**63 - 1], dtype=np.uint64), np.ma.masked_array([1, 2], [0, 1]),
                       "llama-3.1-8b", "fp8", "bf16", "article", "vllm", "sglang", "h200", Path("x"), 1024, 131072])


def api_case(rng: random.Random, scratch: Path) -> tuple:
    import kvcalc
    from kvcalc.capacity import Parallel, capacity
    from kvcalc.checklog import check_log
    from kvcalc.plan import plan

    model = rng.choice(["llama-3.1-8b", "deepseek-v4-pro", "qwen3.5-9b", "gpt-oss-20b", api_value(rng)])
    name = rng.choice(["estimate", "plan", "capacity", "check_log", "decode", "transfer"])
    if name in ("decode", "transfer"):
        return _beyond_case(rng, name, model)
    if name == "estimate":
        kw = {k: api_value(rng) for k in rng.sample(["precision", "basis", "batch", "mtp", "numpy"], rng.randrange(0, 3))}
        return ("api", f"estimate({model!r}, ..., {kw!r})"[:200], lambda: kvcalc.estimate(model, api_value(rng), **kw))
    if name == "plan":
        kw = {k: api_value(rng) for k in rng.sample(["precision", "engine", "settings", "mtp", "tp", "stage"],
                                                    rng.randrange(0, 3))}
        return ("api", f"plan({model!r}, {kw!r})"[:200], lambda: plan(model, rng.choice([1024, api_value(rng)]), **kw))
    if name == "capacity":
        kw = {k: api_value(rng) for k in rng.sample(["precision", "engine", "settings", "mtp", "gpu", "kv_memory",
                                                     "weights_bytes", "reserve_bytes"], rng.randrange(0, 3))}
        if "gpu" not in kw and "kv_memory" not in kw:
            kw["kv_memory"] = 40 << 30
        if rng.random() < 0.2:
            kw["parallel"] = rng.choice([Parallel(tp=2), Parallel(tp=api_value(rng)), {"tp": 2}, None])
        return ("api", f"capacity({model!r}, {kw!r})"[:200],
                lambda: capacity(model, rng.choice([1024, 131072, api_value(rng)]), **kw))
    kw = {k: api_value(rng) for k in rng.sample(["source", "engine", "model", "precision", "settings", "tp"],
                                                rng.randrange(0, 3))}
    text = rng.choice([log_text(rng), api_value(rng)])
    return ("api", f"check_log(..., {kw!r})"[:200], lambda: check_log(text, **kw))


def _beyond_case(rng: random.Random, name: str, model) -> tuple:
    from kvcalc.decode import decode, step_floor
    from kvcalc.hardware import get_gpu
    from kvcalc.transfer import transfer

    ctx = rng.choice([1024, 131072, api_value(rng)])
    if name == "decode":
        kw = {k: api_value(rng) for k in rng.sample(["precision", "batch"], rng.randrange(0, 2))}

        def run():
            d = decode(model, ctx, **kw)
            if rng.random() < 0.5:
                from kvcalc.config import as_model

                gpu = get_gpu(rng.choice(["h200", "l4", "mi300x"]))
                step_floor(d, as_model(model), gpu, weights_bytes=rng.choice([None, 16 << 30, api_value(rng)]))
        return ("api", f"decode({model!r}, {kw!r})"[:200], run)
    kw = {k: api_value(rng) for k in rng.sample(["precision", "engine", "tp", "link", "bandwidth", "settings", "gpu"],
                                                rng.randrange(0, 3))}
    if "gpu" in kw and rng.random() < 0.5:  # a real GPU of each architecture, as often as a junk value
        kw["gpu"] = rng.choice(["h200", "b200", "a100-80gb", "rtx-5090", "l40s", "mi300x"])
    return ("api", f"transfer({model!r}, {kw!r})"[:200], lambda: transfer(model, ctx, **kw))


# ---- inputs: every file a command reads, hostile -----------------------------------------------------------------
#: the size of the big input files (scripts/fuzz.py: 64 MiB, check-log's read limit; the tests' slice: 1 MiB)
BIG_BYTES = 1 << 20


def big_inputs(scratch: Path) -> dict[str, str]:
    """The hostile files, made once per scratch folder: name -> path."""
    base = scratch / "inputs"
    if base.is_dir():
        return {p.name: str(p) for p in base.iterdir()}
    base.mkdir()
    rnd = random.Random(7)
    log = (ROOT / "tests" / "fixtures" / "logs" / "synthetic-0.33-llama-3.1-8b.log").read_bytes()
    make = {
        "log.log": lambda: (log * (BIG_BYTES // len(log) + 1))[:BIG_BYTES],  # a log of many restarts
        "printable.txt": lambda: "".join(chr(rnd.randrange(32, 127)) if rnd.random() > 0.01 else "\n"
                                         for _ in range(BIG_BYTES)).encode(),
        "one-line.txt": lambda: b"9" * BIG_BYTES,
        "nul.bin": lambda: bytes(BIG_BYTES),
        "lengths.txt": lambda: b"8k\n" * (BIG_BYTES // 3),
        "model.yaml": lambda: b"name: " + b"x" * BIG_BYTES,
        "config.json": lambda: b'{"model_type": "llama", "x": "' + b"y" * BIG_BYTES + b'"}',
    }
    for name, fn in make.items():
        (base / name).write_bytes(fn())
    return big_inputs(scratch)


def inputs_case(rng: random.Random, scratch: Path) -> tuple:
    files = big_inputs(scratch)
    src = rng.choice([*files.values(), "/dev/zero", "/dev/null", str(scratch), str(scratch / ("p" * 300)), HUGE,
                      str(scratch / "no-such-file")])
    reader = rng.choice(["check-log", "lengths", "model", "hf", "import-hf", "claims"])
    if reader == "check-log":
        return ("cli", ["check-log", src] + rng.choice([[], ["--engine", "sglang"], ["--model", "llama-3.1-8b"]]))
    if reader == "lengths":
        return ("cli", ["capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "-c", "128k", "--request-tokens-file", src])
    if reader == "model":
        return ("cli", [rng.choice(["estimate", "show", "decode", "transfer"]), src] + (["-c", "8k"] if rng.random() < 0.5
                                                                                         else []))
    if reader == "hf":
        return ("cli", ["estimate", "--hf", src, "-c", "8k"])
    if reader == "import-hf":
        return ("cli", ["import-hf", src])
    return ("cli", ["claims", "--file", src])


# ---- gguf: the synthetic GGUFs, rewritten ------------------------------------------------------------------------
def _gguf_write(meta: list, tensors: list, alignment: int) -> bytes:
    """A GGUF v3 header of ``meta`` ((key, type id, value)) and ``tensors`` ((name, dims, type, offset)), no data."""
    import struct

    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    def val(t: int, v) -> bytes:
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
        if t == 8:
            return s(v)
        if t == 9:
            it, items = v
            return struct.pack("<IQ", it, len(items)) + b"".join(val(it, x) for x in items)
        return struct.pack(fmt[t], v)

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    for k, t, v in meta:
        out += s(k) + struct.pack("<I", t) + val(t, v)
    for name, dims, typ, off in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", typ, off)
    return out + b"\0" * (-len(out) % alignment)


def _typed(v):
    """A header value as (gguf type id, value), the writer's way."""
    if isinstance(v, bool):
        return 7, v
    if isinstance(v, int):
        return (4, v) if 0 <= v < 1 << 32 else (11, v)
    if isinstance(v, float):
        return 6, v
    if isinstance(v, str):
        return 8, v
    if isinstance(v, list):
        items = [x for x in v if x is not None]
        t = _typed(items[0])[0] if items else 4
        return 9, (t, [_typed(x)[1] if _typed(x)[0] == t else 0 for x in items])
    return 8, str(v)


GGUF_VALUES = [0, 1, -1, 2, 7, 64, 1 << 31, (1 << 32) - 1, 1 << 40, -(1 << 40), 0.5, float("nan"), float("inf"), True,
               "", "x" * 300, "llama", "mamba2", "deepseek2", "gemma3", "nope", [], [0], [1, 2, 3], [0] * 300,
               [-1] * 8, [True, False] * 4, ["a", "b"], [1 << 40] * 3]


def gguf_bytes(rng: random.Random) -> bytes:
    from kvcalc.config.gguf.reader import read_header

    src = rng.choice(GGUFS)
    h = read_header(src)
    meta = [(k, *_typed(v)) for k, v in h.metadata.items() if v is not None]
    tensors = [(t.name, list(t.dims), t.type_id, t.offset) for t in h.tensors]
    r = rng.random()
    if r < 0.55 and meta:  # a value replaced, or a key dropped, once or twice
        for _ in range(rng.choice([1, 1, 2])):
            i = rng.randrange(len(meta))
            if rng.random() < 0.15:
                del meta[i]
                if not meta:
                    break
                continue
            k = meta[i][0] if rng.random() < 0.9 else rng.choice(["general.alignment", "general.architecture",
                                                                   f"{h.get('general.architecture')}.block_count"])
            meta[i] = (k, *_typed(rng.choice(GGUF_VALUES)))
    elif r < 0.7 and tensors:  # a tensor's dimensions, type or offset
        i = rng.randrange(len(tensors))
        name, dims, typ, off = tensors[i]
        field = rng.randrange(3)
        if field == 0:
            dims = [rng.choice([0, 1, 3, 1 << 20, 1 << 40]) for _ in range(rng.randrange(0, 6))]
        elif field == 1:
            typ = rng.choice([0, 1, 2, 8, 12, 19, 39, 99, 1 << 31])
        else:
            off = rng.choice([0, 1, 31, 1 << 40, off + 32])
        tensors[i] = (name, dims, typ, off)
    data = bytearray(_gguf_write(meta, tensors, h.alignment))
    if r >= 0.7:  # bytes flipped, or the file cut anywhere
        if rng.random() < 0.5:
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            del data[rng.randrange(len(data)):]
    return bytes(data)


LLAMA_FLAGS = [("--frontend", ["llama-server", "ollama", "llama-cpp-python", "c-api", "x"]),
               ("--ctx-size", ["0", "1", "300", "4096", "1000000", "-1"]), ("--parallel", ["1", "4", "300", "0"]),
               ("--kv-unified", None), ("--no-kv-unified", None), ("--cache-type-k", ["q8_0", "q4_0", "f32", "q4_k"]),
               ("--cache-type-v", ["q8_0", "f16", "iq4_nl"]), ("--flash-attn", ["on", "off", "auto", "x"]),
               ("--swa-full", None), ("--batch-size", ["1", "32", "4096"]), ("--ubatch-size", ["1", "64", "100000"]),
               ("--num-ctx", ["1", "2048", "100000"]), ("--num-parallel", ["1", "3", "999"]),
               ("--kv-cache-type", ["q8_0", "q4_0", "bf16"]), ("--num-batch", ["1", "512"]),
               ("--n-gpu-layers", ["-1", "0", "2", "99"]), ("--no-kv-offload", None), ("-p", ["q8_0", "q8_0/q4_0", "x"])]


def gguf_case(rng: random.Random, scratch: Path) -> tuple:
    path = scratch / f"g{rng.randrange(20)}.gguf"
    path.write_bytes(gguf_bytes(rng))
    command = rng.choice(["estimate", "show", "capacity", "capacity", "transfer", "decode", "import-gguf", "verify",
                          "check-log"])
    if command == "check-log":
        log = rng.choice(sorted((ROOT / "tests" / "fixtures" / "logs" / "llamacpp").glob("*.log")))
        return ("cli", ["check-log", str(log), "--model", str(path)] + (["--json"] if rng.random() < 0.3 else []))
    argv = [command, str(path)]
    if command == "import-gguf":
        return ("cli", argv + (["-o", str(scratch / "imported.yaml")] if rng.random() < 0.5 else []))
    if command != "show":
        argv += ["-c", rng.choice(["1", "300", "1k", "8k", "128k"])]
    if command in ("capacity", "transfer", "verify"):
        argv += ["--engine", "llama.cpp"]
        if command == "capacity":
            argv += ["--gpu", rng.choice(["h100-sxm", "rtx-4090", "l4", "mi300x"])]
        for flag, values in rng.sample(LLAMA_FLAGS, rng.randrange(0, 4)):
            if command != "capacity" and flag in ("--n-gpu-layers", "--no-kv-offload") and command != "verify":
                continue
            argv += [flag] + ([rng.choice(values)] if values else [])
    if rng.random() < 0.3:
        argv.append("--json")
    return ("cli", argv)


# ---- engines: TensorRT-LLM's options (and the tiers below the GPU) on every shipped model -------------------------
TRT_FLAGS = [("--free-gpu-memory-fraction", ["0.9", "0", "1", "0.0001", "1.5", "nan", "-1"]),
             ("--tokens-per-block", ["32", "64", "1", "7", "0", "65536", "99999999"]),
             ("--max-tokens", ["1", "8224", "100000", "0", "9" * 30]), ("--max-batch-size", ["1", "64", "2048", "0"]),
             ("--max-num-tokens", ["1", "8192", "100000000", "0"]),
             ("--max-seq-len", ["1", "4096", "131072", "1000000000", "0"]),
             ("--host-cache-size", ["0", "1", "53687091200", "-5", "9" * 30]),
             ("--max-gpu-total-bytes", ["0", "1", "10737418240"]),
             ("--max-attention-window", ["128,131072", "128", "4096,1", "x", ",", "0", "1," * 3000, "128,256,512"]),
             ("--peak-memory-gib", ["0", "70", "113.65", "1e9", "-1", "nan"]),
             ("--device-memory-gib", ["0", "79.19", "119.70", "1e12", "inf"]),
             ("--disable-overlap-scheduler", None), ("--no-enable-block-reuse", None), ("--no-enable-block-reuse", None),
             ("--weights-gib", ["1", "104", "0"]),
             ("-p", ["bf16", "fp8", "nvfp4", "q8_0", "x"]), ("--tp", ["1", "2", "8", "16"]), ("--pp", ["1", "2", "3"])]


def engines_case(rng: random.Random, scratch: Path) -> tuple:
    command = rng.choice(["capacity", "capacity", "capacity", "fit", "check-log"])
    if command == "check-log":
        log = rng.choice(sorted((ROOT / "tests" / "fixtures" / "logs" / "trtllm").glob("*.log")))
        path = scratch / "t.log"
        path.write_text(log_text_of(rng, log), encoding="utf-8", errors="replace")
        argv = ["check-log", str(path), "--model", rng.choice(MODELS)]
        for flag, values in rng.sample(TRT_FLAGS[:12], rng.randrange(0, 3)):
            argv += [flag] + ([rng.choice(values)] if values else [])
        return ("cli", argv + (["--json"] if rng.random() < 0.3 else []))
    argv = [command, rng.choice(MODELS), "-c", rng.choice(["1", "300", "8k", "32k", "128k", "1M"]),
            "--engine", rng.choice(["trtllm", "trtllm", "vllm,trtllm", "trtllm,sglang"])]
    if command == "capacity":
        argv += ["--gpu", rng.choice(["h100-sxm", "h200", "b200", "l4", "mi300x"])]
    else:
        argv += ["--gpu", rng.choice(["h100-sxm", "h200"]), "--max-gpus", rng.choice(["1", "2", "4"])]
    for flag, values in rng.sample(TRT_FLAGS, rng.randrange(0, 5)):
        if command == "fit" and flag in ("--tp", "--pp", "-p"):
            continue
        argv += [flag] + ([rng.choice(values)] if values else [])
    if rng.random() < 0.3:
        argv.append("--json")
    return ("cli", argv)


def log_text_of(rng: random.Random, path: Path) -> str:
    """A log's text mutated as the logs surface mutates them."""
    saved = LOGS[:]
    try:
        LOGS[:] = [path]
        return log_text(rng)
    finally:
        LOGS[:] = saved


SURFACES = {"flags": None, "yaml": yaml_case, "config.json": hf_case, "logs": log_case, "outputs": outputs_case,
            "api": api_case, "inputs": inputs_case, "gguf": gguf_case, "engines": engines_case}


def case(surface: str, rng: random.Random, scratch: Path, options: dict | None = None) -> tuple:
    if surface == "flags":
        return flags_case(rng, scratch, options or command_options())
    return SURFACES[surface](rng, scratch)


def run_api(label: str, fn) -> str:
    """'ok', 'rejected', or raise AssertionError naming what broke the contract (only KvcalcError, one line)."""
    import math

    import numpy as np

    import kvcalc

    try:
        out = fn()
    except kvcalc.KvcalcError as exc:
        assert "\n" not in str(exc), f"multi-line error: {label}: {exc}"
        return "rejected"
    except Exception as exc:  # the contract: nothing but KvcalcError
        raise AssertionError(f"{type(exc).__name__}: {str(exc)[:200]} for {label}") from None
    if isinstance(out, kvcalc.Estimate):
        seq = np.asarray(out.per_sequence)
        assert seq.dtype.kind == "i" and (seq >= 0).all() and all(math.isfinite(float(x)) for x in seq), label
    return "ok"


def chdir_scratch(scratch: Path) -> str:
    old = os.getcwd()
    os.chdir(scratch)
    return old
