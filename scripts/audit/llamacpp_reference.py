#!/usr/bin/env python
"""Ground truth for kvcalc's llama.cpp engine: llama.cpp ITSELF (llama-cpp-python 0.3.36, llama.cpp 0c1e57098,
CPU build) over a grid of tiny synthetic GGUF models, recording its own figures.

Not part of the suite (needs a scratch venv with a from-source llama-cpp-python build, never the project's
environment):

    python -m venv /work/scratch/venv-llama
    /work/scratch/venv-llama/bin/pip install gguf==0.19.0 numpy
    CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
        /work/scratch/venv-llama/bin/pip install --no-binary :all: llama-cpp-python==0.3.36
    /work/scratch/venv-llama/bin/python scripts/audit/llamacpp_reference.py [--quick] [--models a,b]

It also needs the llama.cpp sources of the SAME commit (the unpacked sdist, --llama-src) for the headers of a
small C++ probe that is compiled with g++ at start-up and loaded next to libllama.so.

What is ours and what is llama.cpp's:
  * ours: the synthetic models (GGUF metadata chosen here; every tensor llama.cpp asks for is found by loading the
    file and reading llama.cpp's own "tensor 'X' not found" / "has wrong shape; expected [...]" errors, then added
    with zero data), the grid, the parsing, and the probe's read-out code.
  * llama.cpp's: everything recorded as an output: its log lines (llama_log_set), whether llama_init_from_model
    returns a context and its refusal words, and the exact byte counts, read by the probe from llama.cpp's own
    objects after the context exists: llama_get_memory(ctx) walked with dynamic_cast (llama_kv_cache,
    llama_kv_cache_iswa, llama_memory_hybrid, llama_memory_hybrid_iswa, llama_memory_recurrent); for every cache
    its ctxs_bufs (ggml_backend_buffer_get_size of each buffer = the number the "KV buffer size" log line prints
    in MiB), every tensor in it (type, ne, ggml_nbytes, ggml_backend_buft_get_alloc_size, offset), its own
    size_k_bytes()/size_v_bytes()/total_size() (size_r/s/p for recurrent state); llama_get_memory_breakdown(ctx)
    (model / context / compute bytes per buffer type); and the model's hparams as llama.cpp resolved them
    (per-layer n_head_kv, n_embd_k_gqa, n_embd_v_gqa, is_swa, is_recr, has_kv, n_embd_r/s, ...).
    These are exact: they are the sizes llama.cpp passed to its allocator, not values re-derived from logs
    (the logs round to 0.01 MiB).

Weights: real, all-zero, F32 GGUF files (mmap). llama.cpp can also build a context with no tensor data
(llama_model_params.no_alloc = true with load_mode = NONE, the memory-fit dry run): then the "KV buffer size"
lines print 0.00 MiB and only llama_get_memory_breakdown carries the bytes, so the grid runs with real
allocations and the no_alloc path is recorded for comparison on a few cases per model. no_alloc with mmap
aborts (GGML_ASSERT(!ml.no_alloc), llama-model.cpp:1855), and a GGUF cut after its tensor infos is refused
("data is not within the file bounds") even with no_alloc.

Outputs:
  tests/fixtures/engine-ref/llamacpp-0.3.36.json   compact fixture: models (GGUF metadata, llama.cpp's hparams,
                                                   model buffer), one record per case (inputs, outputs, raw
                                                   cache log lines or refusal words), facts_check.
  tests/fixtures/gguf/llamacpp-<model>.gguf        metadata-only GGUFs (header, key-values, tensor infos; the
                                                   data section is all zeros: append zero bytes up to
                                                   models[m].gguf_file_size to get the file llama.cpp loaded).
  <work>/llamacpp-reference-full.json              everything (all per-tensor rows and log lines), not committed.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
DEFAULT_OUT = REPO / "tests/fixtures/engine-ref/llamacpp-0.3.36.json"
DEFAULT_GGUF_DIR = REPO / "tests/fixtures/gguf"
DEFAULT_WORK = Path("/work/scratch/llamacpp-ref")
DEFAULT_SRC = Path("/work/scratch/llamacpp/llama_cpp_python-0.3.36/vendor/llama.cpp")

# ggml type ids (ggml/include/ggml.h)
TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
CACHE_TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]
FA = {"auto": -1, "disabled": 0, "enabled": 1}
N_CTX = [1, 256, 300, 4096, 32768]
OTHER_BATCH = (1024, 256)   # (n_batch, n_ubatch): the "one other value"; C defaults are 2048 / 512

# ---------------------------------------------------------------------------------------------------------------
# the C++ probe (compiled against the vendored headers of the same commit; reads private members, so the
# layout must match the library: same sources, same compiler family)
SHIM_SRC = r"""
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <map>
#include <memory>
#include <unordered_map>
#include <set>
#include <functional>
#include <mutex>
#include <array>
#include <cmath>
#define private public
#define protected public
#include "llama-context.h"
#include "llama-model.h"
#include "llama-kv-cache.h"
#include "llama-kv-cache-iswa.h"
#include "llama-memory-hybrid.h"
#include "llama-memory-hybrid-iswa.h"
#include "llama-memory-recurrent.h"
#include "llama-ext.h"
#undef private
#undef protected
#include "ggml-backend.h"

static std::string q(const char * s) { std::string r = "\""; for (const char * p = s; *p; ++p) { if (*p == '"' || *p == '\\') r += '\\'; r += *p; } return r + "\""; }
static std::string b(bool v) { return v ? "true" : "false"; }
static std::string n(size_t v) { return std::to_string(v); }

static std::string bufs_json(const std::vector<std::pair<ggml_context_ptr, ggml_backend_buffer_ptr>> & cb) {
    std::string o = "[";
    bool first = true;
    for (const auto & [ctx, buf] : cb) {
        if (!first) o += ","; first = false;
        ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(buf.get());
        o += "{\"buffer\":" + q(ggml_backend_buffer_name(buf.get())) + ",\"buft\":" + q(ggml_backend_buft_name(buft));
        o += ",\"size\":" + n(ggml_backend_buffer_get_size(buf.get()));
        o += ",\"alignment\":" + n(ggml_backend_buft_get_alignment(buft));
        o += ",\"tensors\":[";
        bool f2 = true;
        char * base = (char *) ggml_backend_buffer_get_base(buf.get());
        for (ggml_tensor * t = ggml_get_first_tensor(ctx.get()); t; t = ggml_get_next_tensor(ctx.get(), t)) {
            if (t->view_src) continue;
            if (!f2) o += ","; f2 = false;
            char tmp[512];
            long long off = (base && t->data) ? (long long)((char *) t->data - base) : -1;
            snprintf(tmp, sizeof tmp, "[%s,%s,[%lld,%lld,%lld,%lld],%zu,%zu,%lld]", q(t->name).c_str(), q(ggml_type_name(t->type)).c_str(),
                (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], ggml_nbytes(t),
                ggml_backend_buft_get_alloc_size(buft, t), off);
            o += tmp;
        }
        o += "]}";
    }
    return o + "]";
}

static std::string kv_json(llama_kv_cache * kv) {
    std::string o = "{\"kind\":\"kv_cache\"";
    o += ",\"kv_size\":" + n(kv->get_size());
    o += ",\"n_seq_max\":" + n(kv->n_seq_max);
    o += ",\"n_stream\":" + n(kv->n_stream);
    o += ",\"n_pad\":" + n(kv->n_pad);
    o += ",\"n_swa\":" + n(kv->n_swa);
    o += ",\"swa_type\":" + n((int) kv->swa_type);
    o += ",\"v_trans\":" + b(kv->v_trans);
    o += ",\"attn_rot_k\":" + b(kv->attn_rot_k);
    o += ",\"attn_rot_v\":" + b(kv->attn_rot_v);
    o += ",\"n_embd_head_k_all\":" + std::to_string(kv->n_embd_head_k_all);
    o += ",\"n_embd_head_v_all\":" + std::to_string(kv->n_embd_head_v_all);
    // (kv->type_k()/type_v() read layers[0] and crash on an empty cache or MLA's missing V)
    o += ",\"type_k\":" + (kv->layers.empty() || !kv->layers[0].k ? std::string("null") : q(ggml_type_name(kv->layers[0].k->type)));
    o += ",\"type_v\":" + (kv->layers.empty() || !kv->layers[0].v ? std::string("null") : q(ggml_type_name(kv->layers[0].v->type)));
    o += ",\"size_k_bytes\":" + n(kv->size_k_bytes());
    o += ",\"size_v_bytes\":" + n(kv->size_v_bytes());
    o += ",\"total_size\":" + n(kv->total_size());
    o += ",\"layers\":[";
    for (size_t i = 0; i < kv->layers.size(); ++i) { if (i) o += ","; o += n(kv->layers[i].il); }
    o += "],\"map_layer_ids\":{";
    { std::map<int, int> m(kv->map_layer_ids.begin(), kv->map_layer_ids.end()); bool f = true;
      for (auto & [a, c] : m) { if (!f) o += ","; f = false; o += "\"" + std::to_string(a) + "\":" + std::to_string(c); } }
    o += "},\"buffers\":" + bufs_json(kv->ctxs_bufs) + "}";
    return o;
}

static std::string rs_json(llama_memory_recurrent * rs) {
    std::string o = "{\"kind\":\"recurrent\"";
    o += ",\"size\":" + n(rs->size);
    o += ",\"n_seq_max\":" + n(rs->n_seq_max);
    o += ",\"size_r_bytes\":" + n(rs->size_r_bytes());
    o += ",\"size_s_bytes\":" + n(rs->size_s_bytes());
    o += ",\"size_p_bytes\":" + n(rs->size_p_bytes());
    o += ",\"total_size\":" + n(rs->total_size());
    o += ",\"buffers\":" + bufs_json(rs->ctxs_bufs) + "}";
    return o;
}

static std::string iswa_json(llama_kv_cache_iswa * m) {
    return "{\"kind\":\"kv_cache_iswa\",\"base\":" + kv_json(m->get_base()) + ",\"swa\":" + kv_json(m->get_swa()) + "}";
}

