"""`kvcalc check-log`: a second oracle. Read an engine's start-up log and compare the figures it printed with
kvcalc's plan for the same model and settings.

The engine's log reader (``Engine.logs``, :mod:`kvcalc.engines.logs`) knows the lines and how they set the
plan; this module is the same for every engine: find the engine whose lines the log holds, the model by its
Hugging Face id, plan, compare. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import as_model, config_names, load_model
from .engines import engines, get_engine
from .engines.logs import Row
from .errors import KvcalcError, quote
from .plan import plan


@dataclass(frozen=True)
class CheckLogResult:
    file: str
    engine: str
    engine_version: str
    model: str
    log_model: str | None
    log_version: str | None
    precision: str
    context_tokens: int
    settings: dict  # the settings the plan used, by the engine's names
    parsed: dict
    rows: tuple[Row, ...]
    notes: tuple[str, ...]
    verdict: str  # agrees, differs, nothing to compare


def _model_for(model_id: str | None):
    """The kvcalc config whose config.json source names this Hugging Face id (exact, case-insensitive)."""
    if not model_id:
        return None
    want = model_id.strip("/").lower()
    for name in config_names():
        spec = load_model(name)
        src = " ".join(str(v) for v in spec.sources.values()).lower()
        if f"huggingface.co/{want}/" in src or want == name:
            return spec
    return None


def _reader_for(text: str, source: str, engine: str | None):
    """The engine whose start-up lines the log holds (the named one, else the first that recognises it)."""
    candidates = [get_engine(engine)] if engine is not None else [e for e in engines() if e.logs is not None]
    tried = []
    for eng in candidates:
        if eng.logs is None:
            raise KvcalcError(f"engine: kvcalc reads no start-up log of the {eng.name} engine", param="engine")
        facts = eng.logs.parse(text, source)
        if eng.logs.recognises(facts):
            return eng, facts
        tried.append((eng, facts))
    raise KvcalcError(_not_read(text, source, tried, engine), param="file")


def _title(eng) -> str:
    return eng.title.split()[0]


def _not_read(text: str, source: str, tried: list, engine: str | None) -> str:
    """Why no engine reads the log, in one line naming the file: an engine's start-up lines without the KV lines,
    or no engine's lines at all (an empty file, other text, binary data), and then what it holds."""
    name = quote(source, 200)  # a path: as long as the one FILE: cannot read names
    for eng, facts in tried:
        if facts.engine_lines:
            return (f"file: {name} has {_title(eng)} start-up lines but no KV cache line (looked for "
                    f"{eng.logs.looked_for})")
    holds = _holds(text)
    if engine is not None:  # the engine named may not be the one whose lines these are
        for eng in engines():
            try:
                if eng.logs is not None and eng.name != engine and eng.logs.recognises(eng.logs.parse(text)):
                    holds = f"it holds {_title(eng)}'s: {{{{engine}}}} {eng.name}"
                    break
            except KvcalcError:
                continue
    titles = [_title(eng) for eng, _ in tried]
    which = titles[0] if len(titles) == 1 else f"{', '.join(titles[:-1])} or {titles[-1]}"
    return f"file: {name} has no {which} start-up lines ({holds})"


def _holds(text: str) -> str:
    """What a text read as a log holds, where it holds no engine's lines."""
    if not text:
        return "an empty file"
    nul = text.count("\0")
    if nul == len(text):
        return f"{nul:,} NUL bytes"
    if nul or text.count("\ufffd") > len(text) // 10:  # a NUL, or more than a tenth of it not UTF-8
        return "binary data, not text"
    lines = text.count("\n") + (not text.endswith("\n"))
    return f"{lines:,} line{'s' if lines != 1 else ''} of text, none an engine's"


def _precision(eng, facts, spec, precision: str | None) -> tuple[str | None, str | None, str | None]:
    """The plan's precision, a note on how it was chosen, and what is missing instead of it: the precision asked,
    else the log's kv_cache_dtype as the engine reads it (auto: what the engine stores for the model), else, where
    the log does not state it, the engine's own default, auto, likewise, said in a note. Without the model
    nothing is missing yet: either way its precision follows once it is known."""
    reader = eng.logs
    if precision is not None or spec is None:
        return precision, None, None
    dtype = reader.kv_dtype(facts)
    logged = dtype is not None
    dtype = dtype if logged else "auto"  # --kv-cache-dtype's default in both engines
    auto = eng.default_precision(spec, eng.settings()) if dtype == "auto" else None  # auto, where not the dtype
    prec = auto or reader.precision_for(spec, dtype)
    if prec is None:
        holds = f"{spec.name}'s precisions ({', '.join(spec.precisions)})"
        if logged:
            return None, None, (f"the precision: the log's kv_cache_dtype {quote(dtype)} maps to none of {holds} "
                                "({{precision}} P)")
        return None, None, (f"the precision: the log does not state the cache dtype, and {_title(eng)}'s default, "
                            f"auto, stores none of {holds} ({{{{precision}}}} P)")
    return prec, (None if logged else _default_dtype_note(eng, spec, prec, auto)), None


