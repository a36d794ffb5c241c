"""`claims`: every published number, recomputed."""

from __future__ import annotations

from ..textout import Styled
from .common import NARROW_BELOW, table


def render_claims(con, results) -> None:
    narrow = con.width < NARROW_BELOW  # the claim's words go under its id, the tolerance under the figure
    t = _claims_table(results, narrow, False)
    if narrow and t.least_width() > con.width:  # a 60-column console: the result under the computed figure too
        t = _claims_table(results, narrow, True)
    con.table(t)
    n_fail = sum(r.missed for r in results)
    n_other = sum(not r.comparable for r in results)
    con.print(f"{len(results) - n_fail - n_other} passed, {n_fail} failed"
              + (f", {n_other} not comparable (the published figure measures what kvcalc does not price; "
                 "`kvcalc claims --json` gives each basis)" if n_other else ""))


def _claims_table(results, narrow: bool, narrower: bool):
    """The table: one row per claim; ``narrow`` stacks the claim under its id and the tolerance under the
    published figure, ``narrower`` the result under the computed one as well, and lets the figures wrap
    between number and unit."""
    t = table("Published numbers, recomputed")
    cols = (("id", "left"), ("claim", "left"), ("published", "right"), ("computed", "right"), ("tolerance", "right"),
            ("result", "left"))
    heads = {"id": "id / claim", "published": "published\ntolerance"}
    if narrower:
        heads["computed"] = "computed\nresult"
    for col, just in cols:
        if narrow and col in ("claim", "tolerance") or narrower and col == "result":
            continue
        t.add_column(heads.get(col, col) if narrow else col, justify=just,
                     no_wrap=col in ("published", "computed", "tolerance", "result") and not narrower)
    for r in results:
        verdict = (Styled("n/a", "yellow") if not r.comparable else
                   Styled("pass", "green") if r.passed else Styled("MISS", "bold red"))
        if narrower:  # a cell takes one style: the verdict's, which the figure above it shares
            t.add_row(f"{r.id}\n{r.claim}", f"{r.published_text()}\n{r.tolerance_text()}",
                      Styled(f"{r.computed_text()}\n{verdict}", verdict.style))
        elif narrow:
            t.add_row(f"{r.id}\n{r.claim}", f"{r.published_text()}\n{r.tolerance_text()}", r.computed_text(), verdict)
        else:
            t.add_row(r.id, r.claim, r.published_text(), r.computed_text(), r.tolerance_text(), verdict)
    return t
