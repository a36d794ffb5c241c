"""JSON Schemas (draft 2020-12) of every command's ``--json`` output: ``kvcalc schema --output COMMAND``.

Each schema is built from the same names the renderers write (``present/*``, ``Estimate.to_dicts``,
``VerifyResult.to_json``, ...) and, where an engine decides, from the engines themselves: the budget keys of
``capacity`` are each engine's ``budget_keys``, the version keys of ``check-log`` are named after the engines
that read logs. Objects are closed (``additionalProperties: false``) except where an engine adds keys of its
own: the capacity object (its budget and fit figures; SGLang's are described), ``engine_settings`` and
``settings`` (the engine's names), ``check-log``'s ``parsed`` and verify's ``token_pools``. docs/json-output.md
describes every command's keys.

Rendering only, like the rest of ``present/``: imports nothing heavy, loads the engines only to build the
schemas that depend on them.
"""

from __future__ import annotations

from ..errors import KvcalcError, quote

DRAFT = "https://json-schema.org/draft/2020-12/schema"

from .outputs import OUTPUTS  # noqa: E402  (every command with --json output)

# ---- building blocks (kvcalc.jsonschema: the engines' figures use them too) -------------------------------------
from ..jsonschema import (BOOL, COUNT, INT, NUM, POS, SCALAR, STR, arr, mapping, null, obj,  # noqa: E402,F401
                          ref)


# ---- estimate, compare, sweep, plot ---------------------------------------------------------------------------
def _estimate_defs() -> dict:
    from ..estimate import BASES, PAGING

    basis = {"enum": list(BASES)}
    component = obj({"name": STR, "cache": STR, "rule": STR, "format": STR, "entries": COUNT, "entry_bytes": COUNT,
                     "fixed_bytes": COUNT, "bytes": COUNT},
                    description="one cache component of one layer: entries x entry_bytes + fixed_bytes = bytes")
    layer = obj({"index": COUNT, "kind": STR, "mtp": BOOL, "bytes": COUNT, "components": arr(ref("component"))},
                description="one layer (main layers 0..n-1, then the MTP layers), bytes for one sequence")
    reference = obj({"model": STR, "precision": STR, "per_sequence_bytes": COUNT, "ratio": null(NUM)},
                    description="the --vs model at the same precision and context; ratio null where it holds 0 B")
    engine = {"type": "object", "description": "--engine: what the engine reserves for one request at this context "
              "(its own defaults, one rank): its pool units and their bytes, beside the exact bytes; other keys "
              "are the engine's own (llama.cpp: the one-slot command, n_ctx, caches, log lines)",
              "required": ["name", "version", "request_bytes", "exact_bytes", "layout", "unit_bytes",
                           "units_per_request", "basis", "notes"],
              "properties": {"name": STR, "version": STR, "request_bytes": COUNT, "exact_bytes": COUNT,
                             "layout": STR, "unit_bytes": COUNT, "units_per_request": COUNT, "basis": STR,
                             "notes": arr(STR)}}
    estimate = obj({
        "model": STR, "display_name": STR, "context_tokens": POS, "precision": STR, "basis": basis,
        "basis_detail": STR, "mtp_counted": BOOL, "paging": {"const": "exact"}, "units": {"const": "bytes"},
        "batch": POS, "total_bytes": COUNT, "per_sequence_bytes": COUNT, "storage": mapping(STR),
        "layers": arr(ref("layer")), "warnings": arr(STR), "reference": reference, "engine": engine,
    }, optional=("reference", "engine"), description="one model at one precision and one context")
    kind = obj({"layers": COUNT, "components": arr(STR), "per_layer_bytes": arr(COUNT)})
    compact = obj({
        "model": STR, "precision": STR, "basis": basis, "batch": POS, "mtp": BOOL, "paging": {"const": PAGING},
        "context_tokens": arr(POS, 1), "per_sequence_bytes": arr(COUNT, 1), "total_bytes": arr(COUNT, 1),
        "kinds": mapping(kind), "warnings": arr(STR),
    }, description="--compact: one model at one precision, every context as a column (arrays of equal length)")
    return {"component": component, "layer": layer, "estimate": estimate, "compact": compact}


