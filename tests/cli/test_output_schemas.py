"""`kvcalc schema --output COMMAND`: every command's --json output, on real inputs (several models and engines),
validates against its JSON Schema (draft 2020-12); and every schema can fail: a real output with a required key
removed or a value of the wrong type is refused."""

import copy
import functools
import json
from pathlib import Path

import pytest

from configcases import BASE, write
from fuzzcases import run_cli

jsonschema = pytest.importorskip("jsonschema")
Validator = jsonschema.Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "fixtures" / "hf"
LOGS = ROOT / "tests" / "fixtures" / "logs"
MODELS = ["llama-3.1-8b", "deepseek-v4-pro", "deepseek-v3.2", "qwen3-next-80b-a3b", "gpt-oss-120b"]


@functools.lru_cache(maxsize=None)
def schema(command: str) -> dict:
    code, out, err, _ = run_cli(["schema", "--output", command])
    assert code == 0, err
    return json.loads(out)


@functools.lru_cache(maxsize=None)
def validator(command: str):
    s = schema(command)
    Validator.check_schema(s)
    return Validator(s)


@functools.lru_cache(maxsize=None)
def _output(argv: tuple, codes: tuple = (0,)) -> str:
    code, out, err, _ = run_cli(list(argv))
    assert code in codes, f"kvcalc {' '.join(argv)}: exit {code}: {err[-500:]}"
    return out


def output(*argv, codes=(0,)):
    """The command's JSON output (a fresh copy: the negative checks mutate it)."""
    return json.loads(_output(tuple(str(a) for a in argv), tuple(codes)))


def errors(command: str, data) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message[:300]}" for e in validator(command).iter_errors(data)]


def assert_valid(command: str, data) -> None:
    found = errors(command, data)
    assert not found, "\n".join(found[:5])


def assert_invalid(command: str, data) -> None:
    assert errors(command, data), f"the {command} schema accepted a broken output"


