"""The config.json fields a mapper reads (``_Fields``: each value with the field it is cited by) and the
helpers the family mappers share: head and KV-head counts, attention components, precisions, state dtypes."""

from __future__ import annotations

from typing import Any

from ...errors import KvcalcError


def _fail(msg: str) -> KvcalcError:
    return KvcalcError(msg, param="config")


class _Fields:
    """The config's fields, with the name each is cited by (``text_config.head_dim``)."""

    def __init__(self, top: dict, file: str):
        self.top, self.file = top, file
        tc = top.get("text_config")
        self.inner = tc if isinstance(tc, dict) else None
        self.prefix = "text_config." if self.inner is not None else ""
        self.cfg = self.inner if self.inner is not None else top

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def src(self, key: str) -> str:
        return f"config.json {self.prefix}{key}"

    def raw(self, key: str, default: Any = None) -> Any:
        v = self.cfg.get(key)
        return default if v is None else v

    def int(self, key: str, minimum: int = 1, default: int | None = None) -> int:
        v = self.cfg.get(key)
        if v is None:
            if default is not None:
                return default
            raise _fail(f"{self.file}: {self.prefix}{key}: required for this model type, missing")
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum or v > 1 << 40:
            raise _fail(f"{self.file}: {self.prefix}{key}: expected an integer >= {minimum}, got {v!r}")
        return v

    def value(self, key: str, minimum: int = 1) -> dict:
        return {"value": self.int(key, minimum), "source": self.src(key)}


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
        return fields.value("num_key_value_heads")
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
    if ssm not in _DTYPES:
        raise _fail(f"{fields.file}: {fields.prefix}{key}: {ssm!r} is not one of {', '.join(_DTYPES)}")
    return _DTYPES[ssm]