def _estimate() -> tuple[dict, dict]:
    return {"description": "A list, one object per model, precision and context; with --compact one per model and "
                           "precision, contexts as columns.",
            "anyOf": [arr(ref("estimate"), 1), arr(ref("compact"), 1)]}, _estimate_defs()


def _compare() -> tuple[dict, dict]:
    defs = _estimate_defs()
    del defs["compact"]
    body = obj({"a": arr(ref("estimate"), 1), "b": arr(ref("estimate"), 1), "ratio_b_over_a": arr(null(NUM), 1),
                "context_tokens": arr(POS, 1)},
               description="A and B context by context (equal-length lists); ratio null where A holds 0 B")
    return body, defs


def _sweep() -> tuple[dict, dict]:
    from ..estimate import BASES

    columns = ["model", "precision", "context_tokens", "bytes_per_sequence"]
    return obj({"columns": {"const": columns}, "basis": {"enum": list(BASES)}, "units": STR, "rows": COUNT,
                "model": arr(STR), "precision": arr(STR), "context_tokens": arr(POS), "bytes_per_sequence": arr(COUNT),
                "warnings": arr(STR)},
               description="Columnar: one array per column, each of length rows (row i is model[i], precision[i], "
                           "context_tokens[i], bytes_per_sequence[i])"), {}


def _plot() -> tuple[dict, dict]:
    from ..estimate import BASES

    head = {"output": STR, "format": {"enum": ["png", "svg"]}, "basis": {"enum": list(BASES)}, "units": STR}
    series = obj({"model": STR, "precision": STR, "max_context": null(POS), "bytes_per_sequence": arr(COUNT)},
                 description="max_context: the model's; points past it are drawn faded")
    gpu = obj({"key": STR, "name": STR, "memory_bytes": POS})
    lines = obj({**head, "chart": {"const": "memory_vs_context"}, "context_tokens": arr(POS, 1),
                 "series": arr(series), "gpus": arr(gpu), "warnings": arr(STR)},
                description="memory vs context: one series per model and precision, its bytes at each context")
    panel = obj({"model": STR, "precision": STR, "per_sequence_bytes": COUNT, "bytes_by_role": mapping(arr(COUNT))})
    layers = obj({**head, "chart": {"const": "layers"}, "context_tokens": POS, "panels": arr(panel),
                  "warnings": arr(STR)},
                 description="--layers: one panel per model, each role's bytes layer by layer at one context")
    dseries = obj({"model": STR, "precision": STR, "max_context": null(POS), "read_bytes_per_token": arr(COUNT),
                   "stored_bytes": arr(COUNT)})
    dec = obj({"output": STR, "format": {"enum": ["png", "svg"]}, "units": STR, "basis": STR,
               "chart": {"const": "decode_vs_context"}, "context_tokens": arr(POS, 1), "series": arr(dseries),
               "warnings": arr(STR)},
              description="--decode: per model and precision, the cache bytes a decode step reads per token and the "
                          "bytes stored, at each context")
    return ({"oneOf": [ref("memory_vs_context"), ref("layers"), ref("decode_vs_context")]},
            {"memory_vs_context": lines, "layers": layers, "decode_vs_context": dec})


