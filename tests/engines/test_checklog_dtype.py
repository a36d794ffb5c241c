"""A log that does not state the cache dtype (the vLLM pull-request excerpts, SGLang releases before 0.5) is
planned at what the engine's default --kv-cache-dtype, auto, stores for the model, and a note says so (issue
26); where that is no precision of the model, the log is refused in one line naming it. Figures from the logs'
own lines and hand arithmetic in the comments."""

from pathlib import Path

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
NOTE = "the log does not state the cache dtype; planned at {p}, what {e}'s default kv_cache_dtype, auto, stores for {m}"


def _rows(out):
    return {x["figure"].split(" (")[0]: x for x in out["rows"]}


def test_pr13596_is_planned_at_the_models_dtype(cli):
    # "GPU KV cache size: 2,042,016 tokens", "Maximum concurrency for 2,048 tokens per request: 997.08x":
    # Llama-3.1-8B in bf16, 16-token blocks: 2,042,016 / 16 = 127,626 blocks; 2,048 / 16 = 128 a request;
    # 127,626 / 128 = 997.078 -> 997.08x
    r = cli("check-log", str(LOGS / "pr13596-llama-3.1-8b.log"), "-m", "llama-3.1-8b", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["precision"] == "bf16" and out["verdict"] == "agrees"
    assert _rows(out)["GPU KV cache size"]["kvcalc"] == "127,626 blocks"
    assert _rows(out)["Maximum concurrency at 2,048"]["kvcalc"] == "997.08x"
    assert NOTE.format(p="bf16", e="vLLM", m="llama-3.1-8b") + " (the model's default precision)" in out["notes"]


def test_pr12569_likewise(cli):
    # "# GPU blocks: 1381" at 2,048 tokens: 1381 / 128 = 10.789 -> "10.79x"
    r = cli("check-log", str(LOGS / "pr12569-llama-3.1-70b.log"), "-m", "llama-3.1-70b")
    assert r.code == 0, r.err
    assert "10.79x" in r.out and "Verdict: agrees." in r.out
    assert "Note: the log does not state the cache dtype; planned at bf16, what vLLM's default kv_cache_dtype," in r.out


def test_an_unknown_model_is_asked_for_but_not_the_precision(cli):
    # once the model is named the precision follows (test above): only the model is missing
    r = cli("check-log", str(LOGS / "pr13596-llama-3.1-8b.log"))
    assert r.code == 2 and r.err.count("\n") == 1
    assert "the plan needs the model" in r.err and "precision" not in r.err


def test_deepseek_v4_is_planned_at_vllms_fp8_layout(cli, tmp_path):
    # vLLM 0.33 keeps DeepSeek V4 in fp8_ds_mla whatever auto would give (models/deepseek_v4/attention.py)
    log = tmp_path / "v4.log"
    head = ("INFO Initializing a V1 LLM engine (v0.33.0) with config: model='deepseek-ai/DeepSeek-V4-Flash', "
            "max_seq_len=131072, tensor_parallel_size=1{}\n")
    log.write_text(head.format("") + "INFO # GPU blocks: 1000\n")
    out = cli("check-log", str(log), "--json").json()
    assert out["precision"] == "fp8"
    assert (NOTE.format(p="fp8", e="vLLM", m="deepseek-v4-flash") + " (vLLM's own layout for it, not the model's "
            "bf16)") in out["notes"]
    # a log stating auto: the same precision, no note
    log.write_text(head.format(", kv_cache_dtype=auto") + "INFO # GPU blocks: 1000\n")
    out = cli("check-log", str(log), "--json").json()
    assert out["precision"] == "fp8" and not any("cache dtype" in n for n in out["notes"])


def test_a_default_that_depends_on_the_gpu_says_so(cli, tmp_path):
    # SGLang stores DeepSeek V3.2's DSA cache in bf16 on Hopper and in fp8 from compute capability 10
    # (_dsa_kv_cache_dtype_default); the log names no GPU, so the note says both
    log = tmp_path / "v32.log"
    log.write_text("[2026-12-01 10:00:00] server_args={'model_path': 'deepseek-ai/DeepSeek-V3.2', 'tp_size': 8}\n"
                   "[2026-12-01 10:00:40] max_total_num_tokens=100000, max_running_requests=256, context_len=163840\n")
    out = cli("check-log", str(log), "--json").json()
    assert out["precision"] == "bf16"
    assert (NOTE.format(p="bf16", e="SGLang", m="deepseek-v3.2") + " (the model's default precision) on Hopper, "
            "kvcalc's GPU where none is named (fp8 on sm100, sm120: the log names no GPU)") in out["notes"]


def test_no_default_that_can_be_justified_is_refused(cli, tmp_path):
    # a model declaring fp8 only: vLLM's auto stores the model's 16-bit dtype, which it does not declare
    spec = (Path(__file__).parents[2] / "kvcalc" / "data" / "configs" / "llama-3.1-8b.yaml").read_text()
    spec = spec.replace("  bf16: {kv: bf16}\n", "").replace("default_precision: bf16", "default_precision: fp8")
    (tmp_path / "fp8-only.yaml").write_text(spec.replace("name: llama-3.1-8b", "name: fp8-only"))
    log = LOGS / "pr13596-llama-3.1-8b.log"
    r = cli("check-log", str(log), "-m", str(tmp_path / "fp8-only.yaml"))
    assert r.code == 2 and r.out == ""
    assert r.err == (f"kvcalc: error: {log}: the plan needs the precision: the log does not state the cache dtype, "
                     "and vLLM's default, auto, stores none of fp8-only's precisions (fp8) (--precision P)\n")
    r = cli("check-log", str(log), "-m", str(tmp_path / "fp8-only.yaml"), "-p", "fp8", "--json")
    assert r.code == 0 and r.json()["precision"] == "fp8" and not any("cache dtype" in n for n in r.json()["notes"])


def test_vllms_auto_is_the_models_own_16_bit_dtype(cli, tmp_path):
    # Llama 2's checkpoint is float16 (kvcalc's llama-2-7b defaults to fp16, from its config.json torch_dtype), and
    # vLLM serves it and stores its KV cache in fp16 under auto, not bf16 (which it also declares). Figures:
    # 32 layers x 32 KV heads x 128 x (K, V) x 2 B = 524,288 B a token, 8 MiB a 16-token block; 20.00 GiB = 2,560
    # blocks (2,559 .. 2,560 for anything that rounds to it); 4,096 / 16 = 256 a request -> 10.00x, 40,960 tokens
    log = tmp_path / "llama2.log"
    body = ("INFO Initializing a V1 LLM engine (v0.33.0) with config: model='meta-llama/Llama-2-7b-hf', "
            "max_seq_len=4096, tensor_parallel_size=1, kv_cache_dtype=auto\n"
            "INFO Available KV cache memory: 20.00 GiB\n"
            "INFO GPU KV cache size: 40,960 tokens, Maximum concurrency for 4,096 tokens per request: 10.00x\n")
    log.write_text(body)
    out = cli("check-log", str(log), "--json").json()
    assert out["model"] == "llama-2-7b" and out["precision"] == "fp16" and out["verdict"] == "agrees"
    log.write_text(body.replace(", kv_cache_dtype=auto", ""))
    out = cli("check-log", str(log), "--json").json()
    assert out["precision"] == "fp16" and out["verdict"] == "agrees"
    assert NOTE.format(p="fp16", e="vLLM", m="llama-2-7b") + " (the model's default precision)" in out["notes"]
