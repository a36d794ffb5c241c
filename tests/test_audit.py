"""The independent audit: tests/audit_model.py (its own YAML reading and published formulas, no kvcalc code)
recomputes every shipped config at a grid of contexts, every precision, with and without MTP, and must agree
with kvcalc.estimate to the byte."""

from pathlib import Path

import pytest
import yaml

import kvcalc
from audit_model import bytes_per_sequence

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "kvcalc" / "data" / "configs").glob("*.yaml"))
CONTEXTS = [1, 2, 63, 64, 127, 128, 129, 255, 1000, 4096, 8191, 8192, 8193, 65_536, 131_072, 163_840, 1 << 20,
            3_000_000]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_agrees_with_the_audit(path):
    cfg = yaml.safe_load(path.read_text())
    for precision in cfg["precisions"]:
        for mtp in (False, True):
            got = kvcalc.estimate(str(path), CONTEXTS, precision=precision, mtp=mtp).per_sequence
            for L, g in zip(CONTEXTS, got.tolist()):
                want = bytes_per_sequence(path, precision, L, mtp)
                assert g == want, (path.stem, precision, mtp, L, g, want)


def test_the_audit_is_independent():
    """audit_model.py imports nothing from kvcalc."""
    import ast

    tree = ast.parse((Path(__file__).parent / "audit_model.py").read_text())
    mods = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in mods if m.startswith("kvcalc")], mods