static std::string mem_json(llama_memory_i * mem) {
    if (!mem) return "null";
    if (auto * m = dynamic_cast<llama_kv_cache_iswa *>(mem)) return iswa_json(m);
    if (auto * m = dynamic_cast<llama_kv_cache *>(mem)) return kv_json(m);
    if (auto * m = dynamic_cast<llama_memory_recurrent *>(mem)) return rs_json(m);
    if (auto * m = dynamic_cast<llama_memory_hybrid_iswa *>(mem)) return "{\"kind\":\"hybrid_iswa\",\"attn\":" + iswa_json(m->get_mem_attn()) + ",\"recr\":" + rs_json(m->get_mem_recr()) + "}";
    if (auto * m = dynamic_cast<llama_memory_hybrid *>(mem)) return "{\"kind\":\"hybrid\",\"attn\":" + kv_json(m->get_mem_attn()) + ",\"recr\":" + rs_json(m->get_mem_recr()) + "}";
    return "{\"kind\":\"unknown\"}";
}

static size_t put(const std::string & o, char * out, size_t cap) {
    if (o.size() + 1 <= cap) memcpy(out, o.c_str(), o.size() + 1);
    return o.size() + 1;
}

extern "C" size_t kvref_probe(const llama_context * ctx, char * out, size_t cap) {
    std::string o = "{\"memory\":" + mem_json(llama_get_memory(ctx));
    o += ",\"breakdown\":[";
    bool f = true;
    for (const auto & [buft, mb] : llama_get_memory_breakdown(ctx)) {
        if (!f) o += ","; f = false;
        o += "{\"buft\":" + q(ggml_backend_buft_name(buft)) + ",\"model\":" + n(mb.model) + ",\"context\":" + n(mb.context) + ",\"compute\":" + n(mb.compute) + "}";
    }
    const auto & c = ctx->cparams;
    o += "],\"cparams\":{\"n_ctx\":" + n(c.n_ctx) + ",\"n_ctx_seq\":" + n(c.n_ctx_seq) + ",\"n_batch\":" + n(c.n_batch)
      + ",\"n_ubatch\":" + n(c.n_ubatch) + ",\"n_seq_max\":" + n(c.n_seq_max) + ",\"n_rs_seq\":" + n(c.n_rs_seq)
      + ",\"flash_attn\":" + b(c.flash_attn) + ",\"auto_fa\":" + b(c.auto_fa) + ",\"kv_unified\":" + b(c.kv_unified) + "}}";
    return put(o, out, cap);
}

