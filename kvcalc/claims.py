"""Recompute every published number in the shipped claims (kvcalc/data/claims.yaml) and compare within its stated tolerance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import KvcalcError, quote
from .estimate import estimate
from .config import load_model
from .formats import get_format
from .paths import claims_file
from .units import UNIT_BYTES, parse_tokens
from .vec import Ints
from .yamlio import load_yaml

#: the two contexts between which ``per_token_layer`` measures the slope: past every window and a multiple
#: of every compression ratio, so the slope is exact
_SLOPE_FROM, _SLOPE_TO = 1 << 20, 1 << 21
UNITS = set(UNIT_BYTES) | {"x", "%", "entries", "layers"}
CLAIM_KEYS = {"id", "claim", "source", "quote", "published", "unit", "basis", "compute", "tolerance", "note",
              "comparable"}


def _finite(v) -> bool:
    """A real number that floats can hold: huge YAML integers (10**400) would overflow the comparison."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return abs(v) < 10**300 if isinstance(v, int) else math.isfinite(v) and abs(v) < 1e300


@dataclass(frozen=True)
class ClaimResult:
    id: str
    claim: str
    source: str
    quote: str
    basis: str
    published: float
    unit: str
    computed: float
    tolerance: dict
    passed: bool | None  # None: not comparable (the published figure measures something kvcalc does not price)
    comparable: bool = True

    @property
    def missed(self) -> bool:
        return self.passed is False

    def _fmt(self, v: float) -> str:
        text = f"{v:,.4f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):,}"
        if self.unit in ("%", "x"):
            return f"{text}{self.unit}"
        unit = self.unit[:-1] if self.unit in ("entries", "layers") and v == 1 else self.unit
        return f"{text} {'entry' if unit == 'entrie' else unit}"

    def published_text(self) -> str:
        return self._fmt(self.published)

    def computed_text(self) -> str:
        return self._fmt(self.computed)

    def tolerance_text(self) -> str:
        if not self.comparable:
            return "n/a"
        if "abs" in self.tolerance:
            return "exact" if self.tolerance["abs"] == 0 else f"±{self.tolerance['abs']:g}"
        return f"±{self.tolerance['rel']:.0%}"

    def to_dict(self) -> dict:
        return {
            "id": self.id, "claim": self.claim, "source": self.source, "quote": self.quote, "basis": self.basis,
            "published": self.published, "unit": self.unit, "computed": self.computed,
            "tolerance": self.tolerance, "passed": self.passed, "comparable": self.comparable,
        }


