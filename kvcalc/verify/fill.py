"""The prefill that `kvcalc verify --fill` runs: deterministic synthetic inputs streamed chunk by chunk through
the writers a serving engine runs, into the plan's own views of the pool, then a read-back of sampled entries
against the torch reference.

What is written, per cache the plan holds (the slot rules are vLLM 0.33's on CUDA):

* per-token rows (MLA latent, the V3.2 indexer, the V4 sliding window): every position ``p`` is quantised
  into slot ``table[p // block_size] * block_size + p % block_size`` (``slots_from_block_table``);
* compressed entries (V4 c4a / c128a and the c4 indexer): the compressor turns each chunk's ``kv`` and
  ``score`` rows into the entries the chunk completes (RMSNorm, RoPE, bf16), carrying its fp32 state across
  chunks in the plan's compressor-state pages, and the quantiser writes entry ``i`` at
  ``table[i // entries_per_block] * entries_per_block + i % entries_per_block``;
* compressor state: every token's ``[kv | score + ape]`` fp32 row at its positional slot (vLLM
  ``save_partial_states``: the engine writes a state row for every token, not only the last window);
* plain per-token caches with no kernel here (GQA / MHA K and V of full, sliding-window and chunked attention,
  in bf16, fp16 or fp8): each token's entry as deterministic values cast to the storage dtype, at its slot's
  bytes in the page (the torch reference: vLLM's split of K and V inside a page is not reproduced, the bytes a
  token takes are);
* fixed state (Mamba, Mamba-2, gated DeltaNet, KDA, lightning): the request's running state, deterministic
  bytes, in the first block of its state group (prefix-caching checkpoint blocks stay unwritten: a prefill of
  one request writes its running state).

Each writer follows the rule of the vLLM path it stands for: 512-wide V4 compressed entries in fp8 use the
CuTeDSL compressor's scale floor (``fp8_ds_mla_v4_cutedsl``: scale >= 1e-4, smallest scale byte 114), the
window and the indexer keys the Triton writers' (amax >= 1e-4, smallest byte 105).

Sliding-window groups (the V4 window and the compressor states) reserve fewer blocks than the context spans:
vLLM frees the blocks behind the window and hands them out again. The fill models that inside the
request's reservation: logical block ``j`` uses ``table[j % n]`` (``n`` = the group's blocks per request, which
vLLM sizes for the window plus every token in flight, so no live block is ever reused).

Two writer paths: ``triton`` (the kvcalc_kernels kernels: what a GPU runs, and on a CPU under
``TRITON_INTERPRET=1``, slowly) and ``torch`` (kvcalc_kernels.reference: vectorised PyTorch, the only practical
path on a CPU beyond toy sizes). The report says which ran.
"""

from __future__ import annotations

import enum

import os
from dataclasses import dataclass

from ..errors import KvcalcError, quote
from ..specs import (ChunkedAttention, CompressedMLA, CompressorState, FullAttention, GatedDeltaNetState, IndexerCache,
                     KDAState, LinearAttentionState, Mamba1State, Mamba2State, MLALatent, SlidingWindowAttention, SlidingWindowMLA)
from .result import Readback

SENTINEL = 0xA5
SENTINEL2 = 0x5A  # the second pass's sentinel: a byte the fill writes can equal one of them, never both

# Named tolerances of the read-back (see _readback):
TOLERANCES = {
    "record_bytes": "exact: per-token records and state rows equal the reference's bytes",
    "compressed_entry": "|read - reference| <= format bound (half an fp8/bf16 ulp at the block scale, "
                        "incl. bf16 rounding of the input) + one bf16 ulp (2**-7 relative) + 1e-5: the kernel "
                        "sums the softmax in another order, so its fp32 entry may round to the next bf16 value",
}

_M1, _M2, _M3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D


def _mix(torch, h):
    """A 32-bit integer finaliser (xorshift-multiply), on int64 holding values below 2**32."""
    h = h ^ (h >> 16)
    h = (h * _M2) & 0xFFFFFFFF
    return h ^ (h >> 13)


