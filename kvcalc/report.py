"""Rendering and JSON shaping for the CLI. Gathering numbers is the library's job; this only presents them."""

from __future__ import annotations

from .estimate import BASES, Estimate
from .units import format_bytes, format_tokens

#: The article's story in one table: the V3.2-style stack, the report's GQA8 baseline at V4-Pro's and
#: V4-Flash's depth, and the two V4 models. Ratios are against the reference at the same precision.
HEADLINE_MODELS = ("deepseek-v3.2", "gqa8-hd128-l61", "deepseek-v4-pro", "gqa8-hd128-l43", "deepseek-v4-flash")
HEADLINE_REFERENCE = "deepseek-v3.2"


def _table(title: str | None = None, caption: str | None = None):
    from rich import box
    from rich.table import Table

    return Table(title=title, caption=caption, box=box.SIMPLE_HEAD, title_justify="left", caption_justify="left")


def _ctx(n: int) -> str:
    short = format_tokens(n)
    return f"{n:,} ({short})" if short != str(n) else f"{n:,}"


def _ratio(value: float, ref: float) -> str:
    """Share of the reference and the factor: '11.50% (1/8.70)', '290.91% (2.91x)'."""
    r = float(value) / float(ref)
    if r == 1:
        return "100.00%"
    return f"{r:.2%} " + (f"(1/{1 / r:.2f})" if r < 1 else f"({r:.2f}x)")


def _find_ref(refs: list[Estimate], precision: str) -> Estimate | None:
    for r in refs:
        if r.precision == precision:
            return r
    return None


def _storage(e: Estimate) -> str:
    return " + ".join("/".join(f"{b:,}" for b in sizes) for sizes in e.entry_sizes().values())


def render_summary(con, results: list[Estimate], refs: list[Estimate], headline: bool) -> None:
    basis = results[0].basis
    batch = results[0].batch
    contexts = results[0].contexts.tolist()
    ctx_text = _ctx(contexts[0]) if len(contexts) == 1 else "several contexts"
    title = f"KV cache per sequence at {ctx_text} tokens" if batch == 1 else f"KV cache for {batch} sequences at {ctx_text} tokens"
    t = _table(title)
    t.add_column("model", no_wrap=True)
    if len(contexts) > 1:
        t.add_column("context", justify="right")
    t.add_column("layers counted", no_wrap=True)
    t.add_column("precision", no_wrap=True)
    t.add_column("B/entry", justify="right", no_wrap=True)
    t.add_column("per sequence", justify="right", no_wrap=True)
    if batch > 1:
        t.add_column(f"x {batch}", justify="right")
    if refs:
        t.add_column(f"vs {refs[0].model.name}", justify="right", no_wrap=True)
    last_model = None
    for e in results:
        for i, ctx in enumerate(contexts):
            first = e.model.name != last_model
            row = [e.model.name if first else ""]
            last_model = e.model.name
            if len(contexts) > 1:
                row.append(_ctx(ctx))
            row += [e.layers_text() if first else "", e.precision, _storage(e), format_bytes(e.per_sequence[i])]
            if batch > 1:
                row.append(format_bytes(e.total[i]))
            if refs:
                ref = _find_ref(refs, e.precision)
                row.append(_ratio(e.per_sequence[i], ref.per_sequence[i]) if ref is not None else "-")
            t.add_row(*row)
    con.print(t)
    short = {"complete": "all a request holds (window, compressed entries, indexer keys, compressor state)",
             "article": "what vLLM's V4 write-up counts (window, compressed entries, indexer keys; no state, no MTP)"}
    mtp_note = ""
    if basis == "complete" and any(e.model.mtp_layers for e in results):
        mtp_note = "; MTP counted" if results[0].mtp else "; MTP not counted (--mtp)"
    notes = [f"Basis: {basis}, {short[basis]}{mtp_note}.",
             "Exact bytes, no paging; binary units (1 GiB = 2^30 B). B/entry: bytes per cached entry (kv + indexer)."]
    if refs:
        notes.append(f"Ratios: against {refs[0].model.name} at the same precision and context.")
    if headline:
        notes.append("--basis article gives vLLM's write-up figures (bf16: 83.875 GiB V3.2-style, 9.625 GiB V4-Pro).")
        notes.append("Name a model for its per-layer breakdown: kvcalc estimate deepseek-v4-pro --context 1M")
    for n in notes:
        con.print(n)


