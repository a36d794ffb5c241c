"""`kvcalc fit`: every deployment it reports is what `capacity` says one call at a time, the smallest of each GPU,
engine and precision really is the smallest, and each smaller one fails for the reason given."""

from __future__ import annotations

import doctest
import json

import pytest

import kvcalc.fit as F
from kvcalc.capacity import Parallel, capacity, max_context
from kvcalc.errors import KvcalcError
from kvcalc.present.fit import command


def test_layouts_by_hand():
    # 4 GPUs: tp x pp x dp in powers of two: 1x1x4, 1x2x2, 1x4x1, 2x1x2, 2x2x1, 4x1x1
    assert [(x.tp, x.pp, x.dp) for x in F.layouts(4, False)] == [(1, 1, 4), (1, 2, 2), (1, 4, 1), (2, 1, 2),
                                                                   (2, 2, 1), (4, 1, 1)]
    # a mixture of experts adds expert parallelism wherever experts span more than one rank (tp x dp > 1)
    moe = F.layouts(4, True)
    assert len(moe) == 6 + 5 and not any(x.ep for x in moe if x.tp * x.dp == 1)
    assert [(x.tp, x.pp, x.dp) for x in F.layouts(1, True)] == [(1, 1, 1)]


@pytest.mark.parametrize("model, context, n", [("gpt-oss-120b", 131072, 16), ("llama-3.1-70b", 32768, 24)])
def test_every_row_is_capacity_one_call_at_a_time(model, context, n):
    r = F.fit(model, context, n, gpus=["h100-sxm", "h200"], engines=["vllm", "sglang"])
    assert r.deployments and r.searched >= len(r.deployments) + len(r.misses)
    for d in r.deployments:
        lay = d.layout
        cap = capacity(model, context, precision=d.precision, engine=d.engine, gpu=d.gpu,
                       parallel=Parallel(lay.tp, lay.pp, lay.dp, lay.ep))
        assert cap.total_requests == d.total_requests >= n
        assert (cap.kv_pool_bytes_per_gpu, cap.weights_bytes_per_gpu) == (d.kv_pool_bytes_per_gpu,
                                                                           d.weights_bytes_per_gpu)
        assert d.spare == d.total_requests - n
        assert command(model, d) == (f"kvcalc capacity {model} --gpu {d.gpu} --gpus {lay.gpus} --tp {lay.tp} "
                                     f"--pp {lay.pp} --dp {lay.dp}{' --ep' if lay.ep else ''} --engine {d.engine} "
                                     f"-p {d.precision} -c {context}")
    for m in r.misses:
        lay = m.layout
        par = Parallel(lay.tp, lay.pp, lay.dp, lay.ep)
        if m.why == "kv" and m.detail.startswith("holds "):
            cap = capacity(model, context, precision=m.precision, engine=m.engine, gpu=m.gpu, parallel=par)
            assert cap.total_requests < n
        else:
            with pytest.raises(KvcalcError):
                capacity(model, context, precision=m.precision, engine=m.engine, gpu=m.gpu, parallel=par)
    # the smallest: no deployment of fewer GPUs holds n (the whole search without a concurrency lists every one)
    everything = F.fit(model, context, None, gpus=["h100-sxm", "h200"], engines=["vllm", "sglang"])
    for d in F.best_per(r):
        fewer = [e for e in everything.deployments if (e.gpu, e.engine, e.precision) == (d.gpu, d.engine, d.precision)
                 and e.layout.gpus < d.layout.gpus and e.total_requests >= n]
        assert not fewer, (d, fewer[:1])


def test_ranking_and_reasons():
    r = F.fit("llama-3.1-70b", 32768, 24, gpus=["h100-sxm"], engines=["vllm"], precisions=["bf16"])
    # by hand: vLLM asks 0.92 x 79.65 GiB = 73.28 GiB of an H100; the weights are 131.42 GiB and the reserve 4 GiB.
    # 1 GPU (and any dp-only layout): no room. tp 2: 65.71 + 4 leaves 3.56 GiB, less than one request: 32,768 tokens
    # x 80 layers x 2 x (8 / 2 heads) x 128 x 2 B = 5 GiB. tp 4: 32.86 + 4 leaves 36.42 GiB for 2.5 GiB requests:
    # 14 < 24. tp 8: 16.43 + 4 leaves 52.85 GiB for 1.25 GiB requests: 42 >= 24.
    best = F.best_per(r)[0]
    assert (best.layout.gpus, best.layout.tp, best.total_requests) == (8, 8, 42)
    assert {m.why for m in r.misses if m.layout.gpus == 1} == {"weights"}
    assert {m.why for m in r.misses if (m.layout.tp, m.layout.gpus) == (2, 2)} == {"kv"}
    assert [m.detail for m in r.misses if (m.layout.tp, m.layout.gpus) == (4, 4)] == [
        "holds 14 request(s) of 32,768 tokens, not 24"]
    gpus = [d.layout.gpus for d in r.deployments]
    assert gpus == sorted(gpus)
    same = [d.spare for d in r.deployments if d.layout.gpus == 4]
    assert same == sorted(same, reverse=True)


