"""What the criteria of every phase share: the `Site` as they read it, and the building blocks of their objects (names,
labels, ServiceAccounts and their grants, probe and kubectl Jobs, a team's queued probe) and of their verdicts
(`_figure`, `_ran`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components import versions
from components.config import SiteConfig, names
from components.constants import s3_secret
from components.data_access import TRAINING
from components.gpu import POOL_LABEL, toleration
from components.kube import restricted_container, restricted_pod_security_context
from components.registry import Registry
from components.serving import route_prefix
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, team_namespace
from fabctl.verify.model import Manifest, Step

VERIFY_LABEL = "fab.internal/verify"
"""On every object of a criterion: its id (what the runner deletes, and what an operator finds left over)."""
PROBE_SCRIPT = Path(__file__).parents[1] / "probe.py"
PROBE_DIR = "/probe"
PROBE_USER = 65532
"""The probes' user: any non-root id works, the probe writes nothing but its scratch directory."""
PROBE_TIMEOUT_SEC = 5
"""How long a TCP probe waits for a handshake: a flow's rule answers at once, a dropped packet never."""
KUBECTL_USER = 65532


class Site:
    """The site as the builders read it: the config, and what every check derives from it the same way."""

    def __init__(self, config: SiteConfig):
        self.config = config
        self.acceptance = config.acceptance
        self.namespace = config.acceptance.namespace
        self.ca = config.ca_bundle_pem()
        self.registry = Registry.of(config.registry)
        """Where the jobs' pods pull their images from (the site registry, if the site has one) and the pull Secret they
        name: the team namespaces hold it (the program puts it there), the runner copies it into the others."""

    def team(self) -> str:
        return self.acceptance.team or min(self.config.teams)

    def other_team(self) -> str | None:
        others = [t for t in sorted(self.config.teams) if t != self.team()]
        return others[0] if others else None

    def gpu_clusters(self) -> list[str]:
        return sorted(k for k in self.config.keys_with_role("gpu", "gpu-train") if k in self.config.gpu)

    def compute(self) -> str:
        return self.config.keys_with_role("compute")[0]

    def submission_cluster(self) -> str:
        """The cluster a team submits its Jobs to (components/training.py): the MultiKueue manager, else the GPU cluster
        that serves, else the first gpu cluster."""
        config = self.config
        if config.training.multikueue.enabled:
            return config.multikueue_manager()
        if config.inference is not None:
            return config.inference.cluster
        return min(config.keys_with_role("gpu"))

    def bucket(self, data_class: str) -> str:
        return next(name for name, b in sorted(self.config.storage.buckets.items()) if b.data_class == data_class)

    def gateway_url(self, model: str) -> str:
        inference = self.config.inference
        assert inference is not None
        host = inference.gateway.hostname or names.GATEWAY_HOST(self.config.domain)
        return f"https://{host}{route_prefix(model)}"

    def token_url(self) -> str:
        return f"{self.config.keycloak.url.rstrip('/')}/realms/{self.config.identity.realm}/protocol/openid-connect/token"


# --- building blocks -----------------------------------------------------------------------------------------------

def _dns(*parts: str) -> str:
    """A name of at most 63 characters: the parts joined, or their start and a hash of the whole when longer."""
    name = "-".join(parts)
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{digest}"


def _meta(name: str, namespace: str | None, cid: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {VERIFY_LABEL: _dns(cid)}, **extra}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _account(site: Site, account: str, cid: str, grants: list[tuple[str | None, list[dict[str, Any]]]]) -> list[Manifest]:
    """A ServiceAccount of the acceptance namespace and, per (namespace, rules) grant, a Role and its RoleBinding there (a
    ClusterRole and ClusterRoleBinding where the namespace is None): the narrowest rights a check needs, deleted with it."""
    objects: list[Manifest] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(account, site.namespace, cid)}]
    role = _dns(account)
    for namespace, rules in grants:
        kind = "Role" if namespace is not None else "ClusterRole"
        objects += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(role, namespace, cid), "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": _meta(role, namespace, cid),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
             "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": site.namespace}]},
        ]
    return objects


