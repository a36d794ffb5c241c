"""The exact engine's layout for `kvcalc verify --engine exact`: the analytic layout as a straightforward
implementation allocates it. Per cached component and layer, one tensor sized exactly: ``batch x entries`` rows
of the component's entry bytes (a per-token cache), or ``batch`` rows of its fixed state; no pages, no blocks,
no padding. Each tensor's bytes are the ``estimate`` figure for the same basis (``complete`` or ``article``).

The rows are what :mod:`kvcalc.verify.tokenpools` allocates and fills: a request's entries in consecutive rows
after the previous request's; the records of the shared formats (DeepSeek V4's 584 B fp8_ds_mla_v4, V3.2's 656 B
fp8_ds_mla, the fp8 / fp4 indexer keys) through kvcalc's reference quantiser, a plain dtype by a cast, and fixed
state (compressor state, Mamba / DeltaNet / KDA state: mixed dtypes in one slot) as deterministic bytes. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError, quote
from ...formats import FORMATS
from ..buffers import Buffer

#: the record formats written through the reference quantiser (kvcalc_kernels' names); anything else is plain
RECORD_FORMATS = {"fp8_ds_mla_v4": "fp8_ds_mla_v4", "fp8_ds_mla": "fp8_ds_mla_exact", "fp8_indexer": "fp8_indexer_v4",
                  "fp4_indexer": "fp4_indexer"}
BASES = ("complete", "article")


@dataclass(frozen=True)
class ExactPools:
    """The exact layout for ``batch`` requests: one buffer per component (its tensor per layer)."""

    batch: int
    context: int
    estimate_basis: str
    precision: str
    total_bytes: int  # the estimate's bytes of the batch on this basis
    buffers: tuple[Buffer, ...]
    page_size: int = 1

    @property
    def basis(self) -> str:
        return (f"predicted: the exact analytic bytes of the batch (kvcalc estimate, {self.estimate_basis} basis); "
                "planned: the same layout as a straightforward implementation allocates it, one tensor per cached "
                "component and layer, entries x bytes per entry (fixed state: its bytes), no pages, no padding; "
                "blocks: a tensor's rows (a request's entries, or its one state row); allocated: storage bytes on "
                "CPU, allocator delta on CUDA (each tensor rounded up to the allocator's 512 B); written: bytes "
                "counted in memory after the fill")

    def checks(self) -> list[tuple[str, bool]]:
        planned = sum(b.bytes for b in self.buffers)
        return [(f"planned == the estimate's {self.total_bytes:,} B ({self.estimate_basis} basis, batch {self.batch})",
                 planned == self.total_bytes)]

    def to_json(self) -> dict:
        return {"layout": "exact", "basis": self.estimate_basis, "precision": self.precision,
                "estimate_bytes": self.total_bytes, "tensors": sum(len(b.layers) for b in self.buffers),
                "padding": "none: every row holds an entry (or a request's state)"}


def _buffer(index: int, comp, rows: list, context: int, batch: int) -> dict:
    """One component's buffer over the layers that hold it (``rows``: the estimate's ComponentBytes)."""
    c = rows[0][1]
    entries = int(c.entries[0])
    fixed = not c.entry_bytes  # fixed state: one row of its bytes per request
    row_bytes = c.fixed_bytes if fixed else c.entry_bytes
    if fixed:
        dtype, width, fmt, cols = "uint8", row_bytes, "plain", row_bytes
    elif c.format in RECORD_FORMATS:  # a packed record per row: (rows, entry bytes) uint8
        dtype, width, fmt, cols = "uint8", comp.dim, RECORD_FORMATS[c.format], row_bytes
    elif (plain := FORMATS.get(c.format)) is not None and plain.torch_dtype:  # a plain dtype: its torch dtype
        dtype, size = plain.torch_dtype, plain.element_bytes
        dtype, width, fmt, cols = dtype, row_bytes // size, "plain", row_bytes // size
    else:
        raise KvcalcError(f"{{{{engine}}}} exact: verify has no writer for component {c.name}'s format {quote(c.format)}")
    per = 1 if fixed else entries
    window = getattr(comp, "window", None)
    first = context - entries if (not fixed and window is not None and entries < context) else 0
    layers = tuple(layer for layer, _ in rows)
    return dict(index=index, name=c.name, kind="state" if fixed else ("full" if window is None else f"window {window}"),
                components=(c.name,), layers=layers, dtype=dtype, store="uint8" if dtype.startswith("float8") else dtype,
                shape=(batch * per, cols), tensor="layer", partner=None, tokens=batch * per, padding_rows=0,
                page=max(per, 1), row_bytes=row_bytes, width=width, format=fmt, paged_records=False,
                rows_per_request=per, first_position=first, bytes=batch * per * row_bytes * len(layers), group=0,
                padding_pages=0)


def batch_pools(plan, batch: int, model) -> ExactPools:
    """The exact layout of ``plan``'s model at its context for ``batch`` requests on the basis its settings name."""
    from ...estimate import estimate

    basis = getattr(plan.settings, "basis", "complete")
    est = estimate(model, plan.context, precision=plan.precision, basis=basis, numpy=False)
    by_comp: dict[str, list] = {}
    for layer in est.layers:
        for c in layer.components:
            if int(c.bytes[0]):
                by_comp.setdefault(c.name, []).append((layer.index, c))
    buffers = []
    for comp_name, rows in by_comp.items():
        f = _buffer(len(buffers), model.components[comp_name], rows, plan.context, batch)
        f.pop("group")
        buffers.append(Buffer(group=_group_of(plan, comp_name), **f))
    return ExactPools(batch, plan.context, basis, plan.precision, int(est.per_sequence[0]) * batch, tuple(buffers))


def _group_of(plan, comp_name: str) -> int:
    """The exact plan's group of a component (one group per component)."""
    for g in plan.groups:
        if any(c == comp_name for _, c in g.members):
            return g.index
    raise KvcalcError(f"{{{{engine}}}} exact: component {comp_name} is in no group of the plan")