def synth(torch, salt: int, positions, width: int):
    """Deterministic inputs: a 32-bit integer hash of (salt, position) and of the channel, combined and
    mixed once more, mapped to [-1, 1) and scaled by 2**((p % 9) - 4) per row, so block scales vary.
    Integer arithmetic only: the same values on every device, and any slice can be regenerated for the
    read-back."""
    p = positions.to(torch.int64)
    rows = _mix(torch, (p * _M1 + (salt & 0x7FFFFFFF)) & 0xFFFFFFFF)
    cols = _mix(torch, (torch.arange(width, device=p.device) * _M3 + 0x3C6EF372) & 0xFFFFFFFF)
    h = ((rows[:, None] ^ cols) * _M1) & 0xFFFFFFFF
    h = h ^ (h >> 15)
    u = h.to(torch.float32) * (2.0 ** -31) - 1.0
    amp = torch.ldexp(torch.ones_like(p, dtype=torch.float32), (p % 9 - 4).to(torch.int32))
    return u * amp[:, None]


def _salt(*parts: int) -> int:
    s = 0
    for x in parts:
        s = (s * 1000003 + x + 1) & 0x7FFFFFFF
    return s


class JobKind(str, enum.Enum):
    """How a job's cache is written (:func:`classify`)."""

    ROWS = "rows"  # one record per token (an MLA latent, a DSA indexer key)
    COMPRESSED = "compressed"  # V4's compressed entries and indexer keys, through the compressor
    STATE = "state"  # a compressor's state ring
    PLAIN = "plain"  # K and V in a plain dtype
    FIXED = "fixed"  # fixed state (Mamba, DeltaNet, KDA, linear attention): deterministic bytes, one slot


@dataclass
class Job:
    """One cache of one layer of one request, with where it lives."""

    request: int
    group: int
    component: str
    comp: object  # the CacheSpec
    kind: "JobKind"
    layer: int
    layer_pos: int  # index of the layer inside its PlanTensor
    fmt: str
    block_size: int  # entries per block
    table: object  # logical -> physical block ids (torch int64)
    cyclic: bool
    tensor: object  # PlanTensor
    state: "Job | None" = None  # compressor state job (compressed kinds)
    salt: int = 0
    entry_bytes: int = 0  # one entry's bytes as the page stores it
    page_block_size: int = 0  # entries per page of the job's tensor


#: the rules of vLLM's V3.2 writer paths for the plan's row formats (kvcalc_kernels/README.md): the latent by
#: fused_norm_rope and the indexer key by _fp8_quant_and_cache_write, both from fp32 with the exponent
#: ceil(log2(scale)) taken in fp32
_V32_WRITERS = {"fp8_ds_mla": "fp8_ds_mla_fp32log2", "fp8_indexer": "fp8_indexer_v32_fp32log2"}


def _compressed(comp) -> str:
    if not comp.shared_kv:
        raise KvcalcError(f"fill: component {comp.name} stores separate K and V entries; the kernels write "
                          "shared K=V entries only (use {{fill}} none)", param="fill")
    return JobKind.COMPRESSED


#: the writer of each cache kind, by exact type (an allow-list: a kind not here has no writer and is refused)
WRITERS = {
    CompressorState: lambda c: JobKind.STATE,
    CompressedMLA: _compressed,
    IndexerCache: lambda c: JobKind.COMPRESSED if c.ratio > 1 else JobKind.ROWS,
    MLALatent: lambda c: JobKind.ROWS,
    SlidingWindowMLA: lambda c: JobKind.ROWS,
    **dict.fromkeys((FullAttention, SlidingWindowAttention, ChunkedAttention), lambda c: JobKind.PLAIN),
    **dict.fromkeys((Mamba2State, GatedDeltaNetState, KDAState, Mamba1State, LinearAttentionState),
                    lambda c: JobKind.FIXED),
}


def classify(model, page_component: str) -> JobKind:
    comp = model.components[page_component]
    writer = WRITERS.get(type(comp))
    if writer is None:
        raise KvcalcError(
            f"fill: component {comp.name} ({comp.kind}) has no writer: the kernels fill DeepSeek's MLA, window, "
            "compressed, indexer and compressor-state caches; use {{fill}} none to verify the allocation only",
            param="fill")
    return writer(comp)


def _plain(job):
    """The plain format of a plain job (kvcalc.formats: its torch dtype and bytes per value)."""
    from ..formats import FORMATS

    fmt = FORMATS.get(job.fmt)
    return fmt if fmt is not None and fmt.torch_dtype else None


