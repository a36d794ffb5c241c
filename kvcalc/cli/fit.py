"""`fit`: which deployments serve a workload, as each engine plans them."""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import KvcalcError
from .app import command, console, hf_option, json_option, model_arg, print_json, with_engine_options
from .files import one_model


@command("fit")
@with_engine_options("capacity")
def fit_cmd(
    model: Optional[str] = model_arg(),
    hf: Optional[str] = hf_option(),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="Tokens a request holds (max_model_len). "
                                          "Without it (and with --concurrency, --gpu and --gpus): the longest context "
                                          "that fleet serves."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-n", help="Requests at once. Without it: the "
                                              "most requests each deployment holds at the context."),
    gpu: str = typer.Option("all", "--gpu", help="GPUs from `kvcalc gpus`, comma-separated, or 'all'."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Only fleets of exactly this many GPUs (a power of "
                                       "two)."),
    max_gpus: int = typer.Option(8, "--max-gpus", help="The largest fleet searched (GPU counts are powers of two)."),
    engine: str = typer.Option("vllm,sglang", "--engine", help="Engines, comma-separated (vllm, sglang, trtllm, "
                               "exact; llama.cpp answers through capacity)."),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help="Precisions, comma-separated or "
                                                  "repeated (default: every precision the model declares)."),
    request_tokens_file: Optional[str] = typer.Option(None, "--request-tokens-file", help="Request lengths, one a "
                                                      "line: the workload's concurrency (as capacity counts it)."),
    shared_prefix_tokens: Optional[str] = typer.Option(None, "--shared-prefix-tokens", help="A prefix every request "
                                                       "shares, held once where the engine shares it."),
    weights_gib: Optional[float] = typer.Option(None, "--weights-gib", help="Model weights in GiB, all ranks together "
                                                "(default: the model config's), as capacity takes them."),
    reserve_gib: Optional[float] = typer.Option(None, "--reserve-gib", help="Per-GPU reserve besides the weights "
                                                "(default: each engine's), as capacity takes it."),
    show_all: bool = typer.Option(False, "--all", help="Every deployment found, not only the smallest of each GPU, "
                                  "engine and precision."),
    as_json: bool = json_option(),
    engine_values: dict = None,
) -> None:
    """Every way to serve a model: for each GPU, engine and precision, the smallest deployment (GPUs, tp x pp x dp,
    expert parallelism) that holds the requests, exactly as the engine plans it, with why smaller ones fail; each
    row re-runs as `kvcalc capacity`. Engine options (capacity's) apply to the engines that take them."""
    from ..config import load_model
    from ..fit import best_per, fit, longest
    from ..present.fit import fit_json, longest_json, render_fit, render_longest, rerun_flags
    from ..units import parse_tokens

    spec = load_model(one_model(model, hf))
    precs, gpu_list = _flags(precision, gpu, engine, max_gpus, gpus, concurrency)
    from .capacity import _gib

    given = {k: v for k, v in engine_values.items() if v is not None}
    sizes = {"weights_bytes": _gib(weights_gib, "--weights-gib"), "reserve_bytes": _gib(reserve_gib, "--reserve-gib")}
    extra, flags = rerun_flags(engine, given, weights_gib, reserve_gib, request_tokens_file=request_tokens_file,
                               shared_prefix_tokens=shared_prefix_tokens)
    if context is None:
        if concurrency is None or gpus is None or gpu_list is None:
            raise KvcalcError("--context: give the context (tokens a request holds), or for the longest context a "
                              "fleet serves: --concurrency, --gpu and --gpus")
        if request_tokens_file is not None or shared_prefix_tokens is not None:
            raise KvcalcError("--request-tokens-file: a workload needs --context (the longest context of a fleet "
                              "takes requests at the full context)")
        rows, refused = longest(spec, concurrency, gpus=gpu_list, count=gpus, engines=engine, precisions=precs,
                                settings=given, **sizes)
        if as_json:
            print_json(longest_json(spec.name, concurrency, gpus, rows, refused, extra, flags))
        else:
            render_longest(console(), spec.name, concurrency, gpus, rows, refused, extra, flags)
        return
    from .capacity import _workload

    ctx = parse_tokens(context, "--context")
    if gpus is not None and gpus > max_gpus:
        max_gpus = gpus  # a fleet asked is searched whatever --max-gpus says
    workload = _workload(None, request_tokens_file, shared_prefix_tokens)
    if workload.get("shared_prefix_tokens", 0) > ctx:
        raise KvcalcError(f"--shared-prefix-tokens: {workload['shared_prefix_tokens']:,} tokens is longer than the "
                          f"context {ctx:,}")
    out = fit(spec, ctx, concurrency, gpus=gpu_list, engines=engine, precisions=precs, max_gpus=max_gpus,
              count=gpus, settings=given, **workload, **sizes)
    if as_json:
        print_json(fit_json(out, extra, flags))
    else:
        render_fit(console(), out, out.deployments if show_all else best_per(out), extra, flags)



def _flags(precision, gpu: str, engine: str, max_gpus: int, gpus, concurrency):
    """The search's flags checked: the precisions asked (None: every one) and the GPUs (None: every one)."""
    precs = [p for v in precision for p in v.split(",") if p.strip()] if precision else None
    if precision is not None and not precs:
        raise KvcalcError("--precision: give precision names (or leave it out for every one the model declares)")
    if not gpu.strip() or not engine.strip():
        raise KvcalcError(f"{'--gpu' if not gpu.strip() else '--engine'}: give one or more names, comma-separated")
    if not 1 <= max_gpus <= 64:
        raise KvcalcError(f"--max-gpus: from 1 to 64, got {max_gpus}")
    if gpus is not None and (not 1 <= gpus <= 64 or gpus & (gpus - 1)):
        raise KvcalcError(f"--gpus: a power of two from 1 to 64 (fleets of 1, 2, 4, 8 ... GPUs), got {gpus}")
    if concurrency is not None and not 1 <= concurrency <= 1 << 30:
        raise KvcalcError(f"--concurrency: from 1 to 2^30 requests, got {concurrency}")
    return precs, None if gpu.strip().lower() == "all" else gpu
