"""`gpus`: the accelerator catalogue."""

from __future__ import annotations

from ..units import format_bytes
from .common import table


def render_gpus(con, gpus) -> None:
    t = table("Accelerators (memory as the device reports it; vLLM uses --gpu-memory-utilization of it)")
    for col in ("key", "name", "memory", "bytes", "basis"):
        t.add_column(col, justify="right" if col in ("memory", "bytes") else "left")
    for g in gpus:
        t.add_row(g.key, g.name, format_bytes(g.memory_bytes), f"{g.memory_bytes:,}", g.basis)
    con.table(t)
    con.print("Sources: `kvcalc gpus --json`.")
