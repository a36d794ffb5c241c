"""Building a pool plan (:class:`kvcalc.pool.PoolPlan`): the exact bytes a rank holds, then the engine's layout.

The plan's types live in :mod:`kvcalc.pool`, which engines import; this module asks the engine named by
``engine`` (``kvcalc.engines``) for the layout and holds no engine facts itself. Torch-free.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .config import ModelSpec, as_model
from .engines import DEFAULT_ENGINE, get_engine
from .engines.base import PlanJob, format_differences, format_notes
from .errors import KvcalcError, quote
from .estimate import estimate, stored_component
from .pool import GroupKind, Layout, PlanGroup, PlanPage, PlanTensor, PoolPlan
from .specs import FullAttention, RecurrentState

#: more tensor-parallel ranks than this is a typo (the capacity layout's own bound)
MAX_RANKS = 4096

__all__ = ["GroupKind", "Layout", "PlanGroup", "PlanPage", "PlanTensor", "PoolPlan", "check_tp", "plan"]


# ---- building a plan ----------------------------------------------------------------------------------------
#: the exact bytes by member, kept while a search runs (:class:`kvcalc.capacity.plans_kept`); None outside one
_KEPT: dict | None = None


def _analytic_by_member(model: ModelSpec, context: int, precision: str, mtp: bool, tp: int,
                        formats: dict | None = None) -> dict:
    if _KEPT is None:
        return _analytic_by_member_now(model, context, precision, mtp, tp, formats)
    key = (id(model), context, precision, mtp, tp, tuple(sorted((formats or {}).items())))
    if key not in _KEPT:
        _KEPT[key] = (model, _analytic_by_member_now(model, context, precision, mtp, tp, formats))
    return _KEPT[key][1]


def _analytic_by_member_now(model: ModelSpec, context: int, precision: str, mtp: bool, tp: int,
                            formats: dict | None = None) -> dict:
    """Exact bytes of each (layer, component) one tp rank holds, each component in its stored format (``formats``:
    an engine's, :meth:`Engine.stored_formats`; None: the precision's): heads per rank (replicated when tp exceeds
    them), fixed state split evenly; latents whole."""
    est = estimate(model, context, precision=precision, basis="complete", mtp=mtp, numpy=False, formats=formats)
    prec = model.precision(precision)
    out = {}
    for layer in est.layers:
        for c in layer.components:
            b = int(c.bytes[0])
            spec = model.components[c.name]
            if isinstance(spec, FullAttention) and tp > 1:  # heads per rank, replicated when tp > heads
                b = b // spec.kv_heads * spec.kv_heads_on_rank(tp)
            elif isinstance(spec, RecurrentState) and tp > 1:  # channels and heads split evenly
                stored, fmt = stored_component(spec, prec, formats)
                b = stored.fixed_bytes_on_rank(fmt, tp)
            out[(layer.index, c.name)] = b
    return out


def bytes_on_rank(model: ModelSpec, context: int, precision: str, tp: int, mtp: bool = False,
                  formats: dict | None = None) -> int:
    """Exact bytes of one request's caches on one of ``tp`` ranks (as the plans count them), at the precision's
    formats or, given ``formats``, an engine's."""
    return sum(_analytic_by_member(model, context, precision, mtp, tp, formats).values())


def check_tp(model: ModelSpec, tp: int, engine: str = DEFAULT_ENGINE) -> None:
    """Refuse a tensor-parallel size the engine cannot shard ``model`` over."""
    get_engine(engine).check_tp(as_model(model), tp)


def plan(
    model: ModelSpec | str,
    context: int,
    *,
    precision: str | None = None,
    engine: str = DEFAULT_ENGINE,
    settings: Any = None,
    mtp: bool = False,
    tp: int = 1,
    stage: int | None = None,
) -> PoolPlan:
    """The pool plan of ``model`` at max_model_len ``context`` on one rank: tensor parallelism ``tp``
    splits full-attention heads; ``stage`` (with the settings' pipeline stages) keeps one stage's layers."""
    from . import args

    spec = as_model(model)
    eng = get_engine(engine)
    args.flag(mtp, "mtp")
    args.integer(stage, "stage", 0, MAX_RANKS, optional=True)
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise KvcalcError(f"context: must be a positive integer, got {quote(context)}", param="context")
    settings = eng.resolve(settings)
    kinds = set(spec.layers) | (set(spec.mtp_layers) if mtp else set())
    eng.check_kinds(spec, [c for c in spec.components if any(c in spec.layer_kinds[k] for k in kinds)])
    eng.check_context(spec, context, settings)
    prec = spec.precision(precision if precision is not None else eng.default_precision(spec, settings))
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_RANKS:
        raise KvcalcError(f"tp: must be an integer from 1 to {MAX_RANKS}, got {quote(tp)}"[:200], param="tp")
    eng.check_tp(spec, tp)
    n_layers = len(spec.layers) + (len(spec.mtp_layers) if mtp else 0)
    stage_layers = set(range(n_layers))
    if stage is not None:
        stages = eng.pp_stages(len(spec.layers), getattr(settings, "pp", 1))
        if stage >= len(stages):
            raise KvcalcError(f"stage: {stage} is not one of the {len(stages)} pipeline stage(s) (0 to "
                              f"{len(stages) - 1}) the settings give", param="stage")
        stage_layers = set(stages[stage])
        if mtp and stage == len(stages) - 1:  # the MTP layers sit after the last main layer
            stage_layers |= set(range(len(spec.layers), n_layers))

    # what the engine stores each cache in (its indexer dtype, its latent row, its state dtypes): the exact bytes a
    # request holds are counted in those formats, so that they stand beside what the engine reserves
    stored = eng.stored_formats(spec, prec, settings)
    differs = format_differences(spec, prec, stored)

    def analytic_at(ctx: int) -> dict:
        """Exact bytes of each (layer, component) this rank holds at ``ctx`` tokens, in the engine's formats."""
        by_member = _analytic_by_member(spec, ctx, prec.name, mtp, tp, differs)
        return {k: v for k, v in by_member.items() if k[0] in stage_layers}

    job = PlanJob(spec, prec, context, settings, mtp, tp, frozenset(stage_layers), analytic_at(context), analytic_at,
                  None if precision is None else prec.name, stored)  # as asked, in the model's spelling (FP8 is fp8)
    p = eng.plan(job)
    notes = precision_notes(eng, spec, prec, asked=precision is not None) + tuple(format_notes(eng, spec, prec, differs))
    return replace(p, stored_formats=stored, notes=notes + p.notes)


def precision_notes(eng, spec, prec, asked: bool) -> tuple[str, ...]:
    """Where no precision was asked and the engine's kv-cache dtype auto is not the config's default (vLLM and SGLang
    store DeepSeek V4 in fp8): say so, once, wherever the plan is shown."""
    if asked or prec.name == spec.default_precision:
        return ()
    return (f"precision {prec.name}: {eng.title}'s kv-cache dtype auto stores {spec.name} in {prec.name}, not the "
            f"config's default {spec.default_precision} ({{{{precision}}}} {spec.default_precision} plans that)",)
