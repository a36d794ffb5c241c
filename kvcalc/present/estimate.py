"""`estimate` and `compare`: the summary table, the per-kind and per-layer breakdowns, and their JSON."""

from __future__ import annotations

from ..estimate import BASES, PAGING, Estimate
from ..units import UNIT_BYTES, format_bytes
from ..zoo import HEADLINE_BASELINES
from ..errors import with_names
from .common import NARROW_BELOW, ctx_text, factor, ratio, table
from .flags import FLAGS


def _dicts(e: Estimate) -> list[dict]:
    """Estimate.to_dicts with the basis named in the command line's words."""
    out = e.to_dicts()
    for d in out:
        d["basis_detail"] = with_names(d["basis_detail"], FLAGS)
    return out


def layers_text(e: Estimate) -> str:
    kinds = e.kinds()
    return " + ".join(f"{n} {label}" for label, (n, _, _) in kinds.items())


def formats_text(e: Estimate) -> str:
    """'kv: fp8_ds_mla_v4 (584 B/entry); indexer: fp4_indexer (68 B/entry); state: fp32'."""
    sizes = e.entry_sizes()
    # fixed state that keeps its own dtype (a stated dtype / ssm_dtype) says so beside its role's format
    own = {}
    for c in (c for layer in e.layers for c in layer.components if not c.entry_bytes and c.fixed_bytes):
        fmt = e.model.precision(e.precision).formats.get(c.storage)
        if fmt is not None and c.format != fmt.name:
            own.setdefault(c.storage, {})[c.name] = c.format
    parts = [
        f"{role}: {fmt.name}" + (f" ({'/'.join(f'{b:,}' for b in sizes[role])} B/entry)" if role in sizes else "")
        + (f" ({'; '.join(f'{n}: {f}' for n, f in own[role].items())})" if role in own else "")
        for role, fmt in e.model.precision(e.precision).formats.items()
    ]
    roles = e.model.precision(e.precision).formats
    states = sorted({c.format for layer in e.layers for c in layer.components
                     if c.fixed_bytes and c.storage not in roles})
    if states:
        parts.append(f"state: {', '.join(states)}")
    return "; ".join(parts)

def basis_text(e: Estimate) -> str:
    mtp_note = ""
    if e.model.mtp_layers:
        mtp_note = (
            f"; MTP layer{'s' if len(e.model.mtp_layers) > 1 else ''} counted"
            if e.mtp
            else "; MTP layer not counted" + (f" ({FLAGS['mtp']} counts it)" if e.basis == "complete" else "")
        )
    return f"{e.basis}: {layers_text(e)}{mtp_note}; {PAGING}; binary units"


def _find_ref(refs: list[Estimate], precision: str) -> Estimate | None:
    for r in refs:
        if r.precision == precision:
            return r
    return None


def _storage(e: Estimate) -> str:
    """'fp8_ds_mla_v4 584 + fp4_indexer 68': each storage role's format and bytes per entry."""
    formats = e.model.precision(e.precision).formats
    sizes = e.entry_sizes()
    names = {formats[role].name for role in sizes}
    if len(names) == 1:  # 'bf16 1,152 + 256'
        return f"{names.pop()} " + " + ".join("/".join(f"{b:,}" for b in s) for s in sizes.values())
    return " + ".join(f"{formats[role].name} {'/'.join(f'{b:,}' for b in s)}" for role, s in sizes.items())


def render_summary(con, results: list[Estimate], refs: list[Estimate], headline: bool) -> None:
    basis = results[0].basis
    batch = results[0].batch
    contexts = results[0].contexts.tolist()
    at_text = ctx_text(contexts[0]) if len(contexts) == 1 else f"{len(contexts)} context lengths"
    title = (f"KV cache per sequence at {at_text}" if batch == 1
             else f"KV cache for {batch:,} sequences at {at_text}")
    t = table(title)
    t.add_column("model", no_wrap=True)
    if len(contexts) > 1:
        t.add_column("context", justify="right", no_wrap=True)
    t.add_column("precision", no_wrap=True)
    t.add_column("per sequence", justify="right", no_wrap=True)
    if batch > 1:
        t.add_column(f"x {batch:,}", justify="right", no_wrap=True, drop=2)
    if refs:  # the ratio wraps before the factor, and goes first on a console too narrow even so
        t.add_column(f"vs {refs[0].model.name}", justify="right", drop=1)
    last_model = None
    for e in results:
        for i, ctx in enumerate(contexts):
            first = e.model.name != last_model
            row = [e.model.name if first else ""]
            last_model = e.model.name
            if len(contexts) > 1:
                row.append(ctx_text(ctx, unit=False))
            row += [e.precision, format_bytes(e.per_sequence[i])]
            if batch > 1:
                row.append(format_bytes(e.total[i]))
            if refs:
                ref = _find_ref(refs, e.precision)
                row.append(ratio(e.per_sequence[i], ref.per_sequence[i]) if ref is not None else "-")
            t.add_row(*row)
    con.table(t)
    seen: dict[str, list[str]] = {}
    for e in results:
        seen.setdefault(e.model.name, [f"{layers_text(e)} layers"]).append(f"{e.precision} = {_storage(e)}")
    con.print("Layers counted and storage (format, B per cached entry):")
    for name, parts in seen.items():
        con.print(f"  {name}: " + "; ".join(parts))
    short = {"complete": "all a request holds (window, compressed entries, indexer keys, compressor state)",
             "article": "what vLLM's V4 write-up counts (window, compressed entries, indexer keys; no state, no MTP)"}
    mtp_note = ""
    if basis == "complete" and any(e.model.mtp_layers for e in results):
        mtp_note = "; MTP counted" if results[0].mtp else "; MTP not counted (--mtp)"
    notes = [f"Basis: {basis}, {short[basis]}{mtp_note}.",
             "Exact bytes, no paging; binary units (1 GiB = 2^30 B). Storage: format and bytes per cached entry."]
    if refs:
        notes.append(f"Ratios: against {refs[0].model.name} at the same precision and context.")
    if headline:
        notes += _baseline_notes(results)
        if basis == "complete":
            notes.append("--basis article counts what vLLM's write-up counts (`kvcalc claims` checks its figures).")
        notes.append("Name a model for its per-layer breakdown: kvcalc estimate deepseek-v4-pro --context 1M")
    for n in notes:
        con.print(n)


