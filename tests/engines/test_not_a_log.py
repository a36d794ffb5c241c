"""A file that is not an engine's start-up log is refused in one line naming it (exit 2), saying what it holds
(issue 26): no engine's lines at all, the other engine's lines, or an engine's lines without the KV lines. Each
form is the one `FILE: cannot read` has: the argument, then the file quoted."""

import io

import pytest

START = "INFO 11-30 12:00:00 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: model='a/b'\n"


@pytest.mark.parametrize("data, holds", [
    (b"", "an empty file"),
    (b"myhost\n", "1 line of text, none an engine's"),  # /etc/hostname
    (b"a\nb\nc", "3 lines of text, none an engine's"),
    (bytes(range(256)) * 16, "binary data, not text"),
    (b"\0" * 100_000, "100,000 NUL bytes"),  # what /dev/zero gives
    (bytes(range(128, 256)) * 64, "binary data, not text"),  # no NUL, none of it UTF-8
    (b"caf\xe9 au lait\n" * 200, "200 lines of text, none an engine's"),  # Latin-1: a byte in 13 not UTF-8
], ids=["empty", "hostname", "text", "bytes", "nul", "not-utf8", "latin1"])
def test_a_file_with_no_engine_lines_says_so(cli, tmp_path, data, holds):
    f = tmp_path / "x.log"
    f.write_bytes(data)
    r = cli("check-log", str(f))
    assert r.code == 2 and r.out == ""
    assert r.err == f"kvcalc: error: FILE: '{f}' has no vLLM, SGLang, llama.cpp or TensorRT-LLM start-up lines ({holds})\n"


def test_stdin_too(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("nothing here\n"))
    r = cli("check-log", "-")
    assert r.code == 2 and r.err == ("kvcalc: error: FILE: '-' has no vLLM, SGLang, llama.cpp or TensorRT-LLM start-up lines (1 line of text, "
                                     "none an engine's)\n")


def test_an_engine_named_whose_lines_these_are_not(cli, tmp_path):
    f = tmp_path / "s.log"
    f.write_text("[2026-12-01 10:00:40] max_total_num_tokens=2086558, context_len=256000\n")
    r = cli("check-log", str(f), "--engine", "vllm")
    assert r.code == 2 and r.err == (f"kvcalc: error: FILE: '{f}' has no vLLM start-up lines (it holds SGLang's: "
                                     "--engine sglang)\n")


def test_engine_lines_without_kv_lines_name_what_was_looked_for(cli, tmp_path):
    f = tmp_path / "crashed.log"
    f.write_text(START + "ERROR 11-30 12:00:09 [core.py:700] EngineCore failed to start.\n")
    r = cli("check-log", str(f))
    assert r.code == 2 and r.err == (f"kvcalc: error: FILE: '{f}' has vLLM start-up lines but no KV cache line "
                                     "(looked for 'GPU KV cache size', 'Maximum concurrency', 'Available KV cache "
                                     "memory', '# GPU blocks')\n")


def test_the_library_says_the_same(tmp_path):
    from kvcalc.checklog import check_log
    from kvcalc.errors import KvcalcError

    with pytest.raises(KvcalcError) as exc:
        check_log("", "x.log")
    assert str(exc.value) == "file: 'x.log' has no vLLM, SGLang, llama.cpp or TensorRT-LLM start-up lines (an empty file)"
    assert exc.value.param == "file"
