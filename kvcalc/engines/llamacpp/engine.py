"""The llama.cpp engine (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from ...errors import KvcalcError, NoRoom
from ...pool import GroupKind, PlanGroup, PlanPage, PoolFigures, PoolPlan, longest_context
from ...units import GIB, format_bytes
from ..base import Budget, BudgetStep, Capability, Engine, EngineFigures, Fit
from . import layout as L
from .ggml import KVCALC_FORMAT, buffer_bytes
from . import logs as _logs
from .launch import Launch, launch
from .options import CACHE_TYPE_NAMES, FRONTENDS, NAME, OPTIONS, SUMMARY, TITLE, VERSION
from .settings import Settings, backend_of

#: the margin llama-server's memory fit leaves on each device (common/common.h fit_params_target: 1 GiB); the
#: compute buffers it sizes are not modelled
FIT_MARGIN = GIB


@dataclass(frozen=True, kw_only=True)
class LlamaPlan(PoolPlan):
    """One llama.cpp context: ``slots`` sequences of up to ``context`` tokens. A request is one sequence; its cells are
    the unit. ``at(slots, n_ctx)`` is the allocation of another launch of the same model and settings."""

    model_caches: L.ModelCaches
    launch: Launch
    allocation: L.Allocation
    at: Callable[[int, int | None], L.Allocation] = field(repr=False, compare=False)
    n_ctx_for: Callable[[int, int], int] = field(repr=False, compare=False)  # (per request, slots) -> -c
    weights: tuple | None = None  # (total, GPU, CPU, basis) from the GGUF's tensors; None: not known here
    ollama: object = None  # ollama.Prediction: ollama's own prediction of this launch (--frontend ollama, a GGUF)
    n_ctx_asked: int = 0  # the n_ctx llama.cpp is given (before its padding to 256)

    @property
    def per_request_bytes(self) -> int:
        one = self.at(1, self.n_ctx_for(self.context, 1))
        return one.memory_bytes

    @property
    def units_per_request(self) -> int:
        return self.allocation.cparams.n_ctx_seq

    @property
    def unit_bytes(self) -> int:
        return sum(g.page_bytes for g in self.groups if g.kind is not GroupKind.STATE) or 1

    def units_at_context(self, context: int) -> int:
        return L.pad(context, L.CTX_PAD)

    def group_reserve(self, g: PlanGroup) -> int:
        return g.analytic_bytes

    def figures(self) -> PoolFigures:
        return PoolFigures("cells", "one cell a token in every layer, n_ctx_seq cells a stream", 0, self.unit_bytes, 0,
                           self.allocation.cparams.n_ctx_seq)


@dataclass(frozen=True)
class LlamaFigures(EngineFigures):
    frontend: str
    command: str
    defaults: tuple[str, ...]
    allocation: L.Allocation
    weights_bytes: int | None
    weights_gpu_bytes: int
    weights_cpu_bytes: int
    weights_basis: str
    max_parallel: int | None  # the most slots of the context that fit the pool
    max_ctx_size: int | None  # the longest --ctx-size at this --parallel that fits the pool
    ollama: dict | None = None  # --frontend ollama: its own prediction beside the allocation

    def to_json(self) -> dict:
        a, cp = self.allocation, self.allocation.cparams
        return {
            "frontend": self.frontend, "command": self.command, "defaults": list(self.defaults),
            "n_ctx": cp.n_ctx, "n_ctx_seq": cp.n_ctx_seq, "n_seq_max": cp.n_seq_max, "n_stream": cp.n_stream,
            "n_batch": cp.n_batch, "n_ubatch": cp.n_ubatch, "flash_attn": cp.flash_attn, "kv_unified": cp.kv_unified,
            "swa_full": cp.swa_full, "type_k": cp.type_k.name, "type_v": cp.type_v.name,
            "caches": [c.to_json() for c in a.caches],
            "memory_bytes": a.memory_bytes, "cache_gpu_bytes": a.gpu_bytes, "cache_cpu_bytes": a.cpu_bytes,
            "weights_bytes": self.weights_bytes, "weights_basis": self.weights_basis,
            "gpu_bytes": a.gpu_bytes + self.weights_gpu_bytes, "cpu_bytes": a.cpu_bytes + self.weights_cpu_bytes,
            "max_parallel": self.max_parallel, "max_ctx_size": self.max_ctx_size, "log": a.log_lines(),
            "ollama": self.ollama,
        }

    @classmethod
    def schema(cls) -> dict:
        from ...jsonschema import BOOL, COUNT, POS, STR, arr, null, obj

        BYTES, nullable = COUNT, null

        cache = obj({"kind": {"enum": ["kv", "swa", "recurrent"]}, "cells": COUNT, "layers": COUNT, "k_bytes": BYTES,
                     "v_bytes": BYTES, "r_bytes": BYTES, "s_bytes": BYTES,
                     "buffers": {"type": "object", "additionalProperties": BYTES}})
        props = {"frontend": {"enum": list(FRONTENDS)}, "command": STR, "defaults": arr(STR), "n_ctx": POS,
                 "n_ctx_seq": POS, "n_seq_max": POS, "n_stream": POS, "n_batch": POS, "n_ubatch": POS,
                 "flash_attn": {"enum": ["auto", "enabled", "disabled"]}, "kv_unified": BOOL,
                 "swa_full": BOOL, "type_k": {"enum": list(CACHE_TYPE_NAMES)},
                 "type_v": {"enum": list(CACHE_TYPE_NAMES)}, "caches": arr(cache), "memory_bytes": BYTES,
                 "cache_gpu_bytes": BYTES, "cache_cpu_bytes": BYTES, "weights_bytes": nullable(BYTES),
                 "weights_basis": STR, "gpu_bytes": BYTES, "cpu_bytes": BYTES, "max_parallel": nullable(COUNT),
                 "max_ctx_size": nullable(COUNT), "log": arr(STR),
                 "ollama": nullable({"type": "object", "description": "the ollama front end: ollama's own prediction "
                                     "(PredictServerVRAM) beside llama.cpp's allocation; null for the other front ends",
                                     "required": ["version", "predicted_bytes", "file_bytes", "kv_bytes", "n_ctx",
                                                  "gpu_threshold_bytes", "differences"]})}
        return {"properties": props, "required": list(props)}


class LlamaCppEngine(Engine):
    name = NAME
    version = VERSION
    title = TITLE
    summary = SUMMARY
    Settings = Settings
    Figures = LlamaFigures
    logs = _logs.READER
    options = OPTIONS
    capabilities = frozenset({Capability.TRANSFER})
    budget_keys = ("fit_margin_bytes",)
    plan_names = {"layouts": ("cells",), "kinds": ("kv", "swa", "recurrent"), "units": ("cell",)}
    default_reserve_bytes = FIT_MARGIN
    reserve_note = ("llama-server --fit's margin per device (common/common.h fit_params_target, 1 GiB); the compute "
                    "buffers are not modelled")
    long_context = "llama.cpp warns (possible training context overflow) and runs it"

    @property
    def cache_kinds(self):  # the kinds llama.cpp keeps, by exact type
        from ...specs import (ChunkedAttention, FullAttention, GatedDeltaNetState, Mamba1State, Mamba2State,
                              MLALatent, ShortConvState, SlidingWindowAttention)

        return frozenset({FullAttention, SlidingWindowAttention, ChunkedAttention, MLALatent, Mamba1State,
                          Mamba2State, GatedDeltaNetState, ShortConvState})

    kind_hint = " (llama.cpp 0c1e57098 keeps attention K / V, MLA latents and Mamba / gated delta net / LFM2 state)"

    # ---- settings -----------------------------------------------------------------------------------------
    def defaults(self, given: dict, *, gpu=None, model=None) -> dict:
        out = {}
        if gpu is not None:
            if "gpu_memory" not in given:
                out["gpu_memory"] = gpu.memory_bytes
        return out

    def _with_arch(self, settings, arch):
        if arch and settings.arch is None:
            return replace(settings, arch=arch)
        return settings

    def check_tp(self, model, tp: int) -> None:
        if tp != 1:
            raise KvcalcError(f"tp: kvcalc plans llama.cpp on one GPU (llama.cpp splits layers over GPUs by "
                              f"--tensor-split, which is not modelled), got {tp}", param="tp")

    def pp_stages(self, num_layers: int, pp: int):
        if pp != 1:
            raise KvcalcError(f"pp: kvcalc plans llama.cpp on one GPU, got {pp} pipeline stages", param="pp")
        return [range(num_layers)]

    def with_precision(self, spec, precision, settings):
        """The settings with the cache types a ggml precision names (``-p q8_0``: ``-ctk q8_0 -ctv q8_0``;
        ``-p q8_0/q4_0``: K and V apart; ollama: OLLAMA_KV_CACHE_TYPE), where the model declares no precision of
        that name and no cache-type flag was given; a flag that names another type is refused."""
        name = getattr(precision, "name", precision)
        if not isinstance(settings, Settings) or name in spec.precisions:
            return settings
        parts = name.lower().split("/")
        if len(parts) > 2 or any(x not in CACHE_TYPE_NAMES for x in parts):
            return settings
        k, v = (parts * 2)[:2]
        if settings.frontend == "ollama":
            if k != v:
                raise KvcalcError(f"precision: ollama sets one cache type for K and V (OLLAMA_KV_CACHE_TYPE); "
                                  f"{name} names two", param="precision")
            given = {"kv_cache_type": k}
        else:
            given = {"cache_type_k": k, "cache_type_v": v}
        for field_name, want in given.items():
            have = getattr(settings, field_name)
            if have is not None and have != want:
                flag = "--" + field_name.replace("_", "-")
                raise KvcalcError(f"precision: {name} asks for a {want} cache, {flag} {have} for another; give one",
                                  param="precision")
        return replace(settings, **given)

    def stored_formats(self, spec, precision, settings) -> dict[str, str]:
        from ...specs import MLALatent, RecurrentState

        ln = launch(self.with_precision(spec, precision, settings), arch=getattr(spec.gguf, "arch", None))
        L.check_types(L.model_caches(spec), ln.type_k, ln.type_v, ln.flash_attn)  # llama.cpp's refusals first
        k, v = KVCALC_FORMAT[ln.type_k.name], KVCALC_FORMAT[ln.type_v.name]
        out = {}
        for name, comp in spec.components.items():
            if isinstance(comp, RecurrentState):
                out[name] = "fp32"
            elif type(comp) is MLALatent or k == v:
                out[name] = k
            else:
                out[name] = f"{k}/{v}"
        return out

    def format_hint(self, component: str, fmt: str) -> str:
        return " (llama.cpp stores what -ctk / -ctv say, f16 by default; recurrent state in f32)"

    def default_precision(self, spec, settings=None) -> str | None:
        return None

    # ---- context --------------------------------------------------------------------------------------------
    #: the headers' word for the plan's context: what one slot (sequence) holds
    context_name = "a slot's context"

    def context_limit(self, spec) -> int | None:
        return None  # llama.cpp runs past the training context (with a warning)

    def default_context(self, spec, settings=None) -> int | None:
        """The context of one request as the front end launches it: llama-server's training context (its fit asks
        n_ctx_train per stream), 512 for the C API and llama-cpp-python, ollama's num_ctx; with --ctx-size, what
        one slot holds."""
        mc = L.model_caches(spec)
        s = settings if isinstance(settings, Settings) else Settings()
        ln = _launch(spec, s, mc)
        if ln.n_ctx is None:
            return mc.n_ctx_train or 4096
        n_ctx = ln.n_ctx or mc.n_ctx_train or 4096
        if ln.frontend == "ollama":
            return n_ctx // ln.n_seq_max
        return n_ctx if ln.kv_unified else L.pad(n_ctx // ln.n_seq_max, L.CTX_PAD)

    # ---- the plan -------------------------------------------------------------------------------------------
    def _cparams(self, mc: L.ModelCaches, ln: Launch, s: Settings, n_ctx: int, slots: int) -> L.Cparams:
        backend, device = backend_of(s.arch)
        ngl = mc.n_layer_all + 1 if ln.n_gpu_layers < 0 else ln.n_gpu_layers
        return L.context_params(mc, n_ctx=n_ctx, n_seq_max=slots, kv_unified=ln.kv_unified, n_batch=ln.n_batch,
                                n_ubatch=ln.n_ubatch, flash_attn=ln.flash_attn, swa_full=ln.swa_full,
                                type_k=ln.type_k, type_v=ln.type_v, offload_kqv=ln.offload_kqv, n_gpu_layers=ngl,
                                backend=backend, device=device, n_rs_seq=s.n_rs_seq)

    def plan(self, job):
        spec, C = job.model, job.context
        s = self.with_precision(spec, job.precision, job.settings)
        mc = L.model_caches(spec)
        ln = _launch(spec, s, mc)

        def n_ctx_for(per_request: int, slots: int) -> int:
            """-c that gives ``slots`` requests of ``per_request`` tokens their cells at once."""
            return per_request * slots

        fixed = ln.n_ctx  # None: sized from the request (llama-server without -c: the training context per stream)
        if fixed is None:  # -c sized to give every slot the request's context (llama-server's own -c 0: n_ctx_train)
            n_ctx = n_ctx_for(C, ln.n_seq_max)
            ln = replace(ln, defaults=ln.defaults + (
                f"-c {n_ctx:,} = {C:,} tokens x {ln.n_seq_max} slot(s) (kvcalc's context; -c given to kvcalc sets it; llama-server's own -c 0 "
                f"would ask n_ctx_train{'' if ln.kv_unified else ' x slots'})",) if ln.frontend == "llama-server"
                else ln.defaults)
        else:
            n_ctx = fixed
        cp = self._cparams(mc, ln, s, n_ctx, ln.n_seq_max)
        if C > cp.n_ctx_seq:
            how = (f"-c {fixed:,} over -np {ln.n_seq_max}" if ln.frontend != "ollama"
                   else f"num_ctx {fixed // ln.n_seq_max:,}")
            raise KvcalcError(f"context: a request of {C:,} tokens does not fit one sequence of llama.cpp's context: "
                              f"n_ctx_seq = {cp.n_ctx_seq:,} cells ({how})", param="context")
        alloc = L.Allocation(mc, cp, L.allocate(mc, cp), mc.notes)

        def at(slots: int, n_ctx_asked: int | None) -> L.Allocation:
            c = self._cparams(mc, ln, s, n_ctx if n_ctx_asked is None else n_ctx_asked, slots)
            return L.Allocation(mc, c, L.allocate(mc, c), mc.notes)

        all_kinds = tuple(spec.layers) + tuple(spec.mtp_layers)  # llama.cpp caches a NextN / MTP layer where it has KV
        groups = []
        for i, c in enumerate(alloc.caches):
            members = tuple((layer, name) for layer in c.layers if layer < len(all_kinds)
                            for name in spec.layer_kinds[all_kinds[layer]] if _holds(spec.components[name], c.kind))
            per_layer = {}
            for t in c.tensors:
                per_layer[t.layer] = per_layer.get(t.layer, 0) + t.type.row_size(t.ne0)
            row = max(per_layer.values(), default=0)
            comps = tuple(dict.fromkeys(n for _, n in members))
            pages = tuple(PlanPage(n, spec.components[n].kind, "/".join(sorted({t.type.name for t in c.tensors}))
                                   or "-", 1, 1, row, row, row, sum(1 for _, m in members if m == n)) for n in comps)
            kind = {"kv": GroupKind.FULL, "swa": GroupKind.WINDOW, "recurrent": GroupKind.STATE}[c.kind]
            # one request's exact bytes in this cache's components (kvcalc.estimate at the context)
            held = sum(b for (layer, comp), b in job.analytic.items() if (layer, comp) in set(members))
            groups.append(PlanGroup(i, kind, c.layers, members, 1, pages, c.cells, held,
                                    window=mc.n_swa if c.kind == "swa" else None))
        notes = tuple(mc.notes) + tuple(w.split(": ", 1)[1] if w.startswith("llama_") else w
                                        for w in cp.warnings)
        weights = _weights(spec, cp, mc)
        hp = getattr(spec, "gguf", None)
        prediction = None
        if ln.frontend == "ollama" and hp is not None:
            from .ollama import predict

            prediction = predict(hp, n_ctx)
        return LlamaPlan(engine=NAME, engine_version=VERSION, model=spec.name, precision=job.precision.name,
                         context=C, settings=s, settings_json=_settings_json(ln, cp), groups=tuple(groups),
                         analytic_bytes=job.total, notes=notes, model_caches=mc, launch=ln, allocation=alloc, at=at,
                         n_ctx_for=n_ctx_for, weights=weights, ollama=prediction, n_ctx_asked=n_ctx)

    single_request = {"parallel": 1}

    def request_figures(self, plan) -> dict:
        """One slot holding the request (``single_request``): -c the context (padded to 256), -np 1, the front end's
        other defaults."""
        one = plan.allocation
        cp = one.cparams
        return {"command": plan.launch.command(cp.n_ctx), "n_ctx": cp.n_ctx, "n_ctx_seq": cp.n_ctx_seq,
                "caches": [c.to_json() for c in one.caches],
                "log": [x for x in one.log_lines() if "size" in x]}

    def transfer_groups(self, p, spec, tokens: int):
        """llama-server's slot save / restore of a request of ``tokens`` prompt tokens: the file
        ``POST /slots/{id}?action=save`` writes (its ``n_written``) and ``action=restore`` reads, cache by cache
        (state.py): each cache's cells at their bytes, and beside them the headers and the packed tokens."""
        from ...handoff import TransferGroup, TransferPlan
        from . import state as S

        a = p.allocation
        secs = S.sections(a.model, a.cparams, tokens)
        groups = []
        for i, sec in enumerate(secs):
            if sec.kind == "recurrent":
                groups.append(TransferGroup(i, "state", "R, S (f32)", sec.layers, "state slot", 0, sec.cells,
                                            sec.cell_bytes, "one state row a sequence, whatever its tokens "
                                            "(llama-memory-recurrent.cpp state_write)"))
                continue
            rule = ("every token's cell (llama-kv-cache.cpp state_write)" if sec.kind == "kv" else
                    f"the window's unmasked cells: {sec.cells:,} of {tokens:,} (is_masked_swa, {a.model.swa_type} "
                    f"window {a.model.n_swa:,})")
            label = "K" if a.model.mla else "K, V"
            groups.append(TransferGroup(i, "full" if sec.kind == "kv" else f"window {a.model.n_swa}", label,
                                        sec.layers, "cell", 1, sec.cells, sec.cell_bytes, rule))
        headers = sum(sec.header_bytes for sec in secs)
        framing = S.FILE_HEADER + 4 * (tokens + S.SERVER_TOKENS)
        written = S.server_file_bytes(a.model, a.cparams, tokens)
        notes = (f"llama-server's slot file (POST /slots/{{id}}?action=save, --slot-save-path): n_written = "
                 f"{written:,} B, n_saved = {tokens:,}; restore reads the same file. Beside the cells: {headers:,} B "
                 f"of cache headers and {framing:,} B of file header and packed tokens; llama_state_seq_get_size "
                 f"says {S.seq_get_size(a.model, a.cparams, tokens):,} B (the state with its 8-byte prefix, no "
                 "tokens)",
                 "the file holds the prompt's cells only (the cache's size, -c and the SWA cache's cells, does not "
                 "enter); a multimodal prompt adds its media chunks to the packed tokens (not modelled)")
        train = a.model.n_ctx_train
        if train and tokens > train:
            notes += (f"the prompt's {tokens:,} tokens are past the model's training context {train:,}: llama.cpp "
                      "runs it with a warning (possible training context overflow)",)
        aux = framing + headers
        return TransferPlan(tuple(groups), tokens, aux, notes, moved="saved to a llama-server slot file and restored",
                            aux_label="file header, packed tokens, cache headers",
                            basis="llama-server's slot file as llama.cpp 0c1e57098 writes it (llama_state_seq_save_file "
                                  "of the slot's sequence): every cache's cells of the prompt at their bytes in the "
                                  "cache types, the caches' headers, the file header and the packed tokens; one "
                                  "process on one device; the time is the file's bytes over one link at its peak "
                                  "one-way rate (no disk, no protocol overhead); bytes exact, binary units; link rates "
                                  "decimal")

    def weights_on_gpu(self, plan) -> tuple[int, int, str] | None:
        w = getattr(plan, "weights", None)
        return None if w is None else (w[0], w[1], w[3])

    # ---- fit ------------------------------------------------------------------------------------------------
    def refusal(self, plan, pool: int) -> str:
        a = plan.allocation
        best = self._max_ctx_size(plan, pool)
        more = (f" The longest {{{{ctx_size}}}} that fits at {{{{parallel}}}} {a.cparams.n_seq_max} is {best:,}."
                if best else "")
        return (f"{plan.model}: llama.cpp's caches for -c {a.cparams.n_ctx:,} (-np "
                f"{a.cparams.n_seq_max}) take {a.gpu_bytes:,} B on the GPU, more than the {pool:,} B left for them."
                + more)

    def _max_ctx_size(self, plan: LlamaPlan, pool: int) -> int:
        """The longest n_ctx asked (a multiple of 256 per stream) whose caches fit ``pool`` on the GPU."""
        slots = plan.allocation.cparams.n_seq_max
        step = L.CTX_PAD * (1 if plan.launch.kv_unified else slots)
        return longest_context(lambda k: plan.at(slots, k * step).gpu_bytes <= pool, (1 << 32) // step) * step

    def _max_parallel(self, plan: LlamaPlan, pool: int) -> int | None:
        """The most slots of the plan's context whose caches fit ``pool`` (the front end's -c sized to hold them all,
        as n_ctx = context x slots); None where --ctx-size fixes the context."""
        if plan.launch.n_ctx is not None:
            return None
        C = plan.context
        return longest_context(lambda n: plan.at(n, plan.n_ctx_for(C, n)).gpu_bytes <= pool, L.LLAMA_MAX_SEQ)

    def fit(self, plans: list, pool: int, settings, parallel) -> Fit:
        p: LlamaPlan = plans[0]
        a = p.allocation
        if a.gpu_bytes > pool:
            raise NoRoom(self.refusal(p, pool), "kv")
        cp = a.cparams
        at_once = cp.n_seq_max if not cp.kv_unified else min(cp.n_seq_max, cp.n_ctx // p.context)
        w = getattr(p, "weights", None)
        figures = LlamaFigures(p.launch.frontend, p.launch.command(a.cparams.n_ctx), p.launch.defaults, a,
                               *(w if w is not None else (None, 0, 0, "")),
                               self._max_parallel(p, pool), self._max_ctx_size(p, pool), _ollama_json(p))
        lines = [f"{'llama.cpp' if p.launch.frontend != 'ollama' else 'ollama'} launch: {figures.command}"]
        if p.launch.defaults:
            lines.append(f"{p.launch.frontend} defaults taken: {'; '.join(p.launch.defaults)}.")
        lines += [f"llama.cpp would log: {x}" for x in a.log_lines()]
        lines.append(f"Caches: {format_bytes(a.memory_bytes)} ({a.memory_bytes:,} B) in all, "
                     f"{format_bytes(a.gpu_bytes)} on the GPU and {format_bytes(a.cpu_bytes)} on the CPU.")
        if cp.kv_unified:
            lines.append(f"One unified stream of {cp.n_ctx:,} cells shared by {cp.n_seq_max} slot(s): {at_once} "
                         f"request(s) of {p.context:,} tokens hold their cells at once.")
        else:
            lines.append(f"{cp.n_seq_max} stream(s) of {cp.n_ctx_seq:,} cells: one request of up to "
                         f"{cp.n_ctx_seq:,} tokens in each.")
        if figures.max_parallel is not None:
            lines.append(f"The most -np slots of {p.context:,} tokens whose caches fit the "
                         f"{format_bytes(pool)} pool: {figures.max_parallel}.")
        if figures.max_ctx_size:
            lines.append(f"The longest -c at -np {cp.n_seq_max} that fits: {figures.max_ctx_size:,}.")
        if figures.ollama is not None:
            o = figures.ollama
            within = ("within" if o["within_threshold"] else "past")
            lines.append(f"ollama {o['version']}'s own prediction (llm/llama_server.go PredictServerVRAM): "
                         f"{format_bytes(o['predicted_bytes'])}, {within} 80% of the GPU's "
                         f"{format_bytes(o['gpu_memory_bytes'])} ({o['gpu_threshold_bytes']:,} B; with several GPUs "
                         "ollama picks one whose free memory's 80% holds it, with one it launches llama-server "
                         "whatever it predicts, and llama-server's fit places the layers).")
            lines.append(f"Why they differ: {o['differences']}.")
        elif p.launch.frontend == "ollama":
            lines.append("ollama's own prediction needs the GGUF (its file size and metadata): give the .gguf file.")
        return Fit(cp.n_ctx, at_once, at_once, at_once * p.context, tuple(lines), figures=figures,
                   log_line=next((x for x in a.log_lines() if "KV buffer size" in x), None))

    def max_context(self, plans: list, pool: int, concurrency: int, limit: int, settings, parallel) -> int:
        """The longest context at which ``concurrency`` requests hold their cells at once: ``concurrency`` slots
        (non-unified: a stream each; unified: one stream of context x slots)."""
        p: LlamaPlan = plans[0]
        if p.launch.n_ctx is not None:
            return p.allocation.cparams.n_ctx_seq if p.allocation.gpu_bytes <= pool else 0
        return longest_context(lambda ctx: p.at(concurrency, p.n_ctx_for(ctx, concurrency)).gpu_bytes <= pool, limit)

    def workload_room(self, p, pool: int, fit) -> int:
        cp = p.allocation.cparams
        return cp.n_ctx if cp.kv_unified else cp.n_seq_max

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        from ...workload import Cost

        cp = p.allocation.cparams
        if cp.kv_unified:  # a request holds its own cells of the shared stream; slots cap the count
            return Cost("cells", tokens, 0, {"parallel": cp.n_seq_max})
        return Cost("streams", 1, 0, {})  # a stream of n_ctx_seq cells a request, whatever its length

    def summary_line(self, cap) -> str:
        cp = cap.plan.allocation.cparams
        return (f"{cp.n_seq_max} slot(s), {cp.n_stream} stream(s) of {cp.n_ctx_seq:,} cells; caches "
                f"{cap.plan.allocation.memory_bytes:,} B")

    # ---- budget ---------------------------------------------------------------------------------------------
    def budget(self, settings, gpu, model=None, parallel=None) -> Budget:
        """llama.cpp asks for what its buffers need; the device's total memory bounds them."""
        return Budget(gpu.memory_bytes, (BudgetStep("the device's memory", gpu.memory_bytes),),
                      f"{gpu.memory_bytes / GIB:.2f} GiB", {"fit_margin_bytes": FIT_MARGIN})


def _ollama_json(p: "LlamaPlan") -> dict | None:
    """ollama's prediction of the launch beside the allocation (--frontend ollama with a GGUF)."""
    from .ollama import VERSION as OLLAMA, differences

    pred = p.ollama
    if pred is None:
        return None
    gpu = p.settings.gpu_memory or 0  # the plan's settings: --gpu set it
    threshold = gpu * 80 // 100
    w = p.weights
    return {"version": OLLAMA, "predicted_bytes": pred.total_bytes, "file_bytes": pred.file_bytes,
            "kv_bytes": pred.kv_bytes, "n_ctx": pred.n_ctx, "layers": pred.layers, "kv_heads": pred.kv_heads,
            "head_dim": pred.head_dim, "gpu_memory_bytes": gpu, "gpu_threshold_bytes": threshold,
            "within_threshold": pred.total_bytes <= threshold, "num_batch": p.launch.n_batch,
            "differences": differences(pred, p.allocation, None if w is None else w[1])}


def _launch(spec, s: Settings, mc: L.ModelCaches) -> Launch:
    """The front end's launch for ``spec``: ollama's from the GGUF's architecture and its own prediction of the load
    (PredictServerVRAM, where a GGUF gives the file)."""
    from .ollama import predict

    hp = getattr(spec, "gguf", None)
    return launch(s, gpu_memory=s.gpu_memory, n_ctx_train=mc.n_ctx_train, arch=mc.arch,
                  predict=None if hp is None else (lambda n_ctx: predict(hp, n_ctx).total_bytes),
                  cuda=backend_of(s.arch)[1].startswith("CUDA"))


def _weights(spec, cp: L.Cparams, mc: L.ModelCaches) -> tuple | None:
    """A GGUF's weights by device, as llama.cpp places them (llama-model.cpp load_tensors): layer il on the GPU
    when il >= n_layer_all + 1 - n_gpu_layers, the output layer (index n_layer_all: output, output_norm) with any
    -ngl >= 1, token_embd always on the CPU. A GPU tensor is its own allocation there (ggml_nbytes plus CUDA's
    quantized-row padding, padded to the buffer's alignment); the CPU's are the mapped file range of the tensors
    left there (get_mapping_range), as llama.cpp logs its CPU_Mapped model buffer."""
    w = getattr(spec, "gguf_weights", None)
    if w is None:
        return None
    start = max(mc.n_layer_all + 1 - cp.n_gpu_layers, 0) if cp.device != "CPU" else mc.n_layer_all + 2
    on_gpu = lambda t: (t.part == "layer" and t.layer >= start) or (t.part == "output" and  # noqa: E731
                                                                     mc.n_layer_all >= start)
    gpu = [t for t in w.used if on_gpu(t)]
    cpu = [t for t in w.used if not on_gpu(t)]
    gpu_bytes = sum(buffer_bytes(_Type(t), t.ne0, t.nbytes, cp.backend) for t in gpu)
    cpu_bytes = w.mapped(cpu)
    n = sum(1 for t in gpu if t.part == "layer")
    basis = (f"the GGUF's {len(w.used):,} tensors ({w.nbytes:,} B): {len(gpu):,} on the GPU "
             f"({cp.n_gpu_layers if cp.device != 'CPU' else 0} of {mc.n_layer_all + 1} layers offloaded, "
             f"{n} tensors of blk.*), the rest mapped on the CPU")
    return w.nbytes, gpu_bytes, cpu_bytes, basis


@dataclass(frozen=True)
class _Type:
    """A weight tensor's ggml type, as ggml.buffer_bytes reads one."""

    t: object

    @property
    def quantized(self) -> bool:
        return self.t.quantized

    def row_size(self, ne: int) -> int:
        return self.t.type_size * ne // self.t.blck_size


def _holds(comp, kind: str) -> bool:
    from ...specs import RecurrentState

    return isinstance(comp, RecurrentState) if kind == "recurrent" else not isinstance(comp, RecurrentState)


def _settings_json(ln: Launch, cp: L.Cparams) -> dict:
    return {"frontend": ln.frontend, "n_ctx": cp.n_ctx, "n_seq_max": cp.n_seq_max, "kv_unified": cp.kv_unified,
            "type_k": cp.type_k.name, "type_v": cp.type_v.name, "flash_attn": cp.flash_attn, "swa_full": cp.swa_full,
            "n_batch": cp.n_batch, "n_ubatch": cp.n_ubatch}


ENGINE = LlamaCppEngine()
