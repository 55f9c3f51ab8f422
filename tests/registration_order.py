"""A pytest plugin: every render of the session comes in a perturbed registration order (fabctl.runs.perturbed).

Pulumi registers a program's resources as their inputs resolve, so the order of a render's resources varies from run
to run; only a resource's parent, provider and dependencies are sure to come before it. A test that relies on any other
order passes until the day Pulumi's scheduling differs, as two lost submissions showed. With this plugin every render
(in this process, in its workers and in the `python -m fabctl` processes the tests start, which inherit the variable)
comes in another order Pulumi could have produced, drawn from a seed:

    pytest --registration-order=SEED     # a given seed: the same orders again (CI derives it from the commit)
    pytest --registration-order=off      # the order the renderer recorded
    pytest                               # a new seed each run, printed in the header

The order of the tests themselves is shuffled by pytest-randomly, whose seed is printed beside this one
(`--randomly-seed=SEED` repeats it, `-p no:randomly` keeps the files' order).
"""

from __future__ import annotations

import os
import secrets

import pytest

from fabctl.runs import ORDER_VARIABLE


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--registration-order", metavar="SEED", default=None,
        help="perturb every render's registration order from SEED ('off': keep the recorded order; default: a new seed, "
             f"or ${ORDER_VARIABLE} when set)",
    )


def pytest_configure(config: pytest.Config) -> None:
    seed = config.getoption("--registration-order") or os.environ.get(ORDER_VARIABLE) or secrets.token_hex(4)
    if seed == "off":
        os.environ.pop(ORDER_VARIABLE, None)
    else:
        # In the environment, so that the workers of a parallel run (started after this) and every process a test
        # starts perturb with the same seed.
        os.environ[ORDER_VARIABLE] = seed


def pytest_report_header(config: pytest.Config) -> str:
    seed = os.environ.get(ORDER_VARIABLE)
    return f"registration order: {'perturbed, --registration-order=' + seed if seed else 'as recorded (--registration-order=off)'}"
