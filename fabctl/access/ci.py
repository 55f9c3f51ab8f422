"""The CI area of `fabctl access`: what a pull request's author gets from the GitHub Actions workflows a `pull_request`
(or `pull_request_target`) event runs, read from `.github/workflows/*.yml`.

Per job that such an event runs: the secrets and configuration variables it references, its `GITHUB_TOKEN` permissions
(the job's, else the workflow's, else the repository's default), its environment, and whether the PR's code runs in it
(always under `pull_request`; under `pull_request_target` only where a checkout names the PR's head). What it cannot
see: the repository's settings (default token permissions, environment reviewers, fork policies) and the secrets' values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fabctl.access.model import Access, Principal
from fabctl.render import PROJECT_DIR, Plan

PR_EVENTS = ("pull_request", "pull_request_target")
WORKFLOWS = Path(".github") / "workflows"
DEFAULT_PERMISSIONS = "repository default"
"""A job without `permissions` (nor its workflow): the token gets the repository's default (read-all or write-all, a
setting this program cannot see); a fork's `pull_request` gets read-only."""
_SECRET = re.compile(r"\bsecrets\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\])")
_VAR = re.compile(r"\bvars\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\])")
_HEAD = re.compile(r"github\.event\.pull_request\.head\.(sha|ref)|github\.head_ref")


class WorkflowError(ValueError):
    """A workflow file that is no valid workflow (not YAML, or not a mapping)."""


@dataclass(frozen=True)
class PrJob:
    """A job a pull request's event runs, and what it hands the code it runs."""

    workflow: str
    """The workflow file's name."""
    job: str
    events: tuple[str, ...]
    """The PR events of PR_EVENTS that run it."""
    permissions: str
    """`scope:level` of its token, comma-separated and sorted; `read-all`, `write-all`; DEFAULT_PERMISSIONS."""
    secrets: tuple[str, ...]
    variables: tuple[str, ...]
    environment: str | None
    runs_on: str
    condition: str | None
    """Its `if:`, as written."""
    env_names: frozenset[str]
    """Environment variables set for it (job or step `env:`)."""
    runs_pr_code: bool
    uses_workflow: str | None = None
    """A reusable workflow it calls (`uses:` at job level), whose steps are not read here."""
    inherits_secrets: bool = False

    @property
    def writes(self) -> tuple[str, ...]:
        """The scopes its token may write."""
        if self.permissions == "write-all":
            return ("*",)
        return tuple(p.split(":")[0] for p in self.permissions.split(",") if p.endswith(":write"))


def workflow_texts(root: Path = PROJECT_DIR) -> dict[str, str]:
    """Workflow file name -> its text, for every workflow of the checkout at `root`."""
    folder = root / WORKFLOWS
    files = sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")]) if folder.is_dir() else []
    return {path.name: path.read_text(encoding="utf-8") for path in files}


