"""TensorRT-LLM 1.1's pool plan of one rank and its count of requests (the rules: :mod:`.sizing`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...errors import KvcalcError, NoRoom
from ...hardware import arch_major
from ...pool import BlockPoolPlan, GroupKind, Layout, PlanGroup, PlanPage, longest_context
from ...specs import Mamba2State, MLALatent, SlidingWindowAttention
from ..base import EngineFigures, Fit, HostTier
from . import sizing as Z
from .options import NAME, TITLE, VERSION


@dataclass(frozen=True, kw_only=True)
class TrtPlan(BlockPoolPlan):
    """One rank's paged pool: blocks of ``tokens_per_block`` tokens of every attention layer (the pool's shape
    {blocks, layers, kv_factor, heads x head_dim x tokens_per_block}); the creator's and the pool's bytes per token,
    the dtype, the profiling run's temporary cache."""

    tokens_per_block: int
    creator_bytes_per_token: int
    manager_bytes_per_token: int
    dtype: str
    max_seq_len: int
    estimation_requests: int
    estimation_tokens: int
    windows: tuple = ()  # ((window, layers, manager bytes per token), ...) with variable sliding windows
    state_bytes: int = 0  # a Mamba hybrid's state of one request on this rank (MambaCacheManager's slot)

    @property
    def estimation_bytes(self) -> int:
        return self.estimation_tokens * self.manager_bytes_per_token

    # ---- variable sliding windows: a pool per window size ------------------------------------------------
    @property
    def per_request_bytes(self) -> int:
        if not self.windows and not self.state_bytes:
            return super().per_request_bytes
        return sum(self.group_reserve(g) for g in self.groups)

    def group_reserve(self, g) -> int:
        if g.kind is GroupKind.STATE:
            return self.state_bytes
        if not self.windows:
            return g.blocks_per_request * self.bytes_per_block
        return g.blocks_per_request * self.tokens_per_block * self.windows[g.index][2]

    def window_blocks(self, pool: int) -> dict[int, int]:
        """BaseKVCacheManager::calculateMaxNumBlocks: the memory (max_gpu_total_bytes, which KvCacheCreator sets to
        its budget; a user's smaller one caps it) split over the window sizes, each capped by KvCacheCreator's
        max_tokens, blocks rounded up."""
        memory = pool if not self.settings.max_gpu_total_bytes else min(pool, self.settings.max_gpu_total_bytes)
        return Z.window_blocks(memory, {w: b for w, _, b in self.windows}, self.tokens_per_block,
                               self.max_tokens(pool))

    def window_requests(self, pool: int, ctx: int) -> int:
        """Requests of ``ctx`` tokens the window pools hold: getRemainingBlocksToCompletion's
        ceil(min(ctx, window) / tokens_per_block) blocks in each (no temporary attention window: chunked prefill is
        off by default), the fewest over the windows."""
        blocks = self.window_blocks(pool)
        return min(blocks[w] // -(-min(ctx, w) // self.tokens_per_block) for w, _, _ in self.windows)

    def max_tokens(self, pool: int) -> int:
        """KvCacheCreator's max_tokens: the memory // the creator's bytes per token, at most the user's max_tokens."""
        n = pool // self.creator_bytes_per_token
        return n if self.settings.max_tokens is None else min(n, self.settings.max_tokens)

    def pool_tokens(self, pool: int) -> float:
        """KVCacheManager.calculate_max_num_blocks: ``min(max_tokens, fraction x free / bytes per token)``, the free
        memory once the profiling run is gone (what the memory figure was a fraction of), at the pool's bytes per
        token: fewer where tp exceeds the KV heads (ceil(kv_heads / tp) heads a layer)."""
        return min(self.max_tokens(pool), pool / self.manager_bytes_per_token)

    def num_blocks(self, pool_bytes: int) -> int:
        """Primary blocks (with windows: the largest window's pool)."""
        if self.windows:
            return self.window_blocks(pool_bytes)[self.windows[-1][0]]
        return Z.primary_blocks(self.pool_tokens(pool_bytes), self.tokens_per_block)

    def requests_that_fit(self, num_blocks: int) -> int:
        return num_blocks // self.blocks_per_request

    def cache_tokens(self, num_blocks: int) -> int:
        """The "(N)" of "Allocated ... GiB for max tokens in paged KV cache (N)": blocks x tokens_per_block."""
        return num_blocks * self.tokens_per_block

    def fits_one(self, pool_bytes: int) -> bool:
        if self.windows:
            return self.window_requests(pool_bytes, self.context) >= 1
        return self.num_blocks(pool_bytes) >= self.blocks_per_request

    def max_context(self, pool_bytes: int, concurrency: int = 1, limit: int | None = None) -> int:
        if self.windows:
            return longest_context(lambda ctx: self.window_requests(pool_bytes, ctx) >= concurrency,
                                   self.context if limit is None else limit)
        n = self.num_blocks(pool_bytes)
        return longest_context(lambda ctx: concurrency * self.blocks_at(ctx) <= n,
                               self.context if limit is None else limit)


@dataclass(frozen=True)
class TrtFigures(EngineFigures):
    """TensorRT-LLM's own figures of a fit, by its names."""

    kv_bytes_per_token: int  # the creator's ("kv size is N" in the log)
    pool_bytes_per_token: int  # the pool's (get_cache_bytes_per_token)
    tokens_per_block: int
    blocks: int  # primary blocks
    max_tokens: int  # KvCacheCreator's max_tokens (before the blocks' rounding)
    kv_cache_bytes: int  # blocks x tokens_per_block x the pool's bytes per token
    max_seq_len: int  # after the window cap
    max_seq_len_asked: int
    estimation_requests: int
    estimation_tokens: int
    estimation_bytes: int
    available_kv_bytes: int
    max_batch_size: int
    running_per_replica: int
    secondary_blocks: int

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def schema(cls) -> dict:
        from ...jsonschema import COUNT, POS

        props = {k: COUNT for k in cls.__dataclass_fields__}
        for k in ("kv_bytes_per_token", "pool_bytes_per_token", "tokens_per_block", "max_seq_len",
                  "max_seq_len_asked", "max_batch_size"):
            props[k] = POS
        return {"properties": props, "required": list(props)}


def _refuse(text: str) -> KvcalcError:
    return KvcalcError(f"{{{{engine}}}} {NAME}: {text}", param="engine")


def _layers(job) -> tuple[list, list, str]:
    """This rank's attention layers as TensorRT-LLM's manager sees them, their (layer, component) members, and the
    cache dtype."""
    spec = job.model
    members = sorted(m for m in job.analytic if not isinstance(spec.components[m[1]], Mamba2State))
    layers, dtypes, shapes = [], set(), set()
    for _layer, comp in members:
        c = spec.components[comp]
        dtypes.add(job.stored_formats.get(comp) or job.precision.formats[c.storage].name)
        if isinstance(c, MLALatent):
            layers.append(Z.Layer(1, c.dim, mla=True))
            shapes.add(("mla", c.dim))
            continue
        if c.value_dim != c.head_dim:
            raise _refuse(f"{TITLE} caches K and V of one head_dim; {spec.name}'s {comp} has head_dim {c.head_dim} "
                          f"and v_head_dim {c.value_dim}")
        layers.append(Z.Layer(c.kv_heads, c.head_dim, window=c.window if isinstance(c, SlidingWindowAttention)
                              else None))
        shapes.add((c.kv_heads, c.head_dim))
    if len(shapes) > 1:  # get_cache_size_per_token reads one num_key_value_heads and head_dim from the config
        raise _refuse(f"{spec.name}'s attention layers differ in heads or head size ({len(shapes)} shapes); "
                      f"{TITLE}'s per-token size from one config head count is not modelled for it")
    if len(dtypes) > 1:
        raise _refuse(f"{spec.name}'s caches are stored in {len(dtypes)} dtypes; {TITLE} keeps one cache dtype")
    fmt = dtypes.pop()
    return layers, members, Z.DTYPE_OF_FORMAT[fmt]


def trt_plan(job):
    """The pool of one rank: every attention layer's K and V (or MLA latent) for ``tokens_per_block`` tokens a
    block; sliding-window layers are planned at max_seq_len, as TensorRT-LLM does without max_attention_window."""
    spec, s = job.model, job.settings
    if s.max_seq_len is None:
        s = replace(s, max_seq_len=job.context)
    notes = []
    limit = Z.inferred_max_seq_len(spec)
    if limit is not None and s.max_seq_len > limit:  # model_engine.py _init_max_seq_len
        notes.append(f"Specified max_seq_len={s.max_seq_len} is larger than what the model can support ({limit}): "
                     f"TensorRT-LLM sets max_seq_len to {limit}")
        s = replace(s, max_seq_len=limit)
    if s.max_seq_len != job.context:
        notes.append(f"max_seq_len {s.max_seq_len:,} ({{{{max_seq_len}}}}); the requests counted are of {job.context:,} "
                     "tokens")
    if job.mtp:
        raise _refuse(f"{TITLE}'s speculative decoding (MTP draft layers and tokens) is not modelled; plan without "
                      "{{mtp}}")
    if not job.analytic:
        raise KvcalcError(f"{spec.name}: no cache layers in this pipeline stage")
    layers, members, dtype = _layers(job)
    state_members = sorted(m for m in job.analytic if isinstance(spec.components[m[1]], Mamba2State))
    state = _mamba_state(job, s, state_members)
    windows = _windows(s, members, layers)
    if dtype == "nvfp4" and any(layer.mla for layer in layers):
        raise _refuse(f"{TITLE} keeps no nvfp4 MLA cache in this profile; choose bf16 or fp8 ({{{{precision}}}})")
    if dtype == "nvfp4" and (arch_major(s.arch) or 0) < 10:
        raise _refuse(f"{TITLE}'s nvfp4 KV cache runs on Blackwell (sm100 and later), not on {s.arch or 'Hopper'} "
                      "({{precision}}, {{gpu}})")
    tpb = s.tokens_per_block
    creator = Z.creator_bytes_per_token(layers, dtype, job.tp)
    manager = Z.manager_bytes_per_token(layers, dtype, job.tp)
    if creator <= 0 or manager <= 0:
        raise _refuse(f"{spec.name} on {job.tp} ranks: {TITLE}'s kv size per token is {creator} B "
                      "(head_dim x kv_heads // tp is 0); a smaller tp")
    n = Z.effective_max_num_tokens(s.max_num_tokens, s.max_seq_len, s.max_batch_size)
    if n < s.max_num_tokens:
        notes.append(f"max_num_tokens {s.max_num_tokens:,} is more than max_seq_len x max_batch_size: TensorRT-LLM "
                     f"takes {n:,} (model_engine.py _init_max_num_tokens)")
    requests, tokens = Z.estimation_tokens(n, s.max_seq_len, tpb, not s.disable_overlap_scheduler)
    if s.max_tokens is not None:  # try_prepare_estimation: the smaller of it and the user's max_tokens, whole blocks
        tokens = min(tokens, s.max_tokens) // tpb * tpb
    pages: dict[tuple, int] = {}
    for (layer, comp), one in zip(members, layers):
        per = Z.manager_bytes_per_token([one], dtype, job.tp)
        pages[(comp, per)] = pages.get((comp, per), 0) + 1
    fmt = Z.FORMAT_OF_DTYPE[dtype]
    groups, by_window = _groups(job, members, layers, windows, dtype, fmt, tpb)
    if state_members:
        groups += (_state_group(job, groups, by_window, state_members, state, notes),)
    if by_window:
        notes.append(f"max_attention_window {s.max_attention_window}: a pool per window size, the memory split in "
                     "proportion to window x bytes per token (kvCacheManager.cpp calculateMaxNumBlocks), each capped "
                     "by KvCacheCreator's max_tokens (set for every manager since NVIDIA/TensorRT-LLM#7923); a request "
                     "holds ceil(min(tokens, window) / tokens_per_block) blocks of each (getRemainingBlocksToCompletion, "
                     "no chunked prefill). These rules moved between releases (#7923; #10798 splits the memory equally "
                     "per window): check them against the log's \"Blocks per window size\" lines")
    elif any(layer.window is not None for layer in layers):
        notes.append(f"{TITLE} plans the sliding-window layers at max_seq_len like the others: without "
                     "max_attention_window its KV-cache manager keeps one window, max_seq_len, for every layer "
                     "({{max_attention_window}} gives a pool per window)")
    if creator != manager:
        notes.append(f"TensorRT-LLM counts tokens at {creator:,} B each (get_cache_size_per_token: head_dim x kv_heads "
                     f"// tp) but builds blocks of {manager:,} B a token (get_cache_bytes_per_token: ceil(kv_heads / "
                     "tp) heads)")
    used = _used(s, dtype, n)
    return TrtPlan(engine=NAME, engine_version=VERSION, model=spec.name,
                   precision=job.precision.name, context=job.context, settings=s, settings_json=used,
                   groups=groups, analytic_bytes=job.total, notes=tuple(notes), fill_chunk=s.max_num_tokens,
                   layout=Layout.BLOCK_OUTERMOST, grouping="a pool per window size (max_attention_window)" if by_window
                   else "one pool of every attention layer (KVCacheManager)",
                   padding_layers=0, bytes_per_block=tpb * manager, null_blocks=0,
                   blocks_at_context=lambda ctx: tuple(0 if g.kind is GroupKind.STATE else
                                                       -(-min(ctx, g.window or ctx) // tpb) for g in groups),
                   tokens_per_block=tpb, windows=by_window, state_bytes=state,
                   creator_bytes_per_token=creator, manager_bytes_per_token=manager, dtype=dtype,
                   max_seq_len=s.max_seq_len, estimation_requests=requests, estimation_tokens=tokens)


def _used(s, dtype: str, n: int) -> dict:
    """The settings that shaped the plan, by TensorRT-LLM's names (capacity's engine_settings)."""
    return {"tokens_per_block": s.tokens_per_block, "free_gpu_memory_fraction": s.free_gpu_memory_fraction,
            "max_tokens": s.max_tokens, "max_batch_size": s.max_batch_size, "max_num_tokens": n,
            "max_seq_len": s.max_seq_len, "kv_cache_dtype": dtype, "enable_block_reuse": s.enable_block_reuse,
            "disable_overlap_scheduler": s.disable_overlap_scheduler, "host_cache_size": s.host_cache_size,
            "peak_memory_gib": s.peak_memory_gib, "device_memory_gib": s.device_memory_gib,
            "block_rounding": Z.ROUNDING}  # 1.1's calculate_max_num_blocks rounds the primary blocks up


def _state_group(job, groups: tuple, by_window, members: list, state: int, notes: list) -> PlanGroup:
    """The Mamba state's group: one slot a request (MambaCacheManager), beside the KV pool's blocks."""
    if by_window:
        raise _refuse(f"max_attention_window with {job.model.name}'s Mamba state is not modelled "
                      "({{max_attention_window}})")
    each = state // len(members)
    notes.append(f"the Mamba state ({state:,} B a request on this rank) sits in MambaCacheManager's max_batch_size "
                 f"slots, allocated whole before the profiling run; the KV cache pages the {len(groups[0].layers)} "
                 "attention layers only")
    return PlanGroup(index=len(groups), kind=GroupKind.STATE, layers=tuple(dict.fromkeys(m[0] for m in members)),
                     members=tuple(members), block_size=1,
                     pages=(PlanPage(members[0][1], "MambaCacheManager", "bf16", 1, 1, each, each, each, len(members)),),
                     blocks_per_request=0, analytic_bytes=sum(job.analytic[m] for m in members))


def _mamba_state(job, s, members: list) -> int:
    """One request's Mamba-2 state on this rank (MambaCacheManager), with its requirements: block reuse off (the
    hybrid manager asserts it), heads and conv channels that divide by tp (its asserts), one pipeline stage."""
    if not members:
        return 0
    spec = job.model
    if s.enable_block_reuse:
        raise _refuse(f"{spec.name}: mamba hybrid cache requires block reuse to be disabled in KV cache config "
                      f"({TITLE}'s MambaHybridCacheManager asserts it; {{{{enable_block_reuse}}}} off)")
    if s.pp > 1:
        raise _refuse(f"{spec.name}: {TITLE}'s Mamba state slots over pipeline stages are not modelled ({{{{pp}}}} 1)")
    total = 0
    for _layer, comp in members:
        c = spec.components[comp]
        inter = c.intermediate if c.intermediate is not None else c.heads * c.head_dim
        conv_dim = inter + 2 * c.groups * c.state_size
        for what, n in (("nheads", c.heads), ("conv_dim", conv_dim)):
            if n % job.tp:
                raise _refuse(f"{spec.name}: {what} must be divisible by tp_size ({n} over {job.tp}; "
                              "MambaCacheManager asserts it)")
        total += Z.mamba_state_bytes(conv_dim, c.conv_kernel, c.heads, c.head_dim, c.state_size, job.tp)
    return total


def _windows(s, members: list, layers: list) -> list[int] | None:
    """Each local layer's window: max_attention_window repeated over the layers, each at most max_seq_len
    (_validate_and_adjust_attention_windows); None where every layer's is max_seq_len (one pool)."""
    vec = s.windows()
    if vec is None:
        return None
    n = len(layers)
    per = [min(vec[i % len(vec)], s.max_seq_len) for i in range(n)]
    for (layer, comp), one, w in zip(members, layers, per):
        if w < s.max_seq_len and (one.window is None or w < one.window):
            has = "full attention" if one.window is None else f"a {one.window:,}-token window"
            raise _refuse(f"max_attention_window {s.max_attention_window}: layer {layer} ({comp}, {has}) would attend "
                          f"to its last {w:,} tokens only, not the model the config states; give each layer at "
                          "least its own window ({{max_attention_window}})")
    if len(set(per)) == 1:
        if per[0] < s.max_seq_len:
            raise _refuse(f"max_attention_window {s.max_attention_window}: one window shorter than max_seq_len "
                          f"({s.max_seq_len:,}) for every layer is not modelled for {TITLE} ({{{{max_attention_window}}}})")
        return None
    return per


def _groups(job, members, layers, windows, dtype: str, fmt: str, tpb: int) -> tuple[tuple, tuple]:
    """The plan's groups: one of every layer, or one per window size; and (window, layers, pool bytes per token)
    per window size, smallest first (empty with one pool)."""
    by: dict = {}
    for i, (m, one) in enumerate(zip(members, layers)):
        by.setdefault(windows[i] if windows else None, []).append((m, one))
    out, sizes = [], []
    for index, w in enumerate(sorted(by, key=lambda x: x or 0)):
        rows = by[w]
        pages: dict[tuple, int] = {}
        for (_, comp), one in rows:
            per = Z.manager_bytes_per_token([one], dtype, job.tp)
            pages[(comp, per)] = pages.get((comp, per), 0) + 1
        full = w is None or w >= job.settings.max_seq_len if job.settings.max_seq_len else w is None
        kind = GroupKind.FULL if w is None or full else GroupKind.WINDOW
        out.append(PlanGroup(index=index, kind=kind, layers=tuple(dict.fromkeys(m[0] for m, _ in rows)),
                             members=tuple(m for m, _ in rows), block_size=tpb,
                             pages=tuple(PlanPage(comp, "KVCacheManager", fmt, tpb, tpb, per, tpb * per, tpb * per, n)
                                         for (comp, per), n in pages.items()),
                             blocks_per_request=-(-min(job.context, w or job.context) // tpb),
                             analytic_bytes=sum(job.analytic[m] for m, _ in rows),
                             window=w if kind is GroupKind.WINDOW else None))
        if w is not None:
            sizes.append((w, len(rows), Z.manager_bytes_per_token([one for _, one in rows], dtype, job.tp)))
    return tuple(out), tuple(sizes)


def _window_fit(plans: list, pool: int, settings) -> Fit:
    """Variable sliding windows: each window size's pool (BaseKVCacheManager::calculateMaxNumBlocks), the window cap
    on each (a window longer than its pool's tokens is shortened, and max_seq_len with the largest), and the requests
    of the plan's context the pools hold together."""
    p = max(plans, key=lambda q: q.creator_bytes_per_token)
    tpb = p.tokens_per_block
    blocks = p.window_blocks(pool)
    need = sum(w * b for w, _, b in p.windows)  # adjust_window_sizes_for_vswa: one whole sequence in every window
    memory = pool if not settings.max_gpu_total_bytes else min(pool, settings.max_gpu_total_bytes)
    if need >= memory:
        raise NoRoom(f"{p.model}: one sequence's windows need {need:,} B, not less than the {memory:,} B of KV cache "
                     f"memory: {TITLE} then shrinks the windows (adjust_window_sizes_for_vswa), which kvcalc does not "
                     "model", "kv")
    adjusted = {w: min(w, n * tpb) for w, n in blocks.items()}
    seq = max(adjusted.values())
    held = p.window_requests(pool, p.context)
    if held < 1 or p.context > seq:
        raise NoRoom(f"{p.model}: {TITLE}'s window pools ({', '.join(f'{w}: {n:,} blocks' for w, n in blocks.items())}"
                     f") hold no request of {p.context:,} tokens (max_seq_len becomes {seq:,})", "kv")
    running = min(held, settings.max_batch_size)
    cache_bytes = sum(blocks[w] * tpb * b for w, _, b in p.windows)
    max_tokens = min(q.max_tokens(pool) for q in plans)
    second = Z.window_secondary_blocks(settings.host_cache_size, {w: b for w, _, b in p.windows}, tpb)
    lines = ["Blocks per window size:"] + [f"[windowSize={w}] {{.primaryBlocks={n}, .secondayBlocks={second[w]}}}"
                                           for w, n in blocks.items()]
    text = [f"KvCacheCreator: {pool:,} B, max_tokens {max_tokens:,} (at {p.creator_bytes_per_token:,} B a token) caps "
            f"every window's pool; {TITLE} would log: " + " / ".join(lines) + f"; {cache_bytes:,} B in all.",
            f"Requests of {p.context:,} tokens: " + ", ".join(
                f"window {w}: {blocks[w]:,} // {-(-min(p.context, w) // tpb):,}" for w, _, _ in p.windows)
            + f" = {held:,}; the scheduler runs at most max_batch_size {settings.max_batch_size:,} at once."]
    if seq < p.max_seq_len:
        text.append(f"max_seq_len {p.max_seq_len:,} is longer than the largest window's pool: \"Adjusted max_seq_len "
                    f"to {seq}\".")
    figures = TrtFigures(p.creator_bytes_per_token, p.manager_bytes_per_token, tpb, blocks[p.windows[-1][0]],
                         max_tokens, cache_bytes, seq, p.max_seq_len, p.estimation_requests, p.estimation_tokens,
                         p.estimation_bytes, pool, settings.max_batch_size, running, second[p.windows[-1][0]])
    return Fit(blocks[p.windows[-1][0]], held, held, sum(blocks.values()) * tpb, tuple(text), figures=figures,
               notes=_basis_notes(settings))


def trt_fit(plans: list, pool: int, settings) -> Fit:
    """KvCacheCreator's max_tokens (the smallest over the pipeline's ranks: an all-reduce MIN), its primary blocks,
    the window cap on max_seq_len, and the requests of the plan's context those blocks hold."""
    if plans[0].windows:
        return _window_fit(plans, pool, settings)
    p = max(plans, key=lambda q: q.creator_bytes_per_token)
    tpb = p.tokens_per_block
    max_tokens = min(q.max_tokens(pool) for q in plans)
    tokens = min(q.pool_tokens(pool) for q in plans)  # the manager's own check, then an all-reduce MIN
    blocks = Z.primary_blocks(tokens, tpb)
    upper = blocks * tpb  # get_max_atten_window_upper_bound: beam 1, no sink tokens
    seq = min(p.max_seq_len, upper)
    per = p.blocks_per_request
    if blocks < 1 or p.context > upper:
        raise NoRoom(f"{p.model}: {TITLE}'s {pool:,} B of KV cache memory make {blocks:,} block(s) of {tpb} tokens "
                     f"({max_tokens:,} tokens at {p.creator_bytes_per_token:,} B); \"Attention window size "
                     f"{p.max_seq_len} exceeds upper bound {upper} for available blocks\" and it sets max_seq_len to "
                     f"{upper:,}: a request of {p.context:,} tokens is not served. Based on the available memory the "
                     f"longest is {upper:,} tokens.", "kv")
    held = blocks // per
    if p.state_bytes:  # a request needs a Mamba state slot as well: max_batch_size of them
        held = min(held, settings.max_batch_size)
    running = min(held, settings.max_batch_size)
    cache_bytes = blocks * tpb * p.manager_bytes_per_token
    log = f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {Z.gib(cache_bytes)} GiB for max tokens in paged KV cache " \
          f"({blocks * tpb})."
    lines = [f"KvCacheCreator: {pool:,} B // {p.creator_bytes_per_token:,} B a token (\"kv size is "
             f"{p.creator_bytes_per_token}\") = max_tokens {max_tokens:,}; {blocks:,} blocks of {tpb} tokens "
             f"(ceil, 1.1's calculate_max_num_blocks) x {tpb * p.manager_bytes_per_token:,} B = {cache_bytes:,} B.",
             f"The profiling run's temporary cache: {p.estimation_requests:,} dummy request(s) summing to "
             f"max_num_tokens {p.settings_json['max_num_tokens']:,}, {p.estimation_tokens:,} tokens = "
             f"{p.estimation_bytes:,} B (the log's \"tmp kv_mem {Z.gib(p.estimation_bytes)} GiB\"); "
             + ("its peak given, it is added back." if settings.peak_memory_gib is not None else
                "it cancels out of the modelled peak."),
             f"{TITLE} would log: {log}"]
    if p.max_seq_len > upper:
        lines.append(f"max_seq_len {p.max_seq_len:,} is longer than the pool's {upper:,} tokens: TensorRT-LLM logs "
                     f"\"Adjusted max_seq_len to {upper}\"; requests of {p.context:,} tokens still fit.")
    if tokens < max_tokens:
        lines.append(f"KVCacheManager keeps {tokens:,.0f} tokens: the memory at {p.manager_bytes_per_token:,} B a token "
                     "(ceil(kv_heads / tp) heads a layer), fewer than KvCacheCreator's max_tokens.")
    if p.dtype == "nvfp4":
        lines.append("The nvfp4 pool's \"Allocated\" line is kvcalc's bytes; TensorRT-LLM's own log line for FP4 pools "
                     "may print another figure (kvCacheManager.cpp allocatePools scales FP4 volumes).")
    lines.append(f"Requests of {p.context:,} tokens: {blocks:,} // {per:,} blocks = {held:,}; the scheduler runs at "
                 f"most max_batch_size {settings.max_batch_size:,} at once ({running:,}).")
    figures = TrtFigures(p.creator_bytes_per_token, p.manager_bytes_per_token, tpb, blocks, max_tokens, cache_bytes,
                         seq, p.max_seq_len, p.estimation_requests, p.estimation_tokens, p.estimation_bytes, pool,
                         settings.max_batch_size, running,
                         Z.secondary_blocks(settings.host_cache_size, p.manager_bytes_per_token, tpb))
    return Fit(blocks, held, blocks / per, blocks * tpb, tuple(lines), figures=figures, log_line=log,
               notes=_basis_notes(settings))


def _basis_notes(settings) -> tuple[str, ...]:
    """What the memory figure rests on, where the user gave it."""
    out = []
    if settings.peak_memory_gib is not None:
        out.append(f"the profiling peak is the one given ({settings.peak_memory_gib:g} GiB, {{{{peak_memory_gib}}}}): the "
                   "weights and reserve figures are shown, not used")
    if settings.device_memory_gib is not None:
        out.append(f"the device's total is the one given ({settings.device_memory_gib:g} GiB, "
                   "{{device_memory_gib}}), not the catalogue GPU's")
    return tuple(out)


def secondary_tier(cap) -> HostTier | None:
    """KvCacheConfig.host_cache_size: the secondary pool on the host, ``int((host_cache_size / bpt) / tpb)`` blocks
    per rank (calculate_max_num_blocks), where evicted blocks are offloaded and reused from (onboard_blocks)."""
    p, s = cap.plan, cap.plan.settings
    if not s.host_cache_size:
        return None
    tpb, bpt = p.tokens_per_block, p.manager_bytes_per_token
    ranks = cap.parallel.tp * cap.parallel.pp
    if p.windows:  # calculateMaxNumBlocks: the host memory split over the windows like the GPU's
        per = Z.window_secondary_blocks(s.host_cache_size, {w: b for w, _, b in p.windows}, tpb)
        held = sum(per[w] * tpb * b for w, _, b in p.windows)
        requests = min(per[w] // -(-min(p.context, w) // tpb) for w, _, _ in p.windows)
        n = per[p.windows[-1][0]]
        lines = (f"Host (secondary) pools: host_cache_size {s.host_cache_size:,} B split over the windows like the "
                 "GPU's: " + ", ".join(f"window {w}: {per[w]:,} blocks" for w, _, _ in p.windows)
                 + f" a rank ({held:,} B); they keep {requests:,} more request(s) of {p.context:,} tokens.",)
        return HostTier("TensorRT-LLM secondary pools", n * tpb, held, "block", n, tpb, tpb * p.windows[-1][2], ranks,
                        ranks * held, requests, lines=lines,
                        source="kvCacheManager.cpp BaseKVCacheManager::calculateMaxNumBlocks",
                        json={"secondary_blocks": n, "host_cache_tokens": n * tpb, "host_cache_bytes": held})
    n = cap.fit.figures.secondary_blocks  # trt_fit counted them (calculate_max_num_blocks)
    unit = tpb * bpt
    requests = n // p.blocks_per_request
    lines = (f"Host (secondary) pool: host_cache_size {s.host_cache_size:,} B // {bpt:,} B a token // {tpb} = {n:,} "
             f"blocks a rank ({n * tpb:,} tokens, {n * unit:,} B); {ranks} rank(s) a replica take "
             f"{ranks * n * unit:,} B of pinned host memory; it keeps {requests:,} more request(s) of "
             f"{p.context:,} tokens beside the GPU's.",)
    return HostTier("TensorRT-LLM secondary pool", n * tpb, n * unit, "block", n, tpb, unit, ranks, ranks * n * unit,
                    requests, lines=lines, source="_torch/pyexecutor/resource_manager.py calculate_max_num_blocks",
                    json={"secondary_blocks": n, "host_cache_tokens": n * tpb, "host_cache_bytes": n * unit})
