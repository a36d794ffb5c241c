"""The one exception type the CLI turns into a single error line and exit code 2."""


class KvcalcError(Exception):
    """A user-facing error: bad input, an unknown name, an impossible value.

    The message is one line that names the file, field or argument at fault. The library names its own
    parameters (``batch: ...``); ``param`` says which one, so that the CLI can name its flag instead
    (``--batch: ...``) without the library knowing the command line.
    """

    exit_code = 2

    def __init__(self, message: str, param: str | None = None):
        super().__init__(" ".join(str(message).split()))
        self.param = param

    def renamed(self, names: dict[str, str]) -> str:
        """The message with its leading parameter name replaced by ``names[param]`` (a CLI flag)."""
        text = str(self)
        if self.param in names and text.startswith(f"{self.param}:"):
            return names[self.param] + text[len(self.param):]
        return text
