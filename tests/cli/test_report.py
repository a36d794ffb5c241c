"""kvcalc report: the committed tables under reports/ are what the code prints."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_committed_tables_match_the_code():
    r = subprocess.run([sys.executable, "-m", "kvcalc", "report", "--check"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_a_stale_table_is_caught(tmp_path):
    out = tmp_path / "reports"
    shutil.copytree(ROOT / "reports", out)
    f = out / "headline.txt"
    assert "83.88 GiB" in f.read_text()
    f.write_text(f.read_text().replace("83.88 GiB", "83.87 GiB"))
    r = subprocess.run([sys.executable, "-m", "kvcalc", "report", "--check", "--out", str(out)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 1 and "headline.txt differs" in r.stderr


def test_regenerates_into_a_folder(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kvcalc", "report", "--out", str(tmp_path), "--no-plots"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "claims.txt").read_text() == (ROOT / "reports" / "claims.txt").read_text()
