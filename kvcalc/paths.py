"""Where the shipped data lives: beside the package when installed from a wheel, at the repository root
in a source checkout or editable install."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    installed = _PKG / name
    return installed if installed.is_dir() else _PKG.parent / name


def configs_dir() -> Path:
    return _data_dir("configs")


def claims_file() -> Path:
    return _data_dir("reports") / "claims.yaml"
