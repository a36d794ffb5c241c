"""Bad configs: one line naming the file and field, exit code 2, never a traceback."""

import copy

import pytest
import yaml

import kvcalc
from kvcalc.config import parse_model
from kvcalc.errors import KvcalcError

from configcases import BASE, _del, _set, mutate, one_line_error, write


def test_base_config_is_valid(tmp_path, cli):
    r = cli("estimate", write(tmp_path, BASE), "-c", "1024", "--json")
    assert r.code == 0, r.err
    d = r.json()[0]
    # swa: 128 x 1024; c4a: 128 x 1024 + 256 x 1024 + 256 x 256 + 8*2*2*512*4 (= 65,536)
    assert d["total_bytes"] == 128 * 1024 + 3 * (128 * 1024 + 256 * 1024 + 256 * 256 + 65536)


CASES = [
    ("unknown top key", _set(["layer_count"], 3), "layer_count: unknown key"),
    ("typo suggests", _set(["components", "c4", "ratoi"], 4), "did you mean 'ratio'"),
    ("missing key", _del(["layer_kinds"]), "layer_kinds: missing required key"),
    ("missing component field", _del(["components", "c4", "span"]), "components.c4.span: missing required key"),
    ("negative dim", _set(["components", "idx", "dim"], -128), "components.idx.dim: must be at least 1"),
    ("zero window", _set(["components", "win", "window"], 0), "components.win.window: must be at least 1"),
    ("string dim", _set(["components", "idx", "dim"], "128"), "components.idx.dim: must be an integer"),
    ("bool dim", _set(["components", "idx", "dim"], True), "components.idx.dim: must be an integer"),
    ("ratio 1 compressed", _set(["components", "c4", "ratio"], 1), "components.c4.ratio: a compressed cache needs ratio >= 2"),
    ("span not multiple", _set(["components", "c4", "span"], 6), "components.c4.span: must be a whole multiple"),
    ("rope > dim", _set(["components", "win", "rope_dim"], 600), "components.win.rope_dim"),
    ("unknown cache kind", _set(["components", "c4", "cache"], "compresed_mla"), "did you mean 'compressed_mla'"),
    ("unknown format", _set(["precisions", "fp8", "kv"], "fp9"), "precisions.fp8.kv: unknown storage format"),
    ("missing role", _del(["precisions", "fp8", "indexer"]), "precisions.fp8.indexer: missing required key"),
    ("format misfit", _set(["components", "win", "dim"], 500), "precisions.fp8.kv"),
    ("unknown layer kind", _set(["layers"], ["swa", "c4x"]), "layers[1]: unknown layer kind 'c4x'"),
    ("unknown component", _set(["layer_kinds", "swa"], ["window"]), "layer_kinds.swa[0]: unknown component 'window'"),
    ("bad default", _set(["default_precision"], "fp16"), "default_precision: 'fp16' is not among"),
    ("version", _set(["kvcalc"], 2), "kvcalc: unsupported config format version 2"),
    ("bad state shape", _set(["components", "st", "shape"], [8, 0]), "components.st.shape[1]"),
    ("state storage", _set(["components", "st", "storage"], "kv"), "components.st.storage: unknown key"),
    ("select missing value", _set(["layers"], {"select": [0, 4, 5], "kinds": {0: "swa", 4: "c4a"}}), "layers.select[2]"),
    ("pattern zero", _set(["layers"], [{"pattern": ["swa"], "layers": 0}]), "layers[0].layers: must be at least 1"),
    ("unused kind", _set(["layer_kinds", "extra"], ["win"]), "layer_kinds.extra: declared but used by no layer"),
    ("wrapped unknown", _set(["components", "idx", "dim"], {"value": 128, "sorce": "x"}), "beside 'value'"),
]


