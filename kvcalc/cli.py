"""The command line. It parses, calls the library and renders; it computes nothing itself."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

import typer

from .errors import KvcalcError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="kvcalc: exact KV-cache memory for LLMs. Token counts take binary suffixes (1M = 1,048,576 tokens, "
    "128k = 131,072); bytes are printed in binary units (1 GiB = 2^30 B).",
)

CONTEXT_HELP = (
    "Context length in tokens: a plain integer or a binary suffix k/M/G (1M = 1,048,576; 128k = 131,072). "
    "Repeat the option or separate with commas for several."
)
PRECISION_HELP = "Storage precision as the model config names it (e.g. bf16, fp8), or 'all'. Repeatable."
BASIS_HELP = (
    "complete: everything a request holds (window, compressed entries, indexer, compressor state; MTP with "
    "--mtp). article: what vLLM's DeepSeek V4 write-up counts (no state, no MTP)."
)


#: the library's parameter names -> this command line's flags (the library never names a flag)
FLAGS = {
    "model": "MODEL", "context": "--context", "precision": "--precision", "basis": "--basis", "batch": "--batch",
    "mtp": "--mtp",
}


def _console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # `kvcalc show X | head`: stop quietly, not with rich's exit 1
            raise BrokenPipeError

    width = None if sys.stdout.isatty() else _env_width()
    # markup off: config text (sources, names) is printed as written, brackets included
    return _Console(highlight=False, markup=False, emoji=False, width=width, soft_wrap=False)


def _env_width() -> int:
    """Width when stdout is not a terminal: $COLUMNS if it is a sane number, else 120."""
    try:
        return max(40, min(int(os.environ.get("COLUMNS", "120")), 1000))
    except ValueError:
        return 120


def _warn(lines) -> None:
    for line in lines:
        print(f"kvcalc: warning: {line}", file=sys.stderr)


def _print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def _estimates(models, contexts, precisions, basis, batch, mtp, what="MODEL"):
    from .estimate import estimate
    from .config import load_model

    out = []
    for name in models:
        model = load_model(name, what)
        wanted = precisions or [model.default_precision]
        if "all" in wanted:
            wanted = list(model.precisions)
        for p in wanted:
            out.append(estimate(model, contexts, precision=p, basis=basis, batch=batch, mtp=mtp))
    return out


@app.command()
def estimate(
    models: Optional[List[str]] = typer.Argument(
        None, metavar="[MODEL]...", help="Config names (see `kvcalc models`) or YAML paths. None: the headline comparison."
    ),
    context: List[str] = typer.Option(["1M"], "--context", "-c", help=CONTEXT_HELP),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    basis: str = typer.Option("complete", "--basis", help=BASIS_HELP),
    batch: int = typer.Option(1, "--batch", "-b", help="Concurrent sequences, each at the full context."),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s) (speculative decoding on)."),
    by_layer: bool = typer.Option(False, "--by-layer", help="One row per layer instead of per layer kind."),
    vs: Optional[str] = typer.Option(None, "--vs", help="Reference model for the ratio column."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: a list, one object per model, precision and context."),
) -> None:
    """KV cache bytes per sequence at a context length, with a per-layer breakdown and its basis."""
    from . import report
    from .units import parse_token_list

    contexts = parse_token_list(context)
    headline = not models
    if headline:
        models = list(report.HEADLINE_MODELS)
        vs = vs or report.HEADLINE_REFERENCE
        precision = precision or ["all"]
    results = _estimates(models, contexts, precision, basis, batch, mtp)
    # the reference is counted on the same basis, batch and MTP setting as the rows it is compared with
    refs = _estimates([vs], contexts, ["all"], basis, batch, mtp, what="--vs") if vs else []
    _warn(dict.fromkeys(w for r in results + refs for w in r.warnings))
    if as_json:
        _print_json(report.estimates_json(results, refs))
        return
    con = _console()
    single = not headline and len(models) == 1 and len(results) == 1 and not refs
    if not single:
        report.render_summary(con, results, refs, headline=headline)
    if by_layer:
        for r in results:
            report.render_layers(con, r)
    elif not headline and len(models) == 1:
        for r in results:
            report.render_kinds(con, r)


@app.command()
def compare(
    model_a: str = typer.Argument(..., metavar="A"),
    model_b: str = typer.Argument(..., metavar="B"),
    context: List[str] = typer.Option(["1M"], "--context", "-c", help=CONTEXT_HELP),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision for both (default: each model's own)."),
    precision_b: Optional[str] = typer.Option(None, "--precision-b", help="Precision for B when it differs from A's."),
    basis: str = typer.Option("complete", "--basis", help=BASIS_HELP),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Compare two models (or two precisions of one) context by context."""
    from . import report
    from .estimate import estimate
    from .units import parse_token_list

    contexts = parse_token_list(context)
    from .config import load_model

    a = estimate(load_model(model_a, "A"), contexts, precision=precision, basis=basis, mtp=mtp)
    b = estimate(load_model(model_b, "B"), contexts, precision=precision_b or precision, basis=basis, mtp=mtp,
                 what="--precision-b" if precision_b else "--precision")
    _warn(dict.fromkeys(a.warnings + b.warnings))
    if as_json:
        _print_json(report.compare_json(a, b))
        return
    report.render_compare(_console(), a, b)


