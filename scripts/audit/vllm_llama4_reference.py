#!/usr/bin/env python
"""Independent reference for Llama 4 chunked local attention in vLLM 0.33.0.

Runs vLLM's OWN planning / KV-cache-manager code on CPU (a scratch venv: `pip install torch==2.13.0`, then
`pip install --no-deps vllm==0.33.0` and the small pure-Python packages its import asks for; never the project's
environment) for a grid of cases and writes one JSON record per case (about 40 MB). Not part of the suite:
scripts/audit/reference_digest.py keeps a sample of the figures in tests/fixtures/engine-ref/, which
tests/engines/vllm/test_vllm_reference.py compares with kvcalc.

What is vLLM's code here and what is ours:
  * ours: the layer specs (built as the CUDA worker would build them: Attention.get_kv_cache_spec ->
    FullAttentionSpec for NoPE/global layers, ChunkedLocalAttention.get_kv_cache_spec ->
    ChunkedLocalAttentionSpec for RoPE layers), a stub VllmConfig holding only the fields the planner
    reads (its max_concurrent_batches / max_in_flight_tokens / num_prefill_lookahead_tokens are vLLM's
    own VllmConfig property objects bound onto the stub), and the driving loop of the P/D and prefill
    simulations (the scheduler's call sequence, reproduced).
  * vLLM's: get_global_kv_cache_groups, get_kv_cache_configs (grouping, padding, unify, PP projection,
    min num_blocks over stages, null-block check, refusal message), _pool_bytes_per_block,
    spec.max_memory_usage_bytes / max_admission_blocks_per_request, get_max_concurrency_for_kv_cache_config
    (the figure vLLM logs), generate_scheduler_kv_cache_config, KVCacheManager / coordinators /
    ChunkedLocalAttentionManager (allocate_slots, get_num_blocks_to_allocate, remove_skipped_blocks,
    get_block_ids_for_computed_tokens, get_unhashed_block_ids_all_groups), vllm.distributed.utils.get_pp_indices.

Why not VllmConfig itself: on a CPU build current_platform.support_hybrid_kv_cache() is False, so
VllmConfig.__post_init__ would force disable_hybrid_kv_cache_manager=True; on CUDA it stays False for
Llama 4 (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1). We set it explicitly
(hma=True: CUDA default; hma=False: the promoted single-group layout).

Usage:
  VENV/bin/python scripts/audit/vllm_llama4_reference.py [--out PATH] [--quick] [--no-sim]   (from the checkout)
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import sys
import time
import warnings
from types import SimpleNamespace as NS

warnings.filterwarnings("ignore")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

# Import order matters: planning first (vllm.config <-> transformers import cycle otherwise).
import vllm.v1.core.kv_cache_planning as P  # noqa: E402
import torch  # noqa: E402
from vllm.config import CacheConfig, VllmConfig  # noqa: E402
from vllm.distributed.utils import get_pp_indices  # noqa: E402
from vllm.v1.core import kv_cache_utils as KU  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    get_kv_quant_mode,
)
from vllm.utils.math_utils import cdiv  # noqa: E402
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE  # noqa: E402

import vllm  # noqa: E402

GiB = 1 << 30
NIXL_PROMPTS = [1, 8191, 8192, 8193, 20000, 131072]

# ---------------------------------------------------------------------------------------------
# capture vLLM's planner warnings (padding layers, "Hybrid KV cache manager is disabled", ...)
_log_buf = io.StringIO()
_handler = logging.StreamHandler(_log_buf)
_handler.setLevel(logging.INFO)
for _name in ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils"):
    _lg = logging.getLogger(_name)
    _lg.addHandler(_handler)
    _lg.setLevel(logging.INFO)


def _take_log() -> list[str]:
    s = _log_buf.getvalue()
    _log_buf.seek(0)
    _log_buf.truncate(0)
    return [line for line in s.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------
# models
def llama4_pattern(num_layers: int, interval: int) -> list[bool]:
    """transformers Llama4TextConfig default: no_rope_layers[i] = int((i+1) % interval != 0);
    vLLM llama4.py: nope = no_rope_layers[i] == 0; chunked iff (not nope and attention_chunk_size).
    Returns is_full (NoPE/global) per layer."""
    no_rope_layers = [int((i + 1) % interval != 0) for i in range(num_layers)]
    return [v == 0 for v in no_rope_layers]


def _scout_pattern_from_transformers() -> list[bool]:
    from transformers import Llama4TextConfig

    cfg = Llama4TextConfig(num_hidden_layers=48, attention_chunk_size=8192)
    pat = [v == 0 for v in cfg.no_rope_layers]
    assert pat == llama4_pattern(48, 4), "transformers default no_rope_layers changed"
    return pat


MODELS = {
    "llama-4-scout": dict(
        full=_scout_pattern_from_transformers(), chunk=8192, kv_heads=8, head=128,
        kvcalc="llama-4-scout",
        prefix="language_model.model.layers.{i}.self_attn.attn",
        note="Llama-4-Scout text config: 48 layers, every 4th (3, 7, ...) NoPE/global, chunk 8192",
    ),
    # 10 layers, NoPE every 3rd -> full at 2, 5, 8 (3 full + 7 chunked), chunk 4096:
    # group size 3, the chunked bucket splits into 3 groups of 3/2/2 layers (2 padding layers).
    "synth-10l-3f-c4096": dict(
        full=llama4_pattern(10, 3), chunk=4096, kv_heads=8, head=128,
        kvcalc="tests/fixtures/engine-ref/synth-10l-3f-c4096.yaml",
        prefix="model.layers.{i}.self_attn.attn",
        note="synthetic: 10 layers, no_rope_layer_interval 3 (full 2,5,8), chunk 4096",
    ),
    # 12 layers, 5 full (0, 3, 6, 9, 11) + 7 chunked: 7 < 1.5*5 so group size = 7 and the full bucket
    # gets 2 padding layers (the gpt-oss+eagle heuristic in _get_kv_cache_groups_uniform_page_size).
    "synth-12l-5f-c4096": dict(
        full=[i in (0, 3, 6, 9, 11) for i in range(12)], chunk=4096, kv_heads=8, head=128,
        kvcalc="tests/fixtures/engine-ref/synth-12l-5f-c4096.yaml",
        prefix="model.layers.{i}.self_attn.attn",
        note="synthetic: 12 layers, full at 0,3,6,9,11 (5 full + 7 chunked), chunk 4096",
    ),
}

DTYPES = {  # kvcalc precision name -> vLLM --kv-cache-dtype
    "bf16": "auto",   # model dtype bfloat16
    "fp8": "fp8",     # STR_DTYPE_TO_TORCH_DTYPE['fp8'] = uint8, KVQuantMode.FP8_PER_TENSOR
}


def torch_dtype(kv: str) -> torch.dtype:
    return torch.bfloat16 if kv == "auto" else STR_DTYPE_TO_TORCH_DTYPE[kv]


def layer_specs(model: dict, layers: range, block: int, kv_heads_rank: int, kv_dtype: str) -> dict:
    """Specs exactly as the CUDA worker builds them (Attention.get_kv_cache_spec /
    ChunkedLocalAttention.get_kv_cache_spec). block_stride_alignment stays None: FLASH_ATTN advertises
    [MultipleOf(16)] (not all-int, customize_attention_spec leaves it), and FLASHINFER's MultipleOf(64 or 1024)
    collapses to alignment 1 whenever the kernel block equals the block (16/32/64), or to a kernel page that
    divides every page sum: no effect on bytes either way."""
    specs = {}
    dt = torch_dtype(kv_dtype)
    qm = get_kv_quant_mode(kv_dtype)
    for i in layers:
        name = model["prefix"].format(i=i)
        if model["full"][i]:
            specs[name] = FullAttentionSpec(block_size=block, num_kv_heads=kv_heads_rank,
                                            head_size=model["head"], dtype=dt, kv_quant_mode=qm)
        else:
            specs[name] = ChunkedLocalAttentionSpec(block_size=block, num_kv_heads=kv_heads_rank,
                                                    head_size=model["head"], dtype=dt, kv_quant_mode=qm,
                                                    attention_chunk_size=model["chunk"])
    return specs


def layer_index(name: str) -> int:
    parts = name.split(".")
    return int(parts[parts.index("layers") + 1])


# ---------------------------------------------------------------------------------------------
# stub VllmConfig: only what the planner / managers read. The three properties are vLLM's own.
class StubVllmConfig:
    max_concurrent_batches = VllmConfig.max_concurrent_batches
    max_in_flight_tokens = VllmConfig.max_in_flight_tokens
    num_prefill_lookahead_tokens = VllmConfig.num_prefill_lookahead_tokens

    def __init__(self, *, max_model_len, block, mnbt, async_sched, tp, pp, hma, layout="LBNHC"):
        cc = CacheConfig(block_size=block)
        cc.kv_cache_layout = layout  # resolve_kv_cache_layout: FLASH_ATTN declares none -> LBNHC first
        self.cache_config = cc
        self.model_config = NS(max_model_len=max_model_len, original_max_model_len=max_model_len,
                               supports_kv_cache_grouping=False)
        self.scheduler_config = NS(disable_hybrid_kv_cache_manager=not hma,
                                   max_num_batched_tokens=mnbt, async_scheduling=async_sched)
        self.parallel_config = NS(pipeline_parallel_size=pp, tensor_parallel_size=tp,
                                  decode_context_parallel_size=1, prefill_context_parallel_size=1)
        self.attention_config = NS(hisparse_config=None)
        self.speculative_config = None
        self.kv_transfer_config = None
        # VLLM_USE_V2_MODEL_RUNNER unset + Triton on CUDA + no unsupported feature -> V2 runner
        # (config/vllm.py use_v2_model_runner); async+pp uses pp_size+1 batches with V2.
        self.use_v2_model_runner = True
        self.device_config = NS(device_type="cuda")


# ---------------------------------------------------------------------------------------------
def describe_groups(vc, groups, model) -> list[dict]:
    out = []
    for gi, g in enumerate(groups):
        spec = g.kv_cache_spec
        rec = dict(
            index=gi,
            spec=type(spec).__name__,
            layers=[layer_index(n) for n in g.layer_names],
            num_layers=len(g.layer_names),
            block_size=spec.block_size,
            page_bytes_per_layer=spec.page_size_bytes,
            group_bytes_per_block=spec.page_size_bytes * len(g.layer_names),
            attention_chunk_size=getattr(spec, "attention_chunk_size", None),
            max_memory_usage_bytes_per_layer=spec.max_memory_usage_bytes(vc),
            blocks_per_request=cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes),
        )
        if isinstance(spec, ChunkedLocalAttentionSpec):
            rec["admission_cap_blocks"] = spec.max_admission_blocks_per_request(
                max_in_flight_tokens=vc.max_in_flight_tokens,
                max_model_len=vc.model_config.max_model_len)
            rec["admission_cap_rule"] = (
                f"cdiv(min({spec.attention_chunk_size} + {vc.max_in_flight_tokens}, "
                f"{vc.model_config.max_model_len}), {spec.block_size})")
        else:
            rec["admission_cap_blocks"] = None
            rec["admission_cap_rule"] = f"cdiv({vc.model_config.max_model_len}, {spec.block_size})"
        out.append(rec)
    return out


def plan_case(model_name, *, tp, pp, ctx, block, mnbt, async_sched, prec, pool, hma):
    model = MODELS[model_name]
    n_layers = len(model["full"])
    kvh_rank = max(1, model["kv_heads"] // tp)
    kv_dtype = DTYPES[prec]
    vc = StubVllmConfig(max_model_len=ctx, block=block, mnbt=mnbt, async_sched=async_sched,
                        tp=tp, pp=pp, hma=hma)
    stage_ranges = [range(*get_pp_indices(n_layers, r, pp)) for r in range(pp)]
    worker_specs = [layer_specs(model, rng, block, kvh_rank, kv_dtype) for rng in stage_ranges]
    rec = dict(
        inputs=dict(model=model_name, kvcalc_model=model["kvcalc"], num_layers=n_layers,
                    full_layers=[i for i, f in enumerate(model["full"]) if f],
                    chunked_layers=[i for i, f in enumerate(model["full"]) if not f],
                    attention_chunk_size=model["chunk"], kv_heads_total=model["kv_heads"],
                    head_size=model["head"], tp=tp, pp=pp, kv_heads_per_rank=kvh_rank,
                    max_model_len=ctx, block_size=block, max_num_batched_tokens=mnbt,
                    async_scheduling=async_sched, precision=prec, kv_cache_dtype=kv_dtype,
                    torch_dtype=str(torch_dtype(kv_dtype)), pool_bytes_per_gpu=pool,
                    hybrid_kv_cache_manager=hma, kv_cache_layout="LBNHC",
                    model_runner="v2", prefix_caching=True),
        derived=dict(max_concurrent_batches=vc.max_concurrent_batches,
                     max_in_flight_tokens=vc.max_in_flight_tokens,
                     stage_layers=[[rng.start, rng.stop - 1] for rng in stage_ranges]),
    )
    _take_log()
    # get_global_kv_cache_groups mutates specs in place when HMA is off; give it copies.
    global_groups = P.get_global_kv_cache_groups(vc, [dict(w) for w in worker_specs])
    rec["global_groups"] = describe_groups(vc, global_groups, model)
    buckets: dict[str, int] = {}
    for g in global_groups:
        buckets[type(g.kv_cache_spec).__name__] = buckets.get(type(g.kv_cache_spec).__name__, 0) + 1
    gsize = max(len(g.layer_names) for g in global_groups)
    rec["group_size"] = gsize
    rec["padding_layers"] = gsize * len(global_groups) - n_layers
    if not hma:
        # the promoted specs (unify_hybrid_kv_cache_specs mutates a dict in place): re-derive per worker
        for w in worker_specs:
            P.unify_hybrid_kv_cache_specs(w)
    try:
        cfgs = P.get_kv_cache_configs(vc, worker_specs, [pool] * pp, global_groups)
    except ValueError as exc:
        rec["error"] = str(exc)
        rec["refused"] = True
        rec["planner_log"] = _take_log()
        # what it would have been without the check (the same helpers vLLM uses)
        proj = P._project_kv_cache_groups_to_worker(global_groups, worker_specs[0])
        builder = P.DefaultKVCacheConfigBuilder()
        bpb = P._pool_bytes_per_block_from_builder(builder, vc, proj)
        rec["bytes_per_block"] = bpb
        rec["num_blocks_unchecked"] = pool // bpb
        rec["per_request_bytes"] = P._max_memory_usage_bytes_from_groups(builder, vc, proj)
        rec["blocks_per_request"] = rec["per_request_bytes"] // bpb
        rec["estimated_max_model_len"] = P._estimate_max_model_len_from_groups(
            builder, vc, proj, pool - bpb)
        return rec, vc, global_groups, None
    rec["refused"] = False
    stages = []
    builder = P.DefaultKVCacheConfigBuilder()
    for si, (w, cfg) in enumerate(zip(worker_specs, cfgs)):
        proj = P._project_kv_cache_groups_to_worker(global_groups, w)
        bpb = P._pool_bytes_per_block_from_builder(builder, vc, proj)
        stages.append(dict(
            stage=si, layers=[layer_index(n) for n in w],
            groups=[dict(index=gi, layers=[layer_index(n) for n in g.layer_names],
                         num_layers=len(g.layer_names),
                         group_bytes_per_block=g.kv_cache_spec.page_size_bytes * len(g.layer_names)
                         if not hasattr(g.kv_cache_spec, "kv_cache_specs") else g.kv_cache_spec.page_size_bytes)
                    for gi, g in enumerate(cfg.kv_cache_groups)],
            bytes_per_block=bpb,
            num_blocks_own=pool // bpb,
            num_blocks=cfg.num_blocks,
            kv_cache_tensor_bytes=sum(t.size for t in cfg.kv_cache_tensors[:1]),
        ))
    rec["stages"] = stages
    sched_cfg = KU.generate_scheduler_kv_cache_config(cfgs)
    conc = KU.get_max_concurrency_for_kv_cache_config(vc, sched_cfg)
    tokens, _ = KU.get_kv_cache_capacity(vc, sched_cfg)
    per_group_blocks = [cdiv(g.kv_cache_spec.max_memory_usage_bytes(vc), g.kv_cache_spec.page_size_bytes)
                        for g in sched_cfg.kv_cache_groups]
    rec["bytes_per_block"] = stages[0]["bytes_per_block"]
    rec["num_blocks"] = sched_cfg.num_blocks
    rec["null_blocks"] = 1
    rec["usable_blocks"] = sched_cfg.num_blocks - 1
    rec["blocks_per_request_per_group"] = per_group_blocks
    rec["blocks_per_request"] = sum(per_group_blocks)
    rec["per_request_bytes"] = P._max_memory_usage_bytes_from_groups(
        builder, vc, P._project_kv_cache_groups_to_worker(global_groups, worker_specs[0]))
    rec["max_concurrency"] = conc
    rec["kv_cache_size_tokens"] = tokens
    rec["engine_log_line"] = (f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
                              f"{ctx:,} tokens per request: {conc:.2f}x")
    rec["planner_log"] = _take_log()
    return rec, vc, global_groups, sched_cfg


# ---------------------------------------------------------------------------------------------
# KV cache manager simulations (vLLM's KVCacheManager, driven with the scheduler's call sequence)
_HASH = None


def _hasher(block):
    global _HASH
    from vllm.utils.hashing import sha256

    if _HASH is None:
        KU.init_none_hash(sha256)
        _HASH = sha256
    return KU.get_request_block_hasher(block, sha256)


_rid = [0]


def _request(T, block):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    _rid[0] += 1
    base = _rid[0] * 1_000_003
    toks = [(base + i) % 200_000 for i in range(T)]
    return Request(request_id=f"r{_rid[0]}", prompt_token_ids=toks,
                   sampling_params=SamplingParams(max_tokens=1), pooling_params=None,
                   block_hasher=_hasher(block))


def _manager(vc, sched_cfg_template, num_blocks):
    """A fresh KVCacheManager on the case's groups with a pool big enough for the simulation (the
    figures simulated do not depend on the pool size)."""
    import copy

    cfg = copy.deepcopy(sched_cfg_template)
    cfg.num_blocks = num_blocks
    sbs, hbs = KU.resolve_kv_cache_block_sizes(cfg, vc)
    return KVCacheManager(cfg, max_model_len=vc.model_config.max_model_len, scheduler_block_size=sbs,
                          hash_block_size=hbs, max_in_flight_tokens=vc.max_in_flight_tokens,
                          enable_caching=True)


def _held(mgr, rid):
    return [sum(1 for b in m.req_to_blocks.get(rid, ()) if not b.is_null)
            for m in mgr.coordinator.single_type_managers]


def admission(vc, sched_cfg, T):
    """Blocks the admission gate (allocate_slots full_sequence_must_fit -> coordinator.get_num_blocks_to_allocate
    with apply_admission_cap=True) asks for a fresh T-token request with no prefix hit, per group;
    and the same without the cap."""
    mgr = _manager(vc, sched_cfg, 8)
    n = min(T, vc.model_config.max_model_len)
    per, per_nocap = [], []
    for m in mgr.coordinator.single_type_managers:
        per.append(m.get_num_blocks_to_allocate("adm", n, [], 0, 0, n, apply_admission_cap=True,
                                                prefill_end=n))
        per_nocap.append(m.get_num_blocks_to_allocate("adm", n, [], 0, 0, n, apply_admission_cap=False,
                                                      prefill_end=n))
    return dict(T=T, per_group=per, total=sum(per), per_group_uncapped=per_nocap,
                total_uncapped=sum(per_nocap))


def simulate_prefill(vc, sched_cfg, T):
    """P side: a T-token prompt prefilled in chunks of max_num_batched_tokens, async scheduling keeping
    max_concurrent_batches-1 earlier chunks in flight (num_computed_tokens advanced at schedule time,
    num_in_flight_tokens settled when the step's output returns, as Scheduler._update_after_schedule /
    update_from_output do). Returns peak non-null blocks held per group, and the block table the
    NixlConnector gets at request_finished_all_groups (Scheduler._connector_finished: remove_skipped_blocks
    on the processed-token basis, then get_block_ids_for_computed_tokens)."""
    B = vc.cache_config.block_size
    N = vc.scheduler_config.max_num_batched_tokens
    ng = len(sched_cfg.kv_cache_groups)
    mgr = _manager(vc, sched_cfg, ng * cdiv(T, B) + 64)
    req = _request(T, B)
    rid = req.request_id
    cb, nhit, _boundary = mgr.get_computed_blocks(req)
    assert nhit == 0
    pending: list[int] = []
    peak = [0] * ng
    first = True
    steps = 0
    lag = vc.max_concurrent_batches - 1
    while req.num_computed_tokens < T:
        n = min(N, T - req.num_computed_tokens)
        got = mgr.allocate_slots(req, n, num_new_computed_tokens=0,
                                 new_computed_blocks=cb if first else None,
                                 full_sequence_must_fit=first, has_scheduled_reqs=False)
        assert got is not None, "allocation failed in simulation"
        first = False
        steps += 1
        req.num_computed_tokens += n
        req.num_in_flight_tokens += n
        pending.append(n)
        peak = [max(a, b) for a, b in zip(peak, _held(mgr, rid))]
        while len(pending) > lag:
            req.num_in_flight_tokens -= pending.pop(0)
    while pending:
        req.num_in_flight_tokens -= pending.pop(0)
    # request finished (max_tokens=1): Scheduler._connector_finished
    mgr.remove_skipped_blocks(rid, max(0, req.num_computed_tokens - req.num_in_flight_tokens),
                              num_prompt_tokens=req.num_prompt_tokens)
    ids = mgr.get_block_ids_for_computed_tokens(rid, req.num_computed_tokens)
    null_id = mgr.block_pool.null_block.block_id
    return dict(T=T, steps=steps, peak_held_per_group=peak, peak_held_total=sum(peak),
                p_block_table_len_per_group=[len(g) for g in ids],
                p_non_null_per_group=[sum(1 for b in g if b != null_id) for g in ids],
                p_ids=ids, null_id=null_id)


def simulate_decoder_load(vc, sched_cfg, T):
    """D side of NixlConnector (pull): get_num_new_matched_tokens gives T external tokens (prefill backoff 0:
    no mamba, no bounded replay, no MTP), the scheduler calls allocate_slots(num_new_tokens=0,
    num_external_computed_tokens=T, delay_cache_blocks=True, full_sequence_must_fit=True) and hands
    get_blocks() to update_state_after_alloc, which keeps get_unhashed_block_ids_all_groups() (null head
    trimmed, nulls dropped) then get_exchange_clipped_blocks (chunked groups: blocks_per_sw = 0, no clip).
    Then, as _update_waiting_for_remote_kv does, num_computed_tokens = T - 1 and the last prompt token is
    recomputed: we report whether its slot lands in a null block in any group."""
    B = vc.cache_config.block_size
    ng = len(sched_cfg.kv_cache_groups)
    mgr = _manager(vc, sched_cfg, ng * cdiv(T, B) + 64)
    req = _request(T, B)
    rid = req.request_id
    cb, nhit, _boundary = mgr.get_computed_blocks(req)
    got = mgr.allocate_slots(req, 0, num_new_computed_tokens=0, new_computed_blocks=cb,
                             num_external_computed_tokens=T, delay_cache_blocks=True,
                             full_sequence_must_fit=True, has_scheduled_reqs=False)
    assert got is not None
    blocks = mgr.get_blocks(rid)
    local = blocks.get_unhashed_block_ids_all_groups()
    table_len = [len(g) for g in blocks.blocks]
    null_heads = [KU.null_head_len(g) for g in blocks.blocks]
    # transfer done: cache the loaded blocks, recompute the last token
    req.num_computed_tokens = T
    mgr.cache_blocks(req, T)
    req.num_computed_tokens = T - 1
    got2 = mgr.allocate_slots(req, 1, has_scheduled_reqs=False)
    assert got2 is not None
    blocks2 = mgr.get_blocks(rid)
    pos = T - 1
    last_tok_block_null = []
    attended_null = []
    for gi, (g, grp) in enumerate(zip(blocks2.blocks, sched_cfg.kv_cache_groups)):
        bs = grp.kv_cache_spec.block_size
        last_tok_block_null.append(bool(g[pos // bs].is_null) if pos // bs < len(g) else None)
        chunk = getattr(grp.kv_cache_spec, "attention_chunk_size", None)
        start = (pos // chunk) * chunk if chunk and isinstance(grp.kv_cache_spec, ChunkedLocalAttentionSpec) else 0
        # blocks the recomputed token attends to (its chunk, or the whole prefix for full attention)
        attended_null.append(sum(1 for b in g[start // bs: pos // bs + 1] if b.is_null))
    return dict(T=T, d_block_table_len_per_group=table_len, d_null_head_per_group=null_heads,
                d_local_blocks_per_group=[len(g) for g in local],
                recompute_token_block_is_null=last_tok_block_null,
                recompute_attended_null_blocks=attended_null)


def nixl_record(vc, sched_cfg, groups_desc, T):
    ctx = vc.model_config.max_model_len
    if T > ctx:
        return dict(T=T, skipped=f"prompt {T} > max_model_len {ctx} (vLLM rejects the request)")
    p = simulate_prefill(vc, sched_cfg, T)
    d = simulate_decoder_load(vc, sched_cfg, T)
    # NixlConnectorWorker._apply_prefix_caching (no mamba): prefill list end-trimmed to the decode length.
    moved = []
    for gi in range(len(sched_cfg.kv_cache_groups)):
        n_d = d["d_local_blocks_per_group"][gi]
        n_p = p["p_block_table_len_per_group"][gi]
        assert n_d <= n_p
        tail = p["p_ids"][gi][-n_d:] if n_d else []
        moved.append(dict(blocks=n_d, null_in_prefill_tail=sum(1 for b in tail if b == p["null_id"])))
    bytes_moved = [m["blocks"] * g["group_bytes_per_block"] for m, g in zip(moved, groups_desc)]
    rec = dict(T=T, blocks_moved_per_group=[m["blocks"] for m in moved],
               blocks_moved_total=sum(m["blocks"] for m in moved),
               bytes_moved_per_group=bytes_moved, bytes_moved_total=sum(bytes_moved),
               prefill_tail_null_ids=[m["null_in_prefill_tail"] for m in moved],
               p_block_table_len_per_group=p["p_block_table_len_per_group"],
               p_non_null_per_group=p["p_non_null_per_group"],
               prefill_peak_held_per_group=p["peak_held_per_group"],
               prefill_peak_held_total=p["peak_held_total"], prefill_steps=p["steps"])
    rec.update({k: v for k, v in d.items() if k != "T"})
    return rec


# ---------------------------------------------------------------------------------------------
def build_grid(quick: bool):
    cases = []
    ctxs = [4096, 8192, 10000, 32768, 131072, 1048576]
    pools = [60 * GiB, 10 * GiB, 123456789]
    if quick:
        ctxs = [8192, 131072]
        pools = [60 * GiB, 123456789]
    for tp in (1, 2, 4, 8):
        for ctx in ctxs:
            for block in (16, 32, 64):
                for mnbt in (2048, 8192, 16384):
                    for a in (True, False):
                        for prec in ("bf16", "fp8"):
                            for pool in pools:
                                cases.append(dict(model="llama-4-scout", tp=tp, pp=1, ctx=ctx, block=block,
                                                  mnbt=mnbt, async_sched=a, prec=prec, pool=pool, hma=True))
    for tp in (1, 2, 4, 8):
        for ctx in ctxs:
            for mnbt in (2048, 8192):
                for a in (True, False):
                    for prec in ("bf16", "fp8"):
                        for pool in pools:
                            cases.append(dict(model="llama-4-scout", tp=tp, pp=2, ctx=ctx, block=16, mnbt=mnbt,
                                              async_sched=a, prec=prec, pool=pool, hma=True))
    # HMA off (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0, eagle, or a non-HMA connector)
    for tp in (1, 8):
        for ctx in ctxs:
            for pool in pools:
                cases.append(dict(model="llama-4-scout", tp=tp, pp=1, ctx=ctx, block=16, mnbt=8192,
                                  async_sched=True, prec="bf16", pool=pool, hma=False))
    for m in ("synth-10l-3f-c4096", "synth-12l-5f-c4096"):
        for tp in (1, 8):
            for pp in (1, 2):
                for ctx in ctxs:
                    for block in (16, 64):
                        for mnbt in (2048, 8192):
                            for a in (True, False):
                                for pool in pools:
                                    cases.append(dict(model=m, tp=tp, pp=pp, ctx=ctx, block=block, mnbt=mnbt,
                                                      async_sched=a, prec="bf16", pool=pool, hma=True))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/vllm-llama4-reference.json")
    ap.add_argument("--quick", action="store_true", help="a small grid")
    ap.add_argument("--no-sim", action="store_true", help="skip KVCacheManager simulations")
    args = ap.parse_args()
    t0 = time.time()
    cases = build_grid(args.quick)
    sim_cache: dict = {}
    records = []
    for ci, c in enumerate(cases):
        rec, vc, ggroups, sched_cfg = plan_case(
            c["model"], tp=c["tp"], pp=c["pp"], ctx=c["ctx"], block=c["block"], mnbt=c["mnbt"],
            async_sched=c["async_sched"], prec=c["prec"], pool=c["pool"], hma=c["hma"])
        rec["case_id"] = ci
        if sched_cfg is not None and not args.no_sim:
            # simulations depend on the groups' structure, block, max_model_len, in-flight: not on tp/dtype/pool
            key = (c["model"], c["pp"], c["block"], c["ctx"], vc.max_in_flight_tokens, c["mnbt"],
                   vc.max_concurrent_batches, c["hma"])
            if key not in sim_cache:
                adm = [admission(vc, sched_cfg, T) for T in sorted(set(NIXL_PROMPTS + [c["ctx"]]))]
                nix = [nixl_record(vc, sched_cfg, rec["global_groups"] if c["pp"] == 1 else
                                   [dict(group_bytes_per_block=g["group_bytes_per_block"])
                                    for g in rec["stages"][0]["groups"]], T) for T in NIXL_PROMPTS]
                sim_cache[key] = (adm, nix)
            adm, nix = sim_cache[key]
            # bytes depend on the per-rank page: recompute from this case's groups
            gb = ([g["group_bytes_per_block"] for g in rec["global_groups"]] if c["pp"] == 1 else
                  [g["group_bytes_per_block"] for g in rec["stages"][0]["groups"]])
            nix2 = []
            for n in nix:
                n = dict(n)
                if "blocks_moved_per_group" in n:
                    n["bytes_moved_per_group"] = [b * x for b, x in zip(n["blocks_moved_per_group"], gb)]
                    n["bytes_moved_total"] = sum(n["bytes_moved_per_group"])
                    if c["pp"] != 1:
                        n["bytes_note"] = "pp stage 0's layers only (each stage moves its own layers)"
                nix2.append(n)
            rec["admission"] = adm
            rec["nixl"] = nix2
        records.append(rec)
        if ci % 200 == 0:
            print(f"[{ci}/{len(cases)}] {time.time() - t0:.0f}s", file=sys.stderr)
    doc = dict(
        generated_by="vref_llama4.py", vllm_version=vllm.__version__, torch_version=torch.__version__,
        vllm_file=vllm.__file__, units="bytes; 1 GiB = 2^30",
        assumptions=[
            "CUDA behaviour: hybrid KV cache manager ON (config/vllm.py VllmConfig.__post_init__; "
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 in envs.py) unless hma=false",
            "model runner V2 (use_v2_model_runner default on CUDA): max_concurrent_batches = pp+1 with async, "
            "pp without (pp=1: 2 / 1)",
            "kv_cache_layout LBNHC (FLASH_ATTN declares no layouts; the default preference's first); "
            "uniform pages make every layout give the same bytes per block",
            "prefix caching on (enable_caching=True in the simulations), no speculative decoding, no DCP",
            "NIXL: pull mode, homogeneous TP and block size on P and D, no D-side prefix hit",
            "pool_bytes_per_gpu is vLLM's available KV memory per worker (--kv-cache-memory-bytes)",
        ],
        nixl_prompts=NIXL_PROMPTS,
        num_cases=len(records),
        elapsed_s=round(time.time() - t0, 1),
        cases=records,
    )
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {args.out}: {len(records)} cases in {time.time() - t0:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
