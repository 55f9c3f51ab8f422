"""Trino: interactive SQL on the lakehouse through Polaris, and on federated sites' gold (DESIGN sections 1, 2).

Signs in through Keycloak (OAuth2); Airflow's queries queue behind interactive users' in resource groups;
one Iceberg catalog for this site's Polaris and one per federated peer, each with its own principal, and one JDBC
catalog per external database (supply chain, ERP), its account read from a Secret as env. Trino is
interactive: coordinator and workers run in the interactive pool at its PriorityClass.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.airgap import named_secrets
from components.config import WORLD, BucketAccess, ExternalCatalog, Flow, SiteConfig, TrinoConfig, names
from components.config.schema.storage import GOLD_NAMESPACE
from components.config.views import POLARIS_FLOW, S3_FLOW
from components.constants import (
    POLARIS_CLIENT_ID,
    POLARIS_CLIENT_SECRET,
    POLARIS_URI,
    POLARIS_WAREHOUSE,
    S3_ENDPOINT,
    S3_REGION,
    SITE_CA_DIR,
    SITE_CA_FILE,
    polaris_secret,
    s3_secret,
)
from components.engines._base import INTERACTIVE, Engine, EngineChart, EngineScope, Quota, Ui
from components.identity import PLATFORM_ADMINS
from components.jvm_trust import JVM_TRUST_STORE_KEY, jvm_trust_options, public_and_site_store, trust_store
from components.kube import WORKLOAD_SKIPS, checkov_skips, restricted_container, restricted_pod_security_context
from components.network_policies import OutsideCalls, api_caller_egress, fence_policy
from components.placement import same
from components.providers import NamespaceRef
from components.registry import Registry

if TYPE_CHECKING:
    from components.config import SiteConfig


def trino_catalog(uri: str, prefix: str = "", s3_endpoint_env: str = S3_ENDPOINT) -> str:
    """A Trino Iceberg catalog on a Polaris: REST with OAuth2 client credentials and vended S3 credentials.

    `prefix` selects whose Polaris principal and warehouse: none for this site's, `<PEER>_` for a federated peer's.
    `uri` is this site's catalog URI written out (the policy pack checks it is Polaris's), or for a peer the reference
    to the variable its Secret holds, read from the peer's stack.
    """
    props = {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": uri,
        "iceberg.rest-catalog.warehouse": f"${{ENV:{prefix}{POLARIS_WAREHOUSE}}}",
        "iceberg.rest-catalog.security": "OAUTH2",
        "iceberg.rest-catalog.oauth2.credential": f"${{ENV:{prefix}{POLARIS_CLIENT_ID}}}:${{ENV:{prefix}{POLARIS_CLIENT_SECRET}}}",
        "iceberg.rest-catalog.oauth2.scope": "PRINCIPAL_ROLE:ALL",
        "iceberg.rest-catalog.vended-credentials-enabled": "true",
        "fs.native-s3.enabled": "true",
        "s3.endpoint": f"${{ENV:{s3_endpoint_env}}}",
        "s3.path-style-access": "true",
        "s3.region": f"${{ENV:{S3_REGION}}}",
    }
    return "".join(f"{key}={value}\n" for key, value in props.items())


def external_catalog_env(catalog: str) -> tuple[str, str]:
    """The environment variables of an external catalog's user and password, from its Secret."""
    prefix = f"CATALOG_{catalog.upper()}"
    return f"{prefix}_USER", f"{prefix}_PASSWORD"


def jdbc_url(catalog: ExternalCatalog) -> str:
    """The connector's JDBC URL (Trino's connector docs): the database, or Oracle's service, in the driver's own syntax."""
    host, port, database = catalog.host, catalog.db_port, catalog.database
    return {
        "postgresql": f"jdbc:postgresql://{host}:{port}/{database}",
        "mysql": f"jdbc:mysql://{host}:{port}",
        "oracle": f"jdbc:oracle:thin:@{host}:{port}/{database}",
        "sqlserver": f"jdbc:sqlserver://{host}:{port};databaseName={database}",
    }[catalog.connector]