def _plain_width(job) -> int:
    """Values one entry of a plain job holds (its bytes over the dtype's)."""
    return job.entry_bytes // _plain(job).element_bytes


def plain_records(torch, job, positions):
    """A plain job's entries at ``positions`` as the pool stores them: uint8 rows. A fixed state's one entry is
    deterministic bytes (its conv and recurrent parts may have different dtypes)."""
    if job.kind is JobKind.FIXED:
        x = synth(torch, job.salt, positions, job.entry_bytes)
        return ((x * 127.0).to(torch.int32) & 0xFF).to(torch.uint8)
    if _plain(job) is None:
        raise KvcalcError(f"fill: component {job.component}: no plain writer for format {quote(job.fmt)}", param="fill")
    x = synth(torch, job.salt, positions, _plain_width(job))
    return x.to(getattr(torch, _plain(job).torch_dtype)).contiguous().view(torch.uint8)


def ratio_of(comp) -> int:
    return getattr(comp, "ratio", 1) if isinstance(comp, (CompressedMLA, IndexerCache)) else 1


def overlap_of(comp) -> bool:
    span = getattr(comp, "span", None) or comp.ratio
    return span == 2 * comp.ratio


def head_dim_of(comp) -> int:
    return comp.dim


# ---- writers ------------------------------------------------------------------------------------------------
class TorchWriter:
    """kvcalc_kernels.reference on whole chunks, with vectorised page placement (the core's record layout)."""

    name = "torch"

    def __init__(self, torch, K, R):
        self.torch, self.K, self.R = torch, K, R

    def records(self, x, fmt):
        return self.R.quantize_ref(x, fmt)

    def rows(self, x, fmt, view, slots, bs):
        scatter(self.torch, self.R.quantize_ref(x, fmt), view, slots, bs, self.K.get_format(fmt, x.shape[1]))

    def compressed(self, job, ctx, s, e, kv, score, ape, norm, cos_sin):
        """Entries completed by tokens [s, e): a one-shot reference over the tokens their windows cover."""
        comp, torch = job.comp, self.torch
        r, ov = comp.ratio, overlap_of(comp)
        first, last = s // r, e // r
        if last > first:
            t0 = max(0, first * r - (r if ov else 0))
            kv_w, sc_w = ctx.inputs(job, t0, last * r)
            ent = self.R.compress_oneshot_ref(kv_w, sc_w, ape, r, ov, norm, 1e-6,
                                              cos_sin[t0:] if cos_sin is not None else None,
                                              getattr(comp, "rope_dim", 0))
            ent = ent[ent.shape[0] - (last - first):]
            slots = ctx.entry_slots(job, first, last)
            self.rows(ent, job.fmt, ctx.view(job), slots, job.block_size)
        st = job.state
        if st is not None:
            pos = torch.arange(s, e, device=kv.device)
            rows = self.R.save_state_rows_ref(kv, score, ape, pos, r)
            scatter_raw(torch, rows, ctx.view(st), ctx.token_slots(st, s, e), st.block_size)