def _probe_config(site: Site, name: str, namespace: str, cid: str) -> Manifest:
    """The probe script (and the site's CA bundle, where it has one) for the pods of one step."""
    data = {"probe.py": PROBE_SCRIPT.read_text()}
    if site.ca:
        data["ca.crt"] = site.ca
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace, cid), "data": data}


def _scratch(*mounts: tuple[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """emptyDir volumes and their mounts, (name, path) each: the only writable places of a read-only root."""
    return ([{"name": n, "emptyDir": {"sizeLimit": "1Gi"}} for n, _ in mounts],
            [{"name": n, "mountPath": p} for n, p in mounts])


def _job(name: str, namespace: str, cid: str, pod: dict[str, Any], timeout_sec: int, labels: dict[str, str] | None = None,
         suspend: bool = False) -> Manifest:
    """A Job that runs once (no retry: a failed probe is a result) and is stopped at the step's timeout."""
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": timeout_sec,
        "template": {"metadata": {"labels": {VERIFY_LABEL: _dns(cid)}}, "spec": {"restartPolicy": "Never", **pod}},
    }
    if suspend:
        spec["suspend"] = True
    meta = _meta(name, namespace, cid)
    meta["labels"].update(labels or {})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _probe_pod(site: Site, config_map: str, args: list[str], env: list[dict[str, Any]] | None = None,
               env_from: list[dict[str, Any]] | None = None, **placement: Any) -> dict[str, Any]:
    """A restricted pod running one probe command with the Python image, without an API token."""
    volumes, mounts = _scratch(("tmp", "/tmp"))
    container_env = [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, *(env or [])]
    if site.ca:
        container_env.append({"name": "FAB_CA_FILE", "value": f"{PROBE_DIR}/ca.crt"})
    container = restricted_container(
        "probe", site.registry.image(versions.VERIFY_PROBE_IMAGE), PROBE_USER, command=["python", f"{PROBE_DIR}/probe.py"],
        args=args,
        env=container_env, volumeMounts=[*mounts, {"name": "probe", "mountPath": PROBE_DIR, "readOnly": True}],
        **({"envFrom": env_from} if env_from else {}),
    )
    return {
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_security_context(),
        **site.registry.pod_fields(),
        "containers": [container],
        "volumes": [*volumes, {"name": "probe", "configMap": {"name": config_map}}],
        **placement,
    }


def _probe_step(site: Site, cluster: str, cid: str, name: str, args: list[str], namespace: str | None = None,
                timeout_sec: int | None = None, queued: bool = False, **pod: Any) -> Step:
    """One probe Job and its ConfigMap on `cluster`, in the acceptance namespace unless told otherwise; `queued`, submitted
    as a team's job is (`_queued`)."""
    namespace = namespace or site.namespace
    config_map = _dns(name, "probe")
    timeout = timeout_sec or site.acceptance.timeout_sec
    job = _job(name, namespace, cid, _probe_pod(site, config_map, args, **pod), timeout, **(_queued() if queued else {}))
    return Step(cluster, (_probe_config(site, config_map, namespace, cid), job), ("Job", name), timeout)


def _queued() -> dict[str, Any]:
    """What a Job in a team namespace carries (components/training_submission.py example_job): Kueue manages every job there
    (manageJobsWithoutQueueName) and admits it against the team's quota onto the training pool, the only GPU pool the
    ValidatingAdmissionPolicy fab-team-workloads lets a team's pods tolerate."""
    return {"labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}, "suspend": True}


def _team_probe_step(site: Site, cluster: str, cid: str, name: str, args: list[str], team: str) -> Step:
    """A probe with the team's S3 keys, in the team's namespace (only it holds them), as the team's own job: on the
    training pool, through the team's LocalQueue."""
    return _probe_step(site, cluster, cid, name, args, namespace=team_namespace(team), env_from=_team_s3_env(), queued=True,
                       **_training_placement())


def _no_training_nodes(site: Site, cluster: str, cid: str) -> tuple[str, str] | None:
    """Why a team probe cannot run on `cluster` (no training node under the active profile), or None."""
    if site.config.pool_nodes(cluster, "training"):
        return None
    return (cid, f"{cluster} has no training node under the active profile: a probe with a team's keys runs as the team's "
                 "job, which Kueue places on the training pool only")


def _team_s3_env() -> list[dict[str, Any]]:
    """The team's S3 keys, endpoint and region: its `s3-training` Secret, which only its namespaces hold."""
    return [{"secretRef": {"name": s3_secret(TRAINING)}}]


def _training_placement(pool: str = "training") -> dict[str, Any]:
    """A pod on the GPU nodes of `pool` (their label and taint), without GPUs of its own."""
    return {"nodeSelector": {POOL_LABEL: pool}, "tolerations": [toleration(pool)]}


def _figure(results: Mapping[str, str], key: str) -> float | None:
    try:
        return float(results[key])
    except (KeyError, ValueError):
        return None


def _ran(results: Mapping[str, str], step: int, what: str) -> str:
    """Why a step has no figures: it did not finish, or finished without reporting."""
    if results.get(f"{step}.succeeded") == "false":
        return f"{what} did not finish (its job failed or timed out)"
    return f"{what} reported no result"


def _kubectl_pod(site: Site, account: str, script: str) -> dict[str, Any]:
    """A restricted pod running a bash script with kubectl as `account` (its token is the only one it needs)."""
    volumes, mounts = _scratch(("tmp", "/tmp"), ("kube", "/home/kubectl"))
    container = restricted_container("kubectl", site.registry.image(versions.KUBECTL_IMAGE), KUBECTL_USER,
                                     command=["/bin/bash", "-c"], args=[script], env=[{"name": "HOME", "value": "/home/kubectl"}],
                                     volumeMounts=mounts)
    return {"serviceAccountName": account, "automountServiceAccountToken": True,
            "securityContext": restricted_pod_security_context(), **site.registry.pod_fields(), "containers": [container],
            "volumes": volumes}


def _first_model(site: Site) -> str:
    assert site.config.inference is not None
    return min(site.config.inference.models)


# --- the gateway, as a team calls it ---------------------------------------------------------------------------------

GATEWAY_CLIENT_SECRET_KEY = "client_secret"


def gateway_client_secret(team: str) -> str:
    """The Secret, in the acceptance namespace on compute, that holds the team's gateway client secret for the check."""
    return names.TEAM_GATEWAY_CLIENT(team)


def _needs_client(site: Site, team: str) -> str:
    return (f"the Secret {gateway_client_secret(team)} in {site.namespace} on {site.compute()} with key "
            f"{GATEWAY_CLIENT_SECRET_KEY}: client {names.TEAM_GATEWAY_CLIENT(team)}'s secret from Keycloak (realm "
            f"{site.config.identity.realm}), which the program never copies out of Keycloak")


def _client_env(site: Site, team: str) -> list[dict[str, Any]]:
    return [
        {"name": "TOKEN_URL", "value": site.token_url()},
        {"name": "CLIENT_ID", "value": names.TEAM_GATEWAY_CLIENT(team)},
        {"name": "CLIENT_SECRET", "valueFrom": {"secretKeyRef": {"name": gateway_client_secret(team), "key": GATEWAY_CLIENT_SECRET_KEY}}},
    ]


def served_name(site: Site, model: str) -> str:
    assert site.config.inference is not None
    return site.config.inference.models[model].served_name or model


def _team_s3_keys_and_ca(site: Site, cid: str, namespace: str, config_map: str, key_env: dict[str, str]
                         ) -> tuple[list[Manifest], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """What a warp pod of a team needs: the team's `s3-training` keys as environment variables (`key_env`: the variable's
    name -> the Secret's key) and, where the site has a CA, a ConfigMap `config_map` holding it, mounted and named in
    SSL_CERT_FILE. The (objects, volumes, mounts, env) to add to the step and the pod; the volumes start with /tmp."""
    volumes, mounts = _scratch(("tmp", "/tmp"))
    env = [{"name": name, "valueFrom": {"secretKeyRef": {"name": s3_secret(TRAINING), "key": key}}} for name, key in key_env.items()]
    objects: list[Manifest] = []
    if site.ca:
        objects.append(_probe_config(site, config_map, namespace, cid))
        volumes.append({"name": "ca", "configMap": {"name": config_map, "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        mounts.append({"name": "ca", "mountPath": "/etc/fab-ca", "readOnly": True})
        env.append({"name": "SSL_CERT_FILE", "value": "/etc/fab-ca/ca.crt"})
    return objects, volumes, mounts, env
