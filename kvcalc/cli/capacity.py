"""`capacity`: how many requests fit on real GPUs, as the engine counts them."""

from __future__ import annotations

from typing import Optional

import typer

from ..engines import DEFAULT_ENGINE
from ..errors import KvcalcError, quote
from .app import (command, console, engine_option, engine_settings, hf_option, json_option, model_arg, print_json,
                  warn, with_engine_options)
from .files import one_model

#: GiB figures on the command line: a typo guard
MAX_GIB = 1 << 30


def _gib(value: float | None, flag: str) -> int | None:
    from ..units import GIB

    if value is None:
        return None
    if not (value == value and 0 <= value <= MAX_GIB):
        raise KvcalcError(f"{flag}: must be a number of GiB from 0 to 2^30, got {value}")
    return int(value * GIB)


REQUEST_HELP = "Tokens a running request holds (default: the context, which only caps a request)."
LENGTHS_HELP = "Request lengths, one a line: the distribution's concurrency (the mean of the costs)."
PREFIX_HELP = "A prefix every request shares, held once where the engine's prefix caching shares it."


@command("capacity")
@with_engine_options("capacity")
def capacity_cmd(
    model: Optional[str] = model_arg(),
    hf: Optional[str] = hf_option("Model and context"),
    context: Optional[str] = typer.Option(None, "--context", "-c", rich_help_panel="Model and context", help="max_model_len in tokens (default: the engine's default max_model_len / "
                                  "context_len for the model, the longest it derives except vLLM's LongRoPE default; 1M "
                                  "where the model states none; with several engines the shortest; with --concurrency "
                                  "the upper limit of the search, by default the longest the engine takes)."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", rich_help_panel="Model and context", help="Precision as the model config names it."),
    engine: str = engine_option(DEFAULT_ENGINE, "The engine that plans the pool.", panel="Model and context",
                                several=True),
    gpu: Optional[str] = typer.Option(None, "--gpu", rich_help_panel="GPUs and parallelism", help="Accelerator from `kvcalc gpus` (e.g. h200, h100, b200)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", rich_help_panel="GPUs and parallelism", help="GPUs in all; must equal tp x pp x dp (default: that product)."),
    tp: int = typer.Option(1, "--tp", rich_help_panel="GPUs and parallelism", help="Tensor-parallel ranks."),
    pp: int = typer.Option(1, "--pp", rich_help_panel="GPUs and parallelism", help="Pipeline-parallel stages."),
    dp: int = typer.Option(1, "--dp", rich_help_panel="GPUs and parallelism", help="Data-parallel replicas (vLLM's attention data parallelism for MLA models: --dp N --tp 1)."),
    ep: bool = typer.Option(False, "--ep/--no-ep", rich_help_panel="GPUs and parallelism", help="Expert parallelism: routed experts sharded over tp x dp."),
    kv_memory: Optional[str] = typer.Option(None, "--kv-memory", rich_help_panel="GPUs and parallelism", help="KV pool of each GPU: bytes, or with a unit (binary KiB/MiB/GiB/TiB, decimal kB/MB/GB/TB), like vLLM's --kv-cache-memory-bytes; replaces GPU memory, weights and reserve."),
    weights_gib: Optional[float] = typer.Option(None, "--weights-gib", rich_help_panel="GPUs and parallelism", help="Model weights in GiB, all ranks together (default: the model config's)."),
    reserve_gib: Optional[float] = typer.Option(None, "--reserve-gib", rich_help_panel="GPUs and parallelism", help="Per-GPU reserve kvcalc takes off besides the weights (default: 4 GiB for activations, workspace and CUDA graphs; 0 for sglang, whose mem_fraction_static slack holds them)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", rich_help_panel="Workload", help="Reverse: the longest context at which this many requests fit."),
    request_tokens: Optional[str] = typer.Option(None, "--request-tokens", rich_help_panel="Workload", help=REQUEST_HELP),
    request_tokens_file: Optional[str] = typer.Option(None, "--request-tokens-file", rich_help_panel="Workload", help=LENGTHS_HELP),
    shared_prefix_tokens: Optional[str] = typer.Option(None, "--shared-prefix-tokens", rich_help_panel="Workload", help=PREFIX_HELP),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", rich_help_panel="Model and context", help="Count the MTP layer(s) (speculative decoding on)."),
    as_json: bool = json_option(),
    engine_values: dict = None,
) -> None:
    """How many requests fit on real GPUs as the engine counts them: paging, shared pool, parallelism, weights."""
    from ..capacity import compare
    from ..config import load_model
    from ..present.capacity import capacity_json, engines_json, render_capacity, render_engines, reverse_text
    from ..units import parse_tokens
    from .app import gpu_named

    spec = load_model(one_model(model, hf))
    engs = _engines(engine)
    par = _parallel_for(engs, engine_values, tp, pp, dp, ep, gpus)
    dev = gpu_named(gpu) if gpu is not None else None
    owned = {o.name for e in engs for o in e.options}
    for name, v in engine_values.items():
        if v is not None and name not in owned:  # the first engine names the owner in its refusal
            engine_settings(engs[0].name, {name: v})
    settings = {e.name: engine_settings(e.name, {k: v for k, v in engine_values.items()
                                                 if k in {o.name for o in e.options}}, gpu=dev, model=spec)
                for e in engs}
    side = compare(spec, engs, settings=settings, concurrency=concurrency,
                   context=parse_tokens(context, "--context") if context else None, precision=precision,
                   parallel=par, gpu=dev, kv_memory=_pool_bytes(kv_memory),
                   weights_bytes=_gib(weights_gib, "--weights-gib"), reserve_bytes=_gib(reserve_gib, "--reserve-gib"),
                   mtp=mtp, **_workload(request_tokens, request_tokens_file, shared_prefix_tokens))
    warn(side.warnings)
    if len(side.answers) > 1:
        if as_json:
            print_json(engines_json(side.answers))
        else:
            render_engines(console(), side.answers)
        return
    (cap,), (reverse,) = side.answers, side.reverses
    if as_json:
        out = capacity_json(cap)
        if concurrency is not None:
            out["concurrency_asked"] = concurrency
            out["max_context_tokens"] = cap.plan.context
        print_json(out)
        return
    render_capacity(console(), cap, reverse_text(reverse, cap.engine.title) if reverse is not None else None)


def _engines(engine: str) -> list:
    """--engine's engines: one, or several comma-separated, each named once."""
    from ..engines import get_engine

    names = [e.strip() for e in engine.split(",")]
    if len(names) != len(set(names)) or not all(names):
        raise KvcalcError(f"--engine: name each engine once, got {quote(engine)}")
    return [get_engine(n) for n in names]


def _pool_bytes(kv_memory: str | None) -> int | None:
    """--kv-memory in bytes; a fraction of a byte is rounded, and a warning says so."""
    from ..units import parse_bytes_rounded

    if kv_memory is None:
        return None
    value, rounded = parse_bytes_rounded(kv_memory, "--kv-memory")
    warn([rounded] if rounded else [])
    return value


def _workload(tokens: str | None, file: str | None, shared: str | None) -> dict:
    """capacity()'s workload arguments from the flags (none: every request at the full context)."""
    from ..units import parse_tokens

    if tokens is not None and file is not None:
        raise KvcalcError("--request-tokens-file: give it or --request-tokens, not both")
    out: dict = {}
    if tokens is not None:
        out["request_tokens"] = parse_tokens(tokens, "--request-tokens")
    if file is not None:
        from ..inputs import read_text
        from ..workload import read_lengths

        out["request_tokens"] = read_lengths(read_text(file, "--request-tokens-file", 64 << 20, errors="replace"), file)
    if shared is not None:
        out["shared_prefix_tokens"] = 0 if shared.strip() == "0" else parse_tokens(shared, "--shared-prefix-tokens")
    return out


def _parallel_for(engs, engine_values: dict, tp: int, pp: int, dp: int, ep: bool, gpus: int | None):
    """The parallel layout, its GPU count checked against --gpus as each engine counts GPUs."""
    from ..capacity import Parallel

    par = Parallel(tp=tp, pp=pp, dp=dp, ep=ep)
    par.check()
    if gpus is not None:
        for eng in engs:
            mine = {o.name for o in eng.options}
            settings = eng.resolve({k: v for k, v in engine_values.items() if k in mine}, parallel=par)
            n = eng.gpus(par, settings)
            if gpus != n and n == par.gpus:
                raise KvcalcError(f"--gpus: {gpus} GPUs, but tp {tp} x pp {pp} x dp {dp} = {par.gpus}")
            if gpus != n:
                raise KvcalcError(f"--gpus: {gpus} GPUs, but {eng.name}'s DP attention shares the tp GPUs: tp {tp} x "
                                  f"pp {pp} = {n}")
    return par


