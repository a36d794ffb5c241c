"""check-log on the lines vLLM 0.33 and SGLang 0.5.23 print beyond the basic ones: runs, ranks, pipeline stages,
overrides, auto-fit, the group block sizes, DP attention. Every log is written here in the engine's own wording
(the source line is named at each), and every expected figure is worked out by hand in the comments."""

import pytest

GIB = 1 << 30
# Llama-3.1-8B bf16 on vLLM: a block of 16 tokens x 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 2 MiB;
# 131,072 / 16 = 8,192 blocks a request
CONFIG = ("INFO 12-01 10:00:00 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
          "model='meta-llama/Llama-3.1-8B', dtype=torch.bfloat16, max_seq_len={L}, tensor_parallel_size={tp}, "
          "pipeline_parallel_size={pp}, data_parallel_size=1, decode_context_parallel_size={dcp}, "
          "kv_cache_dtype={dtype}, enable_prefix_caching=True\n")
AVAIL = "INFO 12-01 10:00:41 [gpu_worker.py:773] Available KV cache memory: {gib} GiB\n"  # format_gib: round(., 2)
CAP = ("INFO 12-01 10:00:41 [kv_cache_utils.py:1149] GPU KV cache size: {tokens:,} tokens, Maximum concurrency "
       "for {L:,} tokens per request: {conc}x\n")


def vllm_log(tmp_path, body, name="v.log", L=131072, tp=1, pp=1, dcp=1, dtype="auto", model=None):
    head = CONFIG.format(L=L, tp=tp, pp=pp, dcp=dcp, dtype=dtype)
    if model:
        head = head.replace("meta-llama/Llama-3.1-8B", model)
    path = tmp_path / name
    path.write_text(head + body)
    return str(path)


class rows(dict):
    """A check-log JSON's rows by the start of their figure's name."""

    def __init__(self, out):
        super().__init__((x["figure"], x) for x in out["rows"])

    def __getitem__(self, start):
        return next(x for name, x in self.items() if name.startswith(start))


