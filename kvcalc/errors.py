"""The one exception type the CLI turns into a single error line and exit code 2."""


class KvcalcError(Exception):
    """A user-facing error: bad input, an unknown name, an impossible value.

    The message is one line that names the file, field or argument at fault.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
