"""`kvcalc decode`: the bytes one decode step reads, beside what the cache stores."""

from __future__ import annotations

from ..units import format_bytes
from .common import ctx_text, ratio, table


def render_decode(con, d) -> None:
    con.print(f"{d.model}, {d.precision}, one decode step at {ctx_text(d.context_tokens)}: the cache bytes read "
              f"per sequence")
    t = table()
    drops = {"entries": 1, "per layer": 2, "reads": 3}  # left out first on a narrow console, and named
    for name, just in (("kind", "left"), ("layers", "right"), ("component", "left"), ("reads", "left"),
                       ("entries", "right"), ("per layer", "right"), ("all layers", "right")):
        t.add_column(name, justify=just, drop=drops.get(name))
    for k in d.kinds:
        for i, c in enumerate(k.components):
            t.add_row(k.kind if i == 0 else "", f"{k.layers}" if i == 0 else "", c.name, c.rule,
                      f"{c.entries:,}" if c.rule != "state" else "-", format_bytes(c.read_bytes),
                      format_bytes(c.read_bytes * k.layers))
        t.add_row("", "", "layer total", "", "", format_bytes(k.read_bytes), format_bytes(k.read_bytes * k.layers),
                  end_section=True)
    con.table(t)
    read = d.read_bytes_per_token
    con.print(f"Read per token: {format_bytes(read)} ({read:,} B) for one sequence"
              + (f"; x {d.batch} sequences: {format_bytes(read * d.batch)} per step" if d.batch > 1 else "")
              + f". Stored: {format_bytes(d.stored_bytes)} ({ratio(read, d.stored_bytes)} of it read).")
    if d.state_write_bytes:
        con.print(f"Fixed state written back per step: {format_bytes(d.state_write_bytes)} per sequence.")
    con.print("Basis: dense caches read in full, caches behind the lightning indexer its index_topk entries, every "
              "indexer key scored, fixed state read once per layer and written back; no weights, activations or "
              "compute; exact bytes, binary units.")
