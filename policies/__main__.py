"""The fab-platform CrossGuard policy pack: builds the pack only; the rules live in `rules/`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The project's root, after the pack's folder: the rules read the engines' declarations (components/engines: which charts
# and custom resources each engine runs, and where their pods are placed). The pack runs from the project's checkout
# with the project's virtualenv (PulumiPolicy.yaml), so both are there.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from pulumi_policy import PolicyPack  # noqa: E402
from rules import PACK_NAME, POLICIES  # noqa: E402

PolicyPack(name=PACK_NAME, policies=POLICIES)
