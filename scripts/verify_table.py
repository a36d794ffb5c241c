#!/usr/bin/env python
"""A markdown table of the `kvcalc verify` JSON reports in a folder (used by scripts/gpu-check.sh)."""

import json
import sys
from pathlib import Path


def gib(b):
    return "-" if b is None else f"{b / 2**30:.3f}"


def main(folder: str) -> int:
    rows = []
    for f in sorted(Path(folder).glob("*.json")):
        try:
            o = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(o, dict) or "verdict" not in o:
            continue
        m = o.get("measured", {})
        bw, copy = o.get("fill_bytes_per_second"), o.get("device_copy_bytes_per_second")
        rows.append(
            f"| {o['model']} | {o['precision']} | {o['context_tokens']:,} | {o['device']} | {o['fill']} "
            f"({o.get('writer') or '-'}) | {gib(o['predicted_bytes'])} | {gib(o['planned_bytes'])} | "
            f"{gib(o['allocated_bytes'])} | {gib(m.get('allocator_allocated_delta'))} | "
            f"{gib(o.get('expected_written_bytes'))} | {gib(o.get('written_bytes'))} | "
            f"{'-' if not bw else f'{bw / 2**30:.2f}'} | {'-' if not (bw and copy) else f'{bw / copy:.0%}'} | "
            f"{o['verdict']} | `{f.name}` |")
    print("| model | precision | context | device | fill (writer) | predicted GiB | planned GiB | allocated GiB | "
          "allocator delta GiB | expected written GiB | written GiB | fill GiB/s | of copy bw | verdict | report |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(r)
    print()
    print("predicted: exact analytic bytes (kvcalc estimate, complete basis); planned: vLLM 0.33's paged pool "
          "(blocks x bytes per block, null block included); allocated: storage bytes; written: counted in "
          "memory after the fill (sentinel, two passes). GiB = 2^30 B.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "reports/verify"))
