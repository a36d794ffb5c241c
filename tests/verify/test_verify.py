"""kvcalc verify, allocation part: the pool vLLM's plan lays out, allocated for real and measured."""

import pytest

from kvcalc.verify.faults import planted

from kvcalc.engines import vllm as V
from kvcalc.errors import KvcalcError
from kvcalc.plan import plan

torch = pytest.importorskip("torch")

SMALL = V.Settings(max_num_batched_tokens=256, async_scheduling=False)  # 256 tokens in flight


def _small_plan():
    return plan("deepseek-v4-flash", 1024, precision="fp8", settings=SMALL)


def test_allocation_matches_the_plan_by_hand():
    from kvcalc.verify import verify

    out = verify(_small_plan(), device="cpu").to_json()
    # blocks per request at 1,024 tokens, 256 in flight: 1024/256 = 4 (compressed), two windows of
    # cdiv(min(127 + 256, 1024), 64) + 1 = 7, c4 states cdiv(7 + 256, 4) + 1 = 67, c128 states
    # cdiv(127 + 256, 8) + 1 = 49; plus vLLM's null block
    blocks = 4 + 2 * 7 + 67 + 49 + 1
    assert out["planned_blocks"] == blocks == 135
    assert out["planned_bytes"] == out["allocated_bytes"] == 135 * (21 * 37440 + 20 * 1728 + 21 * 8640)
    # every byte still holds the sentinel the allocation wrote, so every page was touched (the resident growth is
    # only informative in a process that earlier tests have used: tests/test_readme.py checks it in a fresh one)
    assert out["written_bytes"] == 0 and out["verdict"] == "pass"
    assert out["measured"]["storage_bytes"] == out["planned_bytes"]
    assert out["predicted_bytes"] < out["planned_bytes"]


def test_a_planted_extra_page_fails_the_verdict():
    from kvcalc.verify import verify

    with planted(extra_pages=1):
        out = verify(_small_plan(), device="cpu").to_json()
    assert out["verdict"] == "fail"
    assert out["allocated_bytes"] - out["planned_bytes"] == out["bytes_per_block"]


def test_refusals(cli):
    from kvcalc.verify import verify

    with pytest.raises(KvcalcError, match="^fill: choose one of none, sample, full"):
        verify(_small_plan(), fill="most")
    with pytest.raises(KvcalcError, match="^writer: choose triton or torch"):
        verify(_small_plan(), fill="sample", writer="cuda")
    r = cli("verify", "llama-3.1-8b", "-c", "1k", "--device", "tpu")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --device: choose auto, cuda, cpu")
    # 128k x 100,000 requests of Llama's 16 GiB: far past any machine's free memory
    r = cli("verify", "llama-3.1-8b", "-c", "128k", "--batch", "100000", "--fill", "none", "--device", "cpu")
    assert r.code == 2 and "free" in r.err
    # past Llama's 131,072: vLLM refuses the max_model_len before anything is allocated
    r = cli("verify", "llama-3.1-8b", "-c", "1M", "--fill", "none", "--device", "cpu")
    assert r.code == 2 and "greater than the derived max_model_len" in r.err
    r = cli("verify", "llama-3.1-8b", "-c", "1k", "--tp", "3", "--fill", "none", "--device", "cpu")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --tp: 3 ranks cannot split the 8 KV heads")


def test_cli_json_contract(cli, tmp_path):
    report = tmp_path / "v.json"
    r = cli("verify", "deepseek-v4-flash", "-c", "1k", "-p", "fp8", "--max-num-batched-tokens", "256",
            "--no-async-scheduling", "--fill", "none", "--json", "--report", str(report))
    assert r.code == 0, r.err
    out = r.json()
    for key in ("model", "context_tokens", "precision", "engine", "device", "fill", "predicted_bytes",
                "planned_bytes", "allocated_bytes", "written_bytes", "groups", "verdict"):
        assert key in out
    assert report.read_text().startswith("{")


