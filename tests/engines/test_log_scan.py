"""The log parse is one scan of the whole text (issue 26: 64 MiB took 8 s to 5 min, now about a second; timed in
benchmarks/bench_checklog.py, not here). It must read what the line-by-line parse read: the same figures, line
numbers, notes, ranks and refusals, held here against that parse (tests/engines/log_parse_reference.py) on texts
built from the readers' own hints, tags and start lines, with lines past MAX_LINE made cheap by lowering it."""

import random
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines import logs as L
from kvcalc.errors import KvcalcError

import log_parse_reference as R

PIECES = [
    "\n", "\n", "\n", " ", " ", ", ", "=", "'", "x", "[", "]", "|", "(", ")", ": ", "1", "2", "16", "0", "7.5",
    "131072", "1,024", " GiB", " GB", " tokens", "x\n",
    # vLLM
    "Initializing a V1 LLM engine (v0.33.0) with config: model='meta-llama/Llama-3.1-8B', ", "with config: ",
    "max_seq_len=", "amax_seq_len=", "tensor_parallel_size=", "pipeline_parallel_size=", "kv_cache_dtype=auto",
    "block_size=", " bytes", "decode_context_parallel_size=", "enable_prefix_caching=True",
    "Available KV cache memory: ", "GPU KV cache size: ", "Maximum concurrency for ", " tokens per request: ",
    "# GPU blocks: ", "kv cache group sizes (", "kv lcm block sizes ", "Auto-fit max_model_len: reduced from 9 to ",
    "(EngineCore_DP0 pid=1) ", "(EngineCore_DP1 pid=2) ", "(Worker_DP0_PP1_TP0 pid=3) ", "(Worker_PP0 pid=4) ",
    # SGLang
    "server_args={'model_path': 'meta-llama/Llama-3.1-8B', 'tp_size': ", "ServerArgs(tp_size=", "APIServer ",
    "'page_size': ", "KV Cache is allocated. dtype: torch.bfloat16, #tokens: ", "SWA KV Cache is allocated. ",
    "K size: ", "KV size: ", "max_total_num_tokens=", ", max_running_requests=", "context_len=",
    "DSV4 pool sizes: full=", " swa=", "[2026-12-01 10:00:00 DP0 TP0] ", "[t DP1 TP1] ", "[t PP1] ", " DP", " PP",
    "Post-capture KV sizing: KV cache allocated. dtype: bf16, #tokens: ",
    # pieces a value may be cut between (a quote or parenthesis left open, a key without its value)
    "with config: model='", "'model_path': '", "Initializing a V1 LLM engine (v", "'tp_size':",
    # whole lines and start lines, twice, so that most texts hold figures and several runs
    *["\n"] * 6, *["# GPU blocks: 12\n", "GPU KV cache size: 1,024 tokens\n", "KV Cache is allocated. #tokens: 5\n",
                   "max_total_num_tokens=9\n", "Initializing a V1 LLM engine ", "server_args="] * 2,
]
OLD = {"vllm": R.VLLM, "sglang": R.SGLANG}


def _outcome(parse):
    try:
        f = parse()
    except KvcalcError as exc:
        return ("refused", str(exc))
    return (f.values, f.lines, f.notes, f.ranks)


@pytest.fixture
def short_lines(monkeypatch):
    monkeypatch.setattr(L, "MAX_LINE", 80)  # lines past 80 characters are read by their first 80, both parses


@pytest.mark.parametrize("seed", range(4))
def test_the_scan_reads_what_the_line_by_line_parse_read(short_lines, seed):
    # 1,500 texts a seed of up to 60 pieces (seeded, not hypothesis: its small lists rarely reached a figure on
    # another rank's line, which this finds within 10 texts when the rank check is planted away)
    rnd = random.Random(seed)
    for _ in range(1500):
        engine = rnd.choice(["vllm", "sglang"])
        text = "".join(rnd.choice(PIECES) for _ in range(rnd.randrange(60)))
        reader = get_engine(engine).logs
        new = _outcome(lambda: reader.parse(text, "t.log"))
        assert new == _outcome(lambda: R.parse(reader, OLD[engine], text, "t.log")), text
        for key, pat in reader.patterns.items():  # no pattern crosses a line break (the scan relies on it)
            assert not any("\n" in m.group(0) for m in pat.finditer(text)), (key, text)


