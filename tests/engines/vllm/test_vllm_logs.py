"""kvcalc check-log: vLLM start-up logs (published excerpts and hand-written ones) against the plan."""

from pathlib import Path

LOGS = Path(__file__).parents[2] / "fixtures" / "logs"


def test_published_pr12569_block_count(cli):
    # "# GPU blocks: 1381", "Maximum concurrency for 2048 tokens per request: 10.79x": Llama-3.1-70B at
    # 2,048 tokens needs 2048 / 16 = 128 blocks; 1381 / 128 = 10.789 -> "10.79x"
    r = cli("check-log", str(LOGS / "pr12569-llama-3.1-70b.log"), "-m", "llama-3.1-70b", "-p", "bf16", "--json")
    assert r.code == 0, r.err
    out = r.json()
    conc = next(x for x in out["rows"] if x["figure"].startswith("Maximum concurrency"))
    assert conc["logged"] == "10.79x" and conc["kvcalc"] == "10.79x" and conc["agrees"] is True
    assert out["verdict"] == "agrees"


def test_published_pr13596_token_count(cli):
    # 2,042,016 tokens at 2,048 per request: 2,042,016 / 16 = 127,626 blocks; / 128 blocks = 997.078 -> 997.08x
    r = cli("check-log", str(LOGS / "pr13596-llama-3.1-8b.log"), "-m", "llama-3.1-8b", "-p", "bf16", "--json")
    assert r.code == 0, r.err
    out = r.json()
    rows = {x["figure"].split(" (")[0]: x for x in out["rows"]}
    assert rows["GPU KV cache size"]["kvcalc"] == "127,626 blocks"
    assert rows["Maximum concurrency at 2,048"]["kvcalc"] == "997.08x"
    assert out["verdict"] == "agrees"


