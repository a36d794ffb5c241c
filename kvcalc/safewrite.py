"""Every file kvcalc writes (``-o`` / ``--output``, ``--report``, ``report``'s tables and plots) goes through
:func:`write_file`, which behaves as the standard tools do and never harms anything but the output asked for:

* **a regular file, or nothing yet**: the bytes go to a temporary file created exclusively
  (``tempfile.mkstemp``: ``O_CREAT | O_EXCL``, an unpredictable name) in the target's own folder, are flushed
  to disk (``fsync``) and renamed onto the target in one step (``os.replace``): a reader sees the old file or the
  new one, never a part, and a crash leaves the old file. A file that existed keeps its permissions.
* **a symbolic link to a regular file** is written through, as the shell's ``>`` does: the file it names is
  replaced as above and the link stays a link. A link to nothing is refused (where would the file go?).
* **anything else that exists** (a character or block device such as ``/dev/null``, a FIFO, a socket) is opened
  and written in place: never removed, never renamed over. ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N``
  (links to this process's own descriptors) are written to that descriptor, so a pipe, a terminal or a file the
  shell opened for appending gets the bytes as the shell would give them.
* **a folder** is refused in one line.
* after any error, or Ctrl-C, the temporary file is removed and the target is as it was.

Torch-free, no third-party import.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile

from .errors import KvcalcError, quote

#: a link into a process's descriptor table: /proc/self/fd/1 (what /dev/stdout names), /dev/fd/3,
#: /proc/<pid>/fd/N, /proc/thread-self/fd/N
_FD_LINK = re.compile(r"^/(?:proc/(?:self|thread-self|(\d+))|dev)/fd/(\d+)$")

_KIND = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISSOCK, "a socket"))


def _mode() -> int:
    """The permissions a plain ``open(path, 'w')`` would give (0o666 less the umask), not mkstemp's 0o600."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _refuse(what: str, path: str, why: str) -> KvcalcError:
    return KvcalcError(f"{what}: cannot write {quote(path)}: {why}")


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _own_descriptor(path: str) -> int | None:
    """The descriptor N when ``path`` is, or links to, one of this process's own (``/dev/stdout`` ->
    ``/proc/self/fd/1``; ``/dev/fd/3``); None otherwise. Links are followed by hand, at most 40 of them (the
    kernel's own limit), so the answer is the descriptor the kernel would reopen, not what it points at."""
    current = os.path.abspath(path)
    for _ in range(40):
        m = _FD_LINK.match(current)
        if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        try:
            target = os.readlink(current)
        except OSError:  # not a link (or gone): the chain ends here
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return None


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]


def _in_place(path: str, payload: bytes) -> bool:
    """Write into an existing device, FIFO or socket without replacing it; False if, once opened, it turned out
    to be a regular file after all (raced), so the caller replaces it as a file instead."""
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        _write_all(fd, payload)
        return True
    finally:
        os.close(fd)


def _to_descriptor(fd: int, payload: bytes) -> None:
    """Write to one of this process's own descriptors, after what Python holds buffered for it."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.fileno() == fd:
                stream.flush()
        except (AttributeError, OSError, ValueError):  # a replaced stream without a descriptor
            pass
    _write_all(fd, payload)


def _replace(target: str, payload: bytes, mode: int | None, owner: tuple[int, int] | None, make_dirs: bool) -> None:
    """The atomic replace: exclusive temporary file beside ``target``, fsync, rename over it."""
    folder = os.path.dirname(os.path.abspath(target))
    if make_dirs:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)[:80]}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode() if mode is None else mode)
        if owner is not None:
            try:
                os.chown(tmp, *owner)
            except OSError:  # not ours to give away: the file is ours, with its permissions
                pass
        os.replace(tmp, target)
    except BaseException:  # an error or Ctrl-C: no temporary file left behind, the target untouched
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself, to disk (best effort: not every file system lets a folder be opened)
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def write_file(path: str | os.PathLike, data: str | bytes, what: str = "output", make_dirs: bool = True) -> None:
    """Write ``data`` to ``path`` as the module docstring says; a failure is one line starting with ``what``
    (the caller's name for the path: its flag on the command line)."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        path = os.fspath(path)
        fd = _own_descriptor(path)
        if fd is not None:
            try:
                os.fstat(fd)
            except OSError:
                raise _refuse(what, path, f"it names descriptor {fd}, which this process does not have open") from None
            _to_descriptor(fd, payload)
            return
        try:
            st = os.stat(path)  # follows links: what the path finally names
        except FileNotFoundError:
            st = None
        if st is None:
            if os.path.islink(path):
                raise _refuse(what, path, f"it is a link to {quote(os.readlink(path))}, which does not exist; "
                                          "remove the link or name the file itself")
            _replace(path, payload, None, None, make_dirs)
        elif stat.S_ISDIR(st.st_mode):
            raise _refuse(what, path, "it is a folder")
        elif stat.S_ISREG(st.st_mode):
            target = os.path.realpath(path) if os.path.islink(path) else path
            _replace(target, payload, stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid), make_dirs)
        else:
            kind = next((name for test, name in _KIND if test(st.st_mode)), "not a regular file")
            try:
                if not _in_place(path, payload):
                    _replace(path, payload, None, None, make_dirs)
            except OSError as exc:
                raise _refuse(what, path, f"it is {kind} ({_why(exc)})") from None
    except KvcalcError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise _refuse(what, str(path), _why(exc)) from None
