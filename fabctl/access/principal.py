"""Who asks: a seat of `fabctl access --as` resolved from a rendered plan and its stack's config into a `Principal`.

Seats (SEAT_FORMS):
    team:T                      a member of team T: its Keycloak group `team-T`, the RBAC subject `Group <prefix>team-T`
                                (`training.group_prefix`), its pods' namespaces (those labelled `fab.internal/team: T`, on
                                every cluster), their ServiceAccounts, its MinIO user and Polaris principal `fab-training-T`
    vendor:V                    an equipment vendor of `storage.vendors`: its MinIO user and Polaris principal
                                `fab-vendor-V` and its source ranges; no cluster identity
    user:NAME                   a person in no group of the site: only what every authenticated user gets
    user:NAME@GROUP[,GROUP...]  a person in these Keycloak groups: team groups (`team-T`), `platform-users` (JupyterHub on
                                compute), `platform-admins`; what each group's seat holds, together
    pr-author                   the author of a pull request: no identity of the site but what the workflows a
                                `pull_request` event runs hand the PR's code (fabctl/access/ci.py); where such a job is
                                given a kubeconfig (`KUBECONFIG`), the clusters' preview identity (components/access.py)
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import defaultdict
from pathlib import Path

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before a site is parsed)
from components.access import PREVIEW_ACCOUNT, PREVIEW_NAMESPACE, PREVIEW_USER
from components.config import SiteConfig, names, parse_site
from components.constants import ENGINE_LABEL, TEAM_LABEL
from components.data_access import team_principal
from components.identity import PLATFORM_ADMINS, PLATFORM_USERS
from fabctl.access.model import Principal
from fabctl.render import PROJECT_DIR, Plan
from fabctl.stackfile import SITE_KEY

SEAT_FORMS = ("team:T", "vendor:V", "user:NAME", "user:NAME@GROUP[,GROUP...]", "pr-author")
AUTHENTICATED = ("Group", "system:authenticated")
"""What the API server adds to every authenticated request: bindings to it reach every seat with a cluster identity."""
JUPYTERHUB_ENGINE = "jupyterhub"
"""The engine label of compute's JupyterHub namespace, where `platform-users` start their servers."""
_USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class SeatError(ValueError):
    """A seat that names nothing of the stack (or is no seat): the message says what is allowed."""


def site_of(plan: Plan, project_dir: Path = PROJECT_DIR) -> SiteConfig:
    """The site config a plan was rendered from (its `fab-platform:site`, as the program read it)."""
    raw = plan.config.get(SITE_KEY)
    if raw is None:
        raise SeatError(f"the plan of {plan.stack} carries no site config ({SITE_KEY}): render it with fabctl")
    with contextlib.chdir(project_dir):  # the config's file paths are relative to the project
        return parse_site(json.loads(raw) if isinstance(raw, str) else raw)


def check_seat(seat: str) -> tuple[str, str]:
    """(kind, rest) of a seat's syntax, before anything is rendered; SeatError for a seat of no known form."""
    kind, _, rest = seat.partition(":")
    if seat == "pr-author":
        return kind, ""
    if kind not in ("team", "vendor", "user") or not rest:
        raise SeatError(f"--as {seat!r}: not a seat; use one of {', '.join(SEAT_FORMS)}")
    return kind, rest


