"""Commands that read and write files (`import-hf`, `sweep`, `plot`, `report`), and the model arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import KvcalcError, quote
from ..textout import write as write_out
from .app import HF_MANY_HELP, PRECISION_HELP, basis_option, command, print_json, warn


def hf_path(hf: str) -> str:
    """--hf names a config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub when
    it is installed); load_model imports the file."""
    from ..config.hf import locate

    path = locate(hf)
    p = Path(path)
    if not p.exists():  # a local name that is not there: said here, under the flag the user typed
        raise KvcalcError(f"--hf: no such config file {quote(hf)}")
    if not (path.endswith(".json") or (p.is_dir() and (p / "config.json").is_file())):  # locate checked the path
        raise KvcalcError(f"--hf: {quote(hf)} is neither a config.json nor a folder holding one")
    return path


def models_and_hf(models: Optional[List[str]], hf: Optional[List[str]]) -> list[str]:
    """MODEL... plus every --hf, in that order; at least one."""
    out = [*(models or []), *(hf_path(h) for h in hf or [])]
    if not out:
        raise KvcalcError("MODEL: give at least one model (a name, a YAML path or a config.json) or --hf")
    return out


def one_model(model: Optional[str], hf: Optional[str]) -> str:
    if (model is None) == (hf is None):
        raise KvcalcError("MODEL: give a model (a name or a YAML path) or --hf CONFIG.json, one of the two")
    return model if model is not None else hf_path(hf)


@command("import-hf")
def import_hf_cmd(
    config: str = typer.Argument(..., metavar="CONFIG", help="A Hugging Face config.json, a folder holding one, or a hub id org/name (needs huggingface_hub and the network, or its cache)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the YAML here (atomically); default: stdout."),
    name: Optional[str] = typer.Option(None, "--name", help="Model name (default: the output file's stem, else the config's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the config as JSON ({output, config}) instead of YAML."),
) -> None:
    """Turn a Hugging Face config.json into a kvcalc model config, every value citing its field."""
    from ..config.hf import import_config, locate, read_config

    data, file = read_config(locate(config, "CONFIG"))
    if name is None and output:
        name = Path(output).stem
    _emit_config(import_config(data, file, name), file, output, as_json)


def _emit_config(cfg: dict, file: str, output: str | None, as_json: bool,
                 made_by: str = "`kvcalc import-hf` from a Hugging Face config.json") -> None:
    """An imported config, checked by the loader before anything is written, to ``output`` and / or stdout."""
    from ..config import parse_model
    from ..config.hf import to_yaml

    parse_model(cfg, file)  # the loader's own checks, before anything is written
    text = to_yaml(cfg, made_by)
    if output:
        write_atomic(output, text, "--output")
        print(f"kvcalc: wrote {output} ({cfg['name']}: {cfg['description']})", file=sys.stderr)
    if as_json:
        print_json({"output": output, "config": cfg})
    elif not output:
        write_out(text)


@command("import-gguf")
def import_gguf_cmd(
    file: str = typer.Argument(..., metavar="FILE.gguf", help="A GGUF file (its header is read; a metadata-only GGUF will do)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the YAML here (atomically); default: stdout."),
    name: Optional[str] = typer.Option(None, "--name", help="Model name (default: the output file's stem, else the file's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the config as JSON ({output, config}) instead of YAML."),
) -> None:
    """Turn a GGUF's metadata into a kvcalc model config, as llama.cpp loads its layers, every value citing its key.
    (The llama.cpp engine plans best from the GGUF itself: it also reads llama.cpp's per-layer rules and the weights.)"""
    from ..config.gguf import read_gguf

    if name is None and output:
        name = Path(output).stem
    _emit_config(read_gguf(file, name, "FILE")[1], file, output, as_json, "`kvcalc import-gguf` from a GGUF file's header")


def write_atomic(path: str, text: str, flag: str) -> None:
    """The one way the CLI writes a file (:func:`kvcalc.safewrite.write_file`: exclusive temporary file,
    atomic replace, nothing left after an error)."""
    from ..safewrite import write_file

    write_file(path, text, flag)


@command("sweep")
def sweep_cmd(
    models: Optional[List[str]] = typer.Argument(None, metavar="MODEL...", help="Config names, YAML paths or config.json files."),
    hf: Optional[List[str]] = typer.Option(None, "--hf", help=HF_MANY_HELP),
    context: List[str] = typer.Option(["1k..1M"], "--context", "-c", help="Lists (4k,8k), ranges A..B (--points values, "
                                      "geometric) or A..B:STEP. Repeatable."),
    points: int = typer.Option(64, "--points", help="Values per A..B range."),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    basis: str = basis_option(),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s)."),
    fmt: str = typer.Option("csv", "--format", help="csv or json (columnar: one array per field)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write here (atomically); default: stdout."),
    as_json: bool = typer.Option(False, "--json", help="The same as --format json."),
) -> None:
    """Exact bytes per sequence over contexts x models x precisions, as a CSV or a columnar JSON."""
    import io

    from ..sweep import sweep as run_sweep, to_json, write_csv
    from .contexts import parse_contexts

    if fmt not in ("csv", "json"):
        raise KvcalcError(f"--format: choose csv or json, got {quote(fmt)}")
    if as_json:
        fmt = "json"
    contexts = parse_contexts(context, points)
    cols = run_sweep(models_and_hf(models, hf), contexts, precision, basis, mtp)
    warn(cols["warnings"])
    if fmt == "json":
        text = json.dumps(to_json(cols)) + "\n"
    else:
        buf = io.StringIO()
        write_csv(cols, buf)
        text = buf.getvalue()
    if output:
        write_atomic(output, text, "--output")
    else:
        write_out(text)


