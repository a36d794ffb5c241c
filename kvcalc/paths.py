"""Where the shipped data lives: ``kvcalc/data/`` (model configs, the GPU catalogue, the published claims),
read by the package wherever it is installed. ``reports/`` holds generated figures only."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def configs_dir() -> Path:
    return DATA / "configs"


def claims_file() -> Path:
    return DATA / "claims.yaml"


def gpus_file() -> Path:
    return DATA / "gpus.yaml"
