"""kvcalc.inputs: every file kvcalc reads is read bounded, whatever the path names, and refused in one line naming
the flag (or the file) that gave it."""

import os

import pytest

from kvcalc.errors import KvcalcError
from kvcalc.inputs import read_bytes, read_text

MIB = 1 << 20


def test_a_file_within_the_limit_is_read_whole(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 1000)
    assert read_bytes(f, "--flag", 1000) == b"x" * 1000


def test_a_longer_file_is_refused_or_its_start_read(tmp_path):
    f = tmp_path / "big.log"
    f.write_bytes(b"y" * (2 * MIB + 1))
    with pytest.raises(KvcalcError, match=r"^--flag: '.*' (\(\d+ characters\) )?holds more than 2 MiB"):
        read_bytes(f, "--flag", 2 * MIB)
    assert read_bytes(f, "FILE", 2 * MIB, first=True) == b"y" * (2 * MIB)  # a log's start-up lines come first


def test_an_endless_device_is_read_up_to_the_limit_and_no_further():
    # /dev/zero never ends: the limit ends the read (a character device is named as one)
    with pytest.raises(KvcalcError, match=r"^--request-tokens-file: '/dev/zero' \(a character device\) holds more than "
                                          r"1 MiB"):
        read_bytes("/dev/zero", "--request-tokens-file", MIB)
    assert read_bytes("/dev/zero", "FILE", MIB, first=True) == bytes(MIB)


def test_a_fifo_is_read_as_its_writer_writes(tmp_path):
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: open(fifo, "wb").write(b"8k\n4k\n"), daemon=True).start()
    assert read_text(fifo, "--request-tokens-file", MIB) == "8k\n4k\n"


@pytest.mark.parametrize("make,words", [
    (lambda d: d / "missing.yaml", "does not exist (no such file)"),
    (lambda d: d, "is a folder, not a file"),
])
def test_what_is_not_a_file_is_one_line(tmp_path, make, words):
    with pytest.raises(KvcalcError) as e:
        read_bytes(make(tmp_path), "--flag", MIB)
    assert str(e.value).startswith("--flag: '") and words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(KvcalcError) as e:  # no flag: the path leads
        read_bytes(make(tmp_path), None, MIB)
    assert str(e.value).startswith("'") and words in str(e.value)


def test_text_that_is_not_utf8_is_named(tmp_path):
    f = tmp_path / "latin1.yaml"
    f.write_bytes("name: caf\xe9".encode("latin-1"))
    with pytest.raises(KvcalcError, match=r"is not UTF-8 text \(byte 9\)"):
        read_text(f, None, MIB)
    assert read_text(f, "FILE", MIB, errors="replace") == "name: caf\ufffd"