extern "C" size_t kvref_hparams(const llama_model * model, char * out, size_t cap) {
    const llama_hparams & h = model->hparams;
    const uint32_t L = h.n_layer_all;
    auto arr = [&](const char * name, auto fn) {
        std::string o = std::string(",\"") + name + "\":[";
        for (uint32_t il = 0; il < L; ++il) { if (il) o += ","; o += std::to_string(fn(il)); }
        return o + "]";
    };
    std::string o = "{\"n_layer_all\":" + n(L) + ",\"n_layer_nextn\":" + n(h.n_layer_nextn) + ",\"n_layer\":" + n(h.n_layer())
      + ",\"n_ctx_train\":" + n(h.n_ctx_train) + ",\"n_embd\":" + n(h.n_embd) + ",\"n_swa\":" + n(h.n_swa)
      + ",\"swa_type\":" + n((int) h.swa_type) + ",\"is_swa_any\":" + b(h.is_swa_any()) + ",\"is_mla\":" + b(h.is_mla())
      + ",\"n_embd_head_k_mla\":" + n(h.is_mla() ? h.n_embd_head_k_mla() : 0) + ",\"n_embd_head_v_mla\":" + n(h.is_mla() ? h.n_embd_head_v_mla() : 0)
      + ",\"n_lora_kv\":" + n(h.n_lora_kv) + ",\"n_layer_kv_from_start\":" + std::to_string(h.n_layer_kv_from_start)
      + ",\"n_embd_r\":" + n(h.n_embd_r()) + ",\"n_embd_s\":" + n(h.n_embd_s())
      + ",\"n_embd_k_gqa_max\":" + n(h.n_embd_k_gqa_max()) + ",\"n_embd_v_gqa_max\":" + n(h.n_embd_v_gqa_max())
      + ",\"is_n_embd_k_gqa_variable\":" + b(h.is_n_embd_k_gqa_variable()) + ",\"is_n_embd_v_gqa_variable\":" + b(h.is_n_embd_v_gqa_variable())
      + ",\"ssm_d_conv\":" + n(h.ssm_d_conv) + ",\"ssm_d_inner\":" + n(h.ssm_d_inner) + ",\"ssm_d_state\":" + n(h.ssm_d_state)
      + ",\"ssm_dt_rank\":" + n(h.ssm_dt_rank) + ",\"ssm_n_group\":" + n(h.ssm_n_group) + ",\"n_shortconv_l_cache\":" + n(h.n_shortconv_l_cache)
      + ",\"causal_attn\":" + b(h.causal_attn) + ",\"n_expert\":" + n(h.n_expert);
    o += arr("n_head", [&](uint32_t il) { return h.n_head(il); });
    o += arr("n_head_kv", [&](uint32_t il) { return h.n_head_kv(il); });
    o += arr("n_ff", [&](uint32_t il) { return h.n_ff(il); });
    o += arr("n_embd_head_k", [&](uint32_t il) { return h.n_embd_head_k(il); });
    o += arr("n_embd_head_v", [&](uint32_t il) { return h.n_embd_head_v(il); });
    o += arr("n_embd_k_gqa", [&](uint32_t il) { return h.n_embd_k_gqa(il); });
    o += arr("n_embd_v_gqa", [&](uint32_t il) { return h.n_embd_v_gqa(il); });
    o += arr("is_swa", [&](uint32_t il) { return (int) h.is_swa(il); });
    o += arr("is_recr", [&](uint32_t il) { return (int) h.is_recr(il); });
    o += arr("has_kv", [&](uint32_t il) { return (int) h.has_kv(il); });
    o += "}";
    return put(o, out, cap);
}
"""

# ---------------------------------------------------------------------------------------------------------------
# the synthetic models. kv: GGUF keys without the "{arch}." prefix (a leading "!" means a full key).
# Python int -> UINT32 scalar, float -> FLOAT32, bool -> BOOL, str -> STRING, list -> ARRAY (gguf-py: ints INT32,
# bools BOOL), as the converters write them.
COMMON = {"context_length": 4096, "attention.layer_norm_rms_epsilon": 1e-5, "vocab_size": 256}


def M(arch, blocks, note, seed=(), **kv):
    """seed: tensors to put in the file before discovery: loaders that switch on a tensor's presence (the
    trunk/MTP probes of NextN models), and optional tensors that the graph uses unconditionally (an absent
    ssm_conv1d.bias or attn_qkv makes graph reservation dereference NULL); discovery fixes their shapes."""
    d = dict(COMMON)
    d["block_count"] = blocks
    d.update({k.replace("__", "."): v for k, v in kv.items()})
    return dict(arch=arch, kv=d, note=note, seed=list(seed))


def per_layer(tmpl, layers):
    return [tmpl.format(i=i) for i in layers]


def swa_flags(pattern_len, n):  # converter-style per-layer bool array: (il+1) % pattern != 0 -> SWA
    return [bool((i + 1) % pattern_len != 0) for i in range(n)]


MODELS = {
    "llama-gqa": M("llama", 4, "GQA 4 q / 2 kv heads, head 64 (attn_rot on for quantized caches)",
                   embedding_length=256, feed_forward_length=512, attention__head_count=4, attention__head_count_kv=2),
    "qwen2-mqa": M("qwen2", 3, "MQA: 4 q / 1 kv head, head 32",
                   embedding_length=128, feed_forward_length=256, attention__head_count=4, attention__head_count_kv=1),
    "qwen3-k64": M("qwen3", 4, "explicit key/value_length 64 with n_embd/n_head = 32",
                   embedding_length=128, feed_forward_length=256, attention__head_count=4, attention__head_count_kv=2,
                   attention__key_length=64, attention__value_length=64),
    "gemma2-swa": M("gemma2", 4, "SWA 128, default pattern 2 (even layers SWA)",
                    embedding_length=128, feed_forward_length=256, attention__head_count=4, attention__head_count_kv=2,
                    attention__key_length=64, attention__value_length=64, attention__sliding_window=128),
    "gemma3-swa": M("gemma3", 7, "SWA 64, default pattern 6 (layers 0-4, 6 SWA; 5 full)",
                    embedding_length=128, feed_forward_length=256, attention__head_count=4, attention__head_count_kv=1,
                    attention__key_length=64, attention__value_length=64, attention__sliding_window=64),
    "gemma3-pattern": M("gemma3", 6, "SWA 512 with an explicit per-layer bool pattern [T,F,T,T,F,T]",
                        embedding_length=128, feed_forward_length=256, attention__head_count=4,
                        attention__head_count_kv=2, attention__key_length=64, attention__value_length=64,
                        attention__sliding_window=512,
                        attention__sliding_window_pattern=[True, False, True, True, False, True]),
    "gemma3-noswa": M("gemma3", 4, "no sliding_window key (converter omits it for pattern 1): plain cache",
                      embedding_length=128, feed_forward_length=256, attention__head_count=4,
                      attention__head_count_kv=2, attention__key_length=64, attention__value_length=64),
    "gemma3n": M("gemma3n", 22, "22 layers: KV only for layers < 20 (hard-coded), 20/21 reuse 18 (SWA) / 19 (full); "
                 "SWA 64, converter-style bool pattern (every 5th full)",
                 embedding_length=64, feed_forward_length=128, attention__head_count=2, attention__head_count_kv=1,
                 attention__key_length=64, attention__value_length=64, attention__sliding_window=64,
                 attention__sliding_window_pattern=swa_flags(5, 22)),
    "gpt-oss": M("gpt-oss", 4, "MoE, SWA 128 (pattern 2), head 64, attention sinks",
                 embedding_length=128, feed_forward_length=128, attention__head_count=4, attention__head_count_kv=2,
                 attention__key_length=64, attention__value_length=64, attention__sliding_window=128,
                 expert_count=4, expert_used_count=2, expert_feed_forward_length=128),
    "deepseek2-mla": M("deepseek2", 3, "MLA: kv_lora_rank 64 + rope 32 -> K row 96, no V; 1 dense lead layer, MoE",
                       embedding_length=128, feed_forward_length=256, attention__head_count=4,
                       attention__head_count_kv=1, attention__key_length=96, attention__value_length=64,
                       attention__key_length_mla=64, attention__value_length_mla=32, attention__q_lora_rank=64,
                       attention__kv_lora_rank=64, rope__dimension_count=32, leading_dense_block_count=1,
                       expert_count=4, expert_used_count=2, expert_shared_count=1, expert_feed_forward_length=64),
    "deepseek2-mla-nextn": M("deepseek2", 4, "as deepseek2-mla plus 1 NextN/MTP layer (nextn_predict_layers 1)",
                             embedding_length=128, feed_forward_length=256, attention__head_count=4,
                             attention__head_count_kv=1, attention__key_length=96, attention__value_length=64,
                             attention__key_length_mla=64, attention__value_length_mla=32,
                             attention__q_lora_rank=64, attention__kv_lora_rank=64, rope__dimension_count=32,
                             leading_dense_block_count=1, expert_count=4, expert_used_count=2,
                             expert_shared_count=1, expert_feed_forward_length=64, nextn_predict_layers=1,
                             seed=["blk.0.attn_norm.weight", "blk.3.nextn.eh_proj.weight"]),
    "deepseek2-nomla": M("deepseek2", 3, "old-style deepseek2 GGUF without *_mla keys: plain MHA K/V (K 4x48, V 4x32)",
                         embedding_length=128, feed_forward_length=256, attention__head_count=4,
                         attention__head_count_kv=4, attention__key_length=48, attention__value_length=32,
                         attention__q_lora_rank=64, attention__kv_lora_rank=64, rope__dimension_count=16,
                         leading_dense_block_count=1, expert_count=4, expert_used_count=2, expert_shared_count=1,
                         expert_feed_forward_length=64),
    "phi3-swa": M("phi3", 3, "sliding_window 2047 present: llama.cpp disables Phi SWA -> full cache",
                  embedding_length=128, feed_forward_length=256, attention__head_count=4, attention__head_count_kv=4,
                  attention__sliding_window=2047, seed=per_layer("blk.{i}.attn_qkv.weight", range(3))),
    "command-r-h48": M("command-r", 3, "head 48 (not a multiple of 32): FA block-divisibility refusals",
                       embedding_length=192, feed_forward_length=256, attention__head_count=4,
                       attention__head_count_kv=1, **{"!command-r.attention.layer_norm_epsilon": 1e-5}),
    "mamba": M("mamba", 2, "Mamba-1: d_conv 4, d_inner 128, d_state 16",
               embedding_length=64, feed_forward_length=0, attention__head_count=0, ssm__conv_kernel=4,
               ssm__inner_size=128, ssm__state_size=16, ssm__time_step_rank=4),
    "mamba2": M("mamba2", 2, "Mamba-2: d_conv 4, d_inner 128, d_state 16, 1 group, 4 heads",
                embedding_length=64, feed_forward_length=0, attention__head_count=0, ssm__conv_kernel=4,
                ssm__inner_size=128, ssm__state_size=16, ssm__time_step_rank=4, ssm__group_count=1),
    "granitehybrid": M("granitehybrid", 4, "per-layer head_count_kv [0,2,0,1]: 2 Mamba-2 + 2 attention layers of "
                       "different KV widths (V padded when FA is disabled)",
                       embedding_length=128, feed_forward_length=256, attention__head_count=4,
                       attention__head_count_kv=[0, 2, 0, 1], ssm__conv_kernel=4, ssm__inner_size=256,
                       ssm__state_size=16, ssm__time_step_rank=8, ssm__group_count=1,
                       seed=per_layer("blk.{i}.ssm_conv1d.bias", (0, 2))),
    "lfm2": M("lfm2", 4, "per-layer head_count_kv [0,2,0,2]: 2 shortconv (l_cache 3) + 2 attention layers",
              embedding_length=128, feed_forward_length=256, attention__head_count=4,
              attention__head_count_kv=[0, 2, 0, 2], shortconv__l_cache=3),
    "lfm2-swa": M("lfm2", 4, "lfm2 with sliding_window 128: every attention layer SWA -> hybrid_iswa",
                  embedding_length=128, feed_forward_length=256, attention__head_count=4,
                  attention__head_count_kv=[0, 2, 0, 2], shortconv__l_cache=3, attention__sliding_window=128),
    "qwen3next": M("qwen3next", 4, "gated delta net: layers 0-2 recurrent, 3 attention (interval 4); MoE",
                   embedding_length=128, feed_forward_length=256, attention__head_count=4,
                   attention__head_count_kv=2, attention__key_length=64, attention__value_length=64,
                   ssm__conv_kernel=4, ssm__inner_size=128, ssm__state_size=32, ssm__time_step_rank=4,
                   ssm__group_count=2, expert_count=4, expert_used_count=2, expert_feed_forward_length=64,
                   expert_shared_feed_forward_length=64,
                   seed=per_layer("blk.{i}.attn_qkv.weight", range(3)) + per_layer("blk.{i}.attn_gate.weight", range(3))),
    "qwen3next-nextn": M("qwen3next", 5, "as qwen3next plus 1 NextN/MTP layer (layer 4)",
                         embedding_length=128, feed_forward_length=256, attention__head_count=4,
                         attention__head_count_kv=2, attention__key_length=64, attention__value_length=64,
                         ssm__conv_kernel=4, ssm__inner_size=128, ssm__state_size=32, ssm__time_step_rank=4,
                         ssm__group_count=2, expert_count=4, expert_used_count=2, expert_feed_forward_length=64,
                         expert_shared_feed_forward_length=64, nextn_predict_layers=1,
                         seed=["blk.0.attn_norm.weight"] + per_layer("blk.{i}.attn_qkv.weight", range(3))
                         + per_layer("blk.{i}.attn_gate.weight", range(3))),
    "jamba": M("jamba", 4, "per-layer head_count_kv [0,0,2,0]: 3 Mamba + 1 attention layer",
               embedding_length=128, feed_forward_length=256, attention__head_count=4,
               attention__head_count_kv=[0, 0, 2, 0], ssm__conv_kernel=4, ssm__inner_size=256, ssm__state_size=16,
               ssm__time_step_rank=8),
    "falcon-h1": M("falcon-h1", 2, "every layer has attention KV and Mamba-2 state",
                   embedding_length=128, feed_forward_length=256, attention__head_count=4,
                   attention__head_count_kv=2, attention__key_length=32, attention__value_length=32,
                   ssm__conv_kernel=4, ssm__inner_size=128, ssm__state_size=16, ssm__time_step_rank=4,
                   ssm__group_count=1, seed=per_layer("blk.{i}.ssm_conv1d.bias", (0, 1))),
    "nemotron_h": M("nemotron_h", 6, "per-layer head_count_kv/feed_forward_length: M, MLP, attn, M, MLP, M",
                    embedding_length=128, feed_forward_length=[0, 256, 0, 0, 256, 0], attention__head_count=4,
                    attention__head_count_kv=[0, 0, 2, 0, 0, 0], attention__key_length=32,
                    attention__value_length=32, ssm__conv_kernel=4, ssm__inner_size=128, ssm__state_size=16,
                    ssm__time_step_rank=4, ssm__group_count=1, attention__layer_norm_epsilon=1e-5,
                    seed=per_layer("blk.{i}.ssm_conv1d.bias", (0, 3, 5))),
    "nemotron_h-mtp-ff0": M("nemotron_h", 7, "nemotron_h (MoE MLP layers) + 1 MTP block with feed_forward_length 0 "
                            "(head_count_kv 2)", embedding_length=128,
                            feed_forward_length=[0, 256, 0, 0, 256, 0, 0], attention__head_count=4,
                            attention__head_count_kv=[0, 0, 2, 0, 0, 0, 2], attention__key_length=32,
                            attention__value_length=32, ssm__conv_kernel=4, ssm__inner_size=128, ssm__state_size=16,
                            ssm__time_step_rank=4, ssm__group_count=1, attention__layer_norm_epsilon=1e-5,
                            expert_count=4, expert_used_count=2, expert_feed_forward_length=64,
                            expert_shared_feed_forward_length=64, nextn_predict_layers=1,
                            seed=["blk.0.attn_norm.weight"] + per_layer("blk.{i}.ssm_conv1d.bias", (0, 3, 5))),
    "nemotron_h-mtp-ff256": M("nemotron_h", 7, "as nemotron_h-mtp-ff0 but the MTP block's feed_forward_length is 256",
                              embedding_length=128, feed_forward_length=[0, 256, 0, 0, 256, 0, 256],
                              attention__head_count=4, attention__head_count_kv=[0, 0, 2, 0, 0, 0, 2],
                              attention__key_length=32, attention__value_length=32, ssm__conv_kernel=4,
                              ssm__inner_size=128, ssm__state_size=16, ssm__time_step_rank=4, ssm__group_count=1,
                              attention__layer_norm_epsilon=1e-5, expert_count=4, expert_used_count=2,
                              expert_feed_forward_length=64, expert_shared_feed_forward_length=64,
                              nextn_predict_layers=1,
                              seed=["blk.0.attn_norm.weight"] + per_layer("blk.{i}.ssm_conv1d.bias", (0, 3, 5))),
}

# archs whose llama.cpp memory is recurrent or hybrid (for the n_rs_seq cases)
RS_ARCHS = {"mamba", "mamba2", "granitehybrid", "lfm2", "qwen3next", "jamba", "falcon-h1", "nemotron_h"}
# models that get the full 9x9 cache-type product under every flash-attention setting
FULL_TYPE_MODELS = {"llama-gqa", "gemma3-swa", "deepseek2-mla", "command-r-h48", "granitehybrid"}
STRUCT_TYPE_PAIRS = [("q8_0", "q8_0"), ("bf16", "f32"), ("iq4_nl", "q5_1")]


# ---------------------------------------------------------------------------------------------------------------
# GGUF writing
def gguf_write(path: Path, arch: str, kv: dict, tensors: dict):
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), arch)
    for k, v in kv.items():
        key = k[1:] if k.startswith("!") else f"{arch}.{k}"
        if isinstance(v, bool):
            w.add_bool(key, v)
        elif isinstance(v, int):
            w.add_uint32(key, v)
        elif isinstance(v, float):
            w.add_float32(key, v)
        elif isinstance(v, str):
            w.add_string(key, v)
        elif isinstance(v, list):
            w.add_array(key, v)
        else:
            raise TypeError(k)
    w.add_string("tokenizer.ggml.model", "none")
    for name, ne in tensors.items():
        w.add_tensor(name, np.zeros(list(reversed(ne)), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_describe(path: Path) -> dict:
    """Metadata as the GGUF states it (gguf-py reader) + the data offset."""
    import gguf

    r = gguf.GGUFReader(str(path))
    meta = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        t = f.types[0] if f.types else None
        if t == gguf.GGUFValueType.ARRAY:
            et = f.types[-1]
            val = [f.parts[i].tolist()[0] if et != gguf.GGUFValueType.STRING else bytes(f.parts[i]).decode()
                   for i in f.data]
            meta[f.name] = {"type": "array", "elem": et.name.lower(), "value": val}
        elif t == gguf.GGUFValueType.STRING:
            meta[f.name] = {"type": "string", "value": bytes(f.parts[f.data[0]]).decode()}
        else:
            v = f.parts[f.data[0]].tolist()[0]
            if t == gguf.GGUFValueType.FLOAT32:
                v = float(f"{v:.7g}")
            meta[f.name] = {"type": t.name.lower(), "value": v}
    tensors = [[t.name, t.tensor_type.name, [int(x) for x in t.shape], int(t.data_offset - r.data_offset)]
               for t in r.tensors]
    return dict(metadata=meta, tensors=tensors, data_offset=int(r.data_offset), file_size=path.stat().st_size)


GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_TYPE_NAMES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32", 7: "bool",
                   8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}


def read_gguf_header(path: Path) -> dict:
    """A header-only GGUF reader (no gguf-py, no llama.cpp): magic, version, key-values, tensor infos, data offset.
    It reads the metadata-only fixtures, which gguf-py's GGUFReader cannot (it maps the tensor data)."""
    import struct

    buf = Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        v = buf[pos:pos + n].decode()
        pos += n
        return v

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return {"elem": GGUF_TYPE_NAMES[et], "value": [value(et) for _ in range(n)]}
        return take(GGUF_SCALARS[t])

    assert buf[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        t = take("<I")
        v = value(t)
        if t == 9:
            meta[k] = {"type": "array", **v}
        else:
            meta[k] = {"type": GGUF_TYPE_NAMES[t], "value": float(f"{v:.7g}") if t == 6 else v}
    tensors = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        ttype = take("<I")
        tensors.append([name, ttype, ne, take("<Q")])
    align = meta.get("general.alignment", {}).get("value", 32)
    return dict(version=version, metadata=meta, tensors=tensors, data_offset=(pos + align - 1) // align * align,
                header_end=pos)


# ---------------------------------------------------------------------------------------------------------------
# worker side (runs inside the scratch venv; one process per model so an abort loses one case only)
class Llama:
    def __init__(self, shim_path: str):
        import llama_cpp as L

        self.L = L
        self.logs: list[tuple[int, str]] = []

        @L.llama_log_callback
        def _cb(level, text, ud):
            self.logs.append((int(level), text.decode(errors="replace")))

        self._cb = _cb
        L.llama_log_set(_cb, None)
        L.llama_backend_init()
        self.shim = ctypes.CDLL(shim_path)
        for fn in (self.shim.kvref_probe, self.shim.kvref_hparams):
            fn.restype = ctypes.c_size_t
            fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]

    def call_json(self, fn, ptr):
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            need = fn(ptr, buf, cap)
            if need <= cap:
                return json.loads(buf.value.decode())
            cap = need + 16

    def lines(self):
        """log text split into lines with their level (continuations, level 5, join the previous line)."""
        out = []
        for lvl, t in self.logs:
            if lvl == 5 and out:
                out[-1][1] += t
            else:
                out.append([lvl, t])
        res = []
        for lvl, t in out:
            for ln in t.split("\n"):
                if ln.strip() and ln.strip(". ") != "":
                    res.append((lvl, ln.rstrip()))
        return res

    def load(self, path: str, no_alloc=False):
        L = self.L
        p = L.llama_model_default_params()
        p.n_gpu_layers = 0
        if no_alloc:
            p.no_alloc = True
            p.load_mode = 0  # LLAMA_LOAD_MODE_NONE: no_alloc with mmap aborts
        self.logs.clear()
        m = L.llama_model_load_from_file(path.encode(), p)
        return m, self.lines()


