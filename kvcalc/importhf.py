"""`kvcalc import-hf`: a Hugging Face ``config.json`` turned into a kvcalc model config.

The importer reads the structure the config declares and copies every value it states (``head_dim`` when the
config has one, never ``hidden_size / heads`` then); a value it must derive says so in its source. What it
does not understand fails closed: an unknown ``model_type``, a layer type it has no cache kind for, a field it
needs but the file lacks, each one line naming the field, and the list of families it knows.

Families (``model_type``; nested ``text_config`` read for multimodal checkpoints):

* full / sliding-window attention (GQA, MQA, MHA): llama (Llama 2, 3, 3.1), mistral (global
  ``sliding_window``), mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, phi3 (Phi-3, Phi-4), gemma, gemma2 and
  gemma3 (local/global patterns; the default pattern when the config omits it), gpt_oss (``layer_types``);
* MLA: deepseek_v2, deepseek_v3, kimi_k2 (``kv_lora_rank + qk_rope_head_dim``, MTP layers);
* MLA + indexer (DSA): deepseek_v32, glm_moe_dsa;
* DeepSeek V4 (deepseek_v4): ``compress_ratios`` per layer (0 window only, 4 c4a, 128 c128a), the window in
  every layer, compressor state, MTP layers;
* hybrids with fixed recurrent state: qwen3_next and qwen3_5 (gated DeltaNet layers + full attention every
  ``full_attention_interval`` or as ``layer_types`` says; ``mamba_ssm_dtype``; Qwen3.5's MTP layer), nemotron_h (``hybrid_override_pattern``: M Mamba-2, * attention, - and E
  layers without cache), jamba (Mamba-1 + attention every ``attn_layer_period``), falcon_h1 (attention and
  Mamba-2 side by side in every layer), minimax and minimax_m1 (``attn_type_list``: lightning linear
  attention + softmax),
  kimi_linear (Kimi Delta Attention layers by ``linear_attn_config.kda_layers``, MLA in the others).
  Their state is in the precision's ``state`` role: the model dtype, as vLLM keeps it, except where a config
  states its own (Qwen3.5's ``mamba_ssm_dtype``, Nemotron-H's ``mamba_ssm_cache_dtype``, fp32 when absent, as
  vLLM's NemotronHForCausalLMConfig does; KDA's recurrent state in fp32);
* llama4 (chunked local attention over ``attention_chunk_size`` in the RoPE layers, global NoPE layers by
  ``no_rope_layers``).

Torch-free, like the rest of the core. Pure function of the JSON: no network.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import KvcalcError

GQA = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "gemma", "gemma2",
       "gemma3", "gemma3_text", "gpt_oss"}
MLA = {"deepseek_v2", "deepseek_v3", "kimi_k2"}
DSA = {"deepseek_v32", "glm_moe_dsa"}
V4 = {"deepseek_v4"}
HYBRID = {"qwen3_next", "qwen3_5", "qwen3_5_text", "nemotron_h", "jamba", "falcon_h1", "minimax", "minimax_m1",
          "kimi_linear"}
CHUNKED = {"llama4", "llama4_text"}
SUPPORTED = sorted(GQA | MLA | DSA | V4 | HYBRID | CHUNKED)

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_CONFIG_BYTES = 16 << 20


def _fail(msg: str) -> KvcalcError:
    return KvcalcError(msg, param="config")


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def locate(arg: str, flag: str = "--hf") -> str:
    """A local config.json (or a folder holding one) as given; else a Hugging Face hub id ``org/name``, whose
    config.json ``huggingface_hub`` fetches (from its cache, or online) when it is installed. Only here does
    kvcalc ever touch the network, and only when asked with a hub id."""
    p = Path(arg)
    if arg.endswith(".json") or p.is_dir() or p.exists():
        return arg
    if not _HUB_ID.match(arg):
        raise _fail(f"{flag}: {arg[:200]!r} is neither a config.json, a folder holding one, nor a hub id org/name")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise _fail(f"{flag}: {arg!r} is not a local file; fetching a hub id needs huggingface_hub "
                    "(pip install huggingface_hub), or download its config.json and pass the file") from None
    try:
        return str(hf_hub_download(repo_id=arg, filename="config.json"))
    except Exception as exc:  # offline, gated or missing repo: any failure of the fetch is one line
        detail = " ".join(str(exc).split())[:160]
        raise _fail(f"{flag}: {arg!r} is not a local file, and fetching it as a Hugging Face hub id failed "
                    f"({type(exc).__name__}: {detail})") from None


def read_config(path: str | Path) -> tuple[dict, str]:
    """A config.json (or a directory holding one) as a dict. Real files carry ``Infinity`` / ``NaN``; the
    JSON reader accepts them."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "config.json"
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise _fail(f"{p}: larger than {MAX_CONFIG_BYTES >> 20} MiB; not a model config")
        with open(p, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise _fail(f"{str(p)[:200]!r}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _fail(f"{p}: not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise _fail(f"{p}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict):
        raise _fail(f"{p}: must hold a JSON object, got {type(data).__name__}")
    return data, str(p)


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


def model_type(fields: _Fields) -> str:
    mt = fields.cfg.get("model_type") or fields.top.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise _fail(f"{fields.file}: model_type: missing; kvcalc reads the family from it (supported: "
                    f"{', '.join(SUPPORTED)})")
    return mt


def _name_for(fields: _Fields, name: str | None) -> str:
    if name is None:  # the checkpoint's own name, else the hub cache's repo, else the file's (a folder's)
        f = Path(fields.file)
        hub = f.parent.parent.parent.name if f.parent.parent.name == "snapshots" else ""
        repo = hub.split("--")[-1] if hub.startswith("models--") else ""  # models--Org--Name/snapshots/<sha>/
        raw = (fields.top.get("_name_or_path") or repo or (f.parent.name if f.name == "config.json" else f.stem)
               or "imported")
        name = str(raw).rstrip("/").split("/")[-1].lower()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "imported-model"
    if not _NAME_OK.match(name):
        raise _fail(f"name: {name!r} is not a usable model name (letters, digits, . _ -; at most 100)")
    return name


def _gqa_precisions(fields: _Fields) -> dict:
    return {
        "bf16": {"kv": "bf16"},
        "fp16": {"kv": "fp16"},
        "fp8": {"kv": "fp8_e4m3", "source": "vLLM --kv-cache-dtype fp8 (per-tensor scales, 1 B per value)"},
    }


def _layer_types(fields: _Fields, mt: str, n: int) -> tuple[list[str], str]:
    """Per-layer 'full_attention' / 'sliding_attention', and where that came from."""
    lt = fields.raw("layer_types")
    if lt is not None:
        if not isinstance(lt, list) or len(lt) != n:
            raise _fail(f"{fields.file}: {fields.prefix}layer_types: must list {n} layer types (num_hidden_layers), "
                        f"got {len(lt) if isinstance(lt, list) else type(lt).__name__}")
        for i, t in enumerate(lt):
            if t not in ("full_attention", "sliding_attention"):
                raise _fail(f"{fields.file}: {fields.prefix}layer_types[{i}]: {t!r} has no kvcalc cache kind yet "
                            "(known: full_attention, sliding_attention)")
        return list(lt), fields.src("layer_types")
    if mt == "gemma2":
        return (["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)],
                "transformers Gemma2Config: even layers local (sliding), odd layers global")
    if mt in ("gemma3", "gemma3_text"):
        if fields.has("sliding_window_pattern"):
            k, how = fields.int("sliding_window_pattern"), fields.src("sliding_window_pattern")
        else:
            k, how = 6, "transformers Gemma3TextConfig default sliding_window_pattern 6 (the config omits it)"
        return ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(n)], \
            f"{how}: every {k}th layer global"
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if fields.raw("use_sliding_window", False) and fields.has("sliding_window"):
            m = fields.int("max_window_layers", minimum=0)
            return (["sliding_attention" if i >= m else "full_attention" for i in range(n)],
                    f"{fields.src('use_sliding_window')} true: layers from max_window_layers ({m}) on slide "
                    "(transformers Qwen2Config)")
        return ["full_attention"] * n, f"{fields.src('use_sliding_window')} false or absent: every layer full"
    if mt in ("mistral", "mixtral", "phi3") and fields.has("sliding_window"):
        return ["sliding_attention"] * n, f"{fields.src('sliding_window')} set: every layer slides"
    if mt == "gemma" or mt == "llama" or mt in ("mistral", "mixtral", "phi3"):
        return ["full_attention"] * n, "no sliding window in the config: every layer full"
    raise _fail(f"{fields.file}: layer_types: {mt} configs state their layer types; this one has none")


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


def _import_gqa(fields: _Fields, mt: str) -> dict:
    n = fields.int("num_hidden_layers")
    types, how = _layer_types(fields, mt, n)
    kv, hd = _kv_heads(fields), _head_dim(fields)
    comps: dict = {}
    kinds: dict = {}
    if "full_attention" in types:
        comps["full"] = {"cache": "full_attention", "kv_heads": kv, "head_dim": hd, "storage": "kv"}
        kinds["global"] = ["full"]
    if "sliding_attention" in types:
        comps["sliding"] = {"cache": "sliding_attention", "kv_heads": kv, "head_dim": hd,
                            "window": fields.value("sliding_window"), "storage": "kv"}
        kinds["local"] = ["sliding"]
    kind_of = {"full_attention": "global", "sliding_attention": "local"}
    if len(set(types)) == 1:
        layers = [{"pattern": [kind_of[types[0]]], "layers": {"value": n, "source": fields.src("num_hidden_layers")},
                   "note": how}]
    else:
        layers = {"select": types, "kinds": {t: kind_of[t] for t in dict.fromkeys(types)}, "source": how}
    local = types.count("sliding_attention")
    desc = (f"{n} layers ({n - local} full" + (f", {local} sliding over {fields.int('sliding_window')} tokens" if local
                                               else "") + f"); {kv['value']} KV heads of {hd['value']} dims")
    return {"description": desc, "precisions": _gqa_precisions(fields), "components": comps,
            "layer_kinds": kinds, "layers": layers}


def _import_mla(fields: _Fields, mt: str, indexer: bool) -> dict:
    n = fields.int("num_hidden_layers")
    rank, rope = fields.int("kv_lora_rank"), fields.int("qk_rope_head_dim")
    comps = {"latent": {"cache": "mla",
                        "dim": {"value": rank + rope, "source": f"{fields.src('kv_lora_rank')} {rank} + "
                                                                f"qk_rope_head_dim {rope}"},
                        "rope_dim": fields.value("qk_rope_head_dim"), "storage": "kv"}}
    kinds = {"mla": ["latent"]}
    if indexer:
        comps["indexer"] = {"cache": "indexer", "ratio": 1, "dim": fields.value("index_head_dim"), "storage": "indexer"}
        if fields.has("index_topk"):
            comps["indexer"]["topk"] = fields.value("index_topk")
        kinds["mla"].append("indexer")
        precisions = {
            "bf16": {"kv": "bf16", "indexer": "bf16"},
            "fp8": {"kv": "fp8_ds_mla", "indexer": "fp8_indexer",
                    "source": "FlashMLA sparse fp8_ds_mla latent; vLLM indexer cache (fp8 + fp32 scale per 128)"},
        }
    else:
        precisions = {
            "bf16": {"kv": "bf16"},
            "fp8": {"kv": "fp8_e4m3", "source": "vLLM --kv-cache-dtype fp8 on MLA (per-tensor scale)"},
        }
    out = {
        "description": (f"{n} MLA layers: one {rank + rope}-wide latent ({rank} + {rope} RoPE) per token"
                        + (f" and one {fields.int('index_head_dim')}-wide indexer key" if indexer else "")),
        "precisions": precisions, "components": comps, "layer_kinds": kinds,
        "layers": [{"pattern": ["mla"], "layers": {"value": n, "source": fields.src("num_hidden_layers")}}],
    }
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "mla", "source": f"{fields.src('num_nextn_predict_layers')} (full MLA layers)"}
    return out


_V4_SRC = "vLLM models/deepseek_v4/compressor.py (overlap = compress_ratio == 4: coff 2, span 2 x ratio)"


def _import_v4(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    ratios = fields.raw("compress_ratios")
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    if not isinstance(ratios, list) or len(ratios) not in (n, n + mtp):
        raise _fail(f"{fields.file}: {fields.prefix}compress_ratios: must list one ratio per layer ({n}, or {n + mtp} "
                    f"with the MTP layers), got {len(ratios) if isinstance(ratios, list) else type(ratios).__name__}")
    for i, r in enumerate(ratios):
        if isinstance(r, bool) or r not in (0, 4, 128):
            raise _fail(f"{fields.file}: {fields.prefix}compress_ratios[{i}]: {r!r} is not a ratio kvcalc knows "
                        "(0: window only, 4: c4a, 128: c128a)")
    hd, rope, window = fields.value("head_dim"), fields.value("qk_rope_head_dim"), fields.value("sliding_window")
    src = fields.src("compress_ratios")
    comps: dict = {"window": {"cache": "sliding_mla", "window": window, "dim": hd, "rope_dim": rope, "storage": "kv"}}
    kinds: dict = {"swa": ["window"]}
    used = set(ratios)
    if 4 in used:
        comps["c4_entries"] = {"cache": "compressed_mla", "ratio": {"value": 4, "source": src},
                               "span": {"value": 8, "source": _V4_SRC}, "dim": hd, "rope_dim": rope,
                               "shared_kv": True, "storage": "kv"}
        comps["c4_indexer"] = {"cache": "indexer", "ratio": {"value": 4, "source": src},
                               "dim": fields.value("index_head_dim"), "span": {"value": 8, "source": _V4_SRC},
                               "storage": "indexer"}
        if fields.has("index_topk"):
            comps["c4_indexer"]["topk"] = fields.value("index_topk")
        comps["c4_state"] = {"cache": "compressor_state", "compresses": "c4_entries", "dtype": "fp32",
                             "source": _V4_SRC}
        comps["c4_indexer_state"] = {"cache": "compressor_state", "compresses": "c4_indexer", "dtype": "fp32",
                                     "source": _V4_SRC}
        kinds["c4a"] = ["window", "c4_entries", "c4_indexer", "c4_state", "c4_indexer_state"]
    if 128 in used:
        comps["c128_entries"] = {"cache": "compressed_mla", "ratio": {"value": 128, "source": src},
                                 "span": {"value": 128, "source": _V4_SRC}, "dim": hd, "rope_dim": rope,
                                 "shared_kv": True, "storage": "kv"}
        comps["c128_state"] = {"cache": "compressor_state", "compresses": "c128_entries", "dtype": "fp32",
                               "source": _V4_SRC}
        kinds["c128a"] = ["window", "c128_entries", "c128_state"]
    name = {0: "swa", 4: "c4a", 128: "c128a"}
    main = ratios[:n]
    out = {
        "description": (f"{n} layers: {main.count(0)} window-only, {main.count(4)} c4a and {main.count(128)} c128a; "
                        f"{window['value']}-token window in every layer; shared K=V {hd['value']}-wide entries"),
        "precisions": {
            "bf16": {"kv": "bf16", "indexer": "bf16"},
            "fp8": {"kv": "fp8_ds_mla_v4", "indexer": "fp4_indexer",
                    "source": "vLLM DeepSeek V4: fp8 attention cache (584 B) and fp4 indexer cache (68 B)"},
        },
        "components": comps,
        "layer_kinds": {k: v for k, v in kinds.items() if k in {name[r] for r in ratios}},
        "layers": {"select": {"value": main, "source": f"{src}, first {n} entries"},
                   "kinds": {r: name[r] for r in sorted(set(main))}},
    }
    if mtp:
        r = ratios[n] if len(ratios) > n else 0
        out["mtp"] = {"layers": mtp, "kind": name[r],
                      "source": f"{fields.src('num_nextn_predict_layers')}; compress_ratios entry {n} = {r}"}
        out["layer_kinds"].setdefault(name[r], kinds[name[r]])
    return out


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


def _import_qwen3_next(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    lt = fields.raw("layer_types")
    if lt is not None:
        if not isinstance(lt, list) or len(lt) != n or any(t not in ("linear_attention", "full_attention") for t in lt):
            raise _fail(f"{fields.file}: {fields.prefix}layer_types: must list {n} of linear_attention / full_attention")
        types, how = list(lt), fields.src("layer_types")
    else:
        if fields.has("full_attention_interval"):
            k, how = fields.int("full_attention_interval"), fields.src("full_attention_interval")
        else:
            k, how = 4, "transformers Qwen3NextConfig default full_attention_interval 4 (the config omits it)"
        types = ["linear_attention" if (i + 1) % k else "full_attention" for i in range(n)]
        how = f"{how}: every {k}th layer full attention, the others gated DeltaNet"
    comps = {
        "full": _attention(fields),
        "linear": {"cache": "gated_deltanet", "k_heads": fields.value("linear_num_key_heads"),
                   "v_heads": fields.value("linear_num_value_heads"),
                   "k_head_dim": fields.value("linear_key_head_dim"),
                   "v_head_dim": fields.value("linear_value_head_dim"),
                   "conv_kernel": fields.value("linear_conv_kernel_dim")},
    }
    ssm = _ssm_dtype(fields, "mamba_ssm_dtype")
    if ssm is not None:
        comps["linear"]["ssm_dtype"] = ssm
        comps["linear"]["note"] = f"recurrent state in {ssm}: {fields.src('mamba_ssm_dtype')}"
    full = types.count("full_attention")
    out = {
        "description": f"{n} layers: {full} full attention, {n - full} gated DeltaNet (fixed state per request)",
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"attention": ["full"], "linear": ["linear"]},
        "layers": {"select": types, "kinds": {"linear_attention": "linear", "full_attention": "attention"},
                   "source": how},
    }
    mtp = fields.int("mtp_num_hidden_layers", minimum=0, default=0)
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "attention",
                      "source": f"{fields.src('mtp_num_hidden_layers')} (a full-attention layer)"}
    return out


def _import_nemotron_h(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    pat = fields.raw("hybrid_override_pattern")
    if not isinstance(pat, str) or len(pat) != n:
        raise _fail(f"{fields.file}: {fields.prefix}hybrid_override_pattern: must be a string of {n} layer codes "
                    f"(num_hidden_layers), got {len(pat) if isinstance(pat, str) else type(pat).__name__}")
    bad = sorted(set(pat) - set("M*-E"))
    if bad:
        raise _fail(f"{fields.file}: {fields.prefix}hybrid_override_pattern: layer code {bad[0]!r} unknown "
                    "(M Mamba-2, * attention, - MLP, E MoE)")
    heads, hdim = fields.int("mamba_num_heads"), fields.int("mamba_head_dim")
    comps: dict = {}
    kinds: dict = {}
    if "*" in pat:
        comps["attention"] = _attention(fields, "head_dim" if fields.has("head_dim") else "attention_head_dim")
        kinds["attention"] = ["attention"]
    if "M" in pat:
        comps["mamba"] = {"cache": "mamba2", "heads": fields.value("mamba_num_heads"),
                          "head_dim": fields.value("mamba_head_dim"), "state_size": fields.value("ssm_state_size"),
                          "groups": fields.value("n_groups"), "conv_kernel": fields.value("conv_kernel"),
                          "intermediate": {"value": heads * hdim, "source": f"{fields.src('mamba_num_heads')} "
                                           f"{heads} x mamba_head_dim {hdim} (vLLM nemotron_h MambaMixer2)"}}
        # vLLM keeps Nemotron-H's SSM state in the dtype the config states, else fp32
        # (model_executor/models/config.py NemotronHForCausalLMConfig, DEFAULT_MAMBA_SSM_CACHE_DTYPE "float32")
        stated = _ssm_dtype(fields, "mamba_ssm_cache_dtype")
        comps["mamba"]["ssm_dtype"] = stated or "fp32"
        comps["mamba"]["note"] = (f"SSM state in {stated}: {fields.src('mamba_ssm_cache_dtype')}" if stated else
                                  "SSM state in fp32: vLLM NemotronHForCausalLMConfig's default when the config "
                                  "states no mamba_ssm_cache_dtype (conv state in the model dtype)")
        kinds["mamba"] = ["mamba"]
    if "-" in pat:
        kinds["mlp"] = []
    if "E" in pat:
        kinds["moe"] = []
    code = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    return {
        "description": (f"{n} layers: {pat.count('M')} Mamba-2, {pat.count('*')} attention, "
                        f"{pat.count('-') + pat.count('E')} without cache (MLP / MoE)"),
        "precisions": _hybrid_precisions(), "components": comps, "layer_kinds": kinds,
        "layers": {"select": {"value": pat, "source": fields.src("hybrid_override_pattern")},
                   "kinds": {c: code[c] for c in dict.fromkeys(pat)}},
    }


def _import_jamba(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    period, offset = fields.int("attn_layer_period"), fields.int("attn_layer_offset", minimum=0)
    hidden, expand = fields.int("hidden_size"), fields.int("mamba_expand")
    types = ["attention" if i % period == offset else "mamba" for i in range(n)]
    how = f"{fields.src('attn_layer_period')} {period}, attn_layer_offset {offset}: layer i attends when i % {period} == {offset}"
    comps = {
        "attention": _attention(fields),
        "mamba": {"cache": "mamba", "conv_kernel": fields.value("mamba_d_conv"), "state_size": fields.value("mamba_d_state"),
                  "intermediate": {"value": expand * hidden, "source": f"{fields.src('mamba_expand')} {expand} x "
                                   f"hidden_size {hidden} (vLLM jamba MambaMixer)"}},
    }
    return {
        "description": f"{n} layers: {types.count('attention')} attention, {types.count('mamba')} Mamba-1",
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"attention": ["attention"], "mamba": ["mamba"]},
        "layers": {"select": types, "kinds": {"attention": "attention", "mamba": "mamba"}, "source": how},
    }


def _import_falcon_h1(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    hidden = fields.int("hidden_size")
    if fields.has("mamba_d_ssm"):
        inter = fields.value("mamba_d_ssm")
    else:
        e = fields.int("mamba_expand")
        inter = {"value": e * hidden, "source": f"{fields.src('mamba_expand')} {e} x hidden_size {hidden}"}
    comps = {
        "attention": _attention(fields),
        "mamba": {"cache": "mamba2", "heads": fields.value("mamba_n_heads"), "head_dim": fields.value("mamba_d_head"),
                  "state_size": fields.value("mamba_d_state"), "groups": fields.value("mamba_n_groups"),
                  "conv_kernel": fields.value("mamba_d_conv"), "intermediate": inter},
    }
    return {
        "description": f"{n} layers, each with attention and a Mamba-2 mixer side by side",
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"hybrid": ["attention", "mamba"]},
        "layers": [{"pattern": ["hybrid"], "layers": {"value": n, "source": fields.src("num_hidden_layers")},
                    "note": "Falcon-H1: attention and Mamba-2 run in parallel in every layer"}],
    }


def _import_minimax(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    types = fields.raw("attn_type_list")
    if not isinstance(types, list) or len(types) != n or any(t not in (0, 1) or isinstance(t, bool) for t in types):
        raise _fail(f"{fields.file}: {fields.prefix}attn_type_list: must list {n} values of 0 (linear) or 1 (softmax)")
    comps = {
        "softmax": _attention(fields),
        "linear": {"cache": "linear_attention", "heads": fields.value("num_attention_heads"),
                   "head_dim": fields.value("head_dim") if fields.has("head_dim") else _head_dim(fields)},
    }
    return {
        "description": (f"{n} layers: {types.count(1)} softmax attention, {types.count(0)} lightning (linear) attention"
                        " (vLLM dropped MiniMax-Text-01 / M1 in 0.23; the state dtype follows the precision)"),
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"softmax": ["softmax"], "linear": ["linear"]},
        "layers": {"select": {"value": types, "source": fields.src("attn_type_list")},
                   "kinds": {0: "linear", 1: "softmax"}},
    }


_KDA_SRC = ("vLLM 0.33 MambaStateShapeCalculator.kda_state_shape (conv over q, k and v: 3 x num_heads x head_dim "
            "channels; recurrent num_heads x head_dim x head_dim) and kda_state_dtype")


def _import_kimi_linear(fields: _Fields) -> dict:
    """Kimi-Linear: layer i (from 0) is a Kimi Delta Attention layer when i + 1 is in
    ``linear_attn_config.kda_layers`` (vLLM KimiLinearConfig.is_kda_layer), an MLA layer otherwise."""
    n = fields.int("num_hidden_layers")
    lac = fields.raw("linear_attn_config")
    where = f"{fields.file}: {fields.prefix}linear_attn_config"
    if not isinstance(lac, dict):
        raise _fail(f"{where}: required for kimi_linear (kda_layers, num_heads, head_dim, short_conv_kernel_size), "
                    f"got {type(lac).__name__ if lac is not None else 'nothing'}")
    kda = lac.get("kda_layers")
    if not isinstance(kda, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n for i in kda) \
            or len(set(kda)) != len(kda):
        raise _fail(f"{where}.kda_layers: must list distinct layer numbers from 1 to {n} (num_hidden_layers)")
    full = lac.get("full_attn_layers")  # vLLM's KimiLinearConfig asserts both lists are there
    if not isinstance(full, list) or sorted(set(full) | set(kda)) != list(range(1, n + 1)) or set(full) & set(kda):
        raise _fail(f"{where}.full_attn_layers: with kda_layers must number every layer 1 to {n} exactly once")
    if lac.get("use_full_rank_gate"):
        raise _fail(f"{where}.use_full_rank_gate: Kimi-K3's KDA layer (FlashKDA prefill checkpoints) is not "
                    "modelled; kvcalc imports Kimi-Linear's")
    sub_fields = _Fields(lac, fields.file)
    sub_fields.prefix = f"{fields.prefix}linear_attn_config."
    heads, hd = sub_fields.value("num_heads"), sub_fields.value("head_dim")
    types = ["kda" if i + 1 in set(kda) else "mla" for i in range(n)]
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    comps: dict = {}
    kinds: dict = {}
    if "mla" in types or mtp:
        rank, rope = fields.int("kv_lora_rank"), fields.int("qk_rope_head_dim")
        comps["latent"] = {"cache": "mla", "storage": "kv", "rope_dim": fields.value("qk_rope_head_dim"),
                           "dim": {"value": rank + rope, "source": f"{fields.src('kv_lora_rank')} {rank} + "
                                                                   f"qk_rope_head_dim {rope}"}}
        kinds["mla"] = ["latent"]
    if "kda" in types:
        comps["kda"] = {"cache": "kda", "k_heads": heads, "v_heads": heads, "k_head_dim": hd,
                        "v_head_dim": hd, "conv_kernel": sub_fields.value("short_conv_kernel_size"),
                        "ssm_dtype": "fp32",
                        "note": "Kimi Delta Attention: one head count and width for q, k and v; the recurrent "
                                "state in fp32 as vLLM keeps it (mamba_ssm_cache_dtype auto -> float32)",
                        "source": _KDA_SRC}
        kinds["kda"] = ["kda"]
    out = {
        "description": f"{n} layers: {types.count('mla')} MLA, {types.count('kda')} Kimi Delta Attention (fixed state)",
        "precisions": {
            "bf16": {"kv": "bf16", "state": "bf16", "source": "MLA latent and KDA conv state in the model dtype; "
                     "the KDA recurrent state is fp32 whatever the precision (vLLM kda_state_dtype)"},
            "fp8": {"kv": "fp8_e4m3", "state": "bf16",
                    "source": "vLLM --kv-cache-dtype fp8 on MLA (per-tensor scale); KDA state as in bf16"},
        },
        "components": comps, "layer_kinds": kinds,
        "layers": {"select": types, "kinds": {"mla": "mla", "kda": "kda"},
                   "source": f"{fields.src('linear_attn_config')}.kda_layers (numbered from 1): those layers KDA, "
                             "the others MLA (vLLM KimiLinearConfig.is_kda_layer)"},
    }
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "mla", "source": f"{fields.src('num_nextn_predict_layers')} (MLA layers)"}
    return out


def _import_llama4(fields: _Fields) -> dict:
    n = fields.int("num_hidden_layers")
    chunk = fields.value("attention_chunk_size")
    nr = fields.raw("no_rope_layers")
    if nr:
        if not isinstance(nr, list) or len(nr) != n or any(v not in (0, 1) or isinstance(v, bool) for v in nr):
            raise _fail(f"{fields.file}: {fields.prefix}no_rope_layers: must list {n} values of 0 (NoPE) or 1 (RoPE)")
        rope, how = list(nr), fields.src("no_rope_layers")
    else:
        k = fields.int("no_rope_layer_interval", default=4)
        rope = [int((i + 1) % k != 0) for i in range(n)]
        how = f"transformers Llama4TextConfig default: every {k}th layer NoPE (no_rope_layers omitted)"
    att = _attention(fields)
    comps = {"global": att, "chunked": dict(att, cache="chunked_attention", chunk=chunk)}
    types = ["chunked" if r else "global" for r in rope]
    return {
        "description": (f"{n} layers: {types.count('chunked')} chunked local attention over "
                        f"{chunk['value']} tokens (RoPE), {types.count('global')} global (NoPE)"),
        "precisions": _gqa_precisions(fields), "components": comps,
        "layer_kinds": {"global": ["global"], "chunked": ["chunked"]},
        "layers": {"select": types, "kinds": {"chunked": "chunked", "global": "global"},
                   "source": f"{how}; vLLM gives the RoPE layers chunked local attention"},
    }


def import_config(data: dict, file: str = "config.json", name: str | None = None) -> dict:
    """The kvcalc config (a dict ready for YAML) for a Hugging Face config."""
    fields = _Fields(data, file)
    mt = model_type(fields)
    if mt in GQA:
        body = _import_gqa(fields, mt)
    elif mt in MLA:
        body = _import_mla(fields, mt, indexer=False)
    elif mt in DSA:
        body = _import_mla(fields, mt, indexer=True)
    elif mt in V4:
        body = _import_v4(fields)
    elif mt in ("qwen3_next", "qwen3_5", "qwen3_5_text"):
        body = _import_qwen3_next(fields)
    elif mt == "nemotron_h":
        body = _import_nemotron_h(fields)
    elif mt == "jamba":
        body = _import_jamba(fields)
    elif mt == "falcon_h1":
        body = _import_falcon_h1(fields)
    elif mt in ("minimax", "minimax_m1"):
        body = _import_minimax(fields)
    elif mt == "kimi_linear":
        body = _import_kimi_linear(fields)
    elif mt in CHUNKED:
        body = _import_llama4(fields)
    else:
        raise _fail(f"{file}: model_type: {mt!r} is not a family kvcalc imports (supported: {', '.join(SUPPORTED)})")
    nm = _name_for(fields, name)
    out: dict = {"kvcalc": 1, "name": nm, "display_name": nm, "description": body.pop("description")}
    out["sources"] = {"config.json": f"{file} (model_type {mt}; imported by kvcalc import-hf)"}
    if fields.has("max_position_embeddings"):
        mp = fields.raw("max_position_embeddings")
        if isinstance(mp, (int, float)) and not isinstance(mp, bool) and math.isfinite(mp) and 1 <= mp <= 1 << 40:
            out["max_context"] = {"value": int(mp), "source": fields.src("max_position_embeddings")}
    out["precisions"] = body.pop("precisions")
    dtype = fields.raw("torch_dtype") or fields.raw("dtype") or fields.top.get("torch_dtype")
    out["default_precision"] = "fp16" if dtype == "float16" and "fp16" in out["precisions"] else "bf16"
    out.update(body)
    return out


def to_yaml(cfg: dict) -> str:
    import yaml

    head = ("# Generated by `kvcalc import-hf` from a Hugging Face config.json; every value cites the field it\n"
            "# came from. Edit freely: it is an ordinary kvcalc config (docs/config-format.md).\n")
    return head + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)


def load_hf(path: str | Path, name: str | None = None):
    """The ModelSpec of a config.json (or a directory holding one), through the same loader as YAML files."""
    from .config import parse_model

    data, file = read_config(path)
    return parse_model(import_config(data, file, name), file)