# ---- capacity -------------------------------------------------------------------------------------------------
def _plan_defs() -> dict:
    from ..pool import GroupKind, Layout

    from ..engines import engines

    sized = [k for k in GroupKind if k.local]  # "window 128", "chunk 8192"
    own = [n for e in engines() for n in e.plan_names.get("kinds", ())]  # an engine's own group names ("exact")
    kinds = [k.value for k in GroupKind if not k.local] + own
    page = obj({"component": STR, "spec": STR, "format": STR, "count": POS, "block_size": POS,
                "entries_per_block": COUNT, "entry_bytes": COUNT, "page_bytes": COUNT, "real_page_bytes": COUNT},
               description="count layer caches of one page shape in a group")
    group = obj({
        "group": COUNT, "kind": {"type": "string", "pattern": f"^({'|'.join(kinds)}|({'|'.join(k.value for k in sized)}) [0-9]+)$"},
        "components": arr(STR, 1), "layers": arr(COUNT, 1), "block_size": POS, "page_bytes": COUNT,
        "real_page_bytes": COUNT, "blocks_per_request": COUNT, "reserved_bytes_per_request": COUNT,
        "analytic_bytes_per_request": COUNT, "layer_pages": arr(ref("page"), 1),
    }, description="one cache group of the plan: what one request reserves in it and holds exactly")
    layouts = [x.value for x in Layout] + [n for e in engines() for n in e.plan_names.get("layouts", ())]
    return {"page": page, "group": group, "layout": {"enum": layouts}}


def _gpu(full: bool) -> dict:
    props = {"key": STR, "name": STR, "vendor": STR, "memory_bytes": POS, "marketing": STR,
             "basis": {"enum": ["reported", "spec sheet"]}, "source": STR, "bandwidth_bytes_per_s": null(POS),
             "bandwidth_source": STR, "arch": STR, "arch_source": STR}
    if not full:
        props = {k: v for k, v in props.items() if k not in ("vendor", "marketing", "bandwidth_bytes_per_s",
                                                             "bandwidth_source", "arch", "arch_source")}
    return obj(props)


def _engine_branches() -> list[dict]:
    """Per engine: its budget keys (a number, null when the pool was given) and the figures its fit adds."""
    from ..engines import engine_names, get_engine

    out = []
    for name in engine_names():
        eng = get_engine(name)
        then = {"properties": {k: null(NUM) for k in eng.budget_keys}, "required": list(eng.budget_keys)}
        if eng.Figures is not None:
            more = eng.Figures.schema()
            then = {"properties": {**then["properties"], **more["properties"]},
                    "required": then["required"] + more["required"]}
        out.append({"if": {"properties": {"engine": {"const": name}}, "required": ["engine"]}, "then": then})
    return out


