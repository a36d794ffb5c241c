"""`kvcalc claims --file`: every compute argument is typed and a bad one is a one-line error naming the file
(moved from test_review_regressions.py; apart from test_claims.py because both name their template CLAIM)."""

import pytest

from configcases import one_line_error


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