CACHE_PREFIXES = ("llama_kv_cache", "llama_memory_recurrent", "llama_memory_hybrid", "llama_context:",
                  "llama_init_from_model", "resolve_fused_ops: Flash", "sched_reserve:", "llama_kv_cache_iswa")


def keep_line(lvl: int, ln: str) -> bool:
    if lvl <= 1:  # debug
        return bool(re.search(r"llama_kv_cache: layer .*(does not have KV|filtered|reuse)", ln))
    if ln.startswith("llama_context: n_") and "=" in ln or "llama_context: flash_attn" in ln \
            or "llama_context: kv_unified" in ln or "llama_context: causal_attn" in ln:
        return True
    if ln.startswith(("llama_context: freq_", "llama_context: constructing", "llama_context: enumerating",
                      "llama_context: backend_ptrs", "sched_reserve: reserving", "sched_reserve: graph",
                      "sched_reserve: max_nodes", "resolve_fused_ops: resolving", "resolve_fused_ops: fused")):
        return False
    return ln.startswith(CACHE_PREFIXES) or lvl >= 3


def worker_discover(args):
    spec = json.loads(Path(args.spec).read_text())
    lib = Llama(args.shim)
    path = Path(args.gguf)
    tensors: dict = {t: [1] for t in spec.get("seed", [])}
    for it in range(5000):
        gguf_write(path, spec["arch"], spec["kv"], tensors)
        m, lines = lib.load(str(path))
        if m:
            lib.L.llama_model_free(m)
            print(json.dumps(dict(ok=True, tensors=tensors, attempts=it + 1)))
            return
        txt = "\n".join(t for _, t in lines)
        mm = re.search(r"tensor '([^']+)' not found", txt)
        if mm:
            tensors[mm.group(1)] = [1]
            continue
        mm = re.search(r"tensor '([^']+)' has wrong shape; expected ([-0-9, ]+), got", txt)
        if mm:
            tensors[mm.group(1)] = [int(x) for x in mm.group(2).split(",")]
            continue
        print(json.dumps(dict(ok=False, error=[t for lvl, t in lines if lvl >= 3][-6:], tensors=tensors)))
        return
    print(json.dumps(dict(ok=False, error=["too many attempts"], tensors=tensors)))


def case_params(c: dict, L):
    cp = L.llama_context_default_params()
    cp.n_ctx = c["n_ctx"]
    cp.n_seq_max = c["n_seq_max"]
    cp.kv_unified = c["kv_unified"]
    cp.type_k = TYPES[c["type_k"]]
    cp.type_v = TYPES[c["type_v"]]
    cp.flash_attn_type = FA[c["flash_attn"]]
    cp.swa_full = c["swa_full"]
    cp.n_batch = c["n_batch"]
    cp.n_ubatch = c["n_ubatch"]
    cp.n_rs_seq = c.get("n_rs_seq", 0)
    cp.n_threads = 1
    cp.n_threads_batch = 1
    return cp


def worker_run(args):
    lib = Llama(args.shim)
    L = lib.L
    cases = [json.loads(x) for x in Path(args.cases).read_text().splitlines()]
    models = {}
    out = open(args.results, "a")

    def model(no_alloc):
        if no_alloc not in models:
            m, lines = lib.load(args.gguf, no_alloc=no_alloc)
            assert m, lines[-5:]
            info = dict(hparams=lib.call_json(lib.shim.kvref_hparams, m),
                        model_size=L.llama_model_size(m), n_params=L.llama_model_n_params(m),
                        load_lines=[t for lvl, t in lines if "model buffer size" in t or t.startswith("print_info")
                                    or lvl >= 3])
            models[no_alloc] = (m, info)
        return models[no_alloc]

    for c in cases[args.start:]:
        print(json.dumps(dict(start=c["id"])), file=sys.stderr, flush=True)
        rec = dict(id=c["id"])
        t0 = time.time()
        if c.get("frontend") == "llama_cpp.Llama":
            rec.update(run_frontend(lib, args.gguf, c))
        else:
            m, info = model(c.get("no_alloc", False))
            if c["id"] == cases[0]["id"] or c.get("no_alloc"):
                rec["model_info"] = info
            lib.logs.clear()
            ctx = L.llama_init_from_model(m, case_params(c, L))
            lines = lib.lines()
            rec["ok"] = bool(ctx)
            rec["lines"] = [[lvl, t] for lvl, t in lines if keep_line(lvl, t)]
            if ctx:
                rec["probe"] = lib.call_json(lib.shim.kvref_probe, ctx)
                rec["n_ctx_api"] = L.llama_n_ctx(ctx)
                rec["n_ctx_seq_api"] = L.llama_n_ctx_seq(ctx) if hasattr(L, "llama_n_ctx_seq") else None
                L.llama_free(ctx)
        rec["elapsed_ms"] = round((time.time() - t0) * 1000, 1)
        out.write(json.dumps(rec) + "\n")
        out.flush()


def run_frontend(lib, gguf_path, c):
    """llama-cpp-python's own Llama() front end: its defaults decide the context params."""
    L = lib.L
    import llama_cpp

    kw = dict(c["llama_kwargs"])
    if "type_k" in kw:
        kw["type_k"] = TYPES[kw["type_k"]]
    if "type_v" in kw:
        kw["type_v"] = TYPES[kw["type_v"]]
    lib.logs.clear()
    rec = {}
    try:
        llm = llama_cpp.Llama(model_path=gguf_path, verbose=True, **kw)
        L.llama_log_set(lib._cb, None)
    except Exception as exc:  # noqa: BLE001 - the refusal is the record
        L.llama_log_set(lib._cb, None)
        rec["ok"] = False
        rec["exception"] = f"{type(exc).__name__}: {exc}"
        rec["lines"] = [[lvl, t] for lvl, t in lib.lines() if keep_line(lvl, t) and not t.startswith("print_info")]
        return rec
    cp = llm.context_params
    rec["ok"] = True
    rec["context_params"] = dict(n_ctx=cp.n_ctx, n_batch=cp.n_batch, n_ubatch=cp.n_ubatch, n_seq_max=cp.n_seq_max,
                                 flash_attn_type=cp.flash_attn_type, swa_full=cp.swa_full, kv_unified=cp.kv_unified,
                                 type_k=cp.type_k, type_v=cp.type_v, offload_kqv=cp.offload_kqv)
    rec["lines"] = [[lvl, t] for lvl, t in lib.lines() if keep_line(lvl, t) and not t.startswith("print_info")]
    rec["probe"] = lib.call_json(lib.shim.kvref_probe, llm._ctx.ctx)
    llm.close()
    return rec


