#!/usr/bin/env python
"""Keep a sample of an engine reference (the JSON scripts/audit/vllm_llama4_reference.py writes from vLLM's own
code) small enough to ship: every case's inputs and the figures kvcalc must reproduce. Runs with the project's
python (it reads JSON only).

    python scripts/audit/reference_digest.py /tmp/vllm-llama4-reference.json \\
        tests/fixtures/engine-ref/vllm-0.33-llama4.json --every 13
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

INPUTS = ("kvcalc_model", "tp", "pp", "max_model_len", "block_size", "max_num_batched_tokens", "async_scheduling",
          "precision", "pool_bytes_per_gpu", "hybrid_kv_cache_manager")


def digest(case: dict) -> dict:
    i = case["inputs"]
    out = {"case": case["case_id"], "inputs": {k: i[k] for k in INPUTS}}
    model = out["inputs"]["kvcalc_model"]
    if model.startswith("/"):  # the harness's scratch copy of a shipped fixture: its name
        out["inputs"]["kvcalc_model"] = "tests/fixtures/engine-ref/" + Path(model).name
    if case["refused"]:
        out["refused"] = {"estimated_max_model_len": case.get("estimated_max_model_len")}
        return out
    out.update(bytes_per_block=case["bytes_per_block"], num_blocks=case["num_blocks"],
               blocks_per_request_per_group=case["blocks_per_request_per_group"],
               group_kinds=[g["spec"] for g in case["global_groups"]], engine_log_line=case["engine_log_line"],
               admission={str(a["T"]): a["per_group"] for a in case.get("admission", []) if "per_group" in a},
               nixl={str(n["T"]): n["blocks_moved_per_group"] for n in case.get("nixl", [])
                     if "blocks_moved_per_group" in n})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reference")
    ap.add_argument("out")
    ap.add_argument("--every", type=int, default=13, help="keep every Nth case (default 13)")
    a = ap.parse_args()
    ref = json.loads(Path(a.reference).read_text())
    # every Nth case (N prime to the grid's axes, so that the sample crosses them all), and every case planned with
    # the hybrid manager off (few in the grid)
    cases = [digest(c) for k, c in enumerate(ref["cases"])
             if k % a.every == 0 or not c["inputs"]["hybrid_kv_cache_manager"]]
    head = {k: ref[k] for k in ("generated_by", "vllm_version", "torch_version", "assumptions", "num_cases")}
    head["kept"] = (f"every {a.every}th case and every one with the hybrid manager off: {len(cases)} of "
                    f"{ref['num_cases']}")
    Path(a.out).write_text(json.dumps({**head, "cases": cases}, separators=(",", ":")) + "\n")
    print(f"{a.out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
