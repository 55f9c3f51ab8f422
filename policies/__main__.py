"""The fab-platform CrossGuard policy pack: builds the pack only; the rules live in `rules/`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pulumi_policy import PolicyPack  # noqa: E402
from rules import PACK_NAME, POLICIES  # noqa: E402

PolicyPack(name=PACK_NAME, policies=POLICIES)
