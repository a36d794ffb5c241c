"""capacity under a workload: requests hold the tokens they have (max_model_len only caps them) and a shared
prefix is held once where prefix caching shares it. Every figure by hand."""

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.errors import KvcalcError

GIB = 1 << 30


def cap(engine, **kw):
    return capacity("llama-3.1-8b", 131072, engine=engine, kv_memory=40 * GIB, **kw)


def test_vllm_blocks_as_tokens_arrive():
    # a block: 16 tokens x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 2 MiB; 40 GiB = 20,480 blocks, one the
    # null block. At 128k a request reserves 8,192 blocks: 2 fit; at 8k, 512 blocks: 20,479 // 512 = 39
    assert cap("vllm").requests_per_replica == 2
    c = cap("vllm", request_tokens=8192)
    assert c.requests_per_replica == 20479 // 512 == 39
    assert c.fit.workload.requests_at_context == 2
    # a 2k shared prefix: 128 whole blocks held once, 512 - 128 = 384 blocks a request: (20,479 - 128) // 384
    s = cap("vllm", request_tokens=8192, shared_prefix_tokens=2048)
    assert s.requests_per_replica == (20479 - 128) // 384 == 52
    # a prefix of 2,050 tokens shares only its 128 whole blocks (prefix caching shares whole blocks)
    assert cap("vllm", request_tokens=8192, shared_prefix_tokens=2050).requests_per_replica == 52
    # without prefix caching nothing is shared
    from kvcalc.engines import get_engine

    off = get_engine("vllm").settings({"prefix_caching": False})
    assert cap("vllm", request_tokens=8192, shared_prefix_tokens=2048, settings=off).requests_per_replica == 39


def test_sglang_token_pool_and_radix_cache():
    # SGLang: 40 GiB // 131,072 B per token = 327,680 tokens (page 1); 8,192 a request: 40; the radix cache keeps
    # the 2,048-token prefix once: (327,680 - 2,048) // 6,144 = 53
    assert cap("sglang", request_tokens=8192).requests_per_replica == 327680 // 8192 == 40
    assert cap("sglang", request_tokens=8192, shared_prefix_tokens=2048).requests_per_replica == 53


def test_exact_bytes():
    # 128 KiB a token: 8k tokens = 1 GiB; the prefix's 256 MiB once: (40 GiB - 256 MiB) // 768 MiB = 53
    assert cap("exact", request_tokens=8192).requests_per_replica == 40
    assert cap("exact", request_tokens=8192, shared_prefix_tokens=2048).requests_per_replica == 53


