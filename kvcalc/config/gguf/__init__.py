"""GGUF files in: a GGUF's header (:mod:`.reader`, bounded, never the tensor data), its hyperparameters as llama.cpp
loads them (:mod:`.hparams`), the kvcalc config they make (:mod:`.importer`) and its weights by layer
(:mod:`.tensors`). ``read_gguf`` gives what ``config.loader.load_gguf`` makes the ModelSpec of; the llama.cpp engine also reads the
hyperparameters themselves (``spec.gguf``), so its answer follows llama.cpp's own per-layer rules."""

from __future__ import annotations

import os

from .reader import MAGIC, GgufHeader, read_header

__all__ = ["MAGIC", "GgufHeader", "gguf_yaml", "is_gguf_path", "read_gguf", "read_header"]


def is_gguf_path(key: str) -> bool:
    """A path kvcalc reads as a GGUF: its name ends in .gguf, or it is a regular file that starts with GGUF's magic."""
    if key.lower().endswith(".gguf"):
        return True
    try:
        if not os.path.isfile(key):
            return False
        with open(key, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def _parts(path, name=None, what="model"):
    from .hparams import load_hparams
    from .importer import gguf_config

    h = read_header(path, what)
    hp = load_hparams(h, what)
    return h, hp, gguf_config(h, hp, name)


def read_gguf(path, name: str | None = None, what: str = "model"):
    """(hyperparameters, kvcalc config, weights) of the GGUF at ``path``; weights None where the gguf package is
    not there to name the tensor types (the cache answers stand without it). ``config.loader.load_gguf`` turns
    them into the ModelSpec."""
    from ...errors import KvcalcError
    from .tensors import read_weights

    h, hp, cfg = _parts(path, name, what)
    try:
        weights = read_weights(h, len(hp.layers), hp.n_layer)
    except KvcalcError:
        weights = None
    return hp, cfg, weights


def gguf_yaml(path, name: str | None = None) -> str:
    """``kvcalc import-gguf``: the kvcalc config of a GGUF, as YAML."""
    from ..hf import to_yaml

    return to_yaml(_parts(path, name)[2], "`kvcalc import-gguf` from a GGUF file's header")
