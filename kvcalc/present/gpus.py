"""`gpus`: the accelerator catalogue."""

from __future__ import annotations

from ..units import format_bytes
from .common import table


def render_gpus(con, gpus) -> None:
    t = table("Accelerators (memory as the device reports it; vLLM uses --gpu-memory-utilization of it)")
    for col in ("key", "name", "memory", "bytes", "basis"):  # on a narrow console the exact bytes go first
        t.add_column(col, justify="right" if col in ("memory", "bytes") else "left",
                     drop={"bytes": 1, "basis": 2}.get(col))
    for g in gpus:
        t.add_row(g.key, g.name, format_bytes(g.memory_bytes), f"{g.memory_bytes:,}", g.basis)
    con.table(t)
    con.print("Sources: `kvcalc gpus --json`.")
