import importlib.util
import json
import os

# One intra-op thread for torch (read when torch is first imported, so it is set before any test imports it;
# subprocesses the tests start inherit it). The suite's tensors are small: on 2 cores a second OpenMP thread
# roughly doubled the CPU time of the verify tests, and on a busy machine its spin-waiting made them up to
# 10x slower (test_verify_fill.py: 16 s with one thread, 240 s with two, beside two busy processes).
# The tests compare figures computed in one process, so none depends on the count. Set OMP_NUM_THREADS
# yourself to override.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The text layouts compared are kvcalc's off a terminal with no $COLUMNS (120 columns); tests that want another
# width set it themselves. A user's $COLUMNS, or pytest-xdist's (its workers get the controller's width), is dropped.
os.environ.pop("COLUMNS", None)

import pytest  # noqa: E402

from kvcalc.cli import main  # noqa: E402

#: torch is installed: verify can run (the other commands never import it)
HAS_TORCH = importlib.util.find_spec("torch") is not None

import early  # noqa: E402  (tests/early.py: slow subprocess tests started in the background)


def pytest_collection_modifyitems(session, config, items):
    """The slow subprocess tests first (stable otherwise): under pytest-xdist a worker takes one at the start
    instead of holding the run's tail for tens of seconds; every worker collects the same order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # in one process they stay where they are, run in the background
        items.sort(key=lambda item: getattr(item, "originalname", "") not in early.COMMANDS)


def pytest_collection_finish(session):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under pytest-xdist the workers share the cores; each subprocess test runs where it is scheduled
    early.start([item.originalname for item in session.items if hasattr(item, "originalname")])


def pytest_sessionfinish(session, exitstatus):
    early.stop_all()


class CliResult:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    """Run the kvcalc CLI in-process; returns exit code, stdout and stderr."""

    def run(*args):
        if args and args[0] == "verify" and not HAS_TORCH:  # verify allocates through torch: the rest does not
            pytest.skip("verify needs torch (pip install -e '.[verify]')")
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
