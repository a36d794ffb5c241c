"""The toy config the loader tests mutate, the helpers that write and mutate it, and the one-line error
check (shared by tests/config/, tests/cli/test_cli.py, tests/test_estimate.py and tests/test_claims_arguments.py)."""

import copy

import yaml

BASE = {
    "kvcalc": 1,
    "name": "toy",
    "precisions": {"bf16": {"kv": "bf16", "indexer": "bf16"}, "fp8": {"kv": "fp8_ds_mla_v4", "indexer": "fp4_indexer"}},
    "default_precision": "bf16",
    "components": {
        "win": {"cache": "sliding_mla", "window": 128, "dim": 512, "rope_dim": 64, "storage": "kv"},
        "c4": {"cache": "compressed_mla", "ratio": 4, "span": 8, "dim": 512, "rope_dim": 64},
        "idx": {"cache": "indexer", "ratio": 4, "dim": 128, "storage": "indexer"},
        "st": {"cache": "state", "shape": [8, 2, 2, 512], "dtype": "fp32"},
    },
    "layer_kinds": {"c4a": ["win", "c4", "idx", "st"], "swa": ["win"]},
    "layers": ["swa", {"pattern": ["c4a"], "layers": 3}],
}


def write(tmp_path, data, name="toy.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def mutate(change):
    data = copy.deepcopy(BASE)
    change(data)
    return data


def _del(path):
    def change(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]

    return change


def _set(path, value):
    def change(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return change


def one_line_error(r, *fragments):
    assert r.code == 2, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("kvcalc: error: ") and "internal error" not in lines[0], lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    assert r.out == ""
