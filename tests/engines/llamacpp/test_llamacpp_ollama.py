"""ollama (v0.33.0-rc2) in front of llama.cpp: its launch and its own memory prediction beside llama.cpp's allocation.
Expected figures are hand arithmetic from ollama's source (llm/llama_server.go PredictServerVRAM, server/sched.go
automaticGenerationBatch and load), written here."""

from __future__ import annotations

import json
from pathlib import Path

from kvcalc.engines.llamacpp.ollama import automatic_batch
from kvcalc.units import GIB

ROOT = Path(__file__).resolve().parents[3]
GGUF = ROOT / "tests/fixtures/gguf"


def _cap(cli, model, *args):
    r = cli("capacity", str(GGUF / f"llamacpp-{model}.gguf"), "--engine", "llama.cpp", "--frontend", "ollama",
            "--gpu", "rtx-4090", "--json", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_prediction_by_hand(cli):
    # gemma3-swa: block_count 7, embedding_length 128, head_count 4, head_count_kv 1; the fixture file is 6,048 B.
    # num_ctx: ollama's default for a 24 GiB GPU is 32,768, capped at context_length 4,096; parallel 1:
    # KV = 2 x 7 x 1 x (128 / 4) x 4,096 x 2 = 3,670,016 B; predicted = 6,048 + 3,670,016
    d = _cap(cli, "gemma3-swa", "-c", "4k")
    o = d["ollama"]
    assert (o["layers"], o["kv_heads"], o["head_dim"], o["n_ctx"]) == (7, 1, 32, 4096)
    assert o["kv_bytes"] == 2 * 7 * 1 * 32 * 4096 * 2 == 3_670_016
    assert o["file_bytes"] == (GGUF / "llamacpp-gemma3-swa.gguf").stat().st_size == 6048
    assert o["predicted_bytes"] == 6048 + 3_670_016
    # the real K rows are 64 values (attention.key_length 64), and 6 SWA layers keep fewer cells: the line says so
    assert "K rows of 64 values" in o["differences"] and "sliding-window layers keep" in o["differences"]
    assert d["command"].startswith("llama-server --model MODEL.gguf -c 4096 -np 1 --flash-attn auto -b 512 -ub 512")
    assert o["num_batch"] == 512  # 4,096 tokens: not past 4,096


def test_parallel_and_the_automatic_batch(cli):
    # llama-gqa (context_length 4,096): num_ctx 2,048 x OLLAMA_NUM_PARALLEL 4 = 8,192 tokens of context > 4,096: the
    # batch 1,024, the prediction far within 75 % of 24 GiB; -c 8192 -np 4, four streams of 2,048 cells
    d = _cap(cli, "llama-gqa", "-c", "2k", "--num-ctx", "2048", "--num-parallel", "4")
    assert (d["n_ctx"], d["n_seq_max"], d["n_stream"], d["n_ctx_seq"]) == (8192, 4, 4, 2048)
    assert (d["n_batch"], d["n_ubatch"]) == (1024, 1024)
    assert "-c 8192 -np 4 --flash-attn auto -b 1024 -ub 1024" in d["command"]
    # num_batch given: passed as it is
    d = _cap(cli, "llama-gqa", "-c", "2k", "--num-ctx", "2048", "--num-parallel", "4", "--num-batch", "256")
    assert (d["n_batch"], d["n_ubatch"]) == (256, 256)
    # qwen3next: ollama runs one request at a time whatever OLLAMA_NUM_PARALLEL says
    d = _cap(cli, "qwen3next", "-c", "1k", "--num-ctx", "1024", "--num-parallel", "4")
    assert d["n_seq_max"] == 1 and any("forced to 1" in x for x in d["defaults"])


def test_automatic_batch_rules():
    # generationBatchForContext: > 32,768 -> 2,048; > 4,096 -> 1,024; else 512
    assert automatic_batch(4096, 0, 0, "auto", True)[0] == 512
    assert automatic_batch(4097, 0, 0, "auto", True)[0] == 1024
    assert automatic_batch(65536, 0, 0, "auto", True)[0] == 2048
    # 2,048 needs the prediction within 60 % of the available memory and 2 GiB of room under its 80 %:
    # 10 GiB of 24: 10 <= 14.4 and 2 <= 19.2 - 10 -> 2,048
    assert automatic_batch(65536, 10 * GIB, 24 * GIB, "auto", True)[0] == 2048
    # 16 GiB of 24: past 60 % (14.4) but within 75 % (18) with 768 MiB under 19.2 -> 1,024
    assert automatic_batch(65536, 16 * GIB, 24 * GIB, "auto", True)[0] == 1024
    # 20 GiB of 24: past 75 % -> 512
    assert automatic_batch(65536, 20 * GIB, 24 * GIB, "auto", True)[0] == 512
    # flash attention off on CUDA: 512, or 256 past 4,096 tokens on a GPU of 8 GiB or less
    assert automatic_batch(65536, 0, 8 * GIB, "disabled", True)[0] == 256
    assert automatic_batch(65536, 0, 24 * GIB, "disabled", True)[0] == 512
    assert automatic_batch(65536, 0, 8 * GIB, "disabled", False)[0] == 2048  # not CUDA: by context


def test_without_a_gguf_ollama_cannot_be_predicted(cli):
    r = cli("capacity", "llama-3.1-8b", "--engine", "llama.cpp", "--frontend", "ollama", "--gpu", "rtx-4090", "-c",
            "8k")
    assert r.code == 0, r.err
    assert "ollama's own prediction needs the GGUF" in r.out
    d = json.loads(cli("capacity", "llama-3.1-8b", "--engine", "llama.cpp", "--frontend", "ollama", "--gpu",
                       "rtx-4090", "-c", "8k", "--json").out)
    assert d["ollama"] is None
    assert any("file size is unknown" in x for x in d["defaults"])