def _capacity_defs() -> dict:
    from .capacity import _ROWS

    defs = _plan_defs()
    parallel = obj({"tp": POS, "pp": POS, "dp": POS, "ep": BOOL, "gpus": POS})
    capacity = obj({
        "model": STR, "context_tokens": POS, "precision": STR, "engine": STR, "engine_version": STR,
        "engine_settings": mapping(SCALAR), "layout": ref("layout"), "grouping": STR, "padding_layers": COUNT,
        "parallel": parallel, "gpu": null(_gpu(full=False)), "requested_bytes_per_gpu": null(COUNT),
        "weights_bytes_per_gpu": null(COUNT), "weights_total_bytes": null(COUNT), "weights_basis": STR,
        "reserve_bytes_per_gpu": null(COUNT), "kv_pool_bytes_per_gpu": COUNT, "kv_pool_given": BOOL,
        "bytes_per_block": POS, "num_blocks": COUNT, "null_blocks": COUNT, "blocks_per_request": COUNT,
        "per_request_bytes": COUNT, "analytic_bytes": COUNT, "stored_formats": mapping(STR),
        "max_concurrency": {"type": "number", "minimum": 0},
        "requests_per_replica": COUNT, "total_requests": COUNT, "cache_tokens": COUNT,
        "engine_log_line": null(STR), "pages": arr(ref("group"), 1), "notes": arr(STR), "units": {"const": "bytes"},
        "host_tiers": arr(obj({"name": STR, "medium": {"enum": ["host memory", "disk"]}, "tokens_per_rank": COUNT,
                               "bytes_per_rank": COUNT, "unit": STR, "units_per_rank": COUNT, "unit_tokens": POS,
                               "unit_bytes": POS, "ranks": POS, "host_bytes": COUNT, "requests": COUNT,
                               "source": STR},
                              description="a tier below the GPU pool the engine's settings turn on (each also adds "
                                          "its own top-level keys: cpu_tokens, lmcache_tokens, hicache_host_tokens, "
                                          "secondary_blocks ...)")),
        "concurrency_asked": POS, "max_context_tokens": POS,
        "workload": obj({"request_tokens": null(POS), "request_lengths": POS, "mean_request_tokens": NUM,
                         "shared_prefix_tokens": COUNT, "unit": {"enum": ["blocks", "tokens", "bytes"]},
                         "cost_per_request": NUM, "shared_cost": COUNT, "limits": mapping(COUNT, 1),
                         "limited_by": STR, "requests_at_context": COUNT},
                        description="--request-tokens / --shared-prefix-tokens: a request's own cost in the engine's "
                                    "unit, the shared part held once, the per-replica limits; requests_per_replica "
                                    "is the workload's"),
    }, optional=("concurrency_asked", "max_context_tokens", "workload"), extra=True,
        description="one engine's answer, per GPU unless named total; open: each engine adds its budget keys and "
                    "the figures of its fit")
    capacity["dependentRequired"] = {"concurrency_asked": ["max_context_tokens"],
                                     "max_context_tokens": ["concurrency_asked"]}
    capacity["allOf"] = _engine_branches()
    refused = obj({"engine": STR, "engine_version": STR, "refused": STR},
                  description="side by side: an engine that refuses this deployment, and its reason")
    rows = [label for label, _ in _ROWS]
    side = obj({"engines": arr({"anyOf": [ref("capacity"), ref("refused")]}, 2),
                "side_by_side": {"type": "object", "properties": {r: mapping(STR) for r in rows}, "required": rows,
                                 "additionalProperties": False},
                "reasons": mapping(STR)},
               description="--engine A,B: each engine's full answer (or its refusal), the table's rows as text "
                           "(row -> engine -> cell) and each engine's one-line reason")
    return {**defs, "capacity": capacity, "refused": refused, "engines_side_by_side": side}


def _capacity() -> tuple[dict, dict]:
    return {"description": "One engine: its answer; several (--engine A,B): engines side by side.",
            "oneOf": [ref("capacity"), ref("engines_side_by_side")]}, _capacity_defs()


# ---- show, models, gpus, claims, check-log --------------------------------------------------------------------
def _model(full: bool) -> dict:
    props = {"name": STR, "display_name": STR, "description": STR, "path": STR, "layers": COUNT, "layout": STR,
             "config_layout": STR,
             "mtp_layers": COUNT, "max_context": null(POS), "precisions": mapping(mapping(STR), 1),
             "default_precision": STR}
    if not full:
        return obj(props, description="one shipped config: its layout and precisions (precision -> role -> format)")
    by_precision = mapping(COUNT, 1)
    per_token = obj({"cache": STR, "rule": STR, "storage": STR, "entry_bytes": by_precision, "fixed_bytes": {"const": 0}},
                    description="a per-token cache: bytes per entry at each precision")
    fixed = obj({"cache": STR, "rule": STR, "storage": {"type": "null"}, "entry_bytes": {"type": "null"},
                 "fixed_bytes": by_precision}, description="fixed per-request state: its bytes at each precision")
    props.update(components=mapping({"oneOf": [per_token, fixed]}, 1), layer_kinds=mapping(arr(STR)),
                 layer_list=arr(STR, 1), mtp_list=arr(STR), sources=mapping(STR), provenance=mapping(STR))
    return obj(props, description="one model's resolved layout")


