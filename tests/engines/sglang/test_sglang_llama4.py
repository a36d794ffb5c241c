"""Llama 4 on SGLang 0.5.23, checked by hand. Every expected figure is worked out here from SGLang's rules (paths
under python/sglang/srt/ of the 0.5.23 wheel):

* configs/model_config.py is_hybrid_swa_model lists Llama4ForConditionalGeneration (not Llama4ForCausalLM);
  get_hybrid_layer_ids puts layers (i + 1) % 4 != 0 in the SWA pool, the others in the full pool;
* model_runner_components/load_model_utils.py resolve_sliding_window_size: models/mllama4.py has no
  get_attention_sliding_window_size and the text config no sliding_window, so the window is attention_chunk_size
  (8,192 for Scout), not window - 1 (that is gpt-oss's get_attention_sliding_window_size);
* model_executor/pool_configurator.py HybridSWAPoolConfigurator: a fractional cell, full layers plus
  swa_full_tokens_ratio (0.8) x the SWA layers; full = int(avail // cell) on the page, swa = int(full x 0.8) on
  the page; validate_swa_pool_size refuses swa <= window + page;
* compute_swa_request_cap: a request keeps at most window + 128 (SGLANG_SWA_EVICTION_INTERVAL) + 2 pages of SWA;
* arg_groups/model_overrides/llama4.py _llama4_overrides: fa3 on SM90, trtllm_mha on SM100 (page 64 unless 16,
  32, 64 or 128: overrides.py _mla_backend_page_constraints), aiter on ROCm, triton elsewhere;
* model_executor/model_runner.py asserts "Pipeline Parallel is not compatible with this model." when the model's
  forward takes no pp_proxy_tensors (mllama4.py's does not).

Scout: 48 layers, 36 chunked (chunk 8,192) + 12 global, 8 KV heads of 128, bf16. At tp 8 one KV head per rank:
a token in one layer is 1 x (128 + 128) x 2 B = 512 B.
"""

import json
import struct

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.config import as_model, load_model
from kvcalc.engines import get_engine
from kvcalc.errors import KvcalcError
from kvcalc.hardware import get_gpu
from kvcalc.plan import plan
from kvcalc.transfer import transfer

GIB = 1 << 30
SG = get_engine("sglang")
K128 = 131072
TOKEN = 1 * (128 + 128) * 2  # one layer, one KV head at tp 8, bf16
CELL = 12 * TOKEN + 0.8 * 36 * TOKEN  # 6,144 + 14,745.6
SWA_PER_REQUEST = 8192 + 128 + 2 * 1  # window + eviction interval + 2 pages of 1


def cap(context=K128, kv=40 * GIB, tp=8, dp=1, model="llama-4-scout", **settings):
    return capacity(model, context, engine="sglang", settings=SG.settings(settings), kv_memory=kv,
                    parallel=Parallel(tp=tp, dp=dp))


def test_scout_splits_12_full_and_36_swa_layers_with_the_chunk_as_window():
    p = plan("llama-4-scout", K128, engine="sglang", tp=8)
    lay = p.pools.layout
    assert lay.full_layers == tuple(range(3, 48, 4)) and len(lay.full_layers) == 12
    assert lay.swa_layers == tuple(i for i in range(48) if (i + 1) % 4) and len(lay.swa_layers) == 36
    assert lay.window == 8192 and lay.heads == lay.swa_heads == 8 // 8 and lay.page == 1
    assert [(g.kind_name, g.label) for g in p.groups] == [("full", "global"), ("window 8192", "chunked")]
    assert any("attention_chunk_size = 8192" in n and "resolve_sliding_window_size" in n for n in p.notes)


