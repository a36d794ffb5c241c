"""The configs kvcalc ships (configs/*.yaml), found by name."""

from __future__ import annotations

from pathlib import Path

from ..paths import configs_dir


def config_names() -> list[str]:
    return sorted(p.stem for p in configs_dir().glob("*.yaml"))


def shipped_name(key: str) -> str | None:
    """The shipped config ``key`` names, case aside (``Llama-3.1-8B`` -> ``llama-3.1-8b``), or None."""
    return {n.lower(): n for n in config_names()}.get(key.lower())


def config_path(name: str) -> Path:
    """Where the shipped config ``name`` is (or would be)."""
    return configs_dir() / f"{name}.yaml"
