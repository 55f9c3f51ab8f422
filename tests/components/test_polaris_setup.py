"""The Polaris setup script against a fake Polaris management API on loopback: it converges and is idempotent.

Its input is the setup plan a small site renders into the polaris-setup ConfigMap, as the Job reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_http import serving
from helpers import render_small
from small_site import small_site

from components import polaris_setup

ROOT = ("root-id", "root-secret")


class FakePolaris:
    """Just enough of the management API: creates answer 409 when the thing exists, grants are sets."""

    def __init__(self) -> None:
        self.catalogs: dict[str, dict] = {}
        self.namespaces: set[tuple[str, ...]] = set()
        self.catalog_roles: dict[str, set[str]] = {}
        self.principal_roles: dict[str, set[str]] = {}
        self.principals: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []

    def handle(self, method: str, path: str, body: dict[str, Any], headers: Any) -> tuple[int, dict]:
        self.requests.append((method, path))
        if path == "/api/catalog/v1/oauth/tokens":
            return (200, {"access_token": "token"}) if headers["Authorization"] else (401, {})
        if headers.get("Authorization") != "Bearer token" or headers.get("Polaris-Realm") != "fab":
            return 401, {}
        parts = path.strip("/").split("/")
        if path == "/api/management/v1/catalogs" and method == "POST":
            name = body["catalog"]["name"]
            if name in self.catalogs:
                return 409, {}
            self.catalogs[name] = body["catalog"]
            return 201, {}
        if parts[:3] == ["api", "catalog", "v1"] and parts[-1] == "namespaces":
            key = tuple(body["namespace"])
            if key in self.namespaces:
                return 409, {}
            self.namespaces.add(key)
            return 200, {}
        if parts[-1] == "catalog-roles" and method == "POST":
            role = body["catalogRole"]["name"]
            if role in self.catalog_roles:
                return 409, {}
            self.catalog_roles[role] = set()
            return 201, {}
        if parts[-1] == "grants" and method == "PUT":
            self.catalog_roles[parts[-2]].add(json.dumps(body["grant"], sort_keys=True))
            return 201, {}
        if parts[-1] == "grants" and method == "GET":
            if parts[-2] not in self.catalog_roles:
                return 404, {}
            return 200, {"grants": [json.loads(g) for g in sorted(self.catalog_roles[parts[-2]])]}
        if parts[-1] == "grants" and method == "POST":  # revokeGrantFromCatalogRole
            self.catalog_roles[parts[-2]].discard(json.dumps(body["grant"], sort_keys=True))
            return 201, {}
        if path == "/api/management/v1/principal-roles" and method == "POST":
            role = body["principalRole"]["name"]
            if role in self.principal_roles:
                return 409, {}
            self.principal_roles[role] = set()
            return 201, {}
        if parts[-4] == "principal-roles" and parts[-2] == "catalog-roles" and method == "PUT":
            self.principal_roles[parts[-3]].add(f"{parts[-1]}/{body['catalogRole']['name']}")
            return 201, {}
        if path == "/api/management/v1/principals" and method == "POST":
            name = body["principal"]["name"]
            if name in self.principals:
                return 409, {}
            self.principals[name] = {"roles": set(), "credentials": None}
            return 201, {"credentials": {"clientId": "generated", "clientSecret": "generated"}}
        if parts[-1] == "reset" and method == "POST":
            self.principals[parts[-2]]["credentials"] = (body["clientId"], body["clientSecret"])
            return 200, {}
        if parts[-1] == "principal-roles" and method == "PUT":
            self.principals[parts[-2]]["roles"].add(body["principalRole"]["name"])
            return 201, {}
        return 404, {"path": path}

    def state(self) -> dict[str, Any]:
        return {
            "catalogs": sorted(self.catalogs),
            "namespaces": sorted(self.namespaces),
            "catalog_roles": {k: sorted(v) for k, v in sorted(self.catalog_roles.items())},
            "principal_roles": {k: sorted(v) for k, v in sorted(self.principal_roles.items())},
            "principals": {k: (sorted(v["roles"]), v["credentials"]) for k, v in sorted(self.principals.items())},
        }


@pytest.fixture
def fake_polaris():
    fake = FakePolaris()
    with serving(fake) as url:
        yield fake, url


@pytest.fixture(scope="module")
def rendered_plan() -> dict[str, Any]:
    """The setup plan of a small site with a gold bucket, read by a federated site (site-u)."""
    site = small_site()
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"consumers": {"site-u": {}}, "ranges": {"site-u": ["172.20.0.0/16"]}}
    (config_map,) = [c for c in render_small(site).objects("ConfigMap", "site-t-storage") if c["metadata"]["name"] == "polaris-setup"]
    return json.loads(config_map["data"]["plan.json"])


def desired_plan(rendered_plan: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(rendered_plan))


ROLES = {"spark": "writer", "starrocks": "reader", "trino": "reader", "federation-site-u": "gold-reader"}
"""Each principal's catalog role (docs/architecture.md): Spark writes, the other engines read, federated sites read gold
only. Training teams' and vendors' principals are each created by a Job of their own (below, and
tests/components/test_vendor_sharing.py)."""


def credentials_env() -> dict[str, str]:
    env = {}
    for principal in ROLES:
        prefix = principal.upper().replace("-", "_")
        env[f"{prefix}_CLIENT_ID"], env[f"{prefix}_CLIENT_SECRET"] = f"{principal}-id", f"{principal}-secret"
    return env


def test_setup_creates_the_catalog_roles_and_principals(fake_polaris, rendered_plan):
    fake, url = fake_polaris
    polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), desired_plan(rendered_plan), credentials_env())
    state = fake.state()
    assert state["catalogs"] == ["fab"]
    assert state["namespaces"] == [("gold",)]
    assert state["principal_roles"] == {f"fab-{p}": [f"fab/{role}"] for p, role in sorted(ROLES.items())}
    assert state["principals"] == {f"fab-{p}": ([f"fab-{p}"], (f"{p}-id", f"{p}-secret")) for p in sorted(ROLES)}
    assert {k: len(v) for k, v in state["catalog_roles"].items()} == {"gold-reader": 4, "reader": 5, "writer": 1}


def test_setup_run_twice_changes_nothing(fake_polaris, rendered_plan):
    fake, url = fake_polaris
    plan, env = desired_plan(rendered_plan), credentials_env()
    polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), plan, env)
    first = fake.state()
    steps = polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), plan, env)
    assert fake.state() == first
    assert steps[0] == "catalog fab"


def test_fails_when_polaris_rejects_a_request(fake_polaris, rendered_plan):
    fake, url = fake_polaris
    plan = desired_plan(rendered_plan)
    plan["catalog_roles"] = {"reader": [{"type": "catalog", "privilege": "TABLE_READ_DATA"}]}
    fake.catalog_roles = {}
    polaris = polaris_setup.Polaris(url, "fab", *ROOT)
    polaris.token = "expired"
    with pytest.raises(RuntimeError, match=r"^POST /api/management/v1/catalogs: HTTP 401"):
        polaris_setup.apply(polaris, plan, credentials_env())


def team_job_plan(team: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The plan and credential variables the team's setup Job is given, as a small site renders it."""
    site = small_site(teams=("yield", team))
    (job,) = [j for j in render_small(site).objects("Job", "site-t-storage") if j["metadata"]["name"] == f"polaris-team-{team}"]
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    credentials = {name: f"{team}-{name}" for name in env if name.startswith("TEAM_CLIENT_")}
    return json.loads(env["PLAN_JSON"]["value"]), credentials


