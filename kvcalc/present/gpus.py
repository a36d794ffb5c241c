"""`gpus`: the accelerator catalogue."""

from __future__ import annotations

from ..units import format_bytes
from .common import table


def render_gpus(con, gpus) -> None:
    t = table("Accelerators (memory as the device reports it; vLLM uses --gpu-memory-utilization of it)")
    for col in ("key", "name", "memory", "bytes", "basis", "bandwidth"):  # narrow: the exact bytes go first
        t.add_column(col, justify="right" if col in ("memory", "bytes", "bandwidth") else "left",
                     drop={"bytes": 1, "basis": 2, "bandwidth": 3}.get(col))
    for g in gpus:
        bw = "-" if g.bandwidth_bytes_per_s is None else f"{g.bandwidth_bytes_per_s / 1e12:g} TB/s"
        t.add_row(g.key, g.name, format_bytes(g.memory_bytes), f"{g.memory_bytes:,}", g.basis, bw)
    con.table(t)
    con.print("Bandwidth: peak memory bandwidth from spec sheets, decimal TB/s (`kvcalc decode --gpu` divides by "
              "it). Sources: `kvcalc gpus --json`.")
    from ..hardware import ALIASES

    con.print("Short names: " + "; ".join(f"{k} is read as {full} (a warning says so)" for k, (full, _) in
                                          ALIASES.items()) + ".")