def _claims() -> tuple[dict, dict]:
    tolerance = {"oneOf": [obj({"abs": {"type": "number", "minimum": 0}}), obj({"rel": {"type": "number", "minimum": 0}})]}
    claim = obj({"id": STR, "claim": STR, "source": STR, "quote": STR, "basis": STR, "published": NUM, "unit": STR,
                 "computed": NUM, "tolerance": tolerance, "passed": null(BOOL), "comparable": BOOL},
                description="one published number, recomputed; passed: within its tolerance (abs, or rel of published); "
                            "null when not comparable (the basis says what kvcalc computes instead)")
    return arr(claim), {}


def _check_log() -> tuple[dict, dict]:
    from ..engines import engines

    readers = ["".join(ch if ch.isalnum() else "_" for ch in e.name) for e in engines() if e.logs is not None]
    row = obj({"figure": STR, "logged": STR, "kvcalc": STR, "agrees": null(BOOL), "line": null(POS)},
              description="one figure as logged and as planned (text, as the table shows it); agrees null: shown for "
                          "information")
    body = obj({"file": STR, "model": STR, "log_model": null(STR), "precision": STR, "context_tokens": POS,
                "settings": mapping(SCALAR), "parsed": mapping(SCALAR), "rows": arr(row), "notes": arr(STR),
                "verdict": {"enum": ["agrees", "differs", "nothing to compare"]}},
               description="the log's figures beside kvcalc's plan; log_ENGINE_version and kvcalc_ENGINE_version name "
                           "the engine that wrote the log")
    body["patternProperties"] = {"^log_[a-z0-9_]+_version$": null(STR), "^kvcalc_[a-z0-9_]+_version$": STR}
    body["oneOf"] = [{"required": [f"log_{n}_version", f"kvcalc_{n}_version"]} for n in readers]
    return body, {}


# ---- verify ---------------------------------------------------------------------------------------------------
def _verify_defs() -> dict:
    check = obj({"check": STR, "pass": BOOL})
    view = obj({k: COUNT for k in ("layers", "page_bytes", "real_page_bytes", "offset", "layer_stride",
                                   "block_stride")} | {"component": STR})
    pool = obj({"name": STR, "dtype": STR, "store_dtype": STR, "shape": arr(COUNT, 1), "tensors": STR,
                "padding_page_bytes": COUNT, "padding_page_written_bytes": null(COUNT)},
               description="token pools only: the buffer the engine allocates (shape: one layer's)")
    group = obj({"group": COUNT, "kind": STR, "components": arr(STR, 1), "layers": COUNT, "blocks": COUNT,
                 "predicted_bytes": COUNT, "planned_bytes": COUNT, "page_bytes": COUNT, "real_page_bytes": COUNT,
                 "views": arr(ref("view")), "expected_written_bytes": COUNT, "written_bytes": null(COUNT),
                 "padding_written_bytes": null(COUNT), "pool": pool}, optional=("pool",))
    measured = obj({"storage_bytes": COUNT, "resident_growth_bytes": null(INT), "allocator_allocated_delta": null(INT),
                    "allocator_reserved_delta": null(INT), "device_free_delta": null(INT),
                    "allocator_back_to_start": null(BOOL), "device_free_back_to_start_bytes": null(INT),
                    "allocator_rounding_bytes": INT}, optional=("allocator_rounding_bytes",),
                   description="storage bytes; on CPU the resident-memory growth, on CUDA the allocator's and the "
                               "device's deltas (null where the device has no such figure)")
    seconds = obj({"allocate": {"type": "number", "minimum": 0}, "fill_pass1": {"type": "number", "minimum": 0},
                   "fill_pass2": {"type": "number", "minimum": 0}}, optional=("fill_pass1", "fill_pass2"))
    fill_info = obj({"writer": STR, "chunk_tokens": POS, "jobs": COUNT, "formats": mapping(STR), "layers": STR,
                     "tokens_per_pass": COUNT})
    readback = obj({"request": COUNT, "group": COUNT, "component": STR, "layer": COUNT, "indices": arr(COUNT),
                    "tolerance": STR, "pass": BOOL})
    sglang_pools = obj({"max_total_num_tokens": COUNT, "swa_max_total_num_tokens": null(COUNT),
                        "max_mamba_cache_size": null(COUNT), "max_running_requests": COUNT, "page_size": POS,
                        "kv_cache_dtype": STR, "padding": STR}, extra=True,
                       description="an engine of token pools (SGLang): its figures for the batch; open to the "
                                   "engine's own keys")
    exact_layout = obj({"layout": {"const": "exact"}, "basis": {"enum": ["complete", "article"]}, "precision": STR,
                        "estimate_bytes": COUNT, "tensors": POS, "padding": STR},
                       description="the exact engine's layout: one tensor per component and layer")
    token_pools = {"oneOf": [exact_layout, sglang_pools]}
    return {"check": check, "view": view, "group": group, "measured": measured, "seconds": seconds,
            "fill_info": fill_info, "readback": readback, "token_pools": token_pools}


