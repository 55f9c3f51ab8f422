"""Argo CD: applies the serving repository to the serving clusters (issue 18; DESIGN section 2, "GitOps-based multiple
clusters").

One Argo CD on the compute cluster manages every serving cluster as a destination (hub and spoke): its UI is behind
compute's ingress like every other UI (outside users never reach a GPU cluster), it reaches the serving clusters' API
servers from compute as the MultiKueue manager already does, and one UI, one sign-in and one set of credentials serve
any number of serving clusters. Sign-in is the site's Keycloak realm only (no Dex, no local admin); Argo CD's own RBAC
denies by default and gives every team read-only access to the serving project and platform admins the right to sync.

With a serving repository (`compute.argocd.serving_repo`) Argo CD gets it as its one declared source (a repository
Secret, the token from the secret config key `servingRepoToken`). While inference.delivery is argocd the serving cluster
is its one destination: a cluster Secret with the token of the account `components.gitops.serving_deployer` made there,
limited to the serving namespace and no cluster-scoped object, an AppProject `serving` that admits exactly that source,
that destination and the serving kinds, and one Application `serving-<cluster>` that keeps `<path>/<cluster>/` applied.

Argo CD is interactive: people wait on its UI and on the rollouts it applies, so it is not queued behind batch work.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.airgap import mirror_repository, named_secrets
from components.config import ArgoCdConfig, Flow, ServingRepoConfig, SiteConfig, names
from components.config.views import argocd_delivers
from components.constants import (
    ARGOCD_CONTROLLER_LABELS,
    ARGOCD_NAMESPACE,
    KUBE_APISERVER_PORT,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
)
from components.engines._base import INTERACTIVE, Engine, EngineChart, EngineScope, Quota, Ui
from components.gitops import OBSERVED_KINDS, SERVING_KINDS, ServingTarget
from components.identity import PLATFORM_ADMINS, team_group_name
from components.placement import Pods
from components.registry import Registry

PART_OF_LABEL = "app.kubernetes.io/part-of"
"""Argo CD resolves a `$<secret>:<key>` reference in its settings only from a Secret carrying this label (value `argocd`)."""
SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"
"""Marks a Secret Argo CD reads as a repository (`repository`) or a destination cluster (`cluster`)."""
PROJECT = "serving"
"""The AppProject of the serving Applications, which the RBAC policy names."""
REPOSITORY_SECRET = "repo-serving"
REDIS_SECRET, REDIS_PASSWORD_KEY = "argocd-redis", "auth"
"""The Secret every Argo CD component reads Redis' password from (the chart's fixed name and key)."""
GROUPS_CLAIM = "groups"
"""The token claim holding the user's Keycloak groups (SiteIdentity's `groups` scope), which Argo CD's RBAC matches."""
VIEWER, SYNCER = "role:serving-viewer", "role:serving-admin"
SYNC_OPTIONS = ("PruneLast=true", "ServerSideApply=true", "ApplyOutOfSyncOnly=true")
"""PruneLast: an object removed from Git (a canary's Deployment and Service) is deleted only after the rest is applied and
healthy, so the route that stops sending it traffic goes first. ServerSideApply: Pulumi's provider applies server-side
too, so at the hand-over from delivery pulumi Argo CD takes over the fields of the objects that exist instead of fighting
a client-side last-applied annotation. ApplyOutOfSyncOnly: only what changed is applied, not every model's objects on
each sync."""


def _resources(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> dict[str, dict[str, str]]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu_limit, "memory": memory_limit}}


