"""Regressions for defects found in review: each case once produced a wrong number, a traceback-free but
multi-line error, an internal error, or a silent guess."""

import json

import pytest

from configcases import mutate, one_line_error, write

M = 1 << 20


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


def test_overflow_caught_across_components(tmp_path, cli):
    # two states of 2^60 fp32 values = 2^62 B each: each fits int64, their sum (2^63 B) does not
    data = mutate(lambda d: d["components"].update(
        big1={"cache": "state", "shape": [1 << 20] * 3}, big2={"cache": "state", "shape": [1 << 20] * 3}))
    data["layer_kinds"]["swa"] = ["win", "big1", "big2"]
    path = write(tmp_path, data)
    one_line_error(cli("estimate", path, "-c", "1k"), "exceeds 8 EiB")