def test_a_distribution_uses_the_mean_of_the_costs():
    # 1,000 tokens = 63 blocks (cdiv(1000, 16)), 1,008 = 63: the mean cost 63, not the cost of the mean length
    c = cap("vllm", request_tokens=[1000, 1008])
    assert c.requests_per_replica == 20479 // 63 == 325
    from kvcalc.engines import get_engine

    many = get_engine("vllm").settings({"max_num_seqs": 16384, "max_num_batched_tokens": 16384})
    c = cap("vllm", request_tokens=[16, 32], settings=many)  # 1 and 2 blocks: a mean of 1.5
    assert c.requests_per_replica == int(20479 // 1.5) == 13652


def test_sliding_window_groups_grow_up_to_their_cap():
    # gpt-oss: vLLM admits a sliding group's min(cdiv(T, 16), cap), the cap its reservation at max_model_len
    # 128k: cdiv(min(127 + 16,384, 131,072), 16) + 1 = 1,033 blocks; past 16,528 tokens (1,033 blocks of 16) a
    # longer request costs it nothing more, below it the window group grows with T too
    def cost(t):
        return capacity("gpt-oss-120b", 131072, kv_memory=40 * GIB, request_tokens=t).fit.workload.cost_per_request

    # 32k -> 64k: only the full group grows, by 32,768 / 16 blocks
    assert cost(65536) - cost(32768) == 32768 // 16
    # 4k -> 8k: the full and the sliding group each grow by 4,096 / 16 blocks
    assert cost(8192) - cost(4096) == 2 * 4096 // 16


def _workload(model, t, context=131072, **kw):
    c = capacity(model, context, kv_memory=40 * GIB, request_tokens=t, **kw)
    return c, c.fit.workload


def test_vllm_window_groups_admit_at_most_their_cap():
    # vLLM's scheduler admits a window group's min(cdiv(T, block), max_admission_blocks_per_request) blocks
    # (single_type_kv_cache_manager.py get_num_blocks_to_allocate, apply_admission_cap=True); the cap is the
    # startup reservation at max_model_len: cdiv(min(window - 1 + in-flight, max_model_len), block) + 1, and
    # in-flight = 2 x max_num_batched_tokens 8,192 (async scheduling) = 16,384.
    # Gemma-3-27B: a layer's page is 16 tokens x 16 KV heads x 128 x (K, V) x 2 B = 131,072 B; the 10 global layers
    # make the widest group: a block costs 10 x 131,072 = 1,310,720 B (1.25 MiB), so 40 GiB holds 40 x 1,024 /
    # 1.25 = 32,768 blocks, 32,767 past the null block
    c, w = _workload("gemma-3-27b", 100)
    kinds = [g.kind.value for g in c.plan.groups]
    assert kinds.count("window") == 6 and kinds.count("full") == 1 and c.plan.bytes_per_block == 1_310_720
    # 100 tokens: every one of the 7 groups takes cdiv(100, 16) = 7 blocks (not 8 in the window groups, the
    # reservation's "+ 1" for a window starting mid-block): 49 blocks, 32,767 // 49 = 668
    assert w.cost_per_request == 7 * 7 == 49 and c.requests_per_replica == 32767 // 49 == 668
    # 924 tokens, 100 below the 1,024 window: cdiv(924, 16) = 58 blocks in each of the 7 groups: 406; 32,767 // 406
    c, w = _workload("gemma-3-27b", 924)
    assert w.cost_per_request == 7 * 58 == 406 and c.requests_per_replica == 32767 // 406 == 80
    # 32k: the cap binds: window groups cdiv(min(1,023 + 16,384, 131,072), 16) + 1 = 1,088 + 1 = 1,089 each,
    # the full group cdiv(32,768, 16) = 2,048: 6 x 1,089 + 2,048 = 8,582; 32,767 // 8,582 = 3
    c, w = _workload("gemma-3-27b", 32768)
    assert w.cost_per_request == 6 * 1089 + 2048 == 8582 and c.requests_per_replica == 3


def test_vllm_gpt_oss_window_cost_below_and_above_the_window():
    # gpt-oss-20b: 12 sliding (window 128) and 12 full layers, a layer's page 16 tokens x 8 KV heads x 64 x (K, V)
    # x 2 B = 32,768 B, 12 a group: 393,216 B a block; 40 GiB = 42,949,672,960 B // 393,216 = 109,226 blocks,
    # 109,225 past the null block
    c, w = _workload("gpt-oss-20b", 100)
    # 100 tokens: cdiv(100, 16) = 7 blocks in each group (the cap, 1,033, does not bind): 14; the pool holds
    # 109,225 // 14 = 7,801 and max_num_seqs 1,024 binds
    assert w.cost_per_request == 7 + 7 == 14 and w.limits == {"pool": 109225 // 14, "max_num_seqs": 1024}
    assert w.limits["pool"] == 7801 and c.requests_per_replica == 1024
    # 64k: the window group's cap cdiv(min(127 + 16,384, 131,072), 16) + 1 = 1,032 + 1 = 1,033 binds (cdiv(65,536,
    # 16) = 4,096 > 1,033); the full group 4,096: 5,129 blocks, 109,225 // 5,129 = 21
    c, w = _workload("gpt-oss-20b", 65536)
    assert w.cost_per_request == 1033 + 4096 == 5129 and c.requests_per_replica == 109225 // 5129 == 21
    # the cap is taken at the configured max_model_len: at 4k it is cdiv(min(16,511, 4,096), 16) + 1 = 257, and a
    # request of 4,096 tokens is admitted at cdiv(4,096, 16) = 256 window blocks + 256 full ones = 512 (the startup
    # reservation counts 257 + 256 = 513): 109,225 // 512 = 213 run, 109,225 // 513 = 212 at the context
    c, w = _workload("gpt-oss-20b", 4096, context=4096)
    assert w.cost_per_request == 256 + 256 and c.requests_per_replica == 109225 // 512 == 213
    assert w.requests_at_context == 109225 // 513 == 212
    # fewer tokens in flight, a lower cap: max_num_batched_tokens 512, async: 2 x 512 = 1,024 in flight; the cap
    # cdiv(127 + 1,024, 16) + 1 = 72 + 1 = 73; at 8k: 73 + cdiv(8,192, 16) = 73 + 512 = 585, 109,225 // 585 = 186
    from kvcalc.engines import get_engine

    few = get_engine("vllm").settings({"max_num_batched_tokens": 512})
    c, w = _workload("gpt-oss-20b", 8192, settings=few)
    assert w.cost_per_request == 73 + 512 == 585 and c.requests_per_replica == 109225 // 585 == 186


def test_vllm_state_groups_keep_their_fixed_share():
    # Qwen3-Next: 3 gated-DeltaNet groups of 3 blocks each (prefix caching on: align mode, 2 running + 1
    # checkpoint, whatever T) and the full group's cdiv(8,192, 576) = 15 blocks of 576 tokens: 3 x 3 + 15 = 24
    _, w = _workload("qwen3-next-80b-a3b", 8192)
    assert w.cost_per_request == 3 * 3 + 15 == 24
    _, w = _workload("qwen3-next-80b-a3b", 100)  # cdiv(100, 576) = 1 full block; the state groups the same
    assert w.cost_per_request == 3 * 3 + 1 == 10


def test_sglang_v4_limits_by_running_requests():
    c = capacity("deepseek-v4-pro", 1 << 20, engine="sglang", kv_memory=40 * GIB, parallel=Parallel(tp=8),
                 request_tokens=8192)
    w = c.fit.workload
    assert w.limited_by == "max_running_requests" and c.requests_per_replica == 256


def test_refusals(cli):
    with pytest.raises(KvcalcError, match="^request_tokens: a request of 200,000 tokens is longer than the context, "
                                          "131,072"):
        cap("vllm", request_tokens=200_000)
    with pytest.raises(KvcalcError, match="^shared_prefix_tokens: a prefix of 9,000 tokens is longer than the shortest "
                                          "request"):
        cap("vllm", request_tokens=8192, shared_prefix_tokens=9000)
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "--request-tokens", "8k", "--request-tokens-file", "x")
    assert r.code == 2 and "not both" in r.err


def test_cli_file_and_json(cli, tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("# two short requests\n1000\n1008\n")
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "--request-tokens-file", str(f), "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["requests_per_replica"] == 325 and d["total_requests"] == 325
    w = d["workload"]  # the command's JSON output
    assert w["mean_request_tokens"] == 1004 and w["request_lengths"] == 2 and w["cost_per_request"] == 63
    assert w["limits"] == {"pool": 325, "max_num_seqs": 1024} and w["requests_at_context"] == 2


def test_vllm_runs_at_most_max_num_seqs():
    from kvcalc.engines import get_engine

    eng = get_engine("vllm")
    # 40 GiB holds 20,479 // 16 = 1,279 requests of 256 tokens (16 blocks each); vllm serve runs at most 1,024
    # (get_batch_defaults; below 70 GiB or on an A100: 256), and never more than max_num_batched_tokens
    c = cap("vllm", request_tokens=256)
    assert c.requests_per_replica == 1024 and c.fit.workload.limits == {"pool": 1279, "max_num_seqs": 1024}
    assert c.fit.workload.limited_by == "max_num_seqs"
    assert cap("vllm", request_tokens=256, settings=eng.settings({"max_num_seqs": 2048})).requests_per_replica == 1279
    assert eng.settings({}, gpu=_gpu("l40s")).num_seqs == 256
    assert eng.settings({}, gpu=_gpu("a100-80gb")).num_seqs == 256
    assert eng.settings({}, gpu=_gpu("h200")).num_seqs == 1024
    assert eng.settings({"max_num_batched_tokens": 512}).num_seqs == 512  # min(1024, the token budget)
    with pytest.raises(KvcalcError, match="must be greater than or equal to max_num_seqs"):
        eng.settings({"max_num_batched_tokens": 512, "max_num_seqs": 1024})


def _gpu(name):
    from kvcalc.hardware import get_gpu

    return get_gpu(name)
