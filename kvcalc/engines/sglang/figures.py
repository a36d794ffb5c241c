"""SGLang's figures of a fit, by the names its start-up log gives them (kv_cache_configurator.py, memory_pool.py):
the typed answer :mod:`.report` builds, which capacity's JSON carries and its schema describes."""

from __future__ import annotations

from dataclasses import dataclass

from ..base import EngineFigures


@dataclass(frozen=True)
class V4PoolFigures:
    """DeepSeek V4's pools beside the full one (pool_configurator.py _compute_dsv4_sizes)."""

    c4_max_total_num_tokens: int
    c128_max_total_num_tokens: int
    c4_state_pool_size: int
    c128_state_pool_size: int
    c128_state_fixed_bytes: int

    def to_json(self) -> dict:
        return {"c4_max_total_num_tokens": self.c4_max_total_num_tokens,
                "c128_max_total_num_tokens": self.c128_max_total_num_tokens,
                "c4_state_pool_size": self.c4_state_pool_size, "c128_state_pool_size": self.c128_state_pool_size,
                "c128_state_fixed_bytes": self.c128_state_fixed_bytes}


@dataclass(frozen=True)
class SglangFigures(EngineFigures):
    """One rank's pools and counts: the budget and what is left of it, the bytes per token (a float where SGLang's
    is), the token pools, the running-request cap, the Mamba state pool, the page, the dtype and the chunk; the
    buffers as SGLang allocates them (``pools``), and which limit binds requests of the context."""

    kv_budget_bytes: int
    kv_available_bytes: int
    cell_size_bytes: int | float
    max_total_num_tokens: int
    swa_max_total_num_tokens: int | None
    max_running_requests: int
    max_mamba_cache_size: int | None
    mamba_state_bytes: int | None
    page_size: int
    kv_cache_dtype: str
    chunked_prefill_size: int
    pools: tuple[dict, ...]  # each buffer: name, dtype, shape, layers, tokens, bytes
    requests_limited_by: str
    limits: dict  # limit -> requests of the context it admits
    v4: V4PoolFigures | None = None

    def to_json(self) -> dict:
        return {"kv_budget_bytes": self.kv_budget_bytes, "kv_available_bytes": self.kv_available_bytes,
                "cell_size_bytes": self.cell_size_bytes, "cell_size_fractional": isinstance(self.cell_size_bytes, float),
                "max_total_num_tokens": self.max_total_num_tokens,
                "swa_max_total_num_tokens": self.swa_max_total_num_tokens,
                "max_running_requests": self.max_running_requests, "max_mamba_cache_size": self.max_mamba_cache_size,
                "mamba_state_bytes": self.mamba_state_bytes, "page_size": self.page_size,
                "kv_cache_dtype": self.kv_cache_dtype, "chunked_prefill_size": self.chunked_prefill_size,
                **(self.v4.to_json() if self.v4 is not None else {}),
                "pools": list(self.pools), "requests_limited_by": self.requests_limited_by, "limits": self.limits}

    @classmethod
    def schema(cls) -> dict:
        from ...jsonschema import BOOL, COUNT, NUM, POS, STR, arr, null, obj

        pool = obj({"name": STR, "dtype": STR, "shape": arr(COUNT, 1), "layers": POS, "tokens": null(COUNT),
                    "bytes": COUNT}, description="one buffer a rank allocates (size + page_size rows per layer)")
        v4 = tuple(V4PoolFigures.__dataclass_fields__)  # DeepSeek V4's pools only
        props = {"kv_budget_bytes": COUNT, "kv_available_bytes": COUNT, "cell_size_bytes": NUM,
                 "cell_size_fractional": BOOL, "max_total_num_tokens": COUNT, "swa_max_total_num_tokens": null(COUNT),
                 "max_running_requests": COUNT, "max_mamba_cache_size": null(COUNT), "mamba_state_bytes": null(COUNT),
                 "page_size": POS, "kv_cache_dtype": STR, "chunked_prefill_size": COUNT, "pools": arr(pool, 1),
                 "requests_limited_by": STR,
                 "limits": {"type": "object", "additionalProperties": COUNT,
                            "required": ["max_running_requests", "token pool"]},
                 **{k: COUNT for k in v4}}
        return {"properties": props, "required": [k for k in props if k not in v4]}