def _events(document: dict[Any, Any]) -> tuple[str, ...]:
    on = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` key as true
    if isinstance(on, str):
        found = [on]
    elif isinstance(on, list | dict):
        found = [e for e in on if isinstance(e, str)]
    else:
        found = []
    return tuple(e for e in PR_EVENTS if e in found)


def _permissions(value: Any) -> str:
    if value is None:
        return DEFAULT_PERMISSIONS
    if isinstance(value, str):
        return value  # read-all, write-all
    if isinstance(value, dict):
        return ",".join(sorted(f"{scope}:{level}" for scope, level in value.items())) or "none"
    return str(value)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (*_strings(key), *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _names(pattern: re.Pattern[str], texts: list[str]) -> tuple[str, ...]:
    return tuple(sorted({a or b for text in texts for a, b in pattern.findall(text)}))


def _environment(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("name")
    return str(value) if value is not None else None


def _runs_pr_code(events: tuple[str, ...], job: dict[str, Any]) -> bool:
    """Whether the job runs code of the pull request: every `pull_request` job does (its checkout is the PR's merge
    commit); a `pull_request_target` job only where a checkout names the PR's head."""
    if "pull_request" in events:
        return True
    for step in job.get("steps") or []:
        if isinstance(step, dict) and str(step.get("uses", "")).startswith("actions/checkout") and any(
                _HEAD.search(text) for text in _strings(step.get("with"))):
            return True
    return bool(job.get("uses"))  # a called workflow: assume it does (its steps are not read here)


def pr_jobs(texts: dict[str, str]) -> list[PrJob]:
    """Every job a pull request's event runs, of these workflows (file name -> text)."""
    out = []
    for workflow, text in sorted(texts.items()):
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise WorkflowError(f"{workflow}: not YAML ({exc.__class__.__name__})") from None
        if not isinstance(document, dict):
            raise WorkflowError(f"{workflow}: a workflow is a mapping (got {type(document).__name__})")
        events = _events(document)
        if not events:
            continue
        top_env = document.get("env") if isinstance(document.get("env"), dict) else {}
        for name, job in (document.get("jobs") or {}).items():
            if not isinstance(job, dict):
                continue
            texts_of_job = _strings(job) + _strings(top_env)
            env_names = set(top_env) | set(job.get("env") or {})
            for step in job.get("steps") or []:
                if isinstance(step, dict) and isinstance(step.get("env"), dict):
                    env_names |= set(step["env"])
            runs_on = job.get("runs-on")
            out.append(PrJob(
                workflow=workflow, job=str(name), events=events,
                permissions=_permissions(job["permissions"] if "permissions" in job else document.get("permissions")),
                secrets=_names(_SECRET, texts_of_job), variables=_names(_VAR, texts_of_job),
                environment=_environment(job.get("environment")),
                runs_on=", ".join(runs_on) if isinstance(runs_on, list) else str(runs_on or ""),
                condition=str(job["if"]) if "if" in job else None,
                env_names=frozenset(str(n) for n in env_names),
                runs_pr_code=_runs_pr_code(events, job),
                uses_workflow=str(job["uses"]) if job.get("uses") else None,
                inherits_secrets=job.get("secrets") == "inherit",
            ))
    return out


def job_access(job: PrJob) -> Access:
    """One job as the matrix shows it: its token's permissions and what it is handed; escalated when the PR's code runs
    with a secret, a write token or on a self-hosted runner."""
    handed = [f"token {job.permissions}"]
    secrets = [s for s in job.secrets if s != "GITHUB_TOKEN"]
    if secrets or job.inherits_secrets:
        handed.append("secrets " + ", ".join([*secrets, *(["(all: inherit)"] if job.inherits_secrets else [])]))
    if job.variables:
        handed.append("vars " + ", ".join(job.variables))
    via = [f"{job.workflow} on {','.join(job.events)}"]
    if job.environment:
        via.append(f"environment {job.environment}")
    if job.condition:
        via.append(f"if: {job.condition}")
    if job.uses_workflow:
        via.append(f"calls {job.uses_workflow}")
    escalation = []
    if job.runs_pr_code:
        if secrets or job.inherits_secrets:
            escalation.append("the PR's code runs with its secrets" + (f" (once environment {job.environment} is approved)" if job.environment else ""))
        if job.writes:
            escalation.append(f"the PR's code holds a token that writes {','.join(job.writes)}")
        elif job.permissions == DEFAULT_PERMISSIONS:
            escalation.append("the token has the repository's default permissions (write-all unless the repository restricts them)")
        if "self-hosted" in job.runs_on:
            escalation.append(f"the PR's code runs on a self-hosted runner ({job.runs_on})")
    return Access("ci", "github", f"{job.workflow}:{job.job}", "; ".join(handed), "; ".join(via), "; ".join(escalation))


def accesses(plan: Plan, principal: Principal, root: Path = PROJECT_DIR) -> list[Access]:
    """What the workflows of the checkout at `root` give a pull request's author (other seats: nothing)."""
    if principal.kind != "pr-author":
        return []
    return [job_access(job) for job in pr_jobs(workflow_texts(root))]