def _baseline_notes(results: list[Estimate]) -> list[str]:
    by = {(e.model.name, e.precision): e for e in results}
    parts = []
    for model, prec, base, base_prec in HEADLINE_BASELINES:
        a, b = by.get((model, prec)), by.get((base, base_prec))
        if a is not None and b is not None and len(a.contexts) == 1 and b.per_sequence[0]:
            parts.append(f"{model} {prec} is {a.per_sequence[0] / b.per_sequence[0]:.2%} of {base} {base_prec}")
    return [f"Against the report's GQA8 baseline of the same depth: {'; '.join(parts)}."] if parts else []


def render_engine_requests(con, results: list[Estimate], reserved: list[dict]) -> None:
    """``estimate --engine``: what the engine reserves for one request at each context, beside the exact bytes."""
    from ..engines import get_engine

    first = reserved[0]
    title = get_engine(first["name"]).title
    t = table(f"What {title} reserves for one request (its own defaults, one rank)")
    for col in ("model", "precision", "context", "reserved", "exact", "units"):
        t.add_column(col, justify="left" if col in ("model", "precision") else "right")
    rows = [(e, ctx) for e in results for ctx in e.contexts]
    for (e, ctx), one in zip(rows, reserved):
        t.add_row(e.model.name, e.precision, ctx_text(int(ctx)), format_bytes(one["request_bytes"]),
                  format_bytes(one["exact_bytes"]),
                  f"{one['units_per_request']:,} of {one['unit_bytes']:,} B ({one['layout']})")
    con.table(t)
    con.print(f"Basis: {first['basis']}.")
    for (e, ctx), one in zip(rows, reserved):
        if "command" in one:
            con.print(f"{e.model.name} at {ctx_text(int(ctx))}: {one['command']}")
            for line in one.get("log", ()):
                con.print(f"  {line}")
    for note in dict.fromkeys(n for one in reserved for n in one["notes"]):
        con.print(f"Note: {note}")


def render_kinds(con, e: Estimate) -> None:
    """By layer kind. On a console narrower than the full table (an 80-column terminal) the format, B/entry and
    per-layer columns move out: formats and bytes per entry are in the Storage line under the table, per layer
    = all layers / layers; the line under the table names them. Narrower still (60 columns) the holds column
    (each cache's rule) and the entries go too, named the same way."""
    # name, justify, no_wrap, hide_below, drop (textout.Table: left out narrower than hide_below, or lowest
    # drop first when the table does not fit)
    cols = (("kind", "left", False, None, None), ("layers", "right", False, None, None),
            ("component", "left", False, None, None), ("holds", "left", False, None, 1),
            ("format", "left", False, NARROW_BELOW, 0), ("entries", "right", True, None, 2),
            ("B/entry", "right", True, NARROW_BELOW, 0), ("per layer", "right", True, NARROW_BELOW, 0),
            ("all layers", "right", True, None, None))
    for i, ctx in enumerate(e.contexts.tolist()):
        t = table(f"{e.model.display_name}, {e.precision}, at {ctx_text(ctx)}: by layer kind")
        for name, just, no_wrap, hide_below, drop in cols:
            t.add_column(name, justify=just, no_wrap=no_wrap, hide_below=hide_below, drop=drop)
        for label, (n, comps, layer_bytes) in e.kinds().items():
            if not comps:  # MLP / MoE layers of a hybrid: counted, holding nothing
                t.add_row(label, str(n), "(no cache)", "", "", "", "", "0 B", "0 B", end_section=True)
                continue
            for j, c in enumerate(comps):
                t.add_row(label if j == 0 else "", str(n) if j == 0 else "", c.name, c.rule, c.format,
                          f"{int(c.entries[i]):,}" if c.entry_bytes else "-",
                          f"{c.entry_bytes:,}" if c.entry_bytes else "-",
                          format_bytes(c.bytes[i]), format_bytes(c.bytes[i] * n))
            t.add_row("", "", "layer total", "", "", "", "", format_bytes(layer_bytes[i]),
                      format_bytes(layer_bytes[i] * n), end_section=True, style="bold")
        con.table(t)
        con.print(f"Total per sequence: {format_bytes(e.per_sequence[i])} ({int(e.per_sequence[i]):,} B)"
                  + (f"; x {e.batch} sequences: {format_bytes(e.total[i])} ({int(e.total[i]):,} B)" if e.batch > 1 else ""))
        con.print(f"Storage: {formats_text(e)}.")
        con.print(f"Basis: {basis_text(e)}.")


