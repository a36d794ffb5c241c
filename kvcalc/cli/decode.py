"""`decode`: the cache bytes one decode step reads."""

from __future__ import annotations

from typing import Optional

import typer

from .app import command, console, hf_option, json_option, model_arg, print_json
from .files import one_model


@command("decode")
def decode_cmd(
    model: Optional[str] = model_arg(),
    hf: Optional[str] = hf_option(),
    context: str = typer.Option("1M", "--context", "-c", help="Tokens the sequence holds when the step reads."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision as the model config names it."),
    batch: int = typer.Option(1, "--batch", "-b", help="Sequences decoded in one step (the cache reads scale with it)."),
    as_json: bool = json_option(),
) -> None:
    """The cache bytes one decode step reads, by layer kind and component: dense caches in full, top-k selected
    entries, every indexer key scored, fixed state (read and written back)."""
    from ..config import load_model
    from ..decode import decode
    from ..present.decode import render_decode
    from ..units import parse_tokens

    spec = load_model(one_model(model, hf))
    d = decode(spec, parse_tokens(context, "--context"), precision=precision, batch=batch)
    if as_json:
        print_json(d.to_json())
    else:
        render_decode(console(), d)
