"""`kvcalc claims` recomputes the published numbers; it must pass, and it must be able to fail."""

import pytest

from kvcalc import claims

REQUIRED = {
    "v32-bytes-per-token-layer", "v32-sequence-1m-bf16", "v4-c4a-layer-1m-bf16", "v4-c128a-layer-1m-bf16",
    "v4-pro-sequence-1m-bf16", "v4-vs-v32-bf16", "v4-fp8-fp4-halving", "v4-pro-vs-v32-kv", "v4-flash-vs-v32-kv",
    "v4-pro-vs-gqa8", "v4-c128a-entries-1m", "v32-fp8-entry",
}


def test_shipped_claims_pass(cli):
    r = cli("claims")
    assert r.code == 0, r.out
    assert "0 failed" in r.out
    results = claims.check()
    assert REQUIRED <= {c.id for c in results}
    assert all(c.passed for c in results)
    for c in results:
        assert c.source and c.quote


def test_claims_json(cli):
    r = cli("claims", "--json")
    data = {d["id"]: d for d in r.json()}
    assert data["v32-sequence-1m-bf16"]["computed"] == 83.875
    assert data["v4-c4a-layer-1m-bf16"]["computed"] == 320.125
    assert data["v4-c128a-layer-1m-bf16"]["computed"] == 8.125


CLAIM = """
sources: {{s: "hand"}}
claims:
  - id: t
    claim: test
    source: s
    quote: q
    published: {published}
    unit: GiB
    compute: {{sequence: {{model: deepseek-v3.2, context: 1M, precision: bf16, basis: article}}}}
    tolerance: {{abs: {tol}}}
"""


def test_a_wrong_number_fails(tmp_path, cli):
    path = tmp_path / "c.yaml"
    path.write_text(CLAIM.format(published=80.0, tol=0.05))  # 83.875 is not within 0.05 of 80
    r = cli("claims", "--file", str(path))
    assert r.code == 1 and "MISS" in r.out and "1 failed" in r.out
    path.write_text(CLAIM.format(published=83.875, tol=0))
    assert cli("claims", "--file", str(path)).code == 0


@pytest.mark.parametrize(
    "change, message",
    [
        (("unit: GiB", "unit: parsecs"), "unknown unit"),
        (("source: s", "source: nowhere"), "not listed under sources"),
        (("tolerance: {abs: 0.05}", "tolerance: {near: 1}"), "tolerance"),
        (("{sequence: {model", "{seqence: {model"), "unknown operation"),
        (("context: 1M,", "context: lots,"), "context"),
    ],
)
def test_bad_claims_file(tmp_path, cli, change, message):
    path = tmp_path / "c.yaml"
    path.write_text(CLAIM.format(published=83.875, tol=0.05).replace(*change))
    r = cli("claims", "--file", str(path))
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1