def test_v4_flash_at_1m_plans_what_vllm_reserves():
    """1M tokens, vLLM defaults (8,192 batched tokens, async scheduling: 16,384 in flight), planned only: the
    10.8 GB allocation itself is scripts/big_alloc.py's (reports/big_alloc.json). Blocks per request: two windows
    of cdiv(127 + 16,384, 64) + 1 = 259; compressed 2**20 / 256 = 4,096; c4 states cdiv(7 + 16,384, 4) + 1 =
    4,099; c128 states cdiv(127 + 16,384, 8) + 1 = 2,065; + the null block."""
    p = plan("deepseek-v4-flash", 1 << 20, precision="fp8")
    assert p.settings_json["max_in_flight_tokens"] == 2 * 8192
    assert [g.blocks_per_request for g in p.groups] == [259, 259, 4096, 4099, 2065]
    assert p.blocks_per_request == 4096 + 2 * 259 + 4099 + 2065 and p.null_blocks == 1
    blocks = p.blocks_per_request + p.null_blocks  # what verify allocates for a batch of 1
    assert blocks == 10779
    # a block holds the largest group's pages, the compressed one: 21 c4 layers x (37,440 B entries + 8,640 B
    # indexer keys) + 20 c128 layers x 1,728 B (the window group's 22 x 37,440 B and the states' fit inside)
    per_block = 21 * 37440 + 20 * 1728 + 21 * 8640
    assert p.bytes_per_block == per_block == 1_002_240
    assert blocks * p.bytes_per_block == 10_803_144_960


def test_v4_flash_async_scheduling_pool_allocated_by_hand():
    """The same rules, allocated for real at a size any machine has: 128 batched tokens with async scheduling
    (on by default) put 2 x 128 = 256 tokens in flight. At 8k: compressed 8,192 / 256 = 32 blocks; two windows
    of cdiv(min(127 + 256, 8,192), 64) + 1 = 7; c4 states cdiv(7 + 256, 4) + 1 = 67; c128 states
    cdiv(127 + 256, 8) + 1 = 49; + the null block. In a process of its own: the resident-memory growth is only
    the pool's where no earlier test's freed pages are handed back to it (it failed once under xdist so)."""
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "kvcalc", "verify", "deepseek-v4-flash", "-c", "8k", "-p", "fp8",
                        "--max-num-batched-tokens", "128", "--fill", "none", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    blocks = 32 + 2 * 7 + 67 + 49 + 1
    assert out["planned_blocks"] == blocks == 163
    assert out["allocated_bytes"] == out["planned_bytes"] == blocks * 1_002_240
    assert out["measured"]["resident_growth_bytes"] >= 0.95 * out["planned_bytes"]
    assert out["written_bytes"] == 0 and out["verdict"] == "pass"


def test_the_result_is_typed_and_its_json_round_trips():
    from kvcalc.verify import verify
    from kvcalc.verify.result import Check, Measured, VerifyGroup, VerifyResult

    out = verify(_small_plan(), device="cpu")
    assert isinstance(out, VerifyResult) and isinstance(out.measured, Measured)
    assert all(isinstance(g, VerifyGroup) for g in out.groups) and all(isinstance(c, Check) for c in out.checks)
    assert [g.kind for g in out.groups] == [g["kind"] for g in out.to_json()["groups"]]
    assert out.verdict == "pass" and out.tp is None and "tp" not in out.to_json()
    assert VerifyResult.from_json(out.to_json()).to_json() == out.to_json()


def test_the_result_module_is_torch_free():
    import subprocess
    import sys

    code = "import sys, kvcalc.verify.result, kvcalc.present.verify; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_tensor_parallel_result_renders_each_rank(capsys):
    # the combined tp result has no single measurement: the text names each rank's (it crashed before)
    from kvcalc.present.verify import render_verify
    from kvcalc.textout import Console
    from kvcalc.verify import run_one
    from kvcalc.verify.result import combine

    ranks = [run_one("llama-3.1-8b", 1024, tp=2, rank=r, settings=SMALL) for r in (0, 1)]
    both = combine(ranks, 2)
    render_verify(Console(width=120, color=False), both)
    text = capsys.readouterr().out
    # each rank: 4 KV heads of 8 -> (1024 / 16 + 1 null) blocks x 32 layers x 16 x 4 x 128 x 2 x 2 B
    per_rank = (1024 // 16 + 1) * 32 * 16 * 4 * 128 * 2 * 2
    assert f"Allocated: {2 * per_rank:,} B storage over 2 ranks" in text
    assert f"  rank 0: {per_rank:,} B; resident memory +" in text and "  rank 1: " in text
    assert both.verdict == "pass"
