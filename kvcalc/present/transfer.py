"""`kvcalc transfer`: what a request's cache moves from prefill to decode, group by group, and how long."""

from __future__ import annotations

from ..errors import with_names
from ..units import format_bytes
from .flags import FLAGS
from .common import ctx_text, table


def _seconds(s: float) -> str:
    return f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.3f} s"


def render_transfer(con, t) -> None:
    ranks = f", on each of {t.tp} tensor-parallel ranks" if t.tp > 1 else ""
    where = f" on {t.gpu} ({t.arch})" if t.gpu is not None and t.arch else \
        f" on {t.gpu}" if t.gpu else f" on {t.arch}" if t.arch else ""
    con.print(f"{t.model}, {t.precision}, a prompt of {ctx_text(t.prompt_tokens)} {t.plan.moved} "
              f"on {t.engine_title}{where}{ranks}:")
    tab = table()
    drops = {"rule": 1, "per unit": 2, "layers": 3}
    for name, just in (("group", "left"), ("caches", "left"), ("layers", "right"), ("moves", "right"),
                       ("rule", "left"), ("per unit", "right"), ("bytes", "right")):
        tab.add_column(name, justify=just, drop=drops.get(name))
    for g in t.plan.groups:
        unit = g.unit if g.units == 1 else f"{g.unit}s"
        moves = f"{g.units:,} {unit}" if g.unit != "bytes" else "exact"
        tab.add_row(g.kind, g.label, f"{g.layers}", moves, g.rule, format_bytes(g.unit_bytes), format_bytes(g.bytes))
    if t.plan.aux_bytes:
        tab.add_row("metadata", t.plan.aux_label, "", "1 row", "", "", f"{t.plan.aux_bytes:,} B")
    con.table(tab)
    con.print(f"Moves {format_bytes(t.transfer_bytes)} ({t.transfer_bytes:,} B) per rank"
              + (f", {format_bytes(t.wire_bytes)} over all {t.tp} ranks" if t.tp > 1 else "")
              + f". The request holds {format_bytes(t.stored_bytes)} exactly and {t.plan.reserved_as} "
              f"{format_bytes(t.reserved_bytes)} of the engine's pool.")
    for note in t.plan.notes:
        con.print(f"Note: {with_names(note, FLAGS)}.")
    if t.link is not None:
        con.print(f"Over {t.link.name} ({t.link.bytes_per_s / 1e9:,.1f} GB/s one way): "
                  f"{_seconds(t.transfer_seconds)}.")
    else:
        from ..transfer import links

        lt = table()
        for name, just in (("link", "left"), ("GB/s one way", "right"), ("time", "right")):
            lt.add_column(name, justify=just)
        for k in links().values():
            lt.add_row(k.name, f"{k.bytes_per_s / 1e9:,.1f}", _seconds(t.seconds_over(k)))
        con.table(lt)
    if t.plan.basis is not None:
        con.print(f"Basis: {t.plan.basis}.")
        return
    kernels = ("" if t.engine == "exact" else
               f" (their size and rows as the engine's kernels on {t.arch} take them)" if t.arch
               else " (their size and rows as the engine's kernels on Hopper take them: no GPU named)")
    con.print(f"Basis: the connector's whole blocks or pages with their padding{kernels}, one rank (each decode rank "
              "reads its own share; ranks in parallel, one link each); peak one-way link rates, no protocol overhead; "
              "no decode-side prefix hit, no speculative decoding; held: exact bytes in the formats the engine "
              "stores; binary units for bytes, decimal for rates.")
