"""The one exception type the CLI turns into a single error line and exit code 2."""

from __future__ import annotations

import re

#: ``{{name}}`` in a message stands for the parameter ``name``: the library reads it as the name, the command
#: line as its flag (the library never writes a flag itself)
_REF = re.compile(r"\{\{(\w+)\}\}")


def with_names(text: str, names: dict[str, str] | None = None) -> str:
    """``text`` with every ``{{param}}`` replaced by ``names[param]`` (a flag), else by the parameter's name."""
    return _REF.sub(lambda m: (names or {}).get(m.group(1), m.group(1)), text)


class KvcalcError(Exception):
    """A user-facing error: bad input, an unknown name, an impossible value.

    The message is one line that names the file, field or argument at fault. The library names its own
    parameters (``batch: ...``); ``param`` says which one, so that the CLI can name its flag instead
    (``--batch: ...``) without the library knowing the command line. Other parameters a message refers to are
    written ``{{name}}`` and read the same way.
    """

    exit_code = 2

    def __init__(self, message: str, param: str | None = None):
        self.template = " ".join(str(message).split())
        super().__init__(with_names(self.template))
        self.param = param

    def renamed(self, names: dict[str, str]) -> str:
        """The message with its leading parameter name replaced by ``names[param]`` (a CLI flag), and every
        parameter it refers to by its flag."""
        text = with_names(self.template, names)
        if self.param in names and text.startswith(f"{self.param}:"):
            return names[self.param] + text[len(self.param):]
        return text
