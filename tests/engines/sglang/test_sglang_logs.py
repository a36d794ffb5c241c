"""`kvcalc check-log` on SGLang start-up logs: a line published in a vLLM issue, one from an SGLang issue, and
hand-written logs in 0.5.23's wording (one wrong on purpose). Sources: tests/fixtures/logs/README.md."""

import json
from pathlib import Path

from kvcalc.engines import get_engine

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
QWEN235 = str(Path(__file__).resolve().parents[2] / "fixtures" / "qwen3-235b-a22b.yaml")


def _rows(out: dict) -> dict:
    return {r["figure"].split(" (line")[0]: r for r in out["rows"]}


def test_published_qwen3_235b_line_agrees(cli):
    # vLLM issue #21348: SGLang on 4 x H100, tp 4: "#tokens: 367404, K size: 8.23 GB". One KV head per rank
    # (4 // 4): K = (367,404 + 1) x 1 x 128 x 2 B x 94 layers = 8,841,233,920 B / 2^30 = 8.23
    assert round(367405 * 128 * 2 * 94 / 2**30, 2) == 8.23
    r = cli("check-log", str(LOGS / "sglang-vllm21348-qwen3-235b.log"), "--model", QWEN235, "--tp", "4", "--json")
    assert r.code == 0
    out = json.loads(r.out)
    assert out["verdict"] == "agrees" and out["settings"]["tp"] == 4
    assert _rows(out)["K size (GB = GiB, 2 decimals)"]["kvcalc"] == "8.23 GiB"
    # without --tp the log says nothing of the ranks: one rank holds all 4 heads, 4x the bytes
    r1 = cli("check-log", str(LOGS / "sglang-vllm21348-qwen3-235b.log"), "--model", QWEN235, "--json")
    assert r1.code == 1 and json.loads(r1.out)["verdict"] == "differs"


def test_the_scheduler_line_of_sglang_issue_29575_parses():
    facts = get_engine("sglang").logs.parse((LOGS / "sglang-29575.log").read_text())
    assert facts.values["max_total_num_tokens"] == 2086558 and facts.values["max_running_requests"] == 33
    assert facts.values["context_len"] == 256000
    # without a cap, resolve_max_num_reqs would give min(clamp(int(2,086,558 / 256,000 x 512), 2048, 4096), T // 2)
    assert min(max(min(int(2086558 / 256000 * 512), 4096), 2048), 2086558 // 2) == 4096  # so 33 is a cap


def test_synthetic_logs_agree_and_the_wrong_one_differs(cli):
    good = cli("check-log", str(LOGS / "synthetic-sglang-0.5.23-llama-3.1-8b.log"), "--json")
    assert good.code == 0
    out = json.loads(good.out)
    assert out["model"] == "llama-3.1-8b" and out["log_sglang_version"] is None
    rows = _rows(out)
    assert rows["K size (GB = GiB, 2 decimals)"]["agrees"] and rows["max_running_requests"]["kvcalc"] == "2,048"
    bad = cli("check-log", str(LOGS / "synthetic-sglang-0.5.23-llama-3.1-8b-wrong.log"), "--json")
    assert bad.code == 1
    rows = _rows(json.loads(bad.out))
    assert not rows["K size (GB = GiB, 2 decimals)"]["agrees"] and not rows["max_running_requests"]["agrees"]
    swa = cli("check-log", str(LOGS / "synthetic-sglang-0.5.23-gpt-oss-120b.log"), "--json")
    rows = _rows(json.loads(swa.out))
    assert swa.code == 0 and rows["SWA pool tokens"]["kvcalc"] == f"{int(647269 * 0.8):,}"


def test_a_vllm_log_is_still_read_as_vllm(cli):
    r = cli("check-log", str(LOGS / "synthetic-0.33-llama-3.1-8b.log"), "--json")
    assert r.code == 0 and json.loads(r.out)["kvcalc_vllm_version"] == "0.33.0"
    r = cli("check-log", str(LOGS / "synthetic-0.33-llama-3.1-8b.log"), "--engine", "sglang")
    log = LOGS / "synthetic-0.33-llama-3.1-8b.log"
    assert r.code == 2 and r.err == (f"kvcalc: error: FILE: '{log}' has no SGLang start-up lines (it holds vLLM's: "
                                     "--engine vllm)\n")


def test_deepseek_v4_pool_sizes_follow_from_the_full_count(cli):
    r = cli("check-log", str(LOGS / "synthetic-sglang-0.5.23-deepseek-v4-pro.log"), "--json")
    assert r.code == 0
    rows = _rows(json.loads(r.out))
    full = 3829760  # the log's full=; each pool below follows from it (pool_configurator.py _compute_dsv4_sizes)
    swa = int(full * 0.1) // 256 * 256
    assert rows["SWA pool tokens"]["kvcalc"] == f"{swa:,}" and rows["c4 pool tokens"]["kvcalc"] == f"{full // 4:,}"
    assert rows["c128 pool tokens"]["kvcalc"] == f"{full // 128:,}"
    assert rows["c4 state rows"]["kvcalc"] == f"{swa // 256 * 8:,}" and rows["max_running_requests"]["agrees"]


def test_a_zero_tp_is_one_line(cli):
    r = cli("check-log", str(LOGS / "sglang-vllm21348-qwen3-235b.log"), "--model", QWEN235, "--tp", "0")
    assert r.code == 2 and r.err == "kvcalc: error: --tp: must be an integer from 1 to 4,096, got 0\n"


def test_a_logs_mamba_state_options_plan_the_same_settings(cli, tmp_path):
    # server_args (the resolved dict) says no_buffer with the overlap scheduler off: 3 state slots per running
    # request, so max_running_requests = min(4096, 1,841,509 // 2, 525 // 3) = 175 (the log's comments work it out)
    log = LOGS / "synthetic-sglang-0.5.23-qwen3-next-no-buffer.log"
    r = cli("check-log", str(log), "--model", "qwen3-next-80b-a3b", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["verdict"] == "agrees" and _rows(out)["max_running_requests"]["kvcalc"] == f"{525 // 3:,}"
    assert out["settings"]["mamba_radix_cache_strategy"] == "no_buffer"
    assert out["settings"]["disable_overlap_schedule"] is True
    # the same log without those two settings is planned with SGLang's defaults (extra_buffer, overlap on: 5
    # slots, 525 // 5 = 105 requests), and the logged 175 differs
    text = log.read_text().replace("'disable_overlap_schedule': True, ", "").replace(
        "'mamba_radix_cache_strategy': 'no_buffer', ", "")
    (tmp_path / "defaults.log").write_text(text)
    r = cli("check-log", str(tmp_path / "defaults.log"), "--model", "qwen3-next-80b-a3b", "--json")
    assert r.code == 1 and _rows(json.loads(r.out))["max_running_requests"]["kvcalc"] == f"{525 // 5:,}"
