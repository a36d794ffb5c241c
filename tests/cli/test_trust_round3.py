"""Trust, round 3 (issue 26): errors are short and name the flag or the file and line; answers do not mislead.
Each test here failed on the code before it (planted once)."""

import json

import pytest

from kvcalc.errors import quote
from kvcalc.units import parse_bytes_rounded

LONG = "x" * 100_000


def _one_line(r, flag: str, limit: int = 400):
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and r.err.startswith(f"kvcalc: error: {flag}"), r.err[:300]
    assert len(r.err) < limit, len(r.err)


# ---- values are quoted short, from one helper ------------------------------------------------------------------
def test_quote_is_bounded_whatever_the_value():
    assert quote("128kk") == "'128kk'"
    assert quote(LONG) == "'" + "x" * 60 + "…' (100,000 characters)"
    nul = quote("\x00" * 1000)  # escapes count against the limit: '\x00' is four characters
    assert len(nul) < 100 and nul.endswith("…' (1,000 characters)")
    assert quote(12345) == "12345"


@pytest.mark.parametrize("argv,flag", [
    (["estimate", "llama-3.1-8b", "-c", LONG], "--context"),
    (["estimate", LONG], "MODEL"),
    (["estimate", "llama-3.1-8b", "-p", LONG], "--precision"),
    (["capacity", "llama-3.1-8b", "--gpu", LONG, "-c", "8k"], "--gpu"),
    (["capacity", "llama-3.1-8b", "--engine", LONG, "-c", "8k"], "--engine"),
    (["capacity", "llama-3.1-8b", "--kv-memory", LONG, "-c", "8k"], "--kv-memory"),
    (["capacity", "llama-3.1-8b", "--kv-memory", "10GiB", "--request-tokens", LONG, "-c", "8k"], "--request-tokens"),
    (["transfer", "llama-3.1-8b", "-c", "8k", "--link", LONG], "--link"),
    (["estimate", "--hf", LONG], "--hf"),
    (["sweep", "llama-3.1-8b", "-c", "1k", "--format", LONG], "--format"),
    (["schema", "--output", LONG], "--output"),
    (["estimate", "llama-3.1-8b", "--batch", "9" * 5000], "estimate: Invalid value for '--batch'"),
    (["gpus", "sglang", "1" * 5000], "gpus: Got unexpected extra argument(s) (sglang '111"),
    (["show", "3", "0.83", LONG], "show: Got unexpected extra argument(s) (0.83 'xxx"),
])
def test_a_100k_value_gives_a_short_error_naming_its_flag(cli, argv, flag):
    _one_line(cli(*argv), flag)


def test_a_lengths_file_is_named_by_file_and_line(cli, tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("4k\n# a comment\n\n16k\n")
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "10GiB", "-c", "8k", "--request-tokens-file", str(f))
    _one_line(r, f"{f}:4: a request of 16,384 tokens is longer than the context, 8,192 (--context")
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "10GiB", "-c", "8k", "--request-tokens-file", "/dev/zero")
    _one_line(r, "--request-tokens-file: '/dev/zero' (a character device) holds more than 64 MiB")
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "10GiB", "-c", "8k", "--shared-prefix-tokens", "200k")
    _one_line(r, "--shared-prefix-tokens: a prefix of 204,800 tokens is longer than the shortest request")
    _one_line(cli("capacity", "llama-3.1-8b", "-c", "8k"), "--gpu: name a GPU, or give the KV pool of each GPU "
                                                          "directly (--kv-memory)")
    _one_line(cli("estimate", "--hf", "nosuch.json"), "--hf: no such config file 'nosuch.json'")


def test_verify_on_cuda_without_cuda_is_one_line(cli):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    _one_line(cli("verify", "llama-3.1-8b", "-c", "1k", "--device", "cuda"), "--device: cuda asked, but this torch")


# ---- inputs users write ------------------------------------------------------------------------------------------
def test_byte_counts_take_decimal_and_binary_units_and_round_saying_so():
    assert parse_bytes_rounded("10GB", "--kv-memory") == (10 * 10**9, None)
    assert parse_bytes_rounded("10 gib", "--kv-memory") == (10 * 2**30, None)
    assert parse_bytes_rounded("1.25 kB", "--kv-memory") == (1250, None)
    # 57.3 x 2^30 = 61,525,406,515.2 B: rounded to the nearest byte, and said
    assert parse_bytes_rounded("57.3GiB", "--kv-memory") == (
        61_525_406_515, "--kv-memory: 57.3GiB is 61,525,406,515.2 B; rounded to 61,525,406,515 B")
    with pytest.raises(Exception, match="'10G' is ambiguous: write 10GiB .* or 10GB"):
        parse_bytes_rounded("10G", "--kv-memory")


def test_kv_memory_in_gb_plans_that_many_bytes(cli):
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "10GB", "-c", "8k", "--json")
    assert r.code == 0 and r.json()["kv_pool_bytes_per_gpu"] == 10_000_000_000
    r = cli("capacity", "llama-3.1-8b", "--kv-memory", "57.3GiB", "-c", "8k")
    assert r.code == 0 and "rounded to 61,525,406,515 B" in r.err


