"""The pool plan's types: how a serving engine lays a model's caches out in its memory pool.

One :class:`PoolPlan` is the single answer that ``capacity``, ``verify`` and the reports consume: the cache
groups and the layers in each, block sizes in tokens, real and padded page bytes, the bytes one block of the
shared pool costs, blocks per request at a context, and the tensors the engine would allocate for a pool of
N blocks. Engines (``kvcalc.engines``) supply the layout; this module holds no engine facts itself.

Torch-free, like the rest of the analytic core.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import KvcalcError


class GroupKind(str, enum.Enum):
    """What a group's blocks hold for a request."""

    FULL = "full"  # every token
    WINDOW = "window"  # a sliding window of ``PlanGroup.window`` tokens
    CHUNK = "chunk"  # chunked local attention: the current ``PlanGroup.window``-token chunk (Llama 4)
    STATE = "state"  # fixed state, whatever the context
    EXACT = "exact"  # no paging (the exact engine)

    @property
    def local(self) -> bool:
        """A group that holds a request's last tokens only (a window or the current chunk), of
        ``PlanGroup.window`` tokens: its blocks are capped whatever the context, and reused."""
        return self in (GroupKind.WINDOW, GroupKind.CHUNK)


class Layout(str, enum.Enum):
    BLOCK_OUTERMOST = "block-outermost"  # each block holds every layer's page side by side
    LAYER_OUTERMOST = "layer-outermost"  # each layer owns a slab of num_blocks pages
    EXACT = "exact"  # no pool


@dataclass(frozen=True)
class PlanPage:
    """Pages of one shape inside a group: ``count`` layer caches of ``component``."""

    component: str
    spec: str
    format: str
    block_size: int
    entries_per_block: int
    entry_bytes: int
    real_page_bytes: int
    page_bytes: int
    count: int

    def to_json(self) -> dict:
        return {"component": self.component, "spec": self.spec, "format": self.format, "count": self.count,
                "block_size": self.block_size, "entries_per_block": self.entries_per_block,
                "entry_bytes": self.entry_bytes, "page_bytes": self.page_bytes,
                "real_page_bytes": self.real_page_bytes}


@dataclass(frozen=True)
class PlanGroup:
    index: int
    kind: GroupKind
    layers: tuple[int, ...]  # model layer indices held by the group (each once)
    members: tuple[tuple[int, str], ...]  # (layer, component) of every cache in the group
    block_size: int
    pages: tuple[PlanPage, ...]
    blocks_per_request: int
    analytic_bytes: int  # exact bytes of the group's caches for one request, in the engine's formats
    window: int | None = None  # tokens: a WINDOW group's window, a CHUNK group's chunk

    @property
    def kind_name(self) -> str:
        """'full', 'window 128', 'chunk 8192', 'state' or 'exact' (the JSON's group kind)."""
        return f"{self.kind.value} {self.window}" if self.kind.local else self.kind.value

    @property
    def page_bytes(self) -> int:
        """Padded bytes of one block of this group (all its layers' pages)."""
        return sum(p.page_bytes * p.count for p in self.pages)

    @property
    def real_page_bytes(self) -> int:
        return sum(p.real_page_bytes * p.count for p in self.pages)

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for _, c in self.members))

    @property
    def label(self) -> str:
        return " + ".join(self.components)


@dataclass(frozen=True)
class PlanTensor:
    """One view of the shared buffer: ``layers`` caches of one page shape in group ``group``.

    Block ``b`` of the i-th layer starts at ``offset + i * layer_stride + b * block_stride`` bytes."""

    group: int
    component: str
    layers: tuple[int, ...]
    page_bytes: int
    real_page_bytes: int
    offset: int
    layer_stride: int
    block_stride: int
    num_blocks: int
    dtype: str = "uint8"

    @property
    def shape(self) -> tuple[int, int, int]:
        return (len(self.layers), self.num_blocks, self.page_bytes)


