"""kvcalc capacity: GPUs, weights, parallelism and the pool plan, against hand arithmetic."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.capacity import Parallel, capacity, max_context
from kvcalc.engines import vllm as V
from kvcalc.errors import KvcalcError

GIB = 1 << 30
M = 1 << 20


def test_llama_on_one_h200_by_hand():
    c = capacity("llama-3.1-8b", 131_072, gpu="h200", settings=V.Settings(max_num_batched_tokens=8192))
    total = 143_771 * M  # nvidia-smi's 143771MiB
    requested = math.ceil(total * 0.92)  # vLLM request_memory: ceil(total x utilisation)
    weights = 16_060_522_496  # the checkpoint index's total_size
    pool = requested - weights - 4 * GIB  # kvcalc's default reserve, printed
    assert c.kv_pool_bytes_per_gpu == pool
    assert c.num_blocks == pool // (2 * M)  # 2 MiB per block: 32 layers x 64 KiB pages
    assert c.requests_per_replica == (c.num_blocks - 1) // 8192  # the null block is not usable
    assert c.log_line == (f"GPU KV cache size: {int(c.num_blocks / 8192 * 131072):,} tokens, Maximum concurrency "
                          f"for 131,072 tokens per request: {c.num_blocks / 8192:.2f}x")


def test_v4_pro_on_8_h200():
    c = capacity("deepseek-v4-pro", M, precision="fp8", gpu="h200", parallel=Parallel(tp=8))
    # latent caches are replicated on every TP rank: the per-rank plan is the whole model's
    assert c.plan.bytes_per_block == 1_435_968 and c.plan.blocks_per_request == 10_778
    assert c.num_blocks == c.kv_pool_bytes_per_gpu // 1_435_968
    assert c.weights_bytes_per_gpu == math.ceil(c.model.weights.dense_bytes / 8) + math.ceil(
        c.model.weights.expert_bytes / 8)


def test_kv_memory_given_directly_and_the_refusal():
    c = capacity("llama-3.1-8b", 131_072, kv_memory=20 * GIB)
    assert c.num_blocks == 20 * GIB // (2 * M) == 10_240
    with pytest.raises(KvcalcError) as info:
        capacity("llama-3.1-8b", 131_072, kv_memory=10 * GIB)
    msg = str(info.value)
    # vLLM: needed 8,192 blocks x 2 MiB = "16.0" GiB; available 10 GiB less one 2 MiB block; estimated max
    # model length: (10 GiB - 2 MiB) // 2 MiB = 5,119 blocks x 16 tokens = 81,904
    assert "16.0 GiB" in msg and "81904" in msg and "refuses to start" in msg


def test_pipeline_and_data_parallel():
    one = capacity("llama-3.1-70b", 8192, kv_memory=8 * GIB)
    pp = capacity("llama-3.1-70b", 8192, kv_memory=8 * GIB, parallel=Parallel(pp=3))
    # 80 layers over 3 stages: 26 + 27 + 27? get_pp_indices adds the remainder before the last: 27, 27, 26
    assert pp.plan.bytes_per_block == 27 * 16 * 8 * 256 * 2
    assert pp.num_blocks == 8 * GIB // (27 * 65536) > one.num_blocks
    dp = capacity("llama-3.1-70b", 8192, kv_memory=8 * GIB, parallel=Parallel(dp=4))
    assert dp.total_requests == 4 * one.requests_per_replica
    assert V.pp_stages(80, 3) == [range(0, 27), range(27, 54), range(54, 80)]


def test_impossible_layouts_and_models_that_do_not_fit():
    with pytest.raises(KvcalcError, match=r"^tp: 3 ranks cannot split"):
        capacity("llama-3.1-8b", 8192, kv_memory=GIB, parallel=Parallel(tp=3))
    with pytest.raises(KvcalcError, match=r"does not fit on NVIDIA H100"):
        capacity("deepseek-v4-pro", M, precision="fp8", gpu="h100", parallel=Parallel(tp=8))
    with pytest.raises(KvcalcError, match=r"^weights: gqa8-hd128-l61 declares no weights"):
        capacity("gqa8-hd128-l61", 8192, gpu="h200")
    with pytest.raises(KvcalcError, match=r"^gpu: unknown accelerator 'h300'"):
        capacity("llama-3.1-8b", 8192, gpu="h300")


def test_reverse_longest_context_for_a_concurrency():
    args = dict(model="llama-3.1-8b", kv_memory=40 * GIB)
    best, cap = max_context(args, 4, 131_072)
    # usable blocks: 40 GiB / 2 MiB - 1 = 20,479; 4 requests -> 5,119 blocks each -> 5,119 x 16 tokens
    assert best == 5119 * 16 == 81_904
    assert cap.requests_per_replica >= 4
    too_long = capacity(context=best + 16, **args)
    assert too_long.requests_per_replica < 4


@settings(max_examples=40, deadline=None)
@given(gib=st.integers(8, 400), extra=st.integers(1, 200), ctx=st.sampled_from([4096, 65_536, 131_072, M]),
       model=st.sampled_from(["deepseek-v4-pro", "deepseek-v3.2", "gpt-oss-120b", "gemma-3-27b", "llama-3.1-8b"]))
def test_properties(gib, extra, ctx, model):
    def run(mem, context, async_scheduling=True):
        try:
            return capacity(model, context, kv_memory=mem * GIB,
                            settings=V.Settings(async_scheduling=async_scheduling)).max_concurrency
        except KvcalcError:
            return 0.0  # refused: does not fit

    base = run(gib, ctx)
    assert run(gib + extra, ctx) >= base  # more memory never lowers concurrency
    assert run(gib, ctx * 2) <= base  # a longer context never raises it
    assert run(gib, ctx, async_scheduling=True) <= run(gib, ctx, async_scheduling=False)  # async never raises it


def test_cli_json_contract(cli):
    r = cli("capacity", "deepseek-v4-pro", "--engine", "vllm", "--context", "1M", "--precision", "fp8",
            "--kv-memory", "21474836480", "--max-num-batched-tokens", "8192", "--async-scheduling", "--json")
    assert r.code == 0, r.err
    out = r.json()
    for key in ("engine", "engine_version", "num_blocks", "max_concurrency", "bytes_per_block",
                "kv_pool_bytes_per_gpu", "per_request_bytes", "analytic_bytes", "pages"):
        assert key in out
    assert (out["engine"], out["engine_version"]) == ("vllm", "0.33.0")
    assert out["num_blocks"] == 21474836480 // 1_435_968 == 14_954
    # held in vLLM's formats: its c4 indexer keys at 132 B (fp8, the default indexer dtype), not the precision's 68 B
    # (fp4): 5,299,115,008 B at the precision's formats + 30 c4a layers x 2^20 // 4 keys x 64 B
    assert out["per_request_bytes"] == 15_476_863_104
    assert out["analytic_bytes"] == 5_299_115_008 + 30 * (1 << 20) // 4 * (132 - 68) == 5_802_431_488
    assert out["max_concurrency"] == 14_954 / 10_778
    for page in out["pages"]:
        assert set(page) >= {"group", "layers", "block_size", "page_bytes", "real_page_bytes", "blocks_per_request"}
    off = cli("capacity", "deepseek-v4-pro", "-c", "1M", "-p", "fp8", "--kv-memory", "20GiB",
              "--max-num-batched-tokens", "8192", "--no-async-scheduling", "--json").json()
    assert off["per_request_bytes"] == 7450 * 1_435_968


@pytest.mark.parametrize("args,fragment", [
    (["llama-3.1-8b", "--kv-memory", "10GiB", "-c", "128k"], "16.0 GiB"),
    (["llama-3.1-8b", "--kv-memory", "10GiB", "--tp", "3"], "--tp: 3 ranks cannot split"),
    (["llama-3.1-8b", "--gpu", "h200", "--gpus", "4", "--tp", "2"], "--gpus: 4 GPUs, but tp 2"),
    (["llama-3.1-8b", "--kv-memory", "lots"], "--kv-memory: 'lots' is not a byte count"),
    (["llama-3.1-8b"], "--gpu: name a GPU"),
    (["llama-3.1-8b", "--gpu", "h200", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization: must be"),
    (["deepseek-v4-pro", "--gpu", "h100", "-p", "fp8"], "does not fit"),
    (["deepseek-v4-pro", "--gpu", "rtx-4090", "-p", "fp8"], "DeepSeek V4 kernels need compute capability 9, 10 or 12"),
    (["deepseek-v3.2", "--gpu", "a100", "--tp", "8"], "no sparse MLA backend for DeepSeek DSA on sm80"),
    (["llama-3.1-8b", "--kv-memory", "1GiB", "--concurrency", "100000", "-c", "128k"], "--concurrency"),
    (["llama-3.1-8b", "--kv-memory", "10GiB", "--block-size", "24"], "--block-size: "),
    (["llama-3.1-8b", "--kv-memory", "10GiB", "--engine", "mlc-llm"], "--engine: unknown engine"),
])
def test_cli_refusals_are_one_line_exit_2(cli, args, fragment):
    r = cli("capacity", *args)
    assert r.code == 2, (r.code, r.out, r.err)
    assert fragment in r.err and r.err.count("\n") == 1 and r.err.startswith("kvcalc: error: ")


def test_the_api_takes_the_engines_defaults_for_the_named_gpu():
    # engine/arg_utils.py get_batch_defaults (vllm serve): an A100 (the name holds "a100") keeps 2,048 batched
    # tokens and 256 sequences whatever its memory; from 160 GiB (a B200's 179 GiB) 16,384 and 1,024
    a100 = capacity("llama-3.1-8b", 8192, gpu="a100-80gb", request_tokens=256)
    assert (a100.plan.settings.max_num_batched_tokens, a100.plan.settings.num_seqs) == (2048, 256)
    # 256-token requests cost 16 blocks each: far more than 256 fit, the scheduler runs 256
    assert a100.requests_per_replica == 256
    b200 = capacity("llama-3.1-8b", 8192, gpu="b200")
    assert (b200.plan.settings.max_num_batched_tokens, b200.plan.settings.num_seqs) == (16384, 1024)


def test_vllm_says_how_many_of_the_requests_that_fit_it_runs_at_once(cli):
    # 256-token requests on an H100: cdiv(256, 16) = 16 blocks each, so the pool's blocks less the null block
    # hold (blocks - 1) // 16, over 1,024; but v1/core/sched/scheduler.py runs at most max_num_seqs 1,024 at once
    c = capacity("llama-3.1-8b", 256, gpu="h100-sxm")
    assert c.requests_per_replica == (c.num_blocks - 1) // 16 > 1024
    assert c.fit.figures.max_num_seqs == 1024 and c.fit.figures.running_per_replica == 1024
    assert any("runs at most max_num_seqs 1,024 at once" in n for n in c.notes)
    few = capacity("llama-3.1-8b", 131072, gpu="h100-sxm")
    assert few.fit.figures.running_per_replica == few.requests_per_replica < 1024
    assert not any("max_num_seqs" in n for n in few.notes)
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "2000", "--max-num-seqs", "512")
    assert r.code == 0 and "runs at most max_num_seqs 512 of them at once per replica; the other 1,488 wait" in \
        " ".join(r.out.split())


def test_a_defaulted_batch_budget_is_capped_at_max_num_seqs_times_max_model_len(cli):
    # engine/arg_utils.py: when max_num_batched_tokens is vllm serve's default, min(max_num_seqs x max_model_len,
    # it): 2 x 2,048 = 4,096 under 8,192; 1,024 x 4 = 4,096; a value the user gives stays
    def mnbt(*argv):
        return cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "--json", *argv).json()["engine_settings"][
            "max_num_batched_tokens"]
    assert mnbt("--max-num-seqs", "2", "-c", "2048") == 2 * 2048
    assert mnbt("-c", "4") == 1024 * 4
    assert mnbt("-c", "2048") == 8192
    assert mnbt("--max-num-seqs", "2", "--max-num-batched-tokens", "8192", "-c", "2048") == 8192


def test_the_concurrency_search_answers_a_context_at_which_that_many_fit():
    # sliding-window groups reserve window - 1 + in-flight tokens: the search must price them with the batch
    # budget of the context it answers, not of its 1-token probe (vLLM caps a defaulted budget at
    # max_num_seqs x max_model_len); 32 fit at the answer and fewer one token past it
    from kvcalc.capacity import max_context
    args = {"model": "gemma-3-27b", "kv_memory": 40 * GIB}
    best, cap = max_context(args, 32, 131072)
    assert cap.requests_per_replica >= 32
    assert capacity(context=best + 1, **args).requests_per_replica < 32


def test_settings_built_without_a_gpu_take_the_gpus_architecture():
    # capacity(settings=...) built with no GPU: the GPU named gives its architecture (Blackwell: FlashInfer MLA's
    # 32-token block for DeepSeek-V3), and a malformed architecture is one line
    from kvcalc.engines import get_engine
    from kvcalc.errors import KvcalcError
    vllm = get_engine("vllm")
    c = capacity("deepseek-v3", 8192, gpu="b200", kv_memory=40 * GIB, settings=vllm.settings({}))
    assert c.plan.settings.arch == "sm100" and c.plan.settings_json["block_size"] == 32
    with pytest.raises(KvcalcError, match=r"^arch: expected a GPU architecture such as sm90 or gfx942, got 'h100'"):
        capacity("deepseek-v3", 8192, kv_memory=40 * GIB, settings=vllm.settings({"arch": "h100"}))


def test_side_by_side_concurrency_names_each_engines_context(cli):
    # --concurrency finds each engine's own longest context: the header cannot name one, a row gives each.
    # llama-3.1-8b on a 10 GiB pool holds 10 GiB / 128 KiB a token = 81,920 exact tokens: 8,192 each for 10
    r = cli("capacity", "llama-3.1-8b", "--engine", "vllm,exact", "--kv-memory", "10GiB", "--concurrency", "10",
            "-c", "128k")
    assert r.code == 0, r.err
    assert "each engine's max_model_len on" in r.out
    row = next(line for line in r.out.splitlines() if line.strip().startswith("max_model_len"))
    assert row.split()[-1] == "8,192"  # exact: 81,920 // 10
