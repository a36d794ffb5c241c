"""`claims`: every published number, recomputed."""

from __future__ import annotations

from ..textout import Styled
from .common import NARROW_BELOW, table


def render_claims(con, results) -> None:
    narrow = con.width < NARROW_BELOW  # the claim's words go under its id, the tolerance under the figure
    t = table("Published numbers, recomputed")
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
