"""Each engine's longest context, derived as the engine derives it, and its refusal past it:

* vLLM 0.33 (config/model.py _get_and_verify_max_len): max_position_embeddings, times the rope factor only for
  rope types that scale it (not yarn, llama3, longrope; never for Gemma 3); past it: "User-specified
  max_model_len (...) is greater than the derived max_model_len ..." unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1;
* SGLang 0.5.23 (utils/hf_transformers/common.py get_context_length, configs/model_config.py): the factor
  applies unless the rope config states original_max_position_embeddings or is llama3; past it: refused unless
  SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1."""

import pytest

from kvcalc.capacity import capacity
from kvcalc.config import load_model
from kvcalc.engines import get_engine
from kvcalc.errors import KvcalcError
from kvcalc.plan import plan

GIB = 1 << 30


@pytest.mark.parametrize("model, vllm, sglang", [
    ("deepseek-v3.2", 163840, 163840),  # yarn factor 40 with original 4096: neither multiplies
    ("llama-3.1-8b", 131072, 131072),  # llama3: neither multiplies
    ("gemma-3-27b", 131072, 131072 * 8),  # linear factor 8: SGLang multiplies, vLLM skips Gemma 3
    ("qwen3-8b", 40960, 40960),  # no rope scaling
    ("deepseek-v4-pro", 1 << 20, 1 << 20),
])
def test_each_engine_derives_its_own_limit(model, vllm, sglang):
    spec = load_model(model)
    assert get_engine("vllm").context_limit(spec) == vllm
    assert get_engine("sglang").context_limit(spec) == sglang
    assert get_engine("exact").context_limit(spec) == spec.max_context


def test_vllm_refuses_past_the_derived_maximum_with_its_message(cli):
    r = cli("capacity", "deepseek-v3.2", "--gpu", "h200", "--tp", "8", "-c", "1M")
    assert r.code == 2 and r.err.count("\n") == 1
    assert ("User-specified max_model_len (1048576) is greater than the derived max_model_len "
            "(max_position_embeddings=163840.0 or model_max_length=None in model's config.json). To allow overriding "
            "this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (--allow-long-max-model-len here)") in r.err
    assert r.err.rstrip().endswith("(vLLM 0.33.0 refuses to start; deepseek-v3.2's --context may be at most 163,840.)")
    # vLLM 0.33 prints the derived length as a float (it is multiplied by the rope factor, 1.0 here): the text is
    # vLLM's own, as its ModelConfig raised it for this config.json on a CPU build of vLLM 0.33.0
    # the maximum itself is accepted (vLLM refuses only max_model_len > derived)
    assert plan("deepseek-v3.2", 163840).context == 163840
    with pytest.raises(KvcalcError, match="greater than the derived max_model_len"):
        plan("deepseek-v3.2", 163841)


def test_the_override_plans_it_and_says_so(cli):
    r = cli("capacity", "deepseek-v3.2", "--gpu", "h200", "--tp", "8", "-c", "512k", "--allow-long-max-model-len",
            "--json")
    assert r.code == 0, r.err
    assert r.json()["context_tokens"] == 512 * 1024
    assert "exceeds the 163,840 vllm derives for the model; planned as vLLM plans it with " \
           "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in r.err


