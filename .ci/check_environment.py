#!/usr/bin/env python3
"""Refuse to deploy unless the GitHub environment guarding it is protected (docs/ci.md).

A deploy job names a GitHub environment per stack; GitHub makes the job wait for that environment's
required reviewers, but an environment that nobody configured has none and the job runs at once.
This check reads the environment through the REST API and fails the job unless it has required
reviewers and accepts deployments from protected branches only. The branch policy is what keeps the
environment's secrets from any other branch's workflow, a pull request's edited copy included.

Usage: check_environment.py [--without-reviewers] ENVIRONMENT   (GITHUB_REPOSITORY, GITHUB_API_URL and GH_TOKEN from the job)
--without-reviewers: for the previews' environment (main's code, read-only identities): protected branches only.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any


WILDCARDS = set("*?[]")
"""Characters that make a custom deployment branch policy a pattern (GitHub matches them with File.fnmatch)."""


def problems(name: str, environment: dict[str, Any], reviewers: bool = True,
             branch_policies: list[dict[str, Any]] | None = None) -> list[str]:
    """What makes an environment unfit to guard a deploy (or, without `reviewers`, a preview of main), one line each.
    `branch_policies`: the environment's custom deployment branch policies, where it has them."""
    found = []
    required = [rule for rule in environment.get("protection_rules") or []
                if rule.get("type") == "required_reviewers" and rule.get("reviewers")]
    if reviewers and not required:
        found.append(f"environment {name!r} has no required reviewers: add them under Settings > Environments > {name}")
    policy = environment.get("deployment_branch_policy") or {}
    if not (policy.get("protected_branches") or policy.get("custom_branch_policies")):
        found.append(f"environment {name!r} accepts deployments from any branch: limit it to protected branches (main)")
    elif policy.get("custom_branch_policies"):
        patterns = sorted(p.get("name", "") for p in branch_policies or [] if p.get("type", "branch") != "branch" or WILDCARDS & set(p.get("name", "")))
        if patterns:
            found.append(f"environment {name!r} accepts deployments from branches or tags matching {', '.join(patterns)}, which anyone who "
                         f"pushes a branch can name: name the branches one by one, or limit it to protected branches (main)")
    return found


def fetch(name: str, path: str = "") -> dict[str, Any] | None:
    url = f"{os.environ.get('GITHUB_API_URL', 'https://api.github.com')}/repos/{os.environ['GITHUB_REPOSITORY']}/environments/{name}{path}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {os.environ['GH_TOKEN']}",
                                                   "Accept": "application/vnd.github+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (the GitHub API)
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def main(argv: list[str]) -> int:
    reviewers = "--without-reviewers" not in argv
    names = [a for a in argv if a != "--without-reviewers"]
    if len(names) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    name = names[0]
    environment = fetch(name)
    custom = environment is not None and (environment.get("deployment_branch_policy") or {}).get("custom_branch_policies")
    branch_policies = (fetch(name, "/deployment-branch-policies?per_page=100") or {}).get("branch_policies") if custom else None
    found = ([f"environment {name!r} does not exist: create it with required reviewers"] if environment is None
             else problems(name, environment, reviewers, branch_policies))
    for line in found:
        print(f"refusing to run: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
