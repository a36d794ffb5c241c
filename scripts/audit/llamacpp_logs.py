#!/usr/bin/env python
"""Real llama.cpp start-up logs for ``kvcalc check-log --engine llama.cpp``: llama.cpp ITSELF (llama-cpp-python
0.3.36, llama.cpp 0c1e57098, CPU build) loading the synthetic GGUFs of scripts/audit/llamacpp_reference.py with the
C API's context parameters of each case, every line it logs written to tests/fixtures/logs/llamacpp/<case>.log.

Not part of the suite (it needs the scratch venv of llamacpp_reference.py, with its full GGUF files, all-zero
tensors, in --models):

    /work/scratch/venv-llama/bin/python scripts/audit/llamacpp_logs.py --models /work/scratch/llamacpp-ref/models

What is ours: the cases (model, parameters) and one thing done to the text: the lines of tensor loading
("create_tensor:", "llama_model_loader: - kv", "load_tensors: layer", "llama_graph_n_input_tensors:",
"graph_reserve:") are dropped to keep the fixtures small (none of them is a line check-log reads). What is
llama.cpp's: every other line, as its log callback received it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "logs" / "llamacpp"
TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
FA = {"auto": -1, "off": 0, "on": 1}
DROP = ("create_tensor:", "llama_model_loader: - kv", "load_tensors: layer", "llama_graph_n_input_tensors:",
        "graph_reserve:")

#: (case, model, context parameters): the C API's defaults for what a case leaves out
CASES = [
    ("llama-gqa-c4096", "llama-gqa", {"n_ctx": 4096}),
    ("llama-gqa-np4-unified-q8", "llama-gqa", {"n_ctx": 10000, "n_seq_max": 4, "kv_unified": True,
                                               "type_k": "q8_0", "type_v": "q8_0", "flash_attn": "on"}),
    ("llama-gqa-np3-fa-off", "llama-gqa", {"n_ctx": 5000, "n_seq_max": 3, "flash_attn": "off", "n_batch": 512}),
    ("gemma3-swa-np2", "gemma3-swa", {"n_ctx": 8192, "n_seq_max": 2, "swa_full": False, "n_ubatch": 256}),
    ("gemma2-swa-unified", "gemma2-swa", {"n_ctx": 3000, "n_seq_max": 4, "kv_unified": True, "swa_full": False}),
    ("gpt-oss-q4", "gpt-oss", {"n_ctx": 2048, "type_k": "q4_0", "type_v": "q4_0", "swa_full": False}),
    ("deepseek2-mla-fa-off", "deepseek2-mla", {"n_ctx": 1024, "flash_attn": "off"}),
    ("jamba-np2", "jamba", {"n_ctx": 2048, "n_seq_max": 2}),
    ("mamba2", "mamba2", {"n_ctx": 512}),
    ("qwen3next-q8k", "qwen3next", {"n_ctx": 4096, "type_k": "q8_0", "n_seq_max": 2}),
    ("lfm2-swa", "lfm2-swa", {"n_ctx": 2048, "swa_full": False}),
    ("granitehybrid", "granitehybrid", {"n_ctx": 1000}),
]


def run(models: Path, model: str, params: dict) -> str:
    import llama_cpp as L

    pieces: list[str] = []

    @L.llama_log_callback
    def cb(level, text, user):  # noqa: ARG001
        pieces.append(text.decode("utf-8", errors="replace"))

    L.llama_log_set(cb, None)
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    m = L.llama_model_load_from_file(str(models / f"{model}.gguf").encode(), mp)
    if not m:
        raise SystemExit(f"{model}: llama.cpp did not load the model")
    cp = L.llama_context_default_params()
    for k, v in params.items():
        if k in ("type_k", "type_v"):
            v = TYPES[v]
        elif k == "flash_attn":
            k, v = "flash_attn_type", FA[v]
        setattr(cp, k, v)
    ctx = L.llama_init_from_model(m, cp)
    if not ctx:
        raise SystemExit(f"{model} {params}: llama.cpp made no context")
    L.llama_free(ctx)
    L.llama_model_free(m)
    text = "".join(pieces)
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith(DROP))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, required=True, help="the full GGUF files of llamacpp_reference.py")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    index = {}
    for case, model, params in CASES:
        (OUT / f"{case}.log").write_text(run(a.models, model, params))
        index[case] = {"model": model, "gguf": f"tests/fixtures/gguf/llamacpp-{model}.gguf", "params": params}
        print(case, "ok")
    (OUT / "cases.json").write_text(json.dumps({"generated_by": "scripts/audit/llamacpp_logs.py",
                                                "llama_cpp_python": "0.3.36", "llama_cpp_commit": "0c1e57098",
                                                "cases": index}, indent=1) + "\n")


if __name__ == "__main__":
    main()