def test_precisions_are_names_in_any_case(cli):
    assert cli("estimate", "llama-3.1-8b", "-c", "8k", "-p", "FP8", "--json").out == \
        cli("estimate", "llama-3.1-8b", "-c", "8k", "-p", "fp8", "--json").out
    r = cli("capacity", "deepseek-v4-pro", "--engine", "sglang", "--kv-memory", "40GiB", "-c", "8k", "-p", "FP8")
    assert r.code == 0, r.err


def test_a_short_gpu_name_says_which_card_it_is(cli):
    r = cli("capacity", "llama-3.1-8b", "--gpu", "a100", "-c", "8k")
    assert r.code == 0 and "--gpu a100 is read as a100-80gb" in r.err and "a100-40gb names the other" in r.err
    assert "--gpu" not in cli("capacity", "llama-3.1-8b", "--gpu", "a100-40gb", "-c", "8k").err
    # a refusal stays one line: the note is said only when the command succeeds
    _one_line(cli("capacity", "deepseek-v4-pro", "--gpu", "a100", "-c", "8k"), "--engine vllm: vLLM 0.33.0's DeepSeek "
              "V4 kernels need compute capability 9, 10 or 12")
    _one_line(cli("capacity", "llama-3.1-8b", "--gpu", "gh200", "-c", "8k"), "--gpu: unknown accelerator 'gh200'")


# ---- answers that mislead ----------------------------------------------------------------------------------------
def test_compare_writes_a_factor_below_one_as_a_fraction(cli):
    r = cli("compare", "deepseek-v4-flash", "deepseek-v3.2", "-c", "1M")
    # V3.2 bf16 at 1M: 83.875 GiB; V4-Flash 6.74 GiB: A / B = 1/12.45, never "0.08x"
    assert r.code == 0 and "1/12.45" in r.out and "0.08x" not in r.out


def test_a_token_count_in_a_warning_has_its_commas(cli):
    r = cli("sweep", "llama-3.1-8b", "-c", "131077..2M", "--points", "4")
    assert r.code == 0 and "4 contexts, from 131,077 to 2,097,152 (2M), exceed" in r.err and "131077" not in r.err


def test_the_exact_engine_shows_bytes_not_blocks(cli):
    r = cli("capacity", "llama-3.1-8b", "--engine", "exact", "--kv-memory", "40GiB", "-c", "128k")
    # 131,072 tokens x 32 layers x 8 heads x 128 x 2 x 2 B = 16 GiB a request; 40 GiB // 16 GiB = 2
    assert r.code == 0 and "page B" not in r.out and "blocks x 1 B" not in r.out
    assert "holds 16.00 GiB (17,179,869,184 B) exactly: no blocks, pages or padding" in r.out
    assert "42,949,672,960 B of pool // 17,179,869,184 B = 2 request(s)" in " ".join(r.out.split())


def test_sglang_says_per_replica_without_dp_attention(cli):
    r = cli("capacity", "llama-3.1-8b", "--engine", "sglang", "--kv-memory", "40GiB", "-c", "8k")
    assert r.code == 0 and "Requests of 8,192 tokens per replica:" in r.out and "attention-DP" not in r.out


def test_the_models_table_speaks_one_vocabulary(cli):
    rows = {line.split()[0]: line for line in cli("models").out.splitlines()[3:] if line.strip()}
    # gpt-oss-120b's config names its kinds sliding_attention / full_attention, gpt-oss-20b's local / global,
    # gemma-2's global / local, llama-2's global: by what they cache they are swa and full
    assert "18 swa + 18 full" in rows["gpt-oss-120b"] and "12 full + 12 swa" in rows["gpt-oss-20b"]
    assert "21 full + 21 swa" in rows["gemma-2-9b"] and "32 full" in rows["llama-2-7b"]
    assert "61 dsa" in rows["deepseek-v3.2"] and "61 mla" in rows["kimi-k2"]
    assert "30 c4a + 31 c128a" in rows["deepseek-v4-pro"] and "36 gdn + 12 full" not in rows["qwen3-next-80b-a3b"]
    assert "12 full + 36 gdn" in rows["qwen3-next-80b-a3b"] and "10 full + 54 mamba2 + 54 no-cache" in rows["nemotron-h-56b"]
    for word in ("global", "local", "sliding_attention", "full_attention", "softmax", "attention"):
        assert all(f" {word} " not in f" {r} " for r in rows.values()), word


def test_schema_help_names_every_output(cli):
    from kvcalc.present.outputs import OUTPUTS

    out = " ".join(cli("schema", "--help").out.split())
    assert "decode" in OUTPUTS and "transfer" in OUTPUTS
    assert all(name in out for name in OUTPUTS)


