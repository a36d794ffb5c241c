#!/usr/bin/env python
"""`kvcalc verify --engine llama.cpp` over the 26 synthetic GGUFs and several launches: llama.cpp ITSELF
(llama-cpp-python 0.3.36, llama.cpp 0c1e57098, CPU build) makes each planned context, decodes a 16-token prompt, and
what it made is recorded beside kvcalc's plan. Writes reports/verify/llamacpp-0.3.36.json, which
tests/engines/llamacpp/test_llamacpp_verify.py holds every later kvcalc to.

Not part of the suite (needs the scratch venv of llamacpp_reference.py with kvcalc installed in it, and the full
GGUF files, all-zero tensors, that llamacpp_reference.py wrote):

    /work/scratch/venv-llama/bin/pip install -e . 'typer>=0.27,<0.29' rich pyyaml
    /work/scratch/venv-llama/bin/python scripts/audit/llamacpp_verify.py --models /work/scratch/llamacpp-ref/models

What is ours: the launches (front end and flags), the prompt's token ids. What is llama.cpp's: every measured
figure (llama_n_ctx, llama_n_ctx_seq, llama_n_batch, llama_n_ubatch, llama_n_seq_max, llama_model_size,
llama_state_seq_get_size after the prompt) and the log lines it printed (those the comparison reads).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "reports" / "verify" / "llamacpp-0.3.36.json"

#: (label, context, settings): kvcalc's engine settings, by name
LAUNCHES = [
    ("llama-server defaults", 1024, {}),
    ("llama-server -np 2, q8_0 K and V, -fa on", 1500, {"parallel": 2, "cache_type_k": "q8_0",
                                                          "cache_type_v": "q8_0", "flash_attn": "on"}),
    ("C API, -fa off, -ub 64", 700, {"frontend": "c-api", "ctx_size": 700, "flash_attn": "off", "ubatch_size": 64}),
    ("llama-cpp-python Llama() defaults", 512, {"frontend": "llama-cpp-python"}),
    ("ollama, num_ctx 2048, 2 parallel", 2048, {"frontend": "ollama", "num_ctx": 2048, "num_parallel": 2}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, required=True)
    a = ap.parse_args()
    import llama_cpp

    from kvcalc.config import load_model
    from kvcalc.engines.llamacpp import real
    from kvcalc.errors import KvcalcError

    ref = json.loads((ROOT / "tests/fixtures/engine-ref/llamacpp-0.3.36.json").read_text())
    cases, t0 = [], time.time()
    for model in sorted(ref["models"]):
        spec = load_model(str(a.models / f"{model}.gguf"))
        for label, context, settings in LAUNCHES:
            case = {"model": model, "gguf": f"tests/fixtures/gguf/llamacpp-{model}.gguf", "launch": label,
                    "context": context, "settings": settings}
            try:
                p, _ = real.planned(spec, context, settings=settings, cpu_build=True)
            except KvcalcError as e:
                case["planned_refusal"] = str(e)
                cases.append(case)
                continue
            try:
                case["measured"] = real.measure(llama_cpp, str(a.models / f"{model}.gguf"), p)
                rows = real.compare(p, case["measured"])
                case["agrees"] = all(r.agrees for r in rows if r.agrees is not None)
                case["rows"] = len(rows)
            except KvcalcError as e:
                case["llama_cpp_refusal"] = str(e)
            cases.append(case)
            print(model, label, case.get("agrees", case.get("planned_refusal", case.get("llama_cpp_refusal"))),
                  flush=True)
    doc = {"generated_by": "scripts/audit/llamacpp_verify.py", "llama_cpp_python": llama_cpp.__version__,
           "llama_cpp_commit": "0c1e57098", "build": "CPU only, from source (pip --no-binary :all:)",
           "prompt_tokens": real.PROMPT, "elapsed_s": round(time.time() - t0, 1), "cases": cases,
           "summary": {"cases": len(cases), "agree": sum(1 for c in cases if c.get("agrees")),
                       "differ": sum(1 for c in cases if c.get("agrees") is False),
                       "refused_by_kvcalc": sum(1 for c in cases if "planned_refusal" in c),
                       "refused_by_llama_cpp": sum(1 for c in cases if "llama_cpp_refusal" in c)}}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(doc["summary"])


if __name__ == "__main__":
    main()