# ---- the cases: real command lines, several models and engines -------------------------------------------------
CASES = {
    "estimate": [
        ["estimate", "llama-3.1-8b", "-c", "1k,128k", "--json"],
        ["estimate", "deepseek-v4-pro", "-c", "1M", "-p", "all", "--mtp", "--json"],
        ["estimate", "deepseek-v3.2", "qwen3-next-80b-a3b", "gpt-oss-120b", "--vs", "deepseek-v4-pro", "-c", "64k",
         "--json"],
        ["estimate", "-c", "1M", "--basis", "article", "--json"],  # the headline, with references
        ["estimate", "qwen3-next-80b-a3b", "gpt-oss-120b", "deepseek-v4-pro", "-c", "4k,64k,1M", "-p", "all",
         "--json", "--compact"],
        ["estimate", "--hf", HF / "qwen3-next-80b-a3b.json", "-c", "32k", "--batch", "4", "--json"],
        ["estimate", "gemma-3-27b", "-c", "8k,32k", "--engine", "llama.cpp", "-p", "q8_0", "--json"],
        ["estimate", "qwen3-next-80b-a3b", "-c", "8k", "--engine", "sglang", "--json"],
    ],
    "compare": [
        ["compare", "deepseek-v3.2", "deepseek-v4-pro", "-c", "4k,1M", "--json"],
        ["compare", "llama-3.1-8b", "llama-3.1-8b", "-p", "bf16", "--precision-b", "fp8", "-c", "8k", "--json"],
        ["compare", "qwen3-next-80b-a3b", "gpt-oss-120b", "--basis", "article", "-c", "128k", "--json"],
    ],
    "capacity": [
        ["capacity", "llama-3.1-8b", "--gpu", "h200", "-c", "8k", "--json"],
        ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-p", "fp8", "-c", "256k", "--json"],
        ["capacity", "qwen3-next-80b-a3b", "--kv-memory", "40GiB", "--tp", "2", "-c", "128k", "--json"],
        ["capacity", "llama-3.1-8b", "--gpu", "h100", "--pp", "2", "--dp", "2", "-c", "32k", "--json"],
        ["capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "-c", "8k", "--concurrency", "4", "--json"],
        ["capacity", "deepseek-v4-pro", "--engine", "sglang", "--gpu", "h200", "--tp", "8", "-p", "fp8", "--json"],
        ["capacity", "deepseek-v3.2", "--engine", "sglang", "--gpu", "h200", "--tp", "8", "-c", "128k", "--json"],
        ["capacity", "qwen3-next-80b-a3b", "--engine", "sglang", "--kv-memory", "40GiB", "--tp", "2", "--json"],
        ["capacity", "gpt-oss-120b", "--engine", "sglang", "--gpu", "h200", "-c", "128k", "--json"],
        ["capacity", "deepseek-v4-pro", "--engine", "sglang", "--gpu", "h200", "--tp", "8", "-p", "fp8",
         "--concurrency", "2", "--json"],
        ["capacity", "gpt-oss-120b", "--engine", "exact", "--gpu", "h200", "-c", "128k", "--json"],
        ["capacity", "deepseek-v3.2", "--engine", "exact", "--kv-memory", "80GiB", "-c", "160k", "--json"],
        ["capacity", "llama-3.1-8b", "--engine", "vllm,sglang", "--gpu", "h200", "-c", "128k", "--json"],
        ["capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "--request-tokens", "8k", "--shared-prefix-tokens", "2k",
         "--json"],  # a workload
        ["capacity", "deepseek-v4-pro", "--engine", "sglang", "--kv-memory", "40GiB", "--tp", "8", "--request-tokens",
         "8k", "--json"],
        # vLLM refuses Gemma 3 past its derived 131,072; SGLang derives 1M, the exact engine computes it anyway
        ["capacity", "gemma-3-27b", "--engine", "vllm,sglang,exact", "--gpu", "h200", "--tp", "2", "-c", "1M",
         "--json"],
    ],
    "sweep": [
        ["sweep", "llama-3.1-8b", "deepseek-v4-pro", "-c", "1k..1M", "--points", "8", "--json"],
        ["sweep", "qwen3-next-80b-a3b", "gpt-oss-120b", "deepseek-v3.2", "-p", "all", "-c", "4k,64k",
         "--format", "json"],
    ],
    "show": [["show", m, "--json"] for m in MODELS] + [["show", "--hf", HF / "deepseek-v4-flash.json", "--json"]],
    "models": [["models", "--json"]],
    "gpus": [["gpus", "--json"]],
    "claims": [["claims", "--json"]],
    "check-log": [
        ["check-log", LOGS / "synthetic-0.33-llama-3.1-8b.log", "--json"],
        ["check-log", LOGS / "synthetic-0.33-llama-3.1-8b-wrong.log", "--json"],
        ["check-log", LOGS / "synthetic-0.33-qwen3-next.log", "--json"],
        ["check-log", LOGS / "pr13596-llama-3.1-8b.log", "--model", "llama-3.1-8b", "-p", "bf16", "--json"],
        ["check-log", LOGS / "synthetic-sglang-0.5.23-llama-3.1-8b.log", "--json"],
        ["check-log", LOGS / "synthetic-sglang-0.5.23-llama-3.1-8b-wrong.log", "--json"],
        ["check-log", LOGS / "synthetic-sglang-0.5.23-gpt-oss-120b.log", "--json"],
        ["check-log", LOGS / "synthetic-sglang-0.5.23-deepseek-v4-pro.log", "--json"],
        ["check-log", LOGS / "llamacpp/jamba-np2.log", "--model", ROOT / "tests/fixtures/gguf/llamacpp-jamba.gguf",
         "--json"],
    ],
    "fit": [["fit", "gpt-oss-120b", "-c", "128k", "-n", "16", "--gpu", "h100-sxm,h200", "--json"],
            ["fit", "llama-3.1-8b", "-c", "8k", "--gpu", "l4", "--json"],
            ["fit", "gpt-oss-120b", "-n", "16", "--gpu", "h100-sxm", "--gpus", "2", "--json"]],
    "import-hf": [["import-hf", HF / f"{m}.json", "--json"]
                  for m in ("llama-3.1-8b", "deepseek-v3.2", "deepseek-v4-flash", "qwen3-next-80b-a3b", "gpt-oss-20b")],
    "import-gguf": [["import-gguf", ROOT / f"tests/fixtures/gguf/llamacpp-{m}.gguf", "--json"]
                    for m in ("gpt-oss", "deepseek2-mla-nextn", "qwen3next", "nemotron_h-mtp-ff0", "gemma3n")],
    "report": [["report", "--check", "--json"]],
    "decode": [
        ["decode", "deepseek-v4-pro", "-p", "fp8", "--json"],
        ["decode", "qwen3.5-9b", "-c", "128k", "--batch", "4", "--json"],
        ["decode", "gpt-oss-120b", "-c", "4k", "--json"],
        ["decode", "deepseek-v4-flash", "-p", "fp8", "--gpu", "b200", "-b", "32", "--tp", "4", "--json"],
        ["decode", "llama-3.1-8b", "-c", "8k", "--gpu", "l4", "--json"],
        ["decode", "llama-3.1-70b", "-c", "8k", "--gpu", "h100", "--tp", "4", "--json"],
    ],
    "transfer": [
        ["transfer", "deepseek-v4-pro", "-p", "fp8", "-c", "1M", "--allow-long-max-model-len", "--json"],
        ["transfer", "qwen3.5-9b", "--link", "ib-ndr", "--json"],
        ["transfer", "gpt-oss-120b", "--engine", "sglang", "--bandwidth", "40", "--json"],
        ["transfer", "deepseek-v4-flash", "--engine", "exact", "--json"],
        ["transfer", "deepseek-v4-flash", "--engine", "sglang", "-p", "fp8", "-c", "8192", "--json"],
    ],
}
#: exit codes that still print the JSON: a verdict (a claim missed, a log that differs, a stale report)
VERDICT = {"claims": (0, 1), "check-log": (0, 1), "report": (0, 1)}
#: verify on CPU, tiny: allocation only (vLLM's block pool, SGLang's token pools), and one sampled fill (a 4-layer
#: V4-style toy, so that fill_info and the read-back are real); vLLM's in-flight headroom kept small
SMALL_POOL = ["--max-num-batched-tokens", "256", "--no-async-scheduling"]
VERIFY = [
    ["verify", "llama-3.1-8b", "-c", "1k", "--fill", "none", "--json"],
    ["verify", "gpt-oss-120b", "-c", "256", "--engine", "sglang", "--fill", "none", "--json"],
    ["verify", "TOY", "-c", "64", "-p", "fp8", "--fill", "sample", *SMALL_POOL, "--json"],
    ["verify", "deepseek-v4-flash", "-c", "256", "--engine", "exact", "--basis", "article", "--fill", "none", "--json"],
    ["verify", "--headline", "-c", "1k", "--device", "cpu", "--fill", "none", "--json"],
]


def _cases():
    for command, lines in CASES.items():
        for argv in lines:
            yield pytest.param(command, argv, id=" ".join(str(a).replace(str(ROOT) + "/", "") for a in argv))


@pytest.mark.parametrize("command,argv", list(_cases()))
def test_real_output_validates(command, argv):
    assert_valid(command, output(*argv, codes=VERDICT.get(command, (0,))))


def test_every_command_with_json_output_has_a_schema():
    from typer.main import get_command

    from kvcalc.cli import app
    from kvcalc.present.schemas import OUTPUTS

    group = get_command(app)
    with_json = {name for name, cmd in group.commands.items() if any("--json" in p.opts for p in cmd.params)}
    assert with_json == set(OUTPUTS)
    assert set(CASES) | {"verify", "plot", "schema"} == set(OUTPUTS)  # and every one is tested here


def test_every_schema_is_draft_2020_12_and_precise():
    from kvcalc.present.schemas import OUTPUTS

    for command in OUTPUTS:
        s = schema(command)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        validator(command)  # checks it against the draft's meta-schema
        assert s.get("type") or s.get("oneOf") or s.get("anyOf"), command  # not {}
    assert schema("capacity")["$defs"]["capacity"]["additionalProperties"] is True  # engines add keys
    assert schema("show")["additionalProperties"] is False


def test_schema_without_output_is_the_config_schema(cli):
    r = cli("schema")
    assert r.code == 0 and r.json()["title"].startswith("kvcalc model config")
    assert cli("schema", "--json").out == r.out


def test_an_unknown_output_is_one_error_line_naming_the_commands(cli):
    from kvcalc.present.schemas import OUTPUTS

    r = cli("schema", "--output", "nope")
    assert r.code == 2 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvcalc: error: --output: ") and "'nope'" in lines[0]
    assert all(c in lines[0] for c in OUTPUTS)


# ---- per command: the output's own rules, and a broken output refused ------------------------------------------
def test_estimate_schema_can_fail():
    full = output(*CASES["estimate"][0])
    assert_invalid("estimate", [])  # no model at all
    broken = copy.deepcopy(full)
    del broken[0]["per_sequence_bytes"]
    assert_invalid("estimate", broken)
    broken = copy.deepcopy(full)
    broken[1]["layers"][3]["components"][0]["bytes"] = 1.5  # bytes are integers
    assert_invalid("estimate", broken)
    compact = output(*CASES["estimate"][4])
    del compact[0]["kinds"]
    assert_invalid("estimate", compact)
    headline = output(*CASES["estimate"][3])
    assert any("reference" in d for d in headline)
    next(d for d in headline if "reference" in d)["reference"]["ratio"] = "2x"
    assert_invalid("estimate", headline)


def test_compare_schema_can_fail():
    data = output(*CASES["compare"][0])
    assert len(data["a"]) == len(data["b"]) == len(data["ratio_b_over_a"]) == len(data["context_tokens"])
    del data["a"][0]["layers"][0]["kind"]
    assert_invalid("compare", data)
    data = output(*CASES["compare"][0])
    data["ratio_b_over_a"][0] = "x"
    assert_invalid("compare", data)


def _declared(command_schema: dict, engine: str) -> set:
    cap = command_schema["$defs"]["capacity"]
    names = set(cap["properties"])
    for branch in cap["allOf"]:
        if branch["if"]["properties"]["engine"]["const"] == engine:
            names |= set(branch["then"]["properties"])
    return names


def test_capacity_schema_names_every_key_the_engines_write():
    """Open to engines, but every key today's engines write is described (a new one must be added)."""
    s = schema("capacity")
    for argv in CASES["capacity"]:
        data = output(*argv)
        for one in data.get("engines", [data]):
            if "refused" in one:
                continue
            assert set(one) <= _declared(s, one["engine"]), (argv, set(one) - _declared(s, one["engine"]))


def test_capacity_schema_can_fail():
    from kvcalc.engines import get_engine

    vllm = output(*CASES["capacity"][0])
    for key in ("kv_pool_bytes_per_gpu", *get_engine("vllm").budget_keys):  # kvcalc's keys and the engine's
        broken = copy.deepcopy(vllm)
        del broken[key]
        assert_invalid("capacity", broken)
    broken = copy.deepcopy(vllm)
    broken["pages"][0]["layer_pages"][0]["entry_bytes"] = "4096"
    assert_invalid("capacity", broken)
    broken = copy.deepcopy(vllm)
    broken["pages"][0]["kind"] = "window"  # a window group names its window
    assert_invalid("capacity", broken)
    conc = output(*CASES["capacity"][4])
    del conc["max_context_tokens"]
    assert_invalid("capacity", conc)
    sglang = output(*CASES["capacity"][5])
    broken = copy.deepcopy(sglang)
    del broken["pools"]
    assert_invalid("capacity", broken)
    sglang["pools"][0]["shape"] = []
    assert_invalid("capacity", sglang)
    side = output(*CASES["capacity"][-1])  # the side-by-side form, last
    assert [e.get("refused") is not None for e in side["engines"]] == [True, False, False]
    broken = copy.deepcopy(side)
    del broken["side_by_side"]["requests in all"]
    assert_invalid("capacity", broken)
    del side["engines"][1]["max_total_num_tokens"]  # SGLang's own figure, required of it
    assert_invalid("capacity", side)


def test_sweep_columns_have_rows_entries_and_the_schema_can_fail():
    data = output(*CASES["sweep"][1])
    assert data["rows"] > 0
    for col in data["columns"]:
        assert len(data[col]) == data["rows"]
    broken = copy.deepcopy(data)
    broken["rows"] = -1
    assert_invalid("sweep", broken)
    data["extra"] = 1
    assert_invalid("sweep", data)


def test_show_models_gpus_schemas_can_fail():
    show = output("show", "deepseek-v4-pro", "--json")
    show["components"]["c4_state"]["storage"] = "kv"  # fixed state has no storage role
    assert_invalid("show", show)
    models = output("models", "--json")
    models[0]["extra"] = True
    assert_invalid("models", models)
    gpus = output("gpus", "--json")
    gpus[0]["memory_bytes"] = 80.5
    assert_invalid("gpus", gpus)


def test_claims_schema_can_fail():
    data = output("claims", "--json", codes=(0, 1))
    data[0]["tolerance"] = {"abs": 0, "rel": 0.01}  # one tolerance, absolute or relative
    assert_invalid("claims", data)


def test_check_log_schema_can_fail():
    vllm = output(*CASES["check-log"][0])
    assert "log_vllm_version" in vllm and "kvcalc_vllm_version" in vllm
    broken = copy.deepcopy(vllm)
    del broken["kvcalc_vllm_version"]
    assert_invalid("check-log", broken)
    vllm["verdict"] = "maybe"
    assert_invalid("check-log", vllm)
    sglang = output(*CASES["check-log"][4])
    sglang["rows"][0]["agrees"] = "yes"
    assert_invalid("check-log", sglang)


def test_import_hf_output_holds_a_config_and_can_fail(tmp_path):
    target = tmp_path / "v32.yaml"
    data = output("import-hf", HF / "deepseek-v3.2.json", "-o", target, "--json")
    assert_valid("import-hf", data)
    assert data["output"] == str(target) and target.is_file()
    del data["config"]["layers"]
    assert_invalid("import-hf", data)


def test_report_generate_form(tmp_path):
    data = output("report", "--out", tmp_path / "reports", "--no-plots", "--json")
    assert_valid("report", data)
    assert data["written"] and all(Path(p).is_file() for p in data["written"])
    data["match"] = True  # the two forms do not mix
    assert_invalid("report", data)
    checked = output("report", "--check", "--json", codes=(0, 1))
    checked["match"] = "yes"
    assert_invalid("report", checked)


def test_plot_outputs(tmp_path):
    pytest.importorskip("matplotlib")
    lines = output("plot", "deepseek-v4-pro", "llama-3.1-8b", "-o", tmp_path / "m.svg", "--gpu", "h200", "-c",
                   "4k..1M", "--points", "4", "--json")
    layers = output("plot", "gpt-oss-120b", "--layers", "--at", "64k", "-o", tmp_path / "l.svg", "--json")
    assert_valid("plot", lines)
    assert_valid("plot", layers)
    lines["chart"] = "layers"
    assert_invalid("plot", lines)
    del layers["panels"][0]["bytes_by_role"]
    assert_invalid("plot", layers)


def test_schema_output_is_a_json_schema():
    meta = validator("schema")
    assert not list(meta.iter_errors(output("schema")))
    assert not list(meta.iter_errors(schema("capacity")))
    assert list(meta.iter_errors({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": 12}))
    assert list(meta.iter_errors({"type": "object"}))  # no $schema: not what kvcalc prints


# ---- verify: needs torch (CPU), tiny runs ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def verify_outputs(tmp_path_factory):
    pytest.importorskip("torch")
    toy = copy.deepcopy(BASE)  # V4-style layers without the generic state (vLLM does not page it)
    del toy["components"]["st"]
    toy["layer_kinds"]["c4a"].remove("st")
    path = write(tmp_path_factory.mktemp("verify"), toy)
    return [output(*(path if a == "TOY" else a for a in argv)) for argv in VERIFY]


def test_verify_output_validates(verify_outputs):
    for argv, data in zip(VERIFY, verify_outputs):
        found = errors("verify", data)
        assert not found, (argv, found[:5])
    sglang = verify_outputs[1]
    assert sglang["token_pools"] and all("pool" in g for g in sglang["groups"])
    sampled = verify_outputs[2]
    assert sampled["fill_info"] and sampled["readback"] and sampled["tolerances"]
    assert verify_outputs[3]["token_pools"]["layout"] == "exact" and verify_outputs[4]["headline"] is True
    broken = copy.deepcopy(verify_outputs[4])
    del broken["rows"][0]["measured"]
    assert errors("verify", broken)  # a headline row without its measurement fails

def test_verify_tp_form_validates(verify_outputs):
    """--tp N's combined report (built here from one real rank twice, as kvcalc.verify combines its ranks)."""
    from dataclasses import replace

    from kvcalc.verify.result import VerifyResult, combine

    one = VerifyResult.from_json(verify_outputs[0])
    ranks = [replace(one, tp=2, rank=r) for r in (0, 1)]
    data = json.loads(json.dumps(combine(ranks, 2).to_json()))
    assert_valid("verify", data)
    del data["ranks"][1]["measured"]
    assert_invalid("verify", data)


def test_verify_schema_can_fail(verify_outputs):
    data = copy.deepcopy(verify_outputs[0])
    del data["measured"]
    assert_invalid("verify", data)
    data = copy.deepcopy(verify_outputs[0])
    data["groups"][0]["views"][0]["offset"] = -1
    assert_invalid("verify", data)
    data = copy.deepcopy(verify_outputs[1])
    data["groups"][0]["pool"]["shape"] = "257x8x64"
    assert_invalid("verify", data)
    data = copy.deepcopy(verify_outputs[2])
    data["verdict"] = "ok"
    assert_invalid("verify", data)
    data = copy.deepcopy(verify_outputs[2])
    del data["readback"][0]["indices"]
    assert_invalid("verify", data)
