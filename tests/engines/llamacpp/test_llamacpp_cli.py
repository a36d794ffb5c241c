"""llama.cpp through the command line and the API, as a user runs it: a GGUF file in, --engine llama.cpp, ggml
cache types as precisions; hostile GGUFs refused in one line. Expected figures are hand arithmetic written here."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GGUF = ROOT / "tests/fixtures/gguf"


def test_llama_3_1_8b_q8_0_by_hand(cli):
    # 32 layers x 8 KV heads x 128 = 1,024 values of K and of V a token; q8_0 stores 32 values in 34 B:
    # 1,024 / 32 x 34 = 1,088 B each, 2,176 B a token a layer; x 32 layers x 4,096 tokens = 285,212,672 B
    r = cli("estimate", "llama-3.1-8b", "-p", "q8_0", "-c", "4096", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["total_bytes"] == 32 * 2 * 1024 // 32 * 34 * 4096 == 285_212_672


def test_capacity_engine_llama_cpp_on_a_shipped_model(cli):
    # llama-server, --parallel 2 (two streams), -c 16384: n_ctx_seq = 8,192 cells; f16 K and V of 1,024 values
    # (2,048 B each) in 32 layers: 2 x 8,192 x 32 x 2 x 2,048 B = 2,147,483,648 B, one CUDA0 buffer (128-aligned)
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "llama.cpp", "-c", "8192", "--parallel", "2",
            "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert (d["n_ctx"], d["n_ctx_seq"], d["n_seq_max"], d["n_stream"]) == (16384, 8192, 2, 2)
    assert d["memory_bytes"] == d["cache_gpu_bytes"] == 2 * 8192 * 32 * 2 * 2048 == 2_147_483_648
    assert d["caches"] == [{"kind": "kv", "cells": 8192, "layers": 32, "k_bytes": 1 << 30, "v_bytes": 1 << 30,
                            "r_bytes": 0, "s_bytes": 0, "buffers": {"CUDA0": 1 << 31}}]
    assert "llama_kv_cache:      CUDA0 KV buffer size =  2048.00 MiB" in d["log"]


def test_a_gguf_file_plans_as_llama_cpp_logs_it(cli):
    # gpt-oss fixture: 4 layers, 2 SWA (window 128) + 2 full, 2 KV heads x 64 = 128 values; -c 4096 -np 1
    # --no-swa-full: full cache 4,096 cells x 2 layers x (128 x 2 B) x 2 = 4 MiB; SWA cells
    # pad(min(4096, 128 + 512), 256) = 768 -> 768 x 2 x 256 x 2 = 786,432 B
    r = cli("capacity", str(GGUF / "llamacpp-gpt-oss.gguf"), "--gpu", "h100-sxm", "--engine", "llama.cpp",
            "-c", "4096", "--parallel", "1", "--no-swa-full", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert [(c["kind"], c["cells"], c["k_bytes"] + c["v_bytes"]) for c in d["caches"]] == \
        [("kv", 4096, 4096 * 2 * 256 * 2), ("swa", 768, 786_432)]
    assert d["weights_bytes"] == 5_020_288  # llama.cpp's own model size for this file (the fixture)


def test_quantized_v_without_flash_attention_is_refused_in_llama_cpp_words(cli):
    r = cli("capacity", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "llama.cpp", "-c", "4096",
            "--cache-type-v", "q8_0", "--flash-attn", "off")
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1 and "quantized V cache requires flash_attn to be enabled" in r.err
    assert r.err.startswith("kvcalc: error: --flash-attn:")


def test_mla_with_different_k_and_v_types_is_refused(cli):
    r = cli("capacity", str(GGUF / "llamacpp-deepseek2-mla.gguf"), "--gpu", "h100-sxm", "--engine", "llama.cpp",
            "-c", "4096", "--cache-type-k", "q8_0", "--cache-type-v", "f16")
    assert r.code == 2 and "model does not support different K (q8_0) and V (f16) cache types" in r.err


def test_import_gguf_and_estimate(cli, tmp_path):
    out = tmp_path / "m.yaml"
    r = cli("import-gguf", str(GGUF / "llamacpp-qwen3next.gguf"), "-o", str(out))
    assert r.code == 0, r.err
    r2 = cli("estimate", str(out), "-c", "4096", "--json")
    r3 = cli("estimate", str(GGUF / "llamacpp-qwen3next.gguf"), "-c", "4096", "--json")
    assert r2.code == r3.code == 0
    assert json.loads(r2.out)[0]["total_bytes"] == json.loads(r3.out)[0]["total_bytes"]


@pytest.mark.parametrize("data, words", [
    (b"GGUF" + struct.pack("<I", 7) + bytes(16), "version 7"),
    (b"NOPE" + bytes(40), "is not a GGUF file"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 40), "more than"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 5) + b"ab", "runs past the end"),
    (b"GGUF" + struct.pack("<IQQ", 3, 1 << 30, 0), "more than"),
    # found by the fuzz: a value or a name echoed whole (an alignment of 3,000 zeros; a 5,000-byte key cut short)
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 17) + b"general.alignment"
     + struct.pack("<IIQ", 9, 4, 3000) + bytes(4 * 3000), "general.alignment is [0, 0"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 5000) + b"k" * 5000 + struct.pack("<I", 4),
     "runs past the end"),
])
def test_hostile_gguf_is_one_line(cli, tmp_path, data, words):
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    r = cli("estimate", str(p))
    assert r.code == 2 and r.err.count("\n") == 1 and words in r.err, r.err
    assert "Traceback" not in r.err and len(r.err) < 400, len(r.err)


def test_gguf_without_architecture_or_an_unplanned_one(cli, tmp_path):
    from gguf import GGUFWriter

    p = tmp_path / "x.gguf"
    w = GGUFWriter(str(p), "rwkv7")
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = cli("estimate", str(p))
    assert r.code == 2 and "'rwkv7' is not one kvcalc reads" in r.err and r.err.count("\n") == 1


def test_the_engine_stays_torch_free():
    import subprocess
    import sys

    code = ("import sys; from kvcalc.capacity import capacity; "
            "capacity('llama-3.1-8b', 8192, gpu='h100-sxm', engine='llama.cpp'); "
            "capacity('tests/fixtures/gguf/llamacpp-gemma3n.gguf', 4096, gpu='h100-sxm', engine='llama.cpp'); "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_ggml_precision_sets_the_cache_types(cli):
    # -p q8_0 with --engine llama.cpp: -ctk q8_0 -ctv q8_0; 32 layers x 1,088 B x 2 = 69,632 B a cell; -c 8192 x 4
    # slots (llama-server's default, one unified stream of 32,768 cells) = 2,281,701,376 B
    r = cli("capacity", "llama-3.1-8b", "-p", "q8_0", "--engine", "llama.cpp", "--gpu", "h100-sxm", "-c", "8192",
            "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert (d["type_k"], d["type_v"]) == ("q8_0", "q8_0")
    assert "-ctk q8_0 -ctv q8_0" in d["command"]
    assert d["memory_bytes"] == 32768 * 32 * 2 * 1088 == 2_281_701_376
    r = cli("capacity", "llama-3.1-8b", "-p", "q8_0/q4_0", "--engine", "llama.cpp", "--gpu", "h100-sxm", "-c",
            "8192", "--json")
    assert r.code == 0, r.err
    assert (json.loads(r.out)["type_k"], json.loads(r.out)["type_v"]) == ("q8_0", "q4_0")
    # a flag naming another type: refused in one line naming the precision
    r = cli("capacity", "llama-3.1-8b", "-p", "q8_0", "--engine", "llama.cpp", "--gpu", "h100-sxm",
            "--cache-type-k", "q4_0")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --precision: q8_0 asks for a q8_0 cache") \
        and r.err.count("\n") == 1
    # ollama has one type for K and V
    r = cli("capacity", "llama-3.1-8b", "-p", "q8_0/q4_0", "--engine", "llama.cpp", "--frontend", "ollama",
            "--gpu", "h100-sxm")
    assert r.code == 2 and "OLLAMA_KV_CACHE_TYPE" in r.err


def test_estimate_with_an_engine(cli):
    # one request of 8,192 tokens: llama.cpp -c 8192 -np 1: 8,192 cells x 69,632 B (q8_0, above) = 570,425,344 B
    r = cli("estimate", "llama-3.1-8b", "-p", "q8_0", "--engine", "llama.cpp", "-c", "8k", "--json")
    assert r.code == 0, r.err
    e = json.loads(r.out)[0]["engine"]
    assert e["name"] == "llama.cpp" and e["version"] == "0c1e57098"
    assert e["request_bytes"] == e["exact_bytes"] == 8192 * 69632 == 570_425_344
    assert e["n_ctx"] == 8192 and e["caches"][0]["cells"] == 8192
    assert "-np 1" in e["command"] and "-ctk q8_0" in e["command"]
    # a context off the 256 grid: llama.cpp pads n_ctx to 256 (llama-context.cpp): 1,000 -> 1,024 cells
    r = cli("estimate", "llama-3.1-8b", "-p", "q8_0", "--engine", "llama.cpp", "-c", "1000", "--json")
    e = json.loads(r.out)[0]["engine"]
    assert e["request_bytes"] == 1024 * 69632 and e["exact_bytes"] == 1000 * 69632
    # vLLM: 16-token blocks of 32 layers x 2 x 1,024 x 2 B (bf16) = 2 MiB a block; 8,192 tokens = 512 blocks
    r = cli("estimate", "llama-3.1-8b", "--engine", "vllm", "-c", "8k", "--json")
    e = json.loads(r.out)[0]["engine"]
    assert (e["units_per_request"], e["unit_bytes"]) == (512, 2 << 20) and e["request_bytes"] == 1 << 30
    # the text form names the engine and prints llama.cpp's lines for the slot
    r = cli("estimate", "llama-3.1-8b", "-p", "q8_0", "--engine", "llama.cpp", "-c", "8k")
    assert r.code == 0 and "What llama.cpp 0c1e57098 reserves for one request" in r.out
    assert "llama_kv_cache: size =  544.00 MiB (  8192 cells,  32 layers,  1/1 seqs)" in r.out
    r = cli("estimate", "llama-3.1-8b", "--engine", "vllm", "--json", "--compact")
    assert r.code == 2 and "--engine: not with --compact" in r.err


@pytest.mark.parametrize("gguf", sorted(p.name for p in GGUF.glob("llamacpp-*.gguf")))
def test_capacity_plans_every_fixture_gguf(cli, gguf):
    """Every architecture's GGUF plans through capacity (a NextN / MTP layer that llama.cpp gives KV included)."""
    r = cli("capacity", str(GGUF / gguf), "--engine", "llama.cpp", "--gpu", "h100-sxm", "-c", "1k", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["memory_bytes"] == sum(sum(c["buffers"].values()) for c in d["caches"]) > 0


@pytest.mark.parametrize("gguf", sorted(p.name for p in GGUF.glob("llamacpp-*.gguf")))
def test_the_imported_yaml_plans_as_its_gguf(cli, tmp_path, gguf):
    """import-gguf writes gguf_architecture: the YAML plans on llama.cpp with the same caches as the GGUF itself
    (but for nemotron_h's NextN layer of feed_forward_length 0, which llama.cpp gives KV and a config cannot state:
    the YAML's plan says so)."""
    out = tmp_path / "m.yaml"
    r = cli("import-gguf", str(GGUF / gguf), "-o", str(out))
    assert r.code == 0, r.err
    args = ["--engine", "llama.cpp", "--gpu", "h100-sxm", "-c", "1k", "--json"]
    a = json.loads(cli("capacity", str(out), "--weights-gib", "0.01", *args).out)
    b = json.loads(cli("capacity", str(GGUF / gguf), *args).out)
    if gguf == "llamacpp-nemotron_h-mtp-ff0.gguf":
        r = cli("capacity", str(out), "--weights-gib", "0.01", *args[:-1])
        assert "NextN layers are planned without one (give the GGUF)" in r.out.replace("\n", " ")
        assert [c["layers"] for c in a["caches"]] == [1, 6] and [c["layers"] for c in b["caches"]] == [2, 6]
        return
    assert [(c["kind"], c["cells"], c["layers"], c["k_bytes"], c["v_bytes"], c["r_bytes"], c["s_bytes"])
            for c in a["caches"]] == [(c["kind"], c["cells"], c["layers"], c["k_bytes"], c["v_bytes"], c["r_bytes"],
                                       c["s_bytes"]) for c in b["caches"]]


def test_no_context_given_takes_the_front_ends(cli):
    """Found in review: without -c, capacity planned the model's 131,072 tokens and then refused the -c / num_ctx
    the user gave; the context is now the launch's own (llama-server -c 2048 in one unified stream: 2,048 cells a
    request; ollama num_ctx 8192: 8,192)."""
    r = cli("capacity", "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "h100-sxm", "--ctx-size", "2048", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["n_ctx"] == 2048
    r = cli("capacity", "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "h100-sxm", "--frontend", "ollama",
            "--num-ctx", "8192", "--json")
    assert r.code == 0, r.err
    assert (json.loads(r.out)["n_ctx"], json.loads(r.out)["n_seq_max"]) == (8192, 1)
