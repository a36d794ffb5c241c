"""SGLang 0.5.23's Mamba state options (--mamba-radix-cache-strategy, --disable-overlap-schedule,
--disable-radix-cache, --max-mamba-cache-size), the refusals SGLang applies to them, and what --disable-radix-cache
does to a split SWA pool, checked by hand: every expected figure is worked out in the test from SGLang's rules
(each cited by file and function under python/sglang/srt/). test_sglang_mamba_reference.py holds the same rules to
SGLang's own code over a grid."""

import json

import pytest

from kvcalc.capacity import Parallel, capacity
from kvcalc.engines import get_engine
from kvcalc.errors import KvcalcError

GIB = 1 << 30
SG = get_engine("sglang")
# Qwen3-Next-80B at tp 2: 36 gated-DeltaNet layers of conv (16 x 128 x 2 + 32 x 128) / 2 x (4 - 1) bf16 = 24,576 B
# and recurrent 32 / 2 x 128 x 128 fp32 = 1,048,576 B: one state slot is 36 x 1,073,152 = 38,633,472 B
SLOT = 36 * (24_576 + 1_048_576)
# _handle_max_mamba_cache from a 40 GiB budget: int((40 x 0.9 / 1.9 x 2^30 - slot) // slot) = 525 slots
SLOTS = int((40 * 0.9 / 1.9 * GIB - SLOT) // SLOT)
# the KV pool: 12 full layers x 1 KV head a rank x (256 + 256) x 2 B = 12,288 B a token, from what the 526 slots
# (one for padding) leave: 1,841,509 tokens; the request estimate min(clamp(int(T / 131,072 x 512), 2048, 4096),
# T // 2) = 4,096, so the state pool binds
TOKENS = int((40 - (SLOTS + 1) * SLOT / GIB) * GIB) // 12_288


def q3n(**settings):
    return capacity("qwen3-next-80b-a3b", 131072, engine="sglang", settings=SG.settings(settings), kv_memory=40 * GIB,
                    parallel=Parallel(tp=2)).fit.figures


@pytest.mark.parametrize("settings, slots", [
    # auto without the overlap scheduler resolves to no_buffer (page 1): 3 slots
    ({"disable_overlap_schedule": True}, 3),
    # extra_buffer kept without the overlap scheduler: 3 + 1 tracking slot
    ({"disable_overlap_schedule": True, "mamba_radix_cache_strategy": "extra_buffer"}, 4),
    # a page over 1 makes auto pick extra_buffer even without the overlap scheduler (wants_paging): 3 + 1
    ({"disable_overlap_schedule": True, "page_size": 64}, 4),
    # the lazy variant defers its second tracking slot: 3 + 1
    ({"mamba_radix_cache_strategy": "extra_buffer_lazy"}, 4),
    # no radix cache: _calculate_mamba_ratio returns 1, whatever the strategy
    ({"disable_radix_cache": True}, 1),
    ({"disable_radix_cache": True, "mamba_radix_cache_strategy": "no_buffer"}, 1),
])
def test_the_state_slots_a_running_request_holds(settings, slots):
    j = q3n(**settings)
    # the state pool is the same 525 slots (the auto-fit does not read the strategy); the cap is 525 // slots
    assert j.max_mamba_cache_size == SLOTS
    tokens = TOKENS if settings.get("page_size") is None else TOKENS // 64 * 64
    assert j.max_total_num_tokens == tokens
    assert j.max_running_requests == min(4096, tokens // 2, SLOTS // slots)


def test_up_to_5x_the_requests_and_1_8x_the_tokens():
    assert SLOT == 38_633_472 and SLOTS == 525 and TOKENS == 1_841_509
    base = q3n()
    # the default: auto -> extra_buffer (overrides.py _mamba_radix_cache_resolution: the overlap scheduler is on
    # and Qwen3NextForCausalLM supports it), 3 + 2 tracking slots (allocation_sizing.py get_mamba_tracking_slots)
    assert base.max_mamba_cache_size == SLOTS and base.max_total_num_tokens == TOKENS
    assert base.max_running_requests == 525 // 5 == 105
    # no radix cache: 525 // 1 = 525 requests, 5x the default 105
    assert q3n(disable_radix_cache=True).max_running_requests == 525 == 5 * base.max_running_requests
    # and with --max-running-requests 64 the state pool holds just those (_handle_max_mamba_cache: max(1, 64 //
    # attn_dp) slots), 65 x 38,633,472 B, leaving int((40 - 65 x slot / 2^30) x 2^30) // 12,288 tokens
    j = q3n(disable_radix_cache=True, max_running_requests=64)
    tokens = int((40 - 65 * SLOT / GIB) * GIB) // 12_288
    assert j.max_mamba_cache_size == 64 and j.max_total_num_tokens == tokens == 3_290_893
    assert j.max_running_requests == 64 and round(tokens / TOKENS, 2) == 1.79
    # with the radix cache on, --max-running-requests leaves the auto-fit alone
    assert q3n(max_running_requests=64).max_mamba_cache_size == SLOTS


def test_a_given_state_pool_size():
    # --max-mamba-cache-size 200: 200 // attn_dp slots, whatever the ratio; 201 slots taken off the budget
    j = q3n(max_mamba_cache_size=200)
    assert j.max_mamba_cache_size == 200
    assert j.max_total_num_tokens == int((40 - 201 * SLOT / GIB) * GIB) // 12_288 == 2_863_309
    assert j.max_running_requests == 200 // 5 == 40
    # divided over the attention-DP workers (--dp 2 --enable-dp-attention: attention tp 1, two KV heads a rank)
    dp = capacity("qwen3-next-80b-a3b", 131072, engine="sglang", kv_memory=40 * GIB, parallel=Parallel(tp=2, dp=2),
                  settings=SG.settings({"max_mamba_cache_size": 200, "enable_dp_attention": True})).fit.figures
    assert dp.max_mamba_cache_size == 200 // 2 == 100 and dp.max_running_requests == 100 // 5
    # more slots than the budget holds leave nothing for the KV pool: SGLang's _profile_available_bytes refuses
    with pytest.raises(KvcalcError, match="Loaded weights leave no GPU memory for the KV cache"):
        q3n(max_mamba_cache_size=1200)  # 1,201 x 38,633,472 B = 43.2 GiB > 40 GiB


def _refusal(cli, *args):
    r = cli("capacity", *args, "--engine", "sglang", "--kv-memory", "40GiB", "--json")
    assert r.code == 2 and r.err.count("\n") == 1 and r.out == "", (r.code, r.err)
    return r.err


def test_sglangs_refusals_in_its_own_words(cli):
    q = ("qwen3-next-80b-a3b", "--tp", "2", "-c", "128k")
    # mamba_hook.py validate_mamba_no_buffer, in its order: the page, the overlap scheduler, the backend
    err = _refusal(cli, *q, "--mamba-radix-cache-strategy", "no_buffer")
    assert err.startswith("kvcalc: error: --mamba-radix-cache-strategy: SGLang 0.5.23 refuses no_buffer under the "
                          "overlap scheduler: \"no_buffer do not support overlap schedule. Try to set "
                          "disable_overlap_schedule=True.\"")
    assert "add --disable-overlap-schedule" in err
    err = _refusal(cli, *q, "--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule",
                   "--page-size", "64")
    assert '"no_buffer only supports page_size=1."' in err
    # nemotron_h.py declares trtllm_mha on SM100 before the strategy is validated; auto without the overlap
    # scheduler (page unset) resolves to no_buffer there
    err = _refusal(cli, "nemotron-h-56b", "-c", "8k", "--gpu", "b200", "--disable-overlap-schedule")
    assert '"no_buffer do not support trtllm_mha attention backend."' in err
    # validate_mamba_extra_buffer: mamba_track_interval 256 must be a multiple of the page (a bare assert)
    err = _refusal(cli, *q, "--page-size", "100")
    assert err.startswith("kvcalc: error: --page-size: SGLang 0.5.23 refuses page_size 100 with the extra_buffer")
    # kv_cache_configurator.py _calculate_mamba_ratio: the lazy strategy asserts the overlap scheduler
    err = _refusal(cli, *q, "--mamba-radix-cache-strategy", "extra_buffer_lazy", "--disable-overlap-schedule")
    assert '"Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)"' in err
    # model_hook.py handle_mamba_radix_cache: an extra_buffer strategy on a model without Mamba state
    err = _refusal(cli, "llama-3.1-8b", "-c", "8k", "--mamba-radix-cache-strategy", "extra_buffer")
    assert '"--mamba-radix-cache-strategy extra_buffer needs mamba state, got LlamaForCausalLM."' in err
    # without the radix cache none of these apply (no strategy is resolved or validated)
    r = cli("capacity", *q, "--engine", "sglang", "--kv-memory", "40GiB", "--disable-radix-cache",
            "--mamba-radix-cache-strategy", "no_buffer", "--json")
    assert r.code == 0 and json.loads(r.out)["max_running_requests"] == 525
    # bad values are one line naming the flag
    assert "--mamba-radix-cache-strategy: choose one of auto, no_buffer" in _refusal(
        cli, *q, "--mamba-radix-cache-strategy", "lazy")
    assert "--max-mamba-cache-size: must be from 1" in _refusal(cli, *q, "--max-mamba-cache-size", "0")


def test_pipeline_stages_turn_the_overlap_scheduler_off_after_the_strategy_resolves(cli):
    # overrides.py _pipeline_parallel_overlap_disable runs after handle_mamba_radix_cache (arg_groups/pipeline.py):
    # auto has resolved to extra_buffer with the overlap scheduler on, which pp then turns off (3 + 1 slots); an
    # explicit no_buffer is validated while the scheduler is still on, and refused unless it was turned off
    pp = ("qwen3-next-80b-a3b", "--tp", "2", "--pp", "2", "-c", "128k")
    r = cli("capacity", *pp, "--engine", "sglang", "--kv-memory", "20GiB", "--json")
    assert r.code == 0 and r.json()["engine_settings"]["mamba_state_slots_per_request"] == 4
    assert '"no_buffer do not support overlap schedule.' in _refusal(cli, *pp, "--mamba-radix-cache-strategy",
                                                                     "no_buffer")
    r = cli("capacity", *pp, "--engine", "sglang", "--kv-memory", "20GiB", "--mamba-radix-cache-strategy",
            "no_buffer", "--disable-overlap-schedule", "--json")
    assert r.code == 0 and r.json()["engine_settings"]["mamba_state_slots_per_request"] == 3
    # and the lazy strategy, which needs the scheduler, is refused under pp
    assert '"Lazy extra buffer requires overlap schedule' in _refusal(cli, *pp, "--mamba-radix-cache-strategy",
                                                                      "extra_buffer_lazy")


def test_qwen3_next_on_blackwell_takes_its_page_from_the_strategy_as_given():
    # qwen3_5.py _qwen3_5_hybrid_overrides is collected before _mamba_radix_cache_resolution: auto reads as no
    # extra buffer, so triton with page 1 (and the strategy then resolves to extra_buffer at page 1, 5 slots);
    # extra_buffer as given, or no radix cache, takes trtllm_mha with page 64
    def on_b200(**s):
        return capacity("qwen3-next-80b-a3b", 131072, engine="sglang", gpu="b200", kv_memory=40 * GIB,
                        parallel=Parallel(tp=2), settings=SG.settings(s, gpu=None))

    c = on_b200()
    assert c.fit.figures.page_size == 1 and c.plan.settings_json["mamba_state_slots_per_request"] == 5
    c = on_b200(mamba_radix_cache_strategy="extra_buffer")
    assert c.fit.figures.page_size == 64 and c.fit.figures.max_total_num_tokens == TOKENS // 64 * 64
    assert on_b200(disable_radix_cache=True).fit.figures.page_size == 64


def test_without_the_radix_cache_a_split_swa_pool_is_sized_from_the_request_cap():
    # gpt-oss-120b, 40 GiB, --disable-radix-cache --max-running-requests 16: SWARequestCapPoolConfigurator
    # (pool_configurator.py). compute_swa_request_cap: a request holds window 127 (sliding_window - 1) + the eviction
    # interval 128 + a page + a decode page = 257 slots; 257 x 16 + 2 prefill chunks of 8,192 (the overlap
    # scheduler) + a page = 20,497. The 18 SWA layers take 20,497 x 18 x 2,048 B first (8 KV heads x (64 + 64) x
    # 2 B a layer); the full pool the rest: int((40 GiB - that) // (18 x 2,048)) on page 1
    def gpt(**s):
        return capacity("gpt-oss-120b", 131072, engine="sglang", kv_memory=40 * GIB, settings=SG.settings(s))

    cap = 257 * 16 + 2 * 8192 + 1
    j = gpt(disable_radix_cache=True, max_running_requests=16).fit.figures
    assert j.swa_max_total_num_tokens == cap == 20_497
    assert j.max_total_num_tokens == int((40 * GIB - cap * 18 * 2048) // (18 * 2048)) == 1_144_587
    assert j.max_running_requests == 16
    # one chunk in flight without the overlap scheduler
    cap1 = 257 * 16 + 8192 + 1
    j = gpt(disable_radix_cache=True, max_running_requests=16, disable_overlap_schedule=True).fit.figures
    assert j.swa_max_total_num_tokens == cap1 == 12_305
    # a --max-total-tokens below the profiled count re-derives (calculate_pool_sizes_from_max_tokens): the full
    # pool is the cap on the page, the SWA pool min(its cap, that cap)
    j = gpt(disable_radix_cache=True, max_running_requests=16, max_total_tokens=10_000).fit.figures
    assert j.max_total_num_tokens == 10_000 and j.swa_max_total_num_tokens == 10_000
    # either setting alone keeps the ratio mode: int(647,269 x 0.8) SWA tokens (the checked-in gpt-oss log)
    assert gpt(disable_radix_cache=True).fit.figures.swa_max_total_num_tokens == int(647_269 * 0.8)
    assert gpt(max_running_requests=16).fit.figures.swa_max_total_num_tokens == int(647_269 * 0.8)
    c = gpt(disable_radix_cache=True, max_running_requests=16)
    assert not any("Use sliding window memory pool" in line for line in c.fit.lines)  # the ratio mode's line


def test_without_the_radix_cache_no_prefix_is_shared():
    # llama-3.1-8b, 40 GiB: 327,680 tokens; 8,192 a request: 40; with a 2,048-token shared prefix the radix cache
    # holds it once: (327,680 - 2,048) // 6,144 = 53; without the radix cache (registry.py
    # default_radix_cache_factory: "a disabled cache publishes nothing") every request holds its 8,192: 40
    def llama(**s):
        return capacity("llama-3.1-8b", 131072, engine="sglang", kv_memory=40 * GIB, request_tokens=8192,
                        shared_prefix_tokens=2048, settings=SG.settings(s))

    assert llama().requests_per_replica == 53
    assert llama(disable_radix_cache=True).requests_per_replica == 327680 // 8192 == 40


def test_transfer_moves_the_pages_the_strategy_picks_on_blackwell():
    # Qwen3-Next on a B200 (qwen3_5.py): auto keeps page 1, a prompt of 8,001 tokens sends 8,001 one-token pages;
    # extra_buffer as given takes page 64: ceil(8,001 / 64) = 126 pages. The state is one slot either way.
    from kvcalc.transfer import transfer

    def units(**s):
        t = transfer("qwen3-next-80b-a3b", 8001, engine="sglang", gpu="b200", settings=SG.settings(s))
        return [g.units for g in t.plan.groups]

    assert units() == [8001, 1]
    assert units(mamba_radix_cache_strategy="extra_buffer") == [-(-8001 // 64), 1] == [126, 1]


def test_deepseek_v4_takes_the_strategy_refusal_and_shares_no_prefix_without_the_radix_cache(cli):
    # handle_mamba_radix_cache runs for every model, DeepSeek V4 too: an extra_buffer strategy needs Mamba state
    err = _refusal(cli, "deepseek-v4-flash", "-c", "128k", "--mamba-radix-cache-strategy", "extra_buffer")
    assert '"--mamba-radix-cache-strategy extra_buffer needs mamba state, got DeepseekV4ForCausalLM."' in err

    # DeepSeek V4's pools stay the ratio mode's (the override's 0.1 counts as the operator's), but the radix cache
    # off shares no prefix: a request of 8,192 tokens holds all of its 8,192 (32 pages of 256), not 8,192 - 2,048
    def v4(**s):
        return capacity("deepseek-v4-flash", 131072, engine="sglang", kv_memory=40 * GIB, request_tokens=8192,
                        shared_prefix_tokens=2048, settings=SG.settings(s))

    on, off = v4(), v4(disable_radix_cache=True)
    assert off.fit.figures.max_total_num_tokens == on.fit.figures.max_total_num_tokens
    w_on, w_off = on.fit.workload, off.fit.workload
    assert (w_on.shared_cost, w_on.cost_per_request) == (2048, 8192 - 2048)
    assert (w_off.shared_cost, w_off.cost_per_request) == (0, 8192)
    tokens = on.fit.figures.max_total_num_tokens
    assert w_on.limits["pool"] == (tokens - 2048) // 6144 and w_off.limits["pool"] == tokens // 8192
