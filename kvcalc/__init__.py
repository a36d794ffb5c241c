"""kvcalc: exact KV-cache memory for LLMs.

    >>> import kvcalc
    >>> e = kvcalc.estimate("deepseek-v4-pro", 1 << 20, precision="bf16", basis="article")
    >>> int(e.per_sequence[0])
    10334371840

The analytic core imports yaml, and numpy only for many contexts at once (the API returns numpy arrays by
default; ``numpy=False`` gives exact Python ints); torch and triton live behind ``kvcalc.verify``.
"""

from .config import ModelSpec, config_names, load_model
from .errors import KvcalcError
from .estimate import Estimate, estimate
from .formats import FORMATS, StorageFormat

__version__ = "0.1.0"
__all__ = [
    "FORMATS",
    "Estimate",
    "KvcalcError",
    "ModelSpec",
    "StorageFormat",
    "config_names",
    "estimate",
    "load_model",
]
