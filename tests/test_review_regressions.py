"""Regressions for defects found in review: each case once produced a wrong number, a traceback-free but
multi-line error, an internal error, or a silent guess."""

import json

import pytest
import yaml

from test_config_errors import BASE, _set, mutate, write

M = 1 << 20


def one_line_error(r, *fragments):
    assert r.code == 2, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("kvcalc: error: ") and "internal error" not in lines[0], lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    assert r.out == ""


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["estimate", "deepseek-v4-pro", "--frobnicate"], "No such option: --frobnicate"),
        (["check-log"], "Missing argument 'FILE'"),
        (["compare", "deepseek-v4-pro"], "compare takes two models"),
        (["frob"], "No such command 'frob'"),
        (["estimate", "--batch", "1.5"], "--batch"),
        (["models", "extra"], "unexpected extra argument"),
        (["show", "deepseek-v4-pro", "--precision", "fp8"], "No such option: --precision"),
        (["estimate", "llama-3.1-8b", "--context", "1,048,576"], "ambiguous"),
        (["estimate", "llama-3.1-8b", "--vs", "nosuch"], "--vs: unknown model"),
        (["compare", "deepseek-v3.2", "gpt-oss-120b", "-p", "bf16", "--precision-b", "fp9"], "--precision-b"),
        (["estimate", "/tmp"], "is a directory"),
        (["claims", "--file", ""], "--file: empty path"),
        (["estimate", "llama-3.1-70b", "-c", "1M", "--batch", "100000000000"], "--batch"),
        (["estimate", "llama-3.1-70b", "-c", "1M", "--batch", "10000000000000000000"], "--batch"),
        (["estimate", "llama-3.1-70b", "-c", "4G", "--batch", "100000"], "exceeds 8 EiB"),
    ],
)
def test_usage_errors_are_one_line(cli, args, fragment):
    one_line_error(cli(*args), fragment)


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


def test_mtp_reference_is_counted_alike(cli):
    # V3.2 against itself must be 100% whether or not the MTP layer is counted
    r = cli("estimate", "--context", "1M", "--mtp", "--json")
    rows = {(d["model"], d["precision"]): d for d in r.json()}
    v32 = rows[("deepseek-v3.2", "bf16")]
    assert v32["reference"]["ratio"] == 1.0
    assert v32["per_sequence_bytes"] == 1408 * 62 * M  # 61 layers + the MTP layer


STATE_ONLY = """
kvcalc: 1
name: ssm
precisions: {fp32: {}}
default_precision: fp32
components: {s: {cache: state, shape: [16, 64, 128], dtype: fp32}}
layer_kinds: {ssm: [s]}
layers: [{pattern: [ssm], layers: 4}]
"""


def test_zero_byte_reference(tmp_path, cli):
    path = write(tmp_path, STATE_ONLY)
    r = cli("compare", path, path, "--basis", "article")
    assert r.code == 0, r.err
    r = cli("compare", path, path, "--basis", "article", "--json")
    d = json.loads(r.out)  # strict JSON: no NaN
    assert d["ratio_b_over_a"] == [None]
    # the complete basis counts the state: 4 layers x 16 x 64 x 128 x 4 B
    r = cli("estimate", path, "-c", "1M", "--json")
    assert r.json()[0]["total_bytes"] == 4 * 16 * 64 * 128 * 4


def test_narrow_terminal_never_truncates_numbers(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("estimate", "--context", "1M")
    assert r.code == 0
    assert "…" not in r.out
    assert "83.88 GiB" in r.out and "290.91% (2.91x)" in r.out and "fp8_ds_mla_v4" in r.out


CLAIM = """
sources: {s: "hand"}
claims:
  - id: t
    claim: test
    source: s
    quote: q
    published: PUB
    unit: B
    compute: COMPUTE
    tolerance: TOL
"""


@pytest.mark.parametrize(
    "published, compute, tol, fragment",
    [
        ("656", "{entry_bytes: {format: fp8_ds_mla, dim: abc, rope_dim: 64}}", "{abs: 0}", "dim: must be an integer"),
        ("656", "{entry_bytes: {format: fp8_ds_mla, dim: 575.5, rope_dim: 64}}", "{abs: 0}", "dim: must be an integer"),
        ("1", "{sequence: {model: deepseek-v3.2, context: 1M, precision: bf16, basis: [article]}}", "{abs: 0}", "basis: must be a name"),
        ("1", "{layer: {model: deepseek-v3.2, kind: [mla], context: 1M, precision: bf16, basis: article}}", "{abs: 0}", "kind: must be a name"),
        ("1", "{sequence: {model: deepseek-v3.2, context: 1M, precision: bf16, basis: article, mtp: 'no'}}", "{abs: 0}", "mtp: must be true or false"),
        ("1", "{sequence: {model: nosuch, context: 1M, precision: bf16, basis: article}}", "{abs: 0}", "claim t: compute.sequence.model"),
        (".nan", "{entry_bytes: {format: fp8_ds_mla, dim: 576, rope_dim: 64}}", "{abs: 0}", "published: must be a finite number"),
        ("656", "{entry_bytes: {format: fp8_ds_mla, dim: 576, rope_dim: 64}}", "{abs: .inf}", "finite non-negative"),
    ],
)
def test_claims_arguments_are_typed(tmp_path, cli, published, compute, tol, fragment):
    path = tmp_path / "c.yaml"
    path.write_text(CLAIM.replace("PUB", published).replace("COMPUTE", compute).replace("TOL", tol))
    one_line_error(cli("claims", "--file", str(path)), str(path), fragment)


def test_schema_and_loader_agree(tmp_path, cli):
    """Every bad config the loader refuses for its shape, the schema refuses too; the cases the schema
    cannot see (cross-references, ratios, format fit, unused kinds) are named here."""
    import jsonschema

    from test_config_errors import CASES

    schema = cli("schema").json()
    loader_only = {"ratio 1 compressed", "span not multiple", "rope > dim", "missing role", "format misfit",
                   "unknown layer kind", "unknown component", "bad default", "select missing value", "unused kind"}
    for label, change, _ in CASES:
        data = mutate(change)
        assert cli("estimate", write(tmp_path, data)).code == 2, label
        if label in loader_only:
            continue
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(yaml.safe_load(yaml.safe_dump(data)), schema)


def test_overflow_caught_across_components(tmp_path, cli):
    # two states of 2^60 fp32 values = 2^62 B each: each fits int64, their sum (2^63 B) does not
    data = mutate(lambda d: d["components"].update(
        big1={"cache": "state", "shape": [1 << 20] * 3}, big2={"cache": "state", "shape": [1 << 20] * 3}))
    data["layer_kinds"]["swa"] = ["win", "big1", "big2"]
    path = write(tmp_path, data)
    one_line_error(cli("estimate", path, "-c", "1k"), "exceeds 8 EiB")
