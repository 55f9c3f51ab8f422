"""Idempotent setup of Polaris' catalog, principals and roles; run by the `polaris-setup` Job (StorageCluster).

This file is shipped as-is into a ConfigMap and run with the pinned Python image, so it uses the
standard library only. Its input is the desired state as JSON (the `PLAN` file) and credentials
from the environment:

    PLAN_JSON                the plan itself instead of the file (a training team's principal, or a vendor's: `apply_vendor`)
    POLARIS_URL              e.g. http://polaris.polaris.svc:8181
    POLARIS_REALM            the realm to configure
    ROOT_CLIENT_ID/SECRET    the bootstrap (root) principal's credentials
    <NAME>_CLIENT_ID/SECRET  each principal's desired credentials, by the names given in the plan

Every step reads or tolerates what exists (409 on create is success), and each principal's
credentials are reset to the ones Pulumi generated, so running it twice changes nothing.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

MANAGEMENT = "/api/management/v1"


class Polaris:
    def __init__(self, url: str, realm: str, client_id: str, client_secret: str):
        self.url = url.rstrip("/")
        self.realm = realm
        self.token = self._token(client_id, client_secret)

    def _token(self, client_id: str, client_secret: str) -> str:
        body = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "PRINCIPAL_ROLE:ALL"}).encode()
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        request = urllib.request.Request(
            f"{self.url}/api/catalog/v1/oauth/tokens",
            data=body,
            method="POST",
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Polaris-Realm": self.realm,
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (URL from the plan)
            return json.load(response)["access_token"]

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, ok: tuple[int, ...] = ()) -> int:
        """Send one request; statuses in `ok` (besides 2xx) count as success, anything else raises."""
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Polaris-Realm": self.realm,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status
        except urllib.error.HTTPError as exc:
            if exc.code in ok:
                return exc.code
            raise RuntimeError(f"{method} {path}: HTTP {exc.code} {exc.read().decode(errors='replace')[:500]}") from None


def apply(polaris: Polaris, plan: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Bring Polaris to the plan; returns the steps taken, for the Job's log."""
    steps = []
    catalog = plan.get("catalog")
    # A team's plan names the catalog the site's plan creates, and adds only its principal.
    name = catalog["name"] if catalog else plan["catalog_name"]
    if catalog:
        polaris.call("POST", f"{MANAGEMENT}/catalogs", {"catalog": catalog}, ok=(409,))
        steps.append(f"catalog {name}")

    for namespace in plan.get("namespaces", []):
        body = {"namespace": namespace["name"], "properties": namespace.get("properties", {})}
        polaris.call("POST", f"/api/catalog/v1/{name}/namespaces", body, ok=(409,))
        steps.append(f"namespace {'.'.join(namespace['name'])}")

    for role, grants in sorted(plan.get("catalog_roles", {}).items()):
        polaris.call("POST", f"{MANAGEMENT}/catalogs/{name}/catalog-roles", {"catalogRole": {"name": role}}, ok=(409,))
        for grant in grants:
            polaris.call("PUT", f"{MANAGEMENT}/catalogs/{name}/catalog-roles/{role}/grants", {"grant": grant})
        steps.append(f"catalog role {role} ({len(grants)} grants)")
    if "maintenance_role" in plan:
        steps.extend(revoke_unlisted(polaris, name, plan["maintenance_role"], plan.get("catalog_roles", {}).get(plan["maintenance_role"], [])))

    for principal in plan["principals"]:
        who, role = principal["name"], principal["principal_role"]
        polaris.call("POST", f"{MANAGEMENT}/principal-roles", {"principalRole": {"name": role}}, ok=(409,))
        for catalog_role in principal["catalog_roles"]:
            polaris.call(
                "PUT",
                f"{MANAGEMENT}/principal-roles/{role}/catalog-roles/{name}",
                {"catalogRole": {"name": catalog_role}},
            )
        _principal(polaris, who, role, principal["credentials_env"], env)
        steps.append(f"principal {who} -> {role} -> {', '.join(principal['catalog_roles'])}")
    return steps


def _principal(polaris: Polaris, who: str, principal_role: str, credentials_env: str, env: dict[str, str]) -> None:
    """The principal `who` with the credentials the Job has in `<credentials_env>_CLIENT_ID`/`_CLIENT_SECRET` (set again
    on every run: the Secret is the truth), holding `principal_role`."""
    polaris.call("POST", f"{MANAGEMENT}/principals",
                 {"principal": {"name": who, "properties": {}}, "credentialRotationRequired": False}, ok=(409,))
    credentials = {"clientId": env[f"{credentials_env}_CLIENT_ID"], "clientSecret": env[f"{credentials_env}_CLIENT_SECRET"]}
    polaris.call("POST", f"{MANAGEMENT}/principals/{who}/reset", credentials)
    polaris.call("PUT", f"{MANAGEMENT}/principals/{who}/principal-roles", {"principalRole": {"name": principal_role}})