def _verify_common() -> dict:
    return {"model": STR, "context_tokens": POS, "precision": STR, "engine": STR, "engine_version": STR, "device": STR,
            "arch": null(STR), "fill": {"enum": ["full", "sample", "none"]}, "writer": null(STR), "batch": POS, "complete": BOOL,
            "predicted_bytes": COUNT, "planned_bytes": COUNT, "allocated_bytes": COUNT,
            "expected_written_bytes": COUNT, "written_bytes": null(COUNT), "groups": arr(ref("group")),
            "tolerances": mapping(STR), "checks": arr(ref("check"), 1), "seconds": ref("seconds"),
            "verdict": {"enum": ["pass", "fail", "incomplete"]}, "basis": STR}


def _verify() -> tuple[dict, dict]:
    defs = _verify_defs()
    one = obj({**_verify_common(), "planned_blocks": null(COUNT), "bytes_per_block": null(POS),
               "stray_written_bytes": null(COUNT), "measured": ref("measured"),
               "fill_bytes_per_second": null(NUM), "device_copy_bytes_per_second": null(NUM),
               "fill_info": null(ref("fill_info")), "readback": arr(ref("readback")), "tp": POS, "rank": COUNT,
               "token_pools": ref("token_pools")}, optional=("tp", "rank", "token_pools"),
              description="one rank's run (planned_blocks and bytes_per_block null for token pools)")
    one["dependentRequired"] = {"tp": ["rank"], "rank": ["tp"]}
    combined = obj({**_verify_common(), "planned_blocks": COUNT, "measured": obj({"per_rank": arr(ref("measured"), 2)}),
                    "tp": {"type": "integer", "minimum": 2}, "ranks": arr(ref("verify_rank"), 2),
                    "fill_bytes_per_second": {"type": "null"}},
                   description="--tp N: bytes summed over the ranks, every rank's checks; each rank's own report in "
                               "ranks")
    row = obj({"figure": STR, "published": null(STR), "quote": null(STR), "source": null(STR), "estimate": NUM,
               "measured": null(NUM), "unit": {"enum": ["GiB", "MiB", "x"]}, "tolerance": null(NUM),
               "agrees": null(BOOL)})
    headline = obj({"headline": {"const": True}, "context_tokens": POS, "device": STR,
                    "fill": {"enum": ["full", "sample", "none"]}, "verdict": {"enum": ["pass", "fail"]},
                    "rows": arr(row, 1), "runs": {"type": "object", "additionalProperties": ref("verify_rank"),
                                                  "minProperties": 1}, "basis": STR})
    measured = obj({"figure": STR, "measured": STR, "kvcalc": STR, "agrees": null(BOOL)})
    llama = obj({"engine": {"const": "llama.cpp"}, "model": STR, "path": STR, "context_tokens": POS,
                 "llama_cpp_python": STR, "command": STR, "rows": arr(measured, 1), "notes": arr(STR),
                 "verdict": {"enum": ["pass", "fail"]}},
                description="--engine llama.cpp: what llama.cpp itself made beside the plan (exact figures first, "
                            "then its log lines)")
    defs.update(verify_rank=one, verify_tp=combined, verify_headline=headline, verify_llama_cpp=llama)
    return {"oneOf": [ref("verify_rank"), ref("verify_tp"), ref("verify_headline"), ref("verify_llama_cpp")]}, defs


