"""What llama.cpp allocates for a model's caches: the context parameters, then every K / V / R / S tensor, its
device and its bytes. Torch-free; integers. Sources (llama.cpp 0c1e57098, as bundled in llama-cpp-python 0.3.36),
function by function:

1. ``src/llama-context.cpp`` ``llama_context::llama_context``: ``n_ctx`` (0: the training context), ``n_batch =
   min(n_ctx, n_batch)`` on the unpadded n_ctx, ``n_ubatch = min(n_batch, n_ubatch)``, then ``n_ctx =
   GGML_PAD(n_ctx, 256)``; unified: ``n_ctx_seq = n_ctx``; else ``n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256)`` and
   ``n_ctx = n_ctx_seq x n_seq_max`` ("n_ctx is not divisible by n_seq_max - rounding down", which can round up).
2. ``llama_init_from_model``: MLA with different K and V types, a quantized V with flash attention off, a quantized
   K or V whose block does not divide a head are refused; a quantized V with flash attention auto turns it on.
3. ``src/llama-model.cpp`` ``create_memory``: a recurrent architecture gets recurrent state only; a hybrid gets a KV
   cache for its attention layers and recurrent state for the others; the rest a KV cache, split in two
   (``llama_kv_cache_iswa``) where the architecture keeps a sliding window. NextN / MTP layers get no KV in the main
   context (the filter ``il < n_layer()``). ``v_trans = !flash_attn`` as asked (auto counts as on).
4. ``src/llama-kv-cache.cpp`` ``llama_kv_cache::llama_kv_cache``: per layer with KV, K ``[n_embd_k_gqa, kv_size,
   n_stream]`` and V ``[n_embd_v_gqa, kv_size, n_stream]`` (V absent for MLA; with flash attention explicitly off
   every V is as wide as the widest, ``n_embd_v_gqa_max``); ``n_stream = unified ? 1 : n_seq_max``.
5. ``src/llama-kv-cache-iswa.cpp``: the SWA cache holds ``GGML_PAD(min(n_ctx_seq, n_swa x (unified ? n_seq_max :
   1) + n_ubatch), 256)`` cells, or ``n_ctx_seq`` with ``swa_full``.
6. ``src/llama-memory-recurrent.cpp``: per recurrent layer, f32 R ``[n_embd_r, mem_size x (1 + n_rs_seq)]`` and S
   ``[n_embd_s, ...]``, ``mem_size = max(1, n_seq_max)``; ``src/llama-hparams.cpp`` ``n_embd_r`` / ``n_embd_s``.
7. Buffers (:mod:`.ggml`): each layer's tensors on its device (``model.dev_layer(il)`` when the KV is offloaded,
   else the CPU), each padded to its buffer type's alignment.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ...errors import KvcalcError
from ...specs import (ChunkedAttention, FullAttention, GatedDeltaNetState, Mamba1State, Mamba2State, MLALatent,
                      ShortConvState, SlidingWindowAttention)
from . import arch as A
from .ggml import F32, GgmlType, buffer_bytes, pad

LLAMA_MAX_SEQ = 256  # src/llama-cparams.h
CTX_PAD = 256  # llama-context.cpp: n_ctx = GGML_PAD(n_ctx, 256)
LLAMA4_CHUNK = 8192  # src/models/llama4.cpp: n_swa = 8192 whatever the config says
MIB = 1024 * 1024
#: llama-arch.cpp llm_arch_supports_rs_rollback: the architectures whose state keeps n_rs_seq extra rows a sequence
#: (speculative decoding's rollback; llama-server sets n_rs_seq only with an MTP / EAGLE3 draft)
RS_ROLLBACK = {"qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe"}


@dataclass(frozen=True)
class LayerCaches:
    """One layer as llama.cpp's caches see it: its widths (hparams) and which caches hold it (create_memory's
    filters, ``has_kv``)."""

    index: int
    k_width: int = 0  # n_embd_k_gqa(il)
    v_width: int = 0  # n_embd_v_gqa(il) (MLA: counted by n_embd_v_gqa_max, never stored)
    head_k: int = 0  # n_embd_head_k(il), for the block-divisibility checks
    head_v: int = 0
    swa: bool = False  # is_swa(il)
    kv: bool = False  # gets K (and V) tensors in the main context
    recurrent: bool = False  # gets R and S state rows
    nextn: bool = False  # a NextN / MTP layer (il >= n_layer())


@dataclass(frozen=True)
class ModelCaches:
    """The model's layers (all n_layer_all of them, NextN / MTP ones last) as llama.cpp's caches see them."""

    arch: str
    layers: tuple[LayerCaches, ...]
    n_swa: int | None  # the window of the SWA cache (None: no SWA cache)
    swa_type: str | None
    n_ctx_train: int | None
    mla: bool = False
    r_width: int = 0  # n_embd_r(), n_embd_s(): one size for every recurrent layer
    s_width: int = 0
    head_k_model: int = 0  # n_embd_head_k() (layer 0), for attn_rot
    head_v_model: int = 0
    notes: tuple[str, ...] = ()

    @property
    def n_layer(self) -> int:
        return sum(1 for lay in self.layers if not lay.nextn)

    @property
    def n_layer_all(self) -> int:
        return len(self.layers)

    @property
    def recurrent_only(self) -> bool:
        return self.arch in A.RECURRENT

    @property
    def hybrid(self) -> bool:
        return self.arch in A.HYBRID

    @property
    def has_state(self) -> bool:
        return any(lay.recurrent for lay in self.layers)

    @property
    def v_width_max(self) -> int:
        """hparams.n_embd_v_gqa_max(): the widest V over every layer, NextN ones included."""
        return max((lay.v_width for lay in self.layers), default=0)

    @property
    def v_variable(self) -> bool:
        """hparams.is_n_embd_v_gqa_variable()."""
        return len({lay.v_width for lay in self.layers}) > 1


def from_gguf(hp) -> ModelCaches:
    """A GGUF's layers, with create_memory's filters for its architecture (llama-model.cpp create_memory)."""
    arch = hp.arch  # a planned one: the GGUF importer refused the rest
    n_layer = hp.n_layer
    out = []
    for lay in hp.layers:
        il, main = lay.index, lay.index < n_layer
        if arch in A.RECURRENT:
            kv, recr = False, main
        elif arch in A.HYBRID:
            if arch == "falcon-h1":
                kv, recr = True, main
            elif arch in ("nemotron_h", "nemotron_h_moe"):
                kv, recr = not lay.recurrent and lay.n_ff == 0, main and lay.recurrent and lay.n_ff == 0
            elif arch in ("qwen3next", "qwen35", "qwen35moe"):
                kv, recr = main and not lay.recurrent, main and lay.recurrent
            else:  # llama_memory_hybrid's default filters: !is_recr(il) / is_recr(il)
                kv, recr = not lay.recurrent, main and lay.recurrent
        else:
            kv = hp.has_kv(il) and (main or hp.n_layer_nextn == 0 or n_layer == 0)
            recr = False
        kv = kv and hp.has_kv(il)
        out.append(LayerCaches(il, lay.k_width, lay.v_width, lay.head_k, lay.head_v, lay.swa, kv, recr, not main))
    return ModelCaches(arch, tuple(out), hp.n_swa if hp.swa_type else None, hp.swa_type, hp.n_ctx_train, hp.mla,
                       hp.n_embd_r, hp.n_embd_s, hp.layers[0].head_k, hp.layers[0].head_v, tuple(hp.notes))


def _check_arch(name: str, arch: str, layers) -> None:
    """A config's llama.cpp architecture must keep the caches its layers have."""
    if arch in A.RECURRENT and any(lay.kv for lay in layers):
        raise KvcalcError(f"{name}: llama.cpp architecture {arch} keeps recurrent state only, but the config has "
                          "attention layers (gguf_architecture does not match the layers)", param="model")
    if arch not in A.RECURRENT and arch not in A.HYBRID and any(lay.recurrent for lay in layers):
        raise KvcalcError(f"{name}: llama.cpp architecture {arch} keeps no recurrent state, but the config has "
                          "state layers (gguf_architecture does not match the layers)", param="model")


