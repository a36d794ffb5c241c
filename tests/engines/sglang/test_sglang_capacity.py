"""SGLang 0.5.23's pools, checked by hand: every expected figure is worked out in the test from SGLang's rules
(docs/engines/sglang-0.5.23.md, each rule citing its file and function under python/sglang/srt/)."""

import json
from pathlib import Path

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.config import as_model
from kvcalc.engines import get_engine
from kvcalc.engines.sglang.defaults import default_mem_fraction_static, prefill_graph_sizes
from kvcalc.errors import KvcalcError
from kvcalc.hardware import get_gpu

GIB = 1 << 30
SG = get_engine("sglang")


def cap(model, context, kv=40 * GIB, tp=1, dp=1, **settings):
    return capacity(model, context, engine="sglang", settings=SG.settings(settings), kv_memory=kv,
                    parallel=Parallel(tp=tp, dp=dp))


def test_llama_mha_cell_tokens_and_requests():
    c = cap("llama-3.1-8b", 131072)
    j = c.fit.figures
    # DefaultPoolConfigurator._compute_cell_size: 8 KV heads x (128 + 128) x 32 layers x 2 B
    assert j.cell_size_bytes == 8 * 256 * 32 * 2 == 131072
    # 40 GiB // 131,072 B, page 1
    assert j.max_total_num_tokens == 40 * GIB // 131072 == 327680
    # resolve_max_num_reqs: int(327,680 / 131,072 x 512) = 1,280 -> clamped to 2,048; min(2,048, 327,680 // 2)
    assert j.max_running_requests == 2048
    assert c.requests_per_replica == 327680 // 131072 == 2 and j.requests_limited_by == "token pool"
    # memory_pool.py: size + page rows; K = 327,681 x 8 x 128 x 2 B x 32 layers
    k = next(p for p in j.pools if p["name"] == "KV Cache K")
    assert k["shape"] == [327681, 8, 128] and k["bytes"] == 327681 * 8 * 128 * 2 * 32
    assert any(line.endswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 327680, K size: 20.00 GB, "
                             "V size: 20.00 GB") for line in c.fit.lines)
    assert c.log_line == ("max_total_num_tokens=327680, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                          "max_running_requests=2048, context_len=131072")


def test_default_mem_fraction_static():
    # memory_hook.py: 58 prefill graph sizes up to 8,192 (8 + 14 + 8 + 8 + 12 + 8)
    assert len(prefill_graph_sizes(8192)) == 8 + 14 + 8 + 8 + 12 + 8 == 58
    # H100 (81,559 MiB), tp 1, MHA: 512 + 1.5 x 8,192 + 1/8 x 1,024 + 2 x 256 + 8 x 58 = 13,904 MiB
    h100 = default_mem_fraction_static(81559, tp=1, pp=1, attn_dp=1, mla=False, prefill_graphs=True)
    assert h100.reserved_mib == 512 + 12288 + 128 + 512 + 464 and h100.mem_fraction_static == round(67655 / 81559, 3) == 0.83
    # H200 (143,771 MiB), tp 8, MLA: max_bs 512; 512 + 12,288 + 1,024 + 1,024 + 1,536 = 16,384
    h200 = default_mem_fraction_static(143771, tp=8, pp=1, attn_dp=1, mla=True, prefill_graphs=True)
    assert h200.reserved_mib == 16384 and h200.mem_fraction_static == round((143771 - 16384) / 143771, 3) == 0.886
    # DP attention 8: + 512 x 8 x 3 + 512 x 8 x 1.5 (max_bs > 300)
    dpa = default_mem_fraction_static(143771, tp=8, pp=1, attn_dp=8, mla=True, prefill_graphs=True)
    assert dpa.reserved_mib == 16384 + 12288 + 6144 and dpa.mem_fraction_static == 0.758


def test_the_budget_is_a_fraction_of_the_free_memory_before_load():
    # _profile_available_bytes: rest = free after weights - pre x (1 - mfs), pre = the device's memory here
    c = capacity("llama-3.1-8b", 131072, engine="sglang", gpu="h100")
    mem, w = 85520809984, c.weights_bytes_per_gpu
    rest = (mem - w) / GIB - mem / GIB * (1 - 0.83)
    assert c.budget.json == {"mem_fraction_static": 0.83}
    assert c.kv_pool_bytes_per_gpu == int(rest * GIB)
    assert c.fit.figures.max_total_num_tokens == int(rest * GIB) // 131072


def test_mla_is_replicated_and_dsa_adds_its_indexer_on_64_token_pages():
    v3 = cap("deepseek-v3", 131072, tp=8).fit.figures
    # calculate_mla_kv_cache_dim: 512 + 64 = 576 elements x 2 B x 61 layers, not divided by tp
    assert v3.cell_size_bytes == 576 * 2 * 61 == 70272
    assert v3.max_total_num_tokens == 40 * GIB // 70272 == 611191
    assert v3.max_running_requests == int(611191 / 131072 * 512) == 2387
    v32 = cap("deepseek-v3.2", 131072, tp=8).fit.figures
    # + the indexer: 128 fp8 + 128 // 128 x 4 B scale = 132 B per token per layer, even with a bf16 cache
    assert v32.cell_size_bytes == 70272 + 132 * 61 == 78324
    assert v32.page_size == 64 and v32.max_total_num_tokens == 40 * GIB // 78324 // 64 * 64 == 548352
    idx = next(p for p in v32.pools if p["name"] == "Indexer keys")
    # index_key_cache.py: (size + page + 1) // page pages of 64 x 132 B
    assert idx["shape"] == [(548352 + 64 + 1) // 64, 64 * 132] == [8569, 8448]
    fp8 = capacity("deepseek-v3.2", 131072, engine="sglang", precision="fp8", kv_memory=40 * GIB,
                   parallel=Parallel(tp=8)).fit.figures
    # fp8 packs 512 fp8 + 512 // 128 x 4 B scales + 64 x 2 B RoPE = 656 B
    assert fp8.cell_size_bytes == 656 * 61 + 132 * 61 == 48068 and fp8.kv_cache_dtype == "fp8_e4m3"
    # deepseek_v2.py's override declares page_size 64 on CUDA whatever was asked (a declaration is the last writer)
    one = cap("deepseek-v3.2", 131072, tp=8, page_size=1)
    assert one.fit.figures.page_size == 64 and one.fit.figures.max_total_num_tokens == 548352
    assert any("replaces page_size 1 with 64 for DeepSeek DSA" in n for n in one.plan.notes)


def test_gpt_oss_splits_full_and_swa_pools():
    c = cap("gpt-oss-120b", 131072)
    j = c.fit.figures
    # HybridSWAPoolConfigurator: 18 full x 8 x (64 + 64) x 2 B + 0.8 x 18 SWA x 2,048 B: a fractional cell
    cell = 18 * 2048 + 0.8 * (18 * 2048)
    assert j.cell_size_bytes == cell and isinstance(j.cell_size_bytes, float)
    full = int(40 * GIB // cell)
    assert j.max_total_num_tokens == full == 647269
    assert j.swa_max_total_num_tokens == int(full * 0.8) == 517815
    # a request keeps its window (128 - 1 for gpt-oss) + the 128-token eviction interval + 2 pages of SWA slots
    assert j.limits["SWA pool"] == 517815 // (127 + 128 + 2)
    assert ("Use sliding window memory pool. full_layer_tokens=647269, swa_layer_tokens=517815"
            in "\n".join(c.fit.lines))
    # validate_swa_pool_size: the SWA pool must exceed window + page (127 + 1)
    full = int(40 * GIB // (36864 + 0.0001 * 36864))
    swa = int(full * 0.0001)
    assert swa <= 128
    with pytest.raises(KvcalcError, match=rf"SWA pool \({swa} tokens\) cannot hold even one request: the prefill "
                       r"admission floor is sliding_window_size \(127\) \+ page_size \(1\)"):
        cap("gpt-oss-120b", 131072, swa_full_tokens_ratio=0.0001)


def test_gemma3_keeps_one_pool_as_sglang_does():
    c = cap("gemma-3-27b", 131072)
    # gemma2_gemma3.py disables hybrid SWA memory: every layer in one pool at full length
    assert c.fit.figures.swa_max_total_num_tokens is None
    assert any("keeps one pool for every layer" in n for n in c.notes)


def test_qwen3_next_state_pool_first_and_its_request_cap():
    c = cap("qwen3-next-80b-a3b", 131072, tp=2)
    j = c.fit.figures
    # per request at tp 2: 36 GDN layers x (conv (4096 x 3) bf16 + ssm 16 x 128 x 128 fp32)
    per = 36 * (4096 * 3 * 2 + 16 * 128 * 128 * 4)
    assert per == 38633472
    # _handle_max_mamba_cache: 0.9 / 1.9 of the rest, one slot held back
    slots = int((40 * 0.9 / 1.9 * GIB - per) // per)
    assert j.max_mamba_cache_size == slots == 525
    available = int((40 - (slots + 1) * per / GIB) * GIB)
    assert j.kv_available_bytes == available == 40 * GIB - 526 * per
    # 12 full layers, max(1, 2 // 2) head x (256 + 256) x 2 B
    assert j.cell_size_bytes == 12 * 512 * 2 and j.max_total_num_tokens == available // 12288 == 1841509
    # the estimate clamps to 4,096; the state caps it at 525 // 5 slots per request (3 + 2 extra_buffer)
    assert j.max_running_requests == 525 // 5 == 105
    assert any("capped to 105 by the mamba state cache" in n for n in c.notes)


def test_dp_attention_divides_a_given_request_cap_and_shares_the_tp_gpus():
    c = cap("llama-3.1-8b", 8192, tp=2, dp=2, enable_dp_attention=True, max_running_requests=100)
    j = c.fit.figures
    # attention tp = 2 // 2 = 1: all 8 KV heads on each rank; a given cap is divided over the DP workers
    assert j.cell_size_bytes == 131072 and j.max_running_requests == 100 // 2
    assert c.total_requests == 2 * c.requests_per_replica
    assert SG.gpus(Parallel(tp=2, dp=2), SG.resolve({"enable_dp_attention": True}, parallel=
                                                           Parallel(tp=2, dp=2))) == 2
    # what capacity reports: 2 GPUs, in its JSON and its header, not tp x dp = 4
    from kvcalc.present.capacity import capacity_json
    assert c.gpus == 2 and capacity_json(c)["parallel"]["gpus"] == 2


def test_what_sglang_does_not_run_is_refused_with_its_version():
    with pytest.raises(KvcalcError, match=r"'linear_attention' .* not modelled for SGLang 0.5.23"):
        cap("minimax-m1", 8192)
    with pytest.raises(KvcalcError, match=r"precision: SGLang 0.5.23's --kv-cache-dtype has no 'q8'"):
        from kvcalc.engines.sglang.sizing import _kv_dtype

        _kv_dtype(None, "q8", False)


def test_no_memory_after_the_weights_is_sglangs_refusal(cli):
    # 131.42 GiB of weights on one 79.65 GiB H100: no --mem-fraction-static can make room (SGLang's own advice
    # would ask for one above 1); the refusal says what can: more GPUs
    r = cli("capacity", "llama-3.1-70b", "--engine", "sglang", "--gpu", "h100", "-c", "8k")
    assert r.code == 2 and r.err.count("\n") == 1 and "above" not in r.err
    assert "the weights, 131.42 GiB a GPU, leave no GPU memory for the KV cache at any --mem-fraction-static" in r.err
    assert "a larger --tp (or --pp) splits the weights" in r.err
    # on a 140.40 GiB H200 they fit, but not under the default fraction: SGLang's advice is one that can work,
    # 1 - 8.98 / 140.40 = 0.936 (SGLang's all-reduced free memory in GiB floats)
    r = cli("capacity", "llama-3.1-70b", "--engine", "sglang", "--gpu", "h200", "-c", "8k")
    assert r.code == 2 and "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=" in r.err
    assert "Raise --mem-fraction-static above 0.937" in r.err and r.err.count("\n") == 1


def test_engines_side_by_side(cli):
    r = cli("capacity", "llama-3.1-8b", "--engine", "vllm,sglang,exact", "--kv-memory", "40GiB", "-c", "128k", "--json")
    assert r.code == 0
    d = json.loads(r.out)
    assert [e["engine"] for e in d["engines"]] == ["vllm", "sglang", "exact"]
    sg = d["engines"][1]
    assert sg["max_total_num_tokens"] == 327680 and d["side_by_side"]["tokens in the cache"]["sglang"] == "327,680"
    # vLLM: 40 GiB // (16 x 32 x 8 x 256 x 2 B) = 20,480 blocks; 8,192 blocks per request, block 0 null -> 2
    assert d["engines"][0]["num_blocks"] == 20480 and d["engines"][0]["requests_per_replica"] == 20479 // 8192 == 2
    text = cli("capacity", "llama-3.1-8b", "--engine", "vllm,sglang", "--kv-memory", "40GiB", "-c", "128k")
    assert text.code == 0 and "SGLang 0.5.23 (bf16)" in text.out and "sglang: token pools: 131,072 B per token" in text.out
    bad = cli("capacity", "llama-3.1-8b", "--engine", "sglang", "--kv-memory", "40GiB", "--block-size", "32")
    assert bad.code == 2 and "--block-size: a setting of the vllm engine, not of sglang" in bad.err


def test_reverse_search_uses_sglangs_own_count(cli):
    # 10 GiB // 131,072 B = 81,920 tokens; 4 requests of 81,920 // 4 = 20,480 tokens each fit, one more does not
    r = cli("capacity", "llama-3.1-8b", "--engine", "sglang", "--kv-memory", "10GiB", "--concurrency", "4", "--json")
    assert r.code == 0 and json.loads(r.out)["max_context_tokens"] == 10 * GIB // 131072 // 4 == 20480
    m = cli("capacity", "qwen3.5-9b", "--engine", "sglang", "--kv-memory", "10GiB", "--mtp")
    assert m.code == 2 and "speculative decoding (the MTP draft layers, --mtp) is not modelled for SGLang" in m.err


def test_every_shipped_model_on_sglang_keeps_the_contract():
    """Each config either plans on SGLang or is refused with one line (fuzzcases.classify: no traceback)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from fuzzcases import classify, run_cli

    from kvcalc.config import config_names

    seen = set()
    for name in config_names():
        for extra in ([], ["--json", "-p", "fp8", "--tp", "8"]):
            argv = ["capacity", name, "--engine", "sglang", "--kv-memory", "40GiB", "-c", "32k", *extra]
            seen.add(classify(argv, *run_cli(argv)))
    assert seen == {"ok", "rejected"}


def test_deepseek_v4_pools_by_dsv4_pool_configurator():
    c = cap("deepseek-v4-pro", 1 << 20, tp=8)
    j = c.fit.figures
    # KVLayout.V4: 448 fp8 + 64 x 2 B RoPE + 8 B scales = 584 B a token; a page of p tokens padded to 576 B
    window = -(-256 * 584 // 576) * 576 / 256  # 260 x 576 / 256 = 585.0
    c4 = -(-64 * 584 // 576) * 576 / 64  # 65 x 576 / 64 = 585.0 (page 256 / ratio 4)
    c128 = -(-2 * 584 // 576) * 576 / 2  # 3 x 576 / 2 = 864.0
    assert (window, c4, c128) == (585.0, 585.0, 864.0)
    # one SWA slot: the window in all 61 layers + the c4 compressor state, 8 / 256 rows of 2 x 2 x (512 + 128) fp32
    swa = 585.0 * 61 + 8 / 256 * (16 * 512 + 16 * 128) * 30
    # a full token: 0.1 SWA slot + 30 c4 layers x (585 + 132) / 4 + 31 c128 layers x 864 / 128
    full = 0.1 * swa + (1 / 4 * c4 + 1 / 4 * 132) * 30 + 1 / 128 * c128 * 31
    assert swa == 45285.0 and full == 10115.25 and j.cell_size_bytes == full
    # the c128 state first: ceil(((256 + 1) x 128 + 128 + 1) / 128) x 128 rows x 2 x 512 fp32 x 31 layers
    fixed = -(-(257 * 128 + 129) // 128) * 128 * 2 * 512 * 4 * 31
    assert j.v4.c128_state_fixed_bytes == fixed == 4209508352
    tokens = int((40 * GIB - fixed) / full) // 256 * 256
    assert j.max_total_num_tokens == tokens
    assert j.swa_max_total_num_tokens == int(tokens * 0.1) // 256 * 256
    assert j.v4.c4_max_total_num_tokens == tokens // 4 and j.v4.c128_max_total_num_tokens == tokens // 128
    # the model override's 256 running requests; the c128 state pool holds (256 + 1) x 128 rows
    assert j.max_running_requests == 256 and j.v4.c128_state_pool_size == 257 * 128
    assert j.kv_cache_dtype == "fp8_e4m3" and j.page_size == 256
    # deepseek_v4.py's override declares page_size 256 on CUDA whatever was asked
    other = cap("deepseek-v4-pro", 1 << 20, tp=8, page_size=64)
    assert other.fit.figures.page_size == 256 and other.fit.figures.max_total_num_tokens == tokens
    assert any("replaces page_size 64 with 256 for DeepSeek V4" in n for n in other.plan.notes)


def test_deepseek_v4_pools_as_deepseek_v4_token_to_kv_pool_allocates_them():
    c = cap("deepseek-v4-pro", 1 << 20, tp=8)
    j = c.fit.figures
    full, swa = j.max_total_num_tokens, j.swa_max_total_num_tokens
    c4, c128 = full // 4, full // 128
    # _num_dsv4_physical_kv_pages: ceil((size + 256) / page) pages of KVLayout.page_bytes(page) per layer
    pages = lambda size, p: -(-(size + 256) // p)  # noqa: E731
    want = [
        ("SWA KV Cache", [pages(swa, 256), 260 * 576], 61, swa),
        ("c4 KV Cache", [pages(c4, 64), 65 * 576], 30, c4),
        ("c128 KV Cache", [pages(c128, 2), 3 * 576], 31, c128),
        # DeepSeekV4IndexerPool: c4_logical_size = c128 x 32, pages of 64 x 132 B
        ("c4 Indexer keys", [pages(c128 * 32, 64), 64 * 132], 30, c128 * 32),
        # CompressStatePool: size + ring + 1 rows padded to the ratio, fp32 rows of 2 x (1 + overlap) x dim
        ("c4 compressor state", [-(-(swa // 256 * 8 + 9) // 4) * 4, 2048], 30, swa // 256 * 8),
        ("c4 indexer compressor state", [-(-(swa // 256 * 8 + 9) // 4) * 4, 512], 30, swa // 256 * 8),
        ("c128 compressor state", [-(-(257 * 128 + 129) // 128) * 128, 1024], 31, 257 * 128),
    ]
    assert [(x["name"], x["shape"], x["layers"], x["tokens"]) for x in j.pools] == want
    size = {"torch.uint8": 1, "torch.float32": 4}
    assert all(x["bytes"] == x["shape"][0] * x["shape"][1] * x["layers"] * size[x["dtype"]] for x in j.pools)
    # the c128 state allocated is the one the budget paid for first: 259 x 128 rows x 1,024 fp32 x 31 layers
    assert j.pools[-1]["bytes"] == j.v4.c128_state_fixed_bytes == 259 * 128 * 1024 * 4 * 31
    assert any(line.endswith(f"Initialize DeepSeekV4TokenToKVPool with max_num_reqs=256 swa_size={swa} "
                             f"c4_size={c4} c4_logical_size={c128 * 32} c128_size={c128} c4_state_pool_size="
                             f"{swa // 256 * 8} c128_state_pool_size={257 * 128} unified=False unified_fp8=False")
               for line in c.fit.lines)


def test_deepseek_v4_default_mem_fraction_static_has_no_prefill_graphs():
    # cuda_graph_hook.py turns V4's prefill graphs off before the fraction: 512 + 12,288 + 1,024 + 2 x 512
    c = capacity("deepseek-v4-pro", 1 << 20, engine="sglang", gpu="h200", parallel=Parallel(tp=8))
    assert c.budget.json["mem_fraction_static"] == round((143771 - 14848) / 143771, 3) == 0.897


def cap_pp(model, context, kv, tp=1, pp=1, **settings):
    return capacity(model, context, engine="sglang", settings=SG.settings(settings), kv_memory=kv,
                    parallel=Parallel(tp=tp, pp=pp))


def test_pipeline_stages_give_the_remainder_to_the_last_stages():
    # distributed/utils.py get_pp_indices: the last num_layers % pp stages take one layer more
    # (vLLM gives it to the stages before the last: 22 + 21 for 43 layers)
    assert SG.pp_stages(43, 2) == [range(0, 21), range(21, 43)]
    assert SG.pp_stages(80, 3) == [range(0, 26), range(26, 53), range(53, 80)]
    assert SG.pp_stages(61, 4) == [range(0, 15), range(15, 30), range(30, 45), range(45, 61)]
    assert get_engine("vllm").pp_stages(43, 2) == [range(0, 22), range(22, 43)]
    # llama-3.1-70b, 80 layers over pp 3: the binding stages hold 27 layers; 8 KV heads x 256 x 2 B per layer
    c = cap_pp("llama-3.1-70b", 8192, 8 * GIB, pp=3)
    assert c.fit.figures.cell_size_bytes == 27 * 8 * 256 * 2
    assert c.fit.figures.max_total_num_tokens == 8 * GIB // (27 * 8 * 256 * 2)


def test_mamba_hybrid_under_pp_holds_four_slots_and_charges_the_largest_stage():
    # qwen3-next tp 2, pp 2: stages [0, 24) and [24, 48), 18 gated-DeltaNet and 6 attention layers each.
    # One GDN layer at attention tp 2 (configs/mamba_utils.py): conv (16 x 128 x 2 + 32 x 128) / 2 x (4 - 1)
    # bf16 = 24,576 B; recurrent state 32 / 2 x 128 x 128 fp32 = 1,048,576 B
    per_layer = (16 * 128 * 2 + 32 * 128) // 2 * 3 * 2 + 32 // 2 * 128 * 128 * 4
    assert per_layer == 1_073_152
    # _handle_max_mamba_cache under pp: int(per_req(36 layers) x 18 / 36)
    per = int(36 * per_layer * (18 / 36))
    budget = 20 * 0.9 / 1.9 * GIB  # mamba_full_memory_ratio 0.9 of a 20 GiB budget
    slots = int((budget - per) // per)
    assert slots == 525
    c = cap_pp("qwen3-next-80b-a3b", 262144, 20 * GIB, tp=2, pp=2)
    j = c.fit.figures
    assert j.max_mamba_cache_size == slots
    # pp > 1 turns the overlap scheduler off: extra_buffer keeps 1 tracking slot, 3 + 1 = 4 slots a request
    assert j.max_running_requests == slots // 4 == 131
    # KV: 6 attention layers x 1 KV head a rank x (256 + 256) x 2 B = 6,144 B a token
    rest = 20 - (slots + 1) * per / GIB
    assert j.cell_size_bytes == 6 * 512 * 2 and j.max_total_num_tokens == int(rest * GIB) // 6144
    one = cap_pp("qwen3-next-80b-a3b", 262144, 20 * GIB, tp=2).fit.figures
    assert one.max_running_requests == one.max_mamba_cache_size // 5  # 3 + 2 with the overlap scheduler


def test_a_stage_without_kv_is_unbounded_not_a_division_by_zero():
    # nemotron-h-56b over pp 11: the last stage, layers 107-117, holds no attention layer (they sit at 7, 18, ...,
    # 106). pool_configurator.py: a zero cell with KV on another stage counts as int64 max, so the stages' MIN
    # is another stage's; every other stage holds one attention layer: 8 KV heads x (128 + 128) x 2 B a token
    assert SG.pp_stages(118, 11)[-1] == range(107, 118)
    c = cap_pp("nemotron-h-56b", 8192, 20 * GIB, pp=11)
    tokens = c.fit.figures.max_total_num_tokens
    assert 0 < tokens < 20 * GIB // (8 * 256 * 2)


def test_llama_2_caps_the_prefill_graph_sizes_at_4096():
    # arg_groups/memory_hook.py: "llama-2" in the model path caps the prefill CUDA-graph max_bs at 4096: sizes
    # 4..32 by 4, 48..256 by 16, 288..512 by 32, 576..1024 by 64, 1280..4096 by 256 = 8 + 14 + 8 + 8 + 12 = 50,
    # not 58. H200 (143,771 MiB), tp 1: reserved 512 + 1.5 x 8192 + 1024 / 8 + 2 x 256 decode + 8 x sizes
    from kvcalc.hardware import get_gpu
    h200 = get_gpu("h200")
    mib = h200.memory_bytes >> 20
    assert mib == 143771
    for model, sizes in (("llama-2-7b", 50), ("llama-3.1-8b", 58)):
        reserved = 512 + 1.5 * 8192 + 1024 / 8 + 2 * 256 + 8 * sizes
        got = SG.memory_defaults(SG.settings({}), h200, as_model(model), Parallel()).mem_fraction_static
        assert got == round((mib - reserved) / mib, 3), model
    assert round((mib - (13440 + 8 * 50)) / mib, 3) == 0.904


def test_a_page_that_does_not_divide_the_chunk_is_refused():
    # arg_groups/validation_hook.py check_server_args: chunked_prefill_size % page_size == 0 (8192 % 3 = 2)
    with pytest.raises(KvcalcError, match=r"chunked_prefill_size must be divisible by page_size \(8192 is not a "
                                          r"multiple of 3\)"):
        cap("llama-3.1-8b", 8192, page_size=3)
    # the chunk as the DP workers run it: 8192 // 2 = 4096, a multiple of 64 but not of 3,072
    assert cap("llama-3.1-8b", 8192, tp=2, dp=2, enable_dp_attention=True, page_size=64).fit.figures.page_size == 64
    with pytest.raises(KvcalcError, match=r"\(4096 is not a multiple of 3072\)"):
        cap("llama-3.1-8b", 8192, tp=2, dp=2, enable_dp_attention=True, page_size=3072)


def test_more_than_one_rank_rounds_free_memory_through_float32():
    # utils/common.py get_available_gpu_memory(distributed=True): the free bytes go through a float32 tensor for
    # the all-reduce MIN before / 2^30. H200 (150,754,820,096 B), tp 8, 136.16 GiB of weights over 8 ranks
    import struct
    f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]  # noqa: E731
    device, weights = 150_754_820_096, -(-int(136.16 * GIB) // 8)  # kvcalc rounds a rank's share up
    c = capacity("llama-3.1-70b", 131072, engine="sglang", gpu="h200", parallel=Parallel(tp=8),
                 weights_bytes=int(136.16 * GIB))
    assert c.weights_bytes_per_gpu == weights
    mfs = c.budget.json["mem_fraction_static"]
    assert mfs == 0.893
    rest = f32(device - weights) / GIB - f32(device) / GIB * (1 - mfs)
    exact = (device - weights) / GIB - device / GIB * (1 - mfs)
    cell = 80 * 8 // 8 * 256 * 2  # 80 layers, one of the 8 KV heads a rank, K + V of 128, bf16
    assert c.fit.figures.cell_size_bytes == cell == 40960
    assert c.fit.figures.max_total_num_tokens == int(rest * GIB) // cell == 2_840_551
    assert int(exact * GIB) // cell == 2_840_550  # the exact integers would give one token fewer


def test_v4_with_no_room_for_a_full_token_fails_on_the_swa_floor_first():
    # V4-Pro at tp 8 with 2 GiB: the fixed c128 state (4.21 GB) leaves no full token, so the SWA pool is 0 and
    # _compute_dsv4_sizes's validate_swa_pool_size refuses before MemoryPoolConfig's "Not enough memory"
    with pytest.raises(KvcalcError, match=r"SWA pool \(0 tokens\) cannot hold even one request: the prefill "
                                          r"admission floor is sliding_window_size \(128\) \+ page_size \(256\)"):
        capacity("deepseek-v4-pro", 1 << 20, engine="sglang", kv_memory=2 * GIB, parallel=Parallel(tp=8))


def test_a_multimodal_model_lowers_the_fraction_by_its_vision_tower_and_reserves_its_cache():
    # Qwen3_5ForConditionalGeneration is in configs/model_config.py multimodal_model_archs. Its vision_config
    # states depth 27 and hidden_size 1152 but no num_hidden_layers, so adjust_mem_fraction_for_vlm takes 24:
    # ratio 24 x 1152^2 / (24 x 1024^2) = 1.265625; factor 0.95 x (1 - 0.1 x 0.265625) = 0.924765625
    mm = as_model("qwen3.5-9b").multimodal
    assert (mm.text_config, mm.vision_config, mm.vision_num_hidden_layers, mm.vision_hidden_size) == \
        (True, True, None, 1152)
    mfs = 0.83 * (0.95 * (1 - 0.1 * (24 * 1152 ** 2 / (24 * 1024 ** 2) - 1)))
    weights = 18 * GIB
    c = capacity("qwen3.5-9b", 262144, engine="sglang", gpu="h100-sxm", weights_bytes=weights)
    assert c.budget.json["mem_fraction_static"] == mfs  # H100: 0.83 before the VLM factor, not re-rounded
    # kv_cache_configurator.py: rest = free after the load - pre x (1 - mfs) - SGLANG_VLM_CACHE_SIZE_MB 100 / 1024
    device = 85_520_809_984
    rest = (device - weights) / GIB - device / GIB * (1 - mfs) - 100 / 1024
    assert c.kv_pool_bytes_per_gpu == int(rest * GIB)
    # Gemma 3 is in mm_disabled_models: text-only, no factor, no reservation; a text model the same
    g = capacity("gemma-3-27b", 131072, engine="sglang", gpu="h100-sxm")
    assert g.budget.json["mem_fraction_static"] == 0.83


def test_a_multimodal_architecture_without_its_vision_tower_is_refused_for_the_default_fraction(tmp_path):
    text = (Path(__file__).parents[3] / "kvcalc/data/configs/qwen3.5-9b.yaml").read_text()
    start = text.index("multimodal:")
    end = text.index("precisions:")
    path = tmp_path / "no-vision.yaml"
    path.write_text(text[:start] + text[end:])
    with pytest.raises(KvcalcError, match=r"treats Qwen3_5ForConditionalGeneration as multimodal .* states no "
                                          r"'multimodal' .* give mem_fraction_static$"):
        capacity(str(path), 8192, engine="sglang", gpu="h100-sxm", weights_bytes=18 * GIB)
    given = capacity(str(path), 8192, engine="sglang", gpu="h100-sxm", weights_bytes=18 * GIB,
                     settings=SG.settings({"mem_fraction_static": 0.8}))
    assert given.budget.json["mem_fraction_static"] == 0.8


def _on(gpu, model, context=8192, kv=10 ** 10, **settings):
    return capacity(model, context, engine="sglang", gpu=gpu, kv_memory=kv,
                    settings=SG.settings(settings, gpu=get_gpu(gpu)))


def test_blackwell_takes_trtllm_pages():
    # SM100 (B200: compute capability 10.0): get_default_attn_backend gives an MHA model trtllm_mha, and
    # _mla_backend_page_constraints turns a page outside 16 / 32 / 64 / 128 (1 by default) into 64
    j = _on("b200", "llama-3.1-8b").fit.figures
    assert j.page_size == 64 and j.max_total_num_tokens == 10 ** 10 // 131072 // 64 * 64 == 76288
    assert _on("h200", "llama-3.1-8b").fit.figures.max_total_num_tokens == 10 ** 10 // 131072 == 76293
    assert [_on("b200", "llama-3.1-8b", page_size=p).fit.figures.page_size for p in (1, 16, 128, 256)] == \
        [64, 16, 128, 64]
    # DeepseekV3ForCausalLM (DeepSeek-V3, Kimi-K2) takes trtllm_mla: 32 or 64 kept, else 64; DeepseekV2 keeps 1
    assert [_on("b200", "deepseek-v3", page_size=p).fit.figures.page_size for p in (None, 16, 32)] == [64, 64, 32]
    assert _on("b200", "deepseek-v2-lite").fit.figures.page_size == 1
    # Qwen3.5 on SM100 (qwen3_5.py _qwen3_5_hybrid_overrides, collected before the Mamba strategy resolves): the
    # strategy as given decides, whatever page is asked: auto takes triton with page 1; extra_buffer, or no radix
    # cache, trtllm_mha with page 64 (SGLang's own resolution: tests/fixtures/engine-ref/sglang-0.5.23-mamba.json)
    q35 = lambda **k: _on("b200", "qwen3.5-9b", page_size=16, mem_fraction_static=0.8, **k).fit.figures.page_size  # noqa: E731
    assert q35() == 1
    assert q35(mamba_radix_cache_strategy="extra_buffer") == q35(disable_radix_cache=True) == 64
    # SM120 (RTX 5090) and Hopper stay on page 1
    assert _on("rtx-5090", "llama-3.1-8b").fit.figures.page_size == 1


def test_dsa_from_compute_capability_10_is_fp8_in_the_raw_576_byte_row():
    # _dsa_kv_cache_dtype_default: fp8_e4m3 from major 10; the trtllm DSA backends keep kv_lora_rank +
    # qk_rope_head_dim = 576 B (not FlashMLA's 656); plus 128 + 4 B of indexer keys, 61 layers
    c = _on("b200", "deepseek-v3.2", 131072)
    assert c.plan.precision == "fp8" and c.fit.figures.kv_cache_dtype == "fp8_e4m3"
    assert c.fit.figures.cell_size_bytes == (576 + 132) * 61 == 43188
    assert _on("h200", "deepseek-v3.2", 131072).fit.figures.cell_size_bytes == (576 * 2 + 132) * 61
    assert _on("h200", "deepseek-v3.2", 131072).plan.precision == "bf16"
    assert _on("b200", "deepseek-v3.2", 131072).fit.figures.page_size == 64


def test_rocm_runs_aiter_without_prefill_graphs_and_takes_085_past_8192_tokens():
    # MI300X (196,592 MiB): no prefill CUDA graphs off CUDA (default_prefill_backend DISABLED); reserved = 512 +
    # 1.5 x 16,384 + 1,024 / 8 + 2 x 512 decode graphs = 26,240 MiB; aiter x 0.85 when context_len > 8192
    mfs = round((196592 - 26240) / 196592, 3)
    assert mfs == 0.867
    at = lambda c: capacity("llama-3.1-8b", c, engine="sglang", gpu="mi300x").budget.json[  # noqa: E731
        "mem_fraction_static"]
    assert at(8192) == mfs and at(8193) == mfs * 0.85
    # the pool depends on the context here, so the --concurrency search runs on capacity itself: 4 requests fit at
    # the context it finds, not at one token more
    from kvcalc.capacity import max_context
    args = {"model": "llama-3.1-8b", "engine": "sglang", "gpu": "mi300x"}
    best, cap = max_context(args, 4, 131072)
    assert cap.requests_per_replica >= 4 and (best == 131072 or capacity(context=best + 1, **args)
                                              .requests_per_replica < 4)
    with pytest.raises(KvcalcError, match=r"MLA and DSA caches on ROCm \(gfx942"):
        capacity("deepseek-v3", 8192, engine="sglang", gpu="mi300x", parallel=Parallel(tp=8))


def test_qwen3_vl_on_a_large_hopper_reserves_its_feature_pool(cli):
    """qwen3_vl.py _qwen3vl_hopper_serving_overrides: on compute capability 9 with 60 GiB or more, Qwen3-VL's 100 MB
    embedding cache becomes 0 and the cuda_ipc transport's 1,024 MB pool (3,072 with max_running_requests >= 400)
    is taken off the KV budget (kv_cache_configurator.py mm_runtime_reservation_gb); elsewhere the 100 MB stays.
    mem_fraction_static 0.83 x 0.95 x (1 - 0.0265625) = 0.76755546875 (its vision tower states no layer count: 24)."""
    from kvcalc.hardware import get_gpu

    hf = "tests/fixtures/hf/qwen3-vl-8b-instruct.json"

    def pool(gpu, *extra):
        r = cli("capacity", "--hf", hf, "--engine", "sglang", "--gpu", gpu, "-c", "32k", "--weights-gib", "16",
                "--json", *extra)
        assert r.code == 0, r.err
        return r.json()["kv_pool_bytes_per_gpu"]

    gib = 1 << 30
    for gpu, reserve, extra in (("h100", 1024, ()), ("h100", 3072, ("--max-running-requests", "512")),
                                ("a100-80gb", 100, ())):
        # model_runner.py: rest = free after the weights - total x (1 - mfs) - the reservation, in GiB (one rank)
        total = get_gpu(gpu).memory_bytes
        rest = (total - 16 * gib) / gib - total / gib * (1 - 0.83 * 0.95 * 0.9734375) - reserve / 1024
        assert pool(gpu, *extra) == int(rest * gib), (gpu, extra)


def test_a_request_reserves_each_pool_at_its_own_page():
    # SGLang's pools are separate tensors: a request's share costs each pool its own bytes, not the widest pool's.
    # Qwen3-Next-80B at 8k, tp 1: the 12 full-attention layers keep 2 KV heads x (256 + 256) x 2 B = 2,048 B a token
    # each (24,576 B over 12); each of 5 state slots (3 + 2 extra-buffer tracking slots) holds 36 gated DeltaNet
    # layers of conv (16 x 128 x 2 + 32 x 128) x (4 - 1) x 2 B = 49,152 B + recurrent 32 x 128 x 128 x 4 B (fp32)
    # = 2,097,152 B
    c = capacity("qwen3-next-80b-a3b", 8192, engine="sglang", kv_memory=40 * GIB)
    p = c.plan
    slot = 36 * (49_152 + 2_097_152)
    assert slot == 77_266_944
    assert [(g.kind_name, g.blocks_per_request) for g in p.groups] == [("full", 8192), ("state", 5)]
    assert p.per_request_bytes == 8192 * 12 * 2048 + 5 * slot == 587_661_312


def test_deepseek_v4_in_bf16_is_refused_as_sglang_fails_to_allocate_it(cli):
    """SGLang's own code on the CPU (scripts/audit/sglang_mamba_reference.py, tests/fixtures/engine-ref/
    sglang-0.5.23-mamba.json): DeepSeek-V4-Flash with --kv-cache-dtype bfloat16 resolves (page 256, ratio 0.1, 256
    requests, flashmla) and DeepSeekV4TokenToKVPool then fails the store-dtype assert of its first
    DeepSeekV4SingleKVPool; fp8_e4m3 builds it (5 pages of 256 x 584 B rounded up to 576 B: 149,760 B, uint8 for
    1,024 SWA tokens + the padding page); float16 fails the dtype override's assert."""
    ref = json.loads((Path(__file__).parents[2] / "fixtures" / "engine-ref" / "sglang-0.5.23-mamba.json").read_text())
    v4 = ref["dsv4_kv_cache_dtype"]
    assert v4["fp8_e4m3"]["swa_kv_buffer"] == {"shape": [-(-(1024 + 256) // 256), -(-256 * 584 // 576) * 576],
                                               "dtype": "torch.uint8"}
    assert v4["bfloat16"]["resolved"]["kv_cache_dtype"] == "bfloat16" and v4["bfloat16"]["resolved"]["page_size"] == 256
    assert v4["bfloat16"]["at"].endswith("assert self.store_dtype == torch.uint8")
    r = cli("capacity", "deepseek-v4-flash", "--engine", "sglang", "--kv-memory", "40GiB", "-c", "128k",
            "--precision", "bf16")
    assert r.code == 2 and r.err.count("\n") == 1
    assert r.err.startswith("kvcalc: error: --precision: SGLang 0.5.23 accepts --kv-cache-dtype bfloat16 for "
                            "DeepSeek V4")
    assert "asserts self.store_dtype == torch.uint8" in r.err
    # float16 is no precision the V4 configs declare; SGLang's own refusal of it, for a config that did
    from kvcalc.engines.sglang.dsv4 import _kv_dtype_refusal

    assert v4["float16"]["refused"] == "AssertionError: float16 is not supported for DeepseekV4ForCausalLM"
    assert "\"float16 is not supported for DeepseekV4ForCausalLM\"" in str(_kv_dtype_refusal("fp16"))