# ---------------------------------------------------------------------------------------------------------------
# driver side
def build_shim(work: Path, src: Path, py: str) -> Path:
    out = work / "kvref_shim.so"
    cpp = work / "kvref_shim.cpp"
    h = hashlib.sha256(SHIM_SRC.encode() + str(src).encode()).hexdigest()[:12]
    stamp = work / "kvref_shim.stamp"
    if out.exists() and stamp.exists() and stamp.read_text() == h:
        return out
    libdir = subprocess.check_output([py, "-c", "import llama_cpp, os; print(os.path.join(os.path.dirname("
                                      "llama_cpp.__file__), 'lib'))"], text=True).strip()
    cpp.write_text(SHIM_SRC)
    cmd = ["g++", "-std=c++17", "-O1", "-fPIC", "-shared", f"-I{src}/src", f"-I{src}/include",
           f"-I{src}/ggml/include", str(cpp), "-o", str(out), f"-L{libdir}", "-lllama", "-lggml-base",
           f"-Wl,-rpath,{libdir}"]
    subprocess.check_call(cmd)
    stamp.write_text(h)
    return out


def discover(name: str, spec: dict, work: Path, shim: Path, py: str) -> dict:
    d = work / "models"
    d.mkdir(parents=True, exist_ok=True)
    cache = d / f"{name}.tensors.json"
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    if cache.exists():
        c = json.loads(cache.read_text())
        if c.get("key") == key:
            gguf_write(d / f"{name}.gguf", spec["arch"], spec["kv"], c["tensors"])
            return c
    (d / f"{name}.spec.json").write_text(json.dumps(spec))
    r = subprocess.run([py, str(HERE), "--_worker", "discover", "--spec", str(d / f"{name}.spec.json"),
                        "--gguf", str(d / f"{name}.gguf"), "--shim", str(shim)],
                       capture_output=True, text=True, env=dict(os.environ, GGML_NO_BACKTRACE="1"))
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001
        res = dict(ok=False, error=["discovery crashed", r.stderr[-2000:]])
    res["key"] = key
    cache.write_text(json.dumps(res))
    return res


# llama_context_default_params() values (n_ctx 4096 instead of 512); a record's inputs list what differs
INPUT_DEFAULTS = dict(type_k="f16", type_v="f16", flash_attn="auto", swa_full=True, kv_unified=False, n_seq_max=1,
                      n_ctx=4096, n_batch=2048, n_ubatch=512, n_rs_seq=0, no_alloc=False)


def build_cases(name: str, spec: dict, quick: bool) -> list[dict]:
    swa = spec["kv"].get("attention.sliding_window", 0) > 0 and spec["arch"] != "phi3"
    base = dict(INPUT_DEFAULTS, model=name)
    cases = []

    def add(**kw):
        c = dict(base)
        c.update(kw)
        cases.append(c)

    seqs = [(1, False), (4, False), (4, True)]
    ctxs = [4096, 32768] if quick else N_CTX
    swas = [True, False] if swa else [True]
    # A. structure grid, f16/f16: n_ctx x (n_seq_max, kv_unified) x flash_attn x swa_full, default batch
    for n_ctx in ctxs:
        for ns, uni in seqs:
            for fa in FA:
                for sf in swas:
                    add(n_ctx=n_ctx, n_seq_max=ns, kv_unified=uni, flash_attn=fa, swa_full=sf)
            # the other batch
            for sf in swas:
                add(n_ctx=n_ctx, n_seq_max=ns, kv_unified=uni, flash_attn="enabled", swa_full=sf,
                    n_batch=OTHER_BATCH[0], n_ubatch=OTHER_BATCH[1])
    # B. cache types
    pairs = [(k, v) for k in CACHE_TYPES for v in CACHE_TYPES]
    if name not in FULL_TYPE_MODELS or quick:
        pairs = [(t, t) for t in CACHE_TYPES] + [("q8_0", "f16"), ("f16", "q8_0"), ("q4_0", "f32"), ("bf16", "q5_1"),
                                                 ("iq4_nl", "q4_1")]
    for k, v in pairs:
        for fa in FA:
            add(type_k=k, type_v=v, flash_attn=fa, swa_full=False if swa else True)
    # C. sampled types x structure (flash attention on)
    for k, v in (STRUCT_TYPE_PAIRS[:2] if quick else STRUCT_TYPE_PAIRS):
        for n_ctx in ([32768] if quick else [1, 300, 32768]):
            for ns, uni in seqs:
                for sf in swas:
                    add(type_k=k, type_v=v, flash_attn="enabled", n_ctx=n_ctx, n_seq_max=ns, kv_unified=uni,
                        swa_full=sf)
    # D. extras: n_ctx = 0 (n_ctx_train), n_seq_max 3 (non-divisible), n_ubatch > n_batch, tiny n_ubatch with SWA
    add(n_ctx=0)
    add(n_ctx=0, n_seq_max=4)
    add(n_ctx=4096, n_seq_max=3)
    add(n_ctx=5000, n_seq_max=4)
    add(n_ctx=1000)
    add(n_ctx=4096, n_batch=256, n_ubatch=512)
    add(n_ctx=300, n_batch=2048, n_ubatch=512, n_seq_max=4, kv_unified=True, swa_full=False)
    if swa:
        add(n_ctx=32768, n_seq_max=4, kv_unified=True, swa_full=False, n_batch=64, n_ubatch=64)
        add(n_ctx=32768, n_seq_max=2, kv_unified=False, swa_full=False, n_batch=4096, n_ubatch=4096)
    if spec["arch"] in RS_ARCHS:
        for rs in (1, 2):
            add(n_rs_seq=rs)
            add(n_rs_seq=rs, n_seq_max=4)
    # E. the no_alloc (memory-fit dry run) path on a few cases
    for kw in (dict(), dict(n_ctx=32768, n_seq_max=4, type_k="q8_0", type_v="q8_0", flash_attn="enabled"),
               dict(flash_attn="disabled", n_seq_max=4, kv_unified=True, swa_full=False)):
        add(no_alloc=True, **kw)
    # F. llama-cpp-python's Llama() front end
    for kw in (dict(), dict(n_ctx=4096, flash_attn=True, type_k="q8_0", type_v="q8_0"),
               dict(n_ctx=4096, type_v="q8_0"), dict(n_ctx=0)):
        cases.append(dict(model=name, frontend="llama_cpp.Llama", llama_kwargs=kw))
    return cases


def run_model(name: str, gguf_path: Path, cases: list[dict], work: Path, shim: Path, py: str) -> list[dict]:
    cfile = work / "cases" / f"{name}.jsonl"
    rfile = work / "cases" / f"{name}.results.jsonl"
    cfile.parent.mkdir(parents=True, exist_ok=True)
    cfile.write_text("".join(json.dumps(c) + "\n" for c in cases))
    if rfile.exists():
        rfile.unlink()
    start = 0
    results: dict[int, dict] = {}
    while start < len(cases):
        r = subprocess.run([py, str(HERE), "--_worker", "run", "--cases", str(cfile), "--results", str(rfile),
                            "--gguf", str(gguf_path), "--shim", str(shim), "--start", str(start)],
                           capture_output=True, text=True,
                           env=dict(os.environ, GGML_NO_BACKTRACE="1", OMP_NUM_THREADS="1"))
        for ln in rfile.read_text().splitlines():
            rec = json.loads(ln)
            results[rec["id"]] = rec
        if r.returncode == 0:
            break
        # crashed: the case it had started is the one that aborted
        started = [json.loads(x)["start"] for x in r.stderr.splitlines() if x.startswith('{"start"')]
        if not started:
            raise RuntimeError(f"worker for {name} failed before any case: {r.stderr[-3000:]}")
        cid = started[-1]
        idx = next(i for i, c in enumerate(cases) if c["id"] == cid)
        tail = [x for x in r.stderr.splitlines() if not x.startswith('{"start"') and x.strip()][-8:]
        results[cid] = dict(id=cid, ok=False, crashed=True, returncode=r.returncode, stderr_tail=tail)
        with open(rfile, "a") as f:
            f.write(json.dumps(results[cid]) + "\n")
        start = idx + 1
    return [results[c["id"]] for c in cases if c["id"] in results]


# ---------------------------------------------------------------------------------------------------------------
# parsing llama.cpp's log lines
RE_KV = re.compile(r"^(llama_kv_cache): size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\), "
                   r"K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB")
RE_RS = re.compile(r"^llama_memory_recurrent: size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+) seqs +(\d+) "
                   r"rs_seq\), R \((\w+)\): +([\d.]+) MiB, S \((\w+)\): +([\d.]+) MiB(?:, P \((\w+)\): +([\d.]+) MiB)?")
RE_BUF = re.compile(r"^(\w+): +(\S+) (KV|RS) buffer size = +([\d.]+) MiB")
RE_CTX = re.compile(r"^llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|causal_attn|flash_attn|kv_unified|"
                    r"n_rs_seq|n_outputs_max|n_outputs_max_per_seq) += (\S+)")
RE_ROT = re.compile(r"^llama_kv_cache: attn_rot_([kv]) = (\d+), n_embd_head_k_all = (-?\d+)")
RE_MODEL_BUF = re.compile(r"^load_tensors: +(\S+) model buffer size = +([\d.]+) MiB")
RE_VPAD = re.compile(r"^llama_kv_cache: the V embeddings have different sizes .* padding V cache to (\d+)")
RE_ROUND = re.compile(r"^llama_context: n_ctx is not divisible by n_seq_max - rounding down to (\d+)")
RE_ISWA = re.compile(r"^llama_kv_cache_iswa: creating +(non-SWA|SWA) KV cache, size = (\d+) cells")