def model_caches(spec) -> ModelCaches:
    """The model's layers in llama.cpp's terms: a GGUF's as llama.cpp loads them; a config's through the
    architecture llama.cpp's converter gives it (refused where llama.cpp keeps a cache kvcalc does not model)."""
    # one piece: each cache kind's widths as llama.cpp's hparams derive them, kind by kind beside the converter's
    hp = getattr(spec, "gguf", None)
    if hp is not None:
        return from_gguf(hp)
    arch = A.llama_arch(spec)
    swa_type = A.SWA_TYPE.get(arch)
    notes: list[str] = []
    windows: set[int] = set()
    widths = {"r": set(), "s": set()}
    mla = False

    def layer(i: int, kind: str, nextn: bool) -> LayerCaches:
        nonlocal mla
        out: dict = {"index": i, "nextn": nextn}
        for name in spec.layer_kinds[kind]:
            comp = spec.components[name]
            t = type(comp)
            if t in (FullAttention, SlidingWindowAttention, ChunkedAttention):
                v = comp.v_head_dim if comp.v_head_dim is not None else comp.head_dim
                out.update(k_width=comp.kv_heads * comp.head_dim, v_width=comp.kv_heads * v, head_k=comp.head_dim,
                           head_v=v, kv=not nextn)
                if t is not FullAttention:
                    if swa_type is None:
                        if arch in A.WINDOW_DROPPED and A.WINDOW_DROPPED[arch] not in notes:
                            notes.append(A.WINDOW_DROPPED[arch])
                    else:
                        out["swa"] = not nextn
                        windows.add(LLAMA4_CHUNK if arch == "llama4" else
                                    (comp.chunk if t is ChunkedAttention else comp.window))
            elif t is MLALatent:
                # deepseek2: head_count_kv 1, key_length kv_lora_rank + rope (the latent), value_length kv_lora_rank
                # (conversion/deepseek.py); is_mla: K is the latent, no V (llama-kv-cache.cpp has_v = !is_mla())
                mla = True
                out.update(k_width=comp.dim, v_width=comp.dim - comp.rope_dim, head_k=comp.dim,
                           head_v=comp.dim - comp.rope_dim, kv=not nextn)
            elif t is Mamba1State:
                # n_embd_r = (d_conv - 1) x d_inner (no groups), n_embd_s = d_state x d_inner
                widths["r"].add((comp.conv_kernel - 1) * comp.intermediate)
                widths["s"].add(comp.state_size * comp.intermediate)
                out["recurrent"] = not nextn
            elif t is Mamba2State:
                inner = comp.intermediate if comp.intermediate is not None else comp.heads * comp.head_dim
                widths["r"].add((comp.conv_kernel - 1) * (inner + 2 * comp.groups * comp.state_size))
                widths["s"].add(comp.state_size * inner)
                out["recurrent"] = not nextn
            elif t is GatedDeltaNetState:
                # qwen3next / qwen35: d_inner = v_heads x v_head_dim, d_state = k_head_dim, n_group = k_heads
                inner = comp.v_heads * comp.v_head_dim
                widths["r"].add((comp.conv_kernel - 1) * (inner + 2 * comp.k_heads * comp.k_head_dim))
                widths["s"].add(comp.k_head_dim * inner)
                out["recurrent"] = not nextn
            elif t is ShortConvState:
                # lfm2: n_embd_r = n_embd x (l_cache - 1); n_embd_s = 0 (an empty S tensor)
                widths["r"].add(comp.hidden * (comp.conv_kernel - 1))
                widths["s"].add(0)
                out["recurrent"] = not nextn
            else:
                raise KvcalcError(f"{{{{engine}}}} llama.cpp: cache kind {comp.kind!r} (component {comp.name}) is not "
                                  f"one llama.cpp's {arch} architecture keeps, as kvcalc models it", param="engine")
        return LayerCaches(**out)

    layers = tuple(layer(i, k, False) for i, k in enumerate(spec.layers))
    layers += tuple(layer(len(layers) + i, k, True) for i, k in enumerate(spec.mtp_layers))
    _check_arch(spec.name, arch, layers)
    if spec.mtp_layers and arch in ("nemotron_h", "nemotron_h_moe"):
        notes.append("llama.cpp gives a nemotron_h NextN layer a KV cache where its feed_forward_length is 0 "
                     "(llama-model.cpp create_memory's filter); a config does not say, so its NextN layers are planned "
                     "without one (give the GGUF)")
    if len(windows) > 1:
        raise KvcalcError(f"{spec.name}: sliding windows of {sorted(windows)} tokens; llama.cpp keeps one n_swa",
                          param="model")
    for side in "rs":
        if len(widths[side]) > 1:
            raise KvcalcError(f"{spec.name}: recurrent layers of different state sizes; llama.cpp keeps one n_embd_"
                              f"{side}() for every layer", param="model")
    swa_type = swa_type if windows else None
    n_swa = windows.pop() if windows else None
    return ModelCaches(arch, layers, n_swa, swa_type, spec.max_context, mla, next(iter(widths["r"]), 0),
                       next(iter(widths["s"]), 0), layers[0].head_k, layers[0].head_v, tuple(notes))