def test_the_reverse_is_capacity_max_context():
    rows, refused = F.longest("gpt-oss-120b", 16, gpus=["h100-sxm"], count=2, engines=["vllm"], precisions=["bf16"])
    assert rows
    for x in rows:
        lay = x.layout
        # 16 requests over the fleet: ceil(16 / dp) on each data-parallel replica (found in review: dp 2 asked 16
        # of each replica, a context too short)
        assert x.per_replica == -(-16 // lay.dp)
        best, _ = max_context({"model": "gpt-oss-120b", "precision": "bf16", "engine": "vllm", "gpu": "h100-sxm",
                               "parallel": Parallel(lay.tp, lay.pp, lay.dp, lay.ep)}, x.per_replica, 131072)
        assert x.context == best
        cmd = command("gpt-oss-120b", x, x.per_replica)
        assert cmd.endswith(f"--concurrency {x.per_replica}") and " -c " not in cmd


def test_llama_cpp_and_models_without_weights_are_refused():
    with pytest.raises(KvcalcError, match="its parallel slots"):
        F.fit("llama-3.1-8b", 8192, 8, engines=["llama.cpp"])
    with pytest.raises(KvcalcError, match="fit needs qwen3.5-9b's weights"):
        F.fit("qwen3.5-9b", 8192, 8, gpus=["h100-sxm"])
    with pytest.raises(KvcalcError, match="fit needs qwen3.5-9b's weights"):
        F.longest("qwen3.5-9b", 8, gpus=["h100-sxm"], count=2)


def test_the_workload_is_in_the_rerun_command(cli, tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("1000\n2000\n8000\n")
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "--gpu", "h100-sxm", "--engine", "vllm", "-p", "bf16",
            "--request-tokens-file", str(f), "--shared-prefix-tokens", "512", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)["deployments"][0]
    assert d["command"].endswith(f"--request-tokens-file {f} --shared-prefix-tokens 512")
    r = cli("fit", "llama-3.1-8b", "-c", "1000", "--shared-prefix-tokens", "2000")
    assert r.code == 2 and "longer than the context" in r.err


def test_refusals_in_one_line(cli):
    r = cli("fit", "llama-3.1-8b", "-n", "4")
    assert r.code == 2 and "--context" in r.err and r.err.count("\n") == 1
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "--gpus", "3")
    assert r.code == 2 and "--gpus: a power of two" in r.err
    r = cli("fit", "llama-3.1-8b", "-n", "4", "--gpu", "h100-sxm", "--gpus", "3")
    assert r.code == 2 and "--gpus: a power of two" in r.err
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "--max-gpus", "1000")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --max-gpus")
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "--gpu", "h100-sxm,nope")
    assert r.code == 2 and "nope" in r.err
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "--engine", "vllm,nope")
    assert r.code == 2 and "nope" in r.err


def test_cli_json_and_text(cli):
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "-n", "32", "--gpu", "h100-sxm", "--engine", "vllm", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["deployments"][0]["gpus"] == 1 and d["deployments"][0]["total_requests"] >= 32
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "-n", "32", "--gpu", "h100-sxm", "--engine", "vllm")
    assert r.code == 0 and "Re-run a row: kvcalc capacity llama-3.1-8b --gpu h100-sxm --gpus 1" in r.out


def test_the_docstring_example_runs():
    assert doctest.testmod(F, verbose=False).failed == 0


def test_a_workload_is_searched_as_capacity_counts_it():
    lengths = [1000, 2000, 4000, 8000]
    r = F.fit("llama-3.1-8b", 8192, 64, gpus=["h100-sxm"], engines=["vllm"], precisions=["bf16"],
              request_tokens=lengths)
    d = r.deployments[0]
    cap = capacity("llama-3.1-8b", 8192, precision="bf16", engine="vllm", gpu="h100-sxm",
                   parallel=Parallel(d.layout.tp, d.layout.pp, d.layout.dp, d.layout.ep), request_tokens=lengths)
    assert (d.layout.gpus, d.total_requests) == (1, cap.total_requests)
    # every request at the full 8k: one H100 holds 54 (docs/api.md's arithmetic), so 64 need two
    full = F.fit("llama-3.1-8b", 8192, 64, gpus=["h100-sxm"], engines=["vllm"], precisions=["bf16"])
    assert full.deployments[0].layout.gpus == 2


def test_every_engines_memory_refusals_say_weights_or_kv():
    """The reason a smaller fleet fails is the engine's own (errors.NoRoom), whatever words it refuses in: SGLang's
    "Loaded weights leave no GPU memory" is the weights, the exact engine's "one request ... needs" the KV pool."""
    r = F.fit("llama-3.1-70b", 32768, 24, gpus=["h100-sxm", "l4"], engines=["sglang", "exact"], precisions=["bf16"])
    by = {}
    for m in r.misses:
        by.setdefault((m.engine, m.why), []).append(m.detail)
    assert not any(why == "engine" for _, why in by), {k: v[0][:80] for k, v in by.items() if k[1] == "engine"}
    assert any("leave no GPU memory for the KV cache" in d for d in by[("sglang", "weights")])
    assert any("of KV cache, more than the" in d for d in by[("exact", "kv")])