def render_layers(con, e: Estimate) -> None:
    """One row per layer (a model may have 10,000: the table layout is linear in its cells)."""
    names = [str(layer.index) + (" (MTP)" if layer.mtp else "") for layer in e.layers]
    comps = [", ".join(c.name for c in layer.components) for layer in e.layers]
    for i, ctx in enumerate(e.contexts.tolist()):
        t = table(f"{e.model.display_name}, {e.precision}, at {ctx_text(ctx)}: layer by layer")
        for head, just, drop in (("layer", "right", None), ("kind", "left", None), ("components", "left", None),
                                 ("bytes", "right", None), ("cumulative", "right", 1)):
            t.add_column(head, justify=just, no_wrap=just == "right", drop=drop)
        running = 0
        for name, layer, comp in zip(names, e.layers, comps):
            b = int(layer.bytes[i])
            running += b
            t.add_row(name, layer.kind, comp, f"{b:,}", format_bytes(running))
        con.table(t)
        con.print(f"Total per sequence: {format_bytes(e.per_sequence[i])} ({int(e.per_sequence[i]):,} B). "
                  f"Storage: {formats_text(e)}.")
        con.print(f"Basis: {basis_text(e)}.")
        con.print()


def estimates_json(results: list[Estimate], refs: list[Estimate]) -> list[dict]:
    out = []
    for e in results:
        ref = _find_ref(refs, e.precision) if refs else None
        for i, d in enumerate(_dicts(e)):
            if ref is not None:
                d["reference"] = {
                    "model": ref.model.name,
                    "precision": ref.precision,
                    "per_sequence_bytes": int(ref.per_sequence[i]),
                    "ratio": float(e.per_sequence[i]) / float(ref.per_sequence[i]) if ref.per_sequence[i] else None,
                }
            out.append(d)
    return out


def _column_unit(values) -> tuple[str, float]:
    """One binary unit for a whole column: the unit of its smallest non-zero value, so no entry rounds to 0."""
    nonzero = [abs(float(v)) for v in values if v]
    if not nonzero:
        return "B", 1.0
    unit = format_bytes(min(nonzero)).split()[-1]
    return unit, float(UNIT_BYTES[unit])


def render_compare(con, a: Estimate, b: Estimate) -> None:
    t = table(f"{a.model.name} ({a.precision}) vs {b.model.name} ({b.precision}), per sequence")
    (ua, sa), (ub, sb) = _column_unit(a.per_sequence), _column_unit(b.per_sequence)
    for col in ("context", f"A: {a.model.name} ({ua})", f"B: {b.model.name} ({ub})", "B / A", "A / B"):
        t.add_column(col, justify="right", drop=1 if col == "A / B" else None)  # A / B: the inverse of B / A

    def cell(v: float, unit: str, size: float) -> str:
        return f"{int(v):,}" if unit == "B" else f"{v / size:,.2f}"

    for i, ctx in enumerate(a.contexts.tolist()):
        pa, pb = float(a.per_sequence[i]), float(b.per_sequence[i])
        t.add_row(ctx_text(ctx, unit=False), cell(pa, ua, sa), cell(pb, ub, sb),
                  f"{pb / pa:.2%}" if pa else "-", factor(pa / pb) if pb else "-")
    con.table(t)
    con.print(f"A: {layers_text(a)}; {formats_text(a)}.")
    con.print(f"B: {layers_text(b)}; {formats_text(b)}.")
    con.print(f"Basis: {a.basis} ({with_names(BASES[a.basis], FLAGS)}); exact bytes, no paging; binary units, one per column.")


def compare_json(a: Estimate, b: Estimate) -> dict:
    return {
        "a": _dicts(a),
        "b": _dicts(b),
        # null where A holds no bytes (a state-only model on the article basis): JSON has no NaN
        "ratio_b_over_a": [float(y) / float(x) if x else None for x, y in zip(a.per_sequence, b.per_sequence)],
        "context_tokens": [int(c) for c in a.contexts],
    }
