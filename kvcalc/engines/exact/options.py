"""The exact engine's settings a user may set."""

from __future__ import annotations

from ..options import Option

TITLE = "exact"
SUMMARY = "exact bytes, no paging: every request reserves what `kvcalc estimate` counts"
OPTIONS = (
    Option("gpu_memory_utilization", "--gpu-memory-utilization", "Fraction of each GPU's total memory the "
           "engine may use (vLLM 0.33 default 0.92).", float, minimum=0.0, maximum=1.0),
)
