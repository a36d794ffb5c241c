"""The typer app, the options several commands share (declared once), and engine options built from the
engines' own declarations."""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from typing import Optional

import typer

from ..engines import engine_names, engine_options, engine_summary, engine_title, engines, get_engine
from ..errors import KvcalcError, quote
from ..textout import write as write_out  # a closed pipe stops quietly (textout.PipeClosed)

_APP_SETTINGS = dict(
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="kvcalc: exact KV-cache memory for LLMs. Token counts take binary suffixes (1M = 1,048,576 tokens, "
    "128k = 131,072); bytes are printed in binary units (1 GiB = 2^30 B).",
)
app = typer.Typer(**_APP_SETTINGS)


class _Command(typer.core.TyperCommand):
    """kvcalc's help and usage, through click's public formatting hooks and typer's documented ``cls=``:

    * typer 0.28 writes a required argument as `{MODEL}` in the usage line; kvcalc's usage lines name it
      plainly (`kvcalc compare [OPTIONS] A B`), optional ones in brackets as usual;
    * options are listed in sections by their help panel (typer's ``rich_help_panel``, kept by typer on every
      option whether rich renders the help or not): the command's own first, then each engine's;
    * the help ends with the command's examples (:mod:`kvcalc.cli.examples`), verbatim."""

    examples: tuple[str, ...] = ()

    def collect_usage_pieces(self, ctx):
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx, formatter) -> None:
        sections: dict[str, list] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                default = "Arguments" if param.param_type_name == "argument" else "Options"
                sections.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(record)
        for name, rows in sections.items():
            with formatter.section(name):
                formatter.write_dl(rows)

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        if self.examples:
            formatter.write_paragraph()
            formatter.write("Examples:\n")
            for line in self.examples:
                formatter.write(f"  {line}\n")


def command(name: str, *args, **kwargs):
    from .examples import EXAMPLES

    cls = type(f"_{name.replace('-', '_')}_command", (_Command,), {"examples": EXAMPLES.get(name, ())})
    return app.command(name, *args, cls=cls, **kwargs)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        plans = ", ".join(e.title for e in engines() if e.version)
        print(f"kvcalc {__version__} (plans {plans})")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", help="Print the version and exit.", callback=_version,
                                       is_eager=True)) -> None:
    """kvcalc: exact KV-cache memory for LLMs."""


# ---- shared help and options ---------------------------------------------------------------------------------
CONTEXT_HELP = (
    "Context length in tokens: a plain integer or a binary suffix k/M/G (1M = 1,048,576; 128k = 131,072). "
    "Repeat the option or separate with commas for several."
)
HF_HELP = ("A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub "
           "when installed) instead of MODEL.")
HF_MANY_HELP = ("A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub "
                "when installed). Repeatable.")
PRECISION_HELP = "Storage precision as the model config names it (e.g. bf16, fp8), or 'all'. Repeatable."
BASIS_HELP = (
    "complete: everything a request holds (K/V, latents, window, compressed entries, indexer, compressor or SSM "
    "state; MTP with "
    "--mtp). article: what vLLM's DeepSeek V4 write-up counts (no state, no MTP)."
)
ENGINE_HELP = "; ".join(f"{n}: {engine_summary(n)}" for n in engine_names())


def model_arg():
    return typer.Argument(None, metavar="MODEL", show_default=False)


def hf_option(panel: str | None = None):
    return typer.Option(None, "--hf", help=HF_HELP, rich_help_panel=panel)


def json_option(help: str = "Print JSON."):
    return typer.Option(False, "--json", help=help)


def basis_option():
    return typer.Option("complete", "--basis", help=BASIS_HELP)


def engine_option(default: str, what: str = "", panel: str | None = None, several: bool = False):
    """--engine, its help built from the registry (each engine's name and summary): ``what`` says what the command
    does with it; ``several`` takes a comma-separated list, side by side."""
    more = "; several, comma-separated (e.g. vllm,sglang), side by side" if several else ""
    return typer.Option(default, "--engine", help=f"{what + ' ' if what else ''}One of {', '.join(engine_names())} "
                        f"({ENGINE_HELP}){more}.", rich_help_panel=panel)


