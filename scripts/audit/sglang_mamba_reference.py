#!/usr/bin/env python
"""Independent reference for SGLang 0.5.23's Mamba state options (and DeepSeek V4's KV dtypes).

Runs SGLang's OWN server-argument resolution and state-pool sizing on the CPU, in a scratch venv that sees the
CPU torch (`python -m venv --system-site-packages /work/scratch/venv-sgl`, then `pip install --no-deps
sglang==0.5.23`, transformers==5.19.0 and the small pure-Python packages its imports ask for; never the project's
environment). Native kernel packages the probed code only imports (tvm_ffi, torchvision) are stubbed with
importable dummies (--stub). Not part of the suite: it writes tests/fixtures/engine-ref/sglang-0.5.23-mamba.json,
which tests/engines/sglang/test_sglang_mamba_reference.py holds kvcalc to.

What is SGLang's code here and what is ours:
  * SGLang's: ServerArgs(...).resolve_once() and check_server_args() (arg_groups/pipeline.py: the model overrides, handle_mamba_radix_cache
    with _mamba_radix_cache_resolution, validate_mamba_extra_buffer / validate_mamba_no_buffer,
    _pipeline_parallel_overlap_disable, ...), its refusals, the resolved record (resolved_view); after publish():
    the model's own state shape (mambaish_config(model_config).mamba2_cache_params.mamba_cache_per_req: configs/
    qwen3_next.py, nemotron_h.py, mamba_utils.py), KVCacheConfigurator._calculate_mamba_ratio,
    _handle_max_mamba_cache and resolve_max_num_reqs (called unbound on a stub holding only the fields they read);
    DeepSeek-V4-Flash's resolution at each --kv-cache-dtype and deepseek_v4_memory_pool.py DeepSeekV4TokenToKVPool
    built at the resolved dtype.
  * ours: the platform facts (override_platform: CUDA, SM90 or SM100), the rank placement (world rank 0), the
    stub's fields (pp_size, attn_dp_size, model_config.context_len, no speculative decoding, no ReplaySSM), the
    budget handed to _handle_max_mamba_cache (rest_gib), and the token count handed to resolve_max_num_reqs
    (int(available // cell) on the page, cell = full-attention layers x KV heads per rank x (head_dim + v_head_dim)
    x 2 B: DefaultPoolConfigurator._compute_cell_size's MHA formula, written out here).

Usage (from the checkout):
  /work/scratch/venv-sgl/bin/python scripts/audit/sglang_mamba_reference.py [--out PATH] [--stub MOD ...]
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import itertools
import json
import logging
import os
import sys
import tempfile
import types
import warnings
from pathlib import Path
from types import SimpleNamespace as NS
from unittest import mock

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


# ---- stubs for native packages the probed modules import but never call ---------------------------------------
class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Dummy

    def __or__(cls, other):
        return Dummy

    __ror__ = __or__

    def __getitem__(cls, item):
        return Dummy


class Dummy(metaclass=_Meta):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]  # a decorator
        return Dummy()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Dummy()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Dummy


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


# ---- the grid -----------------------------------------------------------------------------------------------------
#: kvcalc catalogue name -> the config.json SGLang reads (tests/fixtures/hf), and the full-attention cell per tp
MODELS = {
    # 12 full layers (every 4th of 48), 2 KV heads of 256 + 256: 2 // tp heads per rank (at least 1)
    "qwen3-next-80b-a3b": ("qwen3-next-80b-a3b.json", lambda tp: 12 * max(1, 2 // tp) * 512 * 2, 131072),
    # 10 attention layers of 118, 8 KV heads of 128 + 128; its derived context_len is 8,192
    "nemotron-h-56b": ("nemotron-h-56b-base-8k.json", lambda tp: 10 * max(1, 8 // tp) * 256 * 2, 8192),
    # 8 full layers of 32, 4 KV heads of 256 + 256
    "qwen3.5-9b": ("qwen3.5-9b.json", lambda tp: 8 * max(1, 4 // tp) * 512 * 2, 131072),
}
GRID = dict(sm=(90, 100), strategy=("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"),
            disable_overlap_schedule=(False, True), disable_radix_cache=(False, True), page_size=(None, 64, 100),
            pp=(1, 2))
#: the sizing variants run on every case SGLang accepts at the default page (tp 2, a 40 GiB rest)
SIZINGS = ({}, {"max_running_requests": 64}, {"max_mamba_cache_size": 200})
TP, REST_GIB = 2, 40.0


def platform(sm: int) -> dict:
    return dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
                is_sm90=sm == 90, is_sm100=sm == 100, is_sm100_or_sm110=sm == 100, is_sm110=False, is_sm120=False,
                is_blackwell=sm == 100, is_hopper_with_cuda_12_3=sm == 90, has_amx=False, has_flashinfer=True,
                device_sm=sm, device_capability=(sm // 10, 0))


def resolve(model_dir: Path, sm: int, kw: dict, tp: int = TP):
    """SGLang's resolution of one command line: (the resolved record's view, None) or (None, the refusal)."""
    from sglang.srt.arg_groups.model_override_base import resolved_view
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.server_args import ServerArgs

    with override_platform(**platform(sm)), mock.patch("torch.cuda.get_device_capability",
                                                      return_value=(sm // 10, 0)), \
            mock.patch("torch.cuda.is_available", return_value=True):
        sa = ServerArgs(model_path=str(model_dir), tp_size=tp, **kw)
        try:
            sa.resolve_once()
            sa.check_server_args()  # entrypoints/engine.py runs it next (validation_hook.py check_server_args)
        except (AssertionError, ValueError, RuntimeError) as e:
            return None, None, f"{type(e).__name__}: {e}"
        return sa, resolved_view(sa), None


def sizing(sa, sm: int, cell: int, context: int) -> dict:
    """_calculate_mamba_ratio, _handle_max_mamba_cache and resolve_max_num_reqs: SGLang's code on a stub."""
    from sglang.srt.arg_groups.model_override_base import model_config_of, resolved_view
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator as K
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.runtime_context import SpawnRanks, get_schedule, override_platform, publish

    with override_platform(**platform(sm)):
        publish(sa, role="test", ranks=SpawnRanks(world_rank=0))
        mc = model_config_of(sa)
        mamba = mambaish_config(mc)
        stub = NS(mambaish_config=mamba, pp_size=sa.pp_size, attn_dp_size=1,
                  model_config=NS(num_hidden_layers=mc.num_hidden_layers, context_len=context),
                  fused_entry_bytes=lambda name: None, spec_algorithm=NS(is_none=lambda: True),
                  hybrid_gdn_config=None, hybrid_kda_config=None, extra_mamba_cache_bytes_per_req=0)
        stub._calculate_mamba_ratio = lambda: K._calculate_mamba_ratio(stub)
        out = {"mamba_cache_per_req": mamba.mamba2_cache_params.mamba_cache_per_req}
        try:
            out["mamba_ratio"] = K._calculate_mamba_ratio(stub)
        except AssertionError as e:  # the lazy strategy without the overlap scheduler
            return {**out, "refused": f"AssertionError: {e}"}
        try:
            rest = K._handle_max_mamba_cache(stub, REST_GIB)
        except RuntimeError as e:
            return {**out, "refused": f"RuntimeError: {e}"}
        out["max_mamba_cache_size"] = get_schedule().max_mamba_cache_size
        if rest <= 0:  # _profile_available_bytes raises its "Loaded weights leave no GPU memory" ValueError
            return {**out, "refused": "rest_memory <= 0 after the state pool (_profile_available_bytes)"}
        out["available_bytes"] = available = int(rest * GIB)
        if sa.pp_size == 1:  # one stage: the cell is the whole model's (see the module docstring)
            page = resolved_view(sa).page_size or 1
            tokens = int(available // cell) // page * page
            out.update(cell=cell, max_total_num_tokens=tokens)
            try:
                out["max_running_requests"] = K.resolve_max_num_reqs(stub, tokens)
            except RuntimeError as e:
                out["refused"] = f"RuntimeError: {e}"
        return out


def v4_kv_dtype_probe(tmp: Path) -> dict:
    """DeepSeek-V4-Flash at each --kv-cache-dtype: SGLang's resolution (overrides.py _deepseek_v4_kv_cache_dtype and
    the V4 overrides), then DeepSeekV4TokenToKVPool built at the resolved dtype on the CPU with small sizes (SWA
    1,024 tokens, 512 c4 / 16 c128 entries, 43 layers: 2 window-only, 20 c4 / c128 pairs, 1 window-only)."""
    import traceback

    import torch

    from sglang.srt.runtime_context import SpawnRanks, override_platform, publish

    d = tmp / "deepseek-v4-flash"
    d.mkdir()
    (d / "config.json").write_text((ROOT / "tests/fixtures/hf/deepseek-v4-flash.json").read_text())
    torch_dtype = {"bfloat16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}
    out = {}
    for dt in ("fp8_e4m3", "bfloat16", "float16"):
        sa, view, refused = resolve(d, 90, {"kv_cache_dtype": dt}, tp=1)
        if refused:
            out[dt] = {"refused": refused, "at": "resolution"}
            continue
        rec = {"resolved": {k: getattr(view, k) for k in ("kv_cache_dtype", "page_size", "swa_full_tokens_ratio",
                                                          "max_running_requests", "dsv4_attn_backend")}}
        with override_platform(**platform(90)):
            publish(sa, role="test", ranks=SpawnRanks(world_rank=0))
            from sglang.srt.mem_cache.deepseek_v4_memory_pool import DeepSeekV4TokenToKVPool

            ratios = [0, 0] + [4, 128] * 20 + [0]
            try:
                pool = DeepSeekV4TokenToKVPool(
                    max_num_reqs=2, swa_size=1024, c4_size=512, c128_size=16, c4_state_pool_size=32,
                    c128_state_pool_size=384, page_size=256, swa_page_size=256, dtype=torch_dtype[dt],
                    c4_state_dtype=torch.float32, c128_state_dtype=torch.float32, qk_nope_head_dim=448,
                    qk_rope_head_dim=64, indexer_head_dim=128, layer_num=len(ratios), device="cpu",
                    enable_memory_saver=False, compression_ratios=ratios, sliding_window=128)
                buf = pool.swa_kv_pool.kv_buffer[0]
                rec["swa_kv_buffer"] = {"shape": list(buf.shape), "dtype": str(buf.dtype)}
            except AssertionError as e:
                tb = traceback.extract_tb(e.__traceback__)[-1]
                rec["refused"] = f"AssertionError: {e}"
                rec["at"] = f"{tb.filename.split('site-packages/')[-1]}:{tb.lineno}: {tb.line}"
        out[dt] = rec
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests/fixtures/engine-ref/sglang-0.5.23-mamba.json"))
    ap.add_argument("--stub", nargs="*", default=["torchvision", "tvm_ffi"])
    args = ap.parse_args()
    import transformers.utils.import_utils  # noqa: F401  (before the stubs: it probes torchvision's metadata)

    sys.meta_path.insert(0, _StubFinder(args.stub))
    logging.disable(logging.WARNING)
    import sglang
    import torch

    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (fixture, cell, context) in MODELS.items():
            d = Path(tmp) / name
            d.mkdir()
            (d / "config.json").write_text((ROOT / "tests/fixtures/hf" / fixture).read_text())
            keys = list(GRID)
            for values in itertools.product(*GRID.values()):
                g = dict(zip(keys, values))
                kw = dict(mamba_radix_cache_strategy=g["strategy"], disable_overlap_schedule=g["disable_overlap_schedule"],
                          disable_radix_cache=g["disable_radix_cache"], pp_size=g["pp"])
                if g["page_size"] is not None:
                    kw["page_size"] = g["page_size"]
                for extra in SIZINGS if g["page_size"] is None else ({},):
                    sa, view, refused = resolve(d, g["sm"], {**kw, **extra})
                    case = {"case": len(cases), "inputs": {"kvcalc_model": name, "tp": TP, **g, **extra,
                                                           "rest_gib": REST_GIB, "context": context}}
                    if refused:
                        case["refused"] = refused
                    else:
                        case["resolved"] = {k: getattr(view, k) for k in (
                            "mamba_radix_cache_strategy", "disable_overlap_schedule", "disable_radix_cache",
                            "page_size", "attention_backend")}
                        case["sizing"] = sizing(sa, g["sm"], cell(TP), context)
                    cases.append(case)
                    if refused:
                        break  # the sizing variants do not change a refusal of the flags themselves
        v4 = v4_kv_dtype_probe(Path(tmp))
    out = {"generated_by": "scripts/audit/sglang_mamba_reference.py", "sglang_version": sglang.__version__,
           "torch_version": torch.__version__,
           "assumptions": ["CUDA (override_platform), SM90 = H100/H200, SM100 = B200; tp 2, world rank 0",
                           "no speculative decoding, no ReplaySSM, the default triton linear-attention backend",
                           "rest_gib is the budget _handle_max_mamba_cache receives (after the weights)",
                           "the token count handed to resolve_max_num_reqs is int(available // cell) on the page"],
           "num_cases": len(cases), "dsv4_kv_cache_dtype": v4, "cases": cases}
    Path(args.out).write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