def _grants_of(polaris: Polaris, path: str) -> list[dict[str, Any]]:
    """The grants a catalog role holds (listGrantsForCatalogRole)."""
    request = urllib.request.Request(
        f"{polaris.url}{path}", method="GET",
        headers={"Authorization": f"Bearer {polaris.token}", "Polaris-Realm": polaris.realm, "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.load(response)["grants"]


def _key(grant: dict[str, Any]) -> str:
    return json.dumps(grant, sort_keys=True)


def revoke_unlisted(polaris: Polaris, catalog: str, role: str, wanted: list[dict[str, Any]]) -> list[str]:
    """Revoke every grant of the catalog role `role` that `wanted` does not list: the Iceberg maintenance role, so that a
    namespace removed from compute.iceberg_maintenance.targets (or maintenance switched off: nothing wanted) loses its
    grants. A role that was never created (404) holds nothing."""
    path = f"{MANAGEMENT}/catalogs/{catalog}/catalog-roles/{role}/grants"
    try:
        held = {_key(grant): grant for grant in _grants_of(polaris, path)}
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise RuntimeError(f"GET {path}: HTTP {exc.code} {exc.read().decode(errors='replace')[:500]}") from None
    steps = []
    for key in sorted(set(held) - {_key(grant) for grant in wanted}):
        grant = held[key]
        polaris.call("POST", path, {"grant": grant})
        steps.append(f"revoked {grant['privilege']} on {grant['type']} {'.'.join(grant.get('namespace', []))} from {role}")
    return steps


def apply_vendor(polaris: Polaris, plan: dict[str, Any], env: dict[str, str]) -> list[str]:
    """An equipment vendor's principal, holding through its own roles exactly the grants of the plan: a grant the plan no
    longer lists is revoked, so removing a table from `storage.vendors.<name>` takes it away. A table or view that does
    not exist yet (Polaris answers 404) is skipped with a log line naming it, and the rest applied: the Job succeeds, and
    the grant is made when the Job runs again after the object exists (docs/vendor-sharing.md, "Operate")."""
    catalog, vendor = plan["catalog_name"], plan["vendor"]
    who, principal_role, role = vendor["name"], vendor["principal_role"], vendor["catalog_role"]
    grants_path = f"{MANAGEMENT}/catalogs/{catalog}/catalog-roles/{role}/grants"
    polaris.call("POST", f"{MANAGEMENT}/catalogs/{catalog}/catalog-roles", {"catalogRole": {"name": role}}, ok=(409,))
    wanted = {_key(grant): grant for grant in vendor["grants"]}
    held = {_key(grant): grant for grant in _grants_of(polaris, grants_path)}
    steps = []
    for key in sorted(set(held) - set(wanted)):
        polaris.call("POST", grants_path, {"grant": held[key]})
        steps.append(f"revoked {held[key]['privilege']} from {role}")
    missing = 0
    for key in sorted(set(wanted) - set(held)):
        grant = wanted[key]
        if polaris.call("PUT", grants_path, {"grant": grant}, ok=(404,)) == 404:
            missing += 1
            name = grant.get("tableName") or grant.get("viewName")
            steps.append(f"skipped {grant['privilege']} on {grant['type']} {'.'.join(grant['namespace'])}.{name} for {role}: it does "
                         "not exist yet (Polaris answered 404); granted when this Job runs again after it is created")
    steps.append(f"catalog role {role} ({len(wanted) - missing} of {len(wanted)} grants)")
    polaris.call("POST", f"{MANAGEMENT}/principal-roles", {"principalRole": {"name": principal_role}}, ok=(409,))
    polaris.call("PUT", f"{MANAGEMENT}/principal-roles/{principal_role}/catalog-roles/{catalog}", {"catalogRole": {"name": role}})
    _principal(polaris, who, principal_role, vendor["credentials_env"], env)
    steps.append(f"principal {who} -> {principal_role} -> {role}")
    return steps


def main() -> int:
    env = dict(os.environ)
    if "PLAN_JSON" in env:  # a team's plan, given inline
        plan = json.loads(env["PLAN_JSON"])
    else:
        with open(env.get("PLAN", "/etc/polaris-setup/plan.json"), encoding="utf-8") as handle:
            plan = json.load(handle)
    polaris = Polaris(env["POLARIS_URL"], env["POLARIS_REALM"], env["ROOT_CLIENT_ID"], env["ROOT_CLIENT_SECRET"])
    for step in apply_vendor(polaris, plan, env) if "vendor" in plan else apply(polaris, plan, env):
        print(f"ok: {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