def test_sglang_refuses_past_its_derived_context_len(cli):
    r = cli("capacity", "nemotron-h-56b", "--engine", "sglang", "--kv-memory", "40GiB", "-c", "128k")
    assert r.code == 2 and r.err.count("\n") == 1
    assert ("User-specified context_length (131072) is greater than the derived context_length (8192). This may "
            "lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var "
            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (--allow-overwrite-longer-context-len here)") in r.err
    assert r.err.rstrip().endswith("(SGLang 0.5.23 refuses to start; nemotron-h-56b's --context may be at most 8,192.)")
    ok = cli("capacity", "nemotron-h-56b", "--engine", "sglang", "--kv-memory", "40GiB", "-c", "128k",
             "--allow-overwrite-longer-context-len")
    assert ok.code == 0, ok.err


def test_gemma3_at_1m_sglang_accepts_what_vllm_refuses(cli):
    sg = capacity("gemma-3-27b", 1 << 20, engine="sglang", kv_memory=40 * GIB)
    assert sg.plan.context == 1 << 20
    with pytest.raises(KvcalcError, match=r"greater than the derived max_model_len \(max_position_embeddings=131072\.0 or"):
        capacity("gemma-3-27b", 1 << 20, engine="vllm", kv_memory=40 * GIB)
    # side by side: vLLM's refusal is its column, SGLang's answer the other
    r = cli("capacity", "gemma-3-27b", "--engine", "vllm,sglang", "--kv-memory", "40GiB", "-c", "1M", "--json")
    assert r.code == 0, r.err
    d = r.json()
    cols = {c["engine"]: c for c in d["engines"]}
    assert "refused" in cols["vllm"] and "greater than the derived max_model_len" in cols["vllm"]["refused"]
    assert cols["sglang"].get("requests_per_replica") is not None


def test_the_default_context_is_the_engines_own(cli):
    # vLLM's default max_model_len is the derived maximum (no --max-model-len given); SGLang's context_len too
    for engine, want in (("vllm", 131072), ("sglang", 1 << 20), ("exact", 131072)):
        r = cli("capacity", "gemma-3-27b", "--engine", engine, "--kv-memory", "40GiB", "--json")
        assert r.code == 0, r.err
        assert r.json()["context_tokens"] == want, engine
    # side by side: the shortest, so both engines answer at one context
    r = cli("capacity", "gemma-3-27b", "--engine", "vllm,sglang", "--kv-memory", "40GiB", "--json")
    assert r.code == 0 and {c["context_tokens"] for c in r.json()["engines"]} == {131072}


def test_check_log_of_a_long_context_takes_the_override(cli, tmp_path):
    # a vLLM log at max_seq_len 1M for V3.2 could only come from a run with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    log = tmp_path / "v32.log"
    log.write_text("INFO Initializing a V1 LLM engine (v0.33.0) with config: model='deepseek-ai/DeepSeek-V3.2', "
                   "max_seq_len=1048576, tensor_parallel_size=8, kv_cache_dtype=fp8\n"
                   "INFO GPU KV cache size: 1,050,624 tokens, Maximum concurrency for 1,048,576 tokens per request: "
                   "1.00x\n")
    r = cli("check-log", str(log), "--json")
    assert r.code in (0, 1), r.err
    assert any("past the 163,840 vllm derives" in n for n in r.json()["notes"])


def test_the_other_context_fields_each_engine_reads(tmp_path):
    # vLLM (model_arch_config_convertor.py derive_max_model_len_and_key): the smallest of the stated keys, then
    # model_max_length overriding; SGLang (hf_transformers CONTEXT_LENGTH_KEYS): the first of max_sequence_length,
    # seq_length, max_seq_len, model_max_length, max_position_embeddings. The vLLM column is what vLLM 0.33.0's
    # ModelConfig derived for these six config.json files (a CPU build, in a scratch environment)
    from kvcalc.config import load_hf
    base = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
            "num_key_value_heads": 2, "max_position_embeddings": 32768}

    def limits(**extra):
        path = tmp_path / "config.json"
        path.write_text(__import__("json").dumps({**base, **extra}))
        spec = load_hf(str(path))
        return get_engine("vllm").context_limit(spec), get_engine("sglang").context_limit(spec)

    assert limits() == (32768, 32768)
    assert limits(seq_length=8192) == (8192, 8192)  # the smaller; SGLang's first
    assert limits(seq_length=65536) == (32768, 65536)  # vLLM the smaller, SGLang seq_length first
    assert limits(model_max_length=1 << 20) == (1 << 20, 1 << 20)  # vLLM: model_max_length overrides
    assert limits(n_positions=4096, model_max_length=16384) == (16384, 16384)
    assert limits(n_positions=4096) == (4096, 32768)  # SGLang does not read n_positions