def _kinds(kinds: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """Argo CD's resource filter entries: one per API group with its kinds."""
    groups: dict[str, list[str]] = {}
    for group, kind in kinds:
        groups.setdefault(group, []).append(kind)
    return [{"apiGroups": [group], "kinds": kinds_of} for group, kinds_of in groups.items()]


def oidc_config(issuer: str, root_ca: str | None = None) -> str:
    """Argo CD's `oidc.config`: the realm's issuer, the engine's client by reference to its Secret (never the values), and
    the `groups` claim. Keycloak requires PKCE (S256) of every browser client; Argo CD 3 sends it from its server. With the
    site's own CA (`root_ca`, PEM), the server verifies the realm (discovery, keys, tokens) against it (`rootCA`)."""
    secret = f"{ENGINE.name}-oidc"
    return yamltext.dump({
        **({"rootCA": root_ca} if root_ca else {}),
        "name": "Keycloak",
        "issuer": issuer,
        "clientID": f"${secret}:{OIDC_CLIENT_ID}",
        "clientSecret": f"${secret}:{OIDC_CLIENT_SECRET}",
        "enablePKCEAuthentication": True,
        "requestedScopes": ["openid", "profile", "email", GROUPS_CLAIM],
    })


def rbac_policy(teams: list[str]) -> str:
    """Argo CD's `policy.csv`: every team's group reads the serving project's Applications; platform admins also sync them.
    Nothing else is granted to anyone (`policy.default` is empty): no one creates, changes or deletes an Application
    through Argo CD, which only Pulumi declares."""
    lines = [
        f"p, {VIEWER}, applications, get, {PROJECT}/*, allow",
        f"p, {VIEWER}, projects, get, {PROJECT}, allow",
        f"p, {SYNCER}, applications, get, {PROJECT}/*, allow",
        f"p, {SYNCER}, applications, sync, {PROJECT}/*, allow",
        f"p, {SYNCER}, projects, get, {PROJECT}, allow",
        *(f"g, {team_group_name(team)}, {VIEWER}" for team in sorted(teams)),
        f"g, {PLATFORM_ADMINS}, {SYNCER}",
    ]
    return "\n".join(lines) + "\n"


def site_ca_host(host: str, domain: str) -> bool:
    """Whether a host's certificate comes from the site's PKI: a name under the site's domain."""
    return host == domain or host.endswith(f".{domain}")


def chart_values(domain: str, issuer: str, teams: list[str], root_ca: str | None = None,
                 repo_url: str | None = None) -> dict[str, Any]:
    """The chart's values: no credential among them (the OIDC client is a reference to its Secret; repository and cluster
    credentials are Secrets of their own). With the site's own CA (`root_ca`, PEM), the sign-in trusts it, and so does
    the clone of the serving repository (`repo_url`) when the site's PKI issued its server's certificate (a host under
    the site's domain): Argo CD verifies a repository host against the certificates `argocd-tls-certs-cm` holds for it."""
    pool = ENGINE.pool
    host = ENGINE.ui.hostname(domain)
    repo_host = urlsplit(repo_url).hostname if repo_url else None
    certificates = {repo_host: root_ca} if root_ca and repo_host and site_ca_host(repo_host, domain) else {}
    return {
        # The compute cluster is no destination: Argo CD gets Roles in its own namespace only, not the cluster-wide
        # rights an in-cluster install needs, and the in-cluster destination is switched off below.
        "createClusterRoles": False,
        "global": {
            "domain": host,
            # Every Argo CD pod (controller, server, repo server, ApplicationSet and notifications controllers, Redis): the
            # chart's components fall back to these.
            "nodeSelector": pool.node_selector,
            "tolerations": pool.tolerations,
            "priorityClassName": pool.priority_class,
        },
        "configs": {
            "cm": {
                "url": f"https://{host}",
                "admin.enabled": False,
                "oidc.config": oidc_config(issuer, root_ca),
                "cluster.inClusterEnabled": "false",
                # The controller watches only what the serving repository holds and what that makes: the serving account
                # may list nothing else, and every other kind would be a failing watch.
                "resource.inclusions": yamltext.dump(_kinds(SERVING_KINDS + OBSERVED_KINDS)),
                # The inclusions are the whole list; the chart's default exclusions would hide the EndpointSlices.
                "resource.exclusions": "[]",
            },
            # TLS ends at the compute ingress, which sends plain HTTP to the server inside the cluster.
            "params": {"server.insecure": True},
            "rbac": {"policy.default": "", "policy.csv": rbac_policy(teams), "scopes": f"[{GROUPS_CLAIM}]"},
            **({"tls": {"certificates": certificates}} if certificates else {}),
        },
        # Sign-in goes straight to the site's realm.
        "dex": {"enabled": False},
        "controller": {"resources": _resources("250m", "512Mi", "2", "2Gi")},
        "server": {"resources": _resources("100m", "256Mi", "1", "512Mi")},
        # Its init container (copyutil) takes the same.
        "repoServer": {"resources": _resources("100m", "256Mi", "1", "1Gi")},
        "applicationSet": {"resources": _resources("50m", "128Mi", "500m", "256Mi")},
        "notifications": {"resources": _resources("50m", "128Mi", "500m", "256Mi")},
        # One Redis, not the chart's HA set: it is Argo CD's cache (manifests, cluster state), rebuilt from Git and the
        # clusters after a restart; nothing is lost with it, a restart only slows the next refresh.
        "redis": {"resources": _resources("100m", "128Mi", "500m", "512Mi")},
        # The program makes Redis' password (REDIS_SECRET), not the chart's pre-install Job, which would need a Role that
        # creates Secrets in the namespace.
        "redisSecretInit": {"enabled": False},
    }


def repo_path(path: str | None, site: str, cluster: str) -> str:
    """Where a serving cluster's manifests are in the serving repository: `<path>/<cluster>`, `path` defaulting to
    `sites/<site>`."""
    return f"{(path or f'sites/{site}').rstrip('/')}/{cluster}"


def cluster_config(data: dict[str, str]) -> str:
    """The `config` of an Argo CD cluster Secret from a service-account-token Secret's `data` (base64 `token` and
    `ca.crt`): the bearer token and the cluster's CA, verified."""
    return json.dumps({
        "bearerToken": base64.b64decode(data["token"]).decode(),
        "tlsClientConfig": {"insecure": False, "caData": data["ca.crt"]},
    })


def repository_data(repo: ServingRepoConfig, token: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """The repository Secret's data: the serving repository over HTTPS, with its user name and token."""
    return {"type": "git", "url": repo.url, "username": repo.username, "password": token}


def cluster_data(target: ServingTarget) -> dict[str, pulumi.Input[str]]:
    """The cluster Secret's data: the serving cluster's API server, the one namespace Argo CD may change there, no
    cluster-scoped object, and the serving account's credentials (a Pulumi secret throughout)."""
    return {
        "name": target.cluster.name,
        "server": target.api_server,
        "namespaces": target.namespace,
        "clusterResources": "false",
        "config": pulumi.Output.secret(target.token.data).apply(cluster_config),
    }


def _deploy(scope: EngineScope) -> None:
    argocd = ENGINE.config(scope.compute)
    ns = ENGINE.namespace
    ns_resource = scope.namespace(ENGINE)
    oidc = scope.oidc_secret(ENGINE, ns_resource, labels={PART_OF_LABEL: ENGINE.name})
    redis = scope.secret(f"{ENGINE.name}-redis", REDIS_SECRET, ns, {REDIS_PASSWORD_KEY: scope.random(f"{ENGINE.name}-redis-password")},
                         ns_resource)
    teams = sorted(scope.identity.groups)
    values = chart_values(scope.domain, scope.identity.issuer, teams, scope.storage.admin_endpoint.ca_bundle,
                          argocd.serving_repo.url if argocd.serving_repo else None)
    # Redis and the servers read Redis' password when they start; the server resolves the OIDC client's secret from `oidc`.
    release = scope.release(ENGINE.name, versions.ARGO_CD, ns, values, [oidc, redis])
    scope.route(ENGINE, ns_resource)
    repo = argocd.serving_repo
    if repo is None:
        return
    if scope.serving_repo_token is None:
        raise ValueError("EngineScope.serving_repo_token is required with compute.argocd.serving_repo")
    source = scope.secret(f"{ENGINE.name}-{REPOSITORY_SECRET}", REPOSITORY_SECRET, ns, repository_data(repo, scope.serving_repo_token),
                          ns_resource, labels={SECRET_TYPE_LABEL: "repository"})
    if scope.serving is not None:
        _destination(scope, scope.serving, repo, ns_resource, [release, source])


def _destination(scope: EngineScope, target: ServingTarget, repo: ServingRepoConfig, ns_resource: pulumi.Resource,
                 after: list[pulumi.Resource]) -> None:
    """The serving cluster as Argo CD's destination: its cluster Secret, the AppProject and the cluster's Application.
    The custom resources wait for the release, which installs their CRDs, and for the repository Secret."""
    ns, key = ENGINE.namespace, target.cluster.key
    cluster = scope.secret(f"{ENGINE.name}-cluster-{key}", names.SERVING_CLUSTER_SECRET(key), ns, cluster_data(target), ns_resource,
                           labels={SECRET_TYPE_LABEL: "cluster"})
    destination = {"server": target.api_server, "namespace": target.namespace}
    project = k8s.apiextensions.CustomResource(
        f"{scope.prefix}-{ENGINE.name}-project-{PROJECT}",
        api_version=versions.ARGOCD_API,
        kind="AppProject",
        metadata={"name": PROJECT, "namespace": ns},
        spec={
            "description": "The serving objects of every model, from the serving repository (fabctl serving render).",
            "sourceRepos": [repo.url],
            "destinations": [destination],
            "clusterResourceWhitelist": [],
            "namespaceResourceWhitelist": [{"group": group, "kind": kind} for group, kind in SERVING_KINDS],
        },
        opts=scope.after(*after),
    )
    k8s.apiextensions.CustomResource(
        f"{scope.prefix}-{ENGINE.name}-app-{key}",
        api_version=versions.ARGOCD_API,
        kind="Application",
        # No resources finalizer: an Application that leaves the stack leaves the models serving (they are orphaned,
        # not deleted), so switching delivery back to pulumi never drops traffic.
        metadata={"name": names.SERVING_APPLICATION(key), "namespace": ns},
        spec={
            "project": PROJECT,
            "source": {
                "repoURL": repo.url,
                "targetRevision": repo.revision,
                "path": repo_path(repo.path, scope.site, key),
                "directory": {"recurse": True},
            },
            "destination": destination,
            # prune: a model removed from Git stops being served; selfHeal: a hand edit on the cluster is reverted.
            # allowEmpty stays false: a commit that empties the cluster's directory deletes nothing.
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "syncOptions": list(SYNC_OPTIONS)},
        },
        # its AppProject, and the destination's cluster Secret, Argo CD's credentials for the serving cluster
        opts=scope.after(project, cluster, *after),
    )


def _argo_cd_images(registry: Registry) -> dict[str, Any]:
    """Chart 10.1.1: `global.image.repository` is every Argo CD component's (controller, server, repo server and its
    copyutil init container, ApplicationSet, notifications, commit server, the Redis secret init Job); Dex, Redis and
    its exporter, the redis-ha subchart's Redis, exporter and HAProxy, and the server's extension installer have their
    own. `global.imagePullSecrets` reaches every pod."""
    return {
        "global": {"image": {"repository": mirror_repository(registry, "quay.io/argoproj/argocd")},
                   "imagePullSecrets": named_secrets(registry)},
        "dex": {"image": {"repository": mirror_repository(registry, "ghcr.io/dexidp/dex")}},
        "redis": {"image": {"repository": mirror_repository(registry, "ecr-public.aws.com/docker/library/redis")},
                  "exporter": {"image": {"repository": mirror_repository(registry, "ghcr.io/oliver006/redis_exporter")}}},
        "redis-ha": {
            "image": {"repository": mirror_repository(registry, "ecr-public.aws.com/docker/library/redis")},
            "exporter": {"image": mirror_repository(registry, "ghcr.io/oliver006/redis_exporter")},
            "haproxy": {"image": {"repository": mirror_repository(registry, "ecr-public.aws.com/docker/library/haproxy")}},
        },
        "server": {"extensions": {"image": {"repository": mirror_repository(registry, "quay.io/argoprojlabs/argocd-extension-installer")}}},
    }


ENGINE = Engine(
    name=ARGOCD_NAMESPACE,
    description="Argo CD",
    pool=INTERACTIVE,
    quota=Quota(cpu="8", memory="16Gi"),
    ui=Ui(host="argocd", service="argocd-server", port=80, callback="/auth/callback"),
    deploy=_deploy,
    section=ArgoCdConfig,
    # Each Argo CD component reads its own keys, then the global ones (templates: `<component>.x | default global.x`).
    charts=(EngineChart(versions.ARGO_CD, _argo_cd_images, tuple(
        Pods(group, (f"{group}.nodeSelector", "global.nodeSelector"), (f"{group}.tolerations", "global.tolerations"),
             (f"{group}.priorityClassName", "global.priorityClassName"))
        for group in ("controller", "server", "repoServer", "applicationSet", "notifications", "redis")
    )),),
)


# The flows it opens ---------------------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


ARGOCD_FLOW = "argocd"
"""The flow that admits Argo CD's application controller on compute to the serving cluster's API server."""


def argocd_flow(site: SiteConfig) -> Flow:
    """Argo CD's application controller on compute to the serving cluster's API server (hub and spoke: one Argo CD on
    compute, the serving clusters its destinations)."""
    assert site.inference is not None
    serving = site.inference.cluster
    port = site.clusters[serving].api_server_port if serving in site.clusters else KUBE_APISERVER_PORT
    return Flow(
        description="Argo CD on compute applies the serving repository through the serving cluster's API server.",
        sources=site.keys_with_role("compute"), to=[serving], port=port, target="kube-apiserver",
        from_namespace=ARGOCD_NAMESPACE, from_labels=ARGOCD_CONTROLLER_LABELS,
    )


def argocd_flows(site: SiteConfig) -> dict[str, Flow]:
    """Argo CD's flow, while it delivers the serving objects (inference.delivery argocd)."""
    return {ARGOCD_FLOW: argocd_flow(site)} if argocd_delivers(site) else {}
