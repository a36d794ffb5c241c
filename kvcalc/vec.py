"""Integer vectors for the token rules: numpy for many contexts, exact Python ints for a few.

The formulas in ``specs`` and ``estimate`` are written once, against the handful of operations both kinds
of vector support (``+ - * // %``, comparisons, mask indexing, ``max``/``min``/``size``/``tolist``, and
:func:`minimum` / :func:`zeros_like` here). A sweep over thousands of contexts runs them on numpy int64
arrays; a command-line estimate at one or a few contexts runs them on :class:`Ints`, a list of Python ints,
and never imports numpy (about 60 ms of a 0.2 s start). Python ints cannot wrap; int64 can, which is why
the estimator bounds every sum in Python ints before numpy sees it.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable, Iterable

#: Up to this many contexts the command line computes in Python ints; above it, numpy pays for its import.
SMALL = 256


class Ints:
    """A short vector of exact Python ints with the slice of numpy's array interface the token rules use.
    Arithmetic is elementwise with an integer or another ``Ints`` of the same length (a float is refused:
    these are counts); comparisons, ``==`` included, give a mask (an ``Ints`` of booleans) that indexing
    accepts, as numpy's boolean indexing does, and the truth of more than one value is ambiguous, as in numpy."""

    __hash__ = None  # type: ignore[assignment]  # elementwise ==, like a numpy array

    __slots__ = ("_v",)

    def __init__(self, values: Iterable[int] = ()) -> None:
        self._v = list(values)

    def _map(self, other: Any, op: Callable[[Any, Any], Any], reflected: bool = False) -> "Ints":
        if isinstance(other, Ints):
            if len(other._v) != len(self._v):
                raise ValueError(f"vectors of {len(self._v)} and {len(other._v)} values")
            pairs = zip(other._v, self._v) if reflected else zip(self._v, other._v)
            return Ints([op(a, b) for a, b in pairs])
        b = operator.index(other)  # ints and numpy integers; a float raises TypeError instead of truncating
        return Ints([op(b, a) for a in self._v] if reflected else [op(a, b) for a in self._v])

    def __add__(self, other): return self._map(other, operator.add)
    def __radd__(self, other): return self._map(other, operator.add, True)
    def __sub__(self, other): return self._map(other, operator.sub)
    def __rsub__(self, other): return self._map(other, operator.sub, True)
    def __mul__(self, other): return self._map(other, operator.mul)
    def __rmul__(self, other): return self._map(other, operator.mul, True)
    def __floordiv__(self, other): return self._map(other, operator.floordiv)
    def __mod__(self, other): return self._map(other, operator.mod)
    def __gt__(self, other): return self._map(other, operator.gt)
    def __ge__(self, other): return self._map(other, operator.ge)
    def __lt__(self, other): return self._map(other, operator.lt)
    def __le__(self, other): return self._map(other, operator.le)
    def __eq__(self, other): return self._map(other, operator.eq)  # type: ignore[override]
    def __ne__(self, other): return self._map(other, operator.ne)  # type: ignore[override]

    def __bool__(self) -> bool:
        if len(self._v) != 1:
            raise ValueError(f"the truth value of {len(self._v)} values is ambiguous (as a numpy array's)")
        return bool(self._v[0])

    def __getitem__(self, key):
        if isinstance(key, Ints):  # a mask, as numpy's boolean indexing
            if len(key._v) != len(self._v):
                raise IndexError(f"mask of {len(key._v)} values for {len(self._v)}")
            return Ints([v for v, keep in zip(self._v, key._v) if keep])
        if isinstance(key, slice):
            return Ints(self._v[key])
        return self._v[key]

    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self):
        return iter(self._v)

    def __repr__(self) -> str:
        return f"Ints({self._v})"

    def __array__(self, dtype=None, copy=None):  # np.asarray(ints) works where numpy is wanted (plots)
        import numpy as np

        return np.array(self._v, dtype=dtype or np.int64)

    @property
    def size(self) -> int:
        return len(self._v)

    @property
    def ndim(self) -> int:
        return 1

    def max(self) -> int:
        return max(self._v)

    def min(self) -> int:
        return min(self._v)

    def tolist(self) -> list:
        return list(self._v)


def is_array(x: Any) -> bool:
    """True for a numpy array, without importing numpy: if numpy is not loaded, nothing is one."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def minimum(a, b):
    """Elementwise ``min(a, b)`` of a vector and an int or a vector of the same kind (numpy's ``minimum``)."""
    if isinstance(a, Ints):
        if isinstance(b, Ints):
            return Ints([x if x < y else y for x, y in zip(a._v, b._v, strict=True)])
        b = operator.index(b)
        return Ints([x if x < b else b for x in a._v])
    import numpy as np

    return np.minimum(a, b)


def zeros_like(a):
    """A vector of zeros as long as ``a``, of the same kind."""
    if isinstance(a, Ints):
        return Ints([0] * len(a._v))
    import numpy as np

    return np.zeros_like(a)


def as_vector(contexts):
    """Contexts as a vector: an ``Ints`` or numpy array is used as it is; anything else (an int, a list)
    becomes a numpy int64 array, as the token rules have always accepted."""
    if isinstance(contexts, Ints):
        return contexts
    import numpy as np

    return np.asarray(contexts, dtype=np.int64)