def test_a_long_line_is_read_by_its_first_max_line_characters(short_lines):
    # the pattern over the whole line finds no block size ("block_size=16777216 bytes" is the weight loader's),
    # but the line is read by its first 80 characters, which end in "block_size=16": the block size the
    # line-by-line parse read, so the scan reads each line past MAX_LINE alone as well
    head = "Initializing a V1 LLM engine (v0.33.0) with config: model='a/b',"
    line = head + " " * (80 - len(head) - len(" block_size=16")) + " block_size=16777216 bytes\n"
    assert line.index("block_size=16") + len("block_size=16") == 80
    reader = get_engine("vllm").logs
    text = line + "INFO # GPU blocks: 1381\n"
    facts = reader.parse(text)
    assert facts.values["block_size"] == 16 and facts.lines["block_size"] == 1
    assert _outcome(lambda: reader.parse(text)) == _outcome(lambda: R.parse(reader, R.VLLM, text))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_fixtures_read_alike(engine):
    reader = get_engine(engine).logs
    for path in sorted((Path(__file__).parents[1] / "fixtures" / "logs").glob("*.log")):
        text = path.read_text()
        assert _outcome(lambda: reader.parse(text)) == _outcome(lambda: R.parse(reader, OLD[engine], text)), path


def test_many_starts_on_one_line_are_many_runs():
    # a line holding the start line's text three times is three starts of one line (empty runs between): the
    # runs are counted as the line-by-line parse counted them, and the first with figures is read
    reader = get_engine("vllm").logs
    start = "Initializing a V1 LLM engine (v0.33.0) with config: model='a/b', max_seq_len=2048 "
    text = "x\n" + start * 3 + "\n# GPU blocks: 1381\n" + start + "\n# GPU blocks: 7\n"
    facts = reader.parse(text)
    assert facts.values["gpu_blocks"] == 1381 and facts.lines["gpu_blocks"] == 3
    assert facts.notes == ["the log holds 4 engine starts; read run 3, from line 2 (the first with KV figures)"]
    assert _outcome(lambda: reader.parse(text)) == _outcome(lambda: R.parse(reader, R.VLLM, text))


def test_a_damaged_number_in_a_run_not_read_is_not_refused(cli, tmp_path):
    # a crashed start whose config line says tensor_parallel_size=0, then the restart with KV lines: the log is
    # read on the restart (its figures: tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log, 20.00 GiB of 2 MiB
    # blocks, 163,840 tokens, 1.25x); the crashed run is not read, so its 0 is not refused (it was, before issue 26)
    good = (Path(__file__).parents[1] / "fixtures" / "logs" / "synthetic-0.33-llama-3.1-8b.log").read_text()
    crashed = next(s for s in good.splitlines() if "Initializing" in s).replace("tensor_parallel_size=1",
                                                                              "tensor_parallel_size=0")
    log = tmp_path / "restart.log"
    log.write_text(crashed + "\nERROR EngineCore failed to start.\n" + good)
    r = cli("check-log", str(log), "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["verdict"] == "agrees" and out["settings"]["tp"] == 1
    assert "the log holds 2 engine starts; read run 2, from line 8 (the first with KV figures)" in out["notes"]
    # (run 2 starts at line 8: the crashed line, the error, the fixture's 5 comment lines); the same 0 in the run
    # read is refused with its line (6), as before
    log.write_text(good.replace("tensor_parallel_size=1", "tensor_parallel_size=0"))
    r = cli("check-log", str(log))
    assert r.code == 2 and f"{log}:6: tp: 0 is out of range" in r.err
