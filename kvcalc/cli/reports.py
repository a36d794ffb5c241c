"""`kvcalc report`: regenerate every published table and plot under ``reports/`` in one command, so each figure
in the repository can be reproduced; ``--check`` compares the committed tables with what the code prints now.

Tables are the CLI's own output (fixed 120 columns), plots are SVG. Figures measured on hardware
(``reports/verify/*.json``, benchmarks) are not recomputed here: they are measurements, and their table
(``reports/verify/README.md``) is rebuilt from the JSON files.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from ..errors import KvcalcError, quote

# file -> the kvcalc command line whose output it holds
TABLES = {
    "headline.txt": ["estimate", "--context", "1M"],
    "claims.txt": ["claims"],
    "v4-pro-fp8-1m.txt": ["estimate", "deepseek-v4-pro", "--context", "1M", "--precision", "fp8"],
    "capacity-v4-pro-8xh200-1m.txt": ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--gpus", "8", "--tp", "8",
                                      "--context", "1M", "--precision", "fp8"],
    "models.txt": ["models"],
    "decode-v4-pro-fp8-1m-8xh200.txt": ["decode", "deepseek-v4-pro", "--precision", "fp8", "--gpu", "h200", "--tp",
                                        "8", "--batch", "4"],
    "decode-v32-fp8-1m.txt": ["decode", "deepseek-v3.2", "--precision", "fp8"],
    "transfer-v4-pro-fp8-1m.txt": ["transfer", "deepseek-v4-pro", "--precision", "fp8", "--context", "1M",
                                   "--allow-long-max-model-len"],
    "transfer-v32-fp8-128k-sglang.txt": ["transfer", "deepseek-v3.2", "--precision", "fp8", "--context", "128k",
                                         "--engine", "sglang", "--tp", "8"],
    "transfer-v4-pro-fp8-1m-sglang.txt": ["transfer", "deepseek-v4-pro", "--precision", "fp8", "--context", "1M",
                                          "--engine", "sglang", "--tp", "8", "--allow-overwrite-longer-context-len"],
}
PLOTS = {
    "plots/memory-vs-context.svg": (["deepseek-v3.2", "deepseek-v4-pro", "deepseek-v4-flash", "gqa8-hd128-l61"],
                                    ["fp8"], ["h200", "h100"], False),
    "plots/layers-v32-vs-v4-pro.svg": (["deepseek-v3.2", "deepseek-v4-pro"], ["fp8"], [], True),
}
WIDTH = "120"


def _run(argv: list[str]) -> str:
    from .app import run as run_cli

    out, err = io.StringIO(), io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = run_cli(argv)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    if rc not in (0, None):
        raise KvcalcError(f"report: `kvcalc {' '.join(argv)}` exited {rc}: {err.getvalue().strip()[:200]}")
    text = f"$ kvcalc {' '.join(argv)}\n" + err.getvalue() + out.getvalue()
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def tables() -> dict[str, str]:
    return {name: _run(argv) for name, argv in TABLES.items()}


def verify_table(folder: Path) -> str | None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "verify_table.py"
    if not script.is_file() or not folder.is_dir():
        return None
    r = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def generate(out_dir: str = "reports", plots: bool = True) -> list[str]:
    """Write every table (and plot) under ``out_dir``; returns the files written."""
    from ..safewrite import write_file

    out = _folder(out_dir)
    written = []
    for name, text in tables().items():
        write_file(out / name, text, "{{out}}")
        written.append(str(out / name))
    vt = verify_table(out / "verify")
    if vt is not None:
        write_file(out / "verify" / "README.md", vt, "{{out}}")
        written.append(str(out / "verify" / "README.md"))
    if plots:
        from ..config import load_model
        from ..hardware import get_gpu
        from ..present import plot as P
        from .contexts import parse_contexts

        for name, (models, precisions, gpus, layers) in PLOTS.items():
            path = out / name
            specs = [load_model(m) for m in models]
            if layers:
                P.layers_chart(specs, 1 << 20, precisions, str(path))
            else:
                P.memory_vs_context(specs, parse_contexts(["4k..1M"], 64), precisions, [get_gpu(g) for g in gpus],
                                    str(path))
            written.append(str(path))
    return written


def _folder(out_dir: str) -> Path:
    """The folder to write into: made when missing; a file of that name is refused (every table would land
    under it)."""
    out = Path(out_dir)
    if _stat(out_dir) == "file":
        raise KvcalcError(f"{{{{out}}}}: {quote(out_dir)} is a file, not a folder; name a folder (default: reports)",
                          param="out")
    return out


def _stat(path: str) -> str | None:
    """'folder', 'file' or None (missing); a path the system cannot name (too long, a NUL byte) is refused."""
    try:
        p = Path(path)
        return "folder" if p.is_dir() else ("file" if p.exists() else None)
    except (OSError, ValueError) as exc:
        raise KvcalcError(f"{{{{out}}}}: {quote(path)} is not a usable path ({getattr(exc, 'strerror', None) or exc})",
                          param="out") from None


def check(out_dir: str = "reports") -> tuple[list[str], list[str], list[str]]:
    """(the tables compared, those that differ from what the code prints now, those missing). Plots are not
    compared: their bytes depend on the matplotlib version; the verify table only where there are verify
    reports. A folder that holds none of the tables (``report --check`` outside a checkout) is refused."""
    out = Path(out_dir)
    if _stat(out_dir) != "folder" or not any((out / name).is_file() for name in TABLES):
        what = "is not a folder" if _stat(out_dir) != "folder" else "holds none of the published tables"
        raise KvcalcError(f"{{{{out}}}}: {quote(out_dir)} {what}: run `kvcalc report --check` in a kvcalc checkout "
                          "(or name its reports/ folder), or `kvcalc report` to write the tables", param="out")
    expected = tables()
    vt = verify_table(out / "verify")
    if vt is not None:
        expected["verify/README.md"] = vt
    missing = [name for name in expected if not (out / name).is_file()]
    stale = [name for name, text in expected.items() if name not in missing and (out / name).read_text() != text]
    return list(expected), stale, missing