class TritonWriter:
    """The kvcalc_kernels kernels: quantise-and-insert, the chunked compressor, save_states."""

    name = "triton"

    def __init__(self, torch, K, R):
        self.torch, self.K, self.R = torch, K, R

    def rows(self, x, fmt, view, slots, bs):
        self.K.quantize(x, fmt, cache=view, slot_mapping=slots, block_size=bs)

    def compressed(self, job, ctx, s, e, kv, score, ape, norm, cos_sin):
        comp, torch, K = job.comp, self.torch, self.K
        r = comp.ratio
        st = job.state
        if st is None:
            raise KvcalcError(f"fill: component {comp.name} has no compressor_state in the plan", param="fill")
        window = (2 if overlap_of(comp) else 1) * r
        if window // st.block_size > st.table.shape[0]:  # the kernel's ring needs a distinct page per stride
            raise KvcalcError(f"fill: the Triton writer's {comp.name} compressor reads a {window}-token ring over "
                              f"{window // st.block_size} state pages; a request at {ctx.L:,} tokens reserves "
                              f"{st.table.shape[0]} (a context of at least {window} tokens is needed; "
                              "{{writer}} torch writes any context)", param="fill")
        # the pages that hold positions s - window .. s - 1 (vLLM's positional slots), in ring order
        first_block = (s - window) // st.block_size
        pages = st.table[torch.tensor([(first_block + j) % st.table.shape[0] for j in range(window // st.block_size)],
                                      device=st.table.device)].to(torch.int32)
        state = K.CompressorState(ctx.view(st), pages, st.block_size, comp.dim, r, overlap_of(comp))
        state.next_pos = s
        rope = getattr(comp, "rope_dim", 0) if cos_sin is not None else 0
        ent = K.compress(kv, score, ape, state, s, norm_weight=norm, eps=1e-6, cos_sin=cos_sin if rope else None,
                         rope_dim=rope, out_dtype=torch.bfloat16, update_state=False)
        pos = torch.arange(s, e, device=kv.device)
        K.save_states(kv, score, ape, pos, ctx.view(st), ctx.token_slots(st, s, e), st.block_size, r)
        if ent.shape[0]:
            slots = ctx.entry_slots(job, s // r, e // r)
            K.quantize(ent, job.fmt, cache=ctx.view(job), slot_mapping=slots, block_size=job.block_size)


def _parts(torch, view, bs, f):
    """The page split into per-entry slots: ``(record start, record end, [blocks, bs, part bytes] view)`` for
    each part of a record (split pages: every entry's data part, then every entry's scale part)."""
    nb, stride, base = view.shape[0], view.stride(0), view.storage_offset()
    flat = view.as_strided((view.untyped_storage().nbytes(),), (1,), 0)

    def slots(offset, width):
        return torch.as_strided(flat, (nb, bs, width), (stride, width, 1), base + offset)

    if f.split_pages and f.scale_part_bytes:
        d, sp = f.data_bytes, f.scale_part_bytes
        return [(0, d, slots(0, d)), (d, d + sp, slots(bs * d, sp))]
    return [(0, f.entry_bytes, slots(0, f.entry_bytes))]


def scatter(torch, rec, view, slots, bs, f):
    keep = slots >= 0
    rec, slots = rec[keep], slots[keep]
    page, pos = slots // bs, slots % bs
    for a, b, v3 in _parts(torch, view, bs, f):
        v3[page, pos] = rec[:, a:b]


def gather(torch, view, slots, bs, f):
    page, pos = slots // bs, slots % bs
    return torch.cat([v3[page, pos] for _, _, v3 in _parts(torch, view, bs, f)], dim=1)


class _Raw:
    """Fixed-width rows back to back in a page (compressor state)."""

    split_pages = False
    scale_part_bytes = 0

    def __init__(self, width: int):
        self.entry_bytes = width


def scatter_raw(torch, rows, view, slots, bs):
    rb = rows.contiguous().view(torch.uint8).reshape(rows.shape[0], -1)
    scatter(torch, rb, view, slots, bs, _Raw(rb.shape[1]))


def gather_raw(torch, view, slots, bs, width_bytes):
    return gather(torch, view, slots, bs, _Raw(width_bytes))


def load_backend(name: str, device: str):
    """The torch module, kvcalc_kernels and its reference, and the writer. The Triton writer on a CPU needs
    TRITON_INTERPRET=1 before kvcalc_kernels is first imported: set here when nothing imported it yet."""
    import sys

    import torch

    if name not in ("triton", "torch"):
        raise KvcalcError(f"writer: choose triton or torch, got {quote(name)}", param="writer")
    if device == "cpu" and "kvcalc_kernels" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        import kvcalc_kernels as K
        from kvcalc_kernels import reference as R
    except ImportError as exc:
        raise KvcalcError(f"{{{{fill}}}} needs triton: pip install 'kvcalc[verify]' ({exc})") from None
    if name == "triton" and device == "cpu":
        from kvcalc_kernels import _checks

        if not _checks.KERNELS_INTERPRETED:
            raise KvcalcError("writer: the Triton writer on a CPU needs TRITON_INTERPRET=1 before kvcalc_kernels "
                              "is imported; use {{writer}} torch", param="writer")
    return torch, K, R, (TritonWriter if name == "triton" else TorchWriter)(torch, K, R)


# ---- the prefill ------------------------------------------------------------------------------------------
class Fill:
    """Every cache of the plan (or, with ``mode='sample'``, the first and last layer of each of its page
    tensors) of ``batch`` requests filled through ``writer``, chunk by chunk."""

    def __init__(self, torch, K, R, writer, pool_plan, model, flat, num_blocks, tables, batch, chunk, mode):
        self.torch, self.K, self.R, self.writer = torch, K, R, writer
        self.plan, self.model, self.flat = pool_plan, model, flat
        self.num_blocks, self.tables, self.batch = num_blocks, tables, batch
        self.L = pool_plan.context
        self.chunk, self.mode = chunk, mode
        self.device = flat.device
        self._views: dict = {}
        self._cos_sin: dict = {}
        self.jobs = self._build_jobs()

    # -- layout -------------------------------------------------------------------------------------------
    def _build_jobs(self) -> list[Job]:
        p = self.plan
        tensors = p.tensors(self.num_blocks)
        kinds = {t.component: classify(self.model, t.component) for t in tensors}
        groups = {g.index: g for g in p.groups}
        by_layer = {(t.component, layer): (t, i) for t in tensors for i, layer in enumerate(t.layers)}
        states = {c.compresses: c.name for c in self.model.components.values() if isinstance(c, CompressorState)}
        jobs = []
        for r in range(self.batch):
            for t in tensors:
                kind = kinds[t.component]
                if kind is JobKind.STATE:
                    continue
                page = next(pg for pg in groups[t.group].pages if pg.component == t.component)
                picks = range(len(t.layers)) if self.mode == "full" else sorted({0, len(t.layers) - 1})
                for i in picks:
                    layer = t.layers[i]
                    job = self._job(r, t, i, layer, page, kind, groups)
                    if kind is JobKind.COMPRESSED and t.component in states:
                        st_name = states[t.component]
                        if (st_name, layer) not in by_layer:
                            raise KvcalcError(f"plan: layer {layer} has {t.component} but no {st_name} page")
                        st, si = by_layer[(st_name, layer)]
                        st_page = next(pg for pg in groups[st.group].pages if pg.component == st_name)
                        job.state = self._job(r, st, si, layer, st_page, JobKind.STATE, groups)
                    jobs.append(job)
        return jobs

    def _job(self, r, t, i, layer, page, kind, groups) -> Job:
        g = groups[t.group]
        comp = self.model.components[t.component]
        fmt = page.format
        if kind is JobKind.COMPRESSED and isinstance(comp, CompressedMLA) and fmt == "fp8_ds_mla_v4" and comp.dim == 512:
            fmt = "fp8_ds_mla_v4_cutedsl"  # vLLM on NVIDIA compresses 512-wide entries with CuTeDSL (scale floor)
        elif kind is JobKind.ROWS and fmt in _V32_WRITERS and ratio_of(comp) == 1:
            fmt = _V32_WRITERS[fmt]  # V3.2's writers: fp32 rows quantised directly, ceil(log2(scale)) in fp32
        return Job(request=r, group=t.group, component=t.component, comp=comp, kind=kind, layer=layer,
                   layer_pos=i, fmt=fmt, block_size=page.entries_per_block, table=self.tables[(r, t.group)],
                   cyclic=g.kind.local, tensor=t,
                   salt=_salt(r, layer, sorted(self.model.components).index(t.component)),
                   entry_bytes=page.entry_bytes, page_block_size=page.block_size)

    def view(self, job):
        key = (job.tensor.group, job.component, job.layer_pos)
        v = self._views.get(key)
        if v is None:
            t = job.tensor
            v = self.torch.as_strided(self.flat, (self.num_blocks, t.page_bytes), (t.block_stride, 1),
                                      t.offset + job.layer_pos * t.layer_stride)
            self._views[key] = v
        return v

    def _slots(self, job, idx):
        bs = job.block_size
        logical = idx // bs
        n = job.table.shape[0]
        if job.cyclic:
            logical = logical % n
        elif idx.numel() and int(logical[-1]) >= n:
            raise KvcalcError(f"plan: request {job.request} group {job.group} reserves {n} blocks, entry "
                              f"{int(idx[-1])} of {job.component} needs block {int(logical[-1])}")
        return job.table[logical] * bs + idx % bs

    def token_slots(self, job, s, e):
        return self._slots(job, self.torch.arange(s, e, device=self.device))

    def entry_slots(self, job, first, last):
        return self._slots(job, self.torch.arange(first, last, device=self.device))

    # -- inputs -------------------------------------------------------------------------------------------
    def inputs(self, job, s, e):
        """(kv, score) rows of positions [s, e) of a compressed job, ``[e - s, coff * head_dim]`` fp32."""
        comp = job.comp
        w = (2 if overlap_of(comp) else 1) * comp.dim
        pos = self.torch.arange(s, e, device=self.device)
        return synth(self.torch, job.salt, pos, w), synth(self.torch, job.salt ^ 0x5BD1E995, pos, w)

    def params(self, job):
        """(ape [ratio, W], RMSNorm weight [head_dim], cos_sin or None) of a compressed job."""
        torch, comp = self.torch, job.comp
        w = (2 if overlap_of(comp) else 1) * comp.dim
        ape = synth(torch, job.salt ^ 0x27D4EB2F, torch.arange(comp.ratio, device=self.device), w)
        norm = 0.5 + synth(torch, job.salt ^ 0x165667B1, torch.zeros(1, dtype=torch.int64, device=self.device),
                           comp.dim)[0].abs() * 16
        rope = getattr(comp, "rope_dim", 0)
        return ape, norm, (self.cos_sin(rope) if rope else None)

    def cos_sin(self, rope_dim):
        cs = self._cos_sin.get(rope_dim)
        if cs is None:
            torch = self.torch
            half = rope_dim // 2
            inv = 10000.0 ** (-torch.arange(half, dtype=torch.float64, device=self.device) * 2 / rope_dim)
            ang = torch.arange(self.L, dtype=torch.float64, device=self.device)[:, None] * inv
            cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
            self._cos_sin[rope_dim] = cs
        return cs

    # -- run ----------------------------------------------------------------------------------------------
    @property
    def total_tokens(self) -> int:
        return len(self.jobs) * self.L

    def run(self, advance=lambda n: None) -> None:
        torch = self.torch
        for job in self.jobs:
            if job.kind in (JobKind.PLAIN, JobKind.FIXED):
                n = 1 if job.kind is JobKind.FIXED else self.L
                for s in range(0, n, self.chunk):
                    e = min(n, s + self.chunk)
                    pos = torch.arange(s, e, device=self.device)
                    scatter_raw(torch, plain_records(torch, job, pos), self.view(job), self._slots(job, pos),
                                job.block_size)
                    advance(e - s)
                continue
            if job.kind is JobKind.ROWS:
                for s in range(0, self.L, self.chunk):
                    e = min(self.L, s + self.chunk)
                    x = synth(torch, job.salt, torch.arange(s, e, device=self.device), job.comp.dim)
                    self.writer.rows(x, job.fmt, self.view(job), self.token_slots(job, s, e), job.block_size)
                    advance(e - s)
            else:
                ape, norm, cos_sin = self.params(job)
                for s in range(0, self.L, self.chunk):
                    e = min(self.L, s + self.chunk)
                    kv, score = self.inputs(job, s, e)
                    self.writer.compressed(job, self, s, e, kv, score, ape, norm, cos_sin)
                    advance(e - s)
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    # -- prediction of what the fill writes (arithmetic, no memory read) ---------------------------------
    def _distinct(self, job, n_items: int) -> int:
        return min(n_items, job.table.shape[0] * job.block_size) if job.cyclic else n_items

    def expected_written(self) -> dict[int, int]:
        """Bytes per group the prefill writes: every slot it touches times the record (or state row) bytes.
        Window and state groups reuse their blocks, so they hold min(context, blocks x block size) slots."""
        out: dict[int, int] = {g.index: 0 for g in self.plan.groups}
        for job in self.jobs:
            items = 1 if job.kind is JobKind.FIXED else self.L if job.kind in (JobKind.ROWS, JobKind.PLAIN) else self.L // job.comp.ratio
            out[job.group] += self._distinct(job, items) * job.entry_bytes
            if job.state is not None:
                st = job.state
                out[st.group] += self._distinct(st, self.L) * st.entry_bytes
        return out

    # -- read-back ----------------------------------------------------------------------------------------
    def _live(self, job, n_items):
        """Indices still held at the end (cyclic groups keep the last blocks x block-size slots)."""
        lo = max(0, n_items - job.table.shape[0] * job.block_size) if job.cyclic else 0
        if n_items <= lo:
            return []
        return sorted({lo, (lo + n_items - 1) // 2, n_items - 1})

    def readback(self) -> list[Readback]:
        """Sampled entries of the first and last layer of every page tensor (request 0 and the last one),
        read from the pool and compared with the torch reference on regenerated inputs."""
        torch, K, R = self.torch, self.K, self.R
        seen, out = set(), []
        for job in self.jobs:
            t = job.tensor
            if job.request not in (0, self.batch - 1) or job.layer_pos not in (0, len(t.layers) - 1):
                continue
            key = (job.request, job.group, job.component, job.layer_pos)
            if key in seen:
                continue
            seen.add(key)
            if job.kind in (JobKind.PLAIN, JobKind.FIXED):
                idx = [0] if job.kind is JobKind.FIXED else self._live(job, self.L)
                if not idx:
                    continue
                pos = torch.tensor(idx, device=self.device)
                want = plain_records(torch, job, pos)
                got = gather_raw(torch, self.view(job), self._slots(job, pos), job.block_size, want.shape[1])
                out.append(self._check(job, "record_bytes", idx, bool(torch.equal(got, want))))
                continue
            f = K.get_format(job.fmt, job.comp.dim)
            if job.kind is JobKind.ROWS:
                idx = self._live(job, self.L)
                if not idx:
                    continue
                pos = torch.tensor(idx, device=self.device)
                x = synth(torch, job.salt, pos, job.comp.dim)
                got = gather(torch, self.view(job), self._slots(job, pos), job.block_size, f)
                want = R.quantize_ref(x, f)
                deq = R.dequantize_ref(got, f)
                within = bool(((deq.double() - R.round_input(x, f).double()).abs()
                               <= R.error_bound(x, f)).all())
                out.append(self._check(job, "record_bytes", idx, bool(torch.equal(got, want)) and within))
            else:
                r = job.comp.ratio
                idx = self._live(job, self.L // r)
                if idx:
                    ape, norm, cos_sin = self.params(job)
                    ov = overlap_of(job.comp)
                    refs = []
                    for i in idx:
                        t0 = max(0, (i - 1) * r) if ov else i * r
                        kv, sc = self.inputs(job, t0, (i + 1) * r)
                        refs.append(R.compress_oneshot_ref(kv, sc, ape, r, ov, norm, 1e-6,
                                                           cos_sin[t0:] if cos_sin is not None else None,
                                                           getattr(job.comp, "rope_dim", 0))[-1])
                    ref = torch.stack(refs)
                    got = gather(torch, self.view(job), self._slots(job, torch.tensor(idx, device=self.device)),
                                 job.block_size, f)
                    deq = R.dequantize_ref(got, f).double()
                    bound = R.error_bound(ref, f) + 2.0 ** -7 * ref.double().abs() + 1e-5
                    out.append(self._check(job, "compressed_entry", idx, bool(((deq - ref.double()).abs()
                                                                              <= bound).all())))
                st = job.state
                if st is not None:
                    sidx = self._live(st, self.L)
                    pos = torch.tensor(sidx, device=self.device)
                    ape, _, _ = self.params(job)
                    kv = torch.cat([self.inputs(job, p, p + 1)[0] for p in sidx])
                    sc = torch.cat([self.inputs(job, p, p + 1)[1] for p in sidx])
                    want = R.save_state_rows_ref(kv, sc, ape, pos, r).contiguous().view(torch.uint8)
                    got = gather_raw(torch, self.view(st), self._slots(st, pos), st.block_size, want.shape[1])
                    out.append(self._check(st, "record_bytes", sidx, bool(torch.equal(got, want))))
        return out

    @staticmethod
    def _check(job, tolerance, idx, ok) -> Readback:
        return Readback(request=job.request, group=job.group, component=job.component, layer=job.layer,
                        indices=tuple(idx), tolerance=tolerance, passed=ok)