@dataclass(frozen=True)
class PoolPlan:
    engine: str
    engine_version: str
    model: str
    precision: str
    context: int  # max_model_len the plan answers for
    settings: Any  # the engine's settings, as planned (the engine's Settings dataclass)
    settings_json: dict  # the settings that shaped this plan, by the engine's names
    layout: Layout
    grouping: str  # the rule that formed the groups
    padding_layers: int
    groups: tuple[PlanGroup, ...]
    bytes_per_block: int
    null_blocks: int  # blocks the engine keeps back (vLLM's null block)
    analytic_bytes: int  # exact bytes one request holds (complete basis), in the formats the engine stores
    notes: tuple[str, ...]
    _blocks_at: Callable[[int], tuple[int, ...]] = field(repr=False, compare=False)
    fill_chunk: int | None = None  # tokens the engine prefills per step (verify's fill chunk)
    detail: Any = field(default=None, repr=False, compare=False)  # the engine's own layout, for its sizing
    #: component -> the format the engine stores it in (Engine.stored_formats): the formats ``analytic_bytes`` and
    #: every group's ``analytic_bytes`` count
    stored_formats: dict = field(default_factory=dict, compare=False)

    # ---- one request ------------------------------------------------------------------------------------
    @property
    def blocks_per_request(self) -> int:
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def per_request_bytes(self) -> int:
        """Bytes one request at ``context`` reserves: its blocks, each costing a whole pool block."""
        return self.blocks_per_request * self.bytes_per_block

    def blocks_at(self, context: int) -> int:
        """Blocks per request at another max_model_len (same groups)."""
        return sum(self._blocks_at(context))

    # ---- a pool of a given size ---------------------------------------------------------------------------
    def num_blocks(self, pool_bytes: int) -> int:
        return pool_bytes // self.bytes_per_block

    def max_concurrency(self, num_blocks: int) -> float:
        """As the engine logs it (vLLM: num_blocks / blocks per request, null block included)."""
        return num_blocks / self.blocks_per_request

    def requests_that_fit(self, num_blocks: int) -> int:
        """Whole requests at ``context`` that the usable blocks hold."""
        return max(0, num_blocks - self.null_blocks) // self.blocks_per_request

    def cache_tokens(self, num_blocks: int) -> int:
        """vLLM's "GPU KV cache size: N tokens" = int(concurrency * max_model_len)."""
        return int(self.max_concurrency(num_blocks) * self.context)

    def fits_one(self, pool_bytes: int) -> bool:
        """vLLM's start-up check: one request's blocks fit in the pool less the null block."""
        return self.per_request_bytes <= pool_bytes - self.null_blocks * self.bytes_per_block

    def max_context(self, pool_bytes: int, concurrency: int = 1, limit: int | None = None) -> int:
        """Longest max_model_len (<= limit, default the plan's context) at which ``concurrency`` requests
        fit in the pool's usable blocks; 0 when not even one token does."""
        usable = pool_bytes // self.bytes_per_block - self.null_blocks
        hi = self.context if limit is None else limit
        lo, best = 1, 0
        while lo <= hi:  # blocks per request never shrink as the context grows
            mid = (lo + hi) // 2
            if concurrency * self.blocks_at(mid) <= usable:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def tensors(self, num_blocks: int) -> tuple[PlanTensor, ...]:
        """The views of one shared ``uint8[num_blocks * bytes_per_block]`` buffer, as the engine lays them
        (vLLM kv_cache_planning.py get_kv_cache_config_from_groups: every group aliases the buffer from
        byte 0; block-outermost: each block holds every layer's page side by side; layer-outermost: each
        layer owns a slab of num_blocks pages)."""
        if self.layout is Layout.EXACT:
            raise KvcalcError("engine: the exact engine has no block pool to lay out; use the vllm engine",
                              param="engine")
        out = []
        for g in self.groups:
            offset = 0
            for p in g.pages:
                layers = tuple(layer for layer, c in g.members if c == p.component)
                if self.layout is Layout.BLOCK_OUTERMOST:
                    t = PlanTensor(g.index, p.component, layers, p.page_bytes, p.real_page_bytes, offset,
                                   p.page_bytes, self.bytes_per_block, num_blocks)
                    offset += p.count * p.page_bytes
                else:
                    t = PlanTensor(g.index, p.component, layers, p.page_bytes, p.real_page_bytes, offset,
                                   p.page_bytes * num_blocks, p.page_bytes, num_blocks)
                    offset += p.count * p.page_bytes * num_blocks
                out.append(t)
        return tuple(out)

    def pages_json(self) -> list[dict]:
        return [
            {
                "group": g.index,
                "kind": g.kind_name,
                "components": list(g.components),
                "layers": list(g.layers),
                "block_size": g.block_size,
                "page_bytes": g.page_bytes,
                "real_page_bytes": g.real_page_bytes,
                "blocks_per_request": g.blocks_per_request,
                "reserved_bytes_per_request": g.blocks_per_request * self.bytes_per_block,
                "analytic_bytes_per_request": g.analytic_bytes,
                "layer_pages": [p.to_json() for p in g.pages],
            }
            for g in self.groups
        ]


