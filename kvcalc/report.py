"""Rendering and JSON shaping for the CLI. Gathering numbers is the library's job; this only presents them."""

from __future__ import annotations

from .estimate import BASES, Estimate
from .textout import Styled, Table
from .units import UNIT_BYTES, format_bytes, format_tokens

#: The article's story in one table: the V3.2-style stack, the report's GQA8 baseline at V4-Pro's and
#: V4-Flash's depth, and the two V4 models. Ratios are against the reference at the same precision.
HEADLINE_MODELS = ("deepseek-v3.2", "gqa8-hd128-l61", "deepseek-v4-pro", "gqa8-hd128-l43", "deepseek-v4-flash")
HEADLINE_REFERENCE = "deepseek-v3.2"
#: The technical report's "~2% of a bf16 GQA8 baseline": each V4 model at fp8 against the baseline of its depth.
HEADLINE_BASELINES = (("deepseek-v4-pro", "fp8", "gqa8-hd128-l61", "bf16"),
                      ("deepseek-v4-flash", "fp8", "gqa8-hd128-l43", "bf16"))


#: consoles narrower than this (an 80-column terminal) get the compact tables: detail moves under the table
NARROW_BELOW = 104


def _table(title: str | None = None) -> Table:
    return Table(title)


def _ctx(n: int, unit: bool = True) -> str:
    """'1,048,576 (1M) tokens'; without the unit for table cells under a 'context' header."""
    short = format_tokens(n)
    text = f"{n:,} ({short})" if short != str(n) else f"{n:,}"
    if not unit:
        return text
    return f"{text} token" if n == 1 else f"{text} tokens"


def _ratio(value: float, ref: float) -> str:
    """Share of the reference and the factor: '11.50% (1/8.70)', '290.91% (2.91x)'; '-' for a zero reference."""
    if float(ref) == 0:
        return "-"
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
    """'fp8_ds_mla_v4 584 + fp4_indexer 68': each storage role's format and bytes per entry."""
    formats = e.model.precisions[e.precision].formats
    sizes = e.entry_sizes()
    names = {formats[role].name for role in sizes}
    if len(names) == 1:  # 'bf16 1,152 + 256'
        return f"{names.pop()} " + " + ".join("/".join(f"{b:,}" for b in s) for s in sizes.values())
    return " + ".join(f"{formats[role].name} {'/'.join(f'{b:,}' for b in s)}" for role, s in sizes.items())


def render_summary(con, results: list[Estimate], refs: list[Estimate], headline: bool) -> None:
    basis = results[0].basis
    batch = results[0].batch
    contexts = results[0].contexts.tolist()
    ctx_text = _ctx(contexts[0]) if len(contexts) == 1 else f"{len(contexts)} context lengths"
    title = (f"KV cache per sequence at {ctx_text}" if batch == 1
             else f"KV cache for {batch:,} sequences at {ctx_text}")
    t = _table(title)
    t.add_column("model", no_wrap=True)
    if len(contexts) > 1:
        t.add_column("context", justify="right", no_wrap=True)
    t.add_column("precision", no_wrap=True)
    t.add_column("per sequence", justify="right", no_wrap=True)
    if batch > 1:
        t.add_column(f"x {batch:,}", justify="right", no_wrap=True)
    if refs:
        t.add_column(f"vs {refs[0].model.name}", justify="right", no_wrap=True)
    last_model = None
    for e in results:
        for i, ctx in enumerate(contexts):
            first = e.model.name != last_model
            row = [e.model.name if first else ""]
            last_model = e.model.name
            if len(contexts) > 1:
                row.append(_ctx(ctx, unit=False))
            row += [e.precision, format_bytes(e.per_sequence[i])]
            if batch > 1:
                row.append(format_bytes(e.total[i]))
            if refs:
                ref = _find_ref(refs, e.precision)
                row.append(_ratio(e.per_sequence[i], ref.per_sequence[i]) if ref is not None else "-")
            t.add_row(*row)
    con.table(t)
    seen: dict[str, list[str]] = {}
    for e in results:
        seen.setdefault(e.model.name, [f"{e.layers_text()} layers"]).append(f"{e.precision} = {_storage(e)}")
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


