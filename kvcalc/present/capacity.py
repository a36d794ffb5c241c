"""`capacity`: the memory budget, the engine's groups, what one request reserves, and how many fit."""

from __future__ import annotations

from ..capacity import Refused
from ..pool import BlockPoolPlan
from ..errors import with_names
from ..units import format_bytes
from .common import NARROW_BELOW, ctx_text, table
from .flags import FLAGS


def capacity_json(c) -> dict:
    """The capacity answer as one JSON object (bytes throughout; per GPU unless named total)."""
    p = c.plan
    f = p.figures()
    return {
        "model": c.model.name,
        "context_tokens": p.context,
        "precision": p.precision,
        "engine": p.engine,
        "engine_version": p.engine_version,
        "engine_settings": p.settings_json,
        "layout": f.layout,
        "grouping": f.grouping,
        "padding_layers": f.padding_layers,
        "parallel": {"tp": c.parallel.tp, "pp": c.parallel.pp, "dp": c.parallel.dp, "ep": c.parallel.ep,
                     "gpus": c.gpus},
        "gpu": None if c.gpu is None else {"key": c.gpu.key, "name": c.gpu.name, "memory_bytes": c.gpu.memory_bytes,
                                           "basis": c.gpu.basis, "source": c.gpu.source},
        **(c.budget.json if c.budget is not None else {k: None for k in c.engine.budget_keys}),
        "requested_bytes_per_gpu": c.requested_bytes,
        "weights_bytes_per_gpu": c.weights_bytes_per_gpu,
        "weights_total_bytes": c.weights_total_bytes,
        "weights_basis": with_names(c.weights_source, FLAGS),
        "reserve_bytes_per_gpu": c.reserve_bytes,
        "kv_pool_bytes_per_gpu": c.kv_pool_bytes_per_gpu,
        "kv_pool_given": c.pool_given,
        "bytes_per_block": f.unit_bytes,
        "num_blocks": c.num_blocks,
        "null_blocks": f.null_units,
        "blocks_per_request": f.units_per_request,
        "per_request_bytes": p.per_request_bytes,
        "analytic_bytes": p.analytic_bytes,
        "stored_formats": dict(p.stored_formats),
        "max_concurrency": c.max_concurrency,
        "requests_per_replica": c.requests_per_replica,
        "total_requests": c.total_requests,
        "cache_tokens": c.cache_tokens,
        "engine_log_line": c.log_line,
        "pages": p.pages_json(),
        **c.fit.to_json(),
        "host_tiers": [t.to_json() for t in c.tiers],
        **{k: v for t in c.tiers for k, v in t.json.items()},
        "notes": [with_names(n, FLAGS) for n in c.notes],
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


def _where(n, gpu) -> str:
    """'8 x NVIDIA H200', or '8 GPUs' where the pool was given."""
    return f"{n} x {gpu.name}" if gpu else f"{n} GPU{'' if n == 1 else 's'}"


def render_capacity(con, c, reverse: str | None = None) -> None:
    p = c.plan
    par = c.parallel
    where = _where(c.gpus, c.gpu)
    eng = c.engine.title
    con.print(f"{c.model.display_name}, {p.precision}, {c.engine.context_name} {ctx_text(p.context)} on {where}; {eng}")
    con.print(f"Parallel: tp {par.tp} x pp {par.pp} x dp {par.dp}" + (" (expert parallel)" if par.ep else "")
              + "; figures per GPU unless marked total")
    if reverse:
        con.print(reverse)
    t = table()
    t.add_column("per GPU")
    t.add_column("bytes", justify="right", no_wrap=True)
    t.add_column("basis")
    if c.pool_given:
        t.add_row("KV pool", format_bytes(c.kv_pool_bytes_per_gpu), f"given ({FLAGS['kv_memory']})")
    elif (rows := c.budget.table_rows(c.weights_bytes_per_gpu, c.reserve_bytes, c.kv_pool_bytes_per_gpu)) is not None:
        for label, n, basis in rows:
            t.add_row(label, format_bytes(n), with_names(basis, FLAGS))
    else:
        t.add_row("device memory", format_bytes(c.gpu.memory_bytes), f"{c.gpu.basis}")
        for step in c.budget.steps:
            t.add_row(step.label, format_bytes(step.bytes), FLAGS.get(step.option, step.option or ""))
        t.add_row("- weights", format_bytes(c.weights_bytes_per_gpu),
                  f"{format_bytes(c.weights_total_bytes)} total; {with_names(c.weights_source, FLAGS).split(';')[0]}")
        t.add_row("- reserve", format_bytes(c.reserve_bytes), f"{c.engine.reserve_note} ({FLAGS['reserve']})")
        t.add_row("= KV pool", format_bytes(c.kv_pool_bytes_per_gpu), f"{c.kv_pool_bytes_per_gpu:,} B")
    con.table(t)

    if c.fit.table is not None:  # the engine's own pools (token pools, not a block pool)
        heads, rows = c.fit.table
        e = table()
        for k, h in enumerate(heads):  # on a narrow console the middle columns go first, left to right
            e.add_column(h, justify="right" if k >= 3 else "left", no_wrap=k != 0,
                         drop=k if 0 < k < len(heads) - 1 else None)
        for r in rows:
            e.add_row(*r)
        con.table(e)
    elif isinstance(c.plan, BlockPoolPlan):
        _render_groups(con, c)
    else:
        _render_pool_groups(con, c)
    for line in c.fit.lines:
        con.print(line)
    w = c.fit.workload
    what = (f"of {ctx_text(w.request_tokens)}" if w and w.request_tokens else
            f"of the {w.request_lengths:,} lengths" if w else "")
    at = f" ({c.engine.context_name} {ctx_text(p.context, unit=False)})" if w else f" at {ctx_text(p.context)}"
    con.print(f"Fits: {c.requests_per_replica:,} whole request(s){' ' + what if what else ''} per replica x "
              f"{par.dp} replica(s) = {c.total_requests:,}{at}.")
    for t in c.tiers:
        for line in t.lines:
            con.print(with_names(line, FLAGS))
    for n in c.notes:
        con.print(f"Note: {with_names(n, FLAGS)}.")


def _render_pool_groups(con, c) -> None:
    """Any other pool's groups, in its own units (an engine whose fit gives no table of its own)."""
    p = c.plan
    f = p.figures()
    g = table()
    for name, just in (("group", "left"), ("caches", "left"), ("layers", "left"), ("units/req", "right"),
                       ("reserved", "right"), ("exact", "right")):
        g.add_column(name, justify=just, no_wrap=name != "caches")
    for grp in p.groups:
        g.add_row(f"{grp.index} {grp.kind_name}", grp.label, _layers_text(grp.layers), f"{grp.blocks_per_request:,}",
                  format_bytes(p.group_reserve(grp)), format_bytes(grp.analytic_bytes))
    g.add_row("total", "", "", f"{f.units_per_request:,}", format_bytes(p.per_request_bytes),
              format_bytes(p.analytic_bytes))
    con.table(g)
    con.print(f"One request at {ctx_text(p.context)} reserves {format_bytes(p.per_request_bytes)} ({f.units_per_request:,} "
              f"units of {f.unit_bytes:,} B: {f.grouping}); it holds {format_bytes(p.analytic_bytes)} exactly.")


def _render_groups(con, c) -> None:
    """The plan's groups: blocks per request, reserved and exact bytes. On a console narrower than the full
    table (an 80-column terminal) the layers, block and page sizes move under it, and the line under the
    table names them; narrower still (60 columns) the exact bytes go too (the request's are in the line under
    the table)."""
    p = c.plan
    g = table()
    g.add_column("group", no_wrap=True)
    g.add_column("caches", max_width=24)
    g.add_column("layers", hide_below=NARROW_BELOW, drop=0)
    g.add_column("block", justify="right", hide_below=NARROW_BELOW, drop=0)
    g.add_column("page B", justify="right", hide_below=NARROW_BELOW, drop=0)
    g.add_column("blocks/req", justify="right")
    g.add_column("reserved", justify="right", no_wrap=True)
    g.add_column("exact", justify="right", no_wrap=True, drop=1)
    for grp in p.groups:
        g.add_row(f"{grp.index} {grp.kind_name}", grp.label, _layers_text(grp.layers), f"{grp.block_size}",
                  f"{grp.page_bytes:,}", f"{grp.blocks_per_request:,}",
                  format_bytes(p.group_reserve(grp)), format_bytes(grp.analytic_bytes))
    g.add_row("total", "", "", "", f"{p.bytes_per_block:,}", f"{p.blocks_per_request:,}",
              format_bytes(p.per_request_bytes), format_bytes(p.analytic_bytes))
    if "layers" in con.table(g):
        for grp in p.groups:
            con.print(f"  group {grp.index}: layers {_layers_text(grp.layers)}; blocks of {grp.block_size} tokens, "
                      f"pages {grp.page_bytes:,} B")
    how = (f"{p.blocks_per_request:,} blocks x {p.bytes_per_block:,} B, the widest group's block"
           if p.per_request_bytes == p.blocks_per_request * p.bytes_per_block else
           "each group's blocks at its own page, and any state slot")
    con.print(f"One request at {ctx_text(p.context)} reserves {format_bytes(p.per_request_bytes)} ({how}); it holds "
              f"{format_bytes(p.analytic_bytes)} exactly (complete basis, in the formats {c.engine.title} stores).")


# ---- engines side by side ---------------------------------------------------------------------------------------
def reverse_text(r, title: str) -> str:
    """The reverse answer's line (:class:`kvcalc.capacity.Reverse`)."""
    text = (f"Longest context at which {r.concurrency:,} requests fit per replica: {r.context:,} tokens "
            f"(searched up to {r.limit:,}).")
    if r.running is not None:
        text += (f" Memory only: {title} runs at most {r.running[0]} {r.running[1]:,} of them at once per "
                 f"replica; the other {r.concurrency - r.running[1]:,} wait.")
    return text


def _refusal(c) -> str:
    return c.error.renamed(FLAGS)


_ROWS = (
    ("KV pool per GPU", lambda c: format_bytes(c.kv_pool_bytes_per_gpu)),
    ("budget rule", lambda c: c.budget.steps[0].label.lstrip("x ") if c.budget else "given"),
    ("tokens in the cache", lambda c: f"{c.cache_tokens:,}"),
    ("one request holds (exact)", lambda c: format_bytes(c.plan.analytic_bytes)),
    ("requests per replica", lambda c: f"{c.requests_per_replica:,}"),
    ("requests in all", lambda c: f"{c.total_requests:,}"),
)


def _engine_rows(caps) -> list[tuple[str, list[str]]]:
    return [(label, ["refused" if isinstance(c, Refused) else cell(c) for c in caps]) for label, cell in _ROWS]


def render_engines(con, caps) -> None:
    """One model, GPUs and context on several engines: one column each, and each engine's reason."""
    c0 = next(c for c in caps if not isinstance(c, Refused)) if any(not isinstance(c, Refused) for c in caps) \
        else None
    if c0 is None:
        for c in caps:
            con.print(f"{c.engine.name}: refused: {_refusal(c)}")
        return
    p, par = c0.plan, c0.parallel
    counts = {c.engine.name: c.gpus for c in caps if not isinstance(c, Refused)}
    where = _where(c0.gpus, c0.gpu) if len(set(counts.values())) == 1 else \
        _where(" / ".join(f"{n} ({e})" for e, n in counts.items()), c0.gpu)
    contexts = {c.plan.context for c in caps if not isinstance(c, Refused)}
    ctx = f"max_model_len {ctx_text(p.context)}" if len(contexts) == 1 else "each engine's max_model_len"
    con.print(f"{c0.model.display_name}, {ctx} on {where}, tp {par.tp} x pp {par.pp} x dp {par.dp}: engines side by "
              "side (per GPU unless marked)")
    t = table()
    t.add_column("")
    for k, c in enumerate(caps):  # figures wrap between words only (the budget rule) and, on a console too
        prec = "" if isinstance(c, Refused) else f" ({c.plan.precision})"  # narrow even so, the last engines go
        t.add_column(f"{c.engine.title}{prec}", justify="right", drop=len(caps) - k if k else None)
    if len(contexts) > 1:  # --concurrency: each engine's own longest context
        t.add_row("max_model_len", *["refused" if isinstance(c, Refused) else f"{c.plan.context:,}" for c in caps])
    for label, cells in _engine_rows(caps):
        t.add_row(label, *cells)
    con.table(t)
    for c in caps:
        line = f"refused: {_refusal(c)}" if isinstance(c, Refused) else c.engine.summary_line(c)
        if line:
            con.print(f"{c.engine.name}: {line}" + ("" if line.endswith(".") else "."))
        for tier in () if isinstance(c, Refused) else c.tiers:
            con.print(f"{c.engine.name}: {tier.name}: {tier.tokens_per_rank:,} tokens a rank, "
                      f"{format_bytes(tier.host_bytes)} of {tier.medium}, {tier.requests:,} more request(s)' prefixes.")
    con.print("Each engine at its own defaults for this GPU, a request's exact bytes in the formats it stores; `kvcalc "
              "capacity MODEL --engine NAME` shows one in full.")


def engines_json(caps) -> dict:
    return {"engines": [{"engine": c.engine.name, "engine_version": c.engine.version, "refused": _refusal(c)}
                        if isinstance(c, Refused) else capacity_json(c) for c in caps],
            "side_by_side": {label: dict(zip((c.engine.name for c in caps), cells))
                             for label, cells in _engine_rows(caps)},
            "reasons": {c.engine.name: (f"refused: {_refusal(c)}" if isinstance(c, Refused) else c.engine.summary_line(c))
                        for c in caps}}
