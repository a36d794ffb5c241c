"""`kvcalc fit`: the deployments that serve a workload, ranked, and why the smaller ones do not."""

from __future__ import annotations

from ..units import format_bytes
from .common import ctx_text, table

WHY = {"weights": "weights and reserve leave no KV memory", "kv": "the KV pool holds too few requests",
       "running": "the scheduler runs fewer at once", "layout": "the engine refuses the layout", "engine": "the engine refuses it"}


def command(model: str, row, concurrency: int | None = None, extra: str = "", engine_flags: dict | None = None) -> str:
    """The `kvcalc capacity` command line that re-runs a row of fit (a Deployment, or a Longest with the requests
    each replica holds); ``extra``: the workload's (and weights' and reserve's) flags, as fit was given them;
    ``engine_flags``: each engine's own options as fit was given them, by engine name."""
    lay = row.layout
    out = (f"kvcalc capacity {model} --gpu {row.gpu} --gpus {lay.gpus} --tp {lay.tp} --pp {lay.pp} --dp {lay.dp}"
           + (" --ep" if lay.ep else "") + f" --engine {row.engine} -p {row.precision}")
    return (out + (f" --concurrency {concurrency}" if concurrency is not None else f" -c {row.context}") + extra
            + (engine_flags or {}).get(row.engine, ""))


def rerun_flags(engines, settings: dict | None, weights_gib: float | None = None, reserve_gib: float | None = None,
                request_tokens=None, request_tokens_file: str | None = None, shared_prefix_tokens=None
                ) -> tuple[str, dict]:
    """The flags a row's `kvcalc capacity` command carries besides its own: the weights' and reserve's (GiB, as fit
    was given them), the workload's (one length; a distribution, by its file where fit read one), and each engine's
    options as given, by engine name (``engines``: names, or one comma-separated string)."""
    import shlex

    from ..engines import engine_names, engine_options

    names = [e.strip() for e in engines.split(",")] if isinstance(engines, str) else list(engines)
    extra = "".join(f" {flag} {format(value, '.15g')}" for flag, value in (("--weights-gib", weights_gib),
                                                                          ("--reserve-gib", reserve_gib))
                    if value is not None)
    if isinstance(request_tokens, (int, str)):
        extra += f" --request-tokens {request_tokens}"
    elif request_tokens is not None or request_tokens_file is not None:  # a distribution: capacity reads a file
        extra += f" --request-tokens-file {request_tokens_file or 'LENGTHS_FILE'}"
    if shared_prefix_tokens:
        extra += f" --shared-prefix-tokens {shared_prefix_tokens}"
    given = {k: v for k, v in (settings or {}).items() if v is not None}
    flags = {}
    for name in names:
        if name not in engine_names():
            continue  # the search refuses it, naming it
        parts = []
        for opt in engine_options(name):
            if opt.name in given:
                v = given[opt.name]
                parts.append(f" {opt.flag if v else opt.negative}" if opt.type is bool else
                             f" {opt.flag} {shlex.quote(str(v))}")
        flags[name] = "".join(parts)
    return extra, flags


def fit_json(r, extra: str = "", engine_flags: dict | None = None) -> dict:
    """fit's JSON: the result's, each deployment with its `kvcalc capacity` command."""
    out = r.to_json()
    for d, j in zip(r.deployments, out["deployments"]):
        j["command"] = command(r.model, d, extra=extra, engine_flags=engine_flags)
    return out


def longest_json(model: str, concurrency: int, gpus: int, rows, refused=(), extra: str = "",
                 engine_flags: dict | None = None) -> dict:
    return {"model": model, "concurrency": concurrency, "gpus": gpus,
            "longest": [x.to_json() | {"command": command(model, x, x.per_replica, extra, engine_flags)}
                        for x in rows],
            "refused": [m.to_json() for m in refused] if not rows else []}


def _layout(lay) -> str:
    return f"{lay.tp}x{lay.pp}x{lay.dp}" + (" ep" if lay.ep else "")