# ---- the context -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cparams:
    """llama_context's parameters as it computes and logs them."""

    n_ctx: int  # after the padding and the per-stream rounding
    n_ctx_seq: int
    n_seq_max: int
    n_stream: int
    n_batch: int
    n_ubatch: int
    flash_attn: str  # as asked after llama_init_from_model: "auto", "enabled", "disabled"
    kv_unified: bool
    swa_full: bool
    type_k: GgmlType
    type_v: GgmlType
    offload_kqv: bool
    n_gpu_layers: int  # as llama.cpp counts them (n_layer_all + 1: every layer and the output)
    backend: str  # the buffer kind of the GPU: "cuda" (CUDA / HIP) or "metal"; "cpu" for a CPU-only build
    device: str  # the GPU buffer's name: CUDA0, ROCm0, Metal ("CPU" for a CPU-only build)
    n_ctx_train: int
    n_rs_seq: int = 0
    warnings: tuple[str, ...] = ()
    infos: tuple[str, ...] = ()


def _refuse(param: str, text: str) -> KvcalcError:
    return KvcalcError(f"{param}: llama.cpp refuses to start: {text}", param=param)


def context_params(mc: ModelCaches, *, n_ctx: int, n_seq_max: int, kv_unified: bool, n_batch: int, n_ubatch: int,
                   flash_attn: str, swa_full: bool, type_k: GgmlType, type_v: GgmlType, offload_kqv: bool = True,
                   n_gpu_layers: int = 0, backend: str = "cpu", device: str = "CPU", n_rs_seq: int = 0) -> Cparams:
    """llama_init_from_model's checks, then llama_context's constructor (see the module's steps 1 and 2)."""
    infos: list[str] = []
    warnings: list[str] = []
    if not 1 <= n_seq_max <= LLAMA_MAX_SEQ:
        raise _refuse("parallel", f"n_seq_max must be between 1 and {LLAMA_MAX_SEQ}, got {n_seq_max} "
                                  "(llama-cparams.h LLAMA_MAX_SEQ)")
    if n_batch == 0 and n_ubatch == 0:
        raise _refuse("batch_size", "n_batch and n_ubatch cannot both be zero")
    if n_ctx == 0 and not mc.n_ctx_train:
        raise _refuse("ctx_size", "n_ctx and model->hparams.n_ctx_train cannot both be zero")
    # llama_init_from_model (llama-context.cpp), in its order
    flash_attn = check_types(mc, type_k, type_v, flash_attn, infos)
    # llama_context::llama_context
    if mc.arch not in RS_ROLLBACK:  # "n_rs_seq=%u requested but model does not support ... clamping to 0"
        n_rs_seq = 0
    n_ctx = n_ctx or mc.n_ctx_train
    n_batch = min(n_ctx, n_batch)  # causal attention: on the unpadded n_ctx
    n_ubatch = min(n_batch, n_ubatch or n_batch)
    n_ctx = pad(n_ctx, CTX_PAD)
    if kv_unified:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = pad(n_ctx // n_seq_max, CTX_PAD)
        if n_ctx != n_ctx_seq * n_seq_max:
            n_ctx = n_ctx_seq * n_seq_max
            warnings.append(f"llama_context: n_ctx is not divisible by n_seq_max - rounding down to {n_ctx}")
    if n_batch < n_seq_max:
        raise KvcalcError(f"batch_size: llama.cpp {n_batch} < {n_seq_max} sequences: llama.cpp 0c1e57098 aborts "
                          "(llama-context.cpp: GGML_ASSERT(n_outputs_max <= cparams.n_outputs_max)) when n_batch, "
                          "min(n_ctx, {{batch_size}}), is smaller than {{parallel}}", param="batch_size")
    train = mc.n_ctx_train or 0
    if n_ctx_seq < train:
        infos.append(f"llama_context: n_ctx_seq ({n_ctx_seq}) < n_ctx_train ({train}) -- the full capacity of the "
                     "model will not be utilized")
    elif n_ctx_seq > train:
        warnings.append(f"llama_context: n_ctx_seq ({n_ctx_seq}) > n_ctx_train ({train}) -- possible training "
                        "context overflow")
    return Cparams(n_ctx, n_ctx_seq, n_seq_max, 1 if kv_unified else n_seq_max, n_batch, n_ubatch, flash_attn,
                   kv_unified, swa_full, type_k, type_v, offload_kqv, n_gpu_layers, backend, device, train, n_rs_seq,
                   tuple(warnings), tuple(infos))


def check_types(mc: ModelCaches, type_k: GgmlType, type_v: GgmlType, flash_attn: str, infos: list | None = None) -> str:
    """llama_init_from_model's refusals of cache types, in its order, in its words; the flash attention it then runs
    with (auto turns on for a quantized V, said in ``infos``)."""
    infos = [] if infos is None else infos
    if mc.mla and type_k.name != type_v.name:
        raise _refuse("cache_type_v", f"model does not support different K ({type_k.name}) and V ({type_v.name}) "
                                      "cache types")
    if type_v.quantized and flash_attn != "enabled":
        if flash_attn == "auto":
            infos.append("llama_init_from_model: enabling flash_attn since it is required for quantized V cache")
            flash_attn = "enabled"
        else:
            raise _refuse("flash_attn", "quantized V cache requires flash_attn to be enabled")
    for side, t in (("k", type_k), ("v", type_v)):
        if not t.quantized:
            continue
        for lay in mc.layers:
            head = lay.head_k if side == "k" else lay.head_v
            if lay.nextn or not head % t.blck_size:
                continue
            if flash_attn == "disabled" and mc.arch == "deepseek2":
                continue  # deepseek2's attention runs with such a K (seen on llama.cpp itself: the fixture)
            if flash_attn != "disabled":
                raise _refuse(f"cache_type_{side}", f"{side.upper()} cache type {t.name} with block size "
                                                    f"{t.blck_size} does not divide n_embd_head_{side}={head}")
            # flash attention off: llama_init_from_model lets it pass, and the first graph's per-head view of a
            # quantized K row aborts (ggml.c ggml_new_tensor_impl: GGML_ASSERT(view_src == NULL || ...))
            raise KvcalcError(f"cache_type_k: llama.cpp 0c1e57098 aborts at start-up: K cache type {t.name} (block "
                              f"{t.blck_size}) with n_embd_head_k={head} and flash attention off (a head's view of a "
                              "quantized row fails: ggml.c GGML_ASSERT(view_src == NULL || ...))", param="cache_type_k")
    return flash_attn


# ---- the caches --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CacheTensor:
    name: str  # cache_k_l0, cache_r_l3, ...
    layer: int
    side: str  # k, v, r, s
    type: GgmlType
    ne0: int
    rows: int  # ne1 x ne2: cells x streams, or state rows
    device: str  # the buffer it sits in: CPU, CUDA0, ...

    @property
    def nbytes(self) -> int:
        return self.type.row_size(self.ne0) * self.rows

    def buffer_bytes(self, backend: str) -> int:
        return buffer_bytes(self.type, self.ne0, self.nbytes, "cpu" if self.device == "CPU" else backend)


@dataclass(frozen=True)
class Cache:
    """One of llama.cpp's cache objects: a KV cache (non-SWA or SWA) or the recurrent state."""

    kind: str  # "kv", "swa", "recurrent"
    cells: int  # per stream as llama.cpp logs them (the recurrent state: its rows)
    logged_layers: int  # as the size line prints them (the recurrent line: n_layer(), every main layer)
    layers: tuple[int, ...]  # the layers with tensors here
    tensors: tuple[CacheTensor, ...]
    backend: str
    type_a: GgmlType  # K (R)
    type_b: GgmlType  # V (S)
    v_trans: bool = False
    head_k_all: int = 0  # n_embd_head_k_all / _v_all (-1: they differ), for the attn_rot lines
    head_v_all: int = 0

    def _sum(self, side: str) -> int:
        return sum(t.nbytes for t in self.tensors if t.side == side)

    @property
    def k_bytes(self) -> int:
        return self._sum("k")

    @property
    def v_bytes(self) -> int:
        return self._sum("v")

    @property
    def r_bytes(self) -> int:
        return self._sum("r")

    @property
    def s_bytes(self) -> int:
        return self._sum("s")

    @property
    def size_bytes(self) -> int:
        """The size line's bytes: the tensors' own, no padding (size_k_bytes() + size_v_bytes())."""
        return sum(t.nbytes for t in self.tensors)

    def buffers(self) -> dict[str, int]:
        """Each buffer's size (ggml_backend_buffer_get_size), by buffer name in llama.cpp's order (strcmp)."""
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.device] = out.get(t.device, 0) + t.buffer_bytes(self.backend)
        return dict(sorted(out.items()))

    @property
    def memory_bytes(self) -> int:
        return sum(self.buffers().values())

    def to_json(self) -> dict:
        return {"kind": self.kind, "cells": self.cells, "layers": self.logged_layers, "k_bytes": self.k_bytes,
                "v_bytes": self.v_bytes, "r_bytes": self.r_bytes, "s_bytes": self.s_bytes, "buffers": self.buffers()}


