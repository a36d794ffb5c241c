"""The config.json fields a mapper reads (``_Fields``: each value with the field it is cited by) and the
helpers the family mappers share: head and KV-head counts, attention components, precisions, state dtypes."""

from __future__ import annotations

from typing import Any

from ...errors import KvcalcError, quote
from ..schema import MAX_INT, MAX_LAYERS


def _fail(msg: str) -> KvcalcError:
    return KvcalcError(msg, param="config")


class _Fields:
    """The config's fields, with the name each is cited by (``text_config.head_dim``)."""

    def __init__(self, top: dict, file: str):
        self.top, self.file = top, file
        tc = top.get("text_config")
        if tc is not None and not isinstance(tc, dict):
            raise _fail(f"{file}: text_config: expected a mapping of the language model's fields, got {_show(tc)}")
        self.inner = tc
        self.prefix = "text_config." if self.inner is not None else ""
        self.cfg = self.inner if self.inner is not None else top
        self.defaults: dict = {}
        self.defaults_class = ""

    def use_defaults(self, model_type: str) -> None:
        """Fields config.json omits take the transformers class default (kvcalc/config/hf/defaults.py)."""
        from .defaults import CLASS_DEFAULTS

        self.defaults_class, self.defaults = CLASS_DEFAULTS.get(model_type, ("", {}))

    def _get(self, key: str) -> Any:
        return self.cfg[key] if key in self.cfg else self.defaults.get(key)

    def defaulted(self, key: str) -> bool:
        """The value is the class default: config.json omits the field."""
        return key not in self.cfg and key in self.defaults

    def has(self, key: str) -> bool:
        return self._get(key) is not None

    def src(self, key: str) -> str:
        if self.defaulted(key):
            return f"transformers {self.defaults_class} default {key} (config.json omits it)"
        return f"config.json {self.prefix}{key}"

    def raw(self, key: str, default: Any = None) -> Any:
        v = self._get(key)
        return default if v is None else v

    def where(self, key: str) -> str:
        return f"{self.file}: {self.prefix}{key}"

    def int(self, key: str, minimum: int = 1, default: int | None = None, maximum: int = MAX_INT) -> int:
        v = self._get(key)
        if v is None:
            if default is not None:
                return default
            raise _fail(f"{self.where(key)}: required for this model type, missing")
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
            raise _fail(f"{self.where(key)}: expected an integer from {minimum} to {maximum:,}, got {_show(v)}")
        return v

    def value(self, key: str, minimum: int = 1) -> dict:
        return {"value": self.int(key, minimum), "source": self.src(key)}

    def layers(self) -> int:
        """num_hidden_layers, checked against the loader's layer cap before any per-layer list is built."""
        return self.int("num_hidden_layers", maximum=MAX_LAYERS)

    def flag(self, key: str, default: bool = False) -> bool:
        """A boolean field (a string such as "false" is refused, not taken as true)."""
        v = self._get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise _fail(f"{self.where(key)}: expected true or false, got {_show(v)}")
        return v

    def listed(self, key: str, n: int | None = None, what: str = "values") -> list | None:
        """A list field (None when absent); with ``n``, exactly n entries."""
        v = self._get(key)
        if v is None:
            return None
        if not isinstance(v, list) or (n is not None and len(v) != n):
            got = f"{len(v)} entries" if isinstance(v, list) else _show(v)
            raise _fail(f"{self.where(key)}: must list {n if n is not None else 'the'} {what}"
                        + (" (num_hidden_layers)" if n is not None else "") + f", got {got}")
        return v


def _show(v: Any) -> str:
    """A value for an error message, bounded: its type, and its text when short."""
    if isinstance(v, (dict, list)):
        return f"a {'mapping' if isinstance(v, dict) else 'list'} of {len(v)} entries"
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 200:
        return f"an integer of {v.bit_length():,} bits"
    return quote(v) if isinstance(v, str) else f"{type(v).__name__} {quote(v)}"


def _gqa_precisions(fields: _Fields) -> dict:
    return {
        "bf16": {"kv": "bf16"},
        "fp16": {"kv": "fp16"},
        "fp8": {"kv": "fp8_e4m3", "source": "vLLM --kv-cache-dtype fp8 (per-tensor scales, 1 B per value)"},
    }


def _head_dim(fields: _Fields) -> dict:
    if fields.has("head_dim"):
        return fields.value("head_dim")
    hidden, heads = fields.int("hidden_size"), fields.int("num_attention_heads")
    if hidden % heads:
        raise _fail(f"{fields.file}: head_dim: not stated, and hidden_size {hidden} does not divide by "
                    f"num_attention_heads {heads}")
    return {"value": hidden // heads, "source": f"derived: {fields.src('hidden_size')} {hidden} / "
                                                f"num_attention_heads {heads} (the config states no head_dim)"}


def _kv_heads(fields: _Fields) -> dict:
    if fields.has("num_key_value_heads"):
        kv = fields.value("num_key_value_heads")
        if fields.has("num_attention_heads"):  # every GQA attention module asserts this
            heads = fields.int("num_attention_heads")
            if kv["value"] > heads or heads % kv["value"]:
                raise _fail(f"{fields.where('num_key_value_heads')}: {kv['value']} KV heads must divide "
                            f"num_attention_heads {heads} (each KV head serves a whole group of query heads)")
        return kv
    return {"value": fields.int("num_attention_heads"),
            "source": f"{fields.src('num_attention_heads')} (no num_key_value_heads: one KV head per query head)"}


_STATE_SRC = "vLLM keeps conv and recurrent state in the model dtype (mamba_cache_dtype auto)"


def _hybrid_precisions() -> dict:
    return {
        "bf16": {"kv": "bf16", "state": "bf16", "source": _STATE_SRC},
        "fp8": {"kv": "fp8_e4m3", "state": "bf16",
                "source": "vLLM --kv-cache-dtype fp8 for attention; " + _STATE_SRC},
        "fp32-state": {"kv": "bf16", "state": "fp32", "source": "attention in bf16, recurrent state in fp32 "
                       "(SGLang's default for the SSM state; vLLM --mamba-cache-dtype float32)"},
    }


def _attention(fields: _Fields, head_key: str = "head_dim") -> dict:
    hd = fields.value(head_key) if fields.has(head_key) else _head_dim(fields)
    return {"cache": "full_attention", "kv_heads": _kv_heads(fields), "head_dim": hd, "storage": "kv"}


_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _ssm_dtype(fields: _Fields, key: str) -> str | None:
    """A recurrent-state dtype the config states (``float32`` -> ``fp32``), or None."""
    ssm = fields.raw(key)
    if ssm is None:
        return None
    if not isinstance(ssm, str) or ssm not in _DTYPES:
        raise _fail(f"{fields.where(key)}: {_show(ssm)} is not one of {', '.join(_DTYPES)}")
    return _DTYPES[ssm]
