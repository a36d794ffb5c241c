#!/usr/bin/env python
"""Achieved bandwidth of the kvcalc_kernels Triton kernels on a GPU, against a device-to-device copy.

Usage (needs a CUDA GPU, torch and triton; ``pip install -e '.[verify]'``)::

    python benchmarks/bench_kernels.py                      # 1M tokens, writes reports/kernel_bench.{json,md}
    python benchmarks/bench_kernels.py --tokens 262144 --out /tmp/bench

Each kernel is first checked against its torch reference on a slice of the benchmark input (bytes exact
for records and state rows, the stated tolerance for compressor entries), then timed with
``triton.testing.do_bench`` (median).  Everything a timed call needs (caches, slot mappings, the compressor
state) is allocated before timing, and the timed calls skip the slot-range checks, so no host sync or
allocation other than a kernel's own output happens inside the timing.

Slot mappings are the ones vLLM builds: token ``t`` goes to ``block_table[t // block_size] * block_size +
t % block_size`` with the block table a random permutation of the pages, i.e. pages in shuffled order but
consecutive slots inside each page (not a fully random permutation of slots, which no engine produces).
Caches hold ``ceil(tokens / block_size)`` pages, so any ``--tokens`` works; the last page may be partly used.
The compressor is timed with ``update_state=False`` (the kernel that computes the entries); writing the
state rows is timed separately as ``save_states``.

Bandwidth counts the bytes a kernel must move: its inputs read once plus its outputs written once (small
tables such as ``ape`` or RMSNorm weights left out).  The copy baseline is ``dst.copy_(src)`` on a buffer
of --copy-gib GiB, counted as read + write.  Target: the compressor and the quantisers at >= 60% of the
copy bandwidth (an H200 copies at about 4.3 TB/s).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

TARGET = 0.60
MAIN_HD, IDX_HD, ROPE = 512, 128, 64


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=1 << 20, help="tokens per kernel call (default 1M)")
    ap.add_argument("--copy-gib", type=float, default=2.0, help="size of the copy baseline buffer")
    ap.add_argument("--rep", type=int, default=50, help="do_bench repetition time in ms")
    ap.add_argument("--out", type=Path, default=Path("reports"), help="folder for kernel_bench.json / .md")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--fp8", choices=["native", "bits", "both"], default="both",
                    help="fp8 encoder for the quantisers: Triton's cast, the integer encoder, or both")
    ap.add_argument("--dry-run-cpu", action="store_true",
                    help="exercise the script on CPU under the Triton interpreter (tiny sizes, timings meaningless)")
    args = ap.parse_args(argv)
    if args.tokens < 1:
        ap.error(f"--tokens: must be >= 1, got {args.tokens}")

    if args.dry_run_cpu:
        import os

        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    if not args.dry_run_cpu and not torch.cuda.is_available():
        print("bench_kernels: no CUDA device; these figures are still to be measured on a GPU.", file=sys.stderr)
        return 2
    import triton

    import kvcalc_kernels as KK
    from kvcalc_kernels import compressor as K
    from kvcalc_kernels import addressing as A
    from kvcalc_kernels import paged as P
    from kvcalc_kernels import quant as Q
    from kvcalc_kernels import reference as R

    dev = torch.device("cpu" if args.dry_run_cpu else "cuda")
    torch.manual_seed(0)
    N = args.tokens
    CHECK = min(4096, N)
    results: list[dict] = []

    def pages_for(tokens: int, block_size: int) -> int:
        return -(-tokens // block_size)  # ceil: a partly used last page

    def vllm_slots(tokens: int, block_size: int) -> "torch.Tensor":
        """Token t -> block_table[t // bs] * bs + t % bs, block table a random page order (as vLLM)."""
        table = torch.randperm(pages_for(tokens, block_size), device=dev)
        return A.slots_from_block_table(torch.arange(tokens, device=dev), table, block_size)

    def timed(fn) -> float:
        if args.dry_run_cpu:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        from triton.testing import do_bench

        return do_bench(fn, warmup=10, rep=args.rep, return_mode="median") * 1e-3

    # ---- copy baseline ----------------------------------------------------------------------------
    nbytes = int(args.copy_gib * (1 << 30)) if not args.dry_run_cpu else 1 << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_()
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src))
    copy_bw = 2 * nbytes / t
    del src, dst
    results.append(dict(kernel="device-to-device copy (torch copy_)", bytes=2 * nbytes, seconds=t,
                        gbps=copy_bw / 1e9, of_copy=1.0, target=None))
    print(f"copy: {copy_bw / 1e9:,.0f} GB/s")

    def record(name, moved, fn, target=True, check=None):
        if check is not None:
            check()
        t = timed(fn)
        bw = moved / t
        row = dict(kernel=name, bytes=int(moved), seconds=t, gbps=bw / 1e9, of_copy=bw / copy_bw,
                   target=TARGET if target else None)
        row["meets_target"] = None if not target else bool(bw / copy_bw >= TARGET)
        results.append(row)
        print(f"{name:76s} {bw / 1e9:9,.0f} GB/s  {100 * bw / copy_bw:5.1f}% of copy")
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    # ---- quantisers ---------------------------------------------------------------------------------
    impls = {"native": [True], "bits": [False], "both": [True, False]}[args.fp8]
    if args.dry_run_cpu:
        impls = [False]  # the interpreter's own fp8 cast is not exact
    for name in ["fp8_ds_mla_v4", "fp8_ds_mla", "fp8_indexer", "fp4_indexer", "bf16"]:
        f = KK.get_format(name, MAIN_HD)
        x = torch.randn(N, f.dim, device=dev, dtype=torch.bfloat16)
        moved = N * (2 * f.dim + f.entry_bytes)
        for native in impls if f.elem == "fp8" else [None]:
            tag = "" if native is None else (" [native fp8 cast]" if native else " [integer fp8 encoder]")

            def check(native=native):
                got = Q.quantize(x[:CHECK], name, native_fp8=native)
                assert torch.equal(got, R.quantize_ref(x[:CHECK], name)), f"{name}: bytes differ from reference"

            record(f"quantize {name} -> records{tag}", moved,
                   lambda native=native: Q.quantize(x, name, native_fp8=native), check=check)
            bs = 64
            cache = P.allocate_cache(name, pages_for(N, bs), bs, alignment=576, dim=f.dim, device=dev)
            slots = vllm_slots(N, bs)
            record(f"quantize {name} -> paged cache (bs 64, shuffled pages){tag}", moved,
                   lambda native=native: Q.quantize(x, name, cache=cache, slot_mapping=slots, block_size=bs,
                                                    check_bounds=False, native_fp8=native))
            del cache
        recs = Q.quantize(x, name)

        def dcheck():
            got = Q.dequantize(recs[:CHECK], name, dim=f.dim)
            assert torch.equal(got, R.dequantize_ref(recs[:CHECK], name, f.dim)), f"{name}: dequantize differs"

        record(f"dequantize {name} records -> fp32", N * (f.entry_bytes + 4 * f.dim),
               lambda: Q.dequantize(recs, name, dim=f.dim), target=False, check=dcheck)
        del x, recs
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    # ---- compressors --------------------------------------------------------------------------------
    for label, hd, ratio in [("c4a main (512, ratio 4, overlap)", MAIN_HD, 4),
                             ("c128a main (512, ratio 128)", MAIN_HD, 128),
                             ("indexer c4 (128, ratio 4, overlap)", IDX_HD, 4)]:
        coff = 2 if ratio == 4 else 1
        kv = torch.randn(N, coff * hd, device=dev, dtype=torch.bfloat16)
        score = torch.randn(N, coff * hd, device=dev, dtype=torch.bfloat16)
        ape = torch.randn(ratio, coff * hd, device=dev)
        w = torch.rand(hd, device=dev) + 0.5
        cs = torch.randn(N + ratio, ROPE, device=dev)
        n_out = N // ratio
        moved = N * coff * hd * 2 * 2 + n_out * hd * 2

        def ccheck():
            L = CHECK
            st = K.CompressorState.allocate(hd, ratio, device=dev)
            got = K.compress(kv[:L], score[:L], ape, st, norm_weight=w, cos_sin=cs, rope_dim=ROPE,
                             out_dtype=torch.float32)
            ref = R.compress_oneshot_ref(kv[:L].float(), score[:L].float(), ape, ratio, ratio == 4, w, 1e-6, cs,
                                         ROPE)
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)

        st = K.CompressorState.allocate(hd, ratio, device=dev)  # outside the timing (its checks sync)

        def run():
            # update_state=False: the state stays at position 0, so every call is the same full prefill
            K.compress(kv, score, ape, st, 0, norm_weight=w, cos_sin=cs, rope_dim=ROPE, update_state=False)

        record(f"compress {label}, +RMSNorm +RoPE, bf16 out", moved, run, check=ccheck)
        # state-slot writes as vLLM does them: every token of the step to its own slot
        T = N if coff * hd * 8 * N <= (8 << 30) else (8 << 30) // (coff * hd * 8)
        bs = 4 if ratio == 4 else 8
        row_bytes = 8 * coff * hd
        state = torch.empty(pages_for(T, bs), bs * row_bytes, dtype=torch.uint8, device=dev)
        pos = torch.arange(T, device=dev)
        slots = vllm_slots(T, bs)
        record(f"save_states {label} ({T} tokens)", T * (coff * hd * 4 + row_bytes),
               lambda: K.save_states(kv[:T], score[:T], ape, pos, state, slots, bs, ratio, check_bounds=False),
               target=False)
        del kv, score, state
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    # ---- record scatter -------------------------------------------------------------------------------
    recs = torch.randint(0, 256, (N, 584), dtype=torch.uint8, device=dev)
    cache = P.allocate_cache("fp8_ds_mla_v4", pages_for(N, 64), 64, alignment=576, device=dev)
    slots = vllm_slots(N, 64)
    record("scatter_records fp8_ds_mla_v4 -> paged (bs 64, shuffled pages)", 2 * N * 584,
           lambda: P.scatter_records(recs, "fp8_ds_mla_v4", cache, slots, 64, check_bounds=False), target=False)

    # ---- report -----------------------------------------------------------------------------------------
    meta = dict(
        gpu=torch.cuda.get_device_name() if dev.type == "cuda" else "CPU dry run (Triton interpreter)", torch=torch.__version__, triton=triton.__version__,
        python=platform.python_version(), tokens=N, copy_gib=args.copy_gib,
        date=time.strftime("%Y-%m-%d %H:%M:%S"), target_fraction_of_copy=TARGET,
    )
    if not args.no_write:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernel_bench.json").write_text(json.dumps(dict(meta=meta, results=results), indent=2) + "\n")
        lines = [
            "# kvcalc_kernels bandwidth",
            "",
            f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, {N:,} tokens per call, "
            f"{meta['date']}. Bandwidth = (bytes read + bytes written) / median time. "
            f"Target: compressor and quantisers >= {TARGET:.0%} of the copy.",
            "",
            "| kernel | GB/s | % of copy | target met |",
            "|---|---:|---:|---|",
        ]
        for r in results:
            met = "" if r.get("meets_target") is None else ("yes" if r["meets_target"] else "NO")
            lines.append(f"| {r['kernel']} | {r['gbps']:,.0f} | {100 * r['of_copy']:.1f} | {met} |")
        (args.out / "kernel_bench.md").write_text("\n".join(lines) + "\n")
        print(f"wrote {args.out / 'kernel_bench.json'} and {args.out / 'kernel_bench.md'}")
    missed = [r["kernel"] for r in results if r.get("meets_target") is False]
    if missed:
        print("below target: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
