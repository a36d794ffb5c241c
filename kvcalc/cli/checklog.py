"""`check-log`: an engine's start-up log against kvcalc's plan."""

from __future__ import annotations

from typing import Optional

import typer

from .app import command, console, json_option, print_json, with_engine_options


#: the start-up lines come first: a log's first 64 MiB are read, whatever follows (a file, a pipe, /dev/zero)
LOG_LIMIT = 64 << 20


def _read(file: str) -> str:
    from ..inputs import read_text

    return read_text(file, "FILE", LOG_LIMIT, first=True, errors="replace")


@command("check-log")
@with_engine_options("check-log")
def check_log_cmd(
    file: str = typer.Argument(..., metavar="FILE", help="An engine's start-up log ('-' reads stdin)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="The engine that wrote the log (default: the one "
                                         "whose lines it holds)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="kvcalc model (default: matched by the log's Hugging Face id)."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision (default: from the log's kv_cache_dtype)."),
    tp: Optional[int] = typer.Option(None, "--tp", help="Tensor-parallel ranks (default: from the log, else 1)."),
    as_json: bool = json_option(),
    engine_values: dict = None,
) -> None:
    """Compare an engine's start-up log's KV cache figures with kvcalc's plan for the same settings."""
    from ..checklog import check_log
    from ..present.checklog import check_log_json, render_check_log

    out = check_log(_read(file), file, engine=engine, model=model, precision=precision, settings=engine_values, tp=tp)
    if as_json:
        print_json(check_log_json(out))
    else:
        render_check_log(console(), out)
    if out.verdict == "differs":
        raise typer.Exit(1)
