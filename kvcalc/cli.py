"""The command line. It parses, calls the library and renders; it computes nothing itself."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional
from pathlib import Path

import typer

from .errors import KvcalcError
from .textout import write as write_out  # a closed pipe stops quietly (textout.PipeClosed)

app = typer.Typer(
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="kvcalc: exact KV-cache memory for LLMs. Token counts take binary suffixes (1M = 1,048,576 tokens, "
    "128k = 131,072); bytes are printed in binary units (1 GiB = 2^30 B).",
)


class _Command(typer.core.TyperCommand):
    """typer 0.28 writes a required argument as `{MODEL}` in the usage line; kvcalc's usage lines name it
    plainly (`kvcalc compare [OPTIONS] A B`), optional ones in brackets as usual. Through click's public
    ``collect_usage_pieces`` and typer's documented ``cls=``."""

    def collect_usage_pieces(self, ctx):
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]


def _command(*args, **kwargs):
    return app.command(*args, cls=_Command, **kwargs)


def _version(value: bool) -> None:
    if value:
        from . import __version__
        from .engines.vllm import VERSION

        print(f"kvcalc {__version__} (plans vLLM {VERSION})")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", help="Print the version and exit.", callback=_version,
                                       is_eager=True)) -> None:
    """kvcalc: exact KV-cache memory for LLMs."""

CONTEXT_HELP = (
    "Context length in tokens: a plain integer or a binary suffix k/M/G (1M = 1,048,576; 128k = 131,072). "
    "Repeat the option or separate with commas for several."
)
HF_MANY_HELP = ("A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub "
                "when installed). Repeatable.")
PRECISION_HELP = "Storage precision as the model config names it (e.g. bf16, fp8), or 'all'. Repeatable."
BASIS_HELP = (
    "complete: everything a request holds (K/V, latents, window, compressed entries, indexer, compressor or SSM "
    "state; MTP with "
    "--mtp). article: what vLLM's DeepSeek V4 write-up counts (no state, no MTP)."
)


#: the library's parameter names -> this command line's flags (the library never names a flag)
FLAGS = {
    "model": "MODEL", "context": "--context", "precision": "--precision", "basis": "--basis", "batch": "--batch",
    "mtp": "--mtp", "tp": "--tp", "pp": "--pp", "dp": "--dp", "gpu": "--gpu", "block_size": "--block-size",
    "kv_memory": "--kv-memory", "weights": "--weights-gib", "reserve": "--reserve-gib", "engine": "--engine",
    "gpu_memory_utilization": "--gpu-memory-utilization", "concurrency": "--concurrency", "device": "--device",
    "fill": "--fill", "writer": "--writer", "file": "FILE", "points": "--points", "output": "--output",
    "gdn_prefill_backend": "--gdn-prefill-backend",
}


def _console():
    from .textout import Console

    return Console()  # $COLUMNS or the terminal's width on a terminal, else $COLUMNS or 120


def _warn(lines) -> None:
    for line in lines:
        print(f"kvcalc: warning: {line}", file=sys.stderr)


def _print_json(obj) -> None:
    write_out(json.dumps(obj, indent=2) + "\n")


def _estimates(models, contexts, precisions, basis, batch, mtp, what="MODEL"):
    from .estimate import estimate
    from .config import load_model

    from .vec import SMALL

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