def test_synthetic_033_log_matched_by_hugging_face_id(cli):
    # the model, context, dtype and batched tokens come from the log itself (no flags)
    r = cli("check-log", str(LOGS / "synthetic-0.33-llama-3.1-8b.log"), "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["model"] == "llama-3.1-8b" and out["precision"] == "bf16" and out["context_tokens"] == 131072
    assert out["settings"]["max_num_batched_tokens"] == 8192 and out["log_vllm_version"] == "0.33.0"
    rows = {x["figure"].split(" (")[0]: x for x in out["rows"]}
    # 20.00 GiB stands for 19.995 .. 20.005 GiB: 21,469,467,771 .. 21,480,205,189 B
    assert rows["KV pool per GPU"]["kvcalc"] == "21,469,467,771 .. 21,480,205,189 B"
    # / 2 MiB blocks: 10,237 .. 10,242 blocks -> x 16 tokens
    assert rows["blocks in the pool"]["kvcalc"] == "10,237 .. 10,242"
    assert rows["GPU KV cache size"]["kvcalc"] == f"{10237 * 16:,} .. {10242 * 16:,}"
    assert out["verdict"] == "agrees"


def test_a_wrong_log_figure_is_reported(cli):
    r = cli("check-log", str(LOGS / "synthetic-0.33-llama-3.1-8b-wrong.log"))
    assert r.code == 1
    assert "DIFFERS" in r.out and "Verdict: differs." in r.out


def test_refusals(cli, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("INFO nothing about caches here\n")
    r = cli("check-log", str(empty), "-m", "llama-3.1-8b")
    assert r.code == 2 and r.err == (f"kvcalc: error: FILE: '{empty}' has no vLLM, SGLang, llama.cpp or TensorRT-LLM start-up lines (1 line of "
                                     "text, none an engine's)\n")
    unknown = tmp_path / "u.log"
    unknown.write_text((LOGS / "synthetic-0.33-llama-3.1-8b.log").read_text().replace("meta-llama/Llama-3.1-8B",
                                                                                      "acme/Unknown-9B"))
    r = cli("check-log", str(unknown))
    assert r.code == 2 and "matches no kvcalc config" in r.err and "--model" in r.err
    r = cli("check-log", str(tmp_path / "missing.log"))
    assert r.code == 2 and r.err.startswith("kvcalc: error: FILE: ") and "does not exist (no such file)" in r.err
    r = cli("check-log", str(LOGS / "synthetic-0.33-llama-3.1-8b.log").replace(".log", "-x.log"))
    assert r.code == 2 and r.err.startswith("kvcalc: error: FILE: ") and "does not exist (no such file)" in r.err and r.err.count("\n") == 1
    # a kv_cache_dtype no precision of the model maps to (the log not stating one: tests/engines/test_checklog_dtype.py)
    odd = tmp_path / "odd.log"
    odd.write_text((LOGS / "synthetic-0.33-llama-3.1-8b.log").read_text().replace("kv_cache_dtype=auto",
                                                                                  "kv_cache_dtype=int4"))
    r = cli("check-log", str(odd))
    assert r.code == 2 and r.err.count("\n") == 1
    assert "the plan needs the precision: the log's kv_cache_dtype 'int4' maps to none of llama-3.1-8b's " in r.err
    assert "--precision P" in r.err


def test_everything_missing_is_asked_for_at_once(cli, tmp_path):
    # an unknown model, no max_model_len and a kv_cache_dtype no kvcalc precision maps to: one error names --model
    # and the context, so a second run is not needed to learn of the second (the precision follows the model)
    log = tmp_path / "bare.log"
    log.write_text("INFO Initializing a V1 LLM engine (v0.33.0) with config: model='acme/Unknown-9B', x=1\n"
                   "INFO GPU KV cache size: 1,000 tokens\n")
    r = cli("check-log", str(log))
    assert r.code == 2 and r.err.count("\n") == 1
    for fragment in ("the model: the log's 'acme/Unknown-9B'", "--model NAME", "the context: the log states no "
                     "max_model_len"):
        assert fragment in r.err
    assert "precision" not in r.err  # not stated: auto, whatever the model (tests/engines/test_checklog_dtype.py)
    # a model id of 65,000 characters (a line is read up to 65,536) is quoted by its first 60 and its length
    log.write_text(f"INFO with config: model='{'a' * 65_000}'\nINFO GPU KV cache size: 1,000 tokens\n")
    r = cli("check-log", str(log))
    assert r.code == 2 and r.err.count("\n") == 1 and len(r.err) < 400
    assert f"the model: the log's '{'a' * 60}…' (65,000 characters) matches no kvcalc config" in r.err


def test_hybrid_log_block_size_padding_and_pool(cli, tmp_path):
    # a hand-written vLLM 0.33 log of Qwen3-Next (its header works every figure out): 576-token attention
    # blocks, state pages padded by 7.46%, 1,516 .. 1,517 blocks of 14,155,776 B, 465 per request
    log = LOGS / "synthetic-0.33-qwen3-next.log"
    r = cli("check-log", str(log), "--json")
    assert r.code == 0, r.err
    d = r.json()
    rows = {row["figure"]: row for row in d["rows"]}
    assert rows["attention block size (hybrid)"]["agrees"] is True
    assert rows["state page padding"]["agrees"] is True and "1,097,728 -> 1,179,648 B" in rows["state page padding"]["kvcalc"]
    assert d["settings"]["prefix_caching"] is True and d["settings"]["gdn_prefill_backend"] == "flashinfer"
    assert d["verdict"] == "agrees"
    # the same log claiming Triton's GDN prefill: no 64-token checkpoint grid, so kvcalc plans 544-token blocks
    # (16 x ceil(1,097,728 / 32,768)) and the logged 576 no longer agrees
    wrong = tmp_path / "triton.log"
    wrong.write_text(log.read_text().replace("Using FlashInfer GDN", "Using Triton/FLA GDN"))
    r = cli("check-log", str(wrong), "--json")
    assert r.code == 1
    rows = {row["figure"]: row for row in r.json()["rows"]}
    assert rows["attention block size (hybrid)"]["kvcalc"] == "544 tokens" and rows["attention block size (hybrid)"]["agrees"] is False
