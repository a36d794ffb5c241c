"""`verify`: the result of :func:`kvcalc.verify.run` as text (its JSON is ``VerifyResult.to_json()``)."""

from __future__ import annotations

from ..engines import get_engine
from .common import ctx_text, table


def render_verify(con, result) -> None:
    """`kvcalc verify`: predicted (exact) vs planned (paged) vs allocated vs written, per group and in total."""
    r = result
    if r.token_pools is not None:
        return _render_token_pools(con, r)
    eng = get_engine(r.engine).title
    writer = f", writer {r.writer}" if r.writer else ""
    con.print(f"{r.model}, {r.precision}, {ctx_text(r.context_tokens)} x {r.batch} "
              f"request{'s' if r.batch > 1 else ''}; {eng} pool on {_where(r)}; fill {r.fill}{writer}")
    g = _bytes_table("group", "blocks")
    filled = r.fill != "none"
    for grp in r.groups:
        g.add_row(f"{grp.group} {grp.kind}", " + ".join(grp.components), f"{grp.blocks:,}",
                  f"{grp.predicted_bytes:,}", f"{grp.planned_bytes:,}",
                  f"{grp.expected_written_bytes:,}" if filled else "-",
                  f"{grp.written_bytes:,}" if grp.written_bytes is not None else "-")
    g.add_row("null", "engine's null block", f"{r.planned_blocks - sum(x.blocks for x in r.groups):,}",
              "0", f"{r.planned_bytes - sum(x.planned_bytes for x in r.groups):,}", "0" if filled else "-",
              "")
    g.add_row("total", "", f"{r.planned_blocks:,}", f"{r.predicted_bytes:,}", f"{r.planned_bytes:,}",
              f"{r.expected_written_bytes:,}" if filled else "-",
              f"{r.written_bytes:,}" if r.written_bytes is not None else "-")
    con.table(g)
    if r.ranks:  # tensor parallel: each rank measured its own shard
        con.print(f"Allocated: {r.allocated_bytes:,} B storage over {len(r.ranks)} ranks")
        for x in r.ranks:
            con.print(f"  rank {x.rank}: {x.allocated_bytes:,} B{_measured_text(x)}")
    else:
        con.print(f"Allocated: {r.allocated_bytes:,} B storage{_measured_text(r)}")
    _fill_and_checks(con, r)
    con.print("Basis: bytes; predicted = exact analytic (complete basis) in the formats the engine stores; planned = "
              "paged blocks x bytes per block; written = counted in memory (sentinel).")
    con.print(f"Verdict: {r.verdict}.")


def _where(r) -> str:
    """The device, and the architecture whose kernels the layout follows (the CPU plans on Hopper's)."""
    return f"{r.device} ({r.arch} kernels)" if r.arch else (
        f"{r.device} (Hopper's kernels)" if r.device == "cpu" and r.engine != "exact" else r.device)


def _render_token_pools(con, r) -> None:
    """An engine's token pools (SGLang): one row per pool, its tokens, and the padding page SGLang keeps."""
    tp = r.token_pools
    exact = tp.get("layout") == "exact"
    eng = get_engine(r.engine).title.split()[0]
    writer = f", writer {r.writer}" if r.writer else ""
    where = (f"the exact layout ({tp['basis']} basis: one tensor per component and layer, no pages) on {r.device}"
             if exact else f"{eng} {r.engine_version} token pools on {_where(r)}, page {tp['page_size']}")
    con.print(f"{r.model}, {r.precision}, {ctx_text(r.context_tokens)} x {r.batch} "
              f"request{'s' if r.batch > 1 else ''}; {where}; fill {r.fill}{writer}")
    g = _bytes_table("pool", "tokens")
    filled = r.fill != "none"
    for grp in r.groups:
        pool = grp.pool
        g.add_row(f"{grp.group} {pool['name']}", " + ".join(grp.components), f"{grp.blocks:,}",
                  f"{grp.predicted_bytes:,}", f"{grp.planned_bytes - pool['padding_page_bytes']:,}",
                  f"{grp.expected_written_bytes:,}" if filled else "-",
                  f"{grp.written_bytes:,}" if grp.written_bytes is not None else "-")
    pad = sum(x.pool["padding_page_bytes"] for x in r.groups)
    pad_written = [x.pool["padding_page_written_bytes"] for x in r.groups]
    if not exact:
        g.add_row("padding", f"{eng}'s padding page", "", "0", f"{pad:,}", "0" if filled else "-",
                  f"{sum(pad_written):,}" if None not in pad_written else "-")
    g.add_row("total", "", "", f"{r.predicted_bytes:,}", f"{r.planned_bytes:,}",
              f"{r.expected_written_bytes:,}" if filled else "-",
              f"{r.written_bytes:,}" if r.written_bytes is not None else "-")
    con.table(g)
    con.print(f"Allocated: {r.allocated_bytes:,} B storage{_measured_text(r)}")
    _fill_and_checks(con, r)
    if exact:
        con.print(f"Basis: bytes; predicted = kvcalc estimate ({tp['basis']} basis); planned = one tensor per "
                  "component and layer, entries x bytes per entry (state: its bytes), no pages; tokens = rows (state: "
                  "one per request); written = counted in memory (sentinel).")
    else:
        floor = tp.get("swa_floor_tokens")
        pools = (f"the smallest pools {eng} builds that take this batch, more than its tokens (the split SWA pool "
                 f"must exceed window + page = {floor:,} and hold the batch's SWA rows)" if floor else
                 f"{eng}'s pools for exactly this batch")
        con.print(f"Basis: bytes; predicted = exact analytic (complete basis) in the formats the engine stores; "
                  f"planned = {pools}, "
                  "size + page_size rows per layer; tokens = rows (state: slots) without the padding page; written = "
                  "counted in memory (sentinel).")
    con.print(f"Verdict: {r.verdict}.")