class _Evaluator:
    """Evaluates one claim's ``compute`` tree; every argument is type-checked, every error names the claim."""

    def __init__(self, where: str):
        self.where = where

    def err(self, msg: str) -> KvcalcError:
        return KvcalcError(f"{self.where}: {msg}")

    def args(self, spec: Any, op: str, required: set[str], optional: set[str] = frozenset()) -> dict:
        if not isinstance(spec, dict):
            raise self.err(f"compute.{op}: must be a mapping of arguments")
        missing = required - set(spec)
        unknown = set(map(str, spec)) - required - set(optional)
        if missing:
            raise self.err(f"compute.{op}: missing argument(s) {sorted(missing)}")
        if unknown:
            raise self.err(f"compute.{op}: unknown argument(s) {sorted(unknown)}")
        return spec

    def name(self, a: dict, key: str, op: str) -> str:
        value = a[key]
        if not isinstance(value, str) or not value:
            raise self.err(f"compute.{op}.{key}: must be a name (a string), got {quote(value)}")
        return value

    def integer(self, a: dict, key: str, op: str, default: int | None = None) -> int:
        value = a.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.err(f"compute.{op}.{key}: must be an integer, got {quote(value)}")
        return value

    def tokens(self, a: dict, op: str) -> int:
        value = a["context"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise self.err(f"compute.{op}.context: must be a token count such as 1M or 131072, got {quote(value)}")
        return parse_tokens(str(value), f"{self.where}: compute.{op}.context")

    def model(self, a: dict, op: str):
        try:
            return load_model(self.name(a, "model", op), f"{self.where}: compute.{op}.model")
        except KvcalcError as exc:
            if str(exc).startswith(self.where):
                raise
            raise self.err(f"compute.{op}.model: {exc}") from None

    def estimate(self, a: dict, op: str, contexts: list[int], mtp: bool = False):
        try:
            return estimate(self.model(a, op), contexts, precision=self.name(a, "precision", op),
                            basis=self.name(a, "basis", op), mtp=mtp, what=f"compute.{op}.precision",
                            numpy=False)
        except KvcalcError as exc:
            if str(exc).startswith(self.where):
                raise
            raise self.err(str(exc)) from None

    def __call__(self, compute: Any) -> float:
        if not isinstance(compute, dict) or len(compute) != 1:
            raise self.err("compute: must be a mapping with exactly one operation")
        (op, spec), = compute.items()
        if op == "sequence":
            a = self.args(spec, op, {"model", "context", "precision", "basis"}, {"mtp"})
            mtp = a.get("mtp", False)
            if not isinstance(mtp, bool):
                raise self.err(f"compute.sequence.mtp: must be true or false, got {quote(mtp)}")
            return float(self.estimate(a, op, [self.tokens(a, op)], mtp).per_sequence[0])
        if op in ("layer", "per_token_layer"):
            req = {"model", "kind", "precision", "basis"} | ({"context"} if op == "layer" else set())
            a = self.args(spec, op, req)
            kind = self.name(a, "kind", op)
            contexts = [self.tokens(a, op)] if op == "layer" else [_SLOPE_FROM, _SLOPE_TO]
            e = self.estimate(a, op, contexts)
            layer = next((lay for lay in e.layers if lay.kind == kind), None)
            if layer is None:
                raise self.err(f"compute.{op}.kind: model {a['model']} has no layer of kind {quote(kind)}")
            if op == "layer":
                return float(layer.bytes[0])
            return float(layer.bytes[1] - layer.bytes[0]) / (_SLOPE_TO - _SLOPE_FROM)
        if op == "entries":
            a = self.args(spec, op, {"model", "component", "context"})
            model = self.model(a, op)
            comp = model.components.get(self.name(a, "component", op))
            if comp is None:
                raise self.err(f"compute.entries.component: model {a['model']} has no component {quote(a['component'])}")
            return float(comp.entries(Ints([self.tokens(a, op)]))[0])
        if op == "entry_bytes":
            a = self.args(spec, op, {"format", "dim"}, {"rope_dim"})
            fmt = get_format(self.name(a, "format", op), f"{self.where}: compute.entry_bytes.format")
            dim, rope = self.integer(a, "dim", op), self.integer(a, "rope_dim", op, 0)
            return float(fmt.entry_bytes(dim, rope, f"{self.where}: compute.entry_bytes"))
        if op == "layers":
            a = self.args(spec, op, {"model", "kind"})
            model = self.model(a, op)
            kind = self.name(a, "kind", op)
            if kind not in model.layer_kinds:
                raise self.err(f"compute.layers.kind: model {a['model']} has no layer kind {quote(kind)}")
            return float(model.layers.count(kind))
        if op == "decode_read":
            from .decode import decode

            a = self.args(spec, op, {"model", "context", "precision"})
            try:
                d = decode(self.model(a, op), self.tokens(a, op), precision=self.name(a, "precision", op))
            except KvcalcError as exc:
                raise self.err(f"compute.decode_read: {exc}") from None
            return float(d.read_bytes_per_token)
        if op == "ratio":
            a = self.args(spec, op, {"num", "den"})
            den = self(a["den"])
            if den == 0:
                raise self.err("compute.ratio: the denominator is zero")
            return self(a["num"]) / den
        raise self.err(
            f"compute: unknown operation {quote(op)}; one of: sequence, layer, per_token_layer, entries, entry_bytes, layers, "
            "decode_read, ratio"
        )


def _check_one(raw: Any, index: int, path: str, sources: dict) -> ClaimResult:
    where = f"{path}: claims[{index}]"
    if not isinstance(raw, dict):
        raise KvcalcError(f"{where}: must be a mapping")
    cid = str(raw.get("id", index))
    where = f"{path}: claim {cid}"
    unknown = set(raw) - CLAIM_KEYS
    if unknown:
        raise KvcalcError(f"{where}: unknown key(s) {sorted(unknown)}")
    for key in ("id", "claim", "source", "quote", "published", "unit", "compute", "tolerance"):
        if key not in raw:
            raise KvcalcError(f"{where}.{key}: missing required key")
    unit = str(raw["unit"])
    if unit not in UNITS:
        raise KvcalcError(f"{where}.unit: unknown unit {quote(unit)}; one of: {', '.join(sorted(UNITS))}")
    published = raw["published"]
    if not _finite(published):
        raise KvcalcError(f"{where}.published: must be a finite number below 1e300, got {quote(published)}")
    for key in ("claim", "quote", "basis"):
        if key in raw and not isinstance(raw[key], str):
            raise KvcalcError(f"{where}.{key}: must be text, got {quote(raw[key])}")
    tol = raw["tolerance"]
    if not isinstance(tol, dict) or len(tol) != 1 or not set(tol) <= {"abs", "rel"}:
        raise KvcalcError(f"{where}.tolerance: must be {{abs: N}} or {{rel: r}}")
    (tkind, tval), = tol.items()
    if not _finite(tval) or tval < 0:
        raise KvcalcError(f"{where}.tolerance.{tkind}: must be a finite non-negative number below 1e300")
    if not isinstance(raw["source"], str) or raw["source"] not in sources:
        raise KvcalcError(f"{where}.source: {quote(raw['source'])} is not listed under sources")

    comparable = raw.get("comparable", True)
    if not isinstance(comparable, bool):
        raise KvcalcError(f"{where}.comparable: must be true or false, got {quote(comparable)}")
    if not comparable and not str(raw.get("basis", "")).strip():
        raise KvcalcError(f"{where}.basis: a claim that is not comparable must say why in its basis")
    value = _Evaluator(where)(raw["compute"])
    if unit in UNIT_BYTES:
        value /= UNIT_BYTES[unit]
    elif unit == "%":
        value *= 100
    limit = tval if tkind == "abs" else tval * abs(published)
    passed = abs(value - published) <= limit + 1e-12 * max(1.0, abs(published)) if comparable else None
    return ClaimResult(
        id=cid, claim=str(raw["claim"]), source=sources[str(raw["source"])], quote=str(raw["quote"]),
        basis=str(raw.get("basis", "")), published=float(published), unit=unit, computed=float(value),
        tolerance={tkind: tval}, passed=passed, comparable=comparable,
    )


def check(path: str | Path | None = None) -> list[ClaimResult]:
    path = claims_file() if path is None else Path(path)
    data = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or not data["claims"]:
        raise KvcalcError(f"{path}: must be a mapping with a non-empty 'claims' list")
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise KvcalcError(f"{path}: sources: must be a mapping")
    results = [_check_one(c, i, str(path), {str(k): str(v) for k, v in sources.items()}) for i, c in enumerate(data["claims"])]
    ids = [r.id for r in results]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:
        raise KvcalcError(f"{path}: claim id {quote(dup)} appears twice")
    return results