@pytest.mark.parametrize("label, change, message", CASES, ids=[c[0] for c in CASES])
def test_bad_config(tmp_path, cli, label, change, message):
    path = write(tmp_path, mutate(change))
    r = cli("estimate", path, "-c", "1M")
    assert r.code == 2, (label, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("kvcalc: error: ") and path in lines[0], lines[0]
    assert message in lines[0], lines[0]
    assert "internal error" not in r.err and r.out == ""


@pytest.mark.parametrize(
    "text, message",
    [
        ("kvcalc: 1\nname: [x\n", "malformed YAML"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("- 1\n- 2\n", "top level must be a mapping"),
        ("!!python/object/apply:os.system ['echo hi']\n", "malformed YAML"),
        ("", "top level must be a mapping"),
    ],
)
def test_malformed_yaml(tmp_path, cli, text, message):
    path = write(tmp_path, text)
    r = cli("estimate", path)
    assert r.code == 2
    assert message in r.err and path in r.err and len(r.err.strip().splitlines()) == 1


def test_missing_file(cli):
    r = cli("estimate", "no/such/model.yaml")
    assert r.code == 2 and "no such config file" in r.err


def test_unknown_model_suggests(cli):
    r = cli("estimate", "deepseek-v4-por")
    assert r.code == 2
    assert "unknown model 'deepseek-v4-por'" in r.err and "deepseek-v4-pro" in r.err


def test_values_with_sources_are_kept():
    m = kvcalc.load_model("deepseek-v4-pro")
    assert m.provenance["components.window.window"] == "config.json sliding_window"
    assert "compress_ratios" in m.provenance["layers.select"]


def test_parse_model_directly():
    m = parse_model(copy.deepcopy(BASE), "inline")
    assert m.layers == ("swa", "c4a", "c4a", "c4a")
    with pytest.raises(KvcalcError, match="inline: components.c4.ratio"):
        parse_model(mutate(_set(["components", "c4", "ratio"], 0)), "inline")


def test_json_schema_accepts_shipped_configs_and_rejects_bad_ones(cli):
    import jsonschema  # in the test extra

    r = cli("schema")
    schema = r.json()
    from kvcalc.paths import configs_dir

    # what jsonschema.validate does, with the schema checked and the validator built once, not per document
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    paths = sorted(configs_dir().glob("*.yaml"))
    assert paths
    for path in paths:
        validator.validate(yaml.safe_load(path.read_text()))
    validator.validate(BASE)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(mutate(_set(["components", "c4", "ratoi"], 4)))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(mutate(_set(["components", "idx", "dim"], -128)))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(mutate(_del(["layer_kinds"])))


def test_compressor_state_shape_is_derived_from_the_component_it_serves():
    from kvcalc.config import load_model

    v4 = load_model("deepseek-v4-pro")
    # [span, kv + score, span / ratio, dim], written out from vLLM compressor.py's rule
    assert v4.components["c4_state"].shape == (8, 2, 2, 512)
    assert v4.components["c4_indexer_state"].shape == (8, 2, 2, 128)
    assert v4.components["c128_state"].shape == (128, 2, 1, 512)
    assert v4.components["c4_state"].fixed_bytes() == 8 * 2 * 2 * 512 * 4 == 64 * 1024
    assert v4.components["c128_state"].fixed_bytes() == 128 * 2 * 1 * 512 * 4 == 512 * 1024


@pytest.mark.parametrize(
    "replacement,fragment",
    [
        ("compresses: window", "components.c4_state.compresses: 'window' is not a compressed cache"),
        ("compresses: c4_entries\n    shape: [4, 2, 2, 512]", "components.c4_state.shape: [4, 2, 2, 512] disagrees"),
        ("compresses: c4_entrie", "unknown component 'c4_entrie'"),
    ],
)
def test_compressor_state_refuses_wrong_targets_and_shapes(tmp_path, replacement, fragment):
    import re

    from kvcalc.config import load_model
    from kvcalc.paths import configs_dir

    text = (configs_dir() / "deepseek-v4-pro.yaml").read_text()
    assert "compresses: c4_entries\n" in text
    path = tmp_path / "m.yaml"
    path.write_text(text.replace("compresses: c4_entries", replacement, 1))
    with pytest.raises(KvcalcError, match=re.escape(fragment)):
        load_model(str(path))


def test_recurrent_state_kinds_and_cacheless_layers(tmp_path):
    """mamba2 / gated_deltanet derive their state from the declared dims; the dtype follows the precision's
    `state` role unless stated; a layer kind with no components is a layer without cache; `select` may be a
    pattern string."""
    from kvcalc.config import load_model
    from kvcalc.estimate import estimate

    text = """
kvcalc: 1
name: hybrid
precisions:
  bf16: {kv: bf16, state: bf16}
  fp32s: {kv: bf16, state: fp32}
default_precision: bf16
components:
  kv: {cache: full_attention, kv_heads: 2, head_dim: 64}
  m: {cache: mamba2, heads: 8, head_dim: 16, state_size: 32, groups: 2, conv_kernel: 4}
  g: {cache: gated_deltanet, k_heads: 2, v_heads: 4, k_head_dim: 8, v_head_dim: 16, conv_kernel: 4, ssm_dtype: fp32}
layer_kinds: {attn: [kv], mamba: [m], gdn: [g], mlp: []}
layers: {select: "M-G*", kinds: {M: mamba, "-": mlp, G: gdn, "*": attn}}
"""
    p = tmp_path / "h.yaml"
    p.write_text(text)
    spec = load_model(str(p))
    assert spec.layers == ("mamba", "mlp", "gdn", "attn")
    # mamba2: conv 3 x (8 x 16 + 2 x 2 x 32) = 768 values, ssm 8 x 16 x 32 = 4,096 values
    # gated deltanet: conv 3 x (2 x 2 x 8 + 4 x 16) = 288 values (state role), recurrent 4 x 16 x 8 = 512 (fp32)
    # attention: 2 x 2 x 64 x 2 B = 512 B per token
    e = estimate(spec, [100])
    assert int(e.per_sequence[0]) == (768 + 4096) * 2 + 288 * 2 + 512 * 4 + 100 * 512
    e = estimate(spec, [100], precision="fp32s")
    assert int(e.per_sequence[0]) == (768 + 4096) * 4 + 288 * 4 + 512 * 4 + 100 * 512
    bad = text.replace("fp32s: {kv: bf16, state: fp32}", "fp32s: {kv: bf16, state: fp8_indexer}")
    p.write_text(bad)
    from kvcalc.config import _CACHE

    _CACHE.clear()  # the loader caches by path
    with pytest.raises(KvcalcError, match=r"precisions.fp32s.state: state role of component m must be a plain dtype"):
        load_model(str(p))
    p.write_text(text.replace("conv_kernel: 4, ssm", "conv_kernel: 1, ssm"))
    _CACHE.clear()
    with pytest.raises(KvcalcError, match=r"components.g.conv_kernel: must be at least 2"):
        load_model(str(p))


# ---- regressions found in review (from tests/test_review_regressions.py) ----------------------------------
@pytest.mark.parametrize(
    "label, change, fragment",
    [
        ("huge heads", _set(["components", "idx", "dim"], 10**20), "components.idx.dim: 100000000000000000000 is implausibly large"),
        ("huge state", _set(["components", "st", "shape"], [100000] * 4), "exceeds 8 EiB"),
        ("huge layer count", _set(["layers"], [{"pattern": ["swa"], "layers": 10**9}]), "exceeds 10,000 layers"),
        ("nested component list", _set(["layer_kinds", "swa"], [["win"]]), "layer_kinds.swa[0]: unknown component"),
        ("display_name list", _set(["display_name"], [1, 2]), "display_name: must be a string"),
        ("sources list", _set(["sources"], []), "sources: must be a mapping"),
        ("bool select", _set(["layers"], {"select": [True, 4], "kinds": {1: "swa", 4: "c4a"}}), "layers.select[0]"),
        ("wrapped name", _set(["name"], {"value": "toy", "source": "x"}), "name: must be a non-empty string"),
        ("integer source", _set(["components", "c4", "source"], 7), "components.c4.source: must be a string"),
    ],
)
def test_config_values_are_bounded_and_typed(tmp_path, cli, label, change, fragment):
    path = write(tmp_path, mutate(change))
    one_line_error(cli("estimate", path, "-c", "1M"), path, fragment)


def test_unhashable_yaml_key(tmp_path, cli):
    path = write(tmp_path, "? [a, b]\n: 1\n")
    one_line_error(cli("estimate", path), path, "mapping key must be a plain value")


def test_a_component_may_be_called_value(tmp_path, cli):
    data = mutate(lambda d: d["components"].__setitem__("value", d["components"].pop("win")))
    data["layer_kinds"] = {"c4a": ["value", "c4", "idx", "st"], "swa": ["value"]}
    r = cli("estimate", write(tmp_path, data), "-c", "1024", "--json")
    assert r.code == 0, r.err
    assert r.json()[0]["total_bytes"] == 128 * 1024 + 3 * (128 * 1024 + 256 * 1024 + 256 * 256 + 65536)


def test_kind_names_with_spaces(tmp_path, cli):
    data = mutate(lambda d: d["layer_kinds"].__setitem__("window only", d["layer_kinds"].pop("swa")))
    data["layers"] = ["window only", {"pattern": ["c4a"], "layers": 3}]
    r = cli("estimate", write(tmp_path, data), "-c", "1024")
    assert r.code == 0, r.err
    assert "window only" in r.out


def test_schema_and_loader_agree(tmp_path, cli):
    """Every bad config the loader refuses for its shape, the schema refuses too; the cases the schema
    cannot see (cross-references, ratios, format fit, unused kinds) are named here."""
    import jsonschema

    schema = cli("schema").json()
    cls = jsonschema.validators.validator_for(schema)  # checked and built once (jsonschema.validate: per call)
    cls.check_schema(schema)
    validator = cls(schema)
    loader_only = {"ratio 1 compressed", "span not multiple", "rope > dim", "missing role", "format misfit",
                   "unknown layer kind", "unknown component", "bad default", "select missing value", "unused kind"}
    for label, change, _ in CASES:
        data = mutate(change)
        assert cli("estimate", write(tmp_path, data)).code == 2, label
        if label in loader_only:
            continue
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(yaml.safe_load(yaml.safe_dump(data)))
