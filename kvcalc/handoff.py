"""What an engine's prefill/decode connector moves for one request: the low-level types each engine's
``transfer_groups`` builds (:class:`TransferPlan`, one :class:`TransferGroup` per cache group) and the helpers for
them. The command's function, the links and the answer (:mod:`kvcalc.transfer`) are built on these; the engines
import only this module, so no arrow runs from an engine back up to the command. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import KvcalcError


@dataclass(frozen=True)
class TransferGroup:
    """One cache group's share of the transfer."""

    index: int
    kind: str  # the plan's kind name: "full", "window 128", "state", "exact"
    label: str  # its components
    layers: int
    unit: str  # "block", "page", "state slot" or "bytes"
    unit_tokens: int  # tokens per block / page (0 for a state slot or exact bytes)
    units: int  # blocks / pages moved (1 for a state slot)
    unit_bytes: int  # bytes one unit moves, all the group's layers (padded pages where the engine pads)
    rule: str  # how ``units`` follows from the prompt

    @property
    def bytes(self) -> int:
        return self.units * self.unit_bytes

    def to_json(self) -> dict:
        return dict(self.__dict__) | {"bytes": self.bytes}


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for whole numbers: blocks or pages that ``a`` tokens take."""
    return -(-a // b)


def by_kind(p, unit: str, full, window, state_rule: str, chunk=None) -> tuple[TransferGroup, ...]:
    """The plan's groups as an engine's connector moves them: ``full(block)``, ``window(block, W)`` and
    ``chunk(block, C)`` give (units, rule) for a full-attention, a sliding-window and a chunked local attention
    group of ``block``-token units of the group's whole (padded) pages; a state group moves one slot at its real
    bytes."""
    from .pool import GroupKind

    out = []
    for g in p.groups:
        if g.kind is GroupKind.STATE:
            out.append(TransferGroup(g.index, g.kind_name, g.label, len(g.layers), "state slot", 0, 1,
                                     g.real_page_bytes, state_rule))
            continue
        if g.kind is GroupKind.CHUNK and chunk is None:
            raise KvcalcError(f"{p.engine}: kvcalc does not model how its connector moves chunked local attention "
                              f"(group {g.index})")
        units, rule = full(g.block_size) if g.kind is GroupKind.FULL else \
            chunk(g.block_size, g.window) if g.kind is GroupKind.CHUNK else window(g.block_size, g.window)
        out.append(TransferGroup(g.index, g.kind_name, g.label, len(g.layers), unit, g.block_size, units,
                                 g.page_bytes, rule))
    return tuple(out)


@dataclass(frozen=True)
class TransferPlan:
    """What an engine's connector moves for one request (one rank)."""

    groups: tuple[TransferGroup, ...]
    tokens_moved: int  # prompt tokens whose cache moves (vLLM leaves the last to the decoder for Mamba hybrids)
    aux_bytes: int  # per-request metadata the connector sends beside the cache
    notes: tuple[str, ...]
    #: what the plan's per-request figure is: the blocks / pages a request reserves, or (a pool sized by a price
    #: per token) what its tokens are priced at
    reserved_as: str = "reserves"
    #: how the engine moves the cache, what ``aux_bytes`` are, and the basis, where not a prefill/decode connector's
    moved: str = "handed from prefill to decode"
    aux_label: str = "first token, logprobs, hidden row"
    basis: str | None = None


