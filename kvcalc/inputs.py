"""Every file kvcalc reads (a model's YAML, a config.json, a claims file, an engine's log, a lengths file) is read
through :func:`read_bytes`: at most a stated number of bytes, whatever the path names. A regular file larger than
the limit is refused (or, for a log, its first bytes read, as the caller asks); a device such as ``/dev/zero``, a
FIFO or standard input is read up to the limit and no further, so no input, however long or endless, makes kvcalc
read past it. A folder, a missing file and an unreadable one are refused in one line naming the path.

Torch-free, no third-party import.
"""

from __future__ import annotations

import os
import stat
import sys

from .errors import KvcalcError, quote

MIB = 1 << 20

_KIND = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """'a regular file', 'a folder', 'a character device', ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    return next((name for test, name in _KIND if test(mode)), "not a regular file")


def _refuse(what: str | None, shown: str, why: str) -> KvcalcError:
    """'--flag: 'path' is a folder' where a flag named the path; ''path': is a folder' where the file is the
    subject (a config's own errors lead with it too)."""
    return KvcalcError(f"{what}: {shown} {why}" if what else f"{shown}: {why}")


def read_bytes(path: str | os.PathLike, what: str | None, limit: int, *, first: bool = False) -> bytes:
    """The bytes of ``path`` ('-': standard input), at most ``limit`` of them. With ``first`` the first ``limit``
    bytes of a longer input are the answer (a log's start-up lines come first); without it a longer input is
    refused. ``what`` leads every error (the flag or argument that named the path; None: the path itself)."""
    if str(path) == "-":
        stream = getattr(sys.stdin, "buffer", None)  # a replaced sys.stdin (a test's StringIO) has none
        data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode("utf-8")
        return _bounded(data, "standard input", what, limit, first)
    shown = quote(os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise _refuse(what, shown, "does not exist (no such file)") from None
    except IsADirectoryError:
        raise _refuse(what, shown, "is a folder, not a file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise _refuse(what, shown, f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise _refuse(what, shown, "is a folder, not a file")
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 24, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise _refuse(what, shown, f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return _bounded(b"".join(chunks), f"{shown} ({kind_of(mode)})" if not stat.S_ISREG(mode) else shown, what,
                    limit, first)


def _bounded(data: bytes, shown: str, what: str | None, limit: int, first: bool) -> bytes:
    if len(data) <= limit:
        return data
    if first:
        return data[:limit]
    raise _refuse(what, shown, f"holds more than {limit / MIB:g} MiB: too large for this kind of input")


def read_text(path: str | os.PathLike, what: str | None, limit: int, *, first: bool = False,
              errors: str = "strict") -> str:
    """:func:`read_bytes` decoded as UTF-8 (``errors='replace'`` for logs, whose odd bytes are not their lines)."""
    data = read_bytes(path, what, limit, first=first)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise _refuse(what, quote(os.fspath(path)), f"is not UTF-8 text (byte {exc.start:,})") from None
