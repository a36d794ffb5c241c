"""Every write goes through kvcalc.safewrite.write_file, which behaves as the standard tools do: a regular file
(or a link to one) is replaced atomically (an exclusive temporary file with an unpredictable name in the target's
folder, fsync, rename), a device, FIFO or socket is written in place and never removed or renamed over, a link to
one of the process's own descriptors (/dev/stdout) is written to that descriptor, a folder is refused, and nothing
is left after an error. Device nodes and FIFOs here are private ones made in a temporary folder, never /dev."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from kvcalc.errors import KvcalcError
from kvcalc.safewrite import write_file

KIMI = "tests/fixtures/hf/kimi-k2.json"


def _leftovers(folder):
    return [p for p in os.listdir(folder) if p.endswith(".tmp") or ".tmp" in p]


def test_an_existing_file_is_replaced_and_keeps_ordinary_permissions(tmp_path):
    f = tmp_path / "out.txt"
    f.write_text("old")
    write_file(f, "new")
    assert f.read_text() == "new" and _leftovers(tmp_path) == []
    mask = os.umask(0)
    os.umask(mask)
    assert f.stat().st_mode & 0o777 == 0o666 & ~mask  # as open(path, "w") would give, not mkstemp's 0o600


def test_a_link_planted_at_the_old_predictable_name_is_not_followed(tmp_path):
    # the old writer opened "<path>.tmp<pid>" with open(..., "w"): a link planted there was followed
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out.yaml"
    for name in (f"out.yaml.tmp{os.getpid()}", f".out.yaml.tmp{os.getpid()}"):
        (tmp_path / name).symlink_to(victim)
    write_file(target, "data")
    assert victim.read_text() == "precious" and target.read_text() == "data"


def test_a_link_to_a_file_is_written_through_and_stays_a_link(tmp_path):
    # as the shell's `>` does: the file the link names gets the bytes (atomically), the link stays
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.yaml"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "out.yaml"
    link.symlink_to(target)
    write_file(link, "data")
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "data"
    assert target.stat().st_mode & 0o777 == 0o640  # the replaced file keeps its permissions
    assert _leftovers(tmp_path) == [] and _leftovers(tmp_path / "real") == []


def test_a_link_to_nothing_is_refused_and_kept(tmp_path):
    link = tmp_path / "out.yaml"
    link.symlink_to(tmp_path / "missing" / "file")
    with pytest.raises(KvcalcError, match="^out: cannot write .*: it is a link to .*which does not exist"):
        write_file(link, "data", "out")
    assert link.is_symlink() and not (tmp_path / "missing").exists()


def _char_device(path):
    """A private character device node with /dev/null's numbers (1, 3), made here; None where this user may not."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        return None
    return path


def test_a_device_node_is_written_in_place_never_replaced(tmp_path):
    node = _char_device(tmp_path / "null")
    if node is None:
        pytest.skip("this user may not make device nodes (mknod needs CAP_MKNOD)")
    before = os.stat(node)
    write_file(node, "x" * 100_000)
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert sorted(os.listdir(tmp_path)) == ["null"]


