"""The pool plan's types: how a serving engine lays a model's caches out in its memory.

:class:`PoolPlan` is what every engine's plan has, whatever the shape of its pools: the cache groups (or pools)
with the layers and caches each holds, the settings that shaped them, the exact bytes a request holds, what one
request reserves, and notes. Each shape of pool is a subclass that owns its own figures:

* :class:`BlockPoolPlan`: one shared pool of equal blocks that every group draws block ids from (vLLM; TensorRT-LLM
  too): the bytes one block costs, the null blocks kept back, blocks per request at a context, and the tensors
  the pool is viewed as;
* an engine's own (SGLang's token pools, the exact engine's unpaged bytes) lives in the engine's folder.

The plan's JSON figures (:meth:`PoolPlan.figures_json`) and pages (:meth:`PoolPlan.pages_json`) come from the plan
itself, so nothing reads a plan back by an engine's name. Engines (``kvcalc.engines``) supply the layout; this
module holds no engine facts. Torch-free, like the rest of the analytic core.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable



class GroupKind(str, enum.Enum):
    """What a group's blocks hold for a request."""

    FULL = "full"  # every token
    WINDOW = "window"  # a sliding window of ``PlanGroup.window`` tokens
    CHUNK = "chunk"  # chunked local attention: the current ``PlanGroup.window``-token chunk (Llama 4)
    STATE = "state"  # fixed state, whatever the context

    @property
    def local(self) -> bool:
        """A group that holds a request's last tokens only (a window or the current chunk), of
        ``PlanGroup.window`` tokens: its blocks are capped whatever the context, and reused."""
        return self in (GroupKind.WINDOW, GroupKind.CHUNK)


class Layout(str, enum.Enum):
    BLOCK_OUTERMOST = "block-outermost"  # each block holds every layer's page side by side
    LAYER_OUTERMOST = "layer-outermost"  # each layer owns a slab of num_blocks pages


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
        """'full', 'window 128', 'chunk 8192' or 'state' (the JSON's group kind; an engine's own group type may
        name its groups otherwise)."""
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


def longest_context(fits: Callable[[int], bool], limit: int) -> int:
    """The longest context from 1 to ``limit`` that ``fits`` (a request's cost never shrinks as the context grows:
    a binary search); 0 where not even one token does."""
    lo, hi, best = 1, limit, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


@dataclass(frozen=True)
class PoolFigures:
    """The figures of a plan's pool that capacity's JSON reports for every engine: its layout and how its groups
    were formed, the layers added as padding, the bytes of its unit (a block; a page; a byte), the units kept back,
    and the units one request takes."""

    layout: str
    grouping: str
    padding_layers: int
    unit_bytes: int
    null_units: int
    units_per_request: int


@dataclass(frozen=True, kw_only=True)
class PoolPlan:
    """What every engine's plan of one rank has (keyword-only; the pool's own shape is a subclass's)."""

    engine: str
    engine_version: str
    model: str
    precision: str
    context: int  # max_model_len the plan answers for
    settings: object  # the engine's settings as planned (the engine's own Settings dataclass)
    settings_json: dict  # the settings that shaped this plan, by the engine's names
    groups: tuple[PlanGroup, ...]  # the cache groups, or pools, with their layers and caches
    analytic_bytes: int  # exact bytes one request holds (complete basis), in the formats the engine stores
    notes: tuple[str, ...] = ()
    fill_chunk: int | None = None  # tokens the engine prefills per step (verify's fill chunk)
    #: component -> the format the engine stores it in (Engine.stored_formats): the formats ``analytic_bytes`` and
    #: every group's ``analytic_bytes`` count
    stored_formats: dict = field(default_factory=dict, compare=False)

    @property
    def per_request_bytes(self) -> int:
        """Bytes one request at ``context`` reserves in the engine's pools."""
        raise NotImplementedError

    @property
    def units_per_request(self) -> int:
        """The pool's units (blocks, pages, rows) one request at ``context`` takes."""
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def unit_bytes(self) -> int:
        """Bytes of the pool's unit a request is counted in (the widest group's page), for the side-by-side
        figures."""
        return max((g.page_bytes for g in self.groups), default=0)

    def units_at_context(self, context: int) -> int:
        """The units one request takes at another max_model_len (the same groups): the reverse search asks it."""
        raise NotImplementedError

    def figures(self) -> PoolFigures:
        """The plan's pool figures (:class:`PoolFigures`)."""
        raise NotImplementedError

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
                "reserved_bytes_per_request": self.group_reserve(g),
                "analytic_bytes_per_request": g.analytic_bytes,
                "layer_pages": [p.to_json() for p in g.pages],
            }
            for g in self.groups
        ]

    def group_reserve(self, g: PlanGroup) -> int:
        """Bytes one request reserves in group ``g`` (by default its units at the group's own page)."""
        return g.blocks_per_request * g.page_bytes


@dataclass(frozen=True, kw_only=True)
class BlockPoolPlan(PoolPlan):
    """One shared pool of equal blocks: every group's block table draws block ids from it, and a block id costs a
    whole pool block (the widest group's pages) in whichever group takes it (vLLM kv_cache_utils.py
    get_kv_cache_config_from_groups; TensorRT-LLM's pool likewise). The block facts live here."""

    layout: Layout
    grouping: str  # the rule that formed the groups
    padding_layers: int
    bytes_per_block: int
    null_blocks: int  # blocks the engine keeps back (vLLM's null block)
    blocks_at_context: Callable[[int], tuple[int, ...]] = field(repr=False, compare=False)  # each group's at L

    # ---- one request ------------------------------------------------------------------------------------
    @property
    def blocks_per_request(self) -> int:
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def per_request_bytes(self) -> int:
        """Bytes one request at ``context`` reserves: its blocks, each costing a whole pool block."""
        return self.blocks_per_request * self.bytes_per_block

    @property
    def unit_bytes(self) -> int:
        return self.bytes_per_block

    def group_reserve(self, g: PlanGroup) -> int:
        return g.blocks_per_request * self.bytes_per_block

    def blocks_at(self, context: int) -> int:
        """Blocks per request at another max_model_len (same groups)."""
        return sum(self.blocks_at_context(context))

    def units_at_context(self, context: int) -> int:
        return self.blocks_at(context)

    def figures(self) -> PoolFigures:
        return PoolFigures(self.layout.value, self.grouping, self.padding_layers, self.bytes_per_block,
                           self.null_blocks, self.blocks_per_request)

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
        return longest_context(lambda ctx: concurrency * self.blocks_at(ctx) <= usable,
                               self.context if limit is None else limit)

    def tensors(self, num_blocks: int) -> tuple[PlanTensor, ...]:
        """The views of one shared ``uint8[num_blocks * bytes_per_block]`` buffer, as the engine lays them
        (vLLM kv_cache_planning.py get_kv_cache_config_from_groups: every group aliases the buffer from
        byte 0; block-outermost: each block holds every layer's page side by side; layer-outermost: each
        layer owns a slab of num_blocks pages)."""
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