# ---- fit ------------------------------------------------------------------------------------------------------
def _fit() -> tuple[dict, dict]:
    where = {"gpu": STR, "gpus": POS, "tp": POS, "pp": POS, "dp": POS, "ep": BOOL, "engine": STR, "precision": STR}
    dep = obj({**where, "context_tokens": POS, "total_requests": COUNT, "requests_per_replica": COUNT,
               "running_limit_per_replica": null(POS), "served_requests": COUNT, "spare_requests": null(COUNT),
               "host_tiers": arr(obj({"name": STR, "tokens_per_rank": COUNT, "bytes_per_rank": COUNT,
                                      "host_bytes": COUNT, "requests": COUNT})), "kv_pool_bytes_per_gpu": COUNT, "weights_bytes_per_gpu": null(COUNT),
               "command": STR}, description="one deployment, as `kvcalc capacity` with its command plans it")
    miss = obj({**where, "why": {"enum": ["weights", "kv", "running", "layout", "engine"]}, "detail": STR},
               description="a smaller deployment that does not serve the workload, and why")
    search = obj({"model": STR, "context_tokens": POS, "concurrency": null(POS), "deployments": arr(dep),
                  "misses": arr(miss), "searched": COUNT, "seconds": NUM, "notes": arr(STR), "basis": STR},
                 description="deployments ranked: fewest GPUs, then most spare requests (most requests without "
                             "a concurrency)")
    reverse = obj({"model": STR, "concurrency": POS, "gpus": POS,
                   "longest": arr(obj({**where, "context_tokens": POS, "requests_per_replica": POS, "command": STR})),
                   "refused": arr(miss)},
                  description="no --context: on the fleet, the longest context at which the requests fit")
    return {"oneOf": [search, reverse]}, {}


# ---- import-hf, report, schema --------------------------------------------------------------------------------
def _import_hf() -> tuple[dict, dict]:
    from ..config import json_schema

    config = {k: v for k, v in json_schema().items() if k != "$schema"}
    return obj({"output": null(STR), "config": ref("config")},
               description="output: the YAML file written (null: none); config: the kvcalc config, as `kvcalc schema` "
                           "describes it"), {"config": config}


def _report() -> tuple[dict, dict]:
    check = obj({"out": STR, "checked": arr(STR), "stale": arr(STR), "missing": arr(STR), "match": BOOL},
                description="--check: the tables compared, those that differ, those missing; match: none differs "
                            "and none is missing")
    written = obj({"out": STR, "written": arr(STR)}, description="the files written")
    return {"oneOf": [check, written]}, {}