def test_every_command_that_writes_leaves_a_device_node_a_device(cli, tmp_path):
    node = _char_device(tmp_path / "null")
    if node is None:
        pytest.skip("this user may not make device nodes (mknod needs CAP_MKNOD)")
    ino = os.stat(node).st_ino
    for argv in (["import-hf", KIMI, "-o"], ["sweep", "llama-3.1-8b", "-c", "1k,2k", "-o"]):
        r = cli(*argv, str(node))
        assert r.code == 0, (argv, r.err)
        assert stat.S_ISCHR(os.stat(node).st_mode) and os.stat(node).st_ino == ino, argv
    assert sorted(os.listdir(tmp_path)) == ["null"]


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    write_file(fifo, "model,context\n")
    reader.join(10)
    assert got == [b"model,context\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_a_socket_is_refused_in_one_line_and_kept(tmp_path):
    import socket

    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        with pytest.raises(KvcalcError, match="^out: cannot write .*: it is a socket"):
            write_file(path, "data", "out")
        assert stat.S_ISSOCK(os.stat(path).st_mode)
    finally:
        sock.close()


def test_a_link_to_the_process_stdout_writes_to_it(tmp_path):
    # `-o /dev/stdout`: /dev/stdout is a link to /proc/self/fd/1; a link of our own to it stands in for /dev here.
    # The bytes go to the command's standard output (a pipe here), which is neither removed nor replaced.
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    r = subprocess.run([sys.executable, "-m", "kvcalc", "sweep", "llama-3.1-8b", "-c", "1k", "-o", str(link)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # 1,024 tokens x 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 B = 134,217,728 B
    assert r.stdout == "model,precision,context_tokens,bytes_per_sequence\nllama-3.1-8b,bf16,1024,134217728\n"
    assert link.is_symlink() and sorted(os.listdir(tmp_path)) == ["stdout"]


def test_a_folder_at_the_target_is_refused(tmp_path):
    with pytest.raises(KvcalcError, match="^out: cannot write .*: it is a folder$"):
        write_file(tmp_path, "data", "out")


@pytest.mark.parametrize("fault", [KeyboardInterrupt, OSError])
def test_an_error_or_ctrl_c_leaves_no_partial_file(tmp_path, monkeypatch, fault):
    f = tmp_path / "out.txt"
    f.write_text("old")

    def boom(*a):
        raise fault(28, "No space left on device") if fault is OSError else fault()

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KvcalcError if fault is OSError else KeyboardInterrupt):
        write_file(f, "new")
    assert f.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_every_command_that_writes_replaces_an_existing_file(cli, tmp_path):
    runs = {
        "c.yaml": ["import-hf", KIMI, "-o"],
        "s.csv": ["sweep", "llama-3.1-8b", "-c", "1k,2k", "-o"],
    }
    try:
        import matplotlib  # noqa: F401

        runs["p.svg"] = ["plot", "llama-3.1-8b", "-c", "1k..8k", "--points", "4", "-o"]
    except ImportError:
        pass
    for name, argv in runs.items():
        f = tmp_path / name
        f.write_text("stale")
        r = cli(*argv, str(f))
        assert r.code == 0, (argv, r.err)
        assert f.read_text() != "stale" and _leftovers(tmp_path) == [], name
    for argv in (["import-hf", KIMI, "-o", str(tmp_path)], ["sweep", "llama-3.1-8b", "-c", "1k", "-o", str(tmp_path)]):
        r = cli(*argv)
        assert r.code == 2 and r.err.count("\n") == 1 and "it is a folder" in r.err and "--output" in r.err


def test_report_writes_into_a_folder_and_refuses_a_file(cli, tmp_path):
    f = tmp_path / "notafolder"
    f.write_text("x")
    r = cli("report", "--out", str(f), "--no-plots")
    assert r.code == 2 and r.err.count("\n") == 1 and "--out" in r.err and "is a file, not a folder" in r.err
    assert f.read_text() == "x"


def test_report_check_outside_a_checkout_says_so(cli, tmp_path):
    r = cli("report", "--check", "--out", str(tmp_path / "nope"))
    assert r.code == 2 and "is not a folder" in r.err and "in a kvcalc checkout" in r.err
    r = cli("report", "--check", "--out", str(tmp_path))
    assert r.code == 2 and "holds none of the published tables" in r.err


def test_report_check_names_a_missing_table_as_missing(cli, tmp_path):
    import shutil

    shutil.copytree("reports", tmp_path / "r", ignore=shutil.ignore_patterns("*.json", "plots", "verify"))
    (tmp_path / "r" / "models.txt").unlink()
    r = cli("report", "--check", "--out", str(tmp_path / "r"), "--json")
    assert r.code == 1
    d = r.json()
    assert d["missing"] == ["models.txt"] and d["stale"] == [] and d["match"] is False
    assert "models.txt is missing" in r.err and "differs" not in r.err
