"""Phased adoption: no feature of a later roadmap phase unless the site names it in `early_features` (DESIGN: "do
not introduce MultiKueue, Spark RAPIDS, S3 over RDMA and complex LLM routing all at once"; docs/roadmap.md).

Each feature of components/config/schema/roadmap.py is found by where the site enables it; the first such key is
reported, once per feature. These checks run last, on a site that is otherwise sound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from components.config.fields import GPU_ROLES
from components.config.problems import Problem
from components.config.schema.roadmap import FEATURES, phase_name

if TYPE_CHECKING:
    from components.config.views import SiteViews

Use = tuple[tuple[str | int, ...], str]
"""Where a site enables a feature (key path) and what that key says (value and effect)."""


def _inference(site: SiteViews) -> Iterator[Use]:
    if site.inference is not None:
        yield ("inference",), f"serves {', '.join(sorted(site.inference.models))}"


def _training_quotas(site: SiteViews) -> Iterator[Use]:
    for team, clusters in sorted(site.training.quotas.items()):
        yield ("training", "quotas", team), f"gives {team} GPU quota on {', '.join(sorted(clusters))}"
    for name, profile in sorted(site.profiles.items()):
        for team, clusters in sorted(profile.quotas.items()):
            yield ("profiles", name, "quotas", team), f"gives {team} GPU quota on {', '.join(sorted(clusters))}"


def _gitops_serving(site: SiteViews) -> Iterator[Use]:
    if site.compute.argocd.enabled:
        yield ("compute", "argocd", "enabled"), "true runs Argo CD on compute"
    if site.inference is not None and site.inference.delivery == "argocd":
        yield ("inference", "delivery"), "'argocd' serves the models from the serving repository"


def _training_runtimes(site: SiteViews) -> Iterator[Use]:
    if site.training.runtimes:
        yield ("training", "runtimes"), "true installs Kubeflow Trainer and JobSet on the GPU clusters"


def _profiles(site: SiteViews) -> Iterator[Use]:
    if site.profiles:
        yield ("profiles",), f"defines {', '.join(sorted(site.profiles))}"
    if site.active_profile is not None:
        yield ("active_profile",), f"{site.active_profile!r} is a profile"
    if site.profile_schedule is not None:
        yield ("profile_schedule",), f"switches {', '.join(sorted(site.profile_schedule.switches))} on a schedule"


def _gpu_notebooks(site: SiteViews) -> Iterator[Use]:
    notebooks = site.compute.jupyterhub.gpu_notebooks
    if notebooks is not None:
        yield ("compute", "jupyterhub", "gpu_notebooks"), f"runs GPU notebooks on {notebooks.cluster}"
    for key, spec in sorted(site.gpu.items()):
        for node_name, node in sorted(spec.nodes.items()):
            if node.pool == "notebooks":
                yield ("gpu", key, "nodes", node_name, "pool"), f"'notebooks' shares {node_name}'s GPUs among notebooks"


def _multikueue(site: SiteViews) -> Iterator[Use]:
    if site.training.multikueue.enabled:
        yield ("training", "multikueue", "enabled"), "true makes compute a MultiKueue manager"


def _first_gpu_cluster(site: SiteViews) -> str | None:
    """The GPU cluster a site starts with: the one that serves inference, else its first gpu cluster."""
    if site.inference is not None and site.inference.cluster in site.clusters:
        return site.inference.cluster
    return next(iter(site.keys_with_role("gpu")), None)


def _more_gpu_clusters(site: SiteViews) -> Iterator[Use]:
    first = _first_gpu_cluster(site)
    for key in site.keys_with_role(*GPU_ROLES):
        if key != first:
            yield ("clusters", key, "role"), f"{site.clusters[key].role!r} adds GPU cluster {key} to {first or 'none'}"


def _remote_training(site: SiteViews) -> Iterator[Use]:
    for name, consumer in sorted(site.federation.consumers.items()):
        if consumer.remote_training_teams:
            yield (("federation", "consumers", name, "remote_training_teams"),
                   f"lets {', '.join(consumer.remote_training_teams)} train on {name}'s GPUs")
    for name, peer in sorted(site.federation.peers.items()):
        if peer.remote_training:
            yield (("federation", "peers", name, "remote_training"),
                   f"gives {name}'s {', '.join(sorted(peer.remote_training))} GPU quota here")


def _gold_replication(site: SiteViews) -> Iterator[Use]:
    for name, consumer in sorted(site.federation.consumers.items()):
        if consumer.replicate_gold:
            yield ("federation", "consumers", name, "replicate_gold"), f"true copies this site's gold buckets to {name}"


def _storage_over_ib(site: SiteViews) -> Iterator[Use]:
    serving = site.inference.cluster if site.inference is not None else None
    for key, spec in sorted(site.gpu.items()):
        ib = spec.infiniband
        # Its partition, service level and the object store's IPoIB address come with it (they are refused without it).
        if ib.inference_weights_over_ib and key == serving:
            yield ("gpu", key, "infiniband", "inference_weights_over_ib"), "true loads model weights over InfiniBand"


def _spark_rapids(site: SiteViews) -> Iterator[Use]:
    for key, spec in sorted(site.gpu.items()):
        if spec.spark_rapids is not None:
            yield ("gpu", key, "spark_rapids"), f"runs Spark RAPIDS on {key}"


def _inference_extension(site: SiteViews) -> Iterator[Use]:
    if site.inference is not None and site.inference.routing == "inference-extension":
        yield ("inference", "routing"), "'inference-extension' routes each model's requests through its endpoint picker"


def _batch_inference(site: SiteViews) -> Iterator[Use]:
    if site.inference is not None and site.inference.batch:
        yield ("inference", "batch"), "true gives every team a vLLM batch Job template"


def _ray(site: SiteViews) -> Iterator[Use]:
    if site.training.ray:
        yield ("training", "ray"), "true runs KubeRay on the GPU clusters"


def _global_services(site: SiteViews) -> Iterator[Use]:
    if site.global_services:
        yield ("global_services",), "true announces Polaris and the inference gateway as ClusterMesh global services"


USES: dict[str, Callable[[SiteViews], Iterator[Use]]] = {
    "inference": _inference,
    "training-quotas": _training_quotas,
    "gitops-serving": _gitops_serving,
    "training-runtimes": _training_runtimes,
    "profiles": _profiles,
    "gpu-notebooks": _gpu_notebooks,
    "multikueue": _multikueue,
    "more-gpu-clusters": _more_gpu_clusters,
    "remote-training": _remote_training,
    "gold-replication": _gold_replication,
    "storage-over-ib": _storage_over_ib,
    "spark-rapids": _spark_rapids,
    "batch-inference": _batch_inference,
    "ray": _ray,
    "inference-extension": _inference_extension,
    "global-services": _global_services,
}
"""Where each feature of the roadmap is enabled, by feature id (every id of FEATURES)."""


def feature_uses(site: SiteViews) -> dict[str, list[Use]]:
    """Every feature the site enables, with the keys that enable it."""
    return {feature: uses for feature, find in USES.items() if (uses := list(find(site)))}


def phase_problems(site: SiteViews) -> Iterator[Problem]:
    phase, early = site.phase, site.early_features
    used = feature_uses(site)
    for feature, uses in used.items():
        spec = FEATURES[feature]
        if spec.phase <= phase or feature in early:
            continue
        path, says = uses[0]
        done = f"phase {phase:02d} is" if spec.phase == phase + 1 else f"phases {phase:02d}-{spec.phase - 1:02d} are"
        yield path, (
            f"{says}: {spec.what} comes in {phase_name(spec.phase)} and the site is at phase {phase}; do without it "
            f"until {done} done and phase is {spec.phase} (docs/roadmap.md), or list {feature} in early_features"
        )
    for i, feature in enumerate(early):
        spec = FEATURES[feature]
        if spec.phase <= phase:
            yield ("early_features", i), f"{feature!r} is a {phase_name(spec.phase)} feature, which phase {phase} includes: remove it"
        elif feature not in used:
            yield ("early_features", i), f"{feature!r} is enabled nowhere in this site: remove it"

