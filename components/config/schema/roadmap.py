"""Phased adoption: the roadmap's phases and the features each one brings (docs/roadmap.md).

The design introduces the GPU platform in five phases and warns against turning on MultiKueue, S3 over RDMA and
the rest all at once. A site states the phase it is in (`phase`); a feature of a later phase is refused unless the
site names it in `early_features`. What each feature is enabled by is checked in components/config/checks/phases.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

PHASES: dict[int, str] = {
    1: "GPU base",
    2: "inference",
    3: "training pipeline",
    4: "operations",
    5: "scale-out",
}
"""The roadmap's phases, in order, by number (01-05 in docs/roadmap.md)."""

Phase = Annotated[int, Field(ge=1, le=len(PHASES), strict=True)]


@dataclass(frozen=True)
class Feature:
    """A capability the roadmap introduces in a given phase."""

    phase: int
    what: str
    """What it is, as an error line names it."""


FEATURES: dict[str, Feature] = {
    "inference": Feature(2, "online inference (the `inference` section: vLLM behind the gateway)"),
    "training-quotas": Feature(3, "teams' GPU training quotas"),
    "gitops-serving": Feature(3, "serving through Git (Argo CD on compute applying the serving repository)"),
    "training-runtimes": Feature(3, "training runtimes (Kubeflow Trainer's TrainJob and JobSet through Kueue)"),
    "batch-inference": Feature(3, "offline batch inference (vLLM batch Jobs queued by Kueue)"),
    "ray": Feature(3, "Ray on the GPU clusters (KubeRay, RayJobs through Kueue, Jupyter to Ray)"),
    "profiles": Feature(4, "fleet profiles (the day/night switch)"),
    "gpu-notebooks": Feature(4, "GPU notebooks (a JupyterHub on a GPU cluster, its notebooks on shared GPUs)"),
    "multikueue": Feature(5, "MultiKueue dispatch"),
    "more-gpu-clusters": Feature(5, "a second GPU cluster"),
    "remote-training": Feature(5, "GPU training across sites"),
    "gold-replication": Feature(5, "gold replication between sites (this site's gold buckets copied to its consumers)"),
    "storage-over-ib": Feature(5, "storage traffic over InfiniBand"),
    "spark-rapids": Feature(5, "Spark RAPIDS on a GPU cluster"),
    "inference-extension": Feature(5, "model-aware routing (an InferencePool and its endpoint picker per model)"),
    "global-services": Feature(5, "ClusterMesh global services (Polaris and the inference gateway under cluster-local names)"),
}
"""Every feature the phases gate, by the id `early_features` names it with."""

FeatureId = Literal[tuple(FEATURES)]  # type: ignore[valid-type]


def phase_name(phase: int) -> str:
    """`phase 05 (scale-out)`: how errors and docs name a phase."""
    return f"phase {phase:02d} ({PHASES[phase]})"


def switched_on(feature: str, value: bool | None, phase: int) -> bool:
    """A roadmap feature's switch (a `Flag | None` field): as set, or when unset, on from the feature's phase.

    An explicit `true` ahead of the phase is refused by components/config/checks/phases.py unless `early_features`
    names the feature (its USES entry yields the key only when it is set true); `false` turns it off in any phase.
    """
    return value if value is not None else phase >= FEATURES[feature].phase