def _default_dtype_note(eng, spec, prec: str, auto: str | None) -> str:
    """Why an unstated cache dtype was planned at ``prec``, and on which GPUs auto would store another."""
    from .hardware import catalogue

    why = f"what {_title(eng)}'s default kv_cache_dtype, auto, stores for {spec.name}"
    if auto:
        why += f" ({_title(eng)}'s own layout for it, not the model's {spec.default_precision})"
    elif prec == spec.default_precision:
        why += " (the model's default precision)"
    else:
        why += f" (the model's 16-bit dtype; its default precision is {spec.default_precision})"
    other: dict[str, list[str]] = {}  # auto's precision on the GPUs where it is not prec
    for arch in sorted({g.arch for g in catalogue().values() if g.arch}):
        there = eng.default_precision(spec, eng.settings({"arch": arch})) or eng.logs.precision_for(spec, "auto")
        if there != prec:
            other.setdefault(there, []).append(arch)
    if other:
        elsewhere = "; ".join(f"{p} on {', '.join(archs)}" for p, archs in other.items())
        why += f" on Hopper, kvcalc's GPU where none is named ({elsewhere}: the log names no GPU)"
    return f"the log does not state the cache dtype; planned at {prec}, {why}"


def check_log(text: str, source: str = "log", *, engine: str | None = None, model=None,
              precision: str | None = None, settings: dict | None = None, tp: int | None = None) -> CheckLogResult:
    """Compare the log's figures with the plan. ``settings``: engine settings by name that override what
    the log says (None values are ignored)."""
    from . import args

    if not isinstance(text, str):
        raise KvcalcError(f"text: the log's text must be a string, got {type(text).__name__}", param="text")
    args.name(source, "source")
    args.name(precision, "precision", optional=True)
    args.integer(tp, "tp", 1, 4096, optional=True)
    if settings is not None and not isinstance(settings, dict):
        raise KvcalcError(f"settings: a mapping of engine settings by name, got {type(settings).__name__}",
                          param="settings")
    eng, facts = _reader_for(text, source, engine)
    reader, v = eng.logs, facts.values
    reader.check(facts, source)
    spec = as_model(model) if model is not None else _model_for(reader.model_id(facts))
    missing = []  # everything the plan needs that the log does not give, asked for at once
    if spec is None:
        missing.append(f"the model: the log's {quote(reader.model_id(facts) or '(not logged)')} matches no kvcalc "
                       f"config by its Hugging Face id ({{{{model_option}}}} {reader.model_hint})")
    context = reader.context(facts) or (spec.max_context if reader.context_defaults_to_model and spec else None)
    if not context:
        missing.append(f"the context: {reader.no_context}")
    prec, dtype_note, no_prec = _precision(eng, facts, spec, precision)
    if no_prec:
        missing.append(no_prec)
    if missing:
        first = {"model": "model", "context": "file", "precision": "precision"}[missing[0].split(":")[0][4:]]
        raise KvcalcError(f"{source}: the plan needs " + "; ".join(missing), param=first)
    eng_settings, used = reader.settings(facts, {k: x for k, x in (settings or {}).items() if x is not None},
                                         spec=spec)
    limit = eng.context_limit(spec)
    long_note = None
    if limit is not None and context > limit:  # the engine started, so its override was set
        eng_settings = eng.resolve(eng_settings, accept_long=True)
        long_note = (f"the log's context {context:,} is past the {limit:,} {eng.name} derives for {spec.name}: the "
                     f"engine ran with its override ({eng.long_context.split(' with ')[-1]})")
    ranks = tp if tp is not None else reader.tp(facts)
    if tp is not None:
        used["tp"] = tp
    stages = getattr(eng_settings, "pp", 1)
    if stages > 1:  # each stage plans its own layers
        p = reader.stage_plan(facts, [plan(spec, context, precision=prec, engine=eng.name, settings=eng_settings,
                                           tp=ranks, stage=i) for i in range(stages)])
    else:
        p = plan(spec, context, precision=prec, engine=eng.name, settings=eng_settings, tp=ranks)
    rows = reader.compare(facts, p)
    version = reader.version(facts)
    notes = list(facts.notes) + ([dtype_note] if dtype_note else []) + reader.notes(facts, p)
    if version and version != eng.version:
        notes.append(f"the log is from {eng.title.split()[0]} {version}; kvcalc models {eng.version}: planner changes "
                     "between versions can move these figures")
    if long_note:
        notes.append(long_note)
    compared = [r for r in rows if r.agrees is not None]
    if not compared:
        notes.append(reader.nothing_note)
    verdict = "agrees" if compared and all(r.agrees for r in compared) else ("differs" if compared else "nothing to compare")
    return CheckLogResult(source, eng.name, eng.version, spec.name, reader.model_id(facts), version, prec, context,
                          used, dict(v), tuple(rows), tuple(notes), verdict)
