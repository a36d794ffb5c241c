"""The declaration of an engine setting a user may set (kept apart from :mod:`.base` so that the command line
can build its flags from every engine's declarations without importing the engines themselves)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import KvcalcError, quote


#: a setting's type -> the Python types it takes (a bool is no number here) and how a message names it
_EXPECTED = {bool: ((bool,), "a boolean"), int: ((int,), "a whole number"), float: ((int, float), "a number"),
             str: ((str,), "a string")}


@dataclass(frozen=True)
class Option:
    """One engine setting a user may set: the settings field (``name``), the engine's own flag and help
    text, the commands that take it, and its type. ``default=None`` on the command line means "the engine's
    default" (which may depend on the GPU or the model: :meth:`Engine.settings`)."""

    name: str
    flag: str
    help: str
    type: type = int
    commands: tuple[str, ...] = ("capacity",)
    choices: tuple[str, ...] = ()
    negative: str | None = None  # a boolean's off flag, e.g. --no-async-scheduling
    cli_default: Any = None  # shown on the command line when the default is fixed (booleans)
    minimum: float | None = None
    maximum: float | None = None

    def check(self, value: Any) -> Any:
        """The value, checked against choices and bounds (the message names the parameter)."""
        if value is None:
            return None
        kinds, what = _EXPECTED.get(self.type, ((object,), "a value"))
        if not isinstance(value, kinds) or (isinstance(value, bool) and self.type is not bool):
            raise KvcalcError(f"{self.name}: expected {what}, got {quote(value)}"[:200], param=self.name)
        if self.choices and value not in self.choices:
            raise KvcalcError(f"{self.name}: choose one of {', '.join(self.choices)}, got {quote(value)}"[:200],
                              param=self.name)
        if self.minimum is not None and self.maximum is not None and self.type in (int, float):
            ok = value == value and self.minimum <= value <= self.maximum
            if not ok:
                raise KvcalcError(f"{self.name}: must be from {_num(self.minimum)} to {_num(self.maximum)}, got "
                                  f"{value}", param=self.name)
        return value


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"
