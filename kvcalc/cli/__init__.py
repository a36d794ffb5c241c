"""The command line: a thin typer app (parse, call the library, render). It computes nothing itself; one
:func:`main` maps errors to one line and an exit code, naming the flag of the parameter at fault.

Commands live in the modules beside this one, each registering on :data:`app`.
"""

from __future__ import annotations

from . import app as _app
from . import capacity, checklog, decode, estimate, files, fit, info, transfer, verify  # noqa: F401  (each registers its commands)
from .app import app

__all__ = ["FLAGS", "app", "main", "run"]


def run(argv: list[str] | None) -> int:
    """Run one command line (``kvcalc`` + ``argv``); returns the exit code, errors printed as one line."""
    return _app.run(argv, app)


def main(argv: list[str] | None = None) -> None:
    """The console script: runs the command line and exits with its code."""
    _app.main(argv, app)


_run = run  # the name the tests and earlier scripts use


def __getattr__(name: str):
    """FLAGS (the parameters' flags) loads on first use: a command that fails no check never needs it."""
    if name == "FLAGS":
        from ..present.flags import FLAGS

        return FLAGS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