def _device(cp: Cparams, mc: ModelCaches, il: int) -> str:
    """llama-model.cpp load_tensors' layer placement: il on the GPU when i_gpu_start <= il and il - i_gpu_start <
    act_gpu_layers, i_gpu_start = max(n_layer_all + 1 - n_gpu_layers, 0); the KV follows the layer's device when
    offloaded (offload_kqv), else sits on the CPU (llama-kv-cache.cpp)."""
    if not cp.offload_kqv or cp.device == "CPU":
        return "CPU"
    start = max(mc.n_layer_all + 1 - cp.n_gpu_layers, 0)
    act = min(cp.n_gpu_layers, mc.n_layer_all + 1)
    return cp.device if start <= il and il - start < act else "CPU"


def _all(values) -> int:
    """n_embd_head_k_all: the one head size of the cache's layers, -1 when they differ, 0 with none."""
    vals = set(values)
    return vals.pop() if len(vals) == 1 else (-1 if vals else 0)


def allocate(mc: ModelCaches, cp: Cparams) -> tuple[Cache, ...]:
    """Every cache llama.cpp creates for this context, in its order: non-SWA KV, SWA KV, recurrent state."""
    out: list[Cache] = []
    v_trans = cp.flash_attn == "disabled"  # create_memory runs before auto is resolved: auto counts as on
    v_max = mc.v_width_max

    def kv(kind: str, cells: int, layers: list[LayerCaches]) -> Cache:
        tensors = []
        for lay in layers:
            dev = _device(cp, mc, lay.index)
            tensors.append(CacheTensor(f"cache_k_l{lay.index}", lay.index, "k", cp.type_k, lay.k_width,
                                       cells * cp.n_stream, dev))
            if not mc.mla:
                v = v_max if v_trans else lay.v_width
                tensors.append(CacheTensor(f"cache_v_l{lay.index}", lay.index, "v", cp.type_v, v,
                                           cells * cp.n_stream, dev))
        return Cache(kind, cells, len(layers), tuple(lay.index for lay in layers), tuple(tensors), cp.backend,
                     cp.type_k, cp.type_v, v_trans, _all(lay.head_k for lay in layers),
                     0 if mc.mla else _all(lay.head_v for lay in layers))

    attn = [lay for lay in mc.layers if lay.kv]
    if not mc.recurrent_only:
        if mc.swa_type is not None:
            out.append(kv("kv", cp.n_ctx_seq, [lay for lay in attn if not lay.swa]))
            if cp.swa_full:
                swa_cells = cp.n_ctx_seq
            else:
                swa_cells = pad(min(cp.n_ctx_seq, mc.n_swa * (cp.n_seq_max if cp.kv_unified else 1) + cp.n_ubatch),
                                CTX_PAD)
            out.append(kv("swa", swa_cells, [lay for lay in attn if lay.swa]))
        else:
            out.append(kv("kv", cp.n_ctx_seq, attn))
    if mc.recurrent_only or mc.hybrid:
        mem = max(1, cp.n_seq_max)
        rows = mem * (1 + cp.n_rs_seq)
        tensors = []
        recr = [lay for lay in mc.layers if lay.recurrent]
        for lay in recr:
            dev = _device(cp, mc, lay.index)
            tensors.append(CacheTensor(f"cache_r_l{lay.index}", lay.index, "r", F32, mc.r_width, rows, dev))
            tensors.append(CacheTensor(f"cache_s_l{lay.index}", lay.index, "s", F32, mc.s_width, rows, dev))
        out.append(Cache("recurrent", mem, mc.n_layer, tuple(lay.index for lay in recr), tuple(tensors), cp.backend,
                         F32, F32))
    return tuple(out)