def test_a_weight_loader_block_size_is_not_the_cache_block(cli, tmp_path):
    # weight_utils.py prints its prefetch block in bytes; 20.00 GiB = 10,240 blocks of 2 MiB -> 1.25x, 163,840
    body = ("INFO 12-01 10:00:10 [weight_utils.py:1106] Prefetching checkpoint files into page cache started (in "
            "background, num_threads=8, block_size=16777216 bytes)\n"
            + AVAIL.format(gib="20.0") + CAP.format(tokens=163840, L=131072, conc="1.25"))
    r = cli("check-log", vllm_log(tmp_path, body), "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["settings"]["block_size"] is None and r.json()["verdict"] == "agrees"


def test_pipeline_stages_plan_one_stage(cli, tmp_path):
    # Llama-3.1-70B tp 4 pp 2: 40 layers a stage, 2 KV heads a rank: a block 16 x 40 x 2 x 128 x 2 x 2 B = 655,360 B;
    # 15.00 GiB / 655,360 = 24,576 blocks; 8,192 a request -> 3.00x, 24,576 x 16 = 393,216 tokens (all 80 layers
    # would give 12,288 blocks: 196,608)
    body = AVAIL.format(gib="15.0") + CAP.format(tokens=393216, L=131072, conc="3.00")
    r = cli("check-log", vllm_log(tmp_path, body, tp=4, pp=2, model="meta-llama/Llama-3.1-70B"), "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    assert out["settings"]["pp"] == 2 and out["verdict"] == "agrees"
    assert rows(out)["blocks per request"]["kvcalc"] == "8,192 (655,360 B each)"


def test_decode_context_parallelism_is_refused(cli, tmp_path):
    r = cli("check-log", vllm_log(tmp_path, AVAIL.format(gib="20.0") + CAP.format(tokens=1, L=131072, conc="1.00"),
                                  dcp=8))
    assert r.code == 2 and r.err.count("\n") == 1
    assert "v.log:1: decode_context_parallel_size=8" in r.err and "does not plan decode context parallelism" in r.err


def test_the_auto_fitted_length_is_the_context(cli, tmp_path):
    # kv_cache_planning.py: max_model_len reduced to 65,536 after the config line printed 131,072: 10.00 GiB =
    # 5,120 blocks, 65,536 / 16 = 4,096 a request -> 1.25x, int(1.25 x 65,536) = 81,920 tokens
    fit = ("INFO 12-01 10:00:41 [kv_cache_planning.py:1406] Auto-fit max_model_len: reduced from 131072 to 65536 "
           "to fit in available KV cache memory (10.0 GiB)\n")
    body = AVAIL.format(gib="10.0") + fit + CAP.format(tokens=81920, L=65536, conc="1.25")
    r = cli("check-log", vllm_log(tmp_path, body), "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    assert out["context_tokens"] == 65536 and out["verdict"] == "agrees"
    assert any("auto-fitted to 65,536" in n for n in out["notes"])
    planted = vllm_log(tmp_path, AVAIL.format(gib="10.0") + fit + CAP.format(tokens=81920, L=65536, conc="1.50"),
                       name="p.log")
    r = cli("check-log", planted, "--json")
    assert r.code == 1 and rows(r.json())["Maximum concurrency at 65,536"]["agrees"] is False


def test_a_block_override_and_a_given_kv_memory(cli, tmp_path):
    # num_gpu_blocks_override 4,096: 4,096 / 8,192 = 0.50x, int(0.5 x 131,072) = 65,536 tokens
    over = ("INFO 12-01 10:00:41 [kv_cache_planning.py:1526] Overriding num_gpu_blocks=10240 with "
            "num_gpu_blocks_override=4096\n")
    r = cli("check-log", vllm_log(tmp_path, AVAIL.format(gib="20.0") + over
                                  + CAP.format(tokens=65536, L=131072, conc="0.50")), "--json")
    assert r.code == 0, r.out + r.err
    assert any("num_gpu_blocks_override set the pool to 4,096 blocks" in n for n in r.json()["notes"])
    # gpu_worker.py, --kv-cache-memory-bytes: 10.0 GiB = 5,120 blocks -> 0.625 -> "0.62x", int(0.625 x 131,072)
    # = 81,920 tokens; a planted 12.5 GiB (6,400 blocks) does not give them
    for gib, code in (("10.0", 0), ("12.5", 1)):
        line = (f"INFO 12-01 10:00:30 [gpu_worker.py:675] Initial free memory 79.1 GiB, reserved {gib} GiB memory "
                "for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does "
                "not respect the gpu_memory_utilization config.\n")
        r = cli("check-log", vllm_log(tmp_path, line + CAP.format(tokens=81920, L=131072, conc="0.62"),
                                      name=f"m{gib}.log"), "--json")
        assert r.code == code, r.out + r.err
        assert "kv_cache_memory_bytes" in " ".join(dict(rows(r.json())))


def test_tokens_no_block_count_gives_are_refused(cli, tmp_path):
    # 20.00 GiB stands for 10,237 .. 10,242 blocks, whose tokens are 16 x blocks: 163,848 lies between 163,792 and
    # 163,872 but is no multiple of 16
    r = cli("check-log", vllm_log(tmp_path, AVAIL.format(gib="20.0") + CAP.format(tokens=163848, L=131072,
                                                                                   conc="1.25")), "--json")
    assert r.code == 1 and rows(r.json())["GPU KV cache size"]["agrees"] is False


def test_data_parallel_ranks_and_a_restart(cli, tmp_path):
    # two engine cores log their own capacity lines; DP0's are read (its 20.00 GiB and 163,840 tokens agree)
    dp1 = ("(EngineCore_DP1 pid=2) INFO 12-01 10:00:41 [kv_cache_utils.py:1149] GPU KV cache size: 147,456 tokens, "
           "Maximum concurrency for 131,072 tokens per request: 1.12x\n")
    body = ("(Worker_DP0 pid=3) " + AVAIL.format(gib="20.0") + dp1
            + "(EngineCore_DP0 pid=1) " + CAP.format(tokens=163840, L=131072, conc="1.25"))
    r = cli("check-log", vllm_log(tmp_path, body), "--json")
    assert r.code == 0, r.out + r.err
    assert "the log holds lines of 2 DP ranks; read DP0's" in r.json()["notes"]
    # a first run that died before its KV lines, then a restart at 32,768: 20.00 GiB, 2,048 blocks a request ->
    # 5.00x, 163,840 tokens; the first run's max_seq_len (8,192) is not mixed in
    first = CONFIG.format(L=8192, tp=1, pp=1, dcp=1, dtype="auto") + "ERROR 12-01 09:59:00 [core.py:700] CUDA OOM\n"
    second = CONFIG.format(L=32768, tp=1, pp=1, dcp=1, dtype="auto") + AVAIL.format(gib="20.0") \
        + CAP.format(tokens=163840, L=32768, conc="5.00")
    path = tmp_path / "restart.log"
    path.write_text(first + second)
    r = cli("check-log", str(path), "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    assert out["context_tokens"] == 32768 and rows(out)["max_model_len"]["line"] == 3
    assert "the log holds 2 engine starts; read run 2, from line 3 (the first with KV figures)" in out["notes"]


def test_a_bfloat16_cache_dtype_is_bf16(cli, tmp_path):
    r = cli("check-log", vllm_log(tmp_path, AVAIL.format(gib="20.0") + CAP.format(tokens=163840, L=131072,
                                                                                   conc="1.25"), dtype="bfloat16"),
            "--json")
    assert r.code == 0 and r.json()["precision"] == "bf16"


def test_the_group_block_sizes(cli, tmp_path):
    # kv_cache_utils.py "kv cache group sizes (32,)", "kv lcm block sizes 32": a block of 32 (4 MiB), 5,120 of
    # them in 20.00 GiB, 4,096 a request -> 1.25x, 163,840 tokens: the block is read from the line
    groups = ("INFO 12-01 10:00:41 [kv_cache_utils.py:865] kv cache group sizes (32,)\n"
              "INFO 12-01 10:00:41 [kv_cache_utils.py:866] kv lcm block sizes {lcm}\n")
    body = AVAIL.format(gib="20.0") + groups.format(lcm=32) + CAP.format(tokens=163840, L=131072, conc="1.25")
    r = cli("check-log", vllm_log(tmp_path, body), "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    assert out["settings"]["block_size"] == 32 and rows(out)["block size of each KV cache group"]["agrees"]
    assert any("the block size, 32, is the one the log's 'kv cache group sizes' line states" in n
               for n in out["notes"])
    r = cli("check-log", vllm_log(tmp_path, body.replace("block sizes 32", "block sizes 64"), name="w.log"), "--json")
    assert r.code == 1 and rows(r.json())["scheduler block size"]["agrees"] is False


def test_a_hybrids_group_sizes_are_compared_not_taken(cli, tmp_path):
    # Qwen3-Next: vLLM aligns the attention block to 576 (tests/engines/vllm/test_plan_hybrid.py): four groups of 576;
    # a planted 512 is not planned from, it differs
    from pathlib import Path

    base = (Path(__file__).parents[1] / "fixtures" / "logs" / "synthetic-0.33-qwen3-next.log").read_text()
    for sizes, code in (("576, 576, 576, 576", 0), ("512, 512, 512, 512", 1)):
        path = tmp_path / f"q{code}.log"
        path.write_text(base + f"INFO 12-01 10:00:41 [kv_cache_utils.py:865] kv cache group sizes ({sizes})\n")
        r = cli("check-log", str(path), "--json")
        assert r.code == code, r.out + r.err
        assert rows(r.json())["block size of each KV cache group"]["agrees"] is (code == 0)


# ---- SGLang 0.5.23 -------------------------------------------------------------------------------------------
ARGS = ("[2026-12-01 10:00:00] server_args={{'model_path': 'meta-llama/Llama-3.1-70B', 'tp_size': {tp}, "
        "'pp_size': {pp}, 'dp_size': 1, 'attn_dp_size': {adp}, 'enable_dp_attention': {dpa}, "
        "'mem_fraction_static': 0.85, 'page_size': 1, 'kv_cache_dtype': 'auto', 'max_running_requests': None}}\n")


@pytest.mark.parametrize("ranks", ["", " PP0 TP0"])
def test_sglang_pipeline_stage_pools(cli, tmp_path, ranks):
    # tp 4, pp 2: a stage's pool holds 40 layers x 2 KV heads x 128 x 2 B of K a token: K size = (500,000 + 1
    # padding row) x 20,480 B = 10,240,020,480 B = 9.54 GB (GB = 2^30); all 80 layers would be 19.07
    kv = (f"[2026-12-01 10:00:20{ranks}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, K size: "
          "9.54 GB, V size: 9.54 GB\n")
    other = kv.replace("PP0", "PP1").replace("9.54", "1.11") if ranks else ""
    path = tmp_path / "s.log"
    path.write_text(ARGS.format(tp=4, pp=2, adp=1, dpa=False) + other + kv)
    r = cli("check-log", str(path), "--engine", "sglang", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["settings"]["pp"] == 2
    assert (ranks == "") or "the log holds lines of 2 PP ranks; read PP0's" in r.json()["notes"]


def test_sglang_dp_attention_size_and_post_capture(cli, tmp_path):
    # Llama-3.1-70B tp 4 with DP attention 4 (0.5.23 prints 'dp_size': 1, 'attn_dp_size': 4): attention tp 1, all
    # 8 KV heads a rank: K size = (100,000 + 1) x 8 x 128 x 2 B x 80 layers = 16,384,163,840 B = 15.26 GB
    kv = ("[2026-12-01 10:00:20 DP0 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: "
          "15.26 GB, V size: 15.26 GB\n")
    path = tmp_path / "dp.log"
    path.write_text(ARGS.format(tp=4, pp=1, adp=4, dpa=True) + kv)
    r = cli("check-log", str(path), "--engine", "sglang", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["settings"]["dp"] == 4 and r.json()["verdict"] == "agrees"
    # SGLANG_ENABLE_POST_CAPTURE_KV_SIZING: the pool's tokens come from the post-capture line (kv_pool_runtime.py)
    post = ("[2026-12-01 10:00:30] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: "
            "90000, KV size: 27.47 GB, avail mem=3.10 GB\n"
            "[2026-12-01 10:00:40] max_total_num_tokens={T}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=2048, context_len=131072, available_gpu_mem=3.10 GB\n")
    for T, code in ((90000, 0), (90001, 1)):
        path = tmp_path / f"post{T}.log"
        path.write_text(ARGS.format(tp=4, pp=1, adp=1, dpa=False) + post.format(T=T))
        r = cli("check-log", str(path), "--engine", "sglang", "--json")
        assert r.code == code, r.out + r.err
        assert rows(r.json())["max_total_num_tokens = #tokens"]["agrees"] is (code == 0)
        assert any("post-capture KV sizing" in n for n in r.json()["notes"])


def test_v4s_auto_cache_dtype_is_its_fp8_layout(cli, tmp_path):
    # vLLM's auto stores DeepSeek V4 as fp8_ds_mla (models/deepseek_v4/attention.py): V4-Flash's fp8 block is
    # 1,002,240 B (tests/verify/test_verify.py works it out), not the bf16 layout's
    path = tmp_path / "v4.log"
    path.write_text(CONFIG.format(L=131072, tp=4, pp=1, dcp=1, dtype="auto").replace(
        "meta-llama/Llama-3.1-8B", "deepseek-ai/DeepSeek-V4-Flash") + AVAIL.format(gib="20.0"))
    r = cli("check-log", str(path), "--json")
    assert r.json()["precision"] == "fp8", r.out + r.err
    assert rows(r.json())["blocks per request"]["kvcalc"].endswith("(1,002,240 B each)")


def test_hostile_group_sizes_and_collector_prefixes(cli, tmp_path):
    # a group block size of 0 (or a 101-digit one) is refused with its line, not planned
    for bad in ("0, 0", "1" + "0" * 100):
        body = (f"INFO 12-01 10:00:41 [kv_cache_utils.py:865] kv cache group sizes ({bad})\n" + AVAIL.format(gib="20.0")
                + CAP.format(tokens=163840, L=131072, conc="1.25"))
        r = cli("check-log", vllm_log(tmp_path, body, name="g.log"))
        assert r.code == 2 and r.err.startswith(f"kvcalc: error: {tmp_path / 'g.log'}:2: ") and r.err.count("\n") == 1
    # SGLang's rank tags behind a collector's prefix (docker compose): PP0's 9.54 GB is read, not PP1's line first
    kv = ("sglang-1  | [2026-12-01 10:00:20 PP{p} TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: "
          "500000, K size: {k} GB, V size: {k} GB\n")
    path = tmp_path / "docker.log"
    path.write_text("sglang-1  | " + ARGS.format(tp=4, pp=2, adp=1, dpa=False) + kv.format(p=1, k="1.11")
                    + kv.format(p=0, k="9.54"))
    r = cli("check-log", str(path), "--engine", "sglang", "--json")
    assert r.code == 0, r.out + r.err
    assert "the log holds lines of 2 PP ranks; read PP0's" in r.json()["notes"]


def test_a_log_of_many_starts_is_read_in_one_pass(cli, tmp_path):
    # 20,000 engine starts without KV lines, then one with them: the right run and line, in about a second (each
    # run's line count carried on, not recounted from the top)
    start = CONFIG.format(L=131072, tp=1, pp=1, dcp=1, dtype="auto")
    path = tmp_path / "many.log"
    path.write_text(start * 20_000 + AVAIL.format(gib="20.0") + CAP.format(tokens=163840, L=131072, conc="1.25"))
    r = cli("check-log", str(path), "--json")
    assert r.code == 0, r.out + r.err
    assert "the log holds 20,000 engine starts; read run 20,000, from line 20,000 (the first with KV figures)" \
        in r.json()["notes"]


def test_sglang_offline_engine_logs_its_start_twice(cli, tmp_path):
    # entrypoints/engine.py: Engine.__init__ and _launch_subprocesses each log the same server_args= line for one
    # start; a start line repeated once, with no KV figure between, is that one start
    args = ARGS.format(tp=4, pp=1, adp=4, dpa=True)
    kv = ("[2026-12-01 10:00:20 DP0 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: "
          "15.26 GB, V size: 15.26 GB\n")
    path = tmp_path / "engine.log"
    path.write_text(args + args + kv)
    r = cli("check-log", str(path), "--engine", "sglang", "--json")
    assert r.code == 0, r.out + r.err
    assert not any("engine starts" in n for n in r.json()["notes"])
    # a start after KV figures is a restart, identical or not; three identical lines are two starts
    for text, starts in ((args + kv + args + kv, 2), (args + args + args + kv, 2)):
        path.write_text(text)
        notes = cli("check-log", str(path), "--engine", "sglang", "--json").json()["notes"]
        assert any(f"the log holds {starts} engine starts" in n for n in notes), notes