def render_kinds(con, e: Estimate) -> None:
    """By layer kind. On a console narrower than the full table (an 80-column terminal) the format and per-layer
    columns move out: formats and bytes per entry are in the Storage line under the table, per layer = all
    layers / layers."""
    narrow = con.width < NARROW_BELOW
    cols = [("kind", "left"), ("layers", "right"), ("component", "left"), ("holds", "left"), ("format", "left"),
            ("entries", "right"), ("B/entry", "right"), ("per layer", "right"), ("all layers", "right")]
    keep = [k for k, (name, _) in enumerate(cols) if not (narrow and name in ("format", "per layer", "B/entry"))]
    for i, ctx in enumerate(e.contexts.tolist()):
        t = _table(f"{e.model.display_name}, {e.precision}, at {_ctx(ctx)}: by layer kind")
        for k in keep:
            name, just = cols[k]
            t.add_column(name, justify=just, no_wrap=name in ("per layer", "all layers", "entries", "B/entry"))
        for label, (n, comps, layer_bytes) in e.kinds().items():
            if not comps:  # MLP / MoE layers of a hybrid: counted, holding nothing
                row = [label, str(n), "(no cache)", "", "", "", "", "0 B", "0 B"]
                t.add_row(*[row[k] for k in keep], end_section=True)
                continue
            for j, c in enumerate(comps):
                row = [label if j == 0 else "", str(n) if j == 0 else "", c.name, c.rule, c.format,
                       f"{int(c.entries[i]):,}" if c.entry_bytes else "-",
                       f"{c.entry_bytes:,}" if c.entry_bytes else "-",
                       format_bytes(c.bytes[i]), format_bytes(c.bytes[i] * n)]
                t.add_row(*[row[k] for k in keep])
            total = ["", "", "layer total", "", "", "", "", format_bytes(layer_bytes[i]),
                     format_bytes(layer_bytes[i] * n)]
            t.add_row(*[total[k] for k in keep], end_section=True, style="bold")
        con.table(t)
        con.print(f"Total per sequence: {format_bytes(e.per_sequence[i])} ({int(e.per_sequence[i]):,} B)"
                  + (f"; x {e.batch} sequences: {format_bytes(e.total[i])} ({int(e.total[i]):,} B)" if e.batch > 1 else ""))
        con.print(f"Storage: {e.formats_text()}.")
        con.print(f"Basis: {e.basis_text()}.")


def render_layers(con, e: Estimate) -> None:
    """One row per layer (a model may have 10,000: the table layout is linear in its cells)."""
    names = [str(layer.index) + (" (MTP)" if layer.mtp else "") for layer in e.layers]
    comps = [", ".join(c.name for c in layer.components) for layer in e.layers]
    for i, ctx in enumerate(e.contexts.tolist()):
        t = _table(f"{e.model.display_name}, {e.precision}, at {_ctx(ctx)}: layer by layer")
        for head, just in (("layer", "right"), ("kind", "left"), ("components", "left"), ("bytes", "right"),
                           ("cumulative", "right")):
            t.add_column(head, justify=just, no_wrap=just == "right")
        running = 0
        for name, layer, comp in zip(names, e.layers, comps):
            b = int(layer.bytes[i])
            running += b
            t.add_row(name, layer.kind, comp, f"{b:,}", format_bytes(running))
        con.table(t)
        con.print(f"Total per sequence: {format_bytes(e.per_sequence[i])} ({int(e.per_sequence[i]):,} B). "
                  f"Storage: {e.formats_text()}.")
        con.print(f"Basis: {e.basis_text()}.")
        con.print()


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
    t = _table(f"{a.model.name} ({a.precision}) vs {b.model.name} ({b.precision}), per sequence")
    (ua, sa), (ub, sb) = _column_unit(a.per_sequence), _column_unit(b.per_sequence)
    for col in ("context", f"A: {a.model.name} ({ua})", f"B: {b.model.name} ({ub})", "B / A", "A / B"):
        t.add_column(col, justify="right")

    def cell(v: float, unit: str, size: float) -> str:
        return f"{int(v):,}" if unit == "B" else f"{v / size:,.2f}"

    for i, ctx in enumerate(a.contexts.tolist()):
        pa, pb = float(a.per_sequence[i]), float(b.per_sequence[i])
        t.add_row(_ctx(ctx, unit=False), cell(pa, ua, sa), cell(pb, ub, sb),
                  f"{pb / pa:.2%}" if pa else "-", f"{pa / pb:.2f}x" if pb else "-")
    con.table(t)
    con.print(f"A: {a.layers_text()}; {a.formats_text()}.")
    con.print(f"B: {b.layers_text()}; {b.formats_text()}.")
    con.print(f"Basis: {a.basis} ({BASES[a.basis]}); exact bytes, no paging; binary units, one per column.")


