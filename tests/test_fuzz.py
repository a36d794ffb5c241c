"""A bounded slice of the fuzz suite (scripts/fuzz.py runs 10,000+ cases and records them in reports/):
generated CLI arguments, mutated configs and API calls. Every case ends in success, a one-line exit-2
rejection or a legitimate verdict; never a traceback or an internal error."""

import math
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import kvcalc  # noqa: E402
from fuzzcases import COMMANDS, FLAGS, VALUES, classify, mutate_yaml, run_cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "kvcalc" / "data" / "configs").glob("*.yaml"))
SLICE = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

tokens = st.one_of(st.sampled_from(FLAGS), st.sampled_from(VALUES), st.text(max_size=12))


@SLICE
@given(st.sampled_from(COMMANDS), st.lists(tokens, max_size=6))
def test_cli_arguments(command, rest):
    argv = [command, *rest]
    classify(argv, *run_cli(argv))


@SLICE
@given(st.sampled_from(CONFIGS), st.integers(0, 10_000), st.sampled_from(VALUES))
def test_mutated_configs(tmp_path_factory, config, choice, value):
    path = tmp_path_factory.mktemp("cfg") / "m.yaml"
    path.write_text(mutate_yaml(config.read_text(), choice, value))
    for argv in (["estimate", str(path), "-c", "1k,1M", "--json"], ["show", str(path)]):
        outcome = classify(argv, *run_cli(argv))
        if outcome == "ok" and argv[0] == "estimate":
            import json

            for d in json.loads(run_cli(argv)[1]):
                assert isinstance(d["total_bytes"], int) and d["total_bytes"] >= 0


@SLICE
@given(st.one_of(st.sampled_from(["llama-3.1-8b", "deepseek-v4-pro", "nope"]), st.none(), st.floats(),
                 st.integers(), st.binary(max_size=4), st.lists(st.integers(), max_size=2)),
       st.one_of(st.integers(-5, 1 << 40), st.floats(allow_nan=True), st.none(), st.text(max_size=5),
                 st.lists(st.one_of(st.integers(-2, 1 << 33), st.booleans(), st.floats()), max_size=4),
                 st.binary(max_size=4)), st.booleans())
def test_api_calls(model, context, use_numpy):
    try:
        e = kvcalc.estimate(model, context, numpy=use_numpy)
    except kvcalc.KvcalcError as exc:
        assert "\n" not in str(exc)
        return
    seq = np.asarray(e.per_sequence)
    assert seq.dtype.kind == "i" and (seq >= 0).all()
    assert all(math.isfinite(float(x)) for x in seq)
    total = sum(np.asarray(layer.bytes) for layer in e.layers)
    assert np.array_equal(total, seq)


# ---- every surface (tests/fuzzsurfaces.py), a bounded slice of what scripts/fuzz.py runs ----------------------
import random  # noqa: E402

import fuzzsurfaces as FS  # noqa: E402

PER_SURFACE = {"flags": 30, "yaml": 20, "config.json": 25, "logs": 25, "outputs": 15, "api": 40, "inputs": 20,
               "gguf": 40, "engines": 30}


@pytest.mark.parametrize("surface", sorted(PER_SURFACE))
def test_every_surface_slice(surface, tmp_path):
    rng = random.Random(f"slice-{surface}")
    options = FS.command_options() if surface == "flags" else None
    seen = set()
    old = FS.chdir_scratch(tmp_path)
    try:
        for _ in range(PER_SURFACE[surface]):
            c = FS.case(surface, rng, tmp_path, options)
            if c[0] == "cli":
                if surface == "flags" and c[1][0] == "verify" and "sample" in c[1]:
                    c[1][c[1].index("sample")] = "none"  # the slice allocates only; scripts/fuzz.py also fills
                seen.add(classify(c[1], *run_cli(c[1]), limit_s=60))
            else:
                seen.add(FS.run_api(c[1], c[2]))
    finally:
        import os

        os.chdir(old)
    assert seen & {"ok", "rejected", "verdict"}, seen  # the slice reached the commands, not only their refusals
    if surface == "outputs":
        assert FS.victim_intact(tmp_path) and FS.specials_intact(tmp_path) and not FS.leftovers(tmp_path)


def test_the_flags_surface_reaches_every_command():
    # the generator draws from the CLI's own commands and options: a command added later is fuzzed too
    import typer

    from kvcalc.cli.app import app

    options = FS.command_options()
    assert set(options) == set(typer.main.get_command(app).commands)
    assert {"verify", "report", "plot", "import-hf", "check-log"} <= set(options)


def test_classify_holds_a_reserve_to_what_it_holds():
    """The fuzz contract's JSON check: in capacity, transfer and verify output, a reserve beside the exact bytes is
    never the smaller (planted: a transfer whose reserve is a byte short, a capacity group, a verify group)."""
    from fuzzcases import check_reserve_holds

    ok = '{"reserved_bytes": 10, "stored_bytes": 10, "groups": [{"planned_bytes": 5, "predicted_bytes": 4}]}'
    assert classify(["transfer", "m", "--json"], 0, ok, "", 0.0) == "ok"
    for bad in ('{"reserved_bytes": 9, "stored_bytes": 10}',
                '{"per_request_bytes": 10, "analytic_bytes": 1, "pages": [{"reserved_bytes_per_request": 1, '
                '"analytic_bytes_per_request": 2}]}',
                '{"engines": [{"groups": [{"planned_bytes": 3, "predicted_bytes": 4}]}]}'):
        with pytest.raises(AssertionError, match="a reserve below what it holds"):
            classify(["capacity", "m", "--json"], 0, bad, "", 0.0)
    assert check_reserve_holds({"stored_bytes": 1}) == 0  # decode's stored bytes stand beside no reserve


@pytest.mark.parametrize("engine", ["vllm", "sglang", "exact"])
def test_every_model_reserves_what_it_holds_through_the_cli(engine):
    """The grid's JSON cases where windows and state are not yet full (scripts/fuzz.py runs them with the rest):
    every shipped model's transfer and capacity at 1 and 100 tokens; classify checks the reserve."""
    import json

    from fuzzcases import check_reserve_holds

    checked = 0
    for config in CONFIGS:
        for ctx in ("1", "100"):
            for argv in (["transfer", config.stem, "--engine", engine, "-c", ctx, "--json"],
                         ["capacity", config.stem, "--engine", engine, "-c", ctx, "--kv-memory", "40GiB", "--json"]):
                code, out, err, seconds = run_cli(argv)
                if classify(argv, code, out, err, seconds, limit_s=60) == "ok":
                    checked += check_reserve_holds(json.loads(out))
    assert checked
