"""Kernel tests: Triton kernels under the interpreter on CPU, compared with the torch references.

TRITON_INTERPRET must be set before triton is imported, hence at the top of this conftest.  Setting
KVCALC_KERNEL_TEST_DEVICE=cuda runs the same tests on a GPU instead (compiled kernels, native fp8 casts).
"""

import os

DEVICE = os.environ.get("KVCALC_KERNEL_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

try:
    import torch  # noqa: E402
    import triton  # noqa: E402,F401
except ImportError:  # pragma: no cover - CI installs both: without them the kernel tests are skipped, not errors
    torch = None
    collect_ignore_glob = ["test_*.py"]


def pytest_report_header(config):
    if torch is None:
        return "tests/kernels: skipped, torch and triton are not installed (pip install -e '.[verify]'; see .ci/run)"


@pytest.fixture(scope="session")
def device() -> "torch.device":
    return torch.device(DEVICE)


@pytest.fixture
def gen() -> "torch.Generator":
    g = torch.Generator()
    g.manual_seed(1234)
    return g


@pytest.fixture
def no_overflow_checks():
    """Turn off the interpreter's int32 overflow checks for one test (a no-op on a GPU).

    The interpreter checks every int32 add / sub / mul for overflow (``sanitize_overflow``, which compiled
    kernels only honour in debug builds); that costs about a third of a quantiser row's interpreter time.
    The large-row-count tests use this: their rows exercise the same value ranges as the small sizes, which
    keep the checks.  Relies on a private triton object; if it is missing the checks simply stay on.
    """
    import dataclasses

    builder = None
    if DEVICE == "cpu":
        try:
            from triton.runtime import interpreter as _interp

            builder = _interp.interpreter_builder
            saved = builder.options
            builder.options = dataclasses.replace(saved, sanitize_overflow=False)
        except (ImportError, AttributeError, TypeError):
            builder = None
    yield
    if builder is not None:
        builder.options = saved
