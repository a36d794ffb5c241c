"""The model types a config becomes: ModelSpec, its precisions and its weights."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import KvcalcError, quote
from ..formats import StorageFormat
from ..specs import CacheSpec

#: bytes per weight parameter by storage dtype, as exact fractions (numerator, denominator): block scales
#: included (fp8_block128: one fp32 scale per 128 x 128 block; mxfp4: one ue8m0 per 32; nvfp4: one e4m3
#: per 16)
WEIGHT_DTYPES: dict[str, tuple[int, int]] = {
    "fp32": (4, 1), "bf16": (2, 1), "fp16": (2, 1), "fp8": (1, 1), "int8": (1, 1),
    "fp8_block128": (128 * 128 + 4, 128 * 128), "mxfp4": (17, 32), "nvfp4": (9, 16),
}


@dataclass(frozen=True)
class Routing:
    """A mixture-of-experts router: each token of each MoE layer goes to ``per_token`` of ``experts`` routed
    experts (shared experts are dense weights)."""

    experts: int
    per_token: int
    source: str = ""


@dataclass(frozen=True)
class Weights:
    """The model's weights: parameter counts by storage dtype; ``experts`` are the routed experts of a
    mixture-of-experts model (expert parallelism shards them), ``dense`` everything else."""

    dense: dict[str, int]
    experts: dict[str, int]
    source: str = ""
    routing: Routing | None = None

    @staticmethod
    def _bytes(params: dict[str, int]) -> int:
        total = 0
        for dtype, n in params.items():
            num, den = WEIGHT_DTYPES[dtype]
            total += -(-n * num // den)
        return total

    @property
    def dense_bytes(self) -> int:
        return self._bytes(self.dense)

    @property
    def expert_bytes(self) -> int:
        return self._bytes(self.experts)

    @property
    def total_bytes(self) -> int:
        return self.dense_bytes + self.expert_bytes

    @property
    def params(self) -> int:
        return sum(self.dense.values()) + sum(self.experts.values())


@dataclass(frozen=True)
class Precision:
    name: str
    formats: dict[str, StorageFormat]  # role -> format
    source: str = ""


@dataclass(frozen=True)
class RopeScaling:
    """config.json ``rope_scaling``: what an engine needs to derive its longest context from ``max_context``."""

    type: str  # rope_type ('type' in older configs): linear, dynamic, yarn, llama3, longrope, ...
    factor: float | None = None
    original_max_position_embeddings: int | None = None


@dataclass(frozen=True)
class Multimodal:
    """A multimodal checkpoint (config.json with a ``text_config`` or a ``vision_config``): its vision tower as the
    config states it, for engines that size memory by it (None: the field is not stated)."""

    text_config: bool = False  # config.json nests the language model's fields in a text_config
    vision_config: bool = False  # config.json has a vision_config
    vision_num_hidden_layers: int | None = None  # vision_config.num_hidden_layers (not its ``depth``)
    vision_hidden_size: int | None = None  # vision_config.hidden_size


@dataclass(frozen=True)
class ModelSpec:
    name: str
    display_name: str
    description: str
    path: str
    sources: dict[str, str]
    max_context: int | None
    precisions: dict[str, Precision]
    default_precision: str
    components: dict[str, CacheSpec]
    layer_kinds: dict[str, tuple[str, ...]]  # kind -> component names
    layers: tuple[str, ...]  # kind of each main layer, index = layer number
    mtp_layers: tuple[str, ...] = ()
    weights: Weights | None = None
    provenance: dict[str, str] = field(default_factory=dict, compare=False)
    architecture: str | None = None  # config.json architectures[0], where stated
    rope_scaling: RopeScaling | None = None  # config.json rope_scaling, where stated
    multimodal: Multimodal | None = None  # where the checkpoint is multimodal
    original_max_position_embeddings: int | None = None  # config.json's top-level one (LongRoPE models)
    #: config.json's other context-length fields (model_max_length, seq_length, ...): engines choose among them
    context_fields: dict[str, int] = field(default_factory=dict, compare=False)
    gguf_architecture: str | None = None  # llama.cpp's architecture (a GGUF's general.architecture)
    notes: str = field(default="", compare=False)  # the config's free text (import-hf: why it has no weights)
    gguf: object = field(default=None, compare=False, repr=False)  # config.gguf.hparams.GgufHparams, from a GGUF
    gguf_weights: object = field(default=None, compare=False, repr=False)  # config.gguf.tensors.GgufWeights

    def precision(self, name: str | None, what: str = "precision") -> Precision:
        if name is not None and not isinstance(name, str):
            raise KvcalcError(f"{what}: must be a precision's name (a string), got {type(name).__name__}",
                              param=what)
        name = name or self.default_precision
        try:
            return self.precisions[name]
        except KeyError:  # precisions are names, like models: FP8 is fp8 (where that names only one)
            same = [p for k, p in self.precisions.items() if k.casefold() == name.casefold()]
            if len(same) == 1:
                return same[0]
            implicit = self._ggml_precision(name) or self._nvfp4_precision(name)
            if implicit is not None:
                return implicit
            raise KvcalcError(
                f"{what}: model {self.name} has no precision {quote(name)}; it declares: "
                f"{', '.join(self.precisions)}", param=what
            ) from None

    def _nvfp4_precision(self, name: str) -> Precision | None:
        """``nvfp4``, a KV cache of 4-bit values with one e4m3 scale per 16 (TensorRT-LLM's kv_cache_config dtype
        nvfp4), for a model whose default precision keeps a ``kv`` cache; its other caches as the default keeps
        them."""
        from ..formats import FORMATS

        base = self.precisions.get(self.default_precision)
        if name.lower() != "nvfp4" or base is None or "kv" not in base.formats:
            return None
        formats = dict(base.formats)
        formats["kv"] = FORMATS["nvfp4"]
        return Precision("nvfp4", formats, "NVFP4 KV cache: e2m1 values two a byte + one e4m3 scale per 16 "
                                           "(TensorRT-LLM kv_cache_config dtype nvfp4)")

    def _ggml_precision(self, name: str) -> Precision | None:
        """llama.cpp's cache types as precisions every model has: ``q8_0`` (``--cache-type-k q8_0 --cache-type-v
        q8_0``), or ``q8_0/q4_0`` for K and V apart; any state keeps the default precision's format (llama.cpp
        keeps recurrent state in f32 whatever the cache type)."""
        from ..formats import FORMATS, KVFormat

        names = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0", "q4_1": "q4_1",
                 "iq4_nl": "iq4_nl", "q5_0": "q5_0", "q5_1": "q5_1"}
        parts = name.lower().split("/")
        if len(parts) > 2 or any(p not in names or names[p] not in FORMATS for p in parts):
            return None
        k, v = (FORMATS[names[p]] for p in (parts * 2)[:2])
        base = self.precisions.get(self.default_precision)
        formats = dict(base.formats) if base is not None else {}
        formats["kv"] = k if k is v else KVFormat(k, v)
        return Precision(name.lower(), formats, "llama.cpp -ctk / -ctv (ggml/src/ggml-common.h "
                                              "block layouts)")

    def kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for k in self.layers:
            counts[k] = counts.get(k, 0) + 1
        return counts

    def layout_text(self) -> str:
        """'30 c4a + 31 c128a' in the order kinds first appear... sorted by kind order in layer_kinds."""
        counts = self.kind_counts()
        return " + ".join(f"{counts[k]} {k}" for k in self.layer_kinds if k in counts)

    def kind_label(self, kind: str) -> str:
        """What a layer kind caches, in one vocabulary whatever the config calls it (``global``, ``full_attention``
        and ``full`` are all ``full``): full, swa, chunked, mla, dsa (MLA + an indexer), c4a / c128a (V4's
        compressed), mamba, mamba2, gdn, kda, linear, or no-cache. From the kind's components, never its name."""
        from ..specs import (ChunkedAttention, CompressedMLA, FullAttention, IndexerCache, MLALatent,
                             RecurrentState, SlidingWindowAttention, SlidingWindowMLA)

        comps = [self.components[c] for c in self.layer_kinds[kind]]
        compressed = [c for c in comps if isinstance(c, CompressedMLA)]
        if compressed:
            return "+".join(f"c{c.ratio}a" for c in compressed)
        if any(type(c) is MLALatent for c in comps):
            return "dsa" if any(isinstance(c, IndexerCache) for c in comps) else "mla"
        for cls, label in ((SlidingWindowMLA, "swa"), (ChunkedAttention, "chunked"), (SlidingWindowAttention, "swa"),
                           (FullAttention, "full")):
            if any(isinstance(c, cls) for c in comps):
                return label
        recurrent = [c for c in comps if isinstance(c, RecurrentState)]
        if recurrent:
            names = {"gated_deltanet": "gdn", "linear_attention": "linear"}
            return "+".join(dict.fromkeys(names.get(c.kind, c.kind) for c in recurrent))
        return "no-cache" if not comps else "+".join(dict.fromkeys(c.kind for c in comps))

    def structure_text(self) -> str:
        """'18 swa + 18 full': the layers by what they cache (:meth:`kind_label`), kinds of one label merged, in the
        order the config declares its kinds (as :meth:`layout_text`)."""
        counts: dict[str, int] = {}
        for k, n in sorted(self.kind_counts().items(), key=lambda kv: list(self.layer_kinds).index(kv[0])):
            label = self.kind_label(k)
            counts[label] = counts.get(label, 0) + n
        return " + ".join(f"{n} {label}" for label, n in counts.items())
