"""What `kvcalc verify` returns: :class:`VerifyResult`, one rank's measurements (or, with ``ranks``, the
combination of every tensor-parallel rank's), and the parts it is made of.

``to_json()`` gives the report's dict (``--json``, ``--report``, ``reports/verify/*.json``); ``from_json``
rebuilds a one-rank result from it (the ranks of ``--tp`` come back from their processes as JSON).

Torch-free: frozen dataclasses of plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Check:
    """One comparison of a measured figure with its prediction."""

    name: str
    passed: bool

    def to_json(self) -> dict:
        return {"check": self.name, "pass": self.passed}

    @classmethod
    def from_json(cls, d: dict) -> "Check":
        return cls(d["check"], d["pass"])


@dataclass(frozen=True)
class VerifyView:
    """One plan tensor of a group, as carved out of the pool."""

    component: str
    layers: int
    page_bytes: int
    real_page_bytes: int
    offset: int
    layer_stride: int
    block_stride: int

    def to_json(self) -> dict:
        return {"component": self.component, "layers": self.layers, "page_bytes": self.page_bytes,
                "real_page_bytes": self.real_page_bytes, "offset": self.offset, "layer_stride": self.layer_stride,
                "block_stride": self.block_stride}

    @classmethod
    def from_json(cls, d: dict) -> "VerifyView":
        return cls(**d)


@dataclass(frozen=True)
class VerifyGroup:
    """One cache group: its blocks and bytes for the batch, predicted, planned, expected and written."""

    group: int
    kind: str  # the plan group's kind name: 'full', 'window 128', 'state'
    components: tuple[str, ...]
    layers: int
    blocks: int
    predicted_bytes: int
    planned_bytes: int
    page_bytes: int
    real_page_bytes: int
    views: tuple[VerifyView, ...]
    expected_written_bytes: int
    written_bytes: int | None
    padding_written_bytes: int | None
    #: token pools only (``blocks`` then counts tokens, or a state pool's slots): the buffer SGLang allocates,
    #: {name, dtype, store_dtype, shape (one layer's), tensors, padding_page_bytes, padding_page_written_bytes}
    pool: dict | None = None

    def to_json(self) -> dict:
        out = {"group": self.group, "kind": self.kind, "components": list(self.components), "layers": self.layers,
               "blocks": self.blocks, "predicted_bytes": self.predicted_bytes, "planned_bytes": self.planned_bytes,
               "page_bytes": self.page_bytes, "real_page_bytes": self.real_page_bytes,
               "views": [v.to_json() for v in self.views], "expected_written_bytes": self.expected_written_bytes,
               "written_bytes": self.written_bytes, "padding_written_bytes": self.padding_written_bytes}
        if self.pool is not None:
            out["pool"] = dict(self.pool)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "VerifyGroup":
        return cls(**dict(d, components=tuple(d["components"]),
                          views=tuple(VerifyView.from_json(v) for v in d["views"])))


@dataclass(frozen=True)
class Measured:
    """What the allocation measured: storage bytes; on CPU the resident-memory growth; on CUDA the
    allocator's and the device's view (None where the device has no such figure)."""

    storage_bytes: int
    resident_growth_bytes: int | None = None
    allocator_allocated_delta: int | None = None
    allocator_reserved_delta: int | None = None
    device_free_delta: int | None = None
    allocator_back_to_start: bool | None = None
    device_free_back_to_start_bytes: int | None = None
    allocator_rounding_bytes: int | None = None  # CUDA only (the JSON has the key only there)

    def to_json(self) -> dict:
        out = {"storage_bytes": self.storage_bytes, "resident_growth_bytes": self.resident_growth_bytes,
               "allocator_allocated_delta": self.allocator_allocated_delta,
               "allocator_reserved_delta": self.allocator_reserved_delta, "device_free_delta": self.device_free_delta,
               "allocator_back_to_start": self.allocator_back_to_start,
               "device_free_back_to_start_bytes": self.device_free_back_to_start_bytes}
        if self.allocator_rounding_bytes is not None:
            out["allocator_rounding_bytes"] = self.allocator_rounding_bytes
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Measured":
        return cls(**d)


@dataclass(frozen=True)
class Seconds:
    """Wall time of the allocation and of each fill pass (None: the pass did not run or did not finish)."""

    allocate: float
    fill_pass1: float | None = None
    fill_pass2: float | None = None

    def to_json(self) -> dict:
        out = {"allocate": self.allocate}
        if self.fill_pass1 is not None:
            out["fill_pass1"] = self.fill_pass1
        if self.fill_pass2 is not None:
            out["fill_pass2"] = self.fill_pass2
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Seconds":
        return cls(**d)


@dataclass(frozen=True)
class FillInfo:
    """How the prefill ran: the writer, its chunk, the jobs and the writer rule each cache used."""

    writer: str
    chunk_tokens: int
    jobs: int
    formats: dict  # component -> the writer rule (format) it was written with
    layers: str
    tokens_per_pass: int

    def to_json(self) -> dict:
        return {"writer": self.writer, "chunk_tokens": self.chunk_tokens, "jobs": self.jobs,
                "formats": dict(self.formats), "layers": self.layers, "tokens_per_pass": self.tokens_per_pass}

    @classmethod
    def from_json(cls, d: dict) -> "FillInfo":
        return cls(**d)


@dataclass(frozen=True)
class Readback:
    """Sampled entries of one page tensor read back and compared with the reference under ``tolerance``."""

    request: int
    group: int
    component: str
    layer: int
    indices: tuple[int, ...]
    tolerance: str
    passed: bool

    def to_json(self) -> dict:
        return {"request": self.request, "group": self.group, "component": self.component, "layer": self.layer,
                "indices": list(self.indices), "tolerance": self.tolerance, "pass": self.passed}

    @classmethod
    def from_json(cls, d: dict) -> "Readback":
        return cls(d["request"], d["group"], d["component"], d["layer"], tuple(d["indices"]), d["tolerance"],
                   d["pass"])


BASIS = ("predicted: exact analytic bytes (complete basis) in the formats the engine stores; planned: the "
         "engine's paged pool (blocks x bytes per block, null block included); allocated: storage bytes on "
         "CPU, allocator delta on CUDA; written: bytes counted in memory after the fill")


@dataclass(frozen=True)
class VerifyResult:
    """One verify run. A one-rank result holds its own measurements (``tp`` and ``rank`` set when
    :func:`kvcalc.verify.run` made it); a tensor-parallel result holds every rank's result in ``ranks``,
    bytes summed over them, and ``measured`` None (each rank has its own)."""

    model: str
    context_tokens: int
    precision: str
    engine: str
    engine_version: str
    device: str
    fill: str
    writer: str | None
    batch: int
    complete: bool
    predicted_bytes: int
    planned_bytes: int
    planned_blocks: int | None  # None for token pools (no shared block pool: see ``token_pools``)
    bytes_per_block: int | None
    allocated_bytes: int
    expected_written_bytes: int
    written_bytes: int | None
    stray_written_bytes: int | None
    measured: Measured | None
    seconds: Seconds
    fill_bytes_per_second: float | None
    device_copy_bytes_per_second: float | None
    fill_info: FillInfo | None
    groups: tuple[VerifyGroup, ...]
    readback: tuple[Readback, ...]
    tolerances: dict
    checks: tuple[Check, ...]
    verdict: str  # pass, fail or incomplete
    basis: str = BASIS
    tp: int | None = None
    rank: int | None = None
    ranks: tuple["VerifyResult", ...] = ()
    #: an engine's token pools (SGLang): its figures for the batch (max_total_num_tokens, page_size, ...)
    token_pools: dict | None = None
    #: the architecture whose kernels the engine's layout follows (the CUDA device's; None: Hopper's rules)
    arch: str | None = None

    def to_json(self) -> dict:
        """The report's dict (a tensor-parallel result: the combined report, with every rank's in ``ranks``)."""
        if self.ranks:
            return self._combined_json()
        out = {
            "model": self.model,
            "context_tokens": self.context_tokens,
            "precision": self.precision,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "device": self.device,
            "arch": self.arch,
            "fill": self.fill,
            "writer": self.writer,
            "batch": self.batch,
            "complete": self.complete,
            "predicted_bytes": self.predicted_bytes,
            "planned_bytes": self.planned_bytes,
            "planned_blocks": self.planned_blocks,
            "bytes_per_block": self.bytes_per_block,
            "allocated_bytes": self.allocated_bytes,
            "expected_written_bytes": self.expected_written_bytes,
            "written_bytes": self.written_bytes,
            "stray_written_bytes": self.stray_written_bytes,
            "measured": self.measured.to_json(),
            "seconds": self.seconds.to_json(),
            "fill_bytes_per_second": self.fill_bytes_per_second,
            "device_copy_bytes_per_second": self.device_copy_bytes_per_second,
            "fill_info": self.fill_info.to_json() if self.fill_info is not None else None,
            "groups": [g.to_json() for g in self.groups],
            "readback": [c.to_json() for c in self.readback],
            "tolerances": self.tolerances,
            "checks": [c.to_json() for c in self.checks],
            "verdict": self.verdict,
            "basis": self.basis,
        }
        if self.tp is not None:
            out["tp"], out["rank"] = self.tp, self.rank
        if self.token_pools is not None:
            out["token_pools"] = dict(self.token_pools)
        return out

    def _combined_json(self) -> dict:
        out = {k: getattr(self, k) for k in ("model", "context_tokens", "precision", "engine", "engine_version",
                                             "device", "arch", "fill", "writer", "batch", "basis", "tolerances",
                                             "predicted_bytes", "planned_bytes", "allocated_bytes",
                                             "expected_written_bytes", "written_bytes")}
        out["groups"] = [g.to_json() for g in self.groups]
        out["planned_blocks"] = self.planned_blocks
        out["measured"] = {"per_rank": [r.measured.to_json() for r in self.ranks]}
        out["complete"] = self.complete
        out["checks"] = [c.to_json() for c in self.checks]
        out["verdict"] = self.verdict
        out["tp"] = self.tp
        out["ranks"] = [r.to_json() for r in self.ranks]
        out["seconds"] = self.seconds.to_json()
        out["fill_bytes_per_second"] = None
        return out

    @classmethod
    def from_json(cls, d: dict) -> "VerifyResult":
        """A one-rank result from its ``to_json()`` dict."""
        return cls(**dict(
            d,
            measured=Measured.from_json(d["measured"]),
            seconds=Seconds.from_json(d["seconds"]),
            fill_info=FillInfo.from_json(d["fill_info"]) if d["fill_info"] is not None else None,
            groups=tuple(VerifyGroup.from_json(g) for g in d["groups"]),
            readback=tuple(Readback.from_json(c) for c in d["readback"]),
            checks=tuple(Check.from_json(c) for c in d["checks"]),
        ))


_SUMMED_GROUP = ("blocks", "predicted_bytes", "planned_bytes", "expected_written_bytes", "written_bytes")
_SUMMED = ("predicted_bytes", "planned_bytes", "allocated_bytes", "expected_written_bytes", "written_bytes")


def combine(ranks: "list[VerifyResult]", tp: int) -> VerifyResult:
    """The tensor-parallel result: rank 0's description, bytes and blocks summed over the ranks, every rank's
    checks (named by rank), passing only when every rank passes."""
    first = ranks[0]
    groups = tuple(
        replace(g, **{k: sum(getattr(r.groups[i], k) or 0 for r in ranks) for k in _SUMMED_GROUP})
        for i, g in enumerate(first.groups)
    )
    complete = all(r.complete for r in ranks)
    verdict = "incomplete" if not complete else "pass" if all(r.verdict == "pass" for r in ranks) else "fail"
    return replace(
        first,
        **{k: sum(getattr(r, k) or 0 for r in ranks) for k in _SUMMED},
        groups=groups,
        planned_blocks=sum(r.planned_blocks for r in ranks),
        measured=None,
        complete=complete,
        checks=tuple(Check(f"rank {r.rank}: {c.name}", c.passed) for r in ranks for c in r.checks),
        verdict=verdict,
        stray_written_bytes=None,
        fill_bytes_per_second=None,
        device_copy_bytes_per_second=None,
        fill_info=None,
        readback=(),
        tp=tp,
        rank=None,
        ranks=tuple(ranks),
    )