def render_fit(con, r, rows, extra: str = "", engine_flags: dict | None = None) -> None:
    asked = f"{r.concurrency:,} requests" if r.concurrency is not None else "the most requests"
    con.print(f"{r.model} at {ctx_text(r.context)}: {asked}; {r.searched:,} deployments planned in "
              f"{r.seconds:.2f} s")
    t = table()
    for col, just in (("gpu", "left"), ("gpus", "right"), ("tp x pp x dp", "left"), ("engine", "left"),
                      ("precision", "left"), ("requests", "right"), ("spare", "right"), ("KV pool / GPU", "right"),
                      ("weights / GPU", "right")):
        t.add_column(col, justify=just)
    for d in rows:
        held = f"{d.total_requests:,}" if d.served == d.total_requests else \
            f"{d.served:,} ({d.total_requests:,} held)"
        t.add_row(d.gpu, str(d.layout.gpus), _layout(d.layout), d.engine, d.precision, held,
                  "-" if d.spare is None else f"{d.spare:,}", format_bytes(d.kv_pool_bytes_per_gpu),
                  "-" if d.weights_bytes_per_gpu is None else format_bytes(d.weights_bytes_per_gpu))
    con.table(t)
    for d in rows[:1]:
        for tier in d.tiers:
            con.print(f"Below the GPU ({d.gpu}, {d.layout.gpus} GPU(s), {d.engine}): {tier.name} holds "
                      f"{tier.tokens_per_rank:,} tokens a rank, {tier.requests:,} more request(s)' prefixes; "
                      f"{format_bytes(tier.host_bytes)} of {tier.medium}.")
    if rows:
        con.print(f"Re-run a row: {command(r.model, rows[0], extra=extra, engine_flags=engine_flags)}")
    if r.misses and (r.concurrency is not None or not rows):
        served = {(d.gpu, d.engine, d.precision) for d in rows}
        lines = {}
        for m in r.misses:
            k = (m.gpu, m.engine, m.precision)
            lines.setdefault(k, {}).setdefault(m.why, []).append(m)
        shown = 0
        for k, by in lines.items():
            if shown >= 12:
                con.print(f"... and {len(lines) - shown:,} more (--json lists every one)")
                break
            smaller = "smaller fleets" if k in served else "every fleet searched"
            parts = []
            for why, ms in by.items():
                first = ms[0]
                parts.append(f"{WHY[why]} ({len(ms)}; e.g. {first.layout.gpus} GPU(s) {_layout(first.layout)}: "
                             f"{first.detail[:140]})")
            con.print(f"Why not {smaller} of {k[0]} / {k[1]} / {k[2]}: " + "; ".join(parts) + ".")
            shown += 1
    for n in r.notes:
        con.print(f"Note: {n}")
    con.print("Basis: each row is `kvcalc capacity` with that GPU, layout, engine and precision (the engine's own "
              "budget and defaults, the model's weights split by the layout); fleets of 1, 2, 4, 8 ... GPUs.")


def render_longest(con, model: str, concurrency: int, gpus: int, rows, refused=(), extra: str = "",
                   engine_flags: dict | None = None) -> None:
    con.print(f"{model}: the longest context at which {concurrency:,} requests fit on {gpus} GPU(s) (split evenly "
              "over the data-parallel replicas)")
    t = table()
    for col, just in (("gpu", "left"), ("tp x pp x dp", "left"), ("engine", "left"), ("precision", "left"),
                      ("context", "right")):
        t.add_column(col, justify=just)
    for x in rows:
        t.add_row(x.gpu, _layout(x.layout), x.engine, x.precision, ctx_text(x.context))
    con.table(t)
    if rows:
        con.print(f"Re-run a row: {command(model, rows[0], rows[0].per_replica, extra, engine_flags)} (the requests "
                  "of one replica)")
    else:
        why = "; ".join(dict.fromkeys(f"{WHY[m.why]}: {m.detail[:160]}" for m in refused))
        con.print(f"No layout of these GPUs holds them at any context{': ' + why[:600] if why else ''}.")
