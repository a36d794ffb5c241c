"""The Python API's results as the command line shows them: ``str(result)`` is the CLI's text (120 columns, no
colour), ``result._repr_html_()`` the same lines and tables as HTML for a notebook, ``result.to_json()`` the CLI's
``--json``. One recording console serves both: it keeps each printed line and each table in order."""

from __future__ import annotations

import html

from ..textout import Console, Table


class Recorder(Console):
    """A console that keeps what a renderer prints: lines and tables, in order."""

    def __init__(self, width: int = 120) -> None:
        super().__init__(width=width, color=False)
        self.parts: list = []

    def print(self, text: str = "", style: str | None = None) -> None:
        self.parts.append(str(text))

    def table(self, table: Table) -> list[str]:
        self.parts.append(table)
        return []

    def text(self) -> str:
        out = []
        for p in self.parts:
            if isinstance(p, Table):
                out.append("\n".join(p.render(self.width, False)))
            else:
                out.append(p)
        return "\n".join(out).rstrip() + "\n"

    def html(self) -> str:
        out = ['<div class="kvcalc">']
        for p in self.parts:
            if isinstance(p, Table):
                head = "".join(f"<th style=\"text-align:{'right' if c['right'] else 'left'}\">"
                               f"{html.escape(c['header'])}</th>" for c in p.columns)
                rows = "".join("<tr>" + "".join(f"<td style=\"text-align:{'right' if c['right'] else 'left'}\">"
                                                f"{html.escape(str(cell))}</td>"
                                                for c, cell in zip(p.columns, cells)) + "</tr>"
                               for cells, _, _ in p.rows)
                title = f"<caption>{html.escape(p.title)}</caption>" if p.title else ""
                out.append(f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif p:
                out.append(f"<p>{html.escape(p)}</p>")
        out.append("</div>")
        return "".join(out)


def shown(render, *args, **kwargs) -> Recorder:
    """What ``render(console, *args, **kwargs)`` prints, recorded."""
    rec = Recorder()
    render(rec, *args, **kwargs)
    return rec
