"""A new cache kind is one spec class; a new engine is one Engine subclass plus a registry line. Both are added
here, from this test module alone, and run through `estimate` and `capacity` (API and command line)."""

from __future__ import annotations  # spec fields are read by their declared type names

import json
from dataclasses import dataclass
from typing import ClassVar

import pytest

from kvcalc import engines
from kvcalc.config import parse_model
from kvcalc.engines.base import BlockPoolMixin, Engine, fraction_budget
from kvcalc.errors import KvcalcError
from kvcalc.pool import BlockPoolPlan, GroupKind, Layout, PlanGroup, PlanPage
from kvcalc.specs import CACHE_KINDS, CacheSpec
from kvcalc.vec import minimum


@dataclass(frozen=True)
class RingCache(CacheSpec):
    """A toy kind: the last ``slots`` tokens, ``dim`` values each."""

    kind: ClassVar[str] = "toy_ring"
    dim: int = 0
    slots: int = 0

    def entries(self, contexts):
        return minimum(super().entries(contexts), self.slots)

    def entry_bytes(self, fmt) -> int:
        return fmt.entry_bytes(self.dim, 0, f"component {self.name}")

    def rule(self) -> str:
        return f"min(L,{self.slots})"


@dataclass(frozen=True)
class ToySettings:
    block_tokens: int = 32
    gpu_memory_utilization: float = 0.5


class ToyEngine(BlockPoolMixin, Engine):
    """Pages every cache in blocks of ``block_tokens`` tokens, one group per component, no null block."""

    name = "toy"
    version = "0.0.1"
    title = "Toy 0.0.1"
    summary = "a test engine"
    Settings = ToySettings
    budget_keys = ("gpu_memory_utilization",)
    cache_kinds = frozenset({RingCache})  # the kinds it pages; any other is refused

    def plan(self, job):
        groups, by_comp = [], {}
        for (layer, comp), b in job.analytic.items():
            by_comp.setdefault(comp, []).append((layer, b))
        bt = job.settings.block_tokens
        for i, (comp, rows) in enumerate(by_comp.items()):
            spec = job.model.components[comp]
            entry = spec.entry_bytes(job.precision.formats[spec.storage])
            page = PlanPage(comp, "ToySpec", job.precision.formats[spec.storage].name, bt, bt, entry, bt * entry,
                            bt * entry, len(rows))
            blocks = -(-int(spec.entries([job.context])[0]) // bt)
            groups.append(PlanGroup(i, GroupKind.FULL, tuple(l for l, _ in rows), tuple((l, comp) for l, _ in rows),
                                    bt, (page,), blocks, sum(b for _, b in rows)))
        per_block = max(g.page_bytes for g in groups)
        return BlockPoolPlan(engine=self.name, engine_version=self.version, model=job.model.name,
                             precision=job.precision.name, context=job.context, settings=job.settings,
                             settings_json={"block_tokens": bt}, groups=tuple(groups), analytic_bytes=job.total,
                             layout=Layout.LAYER_OUTERMOST, grouping="one group per component", padding_layers=0,
                             bytes_per_block=per_block, null_blocks=0,
                             blocks_at_context=lambda ctx: tuple(g.blocks_per_request for g in groups))

    def budget(self, settings, gpu, model=None, parallel=None):
        return fraction_budget(gpu, settings.gpu_memory_utilization, "gpu_memory_utilization")


YAML = {
    "kvcalc": 1, "name": "toy-model", "max_context": 1 << 20,
    "precisions": {"bf16": {"kv": "bf16"}}, "default_precision": "bf16",
    "components": {"ring": {"cache": "toy_ring", "dim": 64, "slots": 1000}},
    "layer_kinds": {"ringed": ["ring"]}, "layers": ["ringed", "ringed", "ringed", "ringed"],
}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(CACHE_KINDS, "toy_ring", RingCache)
    engines.register(ToyEngine())
    yield parse_model(YAML, "toy.yaml")
    engines.unregister("toy")


def test_a_cache_kind_from_a_test_module_estimates(toy):
    from kvcalc.estimate import estimate

    e = estimate(toy, [500, 4096], numpy=False)
    # 4 layers x min(L, 1000) entries x 64 values x 2 B
    assert e.per_sequence.tolist() == [4 * 500 * 64 * 2, 4 * 1000 * 64 * 2]


def test_an_engine_from_a_test_module_plans_and_counts(toy):
    from kvcalc.capacity import capacity

    c = capacity(toy, 4096, engine="toy", kv_memory=10 * 1024 * 1024)
    # one group of 4 ring layers; 1,000 entries -> 32 blocks of 32 tokens; a block: 4 layers x 32 x 128 B
    assert c.plan.blocks_per_request == 32 and c.plan.bytes_per_block == 4 * 32 * 128
    assert c.num_blocks == 10 * 1024 * 1024 // 16384 == 640 and c.requests_per_replica == 640 // 32 == 20
    with pytest.raises(KvcalcError, match="not modelled for vLLM"):
        capacity(toy, 4096, engine="vllm", kv_memory=1 << 30)


def test_the_command_line_takes_the_new_engine(toy, tmp_path, capsys):
    import yaml

    from kvcalc.cli import run

    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(YAML))
    assert run(["capacity", str(path), "--engine", "toy", "--kv-memory", "10MiB", "-c", "4096", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["engine"], out["total_requests"], out["engine_settings"]) == ("toy", 20, {"block_tokens": 32})
    # the budget rule is the engine's: 0.5 x 80 GiB (h100-sxm reports 79.65 GiB: kvcalc gpus)
    assert run(["capacity", str(path), "--engine", "toy", "--gpu", "h100", "--weights-gib", "1", "-c", "4096",
                "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpu_memory_utilization"] == 0.5
    assert out["requested_bytes_per_gpu"] == -(-out["gpu"]["memory_bytes"] // 2)
    assert run(["capacity", str(path), "--engine", "nope", "--kv-memory", "1GiB"]) == 2
    assert "--engine: unknown engine 'nope'" in capsys.readouterr().err