def parse_line(ln: str):
    """llama.cpp's numbers from one cache-related log line (None if it is not one of those lines)."""
    if m := RE_KV.match(ln):
        return dict(line="kv_size", size_mib=float(m[2]), cells=int(m[3]), layers=int(m[4]), n_seq_max=int(m[5]),
                    n_stream=int(m[6]), type_k=m[7], k_mib=float(m[8]), type_v=m[9], v_mib=float(m[10]))
    if m := RE_RS.match(ln):
        d = dict(line="rs_size", size_mib=float(m[1]), cells=int(m[2]), layers=int(m[3]), seqs=int(m[4]),
                 rs_seq=int(m[5]), type_r=m[6], r_mib=float(m[7]), type_s=m[8], s_mib=float(m[9]))
        if m[10]:
            d.update(type_p=m[10], p_mib=float(m[11]))
        return d
    if m := RE_BUF.match(ln):
        return dict(line="buffer", by=m[1], buffer=m[2], kind=m[3], mib=float(m[4]))
    if m := RE_ISWA.match(ln):
        return dict(line="iswa", which=m[1], cells=int(m[2]))
    if m := RE_CTX.match(ln):
        v = m[2]
        return dict(line="context", field=m[1], value=int(v) if v.isdigit() else v)
    if m := RE_ROT.match(ln):
        return dict(line="attn_rot", which=m[1], value=int(m[2]), n_embd_head_all=int(m[3]))
    if m := RE_MODEL_BUF.match(ln):
        return dict(line="model_buffer", buffer=m[1], mib=float(m[2]))
    if ln.startswith("resolve_fused_ops: Flash Attention"):
        return dict(line="fa_resolved", value="enabled" if ln.endswith("enabled") else "disabled")
    if m := RE_VPAD.match(ln):
        return dict(line="v_padding", n_embd_v_gqa_max=int(m[1]))
    if m := RE_ROUND.match(ln):
        return dict(line="n_ctx_rounded", value=int(m[1]))
    return None


def parse_lines(lines: list) -> dict:
    p: dict = {"kv": [], "rs": [], "buffers": [], "iswa": [], "context": {}, "fa_resolved": None}
    for ln in lines:
        d = parse_line(ln)
        if d is None:
            continue
        kind = d.pop("line")
        if kind == "kv_size":
            p["kv"].append(d)
        elif kind == "rs_size":
            p["rs"].append(d)
        elif kind == "buffer":
            p["buffers"].append(d)
        elif kind == "iswa":
            p["iswa"].append(d)
        elif kind == "context":
            p["context"][d["field"]] = d["value"]
        elif kind == "fa_resolved":
            p["fa_resolved"] = d["value"]
    return p


def _one_or_list(xs):
    return xs[0] if xs and all(x == xs[0] for x in xs) else xs


def summarize_cache(node: dict, role: str) -> list[dict]:
    """Compact per-cache figures from the probe (exact bytes, llama.cpp's own objects)."""
    if node is None:
        return []
    k = node["kind"]
    if k == "kv_cache_iswa":
        return summarize_cache(node["base"], "kv_base") + summarize_cache(node["swa"], "kv_swa")
    if k in ("hybrid", "hybrid_iswa"):
        return summarize_cache(node["attn"], role) + summarize_cache(node["recr"], "rs")
    bufs = {b["buffer"]: b["size"] for b in node["buffers"]}
    ts = [t for b in node["buffers"] for t in b["tensors"]]
    if k == "kv_cache":
        kt = {int(t[0].split("_l")[-1]): t for t in ts if t[0].startswith("cache_k_l")}
        vt = {int(t[0].split("_l")[-1]): t for t in ts if t[0].startswith("cache_v_l")}
        c = dict(role=role, cells=node["kv_size"], n_stream=node["n_stream"], layers=node["layers"],
                 type_k=node["type_k"], type_v=node["type_v"], v_trans=node["v_trans"],
                 k_ne0=_one_or_list([kt[i][2][0] for i in node["layers"] if i in kt]),
                 v_ne0=_one_or_list([vt[i][2][0] for i in node["layers"] if i in vt]),
                 k_bytes=node["size_k_bytes"], v_bytes=node["size_v_bytes"], buffer_bytes=node["total_size"])
        if node["attn_rot_k"] or node["attn_rot_v"]:
            c["attn_rot"] = [node["attn_rot_k"], node["attn_rot_v"]]
        reuse = {a: b for a, b in node["map_layer_ids"].items() if int(a) not in node["layers"]}
        if reuse:
            c["reuse"] = reuse  # model layer -> cache slot of the layer it shares
        if list(bufs) != ["CPU"]:
            c["buffers"] = bufs
        return [c]
    if k == "recurrent":
        r = [t for t in ts if t[0].startswith("cache_r_l")]
        s_ = [t for t in ts if t[0].startswith("cache_s_l")]
        c = dict(role="rs", cells=node["size"], layers=[int(t[0].split("_l")[-1]) for t in r],
                 r_shape=r[0][2][:2] if r else None, s_shape=s_[0][2][:2] if s_ else None,
                 r_bytes=node["size_r_bytes"], s_bytes=node["size_s_bytes"], buffer_bytes=node["total_size"])
        if node["size_p_bytes"]:
            c["p_bytes"] = node["size_p_bytes"]
        if list(bufs) != ["CPU"]:
            c["buffers"] = bufs
        return [c]
    return [dict(role="unknown", raw=node)]


# log lines left out of the fixture's per-case list (their numbers are in cparams / breakdown; all lines are kept
# in the full scratch output)
DROP_IN_FIXTURE = re.compile(r"^(llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|causal_attn|flash_attn"
                             r"|kv_unified|n_rs_seq|n_outputs_max|n_outputs_max_per_seq) +=|llama_context: +\S+ +"
                             r"output buffer|sched_reserve:|llama_kv_cache: layer )")


class Interner:
    def __init__(self):
        self.lines: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, ln: str) -> int:
        if ln not in self.index:
            self.index[ln] = len(self.lines)
            self.lines.append(ln)
        return self.index[ln]


def compact(case: dict, res: dict, defaults: dict, intern: Interner) -> dict:
    inputs = {k: v for k, v in case.items() if k not in ("id", "model") and defaults.get(k, object()) != v}
    rec = dict(id=case["id"], model=case["model"], inputs=inputs, ok=res.get("ok", False))
    lines = res.get("lines", [])
    if res.get("crashed"):
        rec["crashed"] = True
        rec["abort"] = [re.sub(r"^/tmp/pip-install-[^/]+/llama-cpp-python_[0-9a-f]+/", "", x)
                        for x in res.get("stderr_tail") or []]
        rec["log"] = [intern(t) for _, t in lines]
        return rec
    if "exception" in res:
        rec["exception"] = res["exception"]
    if not rec["ok"]:
        rec["refusal"] = [t for lvl, t in lines if lvl >= 4] or [t for lvl, t in lines if lvl >= 3]
        rec["log"] = [intern(t) for lvl, t in lines if not DROP_IN_FIXTURE.match(t)]
        return rec
    probe = res["probe"]
    cp = probe["cparams"]
    rec["cparams"] = {k: cp[k] for k in ("n_ctx", "n_ctx_seq", "n_batch", "n_ubatch", "flash_attn")}
    for k in ("n_seq_max", "n_rs_seq", "kv_unified"):   # listed only when not the input as given
        if case.get("frontend") or cp[k] != (max(1, case[k]) if k == "n_seq_max" else case.get(k, 0)):
            rec["cparams"][k] = cp[k]
    if "context_params" in res:
        rec["llama_py_context_params"] = res["context_params"]
    rec["memory"] = probe["memory"]["kind"] if probe["memory"] else None
    rec["caches"] = summarize_cache(probe["memory"], "kv")
    bd = probe["breakdown"]
    rec["context_bytes"] = sum(b["context"] for b in bd)     # llama_get_memory_breakdown: KV + RS
    rec["compute_bytes"] = sum(b["compute"] for b in bd)
    rec["log"] = [intern(t) for lvl, t in lines if not DROP_IN_FIXTURE.match(t)]
    return rec


# ---------------------------------------------------------------------------------------------------------------
# the facts document's rules (/work/scratch/llamacpp-facts.md), checked against what llama.cpp did
TYPE_INFO = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20),
             "q5_0": (32, 22), "q5_1": (32, 24), "iq4_nl": (32, 18)}


def pad(x, n):
    return (x + n - 1) // n * n


def row(t, ne0):
    blk, sz = TYPE_INFO[t]
    return sz * ne0 // blk