def resolve(plan: Plan, seat: str, site: SiteConfig | None = None, project_dir: Path = PROJECT_DIR) -> Principal:
    """The principal a seat is on the stack of `plan` (`site`: its config, read from the plan if not given)."""
    kind, rest = check_seat(seat)
    site = site if site is not None else site_of(plan, project_dir)
    if kind == "team":
        if rest not in site.teams:
            raise SeatError(f"--as {seat}: {plan.stack} has no team {rest!r}; teams: {', '.join(sorted(site.teams))}")
        return _people(plan, site, "team", rest, (names.TEAM_GROUP(rest),))
    if kind == "vendor":
        vendor = site.storage.vendors.get(rest)
        if vendor is None:
            known = ", ".join(sorted(site.storage.vendors)) or "none (storage.vendors is empty)"
            raise SeatError(f"--as {seat}: {plan.stack} has no vendor {rest!r}; vendors: {known}")
        principal = names.VENDOR_PRINCIPAL(rest)
        return Principal("vendor", rest, minio_users=(principal,), polaris_principals=(principal,),
                         source_cidrs=tuple(str(cidr) for cidr in vendor.source_cidrs))
    if kind == "user":
        name, _, listed = rest.partition("@")
        if not _USER_NAME.fullmatch(name):
            raise SeatError(f"--as {seat}: {name!r} is no user name (letters, digits, '.', '_', '-'); "
                            f"use user:NAME or user:NAME@GROUP[,GROUP...]")
        groups = tuple(dict.fromkeys(g.strip() for g in listed.split(",") if g.strip())) if listed else ()
        allowed = [*(names.TEAM_GROUP(team) for team in sorted(site.teams)), PLATFORM_USERS, PLATFORM_ADMINS]
        unknown = [g for g in groups if g not in allowed]
        if unknown or (listed and not groups):
            raise SeatError(f"--as {seat}: {plan.stack} has no Keycloak group {', '.join(map(repr, unknown)) or repr(listed)}; "
                            f"groups: {', '.join(allowed)}")
        return _people(plan, site, "user", name, groups)
    return _pr_author(plan)


def _people(plan: Plan, site: SiteConfig, kind: str, name: str, groups: tuple[str, ...]) -> Principal:
    """A team's member, or a person in `groups`: the groups' RBAC subjects, namespaces, ServiceAccounts and keys."""
    prefix = site.training.group_prefix
    teams = [team for team in sorted(site.teams) if names.TEAM_GROUP(team) in groups]
    subjects = [AUTHENTICATED, *(("Group", f"{prefix}{group}") for group in groups)]
    if kind == "user":
        subjects.append(("User", name))
    pods: dict[str, set[str]] = defaultdict(set)
    for cluster, obj, _ in plan.manifests():
        if obj["kind"] != "Namespace":
            continue
        labels = obj.get("metadata", {}).get("labels") or {}
        if labels.get(TEAM_LABEL) in teams or (PLATFORM_USERS in groups and labels.get(ENGINE_LABEL) == JUPYTERHUB_ENGINE):
            pods[cluster].add(obj["metadata"]["name"])
    return Principal(
        kind, name, keycloak_groups=groups, rbac_subjects=tuple(subjects),
        pod_namespaces={cluster: tuple(sorted(ns)) for cluster, ns in sorted(pods.items())},
        service_accounts=service_accounts_of(plan, pods),
        minio_users=tuple(team_principal(team) for team in teams),
        polaris_principals=tuple(team_principal(team) for team in teams),
    )


def service_account_id(namespace: str, account: str) -> str:
    return f"system:serviceaccount:{namespace}:{account}"


def service_accounts_of(plan: Plan, namespaces: dict[str, set[str]]) -> dict[str, tuple[str, ...]]:
    """cluster -> the ServiceAccounts of these namespaces a pod may run as: those the program makes, and `default`, which
    every namespace has."""
    found: dict[str, set[str]] = {cluster: {service_account_id(ns, "default") for ns in spaces} for cluster, spaces in namespaces.items()}
    for cluster, obj, _ in plan.manifests():
        meta = obj.get("metadata", {})
        if obj["kind"] == "ServiceAccount" and meta.get("namespace") in namespaces.get(cluster, ()):
            found[cluster].add(service_account_id(meta["namespace"], meta["name"]))
    return {cluster: tuple(sorted(ids)) for cluster, ids in sorted(found.items()) if ids}


def _pr_author(plan: Plan) -> Principal:
    """A PR's author: the preview identity on every cluster that has it, if a job of a `pull_request` event is handed a
    kubeconfig (`KUBECONFIG` in its environment)."""
    from fabctl.access import ci  # the workflows' reader

    handed = any("KUBECONFIG" in job.env_names for job in ci.pr_jobs(ci.workflow_texts()))
    accounts: dict[str, tuple[str, ...]] = {}
    if handed:
        for cluster, obj, _ in plan.manifests():
            meta = obj.get("metadata", {})
            if obj["kind"] == "ServiceAccount" and (meta.get("namespace"), meta.get("name")) == (PREVIEW_NAMESPACE, PREVIEW_ACCOUNT):
                accounts[cluster] = (PREVIEW_USER,)
    return Principal("pr-author", "pr-author", service_accounts=dict(sorted(accounts.items())))
