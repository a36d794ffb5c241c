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


class NoRoom(KvcalcError):
    """A deployment whose memory cannot hold what it must: ``reason`` is ``"weights"`` (the weights, and the reserve
    or the engine's own share, leave no memory for the KV cache) or ``"kv"`` (the pool is smaller than one request).
    A search (``kvcalc fit``) reads the reason; the message is the engine's own."""

    def __init__(self, message: str, reason: str, param: str | None = None):
        super().__init__(message, param)
        self.reason = reason


#: how much of a value an error message quotes: enough to recognise it, never a file's worth
QUOTE_LIMIT = 60


def quote(value, limit: int = QUOTE_LIMIT) -> str:
    """A value for an error message, bounded: ``'128kk'`` as ``repr`` gives it when short, else its first
    ``limit`` characters and its length: ``'xxxx…' (100,000 characters)``. Every message that echoes what a
    user gave (a flag's value, a file's line, a name, a path) quotes it through here, so no input, however
    long, makes a long error."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit and (not isinstance(value, str) or len(repr(text)) <= limit + 2):
        return repr(text) if isinstance(value, str) else text
    n = min(len(text), limit)
    shown = repr(text[:n]) if isinstance(value, str) else text[:n]
    while n > 1 and len(shown) > limit + 2:  # escapes ('\x00' is four characters) count against the limit too
        n = n * (limit + 2) // len(shown) if len(shown) > 2 * limit else n - 1
        shown = repr(text[:n]) if isinstance(value, str) else text[:n]
    head = f"{shown[:-1]}…{shown[-1]}" if isinstance(value, str) else f"{shown}…"
    return f"{head} ({len(text):,} characters)"