def test_engine_options_shape_every_row_and_its_command(cli):
    """An engine option given to fit plans every row of that engine with it, and each row's re-run command carries
    it: the command's capacity answer is the row's. vLLM's --max-num-seqs 32 caps what runs at once: one H100 holds
    54 requests of Llama-3.1-8B at 8k (docs/api.md's arithmetic) but runs 32, so 40 need more than one replica."""
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "-n", "40", "--gpu", "h100-sxm", "--engine", "vllm", "-p", "bf16",
            "--max-num-seqs", "32", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    rows = d["deployments"]
    assert rows and all(x["running_limit_per_replica"] == 32 for x in rows)
    for x in rows:
        assert x["served_requests"] == x["dp"] * min(x["requests_per_replica"], 32) >= 40
        assert x["command"].endswith(" --max-num-seqs 32")
    best = rows[0]
    assert best["gpus"] == 2 and best["dp"] == 2  # two replicas of 32 at once; tp 2 would run 32 only
    one = [m for m in d["misses"] if m["gpus"] == 1]
    assert [m["why"] for m in one] == ["running"] and "holds 54 " in one[0]["detail"]  # holds 54, runs 32
    again = cli(*best["command"].split()[1:], "--json")
    assert again.code == 0, again.err
    cap = json.loads(again.out)
    assert (cap["total_requests"], cap["max_num_seqs"]) == (best["total_requests"], 32)


def test_weights_given_to_fit_size_a_model_without_them(cli):
    """A config without derived weights is searched with --weights-gib (all ranks together), and the rows re-run with
    it; a reserve is carried the same way."""
    r = cli("fit", "qwen3-next-80b-a3b", "-c", "8k", "-n", "4", "--gpu", "h100-sxm", "--engine", "vllm", "-p", "bf16")
    assert r.code == 2 and "--weights-gib" in r.err
    r = cli("fit", "qwen3-next-80b-a3b", "-c", "8k", "-n", "4", "--gpu", "h100-sxm", "--engine", "vllm", "-p", "bf16",
            "--weights-gib", "150", "--reserve-gib", "2", "--json")
    assert r.code == 0, r.err
    best = json.loads(r.out)["deployments"][0]
    # 150 GiB over tp x pp ranks: 2 GPUs hold 75 GiB each, more than 0.92 x 79.19 GiB - 2 GiB; 4 GPUs do
    assert best["gpus"] == 4 and best["weights_bytes_per_gpu"] == 150 * 2**30 // 4
    assert " --weights-gib 150 --reserve-gib 2" in best["command"]
    again = json.loads(cli(*best["command"].split()[1:], "--json").out)
    assert again["total_requests"] == best["total_requests"]


def test_an_option_of_an_engine_not_searched_is_refused(cli):
    r = cli("fit", "llama-3.1-8b", "-c", "8k", "--gpu", "h100-sxm", "--engine", "vllm", "--mem-fraction-static", "0.8")
    assert r.code == 2 and r.err.count("\n") == 1 and "--mem-fraction-static" in r.err and "sglang" in r.err
    with pytest.raises(KvcalcError, match="not a setting of any engine"):
        F.fit("llama-3.1-8b", 8192, 1, gpus=["h100-sxm"], engines=["vllm"], settings={"nope": 1})


def test_a_rows_host_tiers_are_capacitys(cli):
    """--kv-offloading-size reaches each vLLM row and its re-run: the row's tier is the capacity answer's."""
    r = cli("fit", "llama-3.1-8b", "-c", "32k", "-n", "20", "--gpu", "h100-sxm", "--engine", "vllm", "-p", "bf16",
            "--kv-offloading-size", "100", "--json")
    assert r.code == 0, r.err
    best = r.json()["deployments"][0]
    assert best["command"].endswith(" --kv-offloading-size 100.0") and len(best["host_tiers"]) == 1
    cap = json.loads(cli(*best["command"].split()[1:], "--json").out)
    (tier,) = cap["host_tiers"]
    assert {k: tier[k] for k in ("name", "tokens_per_rank", "requests")} == \
        {k: best["host_tiers"][0][k] for k in ("name", "tokens_per_rank", "requests")}
    # 100 GiB over the replica's tp workers' 16-token blocks of 32 layers x 8 / tp heads x 128 x 2 x 2 B: every
    # worker's slice of a chunk is one row, 2 MiB whatever the tp, so 100 x 2^30 // 2^21 = 51,200 chunks of 16 tokens
    assert cap["cpu_chunks"] == 100 * 2**30 // (32 * 16 * 8 * 128 * 2 * 2) == 51_200