def test_scout_tp8_pools_by_hand():
    c = cap()
    j = c.fit.figures
    assert CELL == 20889.6 and j.cell_size_bytes == CELL and isinstance(j.cell_size_bytes, float)
    # 40 GiB = 42,949,672,960 B // 20,889.6 = 2,056,031.09 -> 2,056,031 full tokens; SWA int(x 0.8)
    assert j.max_total_num_tokens == int(40 * GIB // CELL) == 2_056_031
    assert j.swa_max_total_num_tokens == int(2_056_031 * 0.8) == 1_644_824
    # token pool 2,056,031 // 131,072 = 15; SWA 1,644,824 // 8,322 = 197; resolve_max_num_reqs:
    # int(2,056,031 / 131,072 x 512) = 8,031, clamped to 4,096
    assert 2_056_031 // K128 == 15 and 1_644_824 // SWA_PER_REQUEST == 197 and int(2_056_031 / K128 * 512) == 8031
    assert j.limits == {"max_running_requests": 4096, "token pool": 15, "SWA pool": 197}
    assert c.requests_per_replica == 15 and j.requests_limited_by == "token pool"
    pools = {p["name"]: p for p in j.pools}
    # memory_pool.py: size + page rows per layer
    assert pools["Full KV Cache K"]["shape"] == [2_056_032, 1, 128] and pools["Full KV Cache K"]["layers"] == 12
    assert pools["Full KV Cache K"]["bytes"] == 2_056_032 * 128 * 2 * 12
    assert pools["SWA KV Cache V"]["shape"] == [1_644_825, 1, 128] and pools["SWA KV Cache V"]["layers"] == 36
    lines = c.fit.lines
    assert "SGLang would log: Setting sliding_window_size to be attention_chunk_size: 8192" in lines
    assert ("SGLang would log: Use sliding window memory pool. full_layer_tokens=2056031, swa_layer_tokens=1644824"
            in lines)
    assert c.log_line == ("max_total_num_tokens=2056031, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                          "max_running_requests=4096, context_len=131072")


def _budget(gpu: str, mfs: float, weights: int) -> int:
    """kv_cache_configurator.py _profile_available_bytes with 8 ranks: free bytes pass through float32 (the
    all-reduce), rest = free after the weights - pre x (1 - mfs), in GiB."""
    mem = get_gpu(gpu).memory_bytes

    def f32(x):
        return struct.unpack("f", struct.pack("f", x))[0]

    return int((f32(mem - weights) / GIB - f32(mem) / GIB * (1 - mfs)) * GIB)


@pytest.mark.parametrize("gpu, mib, mfs, tokens, swa, fits", [
    # memory_hook.py, tp 8, MHA: 512 + 1.5 x 8,192 + 8 / 8 x 1,024 + 2 x 512 (decode graphs, max_bs 512 from tp
    # 4) + 8 x 58 prefill graph sizes = 15,312 MiB reserved
    ("h100-sxm", 81559, round((81559 - 15312) / 81559, 3), 2_034_506, 1_627_604, 15),
    ("h200", 143771, round((143771 - 15312) / 143771, 3), 5_154_775, 4_123_820, 39),
])
def test_scout_tp8_at_128k_on_hopper(gpu, mib, mfs, tokens, swa, fits):
    weights = int(200.74 * GIB)  # Scout's text weights in bf16, 107.77 B parameters (no vision: multimodal off)
    c = capacity("llama-4-scout", K128, engine="sglang", gpu=gpu, parallel=Parallel(tp=8), weights_bytes=weights)
    assert get_gpu(gpu).memory_bytes >> 20 == mib and c.budget.json == {"mem_fraction_static": mfs}
    per_gpu = -(-weights // 8)
    assert c.weights_bytes_per_gpu == per_gpu and c.kv_pool_bytes_per_gpu == _budget(gpu, mfs, per_gpu)
    j = c.fit.figures
    assert j.max_total_num_tokens == int(c.kv_pool_bytes_per_gpu // CELL) == tokens
    assert j.swa_max_total_num_tokens == int(tokens * 0.8) == swa
    assert c.requests_per_replica == tokens // K128 == fits and swa // SWA_PER_REQUEST > fits
    assert any("Use fa3 as attention backend on sm90 for Llama4 model" in n for n in c.plan.notes)
    # fa3's local-attention CUDA-graph metadata per graph batch slot: 16 chunks x (8,192 + 2) int32
    assert any("512.12 KiB at context_len 131,072" in n for n in c.plan.notes)
    assert round(16 * 8194 * 4 / 1024, 2) == 512.12


def test_blackwell_takes_trtllm_mha_pages_and_others_keep_one_token_pages():
    b200 = cap(arch="sm100")
    j = b200.fit.figures
    # page 64: full = int(40 GiB // 20,889.6) floored to 64 = 2,056,000; SWA int(x 0.8) = 1,644,800, on the page
    assert j.page_size == 64 and j.max_total_num_tokens == 2_056_031 // 64 * 64 == 2_056_000
    assert j.swa_max_total_num_tokens == int(2_056_000 * 0.8) // 64 * 64 == 1_644_800
    # a request keeps 8,192 + 128 + 2 x 64 SWA slots
    assert j.limits["SWA pool"] == 1_644_800 // (8192 + 128 + 128)
    assert any("'Use trtllm_mha as attention backend on sm100" in n for n in b200.plan.notes)
    kept = cap(arch="sm100", page_size=32)
    assert kept.fit.figures.page_size == 32  # trtllm_mha accepts 16, 32, 64 or 128
    # _llama4_overrides names the platform sm100, sm90, hip or "other platforms"
    for arch, backend, platform in (("sm80", "triton", "other platforms"), ("sm89", "triton", "other platforms"),
                                    ("sm120", "triton", "other platforms"), ("gfx942", "aiter", "hip")):
        c = cap(arch=arch)
        assert c.fit.figures.page_size == 1 and c.fit.figures.max_total_num_tokens == 2_056_031
        assert any(f"'Use {backend} as attention backend on {platform} for Llama4 model'" in n for n in c.plan.notes)


def test_fp8_halves_every_row_and_dp_attention_keeps_all_heads():
    j = capacity("llama-4-scout", K128, precision="fp8", engine="sglang", kv_memory=40 * GIB,
                 parallel=Parallel(tp=8)).fit.figures
    # fp8_e4m3: 1 B per value, 256 B a token-layer: 12 x 256 + 0.8 x 36 x 256 = 10,444.8
    assert j.kv_cache_dtype == "fp8_e4m3" and j.cell_size_bytes == 12 * 256 + 0.8 * 36 * 256 == 10444.8
    assert j.max_total_num_tokens == int(40 * GIB // 10444.8) == 4_112_062
    # --dp 8 --enable-dp-attention over tp 8: attention tp 1, all 8 KV heads per rank: 8 x the cell
    d = cap(dp=8, enable_dp_attention=True).fit.figures
    assert d.cell_size_bytes == 12 * 8 * 512 + 0.8 * 36 * 8 * 512 == 167116.8
    assert d.max_total_num_tokens == int(40 * GIB // 167116.8) == 257_003


def test_context_len_defaults_to_10m_and_the_pool_warns():
    spec = as_model("llama-4-scout")
    # get_context_length: max_position_embeddings 10,485,760; a llama3 rope_scaling's factor is not applied
    assert SG.context_limit(spec) == 10_485_760
    c = cap(10_485_760)
    assert c.requests_per_replica == 2_056_031 // 10_485_760 == 0
    assert any("fewer than --context-length 10485760" in n for n in c.fit.notes)


def test_a_short_swa_pool_and_pipeline_parallelism_are_refused(cli):
    # ratio 0.001: cell 6,144 + 0.001 x 18,432 = 6,162.432; full int(40 GiB // cell) = 6,969,597;
    # SWA int(x 0.001) = 6,969 <= window 8,192 + page 1
    full = int(40 * GIB // (6144 + 0.001 * 18432))
    assert full == 6_969_597 and int(full * 0.001) == 6969
    with pytest.raises(KvcalcError, match=r"SWA pool \(6969 tokens\) cannot hold even one request: the prefill "
                                          r"admission floor is sliding_window_size \(8192\) \+ page_size \(1\)"):
        cap(swa_full_tokens_ratio=0.001)
    r = cli("capacity", "llama-4-scout", "--engine", "sglang", "--tp", "8", "--context", "128k", "--kv-memory",
            "40GiB", "--swa-full-tokens-ratio", "0.001")
    assert r.code == 2 and r.err.count("\n") == 1 and "Increase --swa-full-tokens-ratio" in r.err
    with pytest.raises(KvcalcError, match="Pipeline Parallel is not compatible with this model") as e:
        capacity("llama-4-scout", K128, engine="sglang", kv_memory=40 * GIB, parallel=Parallel(tp=8, pp=2))
    assert e.value.param == "pp"
    r = cli("capacity", "llama-4-scout", "--engine", "sglang", "--tp", "8", "--pp", "2", "--context", "128k",
            "--kv-memory", "40GiB")
    assert r.code == 2 and r.err.count("\n") == 1
    assert r.err.startswith("kvcalc: error: --pp: SGLang 0.5.23 refuses Llama4ForConditionalGeneration with --pp 2")


def test_capacity_json_carries_the_split_and_the_notes(cli):
    r = cli("capacity", "llama-4-scout", "--engine", "sglang", "--tp", "8", "--context", "128k", "--kv-memory",
            "40GiB", "--json")
    assert r.code == 0, r.err
    d = r.json()
    d = d[0] if isinstance(d, list) else d
    assert (d["max_total_num_tokens"], d["swa_max_total_num_tokens"], d["requests_per_replica"]) == \
        (2_056_031, 1_644_824, 15)
    assert any("sliding window over the chunk" in n for n in d["notes"])
    # a request reserves its 131,072 full pages of 12 x 512 B and 8,322 SWA pages of 36 x 512 B, each in its own
    # pool (not the wider SWA page for both)
    assert d["per_request_bytes"] == K128 * 12 * TOKEN + SWA_PER_REQUEST * 36 * TOKEN == 958_697_472


def test_text_only_llama4_keeps_one_pool(tmp_path):
    # Llama4ForCausalLM is not in is_hybrid_swa_model: every layer in one pool at full length
    f = tmp_path / "scout-causal.yaml"
    yaml = open(as_model("llama-4-scout").path).read()
    f.write_text(yaml.replace("value: Llama4ForConditionalGeneration", "value: Llama4ForCausalLM"))
    spec = load_model(str(f))
    c = capacity(spec, K128, engine="sglang", kv_memory=40 * GIB, parallel=Parallel(tp=8))
    j = c.fit.figures
    assert j.cell_size_bytes == 48 * TOKEN == 24576 and j.swa_max_total_num_tokens is None
    assert j.max_total_num_tokens == 40 * GIB // 24576 == 1_747_626
    assert any("keeps one pool" in n for n in c.plan.notes)
    # resolve_sliding_window_size still logs the chunk at load for this architecture (it has attention_chunk_size)
    assert "SGLang would log: Setting sliding_window_size to be attention_chunk_size: 8192" in c.fit.lines
    # pipeline parallelism is not refused for it (its forward takes pp_proxy_tensors)
    capacity(spec, K128, engine="sglang", kv_memory=40 * GIB, parallel=Parallel(tp=8, pp=2))


TOY = """kvcalc: 1
name: toy-llama4
architecture: Llama4ForConditionalGeneration
precisions: {bf16: {kv: bf16}}
default_precision: bf16
components:
  glob: {cache: full_attention, kv_heads: 1, head_dim: 64, storage: kv}
  local: {cache: chunked_attention, kv_heads: 1, head_dim: 64, storage: kv, chunk: 256}
layer_kinds: {g: [glob], c: [local]}
layers: [c, c, c, g, c, c, c, g]
"""


def _toy(tmp_path, text=TOY):
    f = tmp_path / "toy-llama4.yaml"
    f.write_text(text)
    return load_model(str(f))


def test_the_split_follows_sglangs_index_rule_not_the_config_kinds(tmp_path):
    spec = _toy(tmp_path, TOY.replace("layers: [c, c, c, g, c, c, c, g]", "layers: [g, c, c, c, g, c, c, c]"))
    lay = plan(spec, 1024, engine="sglang").pools.layout
    assert lay.full_layers == (3, 7) and lay.swa_layers == (0, 1, 2, 4, 5, 6) and lay.window == 256
    assert any("splits Llama 4's layers by index" in n for n in lay.notes)


def test_scout_verify_pools_below_the_window_are_sglangs_smallest():
    # verify at 4,096 tokens: exactly the batch would give an SWA pool of int(4,096 x 0.8) = 3,276 <= 8,192 + 1,
    # which SGLang refuses; the fewest tokens whose SWA pool exceeds 8,193: int(10,243 x 0.8) = 8,194
    assert int(10242 * 0.8) == 8193 and int(10243 * 0.8) == 8194
    p = plan("llama-4-scout", 4096, engine="sglang")
    pools = SG.batch_pools(p, 1, as_model("llama-4-scout"))
    assert (pools.max_total_num_tokens, pools.swa_tokens, pools.swa_floor) == (10_243, 8_194, 8_193)
    by = {b.name: b for b in pools.buffers}
    # tp 1: 8 KV heads x 128 x 2 B = 2,048 B per K row; size + page rows
    assert by["Full KV Cache K"].shape == (10_244, 8, 128) and by["Full KV Cache K"].bytes == 10_244 * 2048 * 12
    assert by["SWA KV Cache K"].shape == (8_195, 8, 128) and by["SWA KV Cache K"].bytes == 8_195 * 2048 * 36
    assert by["SWA KV Cache K"].rows_per_request == 4096  # min(4,096, the 8,192 window)
    (text, ok), = pools.checks()
    assert ok and "max_total_num_tokens 10,243 > 1 x 4,096" in text
    # three requests keep 3 x 4,096 = 12,288 SWA rows, more than the 9,830 (int(12,288 x 0.8)) of exactly the
    # batch: the fewest tokens whose SWA pool holds them is 15,360 (int(15,360 x 0.8) = 12,288; 15,359 gives 12,287)
    assert int(15360 * 0.8) == 12288 and int(15359 * 0.8) == 12287
    three = SG.batch_pools(p, 3, as_model("llama-4-scout"))
    assert (three.max_total_num_tokens, three.swa_tokens) == (15_360, 12_288)
    assert all(ok for _, ok in three.checks())


def test_verify_fills_the_toy_pools(tmp_path):
    pytest.importorskip("torch")
    from kvcalc.verify import verify

    spec = _toy(tmp_path)
    # 128 tokens < chunk 256: window 256 + page 1 = 257 is the floor; int(322 x 0.8) = 257, int(323 x 0.8) = 258
    out = verify(plan(spec, 128, engine="sglang"), device="cpu", fill="sample", model=spec)
    assert out.verdict == "pass", [c.name for c in out.checks if not c.passed]
    assert out.token_pools["max_total_num_tokens"] == 323 and out.token_pools["swa_max_total_num_tokens"] == 258
    row = 1 * 64 * 2  # one KV head x 64 x 2 B
    planned = {g.pool["name"]: g.planned_bytes for g in out.groups}
    assert planned == {"Full KV Cache K": 2 * 324 * row, "Full KV Cache V": 2 * 324 * row,
                       "SWA KV Cache K": 6 * 259 * row, "SWA KV Cache V": 6 * 259 * row}
    # sample: the first and last layer of each pool, 128 rows each
    assert [g.written_bytes for g in out.groups] == [2 * 128 * row] * 4
    # two requests of 1,024: the pools hold exactly 2 x 1,024, the SWA pool int(2,048 x 0.8) = 1,638 > 257;
    # each request keeps its last 256 tokens in the SWA pool
    two = verify(plan(spec, 1024, engine="sglang"), batch=2, device="cpu", fill="sample", model=spec)
    assert two.verdict == "pass" and two.token_pools["max_total_num_tokens"] == 2048
    assert two.token_pools["swa_max_total_num_tokens"] == 1638
    assert [g.written_bytes for g in two.groups] == [2 * 2 * 1024 * row] * 2 + [2 * 2 * 256 * row] * 2


def test_transfer_moves_the_full_pages_and_the_window():
    t = transfer("llama-4-scout", K128, engine="sglang", tp=8)
    full, window = t.plan.groups
    # page 1: every full page (12 layers x 512 B); the window's pages from 131,072 - 8,192 = 122,880
    assert (full.units, full.unit_bytes) == (K128, 12 * TOKEN)
    assert (window.units, window.unit_bytes) == (8192, 36 * TOKEN) and window.kind == "window 8192"
    assert t.cache_bytes == K128 * 12 * TOKEN + 8192 * 36 * TOKEN == 956_301_312
    # the request holds (exact) the same: 12 x 131,072 + 36 x the 8,192 tokens of the last chunk
    assert t.stored_bytes == 956_301_312 and t.reserved_bytes == 958_697_472
    s = transfer("llama-4-scout", 20_000, engine="sglang", tp=8, settings=SG.settings({"page_size": 64}))
    # pages of 64: ceil(20,000 / 64) = 313 full pages; the window from floor(11,808 / 64) x 64 = 11,776: 129 pages
    assert [g.units for g in s.plan.groups] == [-(-20_000 // 64), -(-(20_000 - 11_808 // 64 * 64) // 64)] == [313, 129]


LOG = """[2026-12-01 10:00:00] server_args={{'model_path': 'meta-llama/Llama-4-Scout-17B-16E-Instruct', 'tp_size': 8, \
'mem_fraction_static': 0.812, 'page_size': 1, 'kv_cache_dtype': 'auto', 'swa_full_tokens_ratio': 0.8, \
'max_running_requests': None}}
[2026-12-01 10:00:05 TP0] Use fa3 as attention backend on sm90 for Llama4 model
[2026-12-01 10:00:10 TP0] Setting sliding_window_size to be attention_chunk_size: {window}
[2026-12-01 10:00:20 TP0] Use sliding window memory pool. full_layer_tokens=2034506, swa_layer_tokens={swa}
[2026-12-01 10:00:20 TP0] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2034506, K size: 5.82 GB, \
V size: 5.82 GB
[2026-12-01 10:00:20 TP0] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: {swa}, K size: 13.97 GB, \
V size: 13.97 GB
[2026-12-01 10:00:20 TP0] SWAKVPool mem usage: 39.58 GB, swa size: {swa}, full size: 2034506
[2026-12-01 10:00:40 TP0] max_total_num_tokens=2034506, chunked_prefill_size=8192, max_prefill_tokens=16384, \
max_running_requests=4096, context_len=131072, available_gpu_mem=9.12 GB
"""


def test_check_log_reads_the_hybrid_swa_lines(cli, tmp_path):
    # Written by hand in 0.5.23's wording: Scout tp 8 on H100 (2,034,506 full tokens, above). Full K: 2,034,507
    # rows x 128 x 2 B x 12 layers = 5.82 GiB; SWA int(2,034,506 x 0.8) = 1,627,604, K: 1,627,605 x 256 x 36 = 13.97
    assert f"{2_034_507 * 256 * 12 / GIB:.2f}" == "5.82" and f"{1_627_605 * 256 * 36 / GIB:.2f}" == "13.97"
    good = tmp_path / "scout.log"
    good.write_text(LOG.format(window=8192, swa=1_627_604))
    r = cli("check-log", str(good), "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    rows = {x["figure"].split(" (line")[0]: x for x in out["rows"]}
    assert out["model"] == "llama-4-scout" and out["verdict"] == "agrees"
    assert rows["SWA pool tokens"]["agrees"] and rows["SWA K size (GB = GiB, 2 decimals)"]["agrees"]
    assert rows["sliding_window_size = attention_chunk_size"]["kvcalc"] == "8,192"
    bad = tmp_path / "bad.log"
    bad.write_text(LOG.format(window=8191, swa=1_627_605))
    r = cli("check-log", str(bad), "--json")
    rows = {x["figure"].split(" (line")[0]: x for x in json.loads(r.out)["rows"]}
    assert r.code == 1 and not rows["sliding_window_size = attention_chunk_size"]["agrees"]
    assert not rows["SWA pool tokens"]["agrees"]