SITE_CA_CONFIG_MAP = "trino-site-ca"
"""The ConfigMap in Trino's namespace with the site's CA as a Java trust store, while a catalog trusts it."""
SITE_CA_TRUST_STORE = "/etc/fab/site-ca/truststore.p12"
"""Where Trino's pods mount that trust store."""
JVM_TRUST_STORE = f"/etc/fab/site-ca/{JVM_TRUST_STORE_KEY}"
"""Where Trino's pods mount the JVM's default trust store: the public CAs and the site's (components/jvm_trust.py)."""


def jdbc_properties(catalog: ExternalCatalog) -> str:
    """Driver properties appended to the JDBC URL. SQL Server (mssql-jdbc, `encrypt=true` by default) verifies the server's
    certificate; `trust_site_ca` points it at the site's CA: a PKCS#12 trust store without a password, whose integrity the
    driver then does not check (it holds public certificates only)."""
    if catalog.connector != "sqlserver" or not catalog.trust_site_ca:
        return ""
    return f";encrypt=true;trustServerCertificate=false;trustStore={SITE_CA_TRUST_STORE};trustStoreType=PKCS12"


def external_catalog(name: str, catalog: ExternalCatalog) -> str:
    """A Trino catalog on a database outside the site: the account is read from the environment, never written here."""
    user, password = external_catalog_env(name)
    props = {
        "connector.name": catalog.connector,
        "connection-url": jdbc_url(catalog) + jdbc_properties(catalog),
        "connection-user": f"${{ENV:{user}}}",
        "connection-password": f"${{ENV:{password}}}",
    }
    return "".join(f"{key}={value}\n" for key, value in props.items())


def _external_catalogs(scope: EngineScope, ns_resource, values: dict) -> list:
    """One JDBC catalog per external database, its account in a Secret of Trino's namespace that the pods read as env."""
    secrets = []
    for name, catalog in sorted(ENGINE.config(scope.compute).external_catalogs.items()):
        user, password = external_catalog_env(name)
        secret_name = names.external_catalog_secret(name)
        secrets.append(scope.secret(secret_name, secret_name, ENGINE.namespace, {
            user: catalog.user,
            password: pulumi.Output.secret(scope.catalog_passwords[name]),
        }, ns_resource))
        values["catalogs"][name] = external_catalog(name, catalog)
        values["envFrom"].append({"secretRef": {"name": secret_name}})
    return secrets


def _site_ca(scope: EngineScope, ns_resource, values: dict) -> k8s.core.v1.ConfigMap:
    """The site's CA as Java trust stores, mounted on every Trino pod while the site has one.

    `truststore.p12` (the site's CA alone): the catalogs that trust it (`trust_site_ca`) name it, and so does the OAuth2
    sign-in's HTTP client (`oauth2-jwk.http-client.trust-store-path`, airlift's client that Trino binds for OAuth2 and
    resets to the JVM's default trust). `jvm-truststore.p12` (the public CAs and the site's) is the JVM's default trust
    (`javax.net.ssl.trustStore` in the coordinator's and the workers' jvm.config, the chart's `additionalJVMConfig`):
    the Iceberg catalogs' native S3 file system (AWS SDK v2) verifies the site's object store with it, and the JDBC
    catalogs on public-CA databases keep the public CAs."""
    pem = scope.storage.admin_endpoint.ca_bundle
    assert pem is not None
    key = SITE_CA_TRUST_STORE.rsplit("/", 1)[1]
    values["configMounts"] = [
        {"name": "site-ca", "configMap": SITE_CA_CONFIG_MAP, "path": SITE_CA_TRUST_STORE, "subPath": key},
        {"name": "site-ca-jvm", "configMap": SITE_CA_CONFIG_MAP, "path": JVM_TRUST_STORE, "subPath": JVM_TRUST_STORE_KEY},
    ]
    for role in ("coordinator", "worker"):
        values[role]["additionalJVMConfig"] = jvm_trust_options(JVM_TRUST_STORE)
    binary = {key: trust_store(pem), JVM_TRUST_STORE_KEY: public_and_site_store(pem)}
    return k8s.core.v1.ConfigMap(f"{scope.prefix}-{SITE_CA_CONFIG_MAP}",
                                 metadata={"name": SITE_CA_CONFIG_MAP, "namespace": ENGINE.namespace},
                                 # the namespace must exist before anything is created in it
                                 binary_data={k: base64.b64encode(v).decode() for k, v in binary.items()},
                                 opts=scope.after(ns_resource))


