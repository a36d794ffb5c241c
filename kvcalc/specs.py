"""Cache specs: one frozen dataclass per kind of cache a layer can hold.

Each spec answers one question: how many bytes does it hold after a request has seen L tokens? The answer
always has the shape ``entries(L) x entry_bytes + fixed_bytes``: a token rule (all tokens, the last W, one
entry per R tokens, none) times the bytes of one entry in the chosen storage format, plus bytes that do not
depend on L (compressor partials, SSM state). ``entries`` is vectorised over contexts: a numpy int64 array,
or a :class:`kvcalc.vec.Ints` for a few (the same formula runs on both).

A new attention kind is one new subclass registered in ``CACHE_KINDS``; the YAML loader, the estimator and
the CLI need no change. Nothing here branches on a model's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import ClassVar

from .errors import KvcalcError, quote
from .formats import KVFormat, StorageFormat, get_format
from .vec import as_vector, minimum, zeros_like


@dataclass(frozen=True, kw_only=True)
class CacheSpec:
    """Base class. ``name`` is the component's name in the config; ``storage`` names the role (e.g. ``kv``,
    ``indexer``) that a model's precision maps to a storage format."""

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    #: Token-proportional or windowed caches are what vLLM's write-up counts ("article" basis);
    #: constant per-request state is counted only in the "complete" basis.
    per_token: ClassVar[bool] = True

    name: str
    storage: str = "kv"
    source: str = field(default="", compare=False)

    # ---- the three numbers every spec answers ------------------------------------------------------
    def entries(self, contexts):
        """Entries held after ``contexts`` tokens (a vector in, a vector of the same kind out; an int or a list
        becomes a numpy int64 array): by default every token."""
        return as_vector(contexts)

    def entry_bytes(self, fmt: StorageFormat) -> int:
        """Bytes of one entry in storage format ``fmt``."""
        raise NotImplementedError

    def fixed_bytes(self, fmt: StorageFormat | None = None) -> int:
        """Bytes held per request whatever the context (0 for pure token caches). ``fmt`` is the
        precision's format for this component's storage role, for state whose dtype follows the precision."""
        return 0

    def validate(self, where: str) -> None:
        """Check cross-field rules; field types and positivity are checked by the loader."""

    def rule(self) -> str:
        """Entries held after L tokens, as a short formula: 'L', 'min(L,128)', 'L//4' (rounds down), 'fixed'."""
        return "L"


def _positive(value: int, where: str, name: str) -> None:
    if value <= 0:
        raise KvcalcError(f"{where}.{name}: must be a positive integer, got {value}")


class _Windowed:
    """Token rule of a sliding window: the last ``window`` tokens (the subclass declares the field)."""

    window: int

    def entries(self, contexts):
        return minimum(as_vector(contexts), self.window)

    def rule(self) -> str:
        return f"min(L,{self.window})"

    def validate(self, where: str) -> None:
        super().validate(where)  # type: ignore[misc]
        _positive(self.window, where, "window")


class _Strided:
    """Token rule of a compressed cache: one entry per completed ``ratio`` tokens (rounds down)."""

    ratio: int

    def entries(self, contexts):
        return as_vector(contexts) // self.ratio

    def rule(self) -> str:
        return "L" if self.ratio == 1 else f"L//{self.ratio}"