def test_an_engines_own_precision_is_said(cli):
    r = cli("capacity", "deepseek-v4-flash", "--kv-memory", "40GiB", "-c", "8k")
    assert r.code == 0 and "precision fp8: vLLM 0.33.0's kv-cache dtype auto stores deepseek-v4-flash in fp8, not " \
                           "the config's default bf16" in " ".join(r.out.split())
    r = cli("transfer", "deepseek-v4-flash", "-c", "8k", "--json")
    assert any(n.startswith("precision fp8: vLLM 0.33.0's") for n in r.json()["notes"])
    r = cli("decode", "deepseek-v4-flash", "-c", "8k", "--json")
    assert r.json()["precision"] == "bf16" and "vLLM 0.33.0 stores fp8" in r.json()["precision_basis"]
    assert "as asked" in cli("decode", "deepseek-v4-flash", "-c", "8k", "-p", "fp8", "--json").json()["precision_basis"]


def test_plot_marks_a_models_max_context(cli, tmp_path):
    r = cli("plot", "llama-3.1-8b", "deepseek-v4-flash", "-c", "64k,256k", "-o", str(tmp_path / "m.svg"), "--json")
    assert r.code == 0
    d = json.loads(r.out)
    assert [s["max_context"] for s in d["series"]] == [131_072, 1_048_576]
    assert d["warnings"] and d["warnings"][0].startswith("llama-3.1-8b: context 262,144 (256k) exceeds")
    assert "(drawn faded past it)" in r.err
    assert "max_context 128k" in (tmp_path / "m.svg").read_text()


# ---- found by the full fuzz (reports/fuzz.json) ----------------------------------------------------------------
@pytest.mark.parametrize("value,what", [("vllm", "str"), (1024, "int"), ([1, 2], "list"), ({"fp8"}, "set")])
def test_settings_that_are_not_a_mapping_are_one_line_in_every_api(value, what):
    from kvcalc.capacity import capacity
    from kvcalc.errors import KvcalcError
    from kvcalc.plan import plan
    from kvcalc.transfer import transfer

    want = ("settings: the vllm engine takes its settings by name (a mapping) or as get_engine('vllm').settings(...), "
            f"got {what}")
    for call in (lambda: transfer("llama-3.1-8b", 100, settings=value),
                 lambda: capacity("llama-3.1-8b", 100, kv_memory=10 << 30, settings=value),
                 lambda: plan("llama-3.1-8b", 100, settings=value)):
        with pytest.raises(KvcalcError) as e:
            call()
        assert str(e.value) == want


def test_settings_by_name_are_taken_by_every_api():
    from kvcalc.capacity import capacity
    from kvcalc.plan import plan
    from kvcalc.transfer import transfer

    # vLLM's block of 16 tokens (the default on Hopper for llama): 8k tokens are 512 blocks either way
    assert plan("llama-3.1-8b", 8192, settings={"block_size": 32}).groups[0].blocks_per_request == 256
    assert capacity("llama-3.1-8b", 8192, kv_memory=10 << 30, settings={"block_size": 32}).plan.groups[0].block_size \
        == 32
    assert transfer("llama-3.1-8b", 8192, settings={"block_size": 32}).plan.groups[0].units == 256


def test_a_config_file_changed_on_disk_is_read_again(tmp_path):
    from kvcalc.config import load_model

    f = tmp_path / "m.json"
    f.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2,
                             "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))
    assert len(load_model(str(f)).layers) == 2
    f.write_text(f.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 3'))
    assert len(load_model(str(f)).layers) == 3
    y = tmp_path / "m.yaml"
    from kvcalc.config.loader import config_path

    y.write_text(config_path("llama-3.1-8b").read_text())
    first = load_model(str(y))
    y.write_text(y.read_text().replace("name: llama-3.1-8b", "name: renamed"))
    assert (first.name, load_model(str(y)).name) == ("llama-3.1-8b", "renamed")


def test_sglang_refuses_a_split_swa_model_with_no_full_layer_in_one_line(cli, tmp_path):
    # MiMo-V2-Flash's config read as a plain llama: every layer takes its 128-token window, none is full; SGLang
    # lists the architecture as hybrid SWA, and its all-SWA pool is not planned
    d = json.loads(open("tests/fixtures/hf/mimo-v2-flash.json").read())
    d["model_type"] = "llama"
    (tmp_path / "all-swa.json").write_text(json.dumps(d))
    r = cli("capacity", "--hf", str(tmp_path / "all-swa.json"), "--kv-memory", "40GiB", "-c", "8k", "--engine", "sglang")
    _one_line(r, "all-swa: every layer is sliding-window")
    assert "plan it on vllm or exact" in r.err
    assert cli("capacity", "--hf", str(tmp_path / "all-swa.json"), "--kv-memory", "40GiB", "-c", "8k").code == 0


def test_a_yaml_error_echoing_a_long_tag_stays_short(cli, tmp_path):
    f = tmp_path / "tag.yaml"
    f.write_text("name: x\nlayers:\n  a: !!" + "9" * 3000 + " 1\n")
    r = cli("estimate", str(f))
    _one_line(r, f"{f}:3:")
    assert "malformed YAML: could not determine a constructor for the tag" in r.err and "(3," in r.err