@app.command()
def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the shipped model configs."""
    from . import report
    from .config import config_names, load_model

    specs = [load_model(n) for n in config_names()]
    if as_json:
        _print_json([report.model_json(m) for m in specs])
        return
    report.render_models(_console(), specs)


@app.command()
def show(
    model: str = typer.Argument(..., metavar="MODEL"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a model's resolved layout: components, formats per precision, layer by layer, with sources."""
    from . import report
    from .config import load_model

    spec = load_model(model)
    if as_json:
        _print_json(report.model_json(spec, full=True))
        return
    report.render_show(_console(), spec)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the model config format (docs/config-format.md explains it)."""
    from .config import json_schema

    _print_json(json_schema())


@app.command()
def claims(
    file: Optional[str] = typer.Option(None, "--file", help="Claims file (default: the shipped reports/claims.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check every published number in reports/claims.yaml; exit 1 if any misses its tolerance."""
    from . import claims as claims_mod
    from . import report

    if file is not None and not file.strip():
        raise KvcalcError("--file: empty path")
    results = claims_mod.check(file)
    if as_json:
        _print_json([r.to_dict() for r in results])
    else:
        report.render_claims(_console(), results)
    failed = [r for r in results if not r.passed]
    if failed:
        raise typer.Exit(1)


def _usage_error(exc) -> str:
    """Click's usage errors (unknown option, missing argument, bad int) as one line."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "kvcalc"
    message = " ".join(exc.format_message().split())
    return f"{command}: {message} (see `{command} --help`)"


def main(argv: list[str] | None = None) -> None:
    try:
        rc = _run(argv)
    except BrokenPipeError:  # `kvcalc ... | head`, wherever it happened
        _silence_stdout()
        rc = 0
    sys.exit(rc)


def _run(argv: list[str] | None) -> int:
    from typer._click import exceptions as click_exc  # typer >= 0.27 vendors click

    try:
        rc = app(args=argv, prog_name="kvcalc", standalone_mode=False)
    except click_exc.NoArgsIsHelpError as exc:  # bare `kvcalc`: the help, not an error
        print(exc.format_message())
        rc = 0
    except click_exc.UsageError as exc:
        print(f"kvcalc: error: {_usage_error(exc)}", file=sys.stderr)
        rc = 2
    except KvcalcError as exc:
        print(f"kvcalc: error: {exc.renamed(FLAGS)}", file=sys.stderr)
        rc = exc.exit_code
    except BrokenPipeError:
        raise
    except (KeyboardInterrupt, click_exc.Abort):
        rc = 130
    except Exception as exc:  # a bug: one line, never a traceback, unless asked for
        if os.environ.get("KVCALC_DEBUG"):
            raise
        print(f"kvcalc: internal error: {type(exc).__name__}: {exc} (KVCALC_DEBUG=1 shows the traceback)", file=sys.stderr)
        rc = 1
    return rc if isinstance(rc, int) else 0


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
