"""`decode`: the cache bytes one decode step reads."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import KvcalcError

from .app import command, console, hf_option, json_option, model_arg, print_json
from .files import one_model

GPU_HELP = ("Also price the whole step on this GPU (`kvcalc gpus`): the weights read at --batch (for MoE the "
            "expected distinct experts), and the bandwidth floor of a step and ceiling of tokens per second.")
WEIGHTS_HELP = "With --gpu: the weights in GiB, read in full every step (default: the model config's)."


@command("decode")
def decode_cmd(
    model: Optional[str] = model_arg(),
    hf: Optional[str] = hf_option(),
    context: str = typer.Option("1M", "--context", "-c", help="Tokens the sequence holds when the step reads."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision as the model config names it."),
    batch: int = typer.Option(1, "--batch", "-b", help="Sequences decoded in one step (the cache reads scale with it)."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks: every figure is one rank's (KV heads, recurrent "
                           "state and weights split; latents and indexer keys whole on every rank)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help=GPU_HELP),
    weights_gib: Optional[float] = typer.Option(None, "--weights-gib", help=WEIGHTS_HELP),
    as_json: bool = json_option(),
) -> None:
    """The cache bytes one decode step reads, by layer kind and component: dense caches in full, top-k selected
    entries, every indexer key scored, fixed state (read and written back)."""
    from ..config import load_model
    from ..decode import decode
    from ..present.decode import render_decode
    from ..units import parse_tokens

    spec = load_model(one_model(model, hf))
    d = decode(spec, parse_tokens(context, "--context"), precision=precision, batch=batch, tp=tp)
    floor = None
    if gpu is not None:
        from ..decode import step_floor
        from .app import gpu_named
        from .capacity import _gib

        floor = step_floor(d, spec, gpu_named(gpu), weights_bytes=_gib(weights_gib, "--weights-gib"))
        if not floor.fits:  # a floor for a step no GPU here can hold is no answer: refused, as capacity refuses it
            raise KvcalcError(floor.does_not_fit_template, param="gpu")
    elif weights_gib is not None:
        raise KvcalcError("--weights-gib: is read only with --gpu (the weights a step reads)")
    from ..present.decode import precision_basis

    why = precision_basis(spec, d.precision, asked=precision is not None)
    if as_json:
        print_json(d.to_json() | ({"step": floor.to_json()} if floor else {}) | {"precision_basis": why})
    else:
        render_decode(console(), d, floor)
        if precision is None:  # said where kvcalc chose it
            console().print(f"Precision: {why}.")