def test_a_team_setup_adds_only_the_teams_principal_with_the_reader_role(fake_polaris, rendered_plan):
    fake, url = fake_polaris
    polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), desired_plan(rendered_plan), credentials_env())
    before = fake.state()
    plan, env = team_job_plan("fdc")
    steps = polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), plan, env)
    after = fake.state()
    assert steps == ["principal fab-training-fdc -> fab-training-fdc -> reader"]
    assert after["principals"].pop("fab-training-fdc") == (["fab-training-fdc"], ("fdc-TEAM_CLIENT_ID", "fdc-TEAM_CLIENT_SECRET"))
    assert after["principal_roles"].pop("fab-training-fdc") == ["fab/reader"]
    assert after == before


# ------------------------------------------------------------------------------------------------
# The Iceberg maintenance role: what the targets no longer list is revoked.


def maintained_plan(*namespaces: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The setup plan of a small site maintaining these namespaces (none: maintenance off), and its credential variables."""
    site = small_site()
    if namespaces:
        site["compute"]["iceberg_maintenance"] = {"targets": [{"namespace": ns} for ns in namespaces]}
    (config_map,) = [c for c in render_small(site).objects("ConfigMap", "site-t-storage") if c["metadata"]["name"] == "polaris-setup"]
    plan = json.loads(config_map["data"]["plan.json"])
    env = {f"{p['credentials_env']}_CLIENT_{part}": f"{p['name']}-{part}" for p in plan["principals"] for part in ("ID", "SECRET")}
    return plan, env


def maintenance_namespaces_granted(fake: FakePolaris) -> list[tuple[str, ...]]:
    return sorted({tuple(json.loads(g)["namespace"]) for g in fake.catalog_roles.get("maintenance", set())})


def test_a_namespace_removed_from_the_targets_loses_the_maintenance_grants(fake_polaris):
    fake, url = fake_polaris
    polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), *maintained_plan("fdc", "mes"))
    steps = polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), *maintained_plan("fdc"))
    assert maintenance_namespaces_granted(fake) == [("fdc",)]
    assert "revoked TABLE_ADD_SNAPSHOT on namespace mes from maintenance" in steps


def test_maintenance_switched_off_revokes_every_maintenance_grant(fake_polaris):
    fake, url = fake_polaris
    polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), *maintained_plan("fdc"))
    polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), *maintained_plan())
    assert fake.catalog_roles["maintenance"] == set()


def test_a_site_that_never_maintained_revokes_nothing(fake_polaris):
    fake, url = fake_polaris
    steps = polaris_setup.apply(polaris_setup.Polaris(url, "fab", *ROOT), *maintained_plan())
    assert ("maintenance" in fake.catalog_roles, [s for s in steps if s.startswith("revoked")]) == (False, [])