def render_kinds(con, e: Estimate) -> None:
    for i, ctx in enumerate(e.contexts.tolist()):
        t = _table(f"{e.model.display_name}, {e.precision}, at {_ctx(ctx)} tokens: by layer kind")
        for col, just in (
            ("kind", "left"), ("layers", "right"), ("component", "left"), ("holds", "left"), ("format", "left"),
            ("entries", "right"), ("B/entry", "right"), ("per layer", "right"), ("all layers", "right"),
        ):
            t.add_column(col, justify=just)
        for label, (n, comps, layer_bytes) in e.kinds().items():
            for j, c in enumerate(comps):
                t.add_row(
                    label if j == 0 else "", str(n) if j == 0 else "", c.name, c.rule, c.format,
                    f"{int(c.entries[i]):,}" if c.entry_bytes else "-",
                    f"{c.entry_bytes:,}" if c.entry_bytes else "-",
                    format_bytes(c.bytes[i]), format_bytes(c.bytes[i] * n),
                )
            t.add_row("", "", "layer total", "", "", "", "", format_bytes(layer_bytes[i]),
                      format_bytes(layer_bytes[i] * n), end_section=True, style="bold")
        con.print(t)
        con.print(f"Total per sequence: {format_bytes(e.per_sequence[i])} ({int(e.per_sequence[i]):,} B)"
                  + (f"; x {e.batch} sequences: {format_bytes(e.total[i])} ({int(e.total[i]):,} B)" if e.batch > 1 else ""))
        con.print(f"Storage: {e.formats_text()}.")
        con.print(f"Basis: {e.basis_text()}.")


def render_layers(con, e: Estimate) -> None:
    for i, ctx in enumerate(e.contexts.tolist()):
        t = _table(f"{e.model.display_name}, {e.precision}, at {_ctx(ctx)} tokens: layer by layer")
        t.add_column("layer", justify="right")
        t.add_column("kind")
        t.add_column("components")
        t.add_column("bytes", justify="right")
        t.add_column("cumulative", justify="right")
        running = 0
        for layer in e.layers:
            running += int(layer.bytes[i])
            t.add_row(
                str(layer.index) + (" (MTP)" if layer.mtp else ""), layer.kind,
                ", ".join(c.name for c in layer.components), f"{int(layer.bytes[i]):,}", format_bytes(running),
            )
        con.print(t)
        con.print(f"Total per sequence: {format_bytes(e.per_sequence[i])} ({int(e.per_sequence[i]):,} B). "
                  f"Storage: {e.formats_text()}.")
        con.print(f"Basis: {e.basis_text()}.")


def estimates_json(results: list[Estimate], refs: list[Estimate]) -> list[dict]:
    out = []
    for e in results:
        ref = _find_ref(refs, e.precision) if refs else None
        for i, d in enumerate(e.to_dicts()):
            if ref is not None:
                d["reference"] = {
                    "model": ref.model.name,
                    "precision": ref.precision,
                    "per_sequence_bytes": int(ref.per_sequence[i]),
                    "ratio": float(e.per_sequence[i] / ref.per_sequence[i]),
                }
            out.append(d)
    return out


def render_compare(con, a: Estimate, b: Estimate) -> None:
    t = _table(f"{a.model.name} ({a.precision}) vs {b.model.name} ({b.precision}), per sequence")
    for col in ("context", f"A: {a.model.name}", f"B: {b.model.name}", "B / A", "A / B"):
        t.add_column(col, justify="right")
    for i, ctx in enumerate(a.contexts.tolist()):
        pa, pb = float(a.per_sequence[i]), float(b.per_sequence[i])
        t.add_row(_ctx(ctx), format_bytes(pa), format_bytes(pb), f"{pb / pa:.2%}", f"{pa / pb:.2f}x")
    con.print(t)
    con.print(f"A: {a.layers_text()}; {a.formats_text()}.")
    con.print(f"B: {b.layers_text()}; {b.formats_text()}.")
    con.print(f"Basis: {a.basis} ({BASES[a.basis]}); exact bytes, no paging; binary units.")