def _measured_text(r) -> str:
    m = r.measured
    if r.device == "cuda":
        return (f"; allocator +{m.allocator_allocated_delta:,} B allocated, +{m.allocator_reserved_delta:,} B "
                f"reserved; device free -{m.device_free_delta:,} B")
    return f"; resident memory +{m.resident_growth_bytes:,} B"


def _fill_and_checks(con, r) -> None:
    if r.fill_bytes_per_second:
        bw = r.fill_bytes_per_second / 2**30
        ref = r.device_copy_bytes_per_second
        con.print(f"Fill: {r.seconds.fill_pass1:.2f} s per pass, {bw:.2f} GiB/s written"
                  + (f" ({r.fill_bytes_per_second / ref:.0%} of the device's copy bandwidth)" if ref else ""))
    for c in r.checks:
        con.print(f"  {'pass' if c.passed else 'FAIL'}  {c.name}")


def _bytes_table(first: str, count: str):
    """The per-group (or per-pool) table: what each holds, predicted, planned, expected and written bytes."""
    g = table()
    # on a narrow console the expected bytes go first, then the counts, then what each holds
    drop = {"expected written": 1, count: 2, "caches": 3}
    for name, just in ((first, "left"), ("caches", "left"), (count, "right"), ("predicted", "right"),
                       ("planned", "right"), ("expected written", "right"), ("written", "right")):
        g.add_column(name, justify=just, no_wrap=just == "right", max_width=24 if name == "caches" else None,
                     drop=drop.get(name))  # names wrap between words on a narrow console, figures never
    return g


def render_headline(con, h) -> None:
    """verify --headline: the write-up's figures, kvcalc's estimate and what the allocations measured."""
    con.print(f"The headline by allocation: {ctx_text(h.context_tokens)} per sequence on {h.device}, the exact layout "
              f"on the article basis (window + compressed entries + indexer keys, no compressor state), fill {h.fill}")
    t = table()
    for name, just in (("figure", "left"), ("the write-up", "right"), ("kvcalc estimate", "right"),
                       ("measured", "right"), ("", "left")):
        t.add_column(name, justify=just)
    for r in h.rows:
        fmt = (lambda v: f"{v:.2f}x") if r.unit == "x" else (lambda v: f"{v:,.2f} {r.unit}")
        mark = {True: "agrees", False: "DIFFERS", None: ""}[r.agrees]
        t.add_row(r.figure, r.published or "-", fmt(r.estimate), fmt(r.measured) if r.measured is not None else "-",
                  mark)
    con.table(t)
    for r in h.rows:
        if r.quote:
            con.print(f"{r.figure}: \"{r.quote}\" ({r.source}; within {r.tolerance:g} {r.unit}).")
    if not any(r.published for r in h.rows):
        con.print("The write-up states its figures at 1M tokens; at this context the table gives kvcalc's arithmetic and "
                  "the measurement. The ratio approaches 1408 x 61 / (30 x 320 + 31 x 8) = 8.72x as the context grows "
                  "past the 128-token window (a constant term in every V4 layer).")
    for label, r in h.runs:
        failed = [c.name for c in r.checks if not c.passed]
        con.print(f"{label}: {r.allocated_bytes:,} B allocated in {sum(g.layers for g in r.groups)} tensors, "
                  f"{r.written_bytes if r.written_bytes is not None else 0:,} B written, {len(r.readback)} rows read back"
                  f"{_measured_text(r)}; {r.verdict}" + (f" ({'; '.join(failed)})" if failed else ""))
    con.print("Runs one after the other, each freed before the next; binary units (GiB = 2^30 B).")
    con.print(f"Verdict: {h.verdict}.")


def render_llama_cpp(con, r) -> None:
    """`verify --engine llama.cpp`: what llama.cpp made beside the plan."""
    from .checklog import quantity_text

    con.print(f"{r.path}: llama.cpp (llama-cpp-python {r.llama_cpp_python}) made the context kvcalc planned for "
              f"{r.model} at {r.context:,} tokens: {r.command}")
    t = table()
    for col, just in (("figure", "left"), ("llama.cpp", "right"), ("kvcalc", "right"), ("", "left")):
        t.add_column(col, justify=just)
    for x in r.rows:
        mark = "" if x.agrees is None else ("agrees" if x.agrees else "DIFFERS")
        t.add_row(x.figure, quantity_text(x.logged), quantity_text(x.kvcalc), mark)
    con.table(t)
    for n in r.notes:
        con.print(f"Note: {n}")
    con.print(f"Verdict: {r.verdict}.")
