"""kvcalc sweep: columns over contexts x models x precisions; figures by hand."""

import json

import numpy as np
import pytest

from kvcalc.errors import KvcalcError
from kvcalc.cli.contexts import parse_contexts
from kvcalc.sweep import sweep


def test_context_specs():
    assert parse_contexts(["4k,8k", "4k"]).tolist() == [4096, 8192]
    assert parse_contexts(["1k..4k:1k"]).tolist() == [1024, 2048, 3072, 4096]
    # geometric: 1k, 2k, 4k (both ends kept exactly)
    assert parse_contexts(["1k..4k"], points=3).tolist() == [1024, 2048, 4096]
    with pytest.raises(KvcalcError, match="^--context: range '4k..1k' runs backwards"):
        parse_contexts(["4k..1k"])
    with pytest.raises(KvcalcError, match="^points: must be an integer from 2"):
        parse_contexts(["1k..4k"], points=1)


def test_columns_by_hand():
    cols = sweep(["llama-3.1-8b", "deepseek-v3.2"], np.array([1024, 200_000]), precisions=["all"])
    # llama: 32 layers x 2 x 8 x 128 values x 2 B (bf16) / 1 B (fp8) per token
    # V3.2: 61 layers x (576 x 2 + 128 x 2) B (bf16) / (656 + 132) B (fp8) per token
    want = [("llama-3.1-8b", "bf16", 1024, 1024 * 131072), ("llama-3.1-8b", "bf16", 200_000, 200_000 * 131072),
            ("llama-3.1-8b", "fp8", 1024, 1024 * 65536), ("llama-3.1-8b", "fp8", 200_000, 200_000 * 65536),
            ("deepseek-v3.2", "bf16", 1024, 1024 * 61 * 1408), ("deepseek-v3.2", "bf16", 200_000, 200_000 * 61 * 1408),
            ("deepseek-v3.2", "fp8", 1024, 1024 * 61 * 788), ("deepseek-v3.2", "fp8", 200_000, 200_000 * 61 * 788)]
    got = list(zip(cols["model"], cols["precision"], cols["context_tokens"].tolist(),
                   cols["bytes_per_sequence"].tolist()))
    assert got == want
    # 200k exceeds both models' maximum: one warning per model, not per context or precision
    assert len(cols["warnings"]) == 2


def test_cli_json_is_columnar(cli):
    r = cli("sweep", "llama-3.1-8b", "-c", "1k..3k:1k", "--format", "json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["columns"] == ["model", "precision", "context_tokens", "bytes_per_sequence"]
    assert out["context_tokens"] == [1024, 2048, 3072]
    assert out["bytes_per_sequence"] == [k * 131072 for k in (1024, 2048, 3072)]


def test_cli_csv_and_one_warning(cli, tmp_path):
    f = tmp_path / "s.csv"
    r = cli("sweep", "llama-3.1-8b", "-c", "64k..1M", "--points", "1000", "-o", str(f))
    assert r.code == 0
    lines = f.read_text().splitlines()
    assert lines[0] == "model,precision,context_tokens,bytes_per_sequence" and len(lines) == 1001
    assert r.err.count("warning") == 1 and "exceed the model's max_context" in r.err
    r = cli("sweep", "llama-3.1-8b", "--format", "xml")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --format: choose csv or json")
