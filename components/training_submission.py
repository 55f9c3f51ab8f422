"""How training work is submitted (DESIGN section 2): the kubeconfig of a ServiceAccount that submits (Airflow's on each
GPU cluster, MultiKueue's on each worker), the training-submission contract Airflow's DAGs read, and the example Job
that follows it. TrainingPool (components/training.py) makes the ServiceAccounts and delivers the contract."""

from __future__ import annotations

from typing import Any

from components import yamltext
from components.constants import TRAINING_CHECKPOINT_URI, TRAINING_MODEL_URI, polaris_secret, s3_secret
from components.data_access import TRAINING
from components.gpu import NCCL_CONFIG, TRAINING_PRIORITY
from components.kube import restricted_container, restricted_pod_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL


def kubeconfig(cluster: str, server: str, ca_b64: str, token: str, namespace: str | None) -> str:
    """A kubeconfig for one ServiceAccount token (the shape Kueue's MultiKueue guide generates).

    Without `namespace` its context names none, so a client has to name the namespace of every request.
    """
    context = {"cluster": cluster, "user": cluster}
    if namespace is not None:
        context["namespace"] = namespace
    return yamltext.dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca_b64}}],
            "users": [{"name": cluster, "user": {"token": token}}],
            "contexts": [{"name": cluster, "context": context}],
            "current-context": cluster,
        },
        sort_keys=False,
    )


def airflow_submission(teams: dict[str, tuple[str, str, str | None]]) -> dict[str, Any]:
    """The training-submission contract as Airflow's DAGs read it (ConfigMap `training-submission`): per team (cluster
    name, namespace, Airflow connection or None where Airflow has no submitter), and what a job in a team namespace
    names, as `example_job` does."""
    return {
        "teams": {team: {"cluster": cluster, "namespace": ns, "local_queue": LOCAL_QUEUE, "connection": connection}
                  for team, (cluster, ns, connection) in sorted(teams.items())},
        "job": {
            "queue_label": QUEUE_LABEL,
            "priority_label": PRIORITY_LABEL,
            "workload_priority": DEFAULT_WORKLOAD_PRIORITY,
            "priority_class": TRAINING_PRIORITY,
            "secrets": [s3_secret(TRAINING), polaris_secret(TRAINING)],
            "config_maps": [NCCL_CONFIG],
            "checkpoint_uri_env": TRAINING_CHECKPOINT_URI,
            "model_uri_env": TRAINING_MODEL_URI,
        },
    }


def example_job(catalog_uri: str, warehouse: str) -> dict[str, Any]:
    """A training Job as Airflow submits it: suspended for Kueue, labelled for the LocalQueue, data by reference.

    It names no team: it is created in a team's namespace (`submission`), whose `s3-training` and `polaris-training`
    hold that team's own keys and principal, and its checkpoint prefix (`CHECKPOINT_URI`, the only place it may write).
    """
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": "train-",
            "labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY},
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": TRAINING_PRIORITY,
                    "securityContext": restricted_pod_security_context(),
                    "containers": [
                        restricted_container(
                            "train", "registry.site.fab.internal/ml/train:1.0.0", 1000,
                            args=["--table", "$(ICEBERG_TABLE)", "--snapshot-id", "$(ICEBERG_SNAPSHOT_ID)"],
                            env=[
                                {"name": "ICEBERG_CATALOG_URI", "value": catalog_uri},
                                {"name": "ICEBERG_WAREHOUSE", "value": warehouse},
                                {"name": "ICEBERG_TABLE", "value": "fab.yield.wafer_features"},
                                {"name": "ICEBERG_SNAPSHOT_ID", "value": "4187342123553412345"},
                            ],
                            # The team's S3 and Polaris keys, and the NCCL settings of whichever GPU cluster runs the job.
                            envFrom=[{"secretRef": {"name": s3_secret(TRAINING)}}, {"secretRef": {"name": polaris_secret(TRAINING)}},
                                     {"configMapRef": {"name": NCCL_CONFIG}}],
                            resources={
                                "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "1"},
                                "limits": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "1"},
                            },
                        )
                    ],
                }
            },
        },
    }
