"""Every file kvcalc writes (``-o`` / ``--output``, ``--report``, ``report``'s tables and plots) goes through
:func:`write_file`, so a write cannot hurt:

* the bytes go to a temporary file created exclusively (``tempfile.mkstemp``: ``O_CREAT | O_EXCL``, an
  unpredictable name) in the target's own folder, so no link planted at a guessable name is followed;
* it is flushed to disk and renamed onto the target in one step (``os.replace``): a reader sees the old file or
  the new one, never a part;
* an existing file is replaced, as most command-line tools do, by every command alike; a symbolic link at the
  target is replaced by the file (the link's target is left untouched); a folder at the target is refused;
* after any error, or Ctrl-C, the temporary file is removed and the target is as it was.

Torch-free, no third-party import.
"""

from __future__ import annotations

import os
import stat
import tempfile

from .errors import KvcalcError


def _mode() -> int:
    """The permissions a plain ``open(path, 'w')`` would give (0o666 less the umask), not mkstemp's 0o600."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _refuse(what: str, path: str, why: str) -> KvcalcError:
    return KvcalcError(f"{what}: cannot write {str(path)[:200]!r}: {why}")


def write_file(path: str | os.PathLike, data: str | bytes, what: str = "output", make_dirs: bool = True) -> None:
    """Write ``data`` to ``path`` safely (see the module docstring); a failure is one line starting with
    ``what`` (the caller's name for the path: its flag on the command line)."""
    path = os.fspath(path)
    try:
        folder = os.path.dirname(os.path.abspath(path))
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise _refuse(what, path, "it is a folder")
        if make_dirs:
            os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)[:80]}.", suffix=".tmp", dir=folder)
    except KvcalcError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise _refuse(what, path, getattr(exc, "strerror", None) or str(exc)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode())
        os.replace(tmp, path)
    except BaseException as exc:  # an error or Ctrl-C: no temporary file left behind, the target untouched
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, (OSError, ValueError)):
            raise _refuse(what, path, getattr(exc, "strerror", None) or str(exc)) from None
        raise
