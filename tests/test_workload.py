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
    assert c.fit.json["workload"]["requests_at_context"] == 2
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


def test_sliding_window_groups_keep_their_fixed_share():
    # gpt-oss: a sliding group admits min(T, window - 1 + the in-flight tokens) = min(T, 127 + 16,384): past
    # 16,511 tokens a longer request costs it nothing more, below it the window group grows with T too
    def cost(t):
        return capacity("gpt-oss-120b", 131072, kv_memory=40 * GIB, request_tokens=t).fit.json["workload"][
            "cost_per_request"]

    # 32k -> 64k: only the full group grows, by 32,768 / 16 blocks
    assert cost(65536) - cost(32768) == 32768 // 16
    # 4k -> 8k: the full and the sliding group each grow by 4,096 / 16 blocks
    assert cost(8192) - cost(4096) == 2 * 4096 // 16


def test_sglang_v4_limits_by_running_requests():
    c = capacity("deepseek-v4-pro", 1 << 20, engine="sglang", kv_memory=40 * GIB, parallel=Parallel(tp=8),
                 request_tokens=8192)
    w = c.fit.json["workload"]
    assert w["limited_by"] == "max_running_requests" and c.requests_per_replica == 256


def test_refusals(cli):
    with pytest.raises(KvcalcError, match="^request_tokens: must be an integer from 1 to 131,072, got 200,000"):
        cap("vllm", request_tokens=200_000)
    with pytest.raises(KvcalcError, match="^shared_prefix_tokens: 9,000 must be from 0 to the shortest request"):
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
    w = d["workload"]
    assert w["mean_request_tokens"] == 1004 and w["request_lengths"] == 2 and w["cost_per_request"] == 63
    assert w["limits"] == {"pool": 325, "max_num_seqs": 1024} and w["requests_at_context"] == 2


def test_vllm_runs_at_most_max_num_seqs():
    from kvcalc.engines import get_engine

    eng = get_engine("vllm")
    # 40 GiB holds 20,479 // 16 = 1,279 requests of 256 tokens (16 blocks each); vllm serve runs at most 1,024
    # (get_batch_defaults; below 70 GiB or on an A100: 256), and never more than max_num_batched_tokens
    c = cap("vllm", request_tokens=256)
    assert c.requests_per_replica == 1024 and c.fit.json["workload"]["limits"] == {"pool": 1279, "max_num_seqs": 1024}
    assert c.fit.json["workload"]["limited_by"] == "max_num_seqs"
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
