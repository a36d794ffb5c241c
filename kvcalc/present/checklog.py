"""`check-log`: the logged figures beside kvcalc's."""

from __future__ import annotations

from ..engines import get_engine
from ..engines.logs import Quantity
from .common import ctx_text, table


def quantity_text(q: Quantity) -> str:
    """A logged or planned figure as the table shows it ('-' for none)."""
    if q.lo is None:
        return q.missing or "-"
    if isinstance(q.lo, str):  # a list as the log prints it
        return q.lo
    if q.unit == "tokens":
        one = lambda x: f"{x:,} tokens"  # noqa: E731
    elif q.unit == "GiB":
        one = lambda x: f"{x:.2f} GiB"  # noqa: E731
    elif q.unit == "MiB":
        one = lambda x: f"{x:.2f} MiB"  # noqa: E731
    elif q.unit == "x":
        one = lambda x: f"{x:.2f}x"  # noqa: E731
    elif q.unit == "%":
        one = lambda x: f"{x:.2f}%"  # noqa: E731
    elif q.unit == "blocks":
        one = lambda x: f"{x:,} blocks"  # noqa: E731
    else:
        one = lambda x: f"{x:,}"  # noqa: E731
    if q.hi is None:
        text = one(q.lo)
    elif q.collapse and one(q.lo) == one(q.hi):
        text = one(q.lo)
    elif q.unit == "B":
        text = f"{q.lo:,} .. {q.hi:,} B"
    else:
        text = f"{one(q.lo)} .. {one(q.hi)}"
    if q.each is not None:
        text += f" ({q.each:,} B each)"
    if q.pages is not None:
        text += f" ({q.pages[0]:,} -> {q.pages[1]:,} B)"
    return text


def check_log_json(r) -> dict:
    key = "".join(ch if ch.isalnum() else "_" for ch in r.engine)  # llama.cpp: log_llama_cpp_version
    return {
        "file": r.file,
        "model": r.model,
        "log_model": r.log_model,
        f"log_{key}_version": r.log_version,
        f"kvcalc_{key}_version": r.engine_version,
        "precision": r.precision,
        "context_tokens": r.context_tokens,
        "settings": r.settings,
        "parsed": r.parsed,
        "rows": [{"figure": x.figure, "logged": quantity_text(x.logged), "kvcalc": quantity_text(x.kvcalc),
                  "agrees": x.agrees, "line": x.line} for x in r.rows],
        "notes": list(r.notes),
        "verdict": r.verdict,
    }


def render_check_log(con, r) -> None:
    eng = get_engine(r.engine)
    title = eng.title.split()[0]
    ver = r.log_version or "version not logged"
    con.print(f"{r.file}: {r.log_model or 'model not logged'} ({title} {ver}) as kvcalc {r.model}, "
              f"{r.precision}, {eng.context_name} {ctx_text(r.context_tokens)}; kvcalc plans {title} "
              f"{r.engine_version}")
    t = table()
    t.add_column("figure")
    t.add_column("log", justify="right")
    t.add_column("kvcalc", justify="right")
    t.add_column("")
    for x in r.rows:
        mark = "" if x.agrees is None else ("agrees" if x.agrees else "DIFFERS")
        t.add_row(x.figure + (f" (line {x.line})" if x.line else ""), quantity_text(x.logged), quantity_text(x.kvcalc),
                  mark)
    con.table(t)
    for n in r.notes:
        con.print(f"Note: {n}")
    con.print(f"Verdict: {r.verdict}.")
