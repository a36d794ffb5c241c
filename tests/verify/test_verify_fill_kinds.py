"""verify --fill writes every cache kind kvcalc prices into vLLM's block pool: GQA / MHA K and V (full, sliding,
chunked) as plain entries cast to the storage dtype, and fixed state (Mamba-2, gated DeltaNet, KDA) as the
request's running state in the first block of its state group; the sentinel checks (page padding, the null
block, bytes outside every page) cover them. Expected bytes are hand arithmetic."""

import pytest

from kvcalc.engines import vllm as V
from kvcalc.plan import plan

torch = pytest.importorskip("torch")
pytest.importorskip("triton")  # kvcalc_kernels (the shared fill module loads it)
SMALL = V.Settings(max_num_batched_tokens=256, async_scheduling=False)


def _verify(model, ctx, prec=None, **kw):
    from kvcalc.verify import verify

    return verify(plan(model, ctx, precision=prec, settings=SMALL), device="cpu", **kw)


def _failed(out):
    return [c.name for c in out.checks if not c.passed]


def test_gqa_k_and_v_by_hand():
    out = _verify("llama-3.1-8b", 1024, fill="sample")
    # sample: the first and last layer; 1,024 tokens x 8 KV heads x 128 x 2 (K and V) x 2 B (bf16)
    assert out.written_bytes == out.expected_written_bytes == 2 * 1024 * 8 * 128 * 2 * 2
    assert out.readback and all(c.passed for c in out.readback)
    assert out.verdict == "pass", _failed(out)


def test_fp8_k_and_v_are_one_byte_a_value():
    out = _verify("llama-3.1-8b", 1024, "fp8", fill="sample")
    assert out.written_bytes == 2 * 1024 * 8 * 128 * 2 * 1 and out.verdict == "pass", _failed(out)


def test_gated_deltanet_state_is_written():
    out = _verify("qwen3.5-9b", 1024, fill="sample")
    # one running state per request and layer: conv (16 x 128 x 2 + 32 x 128) x (4 - 1) x 2 B = 49,152 B +
    # recurrent 32 x 128 x 128 x 4 B (fp32) = 2,097,152 B; the first and last layer of each state page tensor
    state = 49_152 + 2_097_152
    groups = {g.group: g for g in out.groups}
    state_groups = [g for g in out.groups if g.kind == "state"]
    assert state_groups and all(g.written_bytes == g.expected_written_bytes == 2 * state for g in state_groups)
    full = [g for g in groups.values() if g.kind == "full"]
    assert [g.written_bytes for g in full] == [2 * 1024 * 4 * 256 * 2 * 2]  # 4 KV heads of 256, K and V, bf16
    assert out.verdict == "pass", _failed(out)


TOY_MAMBA2 = """kvcalc: 1
name: toy-mamba2
precisions: {bf16: {kv: bf16, state: bf16}}
default_precision: bf16
components:
  attn: {cache: full_attention, kv_heads: 2, head_dim: 64, storage: kv}
  ssm: {cache: mamba2, heads: 4, head_dim: 16, state_size: 16, groups: 1, conv_kernel: 4, intermediate: 64,
        ssm_dtype: fp32}
layer_kinds: {a: [attn], m: [ssm]}
layers: [m, m, a, m]
"""


def _verify_toy(tmp_path, text: str, ctx: int, fill: str):
    """verify a small model written here (YAML ``text``) at ``ctx`` tokens on the CPU."""
    from kvcalc.config import load_model
    from kvcalc.verify import verify

    f = tmp_path / "toy.yaml"
    f.write_text(text)
    spec = load_model(str(f))
    return verify(plan(spec, ctx, settings=SMALL), device="cpu", fill=fill, model=spec)


def test_mamba2_state_is_written(tmp_path):
    # a small Mamba-2 stack (Nemotron-H's kind; the shipped 56B takes a 3 GiB pool even at 512 tokens)
    out = _verify_toy(tmp_path, TOY_MAMBA2, 512, "sample")
    state = [g for g in out.groups if g.kind == "state"]
    # conv (64 + 2 x 1 x 16) x (4 - 1) x 2 B = 576 B + ssm 4 x 16 x 16 x 4 B = 4,096 B: 4,672 B a layer. vLLM's
    # grouping gives each Mamba layer its own group (the one attention layer sets the group size to 1), so the
    # sample (first and last layer of each page tensor) writes all three
    assert len(state) == 3 and [g.written_bytes for g in state] == [576 + 4096] * 3
    assert out.verdict == "pass", _failed(out)


def test_a_state_written_into_the_null_block_is_caught(monkeypatch):
    # a writer that puts the running state in block 0 (vLLM's null block) instead of the request's block
    from kvcalc.verify import fill as F

    real = F.Fill._slots

    def wrong(self, job, idx):
        return idx * 0 if job.kind == "fixed" else real(self, job, idx)

    monkeypatch.setattr(F.Fill, "_slots", wrong)
    out = _verify("qwen3.5-9b", 1024, fill="sample")
    assert out.verdict == "fail" and "null block still holds the sentinel" in _failed(out)


TOY_CHUNKED = """kvcalc: 1
name: toy-chunked
precisions: {bf16: {kv: bf16}}
default_precision: bf16
components:
  glob: {cache: full_attention, kv_heads: 2, head_dim: 64, storage: kv}
  local: {cache: chunked_attention, kv_heads: 2, head_dim: 64, storage: kv, chunk: 256}
layer_kinds: {g: [glob], c: [local]}
layers: [c, c, c, g]
"""


def test_chunked_local_attention_reuses_its_blocks_inside_the_cap(tmp_path):
    # Llama 4's layer pattern, small: 3 chunked layers of chunk 256 and 1 full layer; 4 groups of 1 layer.
    # At 1,024 tokens with 256 tokens in flight (no async scheduling) a chunked group reserves
    # cdiv(min(256 + 256, 1024), 16) = 32 blocks and reuses them: it holds 32 x 16 = 512 token slots
    out = _verify_toy(tmp_path, TOY_CHUNKED, 1024, "full")
    token = 2 * 64 * 2 * 2  # 2 KV heads x 64 x (K, V) x 2 B
    chunked = [g for g in out.groups if g.kind == "chunk 256"]
    assert len(chunked) == 3 and all(g.blocks == 32 for g in chunked)
    assert [g.written_bytes for g in chunked] == [512 * token] * 3
    assert [g.written_bytes for g in out.groups if g.kind == "full"] == [1024 * token]
    assert out.verdict == "pass", _failed(out)