@command("plot")
def plot_cmd(
    models: Optional[List[str]] = typer.Argument(None, metavar="MODEL...", help="Config names, YAML paths or config.json files."),
    hf: Optional[List[str]] = typer.Option(None, "--hf", help=HF_MANY_HELP),
    context: List[str] = typer.Option(["4k..1M"], "--context", "-c", help="Contexts: A..B range or a list (see sweep)."),
    output: str = typer.Option(..., "--output", "-o", help="FILE.png or FILE.svg (the suffix picks the format)."),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    gpu: Optional[List[str]] = typer.Option(None, "--gpu", help="Draw this accelerator's memory (see `kvcalc gpus`). Repeatable."),
    layers: bool = typer.Option(False, "--layers", help="Per-layer stacked bars at one context instead of memory vs context."),
    decode: bool = typer.Option(False, "--decode", help="Cache bytes a decode step reads per token against context, "
                                "next to the bytes stored (kvcalc decode); default models: V3.2, V4-Pro, V4-Flash and "
                                "a GQA baseline."),
    at: Optional[str] = typer.Option(None, "--at", help="The context of --layers (default: the largest of --context)."),
    points: int = typer.Option(64, "--points", help="Values per A..B range."),
    basis: str = basis_option(),
    as_json: bool = typer.Option(False, "--json", help="Also print the numbers drawn, as JSON."),
) -> None:
    """Memory vs context on log axes (with GPU memory lines), or a per-layer stacked chart; PNG or SVG."""
    from ..config import load_model
    from .app import gpu_named
    from ..present import plot as P
    from .contexts import parse_contexts
    from ..units import parse_tokens

    fmt = P.format_of(output)
    if decode and not models and not hf:
        models = list(DECODE_MODELS)
    specs = [load_model(m) for m in models_and_hf(models, hf)]
    contexts = parse_contexts(context, points)
    if decode and (layers or gpu):
        raise KvcalcError("--decode: draws read and stored bytes against context; it takes no --layers or --gpu")
    if decode:
        if len(contexts) > 256:
            raise KvcalcError(f"--decode: {len(contexts):,} contexts; it computes each one, at most 256")
        drawn = P.decode_vs_context(specs, [int(c) for c in contexts], precision, output)
    elif layers:
        drawn = P.layers_chart(specs, parse_tokens(at, "--at") if at else int(contexts[-1]), precision, output, basis)
    else:
        drawn = P.memory_vs_context(specs, contexts, precision, [gpu_named(g) for g in gpu or []], output, basis)
    from ..estimate import context_warning
    from ..vec import as_vector

    shown = as_vector([parse_tokens(at, "--at") if at else int(contexts[-1])]) if layers else as_vector(contexts)
    warnings = [w for w in (context_warning(s, shown) for s in specs) if w]
    warn([w + " (drawn faded past it)" if not layers else w for w in warnings])
    print(f"kvcalc: wrote {output}", file=sys.stderr)
    if as_json:
        print_json({"output": output, "format": fmt, **drawn, "warnings": warnings})


#: plot --decode without models: the article's comparison and a GQA baseline of V3.2's depth
DECODE_MODELS = ("deepseek-v3.2", "deepseek-v4-pro", "deepseek-v4-flash", "gqa8-hd128-l61")


@command("report")
def report_cmd(
    out: str = typer.Option("reports", "--out", help="Folder to write (default: reports/ here)."),
    check: bool = typer.Option(False, "--check", help="Only compare the committed tables with what the code prints; exit 1 on a difference."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Also draw the plots (needs kvcalc[plot])."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written or checked, as JSON."),
) -> None:
    """Regenerate every published table and plot under reports/ (or check the committed ones)."""
    from . import reports as regen

    if check:
        checked, stale, missing = regen.check(out)
        for name in stale:
            print(f"kvcalc: {out}/{name} differs from what the code prints; run `kvcalc report`", file=sys.stderr)
        for name in missing:
            print(f"kvcalc: {out}/{name} is missing; run `kvcalc report`", file=sys.stderr)
        if as_json:
            print_json({"out": out, "checked": checked, "stale": stale, "missing": missing,
                        "match": not stale and not missing})
        if stale or missing:
            raise typer.Exit(1)
        print(f"kvcalc: {len(checked)} tables under {out}/ match the code", file=sys.stderr)
        return
    written = regen.generate(out, plots)
    if as_json:
        print_json({"out": out, "written": written})
    else:
        for path in written:
            print(f"wrote {path}")
