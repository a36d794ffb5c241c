"""Capacity under a real workload (`capacity --request-tokens T --shared-prefix-tokens S`): requests hold the
tokens they have, not ``max_model_len`` (vLLM allocates blocks as tokens arrive; max_model_len only caps a
request), and a prefix every request shares is held once where the engine's prefix caching shares it.

Each engine counts a request's cost at T tokens its own way (``Engine.workload_cost``); here the costs of the
requests' lengths (one length, or a distribution: one a line in a file) become the requests that run at once:
``(pool - shared) // mean cost``, the shared part counted once. A distribution's concurrency uses the mean of the
costs, not the cost of the mean length: block and page rounding make them differ. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import KvcalcError

MAX_LENGTHS = 1_000_000


@dataclass(frozen=True)
class WorkloadFigures:
    """The count under a workload (capacity's JSON ``workload``): a request's own cost in the engine's unit, the
    shared part held once, each per-replica limit and the one that binds, and what fits at the full context."""

    request_tokens: int | None  # the one length (None: a distribution)
    request_lengths: int
    mean_request_tokens: float
    shared_prefix_tokens: int
    unit: str
    cost_per_request: float
    shared_cost: int
    limits: dict
    limited_by: str
    requests_at_context: int

    def to_json(self) -> dict:
        return {"request_tokens": self.request_tokens, "request_lengths": self.request_lengths,
                "mean_request_tokens": self.mean_request_tokens, "shared_prefix_tokens": self.shared_prefix_tokens,
                "unit": self.unit, "cost_per_request": self.cost_per_request, "shared_cost": self.shared_cost,
                "limits": self.limits, "limited_by": self.limited_by, "requests_at_context": self.requests_at_context}


@dataclass(frozen=True)
class Cost:
    """One request's cost at T tokens in the engine's unit (blocks, tokens, bytes), and the part of it shared."""

    unit: str  # "blocks", "tokens", "bytes"
    per_request: int  # the request's own (unshared) cost
    shared: int  # what every request shares, held once
    limits: dict  # other per-replica caps the engine keeps (max_running_requests, the SWA pool): name -> requests


class Lengths(tuple):
    """Request lengths read from a file: a tuple of token counts that remembers the file and line of each, so a
    length the plan refuses is named where the user wrote it (``lengths.txt:7``), not by a parameter."""

    source: str
    line_numbers: tuple[int, ...]

    def __new__(cls, values, source: str, line_numbers):
        self = super().__new__(cls, values)
        self.source, self.line_numbers = source, tuple(line_numbers)
        return self

    def where(self, i: int) -> str:
        return f"{self.source}:{self.line_numbers[i]}"


def where(lengths, i: int, param: str = "request_tokens") -> tuple[str, str | None]:
    """How an error names length ``i``: its file and line where it came from a file (no parameter), else the
    parameter (``request_tokens``, which the command line shows as its flag)."""
    if isinstance(lengths, Lengths):
        return lengths.where(i), None
    return param, param


def _lines(text: str):
    """The lines of ``text`` one at a time (split at \\n; a \\r before it is stripped with the spaces)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield text[start:end]
        start = end + 1


def read_lengths(text: str, source: str) -> Lengths:
    """Request lengths, one a line (blank lines and # comments skipped); each a token count."""
    from .units import parse_tokens

    out, lines = [], []
    # line by line, not splitlines(): a 64 MiB file of short lines would be tens of millions of strings at once
    for no, line in enumerate(_lines(text), 1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        if len(out) >= MAX_LENGTHS:
            raise KvcalcError(f"{source}: more than {MAX_LENGTHS:,} lengths; sample the distribution")
        out.append(parse_tokens(item, f"{source}:{no}"))
        lines.append(no)
    if not out:
        raise KvcalcError(f"{source}: no request lengths (one token count a line)")
    return Lengths(out, source, lines)


def apply(eng, plans, pool: int, settings, parallel, fit, lengths: list[int], shared: int, context: int):
    """The Fit with ``requests_per_replica`` for this workload, its lines and its JSON."""
    for i, t in enumerate(lengths):
        if t > context:
            name, param = where(lengths, i)
            raise KvcalcError(f"{name}: a request of {t:,} tokens is longer than the context, {context:,} "
                              "({{context}}: max_model_len caps a request)", param=param)
    if shared < 0 or shared > min(lengths):
        raise KvcalcError(f"shared_prefix_tokens: a prefix of {shared:,} tokens is longer than the shortest request "
                          f"({min(lengths):,} tokens); it must be from 0 to that", param="shared_prefix_tokens")
    best = None
    for p in plans:
        costs = [eng.workload_cost(p, pool, settings, fit, t, shared) for t in lengths]
        unit, sh = costs[0].unit, costs[0].shared
        room = eng.workload_room(p, pool, fit) - sh
        mean = sum(c.per_request for c in costs) / len(costs)
        n = int(room // mean) if room > 0 and mean > 0 else 0
        limits = {"pool": n, **costs[0].limits}
        stage = min(limits.values())
        if best is None or stage < best[0]:
            best = (stage, limits, unit, sh, mean, room)
    n, limits, unit, sh, mean, room = best
    binding = min(limits, key=lambda k: limits[k])
    lengths_text = (f"{lengths[0]:,} tokens" if len(set(lengths)) == 1 else
                    f"{len(lengths):,} lengths, mean {sum(lengths) / len(lengths):,.1f} tokens")
    line = (f"Workload: requests of {lengths_text} (max_model_len {context:,} caps them), a request costing "
            f"{mean:,.2f} {unit} of its own" + (f", the {shared:,}-token shared prefix held once ({sh:,} {unit})"
                                                if shared else "")
            + f": {n:,} run at once per replica (" + ", ".join(f"{k} {v:,}" for k, v in limits.items())
            + f"; the {binding} binds).")
    figures = WorkloadFigures(lengths[0] if len(lengths) == 1 else None, len(lengths), sum(lengths) / len(lengths),
                              shared, unit, mean, sh, limits, binding, fit.requests_per_replica)
    return replace(fit, requests_per_replica=n, lines=fit.lines + (line,), workload=figures)