# ---- standard attention: separate K and V per KV head (MHA / GQA / MQA) ---------------------------------
@dataclass(frozen=True, kw_only=True)
class FullAttention(CacheSpec):
    kind: ClassVar[str] = "full_attention"
    summary: ClassVar[str] = "K and V per KV head for every token (MHA / GQA / MQA)"

    kv_heads: int
    head_dim: int
    v_head_dim: int | None = None  # defaults to head_dim (stated in the config format docs)

    @property
    def value_dim(self) -> int:
        return self.head_dim if self.v_head_dim is None else self.v_head_dim

    def kv_heads_on_rank(self, tp: int) -> int:
        """KV heads one of ``tp`` tensor-parallel ranks holds: an even share, or one replicated head when tp
        exceeds the heads (vLLM QKVParallelLinear; ``check_kv_heads_split`` refuses what splits unevenly)."""
        return max(1, self.kv_heads // tp)

    def entry_bytes(self, fmt: "StorageFormat | KVFormat") -> int:
        """A token's K and V over the KV heads; keys and values each in their own format where the precision
        gives two (:class:`kvcalc.formats.KVFormat`: llama.cpp's --cache-type-k / --cache-type-v)."""
        where = f"component {self.name}"
        return self.kv_heads * (self.k_bytes(fmt, where) + self.v_bytes(fmt, where))

    def k_bytes(self, fmt: "StorageFormat | KVFormat", where: str = "") -> int:
        """One KV head's key of one token."""
        k = fmt.k if isinstance(fmt, KVFormat) else fmt
        return k.entry_bytes(self.head_dim, 0, where or f"component {self.name}")

    def v_bytes(self, fmt: "StorageFormat | KVFormat", where: str = "") -> int:
        """One KV head's value of one token."""
        v = fmt.v if isinstance(fmt, KVFormat) else fmt
        return v.entry_bytes(self.value_dim, 0, where or f"component {self.name}")

    def validate(self, where: str) -> None:
        for name in ("kv_heads", "head_dim"):
            _positive(getattr(self, name), where, name)
        if self.v_head_dim is not None:
            _positive(self.v_head_dim, where, "v_head_dim")


@dataclass(frozen=True, kw_only=True)
class SlidingWindowAttention(_Windowed, FullAttention):
    kind: ClassVar[str] = "sliding_attention"
    summary: ClassVar[str] = "K and V per KV head for the last `window` tokens"

    window: int


# ---- latent caches: one vector per token serves as key and value (MLA, DeepSeek V4) ---------------------
@dataclass(frozen=True, kw_only=True)
class ChunkedAttention(FullAttention):
    """K and V for the tokens of the current attention chunk (Llama 4's chunked local attention: a token
    attends to the tokens of its own ``chunk``-token chunk). After L tokens the chunk holding the last token
    is kept: ``L - chunk x floor((L - 1) / chunk)`` tokens, from 1 to ``chunk``."""

    kind: ClassVar[str] = "chunked_attention"
    summary: ClassVar[str] = "K and V per KV head for the tokens of the current `chunk`-token chunk (Llama 4)"

    chunk: int

    def entries(self, contexts):
        # L - chunk*floor((L-1)/chunk) is (L-1) mod chunk + 1 for L >= 1; the min with L makes it 0 at L = 0
        c = as_vector(contexts)
        return minimum(c, (c - 1) % self.chunk + 1)

    def rule(self) -> str:
        return f"L-{self.chunk}*((L-1)//{self.chunk})"


@dataclass(frozen=True, kw_only=True)
class MLALatent(CacheSpec):
    kind: ClassVar[str] = "mla"
    summary: ClassVar[str] = "one latent vector per token (`dim` wide, last `rope_dim` are RoPE dims)"

    dim: int
    rope_dim: int = 0

    def entry_bytes(self, fmt: StorageFormat) -> int:
        return fmt.entry_bytes(self.dim, self.rope_dim, f"component {self.name}")

    def validate(self, where: str) -> None:
        _positive(self.dim, where, "dim")
        if not 0 <= self.rope_dim <= self.dim:
            raise KvcalcError(f"{where}.rope_dim: must lie between 0 and dim ({self.dim}), got {self.rope_dim}")


@dataclass(frozen=True, kw_only=True)
class SlidingWindowMLA(_Windowed, MLALatent):
    kind: ClassVar[str] = "sliding_mla"
    summary: ClassVar[str] = "one latent vector per token for the last `window` tokens (DeepSeek V4 window)"

    window: int


@dataclass(frozen=True, kw_only=True)
class CompressedMLA(_Strided, MLALatent):
    """DeepSeek V4 compressed entries: entry i is a gated weighted sum over ``span`` tokens ending at token
    ``ratio * (i + 1)``; spans wider than the ratio overlap (c4a: span 8, stride 4). An entry exists once
    its last stride is complete, so L tokens hold floor(L / ratio) entries; the unfinished stride lives in
    the compressor state (a ``state`` component)."""

    kind: ClassVar[str] = "compressed_mla"
    summary: ClassVar[str] = "one entry per `ratio` tokens, each a weighted sum over `span` tokens (DeepSeek V4)"

    ratio: int
    span: int
    shared_kv: bool = True  # one vector serves as key and value; False stores two

    def entry_bytes(self, fmt: StorageFormat) -> int:
        return super().entry_bytes(fmt) * (1 if self.shared_kv else 2)

    def validate(self, where: str) -> None:
        super().validate(where)
        _positive(self.ratio, where, "ratio")
        _positive(self.span, where, "span")
        if self.ratio < 2:
            raise KvcalcError(f"{where}.ratio: a compressed cache needs ratio >= 2, got {self.ratio}")
        if self.span < self.ratio or self.span % self.ratio:
            raise KvcalcError(
                f"{where}.span: must be a whole multiple of ratio ({self.ratio}), got {self.span}"
            )


# ---- the sparse-attention indexer's key cache ------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class IndexerCache(_Strided, CacheSpec):
    """Lightning-indexer keys: one ``dim``-wide key per token (V3.2) or per compressed entry (V4 c4a,
    ratio 4). ``topk`` is how many entries a query reads; it does not change the cache size."""

    kind: ClassVar[str] = "indexer"
    summary: ClassVar[str] = "one indexer key per `ratio` tokens (sparse top-k selection)"

    dim: int
    ratio: int = 1
    span: int | None = None  # tokens one compressed key sums over; defaults to ratio (no overlap)
    topk: int | None = None

    @property
    def window_span(self) -> int:
        return self.ratio if self.span is None else self.span

    def entry_bytes(self, fmt: StorageFormat) -> int:
        return fmt.entry_bytes(self.dim, 0, f"component {self.name}")

    def validate(self, where: str) -> None:
        _positive(self.dim, where, "dim")
        _positive(self.ratio, where, "ratio")
        if self.span is not None:
            _positive(self.span, where, "span")
            if self.span < self.ratio or self.span % self.ratio:
                raise KvcalcError(f"{where}.span: must be a whole multiple of ratio ({self.ratio}), got {self.span}")
        if self.topk is not None:
            _positive(self.topk, where, "topk")


# ---- fixed-size per-request state ------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class FixedState(CacheSpec):
    """State whose size does not grow with context: DeepSeek V4 compressor partials (the stride not yet
    complete, kept in fp32), SSM / linear-attention state. ``shape`` multiplies out to the value count."""

    kind: ClassVar[str] = "state"
    summary: ClassVar[str] = "fixed per-request state of `shape` values in `dtype`"
    per_token: ClassVar[bool] = False

    shape: tuple[int, ...]
    dtype: str = "fp32"
    storage: str = "state"

    @property
    def values(self) -> int:
        return math.prod(self.shape)  # exact Python int: no silent int64 wrap-around

    def entries(self, contexts):
        return zeros_like(as_vector(contexts))

    def entry_bytes(self, fmt: StorageFormat) -> int:
        return 0

    def fixed_bytes(self, fmt: StorageFormat | None = None) -> int:
        return get_format(self.dtype).entry_bytes(self.values, 0, f"component {self.name}")

    def rule(self) -> str:
        return "fixed"

    def validate(self, where: str) -> None:
        if not self.shape:
            raise KvcalcError(f"{where}.shape: must list at least one dimension")
        for i, s in enumerate(self.shape):
            if s <= 0:
                raise KvcalcError(f"{where}.shape[{i}]: must be a positive integer, got {s}")
        fmt = get_format(self.dtype, f"{where}.dtype")
        if not fmt.plain:
            raise KvcalcError(f"{where}.dtype: state must use a plain dtype (fp32, bf16, ...), got {self.dtype}")


@dataclass(frozen=True, kw_only=True)
class CompressorState(FixedState):
    """DeepSeek V4 compressor partials for the compressed component ``compresses`` (a ``compressed_mla``
    or a compressed ``indexer``): the last ``span`` tokens' rows, each holding the kv and the gate-score
    values of ``coff = span / ratio`` overlapping windows, ``dim`` wide, in fp32. Shape
    ``[span, 2, coff, dim]`` (vLLM ``models/deepseek_v4/compressor.py``: ``sliding_window = coff *
    compress_ratio``, ``state_dim = 2 * coff * head_dim``). The loader derives the shape from the served
    component; a ``shape`` written in the config is checked against it."""

    kind: ClassVar[str] = "compressor_state"
    summary: ClassVar[str] = "fp32 partial windows of the compressor of component `compresses` (DeepSeek V4)"

    compresses: str
    shape: tuple[int, ...] = ()

    @staticmethod
    def shape_for(target: CacheSpec) -> tuple[int, ...]:
        ratio = getattr(target, "ratio", 1)
        span = target.window_span if isinstance(target, IndexerCache) else getattr(target, "span", ratio)
        return (span, 2, span // ratio, target.dim)  # type: ignore[attr-defined]

    def validate(self, where: str) -> None:
        if self.shape:  # checked again against the served component once every component is known
            super().validate(where)

    def resolve(self, target: CacheSpec, where: str) -> "CompressorState":
        """This state with its shape derived from ``target``; a different stated shape is an error."""
        if not isinstance(target, (CompressedMLA, IndexerCache)) or getattr(target, "ratio", 1) < 2:
            raise KvcalcError(
                f"{where}.compresses: {quote(self.compresses)} is not a compressed cache (compressed_mla, or an "
                "indexer with ratio >= 2)"
            )
        derived = self.shape_for(target)
        if self.shape and tuple(self.shape) != derived:
            raise KvcalcError(
                f"{where}.shape: {list(self.shape)} disagrees with the shape derived from {self.compresses} "
                f"[span, kv+score, span/ratio, dim] = {list(derived)}"
            )
        from dataclasses import replace

        out = replace(self, shape=derived)
        FixedState.validate(out, where)
        return out


@dataclass(frozen=True, kw_only=True)
class CompressorStateSlots(CompressorState):
    """A compressor state kept as one row per token of its last ``span`` tokens rather than a whole ring allocated
    up front: after L tokens it holds min(L, span) rows of ``2 x coff x dim`` values. How vLLM 0.33 stores it
    (models/deepseek_v4/compressor.py CompressorStateCache: a SlidingWindowMLASpec of span-token slots). Not a
    config kind: an engine's storage (:meth:`kvcalc.engines.base.Engine.stored_formats`, '<dtype> per token')."""

    @property
    def row_bytes(self) -> int:
        return get_format(self.dtype).entry_bytes(math.prod(self.shape[1:]), 0, f"component {self.name}")

    def entries(self, contexts):
        return minimum(as_vector(contexts), self.shape[0])

    def entry_bytes(self, fmt: StorageFormat) -> int:
        return self.row_bytes

    def fixed_bytes(self, fmt: StorageFormat | None = None) -> int:
        return 0

    def rule(self) -> str:
        return f"min(L,{self.shape[0]})"


# ---- recurrent state of SSM and linear-attention layers ------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RecurrentState(CacheSpec):
    """A layer's fixed per-request state in two parts, a convolution window and a recurrent state, whose shapes
    follow from the dims the model config declares (vLLM ``model_executor/layers/mamba/mamba_utils.py``,
    ``MambaStateShapeCalculator``). ``dtype`` None: the precision's ``state`` role says (vLLM keeps both parts
    in the model dtype by default, SGLang the recurrent part in fp32); ``ssm_dtype`` overrides the recurrent
    part alone (vLLM ``--mamba-ssm-cache-dtype``)."""

    per_token: ClassVar[bool] = False
    storage: str = "state"
    dtype: str | None = None
    ssm_dtype: str | None = None

    def sharded_dims(self) -> tuple[int, int]:
        """(conv channels, recurrent heads or channels): what tensor parallelism splits. The conv state keeps
        ``conv_kernel - 1`` steps of every conv channel."""
        raise NotImplementedError

    def conv_values(self) -> int:
        return (self.conv_kernel - 1) * self.sharded_dims()[0]

    def ssm_values(self) -> int:
        raise NotImplementedError

    def entries(self, contexts):
        return zeros_like(as_vector(contexts))

    def entry_bytes(self, fmt: StorageFormat) -> int:
        return 0

    def rule(self) -> str:
        return "fixed"

    def dtypes(self, fmt: StorageFormat | None) -> tuple[str, str]:
        conv = self.dtype or (fmt.name if fmt is not None else None)
        if conv is None:
            raise KvcalcError(f"component {self.name}: no dtype, and the precision maps no '{self.storage}' role")
        return conv, self.ssm_dtype or conv

    def fixed_bytes(self, fmt: StorageFormat | None = None) -> int:
        return self.fixed_bytes_on_rank(fmt, 1)

    def fixed_bytes_on_rank(self, fmt: StorageFormat | None, tp: int) -> int:
        """Bytes of the state one of ``tp`` tensor-parallel ranks holds (see :meth:`shard_values`)."""
        conv, ssm = self.dtypes(fmt)
        where = f"component {self.name}"
        cv, sv = self.shard_values(tp)
        return (get_format(conv).entry_bytes(cv, 0, where) if cv else 0) + get_format(ssm).entry_bytes(sv, 0, where)

    def shard_values(self, tp: int) -> tuple[int, int]:
        """(conv, recurrent) values on one of ``tp`` ranks: vLLM shards the channels and heads of both parts
        and asserts they divide (``MambaStateShapeCalculator``, ``divide``)."""
        if tp == 1:
            return self.conv_values(), self.ssm_values()
        conv_channels, ssm_heads = self.sharded_dims()
        for what, n in (("conv channels", conv_channels), ("recurrent heads (or channels)", ssm_heads)):
            if n % tp:
                raise KvcalcError(f"tp: {tp} ranks cannot split the {n} {what} of component {self.name} "
                                  "(vLLM shards them evenly)", param="tp")
        return self.conv_values() // tp, self.ssm_values() // tp

    def validate(self, where: str) -> None:
        if getattr(self, "conv_kernel", 2) < 2:
            raise KvcalcError(f"{where}.conv_kernel: must be at least 2 (the state keeps conv_kernel - 1 steps), "
                              f"got {self.conv_kernel}")
        for key in ("dtype", "ssm_dtype"):
            name = getattr(self, key)
            if name is not None:
                fmt = get_format(name, f"{where}.{key}")
                if not fmt.plain:
                    raise KvcalcError(f"{where}.{key}: state must use a plain dtype (fp32, bf16, ...), got {name}")


@dataclass(frozen=True, kw_only=True)
class Mamba2State(RecurrentState):
    """Mamba-2 (Jamba 1.5+, Falcon-H1, Nemotron-H, ...): conv state ``(conv_kernel - 1) x (intermediate +
    2 x groups x state_size)`` and SSM state ``heads x head_dim x state_size`` (vLLM
    ``MambaStateShapeCalculator.mamba2_state_shape``); ``intermediate`` defaults to ``heads x head_dim``."""

    kind: ClassVar[str] = "mamba2"
    summary: ClassVar[str] = "Mamba-2 conv + SSM state (fixed per request)"

    conv_kernel: int
    heads: int
    head_dim: int
    state_size: int
    groups: int = 1
    intermediate: int | None = None

    def sharded_dims(self) -> tuple[int, int]:
        inter = self.intermediate if self.intermediate is not None else self.heads * self.head_dim
        return inter + 2 * self.groups * self.state_size, self.heads

    def ssm_values(self) -> int:
        return self.heads * self.head_dim * self.state_size

    def shard_values(self, tp: int) -> tuple[int, int]:
        # groups that do not divide by tp are replicated up to tp (extra_groups_for_head_shards)
        if tp > 1 and self.groups % tp:
            from dataclasses import replace

            return RecurrentState.shard_values(replace(self, groups=tp), tp)
        return super().shard_values(tp)


@dataclass(frozen=True, kw_only=True)
class GatedDeltaNetState(RecurrentState):
    """Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): conv state ``(conv_kernel - 1) x (2 x k_heads x
    k_head_dim + v_heads x v_head_dim)`` and recurrent state ``v_heads x v_head_dim x k_head_dim`` (vLLM
    ``MambaStateShapeCalculator.gated_delta_net_state_shape``)."""

    kind: ClassVar[str] = "gated_deltanet"
    summary: ClassVar[str] = "gated DeltaNet conv + recurrent state (fixed per request)"

    conv_kernel: int
    k_heads: int
    v_heads: int
    k_head_dim: int
    v_head_dim: int

    def sharded_dims(self) -> tuple[int, int]:
        return 2 * self.k_heads * self.k_head_dim + self.v_heads * self.v_head_dim, self.v_heads

    def ssm_values(self) -> int:
        return self.v_heads * self.v_head_dim * self.k_head_dim


@dataclass(frozen=True, kw_only=True)
class KDAState(GatedDeltaNetState):
    """Kimi Delta Attention (Kimi-Linear): the gated DeltaNet shapes with one head count and width for q, k and
    v (vLLM ``MambaStateShapeCalculator.kda_state_shape``: conv over ``3 x heads x head_dim`` channels,
    recurrent ``heads x head_dim x head_dim``). Its own kind because vLLM's KDA layer exports no prefill
    checkpoints, where the Qwen gated DeltaNet layer does (FlashInfer prefill)."""

    kind: ClassVar[str] = "kda"
    summary: ClassVar[str] = "Kimi Delta Attention conv + recurrent state (fixed per request)"


@dataclass(frozen=True, kw_only=True)
class Mamba1State(RecurrentState):
    """Mamba-1 (Jamba): conv state ``(conv_kernel - 1) x intermediate`` and SSM state ``intermediate x
    state_size`` (vLLM ``MambaStateShapeCalculator.mamba1_state_shape``)."""

    kind: ClassVar[str] = "mamba"
    summary: ClassVar[str] = "Mamba-1 conv + SSM state (fixed per request)"

    conv_kernel: int
    intermediate: int
    state_size: int

    def sharded_dims(self) -> tuple[int, int]:
        return self.intermediate, self.intermediate

    def ssm_values(self) -> int:
        return self.intermediate * self.state_size


@dataclass(frozen=True, kw_only=True)
class LinearAttentionState(RecurrentState):
    """Linear ("lightning") attention (MiniMax): one ``head_dim x head_dim`` state per head, no convolution
    (vLLM ``MambaStateShapeCalculator.linear_attention_state_shape``)."""

    kind: ClassVar[str] = "linear_attention"
    summary: ClassVar[str] = "linear-attention state heads x head_dim x head_dim (fixed per request)"

    heads: int
    head_dim: int

    def sharded_dims(self) -> tuple[int, int]:
        return 0, self.heads

    def conv_values(self) -> int:
        return 0  # no convolution

    def ssm_values(self) -> int:
        return self.heads * self.head_dim * self.head_dim


@dataclass(frozen=True, kw_only=True)
class ShortConvState(RecurrentState):
    """LFM2's short convolution: the last ``conv_kernel - 1`` inputs of every one of ``hidden`` channels, no recurrent
    part (llama.cpp src/llama-hparams.cpp ``n_embd_r = n_embd x (shortconv.l_cache - 1)``, ``n_embd_s = 0``)."""

    kind: ClassVar[str] = "shortconv"
    summary: ClassVar[str] = "short-convolution state of the last conv_kernel - 1 inputs (LFM2; fixed per request)"

    conv_kernel: int
    hidden: int

    def sharded_dims(self) -> tuple[int, int]:
        return self.hidden, 0

    def ssm_values(self) -> int:
        return 0

    def fixed_bytes_on_rank(self, fmt: StorageFormat | None, tp: int) -> int:
        conv, _ = self.dtypes(fmt)
        cv, _ = self.shard_values(tp)
        return get_format(conv).entry_bytes(cv, 0, f"component {self.name}")

    def shard_values(self, tp: int) -> tuple[int, int]:
        if self.hidden % tp:
            raise KvcalcError(f"tp: {tp} ranks cannot split the {self.hidden} conv channels of component {self.name}",
                              param="tp")
        return self.conv_values() // tp, 0


CACHE_KINDS: dict[str, type[CacheSpec]] = {
    cls.kind: cls
    for cls in (FullAttention, SlidingWindowAttention, MLALatent, SlidingWindowMLA, CompressedMLA, IndexerCache,
                FixedState, CompressorState, Mamba2State, GatedDeltaNetState, KDAState, Mamba1State,
                LinearAttentionState, ChunkedAttention, ShortConvState)
}


def spec_fields(cls: type[CacheSpec]) -> dict[str, object]:
    """Field name -> declared type string for the YAML loader (name and source are set by the loader)."""
    return {f.name: f.type for f in fields(cls) if f.name not in ("name", "source")}


def required_fields(cls: type[CacheSpec]) -> set[str]:
    from dataclasses import MISSING

    return {
        f.name
        for f in fields(cls)
        if f.default is MISSING and f.default_factory is MISSING and f.name not in ("name",)
    }
