"""`transfer`: the bytes a request's cache moves from a prefill GPU to a decode GPU, and the time over a link."""

from __future__ import annotations

from typing import Optional

import typer

from ..engines import DEFAULT_ENGINE
from .app import (command, console, engine_option, engine_settings, hf_option, json_option, model_arg, print_json,
                  with_engine_options)
from .files import one_model

LINK_HELP = ("A link from the catalogue: nvlink4, nvlink5, ib-hdr, ib-ndr, ib-xdr, roce-400g, pcie4-x16, pcie5-x16 "
             "(default: the time over each).")
GPU_HELP = ("The GPU on both sides (`kvcalc gpus`): its architecture picks the engine's kernels, and so its block "
            "or page size and row format (default: Hopper's, as on an H100 or H200).")
BANDWIDTH_HELP = "Instead of --link: the link's rate in one direction, decimal GB/s."


@command("transfer")
@with_engine_options("transfer")
def transfer_cmd(
    model: Optional[str] = model_arg(),
    hf: Optional[str] = hf_option(),
    context: str = typer.Option("8k", "--context", "-c", help="Prompt tokens the prefill computed (the request's "
                                "cache at hand-off)."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision as the model config names it."),
    engine: str = engine_option(DEFAULT_ENGINE, "The engine whose connector moves the request's cache."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks on each side (the same on both)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help=GPU_HELP),
    link: Optional[str] = typer.Option(None, "--link", help=LINK_HELP),
    bandwidth: Optional[float] = typer.Option(None, "--bandwidth", help=BANDWIDTH_HELP),
    as_json: bool = json_option(),
    engine_values: dict = None,
) -> None:
    """The bytes one request's cache moves from the prefill GPU to the decode GPU after prefill, block- or
    page-granular as the engine's connector moves them (padding included), and the time over a link."""
    from ..config import load_model
    from ..present.transfer import render_transfer
    from ..transfer import transfer
    from ..units import parse_tokens

    spec = load_model(one_model(model, hf))
    dev = None
    if gpu is not None:
        from .app import gpu_named

        dev = gpu_named(gpu)
    settings = engine_settings(engine, engine_values or {}, gpu=dev, model=spec)
    t = transfer(spec, parse_tokens(context, "--context"), engine=engine, precision=precision, tp=tp, link=link,
                 bandwidth=bandwidth, settings=settings, gpu=dev)
    if as_json:
        from ..errors import with_names
        from ..present.flags import FLAGS

        print_json(t.to_json() | {"notes": [with_names(n, FLAGS) for n in t.plan.notes]})
    else:
        render_transfer(console(), t)
