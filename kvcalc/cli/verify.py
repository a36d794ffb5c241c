"""`verify`: allocate the planned caches on a device, fill them, measure."""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import typer

from ..engines import DEFAULT_ENGINE
from ..errors import KvcalcError, quote

from .app import (command, console, engine_option, engine_settings, hf_option, json_option, model_arg, print_json,
                  with_engine_options)
from .files import one_model, write_atomic


@command("verify")
@with_engine_options("verify")
def verify_cmd(
    model: Optional[str] = model_arg(),
    hf: Optional[str] = hf_option(),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="max_model_len in tokens (default: 128k; "
                                          "with --headline 1M)."),
    headline: bool = typer.Option(False, "--headline", help="The article's comparison by allocation: V3.2-style "
                                  "bf16, V4-Pro bf16 and fp8 in the exact layout on the article basis, one after the "
                                  "other, measured next to the write-up's 83.9 GiB, 9.62 GiB, 8.7x, 320 and 8 MiB."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision as the model config names it."),
    engine: str = engine_option(DEFAULT_ENGINE, "The engine whose pools are allocated (for exactly --batch requests "
                                "where it sizes them per request)."),
    basis: str = typer.Option("complete", "--basis", help="With --engine exact: the estimate basis allocated "
                              "(complete: everything a request holds; article: the vLLM write-up's)."),
    batch: int = typer.Option(1, "--batch", "-b", help="Requests to allocate for."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when torch sees a GPU, else the CPU, with a "
                               "note), cuda or cpu."),
    fill: Optional[str] = typer.Option(
        None, "--fill", help="full (every layer), sample (first and last layer of each page tensor) or none "
        "(allocation only). Default: full on cuda, sample on cpu."),
    writer: Optional[str] = typer.Option(
        None, "--writer", help="triton (the kernels; on a CPU under TRITON_INTERPRET=1, slow) or torch (the "
        "reference). Default: triton on cuda, torch on cpu."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks: one process per rank, each allocating its shard."),
    report_path: Optional[str] = typer.Option(
        None, "--report", help="Also write the JSON report to this file (atomically); 'auto': reports/verify/<run>.json."),
    as_json: bool = json_option(),
    engine_values: dict = None,
) -> None:
    """Allocate the planned caches on a device, fill them as a prefill would, and compare what was allocated and
    written with the prediction."""
    from ..config import load_model
    from ..present.verify import render_verify
    from ..units import parse_tokens
    from ..verify import run as run_verify

    from ..errors import with_names
    from ..present.flags import FLAGS
    from ..verify.measure import resolve_device

    if headline:
        if basis != "complete" or any(v is not None for v in engine_values.values()):
            raise KvcalcError("--headline: allocates the exact layout on the article basis; it takes no --basis and "
                              "no engine option")
        return _headline(model, hf, engine, context, device, fill, report_path, as_json)
    spec = load_model(one_model(model, hf))
    ctx = parse_tokens(context or "128k", "--context")
    if engine != "llama.cpp":
        device, note = resolve_device(device)
        if note:
            print(f"kvcalc: note: {with_names(note, FLAGS)}", file=sys.stderr)
    settings = engine_settings(engine, engine_values, model=spec)
    if engine == "llama.cpp":
        return _llama_cpp(spec, ctx, precision, settings, batch, fill, writer, tp, basis, report_path, as_json)
    fill = fill or ("full" if device == "cuda" else "sample")
    if engine == "exact":
        from dataclasses import replace

        settings = replace(settings, basis=basis)
    elif basis != "complete":
        raise KvcalcError(f"--basis: {quote(basis)} is for --engine exact; the {engine} engine allocates its pools as it "
                          "plans them (everything a request holds)")
    out = run_verify(spec, ctx, precision=precision, engine=engine, settings=settings, batch=batch, device=device,
                     fill=fill, writer=writer, tp=tp, progress=sys.stderr.isatty() and not as_json)
    if report_path:
        if report_path == "auto":
            report_path = os.path.join("reports", "verify", f"{out.model}-{out.precision}-{ctx}-{device}-{fill}"
                                       f"{'-tp%d' % tp if tp > 1 else ''}.json")
        write_atomic(report_path, json.dumps(out.to_json(), indent=2) + "\n", "--report")
    if as_json:
        print_json(out.to_json())
    else:
        render_verify(console(), out)
    if out.verdict == "incomplete":
        print("kvcalc: interrupted: the report is marked incomplete", file=sys.stderr)
        raise typer.Exit(130)
    if out.verdict != "pass":
        raise typer.Exit(1)


def _llama_cpp(spec, ctx, precision, settings, batch, fill, writer, tp, basis, report_path, as_json) -> None:
    """`verify --engine llama.cpp`: llama.cpp itself makes the planned context (kvcalc.engines.llamacpp.real)."""
    from ..engines.llamacpp.real import run
    from ..present.verify import render_llama_cpp

    for flag, value, default in (("--batch", batch, 1), ("--fill", fill, None), ("--writer", writer, None),
                                 ("--tp", tp, 1), ("--basis", basis, "complete")):
        if value != default:
            raise KvcalcError(f"{flag}: verify --engine llama.cpp runs llama.cpp itself on its own device; it takes "
                              "no {flag} (slots: --parallel)".replace("{flag}", flag))
    out = run(spec, ctx, precision=precision, settings=settings)
    _finish(out, report_path, f"llamacpp-{out.model}-{ctx}.json", as_json, render_llama_cpp)


def _finish(out, report_path: str | None, auto_name: str, as_json: bool, render) -> None:
    """A verify answer: its report written where asked ('auto': reports/verify/NAME), printed, exit 1 unless it
    passes."""
    if report_path:
        if report_path == "auto":
            report_path = os.path.join("reports", "verify", auto_name)
        write_atomic(report_path, json.dumps(out.to_json(), indent=2) + "\n", "--report")
    if as_json:
        print_json(out.to_json())
    else:
        render(console(), out)
    if out.verdict != "pass":
        raise typer.Exit(1)


def _headline(model, hf, engine, context, device, fill, report_path, as_json) -> None:
    """`verify --headline`: the three stacks, measured next to the write-up's figures (kvcalc.verify.headline)."""
    from ..errors import with_names
    from ..present.flags import FLAGS
    from ..present.verify import render_headline
    from ..units import parse_tokens
    from ..verify.headline import headline
    from ..verify.measure import resolve_device

    if model is not None or hf is not None:
        raise KvcalcError("--headline: allocates its own models (deepseek-v3.2, deepseek-v4-pro); give no MODEL or --hf")
    if engine != "vllm":
        raise KvcalcError("--headline: allocates the exact layout on the article basis; give no --engine")
    ctx = parse_tokens(context or "1M", "--context")
    device, note = resolve_device(device)
    if note:
        print(f"kvcalc: note: {with_names(note, FLAGS)}", file=sys.stderr)
    out = headline(ctx, device, fill or ("full" if device == "cuda" else "sample"),
                   progress=sys.stderr.isatty() and not as_json)
    _finish(out, report_path, f"headline-{ctx}-{device}.json", as_json, render_headline)