def compare_json(a: Estimate, b: Estimate) -> dict:
    return {
        "a": a.to_dicts(),
        "b": b.to_dicts(),
        "ratio_b_over_a": [float(x) for x in (b.per_sequence / a.per_sequence)],
        "context_tokens": [int(c) for c in a.contexts],
    }


def model_json(m, full: bool = False) -> dict:
    d = {
        "name": m.name,
        "display_name": m.display_name,
        "description": m.description,
        "path": m.path,
        "layers": len(m.layers),
        "layout": m.layout_text(),
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
                "fixed_bytes": c.fixed_bytes(),
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
    t = _table("Shipped model configs")
    for col in ("name", "layers", "layout", "MTP", "max context", "precisions (default first)"):
        t.add_column(col)
    for m in specs:
        precs = [m.default_precision] + [p for p in m.precisions if p != m.default_precision]
        t.add_row(m.name, str(len(m.layers)), m.layout_text(), str(len(m.mtp_layers)),
                  _ctx(m.max_context) if m.max_context else "-", ", ".join(precs))
    con.print(t)
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


def render_show(con, m) -> None:
    con.print(f"{m.display_name} ({m.name}) from {m.path}", style="bold")
    if m.description:
        con.print(m.description)
    con.print(f"max context: {_ctx(m.max_context) if m.max_context else 'not stated'}; "
              f"layers: {len(m.layers)} ({m.layout_text()}); MTP layers: "
              f"{len(m.mtp_layers)}{' (' + m.mtp_layers[0] + ')' if m.mtp_layers else ''}")
    t = _table("Components")
    t.add_column("component")
    t.add_column("cache")
    t.add_column("rule (L = context)")
    for p in m.precisions:
        t.add_column(f"B/entry {p}", justify="right")
    for name, c in m.components.items():
        sizes = [f"{c.entry_bytes(p.formats[c.storage]):,}" if c.per_token else f"{c.fixed_bytes():,} fixed"
                 for p in m.precisions.values()]
        t.add_row(name, c.kind, c.rule(), *sizes)
    con.print(t)
    t = _table("Layer kinds")
    t.add_column("kind")
    t.add_column("count", justify="right")
    t.add_column("components")
    counts = m.kind_counts()
    for k, comps in m.layer_kinds.items():
        mtp = m.mtp_layers.count(k)
        t.add_row(k, f"{counts.get(k, 0)}" + (f" + {mtp} MTP" if mtp else ""), ", ".join(comps))
    con.print(t)
    con.print(f"Layer layout: {_runs(m.layers)}")
    for p in m.precisions.values():
        con.print(f"precision {p.name}{' (default)' if p.name == m.default_precision else ''}: "
                  + ", ".join(f"{r} = {f.name}" for r, f in p.formats.items())
                  + (f"  [{p.source}]" if p.source else ""))
    if m.provenance:
        t = _table("Sources of stated values")
        t.add_column("field")
        t.add_column("source")
        for k, v in m.provenance.items():
            t.add_row(k, v)
        con.print(t)
    for k, v in m.sources.items():
        con.print(f"{k}: {v}")


def render_claims(con, results) -> None:
    from rich.text import Text

    t = _table("Published numbers, recomputed")
    for col, just in (("id", "left"), ("claim", "left"), ("published", "right"), ("computed", "right"),
                      ("tolerance", "right"), ("result", "left")):
        t.add_column(col, justify=just)
    for r in results:
        t.add_row(r.id, r.claim, r.published_text(), r.computed_text(), r.tolerance_text(),
                  Text("pass", style="green") if r.passed else Text("MISS", style="bold red"))
    con.print(t)
    n_fail = sum(not r.passed for r in results)
    con.print(f"{len(results) - n_fail} passed, {n_fail} failed")
