"""`kvcalc decode`: the bytes one decode step reads, beside what the cache stores."""

from __future__ import annotations

from ..units import format_bytes
from .common import ctx_text, ratio, table


def render_decode(con, d, floor=None) -> None:
    con.print(f"{d.model}, {d.precision}, one decode step at {ctx_text(d.context_tokens)}: the cache bytes read "
              f"per sequence" + (f" on each of {d.tp} tensor-parallel ranks" if d.tp > 1 else ""))
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
    if floor is not None:
        _render_floor(con, floor)


def _render_floor(con, f) -> None:
    B = f.batch
    where = f"one {f.gpu_name}" if f.tp == 1 else f"each of {f.tp} {f.gpu_name} (tp {f.tp}, figures per GPU)"
    con.print(f"One step of {B} sequence{'s' if B > 1 else ''} on {where} "
              f"({f.bandwidth_bytes_per_s / 1e12:.2f} TB/s peak memory bandwidth):")
    t = table()
    t.add_column("read or written", justify="left")
    t.add_column("bytes", justify="right")
    t.add_column("basis", justify="left", drop=1)
    t.add_row("dense weights", format_bytes(f.dense_weight_bytes),
              "read in full" + (f" (1/{f.tp} of them on each rank)" if f.tp > 1 else ""))
    if f.experts is not None:
        t.add_row("routed experts", format_bytes(f.expert_read_bytes),
                  f"{f.expected_experts:.1f} of {f.experts} experts a layer expected at k = {f.experts_per_token} "
                  f"({f.expert_read_share:.1%} of {format_bytes(f.expert_weight_bytes)})")
    t.add_row("cache read", format_bytes(f.cache_read_bytes), f"{B} x the table above")
    if f.state_write_bytes:
        t.add_row("state written back", format_bytes(f.state_write_bytes), f"{B} x the fixed state")
    t.add_row("step", format_bytes(f.step_bytes), f"{f.step_bytes:,} B", end_section=True)
    con.table(t)
    con.print(f"Floor: {_seconds(f.step_seconds)} a step, so at most {f.tokens_per_second:,.0f} tokens/s "
              f"({f.tokens_per_second / B:,.1f} per sequence).")
    if f.experts is not None:
        con.print("Routing assumed uniform and independent per token: a step reads 1 - (1 - k/E)^B of the routed "
                  "experts' bytes.")
    con.print("Floor basis: every byte once at peak bandwidth, "
              + ("one GPU" if f.tp == 1 else f"the {f.tp} ranks in parallel, weights split evenly") +
              f"; entries appended this step ({format_bytes(f.append_bytes)}), activations, compute, communication "
              f"and the MTP layer left out. "
              f"Weights: {f.weights_source or 'as declared'}. Bandwidth: {f.bandwidth_source}.")


def _seconds(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


def precision_basis(spec, precision: str, asked: bool) -> str:
    """Why the step is priced at this precision: asked, or the config's default, and what each engine's
    kv-cache dtype auto would store instead (capacity and transfer plan that)."""
    from ..engines import engines
    from ..errors import with_names
    from .flags import FLAGS

    if asked:
        return f"{precision}, as asked"
    other = [f"{e.title} stores {d}" for e in engines() if e.version
             for d in [e.default_precision(spec)] if d and d != precision]
    text = f"{precision}, the config's default (decode prices no engine)"
    if other:
        text += (f"; asked for kv-cache dtype auto, {' and '.join(other)} (what `capacity` and `transfer` plan): "
                 f"{with_names('{{precision}}', FLAGS)} {other[0].rsplit(' ', 1)[1]} prices that")
    return text
