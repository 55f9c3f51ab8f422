"""What fabctl needs to read kube-prometheus-stack: its CRDs list `=` unquoted, its CRDs live in a subchart named crds,
and its admission hook Job writes the webhook certificate Secret the operator mounts."""

from __future__ import annotations

import yaml

from fabctl.check.placed import Placed
from fabctl.check.runtime import _job_secrets
from fabctl.helm import _in_crds_folder, _Loader


def certgen_job(*args: str, image: str = "ghcr.io/jkroepke/kube-webhook-certgen:1.8.7") -> Placed:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "metrics-admission-create", "namespace": "monitoring"},
           "spec": {"template": {"spec": {"containers": [{"name": "create", "image": image, "args": list(args)}]}}}}
    return Placed("site-t-gpu", job, {"name": "observability-gpu-stack"}, None, "monitoring")


def test_a_plain_equals_sign_reads_as_the_string_it_is():
    assert yaml.load("enum:\n- '!='\n- =\n- =~\n", Loader=_Loader) == {"enum": ["!=", "=", "=~"]}


def test_a_charts_crds_folder_and_a_subcharts_are_crds_folders():
    assert [_in_crds_folder(p.split("/")) for p in ("kps/crds/a.yaml", "kps/charts/crds/crds/crd-prometheuses.yaml")] == [True, True]


def test_a_subchart_named_crds_is_not_a_crds_folder():
    assert _in_crds_folder(["kps", "charts", "crds", "templates", "upgrade", "job.yaml"]) is False


def test_the_certgen_create_job_writes_its_secret():
    created = list(_job_secrets(certgen_job("create", "--host=metrics-operator", "--namespace=monitoring",
                                            "--secret-name=metrics-admission")))
    assert [(p.obj["kind"], p.namespace, p.obj["metadata"]["name"]) for p in created] == [("Secret", "monitoring", "metrics-admission")]


def test_the_certgen_patch_job_writes_no_secret():
    assert list(_job_secrets(certgen_job("patch", "--namespace=monitoring", "--secret-name=metrics-admission"))) == []