def _decode() -> tuple[dict, dict]:
    comp = obj({"name": STR, "cache": STR, "rule": STR, "entries": COUNT, "entry_bytes": COUNT, "read_bytes": COUNT,
                "write_bytes": COUNT, "write_every": POS},
               description="one component of one layer: what it reads (rule), the entries and bytes read; it writes "
                           "write_bytes every write_every tokens (fixed state: rewritten every step)")
    kind = obj({"kind": STR, "layers": POS, "read_bytes_per_layer": COUNT, "read_bytes": COUNT,
                "components": arr(comp, 1)})
    share = {"type": "number", "minimum": 0, "maximum": 1}
    step = obj({"gpu": STR, "gpu_name": STR, "bandwidth_bytes_per_s": POS, "bandwidth_source": STR, "batch": POS,
                "tp": POS,
                "dense_weight_bytes": COUNT, "expert_weight_bytes": COUNT, "routed_experts": null(POS),
                "experts_per_token": null(POS), "expected_experts_per_layer": null(NUM), "expert_read_share": share,
                "expert_read_bytes": COUNT, "weights_read_bytes": COUNT, "cache_read_bytes": COUNT,
                "state_write_bytes": COUNT, "append_bytes_left_out": COUNT, "step_bytes": COUNT,
                "step_seconds_floor": NUM, "tokens_per_second_ceiling": NUM, "weights_source": STR,
                "memory_bytes": POS, "held_bytes": COUNT, "fits": BOOL, "assumption": STR, "basis": STR},
               description="with --gpu: one step of `batch` sequences on one GPU; expert bytes are an expectation "
                           "under uniform routing; held_bytes: the weights and caches one GPU must hold (the "
                           "command refuses a step that does not fit, the API says fits: false)")
    return obj({"model": STR, "precision": STR, "context_tokens": POS, "batch": POS, "tp": POS,
                "read_bytes_per_token": COUNT, "read_bytes_per_step": COUNT, "stored_bytes": COUNT,
                "state_write_bytes_per_token": COUNT, "layers": arr(kind, 1), "basis": STR, "step": step,
                "precision_basis": STR},
               optional=("step",)), {}


def _transfer() -> tuple[dict, dict]:
    from ..engines import engines

    units = ["block", "page", "state slot", "bytes"] + [u for e in engines() for u in e.plan_names.get("units", ())]
    group = obj({"index": COUNT, "kind": STR, "label": STR, "layers": POS,
                 "unit": {"enum": units}, "unit_tokens": COUNT, "units": COUNT,
                 "unit_bytes": COUNT, "rule": STR, "bytes": COUNT},
                description="one cache group: `units` blocks / pages (or one state slot) of `unit_bytes`, all the "
                            "group's layers, padding included")
    link = obj({"key": STR, "name": STR, "bytes_per_s": POS, "stated": STR, "source": STR})
    over = obj({"key": STR, "bytes_per_s": POS, "seconds": NUM})
    return obj({"model": STR, "engine": STR, "engine_title": STR, "precision": STR, "prompt_tokens": POS, "tp": POS,
                "tokens_moved": POS, "groups": arr(group, 1), "cache_bytes": COUNT, "aux_bytes": COUNT,
                "transfer_bytes": COUNT, "wire_bytes": COUNT, "stored_bytes": COUNT, "stored_formats": mapping(STR),
                "reserved_bytes": COUNT, "reserved_as": STR, "gpu": null(STR), "arch": null(STR), "link": null(link), "transfer_seconds": null(NUM), "links": arr(over, 1), "notes": arr(STR),
                "basis": STR}), {}


def _schema() -> tuple[dict, dict]:
    return {"description": "a JSON Schema (draft 2020-12): the config format's, or with --output a command's output",
            "allOf": [{"$ref": DRAFT}], "type": "object", "required": ["$schema"]}, {}


_BUILDERS = {
    "estimate": _estimate, "compare": _compare, "capacity": _capacity, "sweep": _sweep,
    "show": lambda: (_model(full=True), {}), "models": lambda: (arr(_model(full=False)), {}),
    "gpus": lambda: (arr(_gpu(full=True)), {}), "claims": _claims, "check-log": _check_log, "verify": _verify,
    "import-hf": _import_hf, "import-gguf": _import_hf, "plot": _plot, "report": _report, "schema": _schema, "decode": _decode,
    "transfer": _transfer, "fit": _fit,
}


def output_schema(command: str) -> dict:
    """The JSON Schema of ``kvcalc COMMAND --json``'s output (draft 2020-12)."""
    if command not in _BUILDERS:
        raise KvcalcError(f"output: no JSON output named {quote(command)}; choose one of: {', '.join(OUTPUTS)}",
                          param="output")
    body, defs = _BUILDERS[command]()
    out = {"$schema": DRAFT, "title": f"kvcalc {command} --json", **body}
    if defs:
        out["$defs"] = defs
    return out