@_command()
def estimate(
    models: Optional[List[str]] = typer.Argument(
        None, metavar="[MODEL]...", help="Config names (see `kvcalc models`) or YAML paths. None: the headline comparison."
    ),
    context: List[str] = typer.Option(["1M"], "--context", "-c", help=CONTEXT_HELP),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    basis: str = typer.Option("complete", "--basis", help=BASIS_HELP),
    batch: int = typer.Option(1, "--batch", "-b", help="Concurrent sequences, each at the full context."),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s) (speculative decoding on)."),
    by_layer: bool = typer.Option(False, "--by-layer", help="One row per layer instead of per layer kind."),
    vs: Optional[str] = typer.Option(None, "--vs", help="Reference model for the ratio column."),
    hf: Optional[str] = typer.Option(None, "--hf", help="A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub when installed) instead of MODEL."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: a list, one object per model, precision and context."),
    compact: bool = typer.Option(False, "--compact", help="With --json: one object per model and precision, contexts "
                                 "as columns, bytes per layer kind instead of per layer (fast for many contexts)."),
) -> None:
    """KV cache bytes per sequence at a context length, with a per-layer breakdown and its basis."""
    from . import report
    from .units import parse_token_list

    if compact and not as_json:
        raise KvcalcError("--compact: only with --json")
    contexts = parse_token_list(context)
    if hf is not None:
        models = [*(models or []), _hf_path(hf)]
    headline = not models
    if headline:
        models = list(report.HEADLINE_MODELS)
        vs = vs or report.HEADLINE_REFERENCE
        precision = precision or ["all"]
    results = _estimates(models, contexts, precision, basis, batch, mtp)
    # the reference is counted on the same basis, batch and MTP setting as the rows it is compared with
    refs = _estimates([vs], contexts, ["all"], basis, batch, mtp, what="--vs") if vs else []
    _warn(dict.fromkeys(w for r in results + refs for w in r.warnings))
    if as_json:
        _print_json([r.to_columns() for r in results] if compact else report.estimates_json(results, refs))
        return
    con = _console()
    single = not headline and len(models) == 1 and len(results) == 1 and not refs
    if not single:
        report.render_summary(con, results, refs, headline=headline)
    if by_layer:
        for r in results:
            report.render_layers(con, r)
    elif not headline and len(models) == 1:
        for r in results:
            report.render_kinds(con, r)


