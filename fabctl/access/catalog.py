"""`fabctl access`, catalog area: the Polaris grants the seat's Polaris principals hold, through principal role and
catalog role to privileges on a catalog, namespace, table or view (components/polaris_setup.py; docs/security.md).

The grants are read from the setup plans the program renders for the `polaris-setup` Jobs: the site's plan (a
ConfigMap's `plan.json`: catalog, catalog roles and their grants, the engines' principals), each team's and each
vendor's (a Job's `PLAN_JSON`). Polaris' own model: a principal holds principal roles, a principal role is granted
catalog roles of a catalog, a catalog role holds privileges on securables of that catalog; a privilege on a namespace
covers its tables and views and the namespaces under it.
Limits: only what the setup plans grant; a grant made by hand in Polaris, or by a principal that manages access,
is not seen (a principal with a `*_MANAGE_*` or `CATALOG_MANAGE_ACCESS` privilege is flagged as escalation).
"""

from __future__ import annotations

import json
from typing import Any

from fabctl.access.model import Access, Principal
from fabctl.render import Plan

AREA, TARGET = "catalog", "polaris"
PLAN_FILE, PLAN_ENV = "plan.json", "PLAN_JSON"
ESCALATING = {
    "CATALOG_MANAGE_ACCESS": "grants any privilege of the catalog to any catalog role, its own included",
    "CATALOG_MANAGE_CONTENT": "creates, drops and writes every namespace, table and view of the catalog",
    "CATALOG_MANAGE_METADATA": "changes the catalog's properties and storage",
    "SERVICE_MANAGE_ACCESS": "grants any privilege of the service",
}


def setup_plans(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """(where it is rendered, setup plan) of every Polaris setup plan the program renders."""
    found = []
    for cluster, obj, _ in plan.manifests():
        meta = obj.get("metadata") or {}
        where = f"{obj['kind']} {meta.get('namespace', '')}/{meta.get('name', '')} on {cluster}"
        texts = []
        if obj["kind"] == "ConfigMap" and isinstance((obj.get("data") or {}).get(PLAN_FILE), str):
            texts.append(obj["data"][PLAN_FILE])
        elif obj["kind"] == "Job":
            pod = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
            texts += [env["value"] for c in pod.get("containers") or [] for env in c.get("env") or []
                      if env.get("name") == PLAN_ENV and isinstance(env.get("value"), str)]
        for text in texts:
            try:
                document = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(document, dict) and ("principals" in document or "vendor" in document):
                found.append((where, document))
    return found


def _securable(catalog: str, grant: dict[str, Any]) -> str:
    """`catalog`, `catalog.namespace`, `catalog.namespace.table` of a grant."""
    parts = [catalog, *grant.get("namespace", [])]
    name = grant.get("tableName") or grant.get("viewName")
    if name:
        parts.append(name)
    return ".".join(parts)


def _grants(plans: list[tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], tuple[list[dict[str, Any]], str]]:
    """(catalog, catalog role) -> (its grants, the plan that defines them)."""
    found: dict[tuple[str, str], tuple[list[dict[str, Any]], str]] = {}
    for where, document in plans:
        catalog = (document.get("catalog") or {}).get("name") or document.get("catalog_name", "")
        for role, grants in (document.get("catalog_roles") or {}).items():
            found[(catalog, role)] = (list(grants), where)
        if "vendor" in document:
            vendor = document["vendor"]
            found[(catalog, vendor["catalog_role"])] = (list(vendor.get("grants") or []), where)
    return found


def holders(plans: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str, str, str]]:
    """(principal, principal role, catalog, catalog role, plan) of every chain the plans set up."""
    found = []
    for where, document in plans:
        catalog = (document.get("catalog") or {}).get("name") or document.get("catalog_name", "")
        for principal in document.get("principals") or []:
            for role in principal.get("catalog_roles") or []:
                found.append((principal["name"], principal["principal_role"], catalog, role, where))
        if "vendor" in document:
            vendor = document["vendor"]
            found.append((vendor["name"], vendor["principal_role"], catalog, vendor["catalog_role"], where))
    return found


def accesses(plan: Plan, principal: Principal) -> list[Access]:
    """One Access per grant the seat's Polaris principals hold."""
    plans = setup_plans(plan)
    grants = _grants(plans)
    found = []
    for who, principal_role, catalog, role, where in holders(plans):
        if who not in principal.polaris_principals:
            continue
        chain = f"principal {who} -> principal role {principal_role} -> catalog role {catalog}/{role}"
        role_grants, defined = grants.get((catalog, role), (None, ""))
        if role_grants is None:
            found.append(Access(AREA, TARGET, catalog, "unknown", f"{chain} ({where}; no setup plan defines the catalog role's grants)"))
            continue
        for grant in role_grants:
            privilege = grant.get("privilege", "")
            found.append(Access(AREA, TARGET, _securable(catalog, grant), privilege, f"{chain} ({defined})",
                                ESCALATING.get(privilege, "")))
    return sorted(set(found))
