"""Fixed state is kept in a plain dtype only: the one rule (StorageFormat.plain) in all three places that ask it
(a precision's state role, a stated state dtype / ssm_dtype, a compressor state's dtype). The per-token-head
int8 / int4 and fp8 modes keep a scale per head and were let through before."""

import pytest

from kvcalc.config import _CACHE, load_model
from kvcalc.errors import KvcalcError
from kvcalc.formats import FORMATS

TEXT = """
kvcalc: 1
name: hybrid
precisions:
  bf16: {kv: bf16, state: STATE_ROLE}
default_precision: bf16
components:
  kv: {cache: full_attention, kv_heads: 2, head_dim: 64}
  m: {cache: mamba2, heads: 8, head_dim: 16, state_size: 32, groups: 2, conv_kernel: 4, ssm_dtype: SSM}
layer_kinds: {attn: [kv], mamba: [m]}
layers: [mamba, attn]
"""


def _load(tmp_path, role="bf16", ssm="fp32"):
    p = tmp_path / "h.yaml"
    p.write_text(TEXT.replace("STATE_ROLE", role).replace("SSM", ssm))
    _CACHE.clear()
    return load_model(str(p))


def test_plain_means_one_element_per_value_and_nothing_else():
    assert sorted(n for n, f in FORMATS.items() if f.plain) == ["bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2"]


@pytest.mark.parametrize("fmt", ["int8_per_token_head", "int4_per_token_head", "fp8_per_token_head", "fp8_indexer",
                                 "lmdeploy_int8"])
def test_state_refuses_a_scaled_format_wherever_it_is_named(tmp_path, fmt):
    # a stated ssm_dtype is checked by the spec; the conv state follows the precision's state role, checked by
    # the loader: both by StorageFormat.plain
    with pytest.raises(KvcalcError, match=rf"components.m.ssm_dtype: state must use a plain dtype .*got {fmt}"):
        _load(tmp_path, ssm=fmt)
    with pytest.raises(KvcalcError, match=rf"precisions.bf16.state: state role of component m must be a plain "
                       rf"dtype .*got {fmt}"):
        _load(tmp_path, role=fmt, ssm="fp32")


def test_plain_state_loads(tmp_path):
    spec = _load(tmp_path, role="fp8_e4m3", ssm="fp32")
    assert spec.components["m"].ssm_dtype == "fp32"