@_command()
def compare(
    model_a: Optional[str] = typer.Argument(None, metavar="A", show_default=False),
    model_b: Optional[str] = typer.Argument(None, metavar="B", show_default=False),
    hf: Optional[List[str]] = typer.Option(None, "--hf", help=HF_MANY_HELP + " Fills B, or A and B when repeated."),
    context: List[str] = typer.Option(["1M"], "--context", "-c", help=CONTEXT_HELP),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision for both (default: each model's own)."),
    precision_b: Optional[str] = typer.Option(None, "--precision-b", help="Precision for B when it differs from A's."),
    basis: str = typer.Option("complete", "--basis", help=BASIS_HELP),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Compare two models (or two precisions of one) context by context."""
    from . import report
    from .estimate import estimate
    from .units import parse_token_list

    contexts = parse_token_list(context)
    from .config import load_model

    from .vec import SMALL

    vectors = len(contexts) > SMALL  # numpy only where vectors pay
    names = [m for m in (model_a, model_b) if m is not None] + [_hf_path(h) for h in hf or []]
    if len(names) != 2:
        raise KvcalcError(f"A: compare takes two models (A and B, or --hf for either), got {len(names)}")
    model_a, model_b = names
    a = estimate(load_model(model_a, "A"), contexts, precision=precision, basis=basis, mtp=mtp, numpy=vectors)
    b = estimate(load_model(model_b, "B"), contexts, precision=precision_b or precision, basis=basis, mtp=mtp,
                 what="--precision-b" if precision_b else "--precision", numpy=vectors)
    _warn(dict.fromkeys(a.warnings + b.warnings))
    if as_json:
        _print_json(report.compare_json(a, b))
        return
    report.render_compare(_console(), a, b)


@_command()
def capacity(
    model: Optional[str] = typer.Argument(None, metavar="MODEL", show_default=False),
    hf: Optional[str] = typer.Option(None, "--hf", help="A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub when installed) instead of MODEL."),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="max_model_len in tokens (default: 1M, or with --concurrency the model's max_context)."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision as the model config names it."),
    engine: str = typer.Option("vllm", "--engine", help="vllm (paged, as vLLM plans it) or exact (no paging)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Accelerator from `kvcalc gpus` (e.g. h200, h100, b200)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="GPUs in all; must equal tp x pp x dp (default: that product)."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel stages."),
    dp: int = typer.Option(1, "--dp", help="Data-parallel replicas (vLLM's attention data parallelism for MLA models: --dp N --tp 1)."),
    ep: bool = typer.Option(False, "--ep/--no-ep", help="Expert parallelism: routed experts sharded over tp x dp."),
    kv_memory: Optional[str] = typer.Option(None, "--kv-memory", help="KV pool of each GPU in bytes (suffixes KiB/MiB/GiB), like vLLM's --kv-cache-memory-bytes; replaces GPU memory, weights and reserve."),
    gpu_memory_utilization: float = typer.Option(0.92, "--gpu-memory-utilization", help="Fraction of each GPU's total memory vLLM may use (vLLM 0.33 default 0.92)."),
    weights_gib: Optional[float] = typer.Option(None, "--weights-gib", help="Model weights in GiB, all ranks together (default: the model config's)."),
    reserve_gib: float = typer.Option(4.0, "--reserve-gib", help="Per-GPU reserve for activations, workspace and CUDA graphs."),
    block_size: Optional[int] = typer.Option(None, "--block-size", help="Tokens per block (default: what vLLM's backends pick)."),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens", help="vLLM's per-step token budget (default: vllm serve's for the GPU: 8192 on H100/H200, 16384 from 160 GiB, 2048 below 70 GiB or A100)."),
    async_scheduling: bool = typer.Option(True, "--async-scheduling/--no-async-scheduling", help="vLLM 0.33 schedules asynchronously by default: two batches in flight."),
    indexer_dtype: str = typer.Option("fp8", "--indexer-dtype", help="DeepSeek sparse-indexer cache in vLLM: fp8 (132 B, default) or mxfp4 (68 B)."),
    prefix_caching: bool = typer.Option(True, "--prefix-caching/--no-prefix-caching", help="vLLM's prefix caching (on by default); for Mamba / DeltaNet state it reserves 2 running blocks plus checkpoint blocks per request, 1 without."),
    gdn_prefill_backend: Optional[str] = typer.Option(None, "--gdn-prefill-backend", help="Gated DeltaNet prefill in vLLM: flashinfer (Hopper's default; 64-token checkpoints) or triton (default: vLLM's choice for --gpu)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Reverse: the longest context at which this many requests fit."),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s) (speculative decoding on)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """How many requests fit on real GPUs as the engine counts them: paging, shared pool, parallelism, weights."""
    from . import report
    from .capacity import Parallel, capacity as run_capacity, max_context
    from .config import load_model
    from .engines import vllm as V
    from .units import parse_bytes, parse_tokens

    spec = load_model(_one_model(model, hf))
    if engine not in ("vllm", "exact"):
        raise KvcalcError(f"--engine: unknown engine {engine!r}; choose vllm or exact")
    if indexer_dtype not in V.INDEXER_DTYPES:
        raise KvcalcError(f"--indexer-dtype: choose one of {', '.join(V.INDEXER_DTYPES)}, got {indexer_dtype!r}")
    par = Parallel(tp=tp, pp=pp, dp=dp, ep=ep)
    par.check()
    if gpus is not None and gpus != par.gpus:
        raise KvcalcError(f"--gpus: {gpus} GPUs, but tp {tp} x pp {pp} x dp {dp} = {par.gpus}")
    for name, v in (("--block-size", block_size), ("--max-num-batched-tokens", max_num_batched_tokens)):
        if v is not None and not 1 <= v <= 1 << 24:
            raise KvcalcError(f"{name}: must be from 1 to {1 << 24:,}, got {v}")
    from .hardware import get_gpu

    dev = get_gpu(gpu) if gpu is not None else None
    mnbt = max_num_batched_tokens or V.default_max_num_batched_tokens(dev.memory_bytes if dev else None,
                                                                        dev.name if dev else "")
    if gdn_prefill_backend is not None and gdn_prefill_backend not in ("flashinfer", "triton"):
        raise KvcalcError(f"--gdn-prefill-backend: choose flashinfer or triton, got {gdn_prefill_backend!r}")
    settings = V.Settings(block_size=block_size, max_num_batched_tokens=mnbt, async_scheduling=async_scheduling,
                          indexer_dtype=indexer_dtype, pp=pp, prefix_caching=prefix_caching,
                          gdn_prefill_backend=gdn_prefill_backend or V.default_gdn_prefill_backend(
                              dev.key if dev else None, spec))
    for name, v in (("--weights-gib", weights_gib), ("--reserve-gib", reserve_gib)):
        if v is not None and not (v == v and 0 <= v <= 1 << 30):
            raise KvcalcError(f"{name}: must be a number of GiB from 0 to 2^30, got {v}")
    args = dict(model=spec, precision=precision, engine=engine, settings=settings, parallel=par, gpu=dev,
                gpu_memory_utilization=gpu_memory_utilization,
                kv_memory=parse_bytes(kv_memory, "--kv-memory") if kv_memory is not None else None,
                weights_bytes=None if weights_gib is None else int(weights_gib * (1 << 30)),
                reserve_bytes=int(reserve_gib * (1 << 30)), mtp=mtp)
    reverse = None
    if concurrency is not None:
        limit = parse_tokens(context, "--context") if context else spec.max_context
        if limit is None:
            raise KvcalcError(f"--context: {spec.name} states no max_context; give an upper limit with --context")
        best, cap = max_context(args, concurrency, limit)
        if cap is None:
            raise KvcalcError(f"--concurrency: {concurrency:,} requests do not fit at any context on this pool")
        reverse = (f"Longest context at which {concurrency:,} requests fit per replica: {best:,} tokens "
                   f"(searched up to {limit:,}).")
    else:
        cap = run_capacity(context=parse_tokens(context or "1M", "--context"), **args)
    if spec.max_context is not None and cap.plan.context > spec.max_context:
        _warn([f"{spec.name}: max_model_len {cap.plan.context:,} exceeds the model's max_context "
               f"{spec.max_context:,}; vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; computed anyway"])
    if as_json:
        out = report.capacity_json(cap)
        if concurrency is not None:
            out["concurrency_asked"] = concurrency
            out["max_context_tokens"] = cap.plan.context
        _print_json(out)
        return
    report.render_capacity(_console(), cap, reverse)


@_command()
def verify(
    model: Optional[str] = typer.Argument(None, metavar="MODEL", show_default=False),
    hf: Optional[str] = typer.Option(None, "--hf", help="A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub when installed) instead of MODEL."),
    context: str = typer.Option("128k", "--context", "-c", help="max_model_len in tokens."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision as the model config names it."),
    engine: str = typer.Option("vllm", "--engine", help="vllm (the engine's block pool is what gets allocated)."),
    batch: int = typer.Option(1, "--batch", "-b", help="Requests to allocate for."),
    device: str = typer.Option("cpu", "--device", help="cuda or cpu."),
    fill: Optional[str] = typer.Option(
        None, "--fill", help="full (every layer), sample (first and last layer of each page tensor) or none "
        "(allocation only). Default: full on cuda, sample on cpu."),
    writer: Optional[str] = typer.Option(
        None, "--writer", help="triton (the kernels; on a CPU under TRITON_INTERPRET=1, slow) or torch (the "
        "reference). Default: triton on cuda, torch on cpu."),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens", help="vLLM's per-step token budget (the fill's chunk)."),
    async_scheduling: bool = typer.Option(True, "--async-scheduling/--no-async-scheduling", help="Two batches in flight."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks: one process per rank, each allocating its shard."),
    report_path: Optional[str] = typer.Option(
        None, "--report", help="Also write the JSON report to this file (atomically); 'auto': reports/verify/<run>.json."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Allocate the planned caches on a device, fill them as a prefill would, and compare what was allocated and
    written with the prediction."""
    from .config import load_model
    from .engines import vllm as V
    from .units import parse_tokens
    from .verify import run as run_verify

    spec = load_model(_one_model(model, hf))
    ctx = parse_tokens(context, "--context")
    fill = fill or ("full" if device == "cuda" else "sample")
    settings = V.Settings(max_num_batched_tokens=max_num_batched_tokens, async_scheduling=async_scheduling)
    out = run_verify(spec, ctx, precision=precision, engine=engine, settings=settings, batch=batch, device=device,
                     fill=fill, writer=writer, tp=tp, progress=sys.stderr.isatty() and not as_json)
    if report_path:
        if report_path == "auto":
            report_path = os.path.join("reports", "verify", f"{out['model']}-{out['precision']}-{ctx}-{device}-{fill}"
                                       f"{'-tp%d' % tp if tp > 1 else ''}.json")
        _write_atomic(report_path, json.dumps(out, indent=2) + "\n", "--report")
    if as_json:
        _print_json(out)
    else:
        from . import report

        report.render_verify(_console(), out)
    if out["verdict"] == "incomplete":
        print("kvcalc: interrupted: the report is marked incomplete", file=sys.stderr)
        raise typer.Exit(130)
    if out["verdict"] != "pass":
        raise typer.Exit(1)


def _hf_path(hf: str) -> str:
    """--hf names a config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub when
    it is installed); load_model imports the file."""
    from .importhf import locate

    path = locate(hf)
    p = Path(path)
    if not (path.endswith(".json") or (p.is_dir() and (p / "config.json").is_file())):
        raise KvcalcError(f"--hf: {hf[:200]!r} is neither a config.json nor a folder holding one")
    return path


def _models_and_hf(models: Optional[List[str]], hf: Optional[List[str]]) -> list[str]:
    """MODEL... plus every --hf, in that order; at least one."""
    out = [*(models or []), *(_hf_path(h) for h in hf or [])]
    if not out:
        raise KvcalcError("MODEL: give at least one model (a name, a YAML path or a config.json) or --hf")
    return out


def _one_model(model: Optional[str], hf: Optional[str]) -> str:
    if (model is None) == (hf is None):
        raise KvcalcError("MODEL: give a model (a name or a YAML path) or --hf CONFIG.json, one of the two")
    return model if model is not None else _hf_path(hf)


@_command("import-hf")
def import_hf(
    config: str = typer.Argument(..., metavar="CONFIG", help="A Hugging Face config.json, a folder holding one, or a hub id org/name (needs huggingface_hub and the network, or its cache)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the YAML here (atomically); default: stdout."),
    name: Optional[str] = typer.Option(None, "--name", help="Model name (default: the output file's stem, else the config's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the config as JSON ({output, config}) instead of YAML."),
) -> None:
    """Turn a Hugging Face config.json into a kvcalc model config, every value citing its field."""
    from .config import parse_model
    from .importhf import import_config, locate, read_config, to_yaml

    data, file = read_config(locate(config, "CONFIG"))
    if name is None and output:
        name = Path(output).stem
    cfg = import_config(data, file, name)
    parse_model(cfg, file)  # the loader's own checks, before anything is written
    text = to_yaml(cfg)
    if output:
        _write_atomic(output, text, "--output")
        print(f"kvcalc: wrote {output} ({cfg['name']}: {cfg['description']})", file=sys.stderr)
    if as_json:
        _print_json({"output": output, "config": cfg})
    elif not output:
        write_out(text)


def _write_atomic(path: str, text: str, flag: str) -> None:
    d = os.path.dirname(path)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        if d:
            os.makedirs(d, exist_ok=True)
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        try:
            os.unlink(tmp)
        except (OSError, ValueError):
            pass
        raise KvcalcError(f"{flag}: cannot write {path[:200]!r}: {getattr(exc, 'strerror', None) or exc}") from None


@_command()
def sweep(
    models: Optional[List[str]] = typer.Argument(None, metavar="MODEL...", help="Config names, YAML paths or config.json files."),
    hf: Optional[List[str]] = typer.Option(None, "--hf", help=HF_MANY_HELP),
    context: List[str] = typer.Option(["1k..1M"], "--context", "-c", help="Lists (4k,8k), ranges A..B (--points values, "
                                      "geometric) or A..B:STEP. Repeatable."),
    points: int = typer.Option(64, "--points", help="Values per A..B range."),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    basis: str = typer.Option("complete", "--basis", help=BASIS_HELP),
    mtp: bool = typer.Option(False, "--mtp/--no-mtp", help="Count the MTP layer(s)."),
    fmt: str = typer.Option("csv", "--format", help="csv or json (columnar: one array per field)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write here (atomically); default: stdout."),
    as_json: bool = typer.Option(False, "--json", help="The same as --format json."),
) -> None:
    """Exact bytes per sequence over contexts x models x precisions, as a CSV or a columnar JSON."""
    import io

    from .sweep import parse_contexts, sweep as run_sweep, to_json, write_csv

    if fmt not in ("csv", "json"):
        raise KvcalcError(f"--format: choose csv or json, got {fmt!r}")
    if as_json:
        fmt = "json"
    contexts = parse_contexts(context, points)
    cols = run_sweep(_models_and_hf(models, hf), contexts, precision, basis, mtp)
    _warn(cols["warnings"])
    if fmt == "json":
        text = json.dumps(to_json(cols)) + "\n"
    else:
        buf = io.StringIO()
        write_csv(cols, buf)
        text = buf.getvalue()
    if output:
        _write_atomic(output, text, "--output")
    else:
        write_out(text)


@_command()
def plot(
    models: Optional[List[str]] = typer.Argument(None, metavar="MODEL...", help="Config names, YAML paths or config.json files."),
    hf: Optional[List[str]] = typer.Option(None, "--hf", help=HF_MANY_HELP),
    context: List[str] = typer.Option(["4k..1M"], "--context", "-c", help="Contexts: A..B range or a list (see sweep)."),
    output: str = typer.Option(..., "--output", "-o", help="FILE.png or FILE.svg (the suffix picks the format)."),
    precision: Optional[List[str]] = typer.Option(None, "--precision", "-p", help=PRECISION_HELP),
    gpu: Optional[List[str]] = typer.Option(None, "--gpu", help="Draw this accelerator's memory (see `kvcalc gpus`). Repeatable."),
    layers: bool = typer.Option(False, "--layers", help="Per-layer stacked bars at one context instead of memory vs context."),
    at: Optional[str] = typer.Option(None, "--at", help="The context of --layers (default: the largest of --context)."),
    points: int = typer.Option(64, "--points", help="Values per A..B range."),
    basis: str = typer.Option("complete", "--basis", help=BASIS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Also print the numbers drawn, as JSON."),
) -> None:
    """Memory vs context on log axes (with GPU memory lines), or a per-layer stacked chart; PNG or SVG."""
    from .config import load_model
    from .sweep import parse_contexts
    from .units import parse_tokens

    from . import plot as P

    fmt = P._format_of(output)
    specs = [load_model(m) for m in _models_and_hf(models, hf)]
    contexts = parse_contexts(context, points)
    if layers:
        drawn = P.layers_chart(specs, parse_tokens(at, "--at") if at else int(contexts[-1]), precision, output, basis)
    else:
        from .hardware import get_gpu

        drawn = P.memory_vs_context(specs, contexts, precision, [get_gpu(g) for g in gpu or []], output, basis)
    print(f"kvcalc: wrote {output}", file=sys.stderr)
    if as_json:
        _print_json({"output": output, "format": fmt, **drawn})


@_command("report")
def report_cmd(
    out: str = typer.Option("reports", "--out", help="Folder to write (default: reports/ here)."),
    check: bool = typer.Option(False, "--check", help="Only compare the committed tables with what the code prints; exit 1 on a difference."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Also draw the plots (needs kvcalc[plot])."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written or checked, as JSON."),
) -> None:
    """Regenerate every published table and plot under reports/ (or check the committed ones)."""
    from . import regen

    if check:
        checked, stale = regen.check(out)
        for name in stale:
            print(f"kvcalc: {out}/{name} differs from what the code prints; run `kvcalc report`", file=sys.stderr)
        if as_json:
            _print_json({"out": out, "checked": checked, "stale": stale, "match": not stale})
        if stale:
            raise typer.Exit(1)
        print(f"kvcalc: {len(checked)} tables under {out}/ match the code", file=sys.stderr)
        return
    written = regen.generate(out, plots)
    if as_json:
        _print_json({"out": out, "written": written})
    else:
        for path in written:
            print(f"wrote {path}")


@_command("check-log")
def check_log_cmd(
    file: str = typer.Argument(..., metavar="FILE", help="A vLLM start-up log ('-' reads stdin)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="kvcalc model (default: matched by the log's Hugging Face id)."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="Precision (default: from the log's kv_cache_dtype)."),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens", help="Default: from the log, else 8192."),
    async_scheduling: bool = typer.Option(True, "--async-scheduling/--no-async-scheduling", help="Two batches in flight."),
    block_size: Optional[int] = typer.Option(None, "--block-size", help="Default: from the log, else the backend's."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Compare a vLLM start-up log's KV cache figures with kvcalc's plan for the same settings."""
    from .checklog import check_log

    if file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read(64 << 20)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            raise KvcalcError(f"FILE: cannot read {file[:200]!r}: {getattr(exc, 'strerror', None) or exc}") from None
    out = check_log(text, file, model=model, precision=precision, max_num_batched_tokens=max_num_batched_tokens,
                    async_scheduling=async_scheduling, block_size=block_size)
    if as_json:
        _print_json(out)
    else:
        from . import report

        report.render_check_log(_console(), out)
    if out["verdict"] == "differs":
        raise typer.Exit(1)


@_command()
def gpus(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the accelerators `capacity --gpu` knows, with the memory each reports and its source."""
    from . import report
    from .hardware import catalogue

    cat = catalogue()
    if as_json:
        _print_json([g.__dict__ for g in cat.values()])
        return
    report.render_gpus(_console(), list(cat.values()))


@_command()
def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the shipped model configs."""
    from . import report
    from .config import config_names, load_model

    specs = [load_model(n) for n in config_names()]
    if as_json:
        _print_json([report.model_json(m) for m in specs])
        return
    report.render_models(_console(), specs)


@_command()
def show(
    model: Optional[str] = typer.Argument(None, metavar="MODEL", show_default=False),
    hf: Optional[str] = typer.Option(None, "--hf", help="A Hugging Face config.json, a folder holding one, or a hub id org/name (fetched by huggingface_hub when installed) instead of MODEL."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a model's resolved layout: components, formats per precision, layer by layer, with sources."""
    from . import report
    from .config import load_model

    spec = load_model(_one_model(model, hf))
    if as_json:
        _print_json(report.model_json(spec, full=True))
        return
    report.render_show(_console(), spec)


@_command()
def schema(as_json: bool = typer.Option(True, "--json", help="Print JSON (the only form; accepted for symmetry).")) -> None:
    """Print the JSON Schema of the model config format (docs/config-format.md explains it)."""
    from .config import json_schema

    _print_json(json_schema())


@_command()
def claims(
    file: Optional[str] = typer.Option(None, "--file", help="Claims file (default: the shipped reports/claims.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check every published number in reports/claims.yaml; exit 1 if any misses its tolerance."""
    from . import claims as claims_mod
    from . import report

    if file is not None and not file.strip():
        raise KvcalcError("--file: empty path")
    results = claims_mod.check(file)
    if as_json:
        _print_json([r.to_dict() for r in results])
    else:
        report.render_claims(_console(), results)
    failed = [r for r in results if not r.passed]
    if failed:
        raise typer.Exit(1)


def _usage_error(exc) -> str:
    """Click's usage errors (unknown option, missing argument, bad int) as one line."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "kvcalc"
    message = " ".join(exc.format_message().split())
    sub = command.split(" ", 1)[1] if " " in command else ""  # "kvcalc: error:" already names the program
    return f"{sub + ': ' if sub else ''}{message} (see `{command} --help`)"


def main(argv: list[str] | None = None) -> None:
    try:
        rc = _run(argv)
    except BrokenPipeError:  # `kvcalc ... | head`, wherever it happened
        _silence_stdout()
        rc = 0
    sys.exit(rc)


#: click's Abort (Ctrl-C at a prompt), through typer's public name where it has one
_ABORT = getattr(typer, "Abort", KeyboardInterrupt)


def _click_kind(exc: BaseException) -> str | None:
    """'help' for a bare `kvcalc`, 'usage' for any click error, None otherwise. Recognised by click's public
    exception API (``format_message`` and ``exit_code``, class names in the MRO), so it works whether typer
    vendors click (>= 0.27, a private module) or depends on it (< 0.27): no private import."""
    names = {c.__name__ for c in type(exc).__mro__}
    if "NoArgsIsHelpError" in names:
        return "help"
    if "ClickException" in names and callable(getattr(exc, "format_message", None)):
        return "usage"
    return None


def _run(argv: list[str] | None) -> int:
    try:
        rc = app(args=argv, prog_name="kvcalc", standalone_mode=False)
    except KvcalcError as exc:
        print(f"kvcalc: error: {exc.renamed(FLAGS)}", file=sys.stderr)
        rc = exc.exit_code
    except BrokenPipeError:
        raise
    except (KeyboardInterrupt, _ABORT):
        rc = 130
    except Exception as exc:
        kind = _click_kind(exc)
        if kind == "help":  # bare `kvcalc`: the help, not an error
            print(exc.format_message())
            rc = 0
        elif kind == "usage":
            print(f"kvcalc: error: {_usage_error(exc)}", file=sys.stderr)
            rc = 2
        elif os.environ.get("KVCALC_DEBUG"):
            raise
        else:  # a bug: one line, never a traceback, unless asked for
            print(f"kvcalc: internal error: {type(exc).__name__}: {exc} (KVCALC_DEBUG=1 shows the traceback)",
                  file=sys.stderr)
            rc = 1
    return rc if isinstance(rc, int) else 0


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