def print_json(obj) -> None:
    write_out(json.dumps(obj, indent=2) + "\n")


def warn(lines) -> None:
    for line in lines:
        print(f"kvcalc: warning: {line}", file=sys.stderr)


def gpu_named(name: str):
    """The catalogue GPU ``--gpu`` names; a short name (a100, h100) is read as one card, and a warning says
    which."""
    from ..errors import with_names
    from ..hardware import alias_note, get_gpu

    dev = get_gpu(name)
    note = alias_note(name)
    if note:
        _AFTER.append(with_names(note, _flags()))
    return dev


#: warnings said once the command has succeeded (a refusal stays one line)
_AFTER: list[str] = []


def console():
    from ..textout import Console

    return Console()  # $COLUMNS or the terminal's width on a terminal, else $COLUMNS or 120


# ---- engine options ------------------------------------------------------------------------------------------

def _engine_params(command_name: str) -> list[tuple[str, object, inspect.Parameter]]:
    """(settings name, the declaring option, a typer parameter) for every engine option this command takes,
    one per flag."""
    owners: dict[str, list[str]] = {}  # a flag -> the engines that declare it, for its help section
    for name in engine_names():
        for opt in engine_options(name):
            if command_name in opt.commands:
                owners.setdefault(opt.flag, []).append(name)
    seen, out = set(), []
    for name in engine_names():
        for opt in engine_options(name):
            if command_name not in opt.commands or opt.flag in seen:
                continue
            seen.add(opt.flag)
            mine = sorted(owners[opt.flag], key=lambda n: -len(engine_options(n)))  # the engine it is most for first
            panel = f"{' and '.join(engine_title(n) for n in mine)} options"
            if opt.type is bool:
                info = typer.Option(opt.cli_default, f"{opt.flag}/{opt.negative}", help=opt.help, rich_help_panel=panel)
                ann = bool
            else:
                info = typer.Option(None, opt.flag, help=opt.help, rich_help_panel=panel)
                ann = Optional[opt.type]
            out.append((opt.name, opt, inspect.Parameter(f"engine__{opt.name}", inspect.Parameter.KEYWORD_ONLY,
                                                         default=info, annotation=ann)))
    return out


def with_engine_options(command_name: str):
    """Give the command every engine's options for it; the command gets them as ``engine_values`` (name ->
    value; None where the user gave none, or a boolean left at its default)."""
    def wrap(fn):
        params = _engine_params(command_name)
        sig = inspect.signature(fn, eval_str=True)
        base = [p for p in sig.parameters.values() if p.name != "engine_values"]

        def wrapper(**kwargs):
            values = {}
            for name, opt, param in params:
                v = kwargs.pop(param.name)
                values[name] = None if (opt.type is bool and v == opt.cli_default) else v
            return fn(engine_values=values, **kwargs)

        wrapper.__name__, wrapper.__doc__, wrapper.__module__ = fn.__name__, fn.__doc__, fn.__module__
        wrapper.__signature__ = sig.replace(parameters=base + [p for _, _, p in params])
        wrapper.__annotations__ = {p.name: p.annotation for p in wrapper.__signature__.parameters.values()}
        return wrapper
    return wrap


def engine_settings(engine: str, values: dict, *, gpu=None, model=None):
    """The engine's settings from the values its options took; a value given for another engine's option is
    refused with its flag."""
    eng = get_engine(engine)
    mine = {o.name for o in eng.options}
    for name, v in values.items():
        if v is not None and name not in mine:
            owner = next(n for n in engine_names() for o in engine_options(n) if o.name == name)
            raise KvcalcError(f"{name}: a setting of the {owner} engine, not of {eng.name} ({{{{engine}}}} {owner})",
                              param=name)
    return eng.settings({k: v for k, v in values.items() if k in mine}, gpu=gpu, model=model)


