"""`models` and `show`: the shipped configs and one model's resolved layout."""

from __future__ import annotations

from ..textout import wrap
from ..units import format_tokens
from .common import ctx_text, table


def model_json(m, full: bool = False) -> dict:
    d = {
        "name": m.name,
        "display_name": m.display_name,
        "description": m.description,
        "path": m.path,
        "layers": len(m.layers),
        "layout": m.structure_text(), "config_layout": m.layout_text(),
        "mtp_layers": len(m.mtp_layers),
        "max_context": m.max_context,
        "precisions": {p.name: {r: f.name for r, f in p.formats.items()} for p in m.precisions.values()},
        "default_precision": m.default_precision,
    }
    if full:
        d["components"] = {
            name: {
                "cache": c.kind,
                "rule": c.rule(),
                "storage": c.storage if c.per_token else None,
                "entry_bytes": {p.name: c.entry_bytes(p.formats[c.storage]) for p in m.precisions.values()}
                if c.per_token else None,
                "fixed_bytes": {p.name: c.fixed_bytes(p.formats.get(c.storage)) for p in m.precisions.values()}
                if not c.per_token else 0,
            }
            for name, c in m.components.items()
        }
        d["layer_kinds"] = {k: list(v) for k, v in m.layer_kinds.items()}
        d["layer_list"] = list(m.layers)
        d["mtp_list"] = list(m.mtp_layers)
        d["sources"] = m.sources
        d["provenance"] = m.provenance
    return d


def render_models(con, specs) -> None:
    t = table("Shipped model configs")
    drop = {"MTP": 1, "max context": 2, "precisions (default first)": 3}  # on a narrow console, first to go
    for col in ("name", "layers", "layout", "MTP", "max context", "precisions (default first)"):
        t.add_column(col, no_wrap=col in ("name", "layers", "MTP", "max context"),
                     justify="right" if col in ("layers", "MTP", "max context") else "left", drop=drop.get(col))
    for m in specs:
        precs = [m.default_precision] + [p for p in m.precisions if p != m.default_precision]
        t.add_row(m.name, str(len(m.layers)), m.structure_text(), str(len(m.mtp_layers)),
                  format_tokens(m.max_context) if m.max_context else "-", ", ".join(precs))
    con.table(t)
    con.print("Any YAML file in this format works too: `kvcalc estimate path/to/model.yaml`.")


def _runs(layers: tuple[str, ...], max_period: int = 4) -> str:
    """Compress a layer list into runs of repeating patterns:
    ('c128a','c128a','c4a','c128a',...,'c4a') -> '0-1 c128a; 2-59 (c4a, c128a) x 29; 60 c4a'."""
    out, i, n = [], 0, len(layers)
    while i < n:
        best_p, best_r = 1, 1
        for p in range(1, max_period + 1):
            r = 1
            while i + (r + 1) * p <= n and layers[i + r * p : i + (r + 1) * p] == layers[i : i + p]:
                r += 1
            if r >= 2 and p * r > best_p * best_r:
                best_p, best_r = p, r
        span = best_p * best_r
        where = f"{i}" if span == 1 else f"{i}-{i + span - 1}"
        if best_p == 1:
            out.append(f"{where} {layers[i]}")
        else:
            out.append(f"{where} ({', '.join(layers[i:i + best_p])}) x {best_r}")
        i += span
    return "; ".join(out)


def _render_provenance(con, provenance: dict) -> None:
    """Where each stated value came from: field and source side by side, or, on a console too narrow for the
    two (field names and paths do not wrap), each source indented under its field in one column."""
    t = table("Sources of stated values")
    t.add_column("field")
    t.add_column("source")
    for k, v in provenance.items():
        t.add_row(k, v)
    if t.least_width() > con.width:
        t = table("Sources of stated values")
        t.add_column("field / source")
        for k, v in provenance.items():
            t.add_row("\n".join([k] + ["  " + piece for piece in wrap(v, con.width - 5)]))
    con.table(t)


def render_show(con, m) -> None:
    con.print(f"{m.display_name} ({m.name}) from {m.path}", style="bold")
    if m.description:
        con.print(m.description)
    con.print(f"max context: {ctx_text(m.max_context) if m.max_context else 'not stated'}; "
              f"layers: {len(m.layers)} ({m.structure_text()}; the config's kinds: {m.layout_text()}); MTP layers: "
              f"{len(m.mtp_layers)}{' (' + m.mtp_layers[0] + ')' if m.mtp_layers else ''}")
    t = table("Components")  # on a narrow console the cache kind goes first, then the rule
    t.add_column("component")
    t.add_column("cache", drop=1)
    t.add_column("rule (L = context)", drop=2)
    for p in m.precisions:
        t.add_column(f"B/entry {p}", justify="right")
    for name, c in m.components.items():
        sizes = [f"{c.entry_bytes(p.formats[c.storage]):,}" if c.per_token
                 else f"{c.fixed_bytes(p.formats.get(c.storage)):,} fixed" for p in m.precisions.values()]
        t.add_row(name, c.kind, c.rule(), *sizes)
    con.table(t)
    t = table("Layer kinds")
    t.add_column("kind")
    t.add_column("count", justify="right")
    t.add_column("components")
    counts = m.kind_counts()
    for k, comps in m.layer_kinds.items():
        mtp = m.mtp_layers.count(k)
        t.add_row(k, f"{counts.get(k, 0)}" + (f" + {mtp} MTP" if mtp else ""), ", ".join(comps))
    con.table(t)
    con.print(f"Layer layout: {_runs(m.layers)}")
    for p in m.precisions.values():
        con.print(f"precision {p.name}{' (default)' if p.name == m.default_precision else ''}: "
                  + ", ".join(f"{r} = {f.name}" for r, f in p.formats.items())
                  + (f"  [{p.source}]" if p.source else ""))
    if m.provenance:
        _render_provenance(con, m.provenance)
    for k, v in m.sources.items():
        con.print(f"{k}: {v}")