def facts_predict(case: dict, hp: dict, arch: str) -> dict:
    """What /work/scratch/llamacpp-facts.md says llama.cpp does for this case (C API path)."""
    ns = max(1, case["n_seq_max"])
    n_ctx = case["n_ctx"] or hp["n_ctx_train"]                                   # §2.1 step 3
    n_batch = min(n_ctx, case["n_batch"])                                         # step 5 (un-padded n_ctx)
    n_ubatch = min(n_batch, case["n_ubatch"] or n_batch)                          # step 6
    n_ctx = pad(n_ctx, 256)                                                       # step 8
    rounded = False
    if case["kv_unified"]:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = pad(n_ctx // ns, 256)                                         # step 9
        rounded = n_ctx_seq * ns != n_ctx
        n_ctx = n_ctx_seq * ns
    n_stream = 1 if case["kv_unified"] else ns
    fa_on = case["flash_attn"] != "disabled"                                      # step 4: AUTO starts "on"
    quant = lambda t: TYPE_INFO[t][0] > 1  # noqa: E731
    # refusals (§2.5)
    if hp["is_mla"] and case["type_k"] != case["type_v"]:
        return dict(refused="model does not support different K")
    if quant(case["type_v"]):
        if case["flash_attn"] == "disabled":
            return dict(refused="quantized V cache requires flash_attn to be enabled")
        fa_on = True
    if fa_on:
        for il in range(hp["n_layer"]):
            if quant(case["type_k"]) and hp["n_embd_head_k"][il] % 32:
                return dict(refused="K cache type")
            if quant(case["type_v"]) and hp["n_embd_head_v"][il] % 32:
                return dict(refused="V cache type")
    v_trans = not fa_on                                                           # §2.4
    L = hp["n_layer_all"]
    caches = []
    if arch not in ("mamba", "mamba2"):
        nl = hp["n_layer"]
        kv_layers = []
        for il in range(L):
            if not hp["has_kv"][il]:                                              # §3.2 (1)
                continue
            if arch == "falcon-h1":                                               # §5.3 filters
                pass
            elif arch == "nemotron_h":
                if hp["is_recr"][il] or hp["n_ff"][il] != 0:
                    continue
            elif arch in RS_ARCHS and hp["is_recr"][il]:
                continue
            # §3.1/§3.5 NextN filter (plain/iswa caches; qwen3next's hybrid filter has il < n_layer() too;
            # nemotron_h's has not)
            if arch != "nemotron_h" and hp["n_layer_nextn"] > 0 and nl > 0 and il >= nl:
                continue
            kv_layers.append(il)
        vmax = hp["n_embd_v_gqa_max"]

        def kvc(role, layers, cells):
            kt = [row(case["type_k"], hp["n_embd_k_gqa"][il]) * cells * n_stream for il in layers]
            vt = [] if hp["is_mla"] else [row(case["type_v"], vmax if v_trans else hp["n_embd_v_gqa"][il])
                                          * cells * n_stream for il in layers]
            return dict(role=role, cells=cells, n_stream=n_stream, layers=layers, k_bytes=sum(kt), v_bytes=sum(vt),
                        buffer_bytes=sum(pad(x, 32) for x in kt + vt), v_trans=v_trans)

        if hp["swa_type"] != 0:                                                   # §4
            size_swa = n_ctx_seq if case["swa_full"] else pad(
                min(n_ctx_seq, hp["n_swa"] * (ns if case["kv_unified"] else 1) + n_ubatch), 256)
            caches += [kvc("kv_base", [il for il in kv_layers if not hp["is_swa"][il]], n_ctx_seq),
                       kvc("kv_swa", [il for il in kv_layers if hp["is_swa"][il]], size_swa)]
        else:
            caches.append(kvc("kv", kv_layers, n_ctx_seq))
    if arch in RS_ARCHS:                                                          # §5.1, §5.2
        n_rs_seq = case.get("n_rs_seq", 0) if arch in ("nemotron_h", "lfm2") else 0
        rows = ns * (1 + n_rs_seq)
        rl = [il for il in range(hp["n_layer"]) if (arch == "falcon-h1" or hp["is_recr"][il])
              and (arch != "nemotron_h" or hp["n_ff"][il] == 0)]
        r1, s1 = 4 * hp["n_embd_r"] * rows, 4 * hp["n_embd_s"] * rows
        caches.append(dict(role="rs", cells=ns, layers=rl, r_bytes=r1 * len(rl), s_bytes=s1 * len(rl),
                           buffer_bytes=(pad(r1, 32) + pad(s1, 32)) * len(rl)))
    return dict(n_ctx=n_ctx, n_ctx_seq=n_ctx_seq, n_batch=n_batch, n_ubatch=n_ubatch, caches=caches,
                rounded=rounded, fa_on=fa_on)


def facts_check(doc: dict) -> dict:
    """Every rule of the facts document this grid exercises, against what llama.cpp did. Returns the mismatches
    (rule -> count and examples) and the number of checks per rule."""
    mism: dict[str, list] = {}
    checks: dict[str, int] = {}

    def check(rule, cid, ok, detail):
        checks[rule] = checks.get(rule, 0) + 1
        if not ok:
            mism.setdefault(rule, []).append(dict(id=cid, detail=detail()))

    lines_of = lambda rec: [doc["log_lines"][i] for i in rec.get("log", [])]  # noqa: E731
    quant = lambda t: TYPE_INFO[t][0] > 1  # noqa: E731
    for name, m in doc["models"].items():
        if m.get("hparams") is None:
            continue
        # §7.4: mmap'd model buffer = last - first over the tensors' file ranges; "file size" = sum ggml_nbytes
        ranges = []
        unused = {mm[1] for x in m["load_log"] if (mm := re.match(r"model has unused tensor (\S+) ", x))}
        for tname, ttype, shape, off in m["gguf_tensors"]:
            if tname in unused:  # TENSOR_SKIP (MTP blocks with load_mtp=false): not in any buffer
                continue
            nb = 4 * math.prod(shape)
            ranges.append((m["gguf_data_offset"] + off, m["gguf_data_offset"] + off + nb))
        span = max(e for _, e in ranges) - min(b for b, _ in ranges)
        check("§7.4 mapped model buffer = last - first", name, m["model_buffers"].get("CPU_Mapped") == span,
              lambda: f"facts {span} llama.cpp {m['model_buffers']}")
        tot = sum(4 * math.prod(shape) for _, _, shape, _ in m["gguf_tensors"])
        check("§7.4 file size = sum ggml_nbytes (llama_model_size)", name, m["llama_model_size"] == tot,
              lambda: f"facts {tot} llama.cpp {m['llama_model_size']}")
    for rec in doc["cases"]:
        inp = dict(INPUT_DEFAULTS, **rec["inputs"])
        mdl = doc["models"][rec["model"]]
        hp = mdl.get("hparams")
        cid = rec["id"]
        if hp is None:
            continue
        lines = lines_of(rec)
        if inp.get("frontend"):                                                   # §6.3
            kw = inp["llama_kwargs"]
            if not kw:
                cp = rec.get("llama_py_context_params") or {}
                want = dict(n_ctx=512, n_batch=512, n_ubatch=512, n_seq_max=1, flash_attn_type=0, swa_full=True,
                            kv_unified=False, type_k=1, type_v=1)
                check("§6.3 Llama() defaults", cid, all(cp.get(k) == v for k, v in want.items()),
                      lambda: f"facts {want} llama-cpp-python {cp}")
            elif kw.get("type_v") == "q8_0" and not kw.get("flash_attn"):
                words = "model does not support different K" if hp["is_mla"] else \
                    "quantized V cache requires flash_attn to be enabled"
                check("§6.3 Llama(type_v=q8_0) without flash_attn is refused", cid,
                      not rec["ok"] and any(words in x for x in lines),
                      lambda: f"ok={rec['ok']} {rec.get('exception')} {rec.get('refusal')}")
            elif kw.get("n_ctx") == 0:
                check("§6.3 Llama(n_ctx=0) -> n_ctx_train", cid,
                      rec.get("cparams", {}).get("n_ctx") == pad(hp["n_ctx_train"], 256),
                      lambda: f"{rec.get('cparams')}")
            continue
        if rec.get("crashed"):
            check("no abort", cid, False, lambda: f"{rec['abort'][-1:]}")
            continue
        pred = facts_predict(inp, hp, mdl["arch"])
        if "refused" in pred or not rec["ok"]:
            check("§2.5 refusal", cid, ("refused" in pred) == (not rec["ok"]),
                  lambda: f"facts {pred.get('refused', 'accept')}; llama.cpp ok={rec['ok']} {rec.get('refusal')}")
            if "refused" in pred and not rec["ok"]:
                check("§2.5 refusal words", cid, any(pred["refused"] in x for x in rec.get("refusal", [])),
                      lambda: f"facts '{pred['refused']}' llama.cpp {rec.get('refusal')}")
            continue
        cp = rec["cparams"]
        for k in ("n_ctx", "n_ctx_seq", "n_batch", "n_ubatch"):
            check(f"§2.1 cparams.{k}", cid, cp[k] == pred[k], lambda: f"facts {pred[k]} llama.cpp {cp[k]}")
        check("§2.1 'rounding down' warning iff n_ctx_seq*n_seq_max != padded n_ctx", cid,
              pred["rounded"] == any(parse_line(x) and parse_line(x)["line"] == "n_ctx_rounded" for x in lines),
              lambda: f"facts {pred['rounded']}")
        got = {c["role"]: c for c in rec["caches"]}
        check("§3.1/§4/§5 cache roles", cid, set(got) == {c["role"] for c in pred["caches"]},
              lambda: f"facts {[c['role'] for c in pred['caches']]} llama.cpp {list(got)}")
        for pc in pred["caches"]:
            gc = got.get(pc["role"])
            if gc is None:
                continue
            for k in ("cells", "layers", "n_stream", "k_bytes", "v_bytes", "r_bytes", "s_bytes", "buffer_bytes",
                      "v_trans"):
                if k not in pc or (k == "buffer_bytes" and inp.get("no_alloc")):
                    continue
                check(f"{pc['role']}.{k}", cid, pc[k] == gc.get(k), lambda: f"facts {pc[k]} llama.cpp {gc.get(k)}")
        want_ctx = sum(c["buffer_bytes"] for c in pred["caches"])
        check("§3.2 memory_breakdown context = padded sum (also with no_alloc)", cid, rec["context_bytes"] == want_ctx,
              lambda: f"facts {want_ctx} llama.cpp {rec['context_bytes']}")
        parsed = parse_lines(lines)
        kvc = [c for c in rec["caches"] if c["role"].startswith("kv")]
        for pl, c in zip(parsed["kv"], kvc):
            check("§3.3 size line: cells per stream, allocated layers, n_seq_max/n_stream", cid,
                  (pl["cells"], pl["layers"], pl["n_seq_max"], pl["n_stream"]) ==
                  (c["cells"], len(c["layers"]), cp.get("n_seq_max", max(1, inp["n_seq_max"])), c["n_stream"]),
                  lambda: f"{pl} vs {c['cells']}/{len(c['layers'])}/{c['n_stream']}")
            check("§3.3 size line MiB = (K+V nbytes)/2^20", cid,
                  abs(pl["size_mib"] - (c["k_bytes"] + c["v_bytes"]) / 2**20) <= 0.005 + 1e-9,
                  lambda: f"{pl['size_mib']} vs {(c['k_bytes'] + c['v_bytes']) / 2**20}")
        for pl in parsed["rs"]:
            rsc = got.get("rs", {})
            check("§5.1 RS line: layers = n_layer(), cells = max(1, n_seq_max)", cid,
                  pl["layers"] == hp["n_layer"] and pl["cells"] == max(1, inp["n_seq_max"]),
                  lambda: f"{pl} n_layer {hp['n_layer']} allocated {len(rsc.get('layers', []))}")
        bufl = [b for b in parsed["buffers"]]
        nbuf = sum(1 for c in rec["caches"] if c["buffer_bytes"] or inp.get("no_alloc"))
        if not inp.get("no_alloc"):
            check("§3.3 one 'KV/RS buffer size' line per non-empty cache", cid, len(bufl) == nbuf,
                  lambda: f"{len(bufl)} lines, {nbuf} caches")
        if inp["flash_attn"] == "auto":
            check("§2.1 AUTO resolves enabled on CPU", cid,
                  parsed["fa_resolved"] in ("enabled", None),
                  lambda: f"resolved {parsed['fa_resolved']}")
        want_pad = pred["caches"] and not pred["fa_on"] and hp["is_n_embd_v_gqa_variable"]
        check("§2.4 V padding warning iff FA disabled and variable n_embd_v_gqa", cid,
              bool(want_pad) == any("padding V cache" in x for x in lines), lambda: f"facts {want_pad}")
        for c in kvc:
            if not c["layers"]:
                continue
            rk = quant(inp["type_k"]) and hp["n_embd_head_k"][0] % 64 == 0
            rv = quant(inp["type_v"]) and hp["n_embd_head_v"][0] % 64 == 0 and not hp["is_mla"]
            got_rot = c.get("attn_rot", [False, False])
            check("§3.2 attn_rot_k = quantized K and n_embd_head_k % 64 == 0", cid, got_rot[0] == rk,
                  lambda: f"facts {rk} llama.cpp {got_rot[0]} (head {hp['n_embd_head_k'][0]})")
            check("§3.2 attn_rot_v = quantized V and n_embd_head_v % 64 == 0", cid, got_rot[1] == rv,
                  lambda: f"facts {rv} llama.cpp {got_rot[1]} (head {hp['n_embd_head_v'][0]})")
        if hp["swa_type"] and inp["swa_full"]:
            check("§4 'using full-size SWA cache' warning with swa_full", cid,
                  any("using full-size SWA cache" in x for x in lines), lambda: "missing")
    return dict(checks=checks, mismatches={k: dict(count=len(v), examples=v[:6]) for k, v in mism.items()})


# ---------------------------------------------------------------------------------------------------------------
def driver(args):
    py = sys.executable
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    shim = build_shim(work, Path(args.llama_src), py)
    import llama_cpp

    names = [n for n in MODELS if not args.models or n in args.models.split(",")]
    models_out: dict = {}
    all_cases: list = []
    full: dict = {}
    intern = Interner()
    cid = 0
    gguf_dir = Path(args.gguf_dir)
    gguf_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        spec = MODELS[name]
        ts = time.time()
        disc = discover(name, spec, work, shim, py)
        gpath = work / "models" / f"{name}.gguf"
        mrec = dict(arch=spec["arch"], note=spec["note"], seed_tensors=spec["seed"], discovery_ok=disc["ok"])
        if not disc["ok"]:
            mrec["discovery_error"] = disc["error"]
            mrec["hparams"] = None
            models_out[name] = mrec
            print(f"[{name}] discovery FAILED: {disc['error']}", file=sys.stderr)
            continue
        desc = gguf_describe(gpath)
        # metadata-only GGUF: the prefix up to the data section; the rest of the file is zero bytes
        raw = gpath.read_bytes()
        assert raw[desc["data_offset"]:].count(0) == len(raw) - desc["data_offset"], "data not all zero"
        meta_path = gguf_dir / f"llamacpp-{name}.gguf"
        meta_path.write_bytes(raw[:desc["data_offset"]])
        hdr = read_gguf_header(meta_path)   # the fixture reads back without gguf-py / llama.cpp
        assert hdr["data_offset"] == desc["data_offset"] and hdr["metadata"] == desc["metadata"], name
        assert [[t[0], t[2], t[3]] for t in hdr["tensors"]] == \
            [[t[0], t[2], t[3]] for t in desc["tensors"]], name
        try:
            fixture_ref = str(meta_path.resolve().relative_to(REPO))
        except ValueError:
            fixture_ref = str(meta_path)
        mrec.update(gguf_fixture=fixture_ref, gguf_file_size=desc["file_size"], gguf_data_offset=desc["data_offset"],
                    gguf_sha256=hashlib.sha256(raw).hexdigest(), gguf_metadata=desc["metadata"],
                    gguf_tensors=desc["tensors"], discovery_attempts=disc.get("attempts"))
        cases = build_cases(name, spec, args.quick)
        for c in cases:
            c["id"] = cid
            cid += 1
        results = run_model(name, gpath, cases, work, shim, py)
        byid = {r["id"]: r for r in results}
        case_of = {c["id"]: c for c in cases}
        info = next((r["model_info"] for r in results if "model_info" in r and not case_of[r["id"]].get("no_alloc")),
                    None)
        info_na = next((r["model_info"] for r in results if "model_info" in r and case_of[r["id"]].get("no_alloc")),
                       None)
        mrec["hparams"] = info["hparams"] if info else None
        if info:
            mrec["llama_model_size"] = info["model_size"]
            mrec["llama_model_n_params"] = info["n_params"]
            first = next(r for r in results if r.get("probe"))
            mrec["model_buffers"] = {b["buft"]: b["model"] for b in first["probe"]["breakdown"] if b["model"]}
            mrec["load_log"] = [x for x in info["load_lines"] if not x.startswith("print_info")]
            mrec["print_info"] = [x[len("print_info: "):] for x in info["load_lines"] if x.startswith("print_info")]
        if info_na:
            mrec["load_log_no_alloc"] = [x for x in info_na["load_lines"] if "model buffer size" in x]
        models_out[name] = mrec
        for c in cases:
            if c["id"] in byid:
                all_cases.append(compact(c, byid[c["id"]], INPUT_DEFAULTS, intern))
                full[c["id"]] = dict(case=c, result=byid[c["id"]])
        nok = sum(1 for c in cases if byid.get(c["id"], {}).get("ok"))
        ncr = sum(1 for c in cases if byid.get(c["id"], {}).get("crashed"))
        print(f"[{name}] {len(cases)} cases, {nok} ok, {ncr} crashed, {time.time() - ts:.0f}s", file=sys.stderr)

    parsed = {}
    for i, ln in enumerate(intern.lines):
        if (d := parse_line(ln)) is not None:
            parsed[str(i)] = d
    doc = dict(
        generated_by="scripts/audit/llamacpp_reference.py",
        llama_cpp_python=llama_cpp.__version__, llama_cpp_commit="0c1e57098",
        build="CPU only, from source (pip --no-binary :all:): CMAKE_ARGS=-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF "
              "-DLLAMA_BUILD_EXAMPLES=OFF",
        system_info=llama_cpp.llama_print_system_info().decode().strip(),
        units="bytes unless a field says mib (the log's own 2-decimal MiB)",
        how=[
            "one llama_model per synthetic GGUF (F32 zero weights, mmap, n_gpu_layers 0); one llama_init_from_model "
            "per case from llama_context_default_params() with the case's fields set (n_threads 1); a case's "
            "inputs list only the fields that differ from input_defaults; frontend=llama_cpp.Llama cases go "
            "through llama-cpp-python's Llama(**llama_kwargs) instead",
            "cparams: llama.cpp's cparams after construction (flash_attn as it stood when the cache was built and "
            "checked; AUTO shows true)",
            "caches[*]: read from llama.cpp's memory objects (llama_get_memory + dynamic_cast). cells: kv_size per "
            "stream (rs: mem_size); layers: model layer ids with tensors; k_ne0/v_ne0: ne[0] of each layer's "
            "cache tensor (one int when all equal); k_bytes/v_bytes/r_bytes/s_bytes: llama.cpp's size_k_bytes()/"
            "size_v_bytes()/size_r_bytes()/size_s_bytes() (sum of ggml_nbytes); buffer_bytes: total_size() = "
            "sum of ggml_backend_buffer_get_size, the exact number the 'KV/RS buffer size' line prints in MiB; "
            "attn_rot: [k, v] when either is on; reuse: layers that share another layer's cache (gemma3n)",
            "context_bytes / compute_bytes: llama_get_memory_breakdown(ctx), summed over buffer types",
            "log: indices into log_lines (llama.cpp's own lines, deduplicated; per-case llama_context n_* lines, "
            "compute/output buffer lines and per-layer debug lines are left out here, see cparams / "
            "compute_bytes); log_parsed: the numbers of each parsable line",
            "no_alloc cases: model loaded with no_alloc=true, load_mode=NONE (the memory-fit dry run): buffers "
            "are dummies (buffer_bytes 0, the log prints 0.00 MiB) and context_bytes carries the bytes",
            "refusal: llama.cpp's ERROR lines when llama_init_from_model returned NULL; crashed: the process "
            "aborted (GGML_ASSERT) and abort holds its last stderr lines",
        ],
        input_defaults=INPUT_DEFAULTS,
        grid=dict(n_ctx=N_CTX, n_seq_max_kv_unified=[[1, False], [4, False], [4, True]], flash_attn=list(FA),
                  cache_types=CACHE_TYPES, other_batch=dict(n_batch=OTHER_BATCH[0], n_ubatch=OTHER_BATCH[1]),
                  full_type_product_models=sorted(FULL_TYPE_MODELS), struct_type_pairs=STRUCT_TYPE_PAIRS,
                  quick=args.quick),
        models=models_out,
        num_cases=len(all_cases),
        elapsed_s=None,
        log_lines=intern.lines,
        log_parsed=parsed,
        cases=all_cases,
    )
    doc["facts_check"] = facts_check(doc)
    doc["elapsed_s"] = round(time.time() - t0, 1)
    full_path = work / "llamacpp-reference-full.json"
    full_path.write_text(json.dumps(dict(models=models_out, cases=full)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    txt = json.dumps(doc, separators=(",", ":"))
    # one case per line (diff-friendly), still one JSON document
    txt = txt.replace(',{"id":', ',\n{"id":')
    out.write_text(txt + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(all_cases)} cases) and {full_path} in "
          f"{time.time() - t0:.0f}s", file=sys.stderr)
    print(json.dumps(doc["facts_check"]["mismatches"], indent=1)[:8000], file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--gguf-dir", default=str(DEFAULT_GGUF_DIR))
    ap.add_argument("--work", default=str(DEFAULT_WORK), help="scratch: full GGUFs, shim, raw results")
    ap.add_argument("--llama-src", default=str(DEFAULT_SRC), help="llama.cpp sources of the built commit")
    ap.add_argument("--models", default="", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--_worker", choices=["discover", "run"])
    ap.add_argument("--spec")
    ap.add_argument("--gguf")
    ap.add_argument("--shim")
    ap.add_argument("--cases")
    ap.add_argument("--results")
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    if args._worker == "discover":
        return worker_discover(args)
    if args._worker == "run":
        return worker_run(args)
    return driver(args)


if __name__ == "__main__":
    main()
