"""Model configs: the model types (model), the YAML format's tables and JSON Schema (schema), the strict
loader (loader), the shipped configs by name (registry) and the Hugging Face importer (hf)."""

from .loader import _CACHE, as_model, load_hf, load_model, parse_model
from .model import WEIGHT_DTYPES, ModelSpec, Precision, Weights
from .registry import config_names
from .schema import FORMAT_VERSION, TOP_KEYS, json_schema

__all__ = [
    "FORMAT_VERSION",
    "TOP_KEYS",
    "WEIGHT_DTYPES",
    "ModelSpec",
    "Precision",
    "Weights",
    "_CACHE",
    "as_model",
    "config_names",
    "json_schema",
    "load_hf",
    "load_model",
    "parse_model",
]
