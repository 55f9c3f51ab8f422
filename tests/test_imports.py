"""What the program imports before it registers anything (issue 24, "Cut the fixed cost").

Every render and every `pulumi up` pays for the program's imports. The Kubernetes SDK loads an API group and version
only when the program first reaches for one of its kinds, and the modules only some sites need (the Grafana SDK,
cryptography, PyJWT, the capacity maths) are imported where they are used; the offline tooling never is.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fabctl.render import PROJECT_DIR

# Runs `__main__.py`'s own import statements (read from the file, so the test follows the program) and lists the modules
# that were executed. `pulumi_kubernetes` puts a stub of each API group and version in `sys.modules` that runs the
# module on first attribute access (pulumi._utils.lazy_import): a stub costs nothing and is not counted.
_PROBE = """
import ast, json, sys
tree = ast.parse(open("__main__.py", encoding="utf-8").read())
imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
assert imports, "__main__.py has no top-level import"
exec(compile(ast.Module(body=imports, type_ignores=[]), "__main__.py", "exec"), {})
print(json.dumps(sorted(name for name, module in sys.modules.items()
                        if module is not None and type(module).__name__ != "_LazyModule")))
"""


@pytest.fixture(scope="module")
def start_modules() -> set[str]:
    """The modules executed by the program's imports, in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    return set(json.loads(proc.stdout))


def test_program_start_runs_no_kubernetes_api_module(start_modules: set[str]) -> None:
    kubernetes = {name for name in start_modules if name.split(".")[0] == "pulumi_kubernetes"}
    assert kubernetes == {"pulumi_kubernetes", "pulumi_kubernetes._inputs", "pulumi_kubernetes._utilities", "pulumi_kubernetes.provider"}


@pytest.mark.parametrize("package", [
    "fabctl",  # the offline tooling
    "grafana_foundation_sdk",  # the dashboards, only with observability
    "cryptography",  # a Java trust store, only with a CA to trust; and PyJWT's signing
    "jwt",  # AIStor's metrics token, only with observability
    "components.capacity",  # model sizing, run by the config only with inference
    "components.dashboards",
])
def test_program_start_does_not_import(start_modules: set[str], package: str) -> None:
    assert start_modules, "the probe listed no module"
    assert sorted(name for name in start_modules if name == package or name.startswith(f"{package}.")) == []