# ---- the log -----------------------------------------------------------------------------------------------------
def _f32_mib(n: int) -> float:
    """(float) bytes / (1024.0f * 1024.0f), as the size lines compute it (in single precision)."""
    return struct.unpack("f", struct.pack("f", float(n)))[0] / MIB


def _attn_rot(t: GgmlType, head_all: int, model_head: int) -> int:
    """llama_kv_cache's attn_rot_k / _v: a quantized type, one head size over the cache's layers, a multiple of 64."""
    return int(head_all > 0 and t.quantized and model_head % 64 == 0)


def log_lines(mc: ModelCaches, cp: Cparams, caches: tuple[Cache, ...]) -> list[str]:
    """The lines llama.cpp logs for the context and its caches (the format strings of llama-context.cpp,
    llama-kv-cache.cpp, llama-kv-cache-iswa.cpp and llama-memory-recurrent.cpp), in its order."""
    out = [f"llama_context: n_seq_max             = {cp.n_seq_max}",
           f"llama_context: n_ctx                 = {cp.n_ctx}",
           f"llama_context: n_ctx_seq             = {cp.n_ctx_seq}",
           f"llama_context: n_batch               = {cp.n_batch}",
           f"llama_context: n_ubatch              = {cp.n_ubatch}",
           f"llama_context: flash_attn            = {cp.flash_attn}",
           f"llama_context: kv_unified            = {'true' if cp.kv_unified else 'false'}"]
    out += [w for w in cp.infos + cp.warnings if w.startswith("llama_context: n_ctx_seq")]
    swa = mc.swa_type is not None and not mc.recurrent_only
    for c in caches:
        if c.kind == "recurrent":
            for dev, b in c.buffers().items():
                out.append(f"llama_memory_recurrent: {dev:>10} RS buffer size = {b / MIB:8.2f} MiB")
            out.append(f"llama_memory_recurrent: size = {_f32_mib(c.size_bytes):7.2f} MiB ({c.cells:6d} cells, "
                       f"{c.logged_layers:3d} layers, {cp.n_seq_max:2d} seqs {cp.n_rs_seq:2d} rs_seq), R (f32): "
                       f"{_f32_mib(c.r_bytes):7.2f} MiB, S (f32): {_f32_mib(c.s_bytes):7.2f} MiB, P (f32): "
                       f"{0:7.2f} MiB")
            continue
        if swa:
            if c.kind == "kv" and cp.swa_full:
                out.append("llama_kv_cache_iswa: using full-size SWA cache (ref: "
                           "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)")
            label = "non-SWA" if c.kind == "kv" else "    SWA"
            out.append(f"llama_kv_cache_iswa: creating {label} KV cache, size = {c.cells} cells")
        if c.v_trans and mc.v_variable:
            out.append("llama_kv_cache: the V embeddings have different sizes across layers and FA is not enabled - "
                       f"padding V cache to {mc.v_width_max}")
        for dev, b in c.buffers().items():
            out.append(f"llama_kv_cache: {dev:>10} KV buffer size = {b / MIB:8.2f} MiB")
        out.append(f"llama_kv_cache: size = {_f32_mib(c.size_bytes):7.2f} MiB ({c.cells:6d} cells, "
                   f"{c.logged_layers:3d} layers, {cp.n_seq_max:2d}/{cp.n_stream} seqs), K ({cp.type_k.name}): "
                   f"{_f32_mib(c.k_bytes):7.2f} MiB, V ({cp.type_v.name}): {_f32_mib(c.v_bytes):7.2f} MiB")
        out.append(f"llama_kv_cache: attn_rot_k = {_attn_rot(cp.type_k, c.head_k_all, mc.head_k_model)}, "
                   f"n_embd_head_k_all = {c.head_k_all}")
        out.append(f"llama_kv_cache: attn_rot_v = {_attn_rot(cp.type_v, c.head_v_all, mc.head_v_model)}, "
                   f"n_embd_head_k_all = {c.head_v_all}")
    return out


@dataclass(frozen=True)
class Allocation:
    """One llama.cpp context: its parameters, its caches, and their bytes by device."""

    model: ModelCaches
    cparams: Cparams
    caches: tuple[Cache, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def memory_bytes(self) -> int:
        """Every cache and state buffer, as allocated (padded to the buffers' alignment)."""
        return sum(c.memory_bytes for c in self.caches)

    def device_bytes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.caches:
            for dev, b in c.buffers().items():
                out[dev] = out.get(dev, 0) + b
        return out

    @property
    def gpu_bytes(self) -> int:
        return sum(b for dev, b in self.device_bytes().items() if dev != "CPU")

    @property
    def cpu_bytes(self) -> int:
        return self.device_bytes().get("CPU", 0)

    def log_lines(self) -> list[str]:
        return log_lines(self.model, self.cparams, self.caches)
