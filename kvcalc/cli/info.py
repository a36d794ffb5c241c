"""Commands that list and show (`gpus`, `models`, `show`, `schema`, `claims`)."""

from __future__ import annotations

from typing import Optional

import typer

from ..present.outputs import OUTPUTS

from ..errors import KvcalcError
from .app import command, console, hf_option, json_option, model_arg, print_json
from .files import one_model


@command("gpus")
def gpus_cmd(as_json: bool = json_option()) -> None:
    """List the accelerators `capacity --gpu` knows, with the memory each reports and its source."""
    from ..hardware import catalogue
    from ..present.gpus import render_gpus

    cat = catalogue()
    if as_json:
        print_json([g.__dict__ for g in cat.values()])
        return
    render_gpus(console(), list(cat.values()))


@command("models")
def models_cmd(as_json: bool = json_option()) -> None:
    """List the shipped model configs."""
    from ..config import config_names, load_model
    from ..present.models import model_json, render_models

    specs = [load_model(n) for n in config_names()]
    if as_json:
        print_json([model_json(m) for m in specs])
        return
    render_models(console(), specs)


@command("show")
def show_cmd(model: Optional[str] = model_arg(), hf: Optional[str] = hf_option(),
             as_json: bool = json_option()) -> None:
    """Show a model's resolved layout: components, formats per precision, layer by layer, with sources."""
    from ..config import load_model
    from ..present.models import model_json, render_show

    spec = load_model(one_model(model, hf))
    if as_json:
        print_json(model_json(spec, full=True))
        return
    render_show(console(), spec)


@command("schema")
def schema_cmd(
    output: Optional[str] = typer.Option(
        None, "--output", metavar="COMMAND", help="Print the JSON Schema of this command's --json output instead "
        f"({', '.join(OUTPUTS)}; docs/json-output.md describes each)."),
    as_json: bool = json_option("Print JSON (the only form; accepted for symmetry)."),
) -> None:
    """Print the JSON Schema of the model config format (docs/config-format.md explains it), or with --output
    COMMAND of that command's --json output."""
    if output is None:
        from ..config import json_schema

        print_json(json_schema())
        return
    from ..present.schemas import output_schema

    print_json(output_schema(output.strip()))


@command("claims")
def claims_cmd(
    file: Optional[str] = typer.Option(None, "--file", help="Claims file (default: the shipped claims.yaml)."),
    as_json: bool = json_option(),
) -> None:
    """Check every published number in the shipped claims.yaml; exit 1 if any misses its tolerance."""
    from .. import claims as claims_mod
    from ..present.claims import render_claims

    if file is not None and not file.strip():
        raise KvcalcError("--file: empty path")
    results = claims_mod.check(file)
    if as_json:
        print_json([r.to_dict() for r in results])
    else:
        render_claims(console(), results)
    if any(r.missed for r in results):
        raise typer.Exit(1)