def outside_calls(site: SiteConfig) -> OutsideCalls:
    """What Trino's pods call outside the compute cluster besides their external catalogs' databases, which their
    default-deny egress allows (components/network.py): S3 and Polaris on storage (the `s3` and `polaris` flows of the
    table), the site's Keycloak by name (OAuth2 sign-in: discovery, keys, tokens), and the ranges of the federated sites
    whose gold its peer catalogs read."""
    keycloak = urlsplit(site.keycloak.url)
    assert keycloak.hostname is not None
    ranges = site.federation.ranges
    peers = tuple(str(cidr) for peer in sorted(site.federation.peers) for cidr in ranges.get(peer, []))
    return OutsideCalls(flows=(S3_FLOW, POLARIS_FLOW), hosts=((keycloak.hostname, keycloak.port or 443),), peer_ranges=peers)


def trino_resource_groups() -> str:
    """Interactive users ahead of batch: Airflow's queries (source airflow) queue in their own group."""
    return json.dumps(
        {
            "rootGroups": [
                {"name": "interactive", "softMemoryLimit": "60%", "hardConcurrencyLimit": 40, "maxQueued": 200, "schedulingWeight": 3},
                {"name": "batch", "softMemoryLimit": "40%", "hardConcurrencyLimit": 10, "maxQueued": 1000, "schedulingWeight": 1},
            ],
            "selectors": [{"source": "(?i).*airflow.*", "group": "batch"}, {"group": "interactive"}],
        },
        indent=2,
    )


TABLE_PRIVILEGES = ("SELECT", "INSERT", "DELETE", "UPDATE", "OWNERSHIP", "GRANT_SELECT")
"""Every table privilege of Trino's file-based access control: the platform admins'."""
RULES_FILE = "rules.json"
"""The access-control rules' file in the chart's ConfigMap (`accessControl.rules`)."""
GROUPS_SECRET = "trino-groups"
"""The Secret of Trino's file group provider (`group.db`: `group:user,user` per line), kept from Keycloak's groups."""
REFRESH_PERIOD = "60s"
"""How soon Trino reads a changed rules file or group file."""
GROUPS_SYNC = "trino-groups-sync"
"""The CronJob that writes `GROUPS_SECRET` from Keycloak (components/trino_groups_sync.py), its ServiceAccount, Role,
RoleBinding, ConfigMap (the script), Secret (its Keycloak client's credentials), network policy and Keycloak client."""
GROUPS_SYNC_SCHEDULE = "*/5 * * * *"
"""How often the group file is rewritten from Keycloak."""
GROUPS_SYNC_ROLES = ["view-users", "query-groups"]
"""What the sync's Keycloak client may do: read users, groups and their members (roles of `realm-management`), nothing else."""
GROUPS_SYNC_LABELS = {"app.kubernetes.io/name": GROUPS_SYNC}


def _any_of(values: Iterable[str]) -> str:
    """A Java regular expression that matches exactly one of `values` (Trino matches a rule's whole field)."""
    return "|".join(re.escape(value).replace("\\-", "-") for value in sorted(set(values)))