def compare_json(a: Estimate, b: Estimate) -> dict:
    return {
        "a": a.to_dicts(),
        "b": b.to_dicts(),
        # null where A holds no bytes (a state-only model on the article basis): JSON has no NaN
        "ratio_b_over_a": [float(y) / float(x) if x else None for x, y in zip(a.per_sequence, b.per_sequence)],
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
    t = _table("Shipped model configs")
    for col in ("name", "layers", "layout", "MTP", "max context", "precisions (default first)"):
        t.add_column(col, no_wrap=col in ("name", "layers", "MTP", "max context"),
                      justify="right" if col in ("layers", "MTP", "max context") else "left")
    for m in specs:
        precs = [m.default_precision] + [p for p in m.precisions if p != m.default_precision]
        t.add_row(m.name, str(len(m.layers)), m.layout_text(), str(len(m.mtp_layers)),
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
        sizes = [f"{c.entry_bytes(p.formats[c.storage]):,}" if c.per_token
                 else f"{c.fixed_bytes(p.formats.get(c.storage)):,} fixed" for p in m.precisions.values()]
        t.add_row(name, c.kind, c.rule(), *sizes)
    con.table(t)
    t = _table("Layer kinds")
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
        t = _table("Sources of stated values")
        t.add_column("field")
        t.add_column("source")
        for k, v in m.provenance.items():
            t.add_row(k, v)
        con.table(t)
    for k, v in m.sources.items():
        con.print(f"{k}: {v}")


def render_claims(con, results) -> None:
    narrow = con.width < NARROW_BELOW  # the claim's words go under its id, the tolerance under the figure
    t = _table("Published numbers, recomputed")
    cols = (("id", "left"), ("claim", "left"), ("published", "right"), ("computed", "right"), ("tolerance", "right"),
            ("result", "left"))
    for col, just in cols:
        if narrow and col in ("claim", "tolerance"):
            continue
        head = {"id": "id / claim", "published": "published\ntolerance"}.get(col, col) if narrow else col
        t.add_column(head, justify=just, no_wrap=col in ("published", "computed", "tolerance", "result"))
    for r in results:
        verdict = Styled("pass", "green") if r.passed else Styled("MISS", "bold red")
        if narrow:
            t.add_row(f"{r.id}\n{r.claim}", f"{r.published_text()}\n{r.tolerance_text()}", r.computed_text(), verdict)
        else:
            t.add_row(r.id, r.claim, r.published_text(), r.computed_text(), r.tolerance_text(), verdict)
    con.table(t)
    n_fail = sum(not r.passed for r in results)
    con.print(f"{len(results) - n_fail} passed, {n_fail} failed")


# ---- capacity ----------------------------------------------------------------------------------------------
def capacity_json(c) -> dict:
    """The capacity answer as one JSON object (bytes throughout; per GPU unless named total)."""
    p = c.plan
    return {
        "model": c.model.name,
        "context_tokens": p.context,
        "precision": p.precision,
        "engine": p.engine,
        "engine_version": p.engine_version,
        "engine_settings": p.settings,
        "layout": p.layout,
        "grouping": p.grouping,
        "padding_layers": p.padding_layers,
        "parallel": {"tp": c.parallel.tp, "pp": c.parallel.pp, "dp": c.parallel.dp, "ep": c.parallel.ep,
                     "gpus": c.parallel.gpus},
        "gpu": None if c.gpu is None else {"key": c.gpu.key, "name": c.gpu.name, "memory_bytes": c.gpu.memory_bytes,
                                           "basis": c.gpu.basis, "source": c.gpu.source},
        "gpu_memory_utilization": c.gpu_memory_utilization,
        "requested_bytes_per_gpu": c.requested_bytes,
        "weights_bytes_per_gpu": c.weights_bytes_per_gpu,
        "weights_total_bytes": c.weights_total_bytes,
        "weights_basis": c.weights_source,
        "reserve_bytes_per_gpu": c.reserve_bytes,
        "kv_pool_bytes_per_gpu": c.kv_pool_bytes_per_gpu,
        "kv_pool_given": c.pool_given,
        "bytes_per_block": p.bytes_per_block,
        "num_blocks": c.num_blocks,
        "null_blocks": p.null_blocks,
        "blocks_per_request": p.blocks_per_request,
        "per_request_bytes": p.per_request_bytes,
        "analytic_bytes": p.analytic_bytes,
        "max_concurrency": c.max_concurrency,
        "requests_per_replica": c.requests_per_replica,
        "total_requests": c.total_requests,
        "cache_tokens": c.cache_tokens,
        "engine_log_line": c.log_line if p.engine == "vllm" else None,
        "pages": [
            {"group": g["group"], "kind": g["kind"], "components": g["components"], "layers": g["layers"],
             "block_size": g["block_size"], "page_bytes": g["page_bytes"], "real_page_bytes": g["real_page_bytes"],
             "blocks_per_request": g["blocks_per_request"],
             "reserved_bytes_per_request": g["reserved_bytes_per_request"],
             "analytic_bytes_per_request": g["analytic_bytes_per_request"], "layer_pages": g["layer_pages"]}
            for g in p.pages_json()
        ],
        "notes": list(c.notes),
        "units": "bytes",
    }


def _layers_text(layers: tuple[int, ...]) -> str:
    """(0, 2, 4, ..., 60) -> '0..60 step 2'; short lists written out."""
    if len(layers) <= 3:
        return ",".join(map(str, layers))
    step = layers[1] - layers[0]
    if step > 0 and all(b - a == step for a, b in zip(layers, layers[1:])):
        return f"{layers[0]}..{layers[-1]}" + (f" step {step}" if step > 1 else "")
    return f"{len(layers)} layers"


def render_capacity(con, c, reverse: str | None = None) -> None:
    p = c.plan
    par = c.parallel
    where = f"{par.gpus} x {c.gpu.name}" if c.gpu else f"{par.gpus} GPU{'s' if par.gpus > 1 else ''}"
    eng = f"vLLM {p.engine_version}" if p.engine == "vllm" else "exact (no paging)"
    con.print(f"{c.model.display_name}, {p.precision}, max_model_len {_ctx(p.context)} on {where}; {eng}")
    con.print(f"Parallel: tp {par.tp} x pp {par.pp} x dp {par.dp}" + (" (expert parallel)" if par.ep else "")
              + "; figures per GPU unless marked total")
    if reverse:
        con.print(reverse)
    t = _table()
    t.add_column("per GPU")
    t.add_column("bytes", justify="right", no_wrap=True)
    t.add_column("basis")
    if c.pool_given:
        t.add_row("KV pool", format_bytes(c.kv_pool_bytes_per_gpu), "given (--kv-memory)")
    else:
        t.add_row("device memory", format_bytes(c.gpu.memory_bytes), f"{c.gpu.basis}")
        t.add_row(f"x {c.gpu_memory_utilization:g} utilisation", format_bytes(c.requested_bytes),
                  "--gpu-memory-utilization")
        t.add_row("- weights", format_bytes(c.weights_bytes_per_gpu),
                  f"{format_bytes(c.weights_total_bytes)} total; {c.weights_source.split(';')[0]}")
        t.add_row("- reserve", format_bytes(c.reserve_bytes), "activations, CUDA graphs (--reserve-gib)")
        t.add_row("= KV pool", format_bytes(c.kv_pool_bytes_per_gpu), f"{c.kv_pool_bytes_per_gpu:,} B")
    con.table(t)

    narrow = con.width < NARROW_BELOW  # layers, block and page sizes move under the table
    g = _table()
    g.add_column("group", no_wrap=True)
    g.add_column("caches", max_width=24)
    if not narrow:
        g.add_column("layers")
        g.add_column("block", justify="right")
        g.add_column("page B", justify="right")
    g.add_column("blocks/req", justify="right")
    g.add_column("reserved", justify="right", no_wrap=True)
    g.add_column("exact", justify="right", no_wrap=True)
    for grp in p.groups:
        wide = [_layers_text(grp.layers), f"{grp.block_size}", f"{grp.page_bytes:,}"] if not narrow else []
        g.add_row(f"{grp.index} {grp.kind}", grp.label, *wide, f"{grp.blocks_per_request:,}",
                  format_bytes(grp.blocks_per_request * p.bytes_per_block), format_bytes(grp.analytic_bytes))
    g.add_row("total", "", *(["", "", f"{p.bytes_per_block:,}"] if not narrow else []), f"{p.blocks_per_request:,}",
              format_bytes(p.per_request_bytes), format_bytes(p.analytic_bytes))
    con.table(g)
    if narrow:
        for grp in p.groups:
            con.print(f"  group {grp.index}: layers {_layers_text(grp.layers)}; blocks of {grp.block_size} tokens, "
                      f"pages {grp.page_bytes:,} B")
    con.print(f"One request at {_ctx(p.context)} reserves {format_bytes(p.per_request_bytes)} "
              f"({p.blocks_per_request:,} blocks x {p.bytes_per_block:,} B, the widest group's block); it holds "
              f"{format_bytes(p.analytic_bytes)} exactly (kvcalc estimate, complete basis).")
    if p.engine == "vllm":
        wins = [grp for grp in p.groups if grp.kind.startswith("window")]
        fixed = [grp for grp in p.groups if grp.kind == "state"]
        if fixed:
            con.print(f"Fixed-state groups reserve {format_bytes(sum(g.blocks_per_request for g in fixed) * p.bytes_per_block)}"
                      f" of it: {'/'.join(sorted({str(g.blocks_per_request) for g in fixed}))} blocks per request in "
                      f"each of {len(fixed)} group(s), whatever the context (mamba_cache_mode "
                      f"{p.settings.get('mamba_cache_mode', 'none')}).")
        if wins:
            w_res = sum(grp.blocks_per_request for grp in wins) * p.bytes_per_block
            s = p.settings
            con.print(f"Window and state groups reserve {format_bytes(w_res)} of it: they admit window - 1 + "
                      f"{s['max_in_flight_tokens']:,} in-flight tokens (max_num_batched_tokens "
                      f"{s['max_num_batched_tokens']:,} x {2 if s['async_scheduling'] else 1}"
                      f"{', async scheduling' if s['async_scheduling'] else ''}), whatever the context.")
        con.print(f"Pool: {c.num_blocks:,} blocks of {p.bytes_per_block:,} B (block 0 is vLLM's null block); "
                  f"layout {p.layout}; {p.grouping}.")
        con.print(f"vLLM would log: {c.log_line}")
    con.print(f"Fits: {c.requests_per_replica:,} whole request(s) per replica x {par.dp} replica(s) = "
              f"{c.total_requests:,} at {_ctx(p.context)}.")
    for n in c.notes:
        con.print(f"Note: {n}.")


def render_gpus(con, gpus) -> None:
    t = _table("Accelerators (memory as the device reports it; vLLM uses --gpu-memory-utilization of it)")
    for col in ("key", "name", "memory", "bytes", "basis"):
        t.add_column(col, justify="right" if col in ("memory", "bytes") else "left")
    for g in gpus:
        t.add_row(g.key, g.name, format_bytes(g.memory_bytes), f"{g.memory_bytes:,}", g.basis)
    con.table(t)
    con.print("Sources: `kvcalc gpus --json`.")


def render_verify(con, out: dict) -> None:
    """`kvcalc verify`: predicted (exact) vs planned (paged) vs allocated vs written, per group and in total."""
    eng = f"vLLM {out['engine_version']}" if out["engine"] == "vllm" else out["engine"]
    writer = f", writer {out['writer']}" if out.get("writer") else ""
    con.print(f"{out['model']}, {out['precision']}, {_ctx(out['context_tokens'])} x {out['batch']} "
              f"request{'s' if out['batch'] > 1 else ''}; {eng} pool on {out['device']}; fill {out['fill']}{writer}")
    g = _table()
    for name, just in (("group", "left"), ("caches", "left"), ("blocks", "right"), ("predicted", "right"),
                       ("planned", "right"), ("expected written", "right"), ("written", "right")):
        g.add_column(name, justify=just, no_wrap=name != "caches", max_width=24 if name == "caches" else None)
    filled = out["fill"] != "none"
    for grp in out["groups"]:
        g.add_row(f"{grp['group']} {grp['kind']}", " + ".join(grp["components"]), f"{grp['blocks']:,}",
                  f"{grp['predicted_bytes']:,}", f"{grp['planned_bytes']:,}",
                  f"{grp['expected_written_bytes']:,}" if filled else "-",
                  f"{grp['written_bytes']:,}" if grp["written_bytes"] is not None else "-")
    g.add_row("null", "engine's null block", f"{out['planned_blocks'] - sum(x['blocks'] for x in out['groups']):,}",
              "0", f"{out['planned_bytes'] - sum(x['planned_bytes'] for x in out['groups']):,}", "0" if filled else "-",
              "")
    g.add_row("total", "", f"{out['planned_blocks']:,}", f"{out['predicted_bytes']:,}", f"{out['planned_bytes']:,}",
              f"{out['expected_written_bytes']:,}" if filled else "-",
              f"{out['written_bytes']:,}" if out["written_bytes"] is not None else "-")
    con.table(g)
    m = out["measured"]
    con.print(f"Allocated: {out['allocated_bytes']:,} B storage"
              + (f"; allocator +{m['allocator_allocated_delta']:,} B allocated, +{m['allocator_reserved_delta']:,} B "
                 f"reserved; device free -{m['device_free_delta']:,} B" if out["device"] == "cuda" else
                 f"; resident memory +{m['resident_growth_bytes']:,} B"))
    if out.get("fill_bytes_per_second"):
        bw = out["fill_bytes_per_second"] / 2**30
        ref = out.get("device_copy_bytes_per_second")
        con.print(f"Fill: {out['seconds']['fill_pass1']:.2f} s per pass, {bw:.2f} GiB/s written"
                  + (f" ({out['fill_bytes_per_second'] / ref:.0%} of the device's copy bandwidth)" if ref else ""))
    for c in out["checks"]:
        con.print(f"  {'pass' if c['pass'] else 'FAIL'}  {c['check']}")
    con.print("Basis: bytes; predicted = exact analytic (kvcalc estimate, complete basis); planned = paged blocks "
              "x bytes per block; written = counted in memory (sentinel).")
    con.print(f"Verdict: {out['verdict']}.")


def render_check_log(con, out: dict) -> None:
    ver = out["log_vllm_version"] or "version not logged"
    con.print(f"{out['file']}: {out['log_model'] or 'model not logged'} (vLLM {ver}) as kvcalc {out['model']}, "
              f"{out['precision']}, max_model_len {_ctx(out['context_tokens'])}; kvcalc plans vLLM "
              f"{out['kvcalc_vllm_version']}")
    t = _table()
    t.add_column("figure")
    t.add_column("log", justify="right")
    t.add_column("kvcalc", justify="right")
    t.add_column("")
    for r in out["rows"]:
        mark = "" if r["agrees"] is None else ("agrees" if r["agrees"] else "DIFFERS")
        t.add_row(r["figure"] + (f" (line {r['line']})" if r["line"] else ""), r["logged"], r["kvcalc"], mark)
    con.table(t)
    for n in out["notes"]:
        con.print(f"Note: {n}")
    con.print(f"Verdict: {out['verdict']}.")
