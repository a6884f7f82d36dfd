"""Suite-wide command-line options."""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    parser.addoption("--hydragnn-python", default=None, metavar="PATH",
                     help="python of a HydraGNN venv (interop/setup_hydragnn.sh makes one, bin/hydragnn-python): "
                          "runs the tests that train our exports in HydraGNN itself; skipped without it")