def access_rules(teams: Iterable[str], team_schemas: Mapping[str, Iterable[str]] | None = None,
                 external: Mapping[str, Iterable[str]] | None = None, peers: Mapping[str, Iterable[str]] | None = None) -> dict:
    """Trino's file-based system access control, deny by default (first matching rule of each section wins).

    `platform-admins` may do anything; each team's group (`team-<team>`) reads the lake catalog's (`fab`) schema of its
    own, `gold` and its `team_schemas`; an external catalog (`external`: catalog -> groups) and a peer's gold (`peers`:
    the peer's catalog -> groups) are read by the groups named for it only. Read only: SELECT, no schema owner. Every
    section is written out, since a missing one grants everything (queries: anyone sees and kills any query); functions,
    procedures, impersonation and system information stay unlisted, which Trino denies (`system.builtin` aside)."""
    admins = _any_of([PLATFORM_ADMINS])
    team_groups = {team: names.TEAM_GROUP(team) for team in sorted(set(teams))}
    schemas = {team: [names.team_schema(team), GOLD_NAMESPACE, *(team_schemas or {}).get(team, ())] for team in team_groups}
    granted = [(catalog, _any_of(groups), ".*") for catalog, groups in sorted((external or {}).items()) if groups]
    granted += [(catalog, _any_of(groups), GOLD_NAMESPACE) for catalog, groups in sorted((peers or {}).items()) if groups]
    lake = [{"group": _any_of([team_groups[team]]), "catalog": names.LAKE_CATALOG, "schema": _any_of(schemas[team]), "privileges": ["SELECT"]}
            for team in team_groups]
    return {
        "catalogs": [
            {"group": admins, "allow": "all"},
            *({"group": group, "catalog": _any_of([catalog]), "allow": "read-only"} for catalog, group, _ in granted),
            *([{"group": _any_of(team_groups.values()), "catalog": names.LAKE_CATALOG, "allow": "read-only"}] if team_groups else []),
            {"catalog": "system", "allow": "read-only"},
            {"allow": "none"},
        ],
        "schemas": [{"group": admins, "owner": True}, {"owner": False}],
        "tables": [
            {"group": admins, "privileges": list(TABLE_PRIVILEGES)},
            *({"group": group, "catalog": _any_of([catalog]), "schema": schema, "privileges": ["SELECT"]}
              for catalog, group, schema in granted),
            *lake,
            {"privileges": []},
        ],
        "queries": [{"group": admins, "allow": ["execute", "kill", "view"]}, {"allow": ["execute"]}],
    }


