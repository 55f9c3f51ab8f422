"""SiteIdentity: team groups, the groups scope, the realm, and OIDC clients that are confidential and exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.identity import check_redirect_uris
from fabctl.render import render_config
from fabctl.stackfile import SITE_KEY
from helpers import render_small
from small_site import small_site

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "oidc_clients"


@pytest.fixture(scope="module")
def clients_plan():
    return render_config("site-t", {SITE_KEY: small_site()}, project_dir=PROGRAM)


def clients(plan) -> dict[str, dict]:
    return {r["inputs"]["clientId"]: r for r in plan.of_type("keycloak:openid/client:Client")}


def test_every_team_gets_a_group(full_plan):
    groups = sorted(r["inputs"]["name"] for r in full_plan.of_type("keycloak:index/group:Group"))
    assert groups == ["platform-users", "team-fdc", "team-yield"]


def test_groups_claim_comes_from_one_client_scope(small_plan):
    (scope,) = small_plan.of_type("keycloak:openid/clientScope:ClientScope")
    (mapper,) = small_plan.of_type("keycloak:openid/groupMembershipProtocolMapper:GroupMembershipProtocolMapper")
    assert (scope["inputs"]["name"], mapper["inputs"]["claimName"], mapper["inputs"]["fullPath"]) == ("groups", "groups", False)


def test_an_existing_realm_is_referenced_not_created(small_plan):
    assert small_plan.of_type("keycloak:index/realm:Realm") == []
    assert {r["inputs"]["realmId"] for r in small_plan.of_type("keycloak:index/group:Group")} == {"fab"}


def test_a_created_realm_is_protected_and_kept():
    raw = small_site()
    raw["identity"] = {"realm": "fab-t", "create_realm": True}
    (realm,) = render_small(raw).of_type("keycloak:index/realm:Realm")
    assert (realm["inputs"]["realm"], realm["protect"], realm["retain_on_delete"]) == ("fab-t", True, True)


def test_identity_lives_in_keycloak(small_plan):
    targets = {small_plan.target(r) for r in small_plan.resources if r["type"].startswith("keycloak:")}
    assert targets == {"site-t-keycloak"}


def test_a_browser_client_is_confidential_with_pkce_and_exact_redirects(clients_plan):
    client = clients(clients_plan)["superset"]["inputs"]
    assert (client["accessType"], client["standardFlowEnabled"], client["pkceCodeChallengeMethod"]) == ("CONFIDENTIAL", True, "S256")
    assert client["validRedirectUris"] == ["https://superset.site-t.fab.internal/oauth-authorized/keycloak"]
    assert (client["implicitFlowEnabled"], client["directAccessGrantsEnabled"], client["serviceAccountsEnabled"]) == (False, False, False)


def test_a_service_client_uses_client_credentials_only(clients_plan):
    client = clients(clients_plan)["airflow-gpu-submitter"]["inputs"]
    assert (client["accessType"], client["serviceAccountsEnabled"], client["standardFlowEnabled"]) == ("CONFIDENTIAL", True, False)
    assert "validRedirectUris" not in client


def test_client_secrets_are_secret_outputs(clients_plan):
    assert sorted(clients(clients_plan)) == ["airflow-gpu-submitter", "superset"]
    assert all("clientSecret" in r["additional_secret_outputs"] or "client_secret" in r["additional_secret_outputs"]
               for r in clients(clients_plan).values())
    assert clients_plan.outputs["secret"] == "[secret]"


def test_clients_get_the_groups_scope(clients_plan):
    scopes = [r["inputs"]["defaultScopes"] for r in clients_plan.of_type("keycloak:openid/clientDefaultScopes:ClientDefaultScopes")]
    assert scopes and all("groups" in s for s in scopes)


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("https://superset.example/*", "wildcard"),
        ("http://superset.example/callback", "plain http"),
        ("https://superset.example/cb#frag", "fragment"),
    ],
)
def test_fails_when_a_redirect_uri_is_not_exact_https(uri, problem):
    with pytest.raises(ValueError) as info:
        check_redirect_uris("superset", [uri])
    assert str(info.value) == (
        f"OIDC client 'superset': redirect URI {uri!r} must be an exact https URL without wildcards or fragments"
    ), problem


def test_fails_when_a_browser_client_has_no_redirect_uri():
    with pytest.raises(ValueError, match="^OIDC client 'jupyterhub': a browser client needs at least one exact redirect URI$"):
        check_redirect_uris("jupyterhub", [])
