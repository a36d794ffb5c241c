"""`estimate` and `compare`: exact bytes per sequence."""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import KvcalcError
from .app import (CONTEXT_HELP, ENGINE_HELP, HF_MANY_HELP, PRECISION_HELP, basis_option, command, console,
                  hf_option, json_option, print_json, warn)
from .files import hf_path


def _estimates(models, contexts, precisions, basis, batch, mtp, what="MODEL"):
    from ..estimate import estimate
    from ..config import load_model

    from ..vec import SMALL

    out = []
    for name in models:
        model = load_model(name, what)
        wanted = precisions or [model.default_precision]
        if "all" in wanted:
            wanted = list(model.precisions)
        for p in wanted:
            out.append(estimate(model, contexts, precision=p, basis=basis, batch=batch, mtp=mtp,
                                numpy=len(contexts) > SMALL))  # numpy only where vectors pay
    return out


@command("estimate")
def estimate_cmd(
    models: Optional[List[str]] = typer.Argument(
        None, metavar="[MODEL]...", help="Config names (see `kvcalc models`) or YAML paths. None: the headline comparison."
    ),
    context: List[str] = typer.Option(["1M"], "--context", "-c", help=CONTEXT_HELP),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    basis: str = basis_option(),
    batch: int = typer.Option(1, "--batch", "-b", help="Concurrent sequences, each at the full context."),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s) (speculative decoding on)."),
    by_layer: bool = typer.Option(False, "--by-layer", help="One row per layer instead of per layer kind."),
    vs: Optional[str] = typer.Option(None, "--vs", help="Reference model for the ratio column."),
    hf: Optional[str] = hf_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: a list, one object per model, precision and context."),
    compact: bool = typer.Option(False, "--compact", help="With --json: one object per model and precision, contexts "
                                 "as columns, bytes per layer kind instead of per layer (fast for many contexts)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Also what this engine reserves for one request at "
                                         f"each context, with its own defaults ({ENGINE_HELP})."),
) -> None:
    """KV cache bytes per sequence at a context length, with a per-layer breakdown and its basis."""
    from ..present import estimate as P
    from ..units import parse_token_list
    from ..zoo import HEADLINE_MODELS, HEADLINE_REFERENCE

    if compact and not as_json:
        raise KvcalcError("--compact: only with --json")
    if engine is not None and compact:
        raise KvcalcError("--engine: not with --compact (one object per context carries the engine's figures)")
    contexts = parse_token_list(context)
    if hf is not None:
        models = [*(models or []), hf_path(hf)]
    headline = not models
    if headline:
        models = list(HEADLINE_MODELS)
        vs = vs or HEADLINE_REFERENCE
        precision = precision or ["all"]
    results = _estimates(models, contexts, precision, basis, batch, mtp)
    # the reference is counted on the same basis, batch and MTP setting as the rows it is compared with
    refs = _estimates([vs], contexts, ["all"], basis, batch, mtp, what="--vs") if vs else []
    warn(dict.fromkeys(w for r in results + refs for w in r.warnings))
    reserved = _engine_requests(engine, results, mtp) if engine is not None else None
    if as_json:
        if compact:
            print_json([r.to_columns() for r in results])
            return
        out = P.estimates_json(results, refs)
        for d, one in zip(out, reserved or ()):
            d["engine"] = one
        print_json(out)
        return
    con = console()
    single = not headline and len(models) == 1 and len(results) == 1 and not refs
    if not single:
        P.render_summary(con, results, refs, headline=headline)
    if by_layer:
        for r in results:
            P.render_layers(con, r)
    elif not headline and len(models) == 1:
        for r in results:
            P.render_kinds(con, r)
    if reserved:
        P.render_engine_requests(con, results, reserved)


def _engine_requests(engine: str, results, mtp: bool) -> list[dict]:
    """What ``engine`` reserves for one request of each estimate's model, precision and context (its plan with its
    own defaults on one rank), in the order of estimates_json's objects."""
    from ..engines import get_engine
    from ..plan import plan

    eng = get_engine(engine)
    out = []
    for r in results:
        for ctx in r.contexts:
            p = plan(r.model, int(ctx), precision=r.precision, engine=eng.name, mtp=mtp,
                     settings=dict(eng.single_request) or None)
            f = p.figures()
            one = {"name": eng.name, "version": eng.version, "request_bytes": int(p.per_request_bytes),
                   "exact_bytes": int(p.analytic_bytes), "layout": f.layout, "unit_bytes": f.unit_bytes,
                   "units_per_request": f.units_per_request, "basis": f.grouping, "notes": list(p.notes)}
            one.update(eng.request_figures(p))
            out.append(one)
    return out


@command("compare")
def compare_cmd(
    model_a: Optional[str] = typer.Argument(None, metavar="A", show_default=False),
    model_b: Optional[str] = typer.Argument(None, metavar="B", show_default=False),
    hf: Optional[List[str]] = typer.Option(None, "--hf", help=HF_MANY_HELP + " Fills B, or A and B when repeated."),
    context: List[str] = typer.Option(["1M"], "--context", "-c", help=CONTEXT_HELP),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision for both (default: each model's own)."),
    precision_b: Optional[str] = typer.Option(None, "--precision-b", help="Precision for B when it differs from A's."),
    basis: str = basis_option(),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s)."),
    as_json: bool = json_option(),
) -> None:
    """Compare two models (or two precisions of one) context by context."""
    from ..estimate import estimate
    from ..present import estimate as P
    from ..units import parse_token_list

    contexts = parse_token_list(context)
    from ..config import load_model

    from ..vec import SMALL

    vectors = len(contexts) > SMALL  # numpy only where vectors pay
    names = [m for m in (model_a, model_b) if m is not None] + [hf_path(h) for h in hf or []]
    if len(names) != 2:
        raise KvcalcError(f"A: compare takes two models (A and B, or --hf for either), got {len(names)}")
    model_a, model_b = names
    a = estimate(load_model(model_a, "A"), contexts, precision=precision, basis=basis, mtp=mtp, numpy=vectors)
    b = estimate(load_model(model_b, "B"), contexts, precision=precision_b or precision, basis=basis, mtp=mtp,
                 what="--precision-b" if precision_b else "--precision", numpy=vectors)
    warn(dict.fromkeys(a.warnings + b.warnings))
    if as_json:
        print_json(P.compare_json(a, b))
        return
    P.render_compare(console(), a, b)