def rule_groups(teams: Iterable[str], external: Mapping[str, Iterable[str]] | None = None,
                peers: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Every group `access_rules` names: the platform admins, each team's, the external catalogs' and the peers' readers;
    the groups the sync writes into the group file, and no other."""
    named = {PLATFORM_ADMINS, *(names.TEAM_GROUP(team) for team in teams)}
    for groups in [*(external or {}).values(), *(peers or {}).values()]:
        named |= set(groups)
    return sorted(named)


def _groups_sync(scope: EngineScope, ns_resource, groups: list[str], secret: k8s.core.v1.Secret) -> None:
    """Keep `GROUPS_SECRET` from Keycloak, with no manual step: every few minutes a CronJob (components/trino_groups_sync.py,
    the pinned Python image) reads the members of exactly the groups the rules name (`groups`) with a Keycloak client that
    may only read users and groups (`GROUPS_SYNC_ROLES` of realm-management), and patches `group.db`: its ServiceAccount may
    get and patch that one Secret (by name), nothing else. Non-root, read-only root file system; it trusts the site's CA
    for the realm where the site has one; its egress adds the API server, cluster DNS and the realm's host to what the
    namespace allows."""
    ns, registry = ENGINE.namespace, scope.cluster.registry
    issuer = scope.identity.issuer
    keycloak_url, realm = issuer.rsplit("/realms/", 1)
    client = scope.identity.oidc_client(GROUPS_SYNC, "service", description="Trino's group sync: reads the members of the groups "
                                        "Trino's rules name")
    roles = scope.identity.realm_management_roles(GROUPS_SYNC, client, GROUPS_SYNC_ROLES)
    credentials = scope.secret(GROUPS_SYNC, GROUPS_SYNC, ns, {"CLIENT_ID": client.client_id, "CLIENT_SECRET": client.client_secret},
                               ns_resource)
    script = Path(__file__).parent.parent.joinpath("trino_groups_sync.py").read_text()
    code = scope.config_map(GROUPS_SYNC, ns, {"trino_groups_sync.py": script}, ns_resource)
    account = k8s.core.v1.ServiceAccount(f"{scope.prefix}-{GROUPS_SYNC}-account", metadata={"name": GROUPS_SYNC, "namespace": ns},
                                         automount_service_account_token=False, opts=scope.after(ns_resource))
    role = k8s.rbac.v1.Role(f"{scope.prefix}-{GROUPS_SYNC}-role", metadata={"name": GROUPS_SYNC, "namespace": ns},
                            rules=[{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [GROUPS_SECRET], "verbs": ["get", "patch"]}],
                            opts=scope.after(ns_resource))
    binding = k8s.rbac.v1.RoleBinding(
        f"{scope.prefix}-{GROUPS_SYNC}-binding", metadata={"name": GROUPS_SYNC, "namespace": ns},
        subjects=[{"kind": "ServiceAccount", "name": GROUPS_SYNC, "namespace": ns}],
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": GROUPS_SYNC},
        # the Role first: binding a Role the API server cannot resolve takes the `bind` verb
        opts=scope.after(role, account))
    host = urlsplit(keycloak_url)
    assert host.hostname is not None
    k8s.apiextensions.CustomResource(
        f"{scope.prefix}-{GROUPS_SYNC}-egress", api_version=versions.CILIUM_API, kind="CiliumNetworkPolicy",
        metadata={"name": GROUPS_SYNC, "namespace": ns},
        spec=api_caller_egress(GROUPS_SYNC_LABELS, ((host.hostname, host.port or 443),)),
        # the namespace, and Cilium's release, which registers the CiliumNetworkPolicy CRD
        opts=scope.after(ns_resource, *([scope.cilium] if scope.cilium else [])))
    ca = scope.storage.site_ca(NamespaceRef(scope.cluster, ns, ns_resource))
    env = [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": "KEYCLOAK_URL", "value": keycloak_url},
           {"name": "REALM", "value": realm}, {"name": "GROUPS", "value": ",".join(groups)},
           {"name": "NAMESPACE", "value": ns}, {"name": "SECRET", "value": GROUPS_SECRET},
           *([{"name": "SITE_CA_FILE", "value": SITE_CA_FILE}] if ca.secret is not None else [])]
    container = restricted_container(
        "sync", registry.image(versions.SETUP_IMAGE), 65532, command=["python", f"/etc/{GROUPS_SYNC}/trino_groups_sync.py"], env=env,
        envFrom=[{"secretRef": {"name": GROUPS_SYNC}}],
        volumeMounts=[{"name": "code", "mountPath": f"/etc/{GROUPS_SYNC}", "readOnly": True}, *ca.mounts(SITE_CA_DIR)])
    digest = hashlib.sha256(script.encode()).hexdigest()[:10]
    k8s.batch.v1.CronJob(
        f"{scope.prefix}-{GROUPS_SYNC}",
        metadata={"name": GROUPS_SYNC, "namespace": ns, "labels": GROUPS_SYNC_LABELS,
                  "annotations": checkov_skips(*WORKLOAD_SKIPS, "CKV_K8S_38")},
        spec={
            "schedule": GROUPS_SYNC_SCHEDULE,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {"backoffLimit": 2, "activeDeadlineSeconds": 240, "template": {
                # a changed script rolls the next run's pod
                "metadata": {"labels": GROUPS_SYNC_LABELS, "annotations": {"fab.internal/script": digest}},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": GROUPS_SYNC,
                    "automountServiceAccountToken": True,
                    "securityContext": restricted_pod_security_context(),
                    **ENGINE.pool.placement(),
                    "containers": [container],
                    "volumes": [{"name": "code", "configMap": {"name": GROUPS_SYNC}}, *ca.volumes()],
                    **registry.pod_fields(),
                }}}},
        },
        # every run reads the script, the client's credentials and the site CA, patches the Secret with its rights, and
        # signs in with a client that holds its roles
        opts=scope.after(code, credentials, secret, binding, *ca.resources(), *roles),
    )


def _access_control(scope: EngineScope, ns_resource, values: dict) -> k8s.core.v1.Secret:
    """The rules (`access_rules`, from the teams, `team_schemas`, the external catalogs' `groups` and the peers'
    `trino_groups`) in the chart's ConfigMap, and the file group provider reading `GROUPS_SECRET`: Trino 480 no longer
    reads groups from the OAuth2 token (`deprecated.http-server.authentication.oauth2.groups-field` was removed), so group
    membership reaches it only through a group provider (the shipped ones: `file` and `ldap`; Keycloak speaks no LDAP).
    The Secret starts empty and is kept from Keycloak's groups by the program's sync CronJob (`_groups_sync`); Pulumi
    leaves its content alone."""
    config = ENGINE.config(scope.compute)
    peers = {}
    if scope.federation is not None:
        peers = {names.peer_trino_catalog(peer): scope.federation.peer_readers(peer) for peer in scope.federation.linked_peers()}
    external = {name: catalog.groups for name, catalog in config.external_catalogs.items()}
    rules = access_rules(scope.identity.groups, config.team_schemas, external, peers)
    values["accessControl"] = {"type": "configmap", "refreshPeriod": REFRESH_PERIOD, "configFile": RULES_FILE,
                               "rules": {RULES_FILE: json.dumps(rules, indent=2)}}
    values["auth"] = {"groupsAuthSecret": GROUPS_SECRET, "refreshPeriod": REFRESH_PERIOD}
    secret = k8s.core.v1.Secret(f"{scope.prefix}-{GROUPS_SECRET}",
                                metadata={"name": GROUPS_SECRET, "namespace": ENGINE.namespace},
                                type="Opaque", string_data={"group.db": ""},
                                # its content is Keycloak's group membership, written there by the sync (`_groups_sync`)
                                opts=pulumi.ResourceOptions.merge(scope.after(ns_resource),
                                                                  pulumi.ResourceOptions(ignore_changes=["data", "stringData"])))
    _groups_sync(scope, ns_resource, rule_groups(scope.identity.groups, external, peers), secret)
    return secret


def _peer_catalogs(scope: EngineScope, ns_resource, values: dict) -> list:
    """One Iceberg catalog per federated peer: its Polaris, with the gold-only principal it created for this site."""
    if scope.federation is None:
        return []
    secrets = []
    for peer in scope.federation.linked_peers():
        prefix = peer.upper().replace("-", "_")
        found = scope.federation.peer_catalog(peer)
        secrets.append(scope.secret(f"trino-peer-{peer}", names.PEER_CATALOG(peer), ENGINE.namespace, {
            f"{prefix}_{POLARIS_URI}": found["uri"],
            f"{prefix}_{POLARIS_WAREHOUSE}": found["warehouse"],
            f"{prefix}_{POLARIS_CLIENT_ID}": found["client_id"],
            f"{prefix}_{POLARIS_CLIENT_SECRET}": found["client_secret"],
            f"{prefix}_S3_ENDPOINT": found["s3_endpoint"],
        }, ns_resource))
        values["catalogs"][names.peer_trino_catalog(peer)] = trino_catalog(f"${{ENV:{prefix}_{POLARIS_URI}}}", prefix=f"{prefix}_",
                                                                   s3_endpoint_env=f"{prefix}_S3_ENDPOINT")
        values["envFrom"].append({"secretRef": {"name": names.PEER_CATALOG(peer)}})
    return secrets


def _deploy(scope: EngineScope) -> None:
    ns = ENGINE.namespace
    ns_resource = scope.namespace(ENGINE)
    oidc = scope.oidc_secret(ENGINE, ns_resource)
    shared = scope.secret("trino-internal", "trino-internal", ns,
                          {"TRINO_SHARED_SECRET": scope.random("trino-shared-secret", 64)}, ns_resource)
    grants = scope.grants(ENGINE, ns_resource)
    values = {
        "server": {
            "workers": ENGINE.config(scope.compute).workers,
            "config": {"authenticationType": "OAUTH2"},
            "coordinatorExtraConfig": "".join(f"{line}\n" for line in (
                "http-server.authentication.oauth2.issuer=${ENV:OIDC_ISSUER}",
                "http-server.authentication.oauth2.client-id=${ENV:OIDC_CLIENT_ID}",
                "http-server.authentication.oauth2.client-secret=${ENV:OIDC_CLIENT_SECRET}",
                "http-server.authentication.oauth2.principal-field=preferred_username",
                "web-ui.authentication.type=oauth2",
                "http-server.process-forwarded=true",
                # Trino's default (true) lets a plain-HTTP request name its user in `X-Trino-User` with no credential:
                # any pod reaching port 8080 would be whoever it names. Only the gateway's forwarded HTTPS signs in.
                "http-server.authentication.allow-insecure-over-http=false",
            )),
        },
        "coordinator": ENGINE.pool.placement(),
        "worker": ENGINE.pool.placement(),
        "additionalConfigProperties": ["internal-communication.shared-secret=${ENV:TRINO_SHARED_SECRET}"],
        "catalogs": {names.LAKE_CATALOG: scope.storage.catalog_uri.apply(trino_catalog)},
        "resourceGroups": {"type": "configmap", "resourceGroupsConfig": trino_resource_groups()},
        "envFrom": [{"secretRef": {"name": name}} for name in ("trino-oidc", "trino-internal", polaris_secret("trino"), s3_secret("trino"))],
    }
    peers = _peer_catalogs(scope, ns_resource, values)
    external = _external_catalogs(scope, ns_resource, values)
    external.append(_access_control(scope, ns_resource, values))
    if scope.storage.admin_endpoint.ca_bundle is not None:
        external.append(_site_ca(scope, ns_resource, values))
        values["server"]["coordinatorExtraConfig"] += f"oauth2-jwk.http-client.trust-store-path={SITE_CA_TRUST_STORE}\n"
    # Its pods read these Secrets as env (envFrom) and mount the site CA's trust store when they start: sign-in, the
    # internal secret, the engine's keys, the peers' and the external catalogs'.
    scope.release("trino", versions.TRINO, ns, values, [oidc, shared, *grants, *peers, *external])
    scope.route(ENGINE, ns_resource)
    fence = worker_fence()
    k8s.apiextensions.CustomResource(
        f"{scope.prefix}-trino-worker-fence", api_version=fence["apiVersion"], kind=fence["kind"],
        metadata=fence["metadata"], spec=fence["spec"],
        # the namespace, and Cilium's release, which registers the CiliumNetworkPolicy CRD
        opts=scope.after(ns_resource, *([scope.cilium] if scope.cilium else [])),
    )


WORKER_FENCE = "trino-workers"
TRINO_POD_LABELS = {"app.kubernetes.io/name": "trino"}
"""What the pinned chart labels the coordinator and the workers with (`trino.selectorLabels`)."""


def worker_fence() -> dict[str, object]:
    """The chart configures authentication on the coordinator only: a worker's HTTP port takes a request as whatever user
    its `X-Trino-User` names, its management API included (`PUT /v1/info/state` shuts the worker down). Only Trino's own
    pods (the coordinator and the other workers, which also authenticate to each other with the shared secret) reach a
    worker; clients reach the coordinator, through the gateway."""
    return fence_policy(WORKER_FENCE, ENGINE.namespace, "Trino's workers: only Trino's own pods reach them.",
                        {**TRINO_POD_LABELS, "app.kubernetes.io/component": "worker"},
                        {ENGINE.namespace: {key: [value] for key, value in TRINO_POD_LABELS.items()}})


def _trino_images(registry: Registry) -> dict[str, Any]:
    """Chart 1.42.2: `image.registry` and `image.repository` (coordinator and workers), the JMX exporter's whole
    reference (off here), `imagePullSecrets`. Its helm-test pods hard-code their images; the program never runs them
    (`helm test`)."""
    trino = registry.ref("trinodb/trino")
    return {
        "image": {"registry": trino.registry, "repository": trino.repository},
        "jmx": {"exporter": {"image": registry.image("bitnamilegacy/jmx-exporter:1.4.0")}},
        "imagePullSecrets": named_secrets(registry),
    }


ENGINE = Engine(
    name="trino",
    description="Trino queries",
    pool=INTERACTIVE,
    quota=Quota(cpu="256", memory="2Ti"),
    buckets=BucketAccess(read=("gold", "warehouse")),
    catalog_role="reader",
    ui=Ui(host="trino", service="trino", port=8080, callback="/oauth2/callback"),
    deploy=_deploy,
    section=TrinoConfig,
    charts=(EngineChart(versions.TRINO, _trino_images, (same("coordinator", "coordinator."), same("worker", "worker."))),),
)


# The flows it opens ---------------------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


TRINO_NAMESPACE = "trino"
"""Compute's Trino namespace (its engine's name, components/engines/trino.py): only Trino's pods run there."""


def external_catalog_flows(site: SiteConfig) -> dict[str, Flow]:
    """Per external catalog of Trino, the egress from Trino's pods on compute to the database's ranges on its port; the
    network denies that address and port to every other pod of compute. None while Trino is off."""
    trino = site.compute.trino
    if not trino.enabled:
        return {}
    return {
        names.external_catalog_flow(name): Flow(
            description=f"Trino's catalog {name} reads the {catalog.connector} database {catalog.host} outside the site.",
            sources=site.keys_with_role("compute"), to=[WORLD], to_cidrs=[str(c) for c in catalog.cidrs],
            port=catalog.db_port, target=WORLD, from_namespace=TRINO_NAMESPACE,
        )
        for name, catalog in sorted(trino.external_catalogs.items())
    }
