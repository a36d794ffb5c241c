"""Which scale exponent does vLLM's V3.2 arithmetic give on this GPU? (issue 9.1; needs CUDA)

    python scripts/probe_log2.py [--out reports/verify/log2-probe.json]
    TRITON_INTERPRET=1 python scripts/probe_log2.py --device cpu   # the plumbing, with numpy's float32 log2

vLLM's V3.2 writers compute ``exp2(ceil(log2(scale)))`` with Triton's fp32 ``tl.math.log2``. kvcalc models
that two ways: the exact integer rule (the ``fp8_ds_mla`` / ``fp8_indexer_v32`` formats) and a correctly
rounded fp32 log2 (the ``*_fp32log2`` formats, ``kvcalc_kernels._bits.ceil_log2_fp32``). This runs vLLM's own
expression, ``tl.math.ceil(tl.math.log2(tl.div_rn(tl.maximum(amax, 1e-4), 448.0)))``, on the device for every
amax within 8 ulps of 448 * 2**k (k = -22 .. 20) and counts how often each model agrees. Exit 0 always (it
reports); the JSON says which model matches.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _vllm_exponent(a_ptr, o_ptr, n, MUL: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    amax = tl.load(a_ptr + i, mask=m, other=1.0)
    if MUL:  # the V3.2 latent (fused_norm_rope)
        s = tl.maximum(amax * (1.0 / 448.0), 1e-4)
    else:  # the V3.2 indexer (_fp8_ue8m0_quantize)
        s = tl.div_rn(tl.maximum(amax, 1e-4), 448.0)
    tl.store(o_ptr + i, tl.math.ceil(tl.math.log2(s)).to(tl.int32), mask=m)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cuda (the point), or cpu under TRITON_INTERPRET=1")
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        print("probe_log2: needs a CUDA GPU (or --device cpu with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    from kvcalc_kernels import reference as R
    from kvcalc_kernels import quant
    from kvcalc_kernels.formats import get_format

    base = np.array([(k + 8 + 127) << 23 | 0x600000 for k in range(-22, 21)], dtype=np.int64)
    amax_bits = (base[:, None] + np.arange(-8, 9)[None, :]).reshape(-1).astype(np.uint32)
    amax = torch.from_numpy(amax_bits.view(np.float32).copy())
    result = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (TRITON_INTERPRET)", "torch": torch.__version__, "triton": triton.__version__,
              "points": int(amax.numel()), "paths": {}}
    for path, mul, fmt_exact, fmt_fp32 in (("indexer (div_rn)", False, "fp8_indexer_v32", "fp8_indexer_v32_fp32log2"),
                                           ("latent (x 1/448)", True, "fp8_ds_mla", "fp8_ds_mla_fp32log2")):
        a = amax.to(dev)
        got = torch.empty(a.numel(), dtype=torch.int32, device=dev)
        _vllm_exponent[(triton.cdiv(a.numel(), 256),)](a, got, a.numel(), MUL=mul, BLOCK=256)
        got = got.cpu().long()
        # the two models, through the quantiser itself: one block whose amax is the probe value
        f_exact, f_fp32 = get_format(fmt_exact), get_format(fmt_fp32)
        rows = torch.full((amax.numel(), f_exact.dim), 1e-6, dtype=torch.float32)
        rows[:, 0] = amax
        exps = {}
        for name, f in (("exact", f_exact), ("fp32_log2", f_fp32)):
            rec = quant.quantize(rows.to(dev), f).cpu()
            sc = rec[:, f.scale_offset : f.scale_offset + 4].contiguous()
            exps[name] = (sc[:, 0].long() - 127) if f.scale_mx4 else \
                torch.frexp(sc.view(torch.float32)[:, 0])[1].long() - 1
            assert torch.equal(rec, R.quantize_ref(rows, f)), f"{f.name}: kernel and reference differ"
        result["paths"][path] = {name: int((e == got).sum()) for name, e in exps.items()}
        result["paths"][path]["differences_exact_vs_fp32_log2"] = int((exps["exact"] != exps["fp32_log2"]).sum())
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
