"""Every write goes through kvcalc.safewrite.write_file: an exclusive temporary file with an unpredictable name
in the target's folder, renamed onto the target; an existing file is replaced by every command alike, a link at
the target is replaced (its target untouched), a folder is refused, and nothing is left after an error."""

import os

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


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "out.yaml"
    link.symlink_to(victim)
    write_file(link, "data")
    assert victim.read_text() == "precious" and not link.is_symlink() and link.read_text() == "data"


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
