"""`kvcalc sweep`: exact bytes over contexts x models x precisions, as columns.

One vectorised :func:`kvcalc.estimate.estimate` per (model, precision) covers every context at once; the result
is columnar (one array per field, not one object per point), so a million points cost a few numpy arrays.
Torch-free.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from .config import as_model
from .estimate import estimate


def sweep(models: Iterable, contexts: np.ndarray, precisions: Iterable[str] | None = None, basis: str = "complete",
          mtp: bool = False) -> dict:
    """Columns ``model``, ``precision``, ``context_tokens``, ``bytes_per_sequence`` (numpy arrays, one row per
    (model, precision, context)) and ``warnings`` (one line per model whose max_context some context exceeds)."""
    ctx = np.asarray(contexts, dtype=np.int64)
    blocks = {"model": [], "precision": [], "context_tokens": [], "bytes_per_sequence": []}
    warnings: list[str] = []
    for m in models:
        spec = as_model(m)
        wanted = list(precisions) if precisions else [spec.default_precision]
        if wanted == ["all"]:
            wanted = list(spec.precisions)
        seen_warning = False
        for p in wanted:
            e = estimate(spec, ctx, precision=p, basis=basis, mtp=mtp)
            n = ctx.size
            blocks["model"].append(np.full(n, spec.name, dtype=object))
            blocks["precision"].append(np.full(n, e.precision, dtype=object))
            blocks["context_tokens"].append(ctx)
            blocks["bytes_per_sequence"].append(e.per_sequence)
            if e.warnings and not seen_warning:
                warnings.extend(e.warnings)
                seen_warning = True
    cols = {k: np.concatenate(v) if v else np.array([]) for k, v in blocks.items()}
    cols["warnings"] = warnings
    cols["basis"] = basis
    return cols


def to_json(cols: dict) -> dict:
    return {
        "columns": ["model", "precision", "context_tokens", "bytes_per_sequence"],
        "basis": cols["basis"],
        "units": "bytes per sequence, exact (no paging)",
        "rows": int(cols["context_tokens"].size),
        "model": cols["model"].tolist(),
        "precision": cols["precision"].tolist(),
        "context_tokens": cols["context_tokens"].tolist(),
        "bytes_per_sequence": cols["bytes_per_sequence"].tolist(),
        "warnings": cols["warnings"],
    }


def write_csv(cols: dict, out) -> None:
    out.write("model,precision,context_tokens,bytes_per_sequence\n")
    m, p, c, b = cols["model"], cols["precision"], cols["context_tokens"], cols["bytes_per_sequence"]
    step = 100_000
    for i in range(0, c.size, step):
        j = min(c.size, i + step)
        out.write("".join(f"{m[k]},{p[k]},{c[k]},{b[k]}\n" for k in range(i, j)))