# ---- one main: errors to one line and an exit code ------------------------------------------------------------
def _usage_error(exc) -> str:
    """Click's usage errors (unknown option, missing argument, bad int) as one line."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "kvcalc"
    message = " ".join(exc.format_message().split())
    # a value echoed back is shortened: 5,000 digits given for an int are not worth 5,000 characters of error
    message = re.sub(r"'([^']{61,})'", lambda m: quote(m.group(1)), message)
    # ... and so is one click lists unquoted (extra arguments: "(sglang 1111...)")
    message = re.sub(r"[^\s'()]{61,}", lambda m: quote(m.group(0)), message)
    sub = command.split(" ", 1)[1] if " " in command else ""  # "kvcalc: error:" already names the program
    return _bounded(f"{sub + ': ' if sub else ''}{message} (see `{command} --help`)")


def main(argv: list[str] | None = None, application=None) -> None:
    try:
        rc = run(argv, application)
    except BrokenPipeError:  # `kvcalc ... | head`, wherever it happened
        _silence_stdout()
        rc = 0
    sys.exit(rc)


#: click's Abort (Ctrl-C at a prompt), through typer's public name where it has one
_ABORT = getattr(typer, "Abort", KeyboardInterrupt)


def _click_kind(exc: BaseException) -> str | None:
    """'help' for a bare `kvcalc`, 'usage' for any click error, None otherwise. Recognised by click's public
    exception API (``format_message`` and ``exit_code``, class names in the MRO), so it works whether typer
    vendors click (>= 0.27, a private module) or depends on it (< 0.27): no private import."""
    names = {c.__name__ for c in type(exc).__mro__}
    if "NoArgsIsHelpError" in names:
        return "help"
    if "ClickException" in names and callable(getattr(exc, "format_message", None)):
        return "usage"
    return None


def _one_command_app(argv: list[str] | None):
    """The app with only the command ``argv`` names (typer builds every registered command's parameters on each
    call, about 3 ms a command; one command line runs one). None when argv does not start with a command name:
    help, --version, completion and unknown names get the whole app, and its suggestions."""
    args = sys.argv[1:] if argv is None else argv
    if not args or not isinstance(args[0], str):
        return None
    chosen = [c for c in app.registered_commands
              if (c.name or c.callback.__name__.replace("_", "-")) == args[0]]
    if len(chosen) != 1:
        return None
    slim = typer.Typer(**_APP_SETTINGS)
    slim.registered_callback = app.registered_callback
    slim.registered_commands = chosen
    return slim


def run(argv: list[str] | None, application=None) -> int:
    """Run one command line; returns the exit code (errors printed as one line)."""
    try:
        return _run(argv, application)
    finally:
        _AFTER.clear()


def _run(argv: list[str] | None, application=None) -> int:
    try:
        target = (_one_command_app(argv) if application in (None, app) else None) or application or app
        rc = target(args=argv, prog_name="kvcalc", standalone_mode=False)
        if not rc:
            warn(dict.fromkeys(_AFTER))
    except KvcalcError as exc:
        print(f"kvcalc: error: {_bounded(exc.renamed(_flags()))}", file=sys.stderr)
        rc = exc.exit_code
    except BrokenPipeError:
        raise
    except (KeyboardInterrupt, _ABORT):
        rc = 130
    except Exception as exc:
        kind = _click_kind(exc)
        if kind == "help":  # bare `kvcalc`: the help, not an error
            print(exc.format_message())
            rc = 0
        elif kind == "usage":
            print(f"kvcalc: error: {_usage_error(exc)}", file=sys.stderr)
            rc = 2
        elif os.environ.get("KVCALC_DEBUG"):
            raise
        else:  # a bug: one line, never a traceback, unless asked for
            print(f"kvcalc: internal error: {type(exc).__name__}: {_bounded(str(exc))} (KVCALC_DEBUG=1 shows the "
                  "traceback)", file=sys.stderr)
            rc = 1
    return rc if isinstance(rc, int) else 0


#: the longest error line printed: every message quotes user input through errors.quote, so none should come near
#: this; it is the last guard, not the mechanism (the fuzz holds messages far shorter)
MAX_ERROR_CHARS = 2000


def _bounded(message: str) -> str:
    message = " ".join(message.split())  # one line, whatever a message carried
    if len(message) <= MAX_ERROR_CHARS:
        return message
    return f"{message[:MAX_ERROR_CHARS]}… (the message ran to {len(message):,} characters)"


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _flags() -> dict:
    from ..present.flags import FLAGS

    return FLAGS
