"""The kubelet stand-in: StatefulSet controller, kubelet and cluster DNS on local processes.

``KubeletStandIn(api, workdir)`` watches the test API server's object store (store.py) on a
thread and plays, for every namespace or only for ``namespaces=[...]``:

StatefulSet controller
  Pods ``<sts>-<ordinal>`` from the current template (orphans matching the selector are
  adopted), with labels
  ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index`` and
  ``controller-revision-hash``, ``spec.hostname``/``subdomain`` (the serviceName), an owner
  reference to the StatefulSet. Updates behave as ``OnDelete`` whatever the updateStrategy: a
  missing pod is created from the current template; nothing is restarted by the controller.
  ``podManagementPolicy: OrderedReady`` (the default) creates ordinal N only when 0..N-1 are
  Ready and removes one pod at a time; ``Parallel`` does both at once. Scale down removes the
  highest ordinals first. PVCs ``<template>-<sts>-<ordinal>`` from volumeClaimTemplates are
  created before the pod and kept; ``persistentVolumeClaimRetentionPolicy`` ``whenDeleted:
  Delete`` makes the StatefulSet their owner (garbage collected with it), ``whenScaled: Delete``
  deletes them once the scaled-down pod is gone. Status: replicas, readyReplicas,
  availableReplicas, currentReplicas, updatedReplicas, currentRevision, updateRevision,
  observedGeneration.

Deployment controller
  Pods ``<deployment>-<hash>-<suffix>`` straight from the template (no ReplicaSet objects:
  ``<hash>`` is the template's, also the ``pod-template-hash`` label; the owner reference is the
  Deployment), ``spec.replicas`` of them, a missing or deleted pod made again; on a template
  change every old pod is deleted first and the new ones made once they are gone (``Recreate``,
  whatever the strategy). Status: replicas, readyReplicas, availableReplicas, updatedReplicas,
  observedGeneration.

kubelet
  Every pod gets ``spec.nodeName: standin`` (a Node object with labels kubernetes.io/hostname
  and topology.kubernetes.io/zone ``standin-zone``; deleting a bound pod is graceful, see
  store.py) and a loopback
  address from ``loopback_pool`` (the same address again for the same namespace/name), and each
  container runs as a local process in its own process group, stdout and stderr appended to
  ``<workdir>/pods/<ns>/<pod>/<container>.log``. Given an ``ApiServerThread``, it serves those
  logs as the pods' ``log`` subresource (``kubectl logs``: the current run, ``current_log``).

  - Volumes are local directories: ``configMap``/``secret`` written under the pod's directory
    (re-written when the ConfigMap changes), ``emptyDir`` under the pod's directory (removed with
    the pod), ``persistentVolumeClaim`` under ``<workdir>/pvcs/<ns>/<claim>-<uid>`` (kept while
    the PVC object exists; a pod whose claim does not exist stays Pending), ``downwardAPI``
    items (``fieldRef`` as for env, and whole ``metadata.labels``/``metadata.annotations`` as
    ``key="value"`` lines) written under the pod's directory and re-written as the pod's labels
    and annotations change, as the kubelet does.
  - Mount paths are rewritten to those directories in the command, args and env values, and in
    the files written from ConfigMaps and Secrets (that is where configuration files name data
    directories). A path is rewritten only as a whole path prefix (``/data`` in ``/data/x`` but
    not in ``/data-0``). Image directories that are not mounted (ZooKeeper's ``/conf``,
    ``/data``, ``/datalog``, ``/logs``) map to scratch directories of the pod.
  - ``$(VAR)`` in command and args is expanded from the container's env (``$$`` escapes); env
    ``value``, ``valueFrom.fieldRef`` (metadata.name/namespace/uid/labels['k']/annotations['k'],
    status.podIP, status.hostIP, spec.nodeName, spec.serviceAccountName), ``configMapKeyRef``,
    ``secretKeyRef``; ``envFrom`` configMapRef/secretRef.
  - A pod whose service account token would be mounted (``automountServiceAccountToken`` not
    false on the pod, else on its ServiceAccount) gets ``KUBECONFIG`` pointing at
    ``<pod dir>/kubeconfig``, written for the test API server when the stand-in was given an
    ``ApiServerThread``: a real kubelet mounts the service account's token and CA for https at
    ``/var/run/secrets/kubernetes.io/serviceaccount``, which the stand-in cannot give (the test
    server speaks plain http and takes any token). Programs that prefer ``$KUBECONFIG`` to the
    in-cluster credentials (kopf, ``kubernetes``' ``load_kube_config``) reach the server.
  - Each pod has its own network namespace on a real node; here a Python process binding
    ``0.0.0.0`` (or ``""``) binds the pod's address instead (the ``sitecustomize``, dns.py), so
    two pods can serve the same port.
  - Images: an image whose name contains ``odradek`` runs its commands from the current venv's
    bin directory (``odradek``, ``odradek-operator``; no command means ``odradek``), or, given
    ``odradek_image=`` (the built image's name), from that image with ``buildah run``: volumes
    bind-mounted at their mount paths, nothing rewritten, the image's user (image_mode.py);
    ``zookeeper:*`` (the official image) gets ``docker-entrypoint.sh`` and ``zkServer.sh`` on
    PATH as shims (zkshim.py): the entrypoint writes zoo.cfg from ``ZOO_*`` when the pod does not
    mount one and ``myid`` from ``ZOO_MY_ID``, ``zkServer.sh start-foreground`` runs Debian's
    ZooKeeper (java with ``/usr/share/java/zookeeper.jar``) on the pod's zoo.cfg with the client
    and admin listeners bound to the pod IP. A bare ``python``/``python3`` is this interpreter;
    other commands run as they are (``sh -c`` scripts work, with paths rewritten). The Spark
    image (``odradek-spark:*``, the Dockerfile's ``spark`` target) always runs as local processes:
    no command means its entrypoint, ``spark/k8s/entrypoint.sh`` of this checkout (Spark's
    ``driver``/``executor`` roles), and its JVMs get ``-Djdk.net.hosts.file`` through
    ``JAVA_TOOL_OPTIONS``.
  - Probes (startup, readiness, liveness; httpGet, tcpSocket, exec) on the kubelet's rules
    (probes.py): ``initialDelaySeconds``, ``periodSeconds``, ``timeoutSeconds``,
    ``failureThreshold``, ``successThreshold``, all in real seconds; sampled every
    ``periodSeconds`` or ``probe_period_max`` (1 s by default), whichever is shorter, but no
    verdict sooner than a kubelet could reach it; readiness and liveness wait for the startup
    probe; readiness drives the Ready and ContainersReady conditions; a failed liveness or startup
    probe restarts the container (SIGKILL: the kubelet's graceful stop for it is not modelled); a
    probe whose fields the API would refuse keeps its pod Pending, saying so. Lifecycle hooks are
    ignored, as is the rest of securityContext (runAsUser:
    every process runs as the test's user, or in image mode as the image's), resources and
    scheduling constraints.
  - ``securityContext.readOnlyRootFilesystem: true`` is enforced for local processes: the
    container runs in a mount namespace of its own where every filesystem is read-only but the
    host directories of its emptyDir and PVC mounts (readonly_root.py; needs root, as the tests
    run here), so a write anywhere else fails with EROFS. A container mounting ``/tmp`` gets
    ``TMPDIR`` naming that volume's directory (the host's ``/tmp`` stays read-only to it, as its
    own image's would be). Image mode does not enforce it (``buildah run`` has no read-only
    root).
  - A container that exits is restarted per ``restartPolicy`` (Always, the default; OnFailure;
    Never) after a back-off of 0.5 s doubling to 8 s (``restartCount`` in containerStatuses).
  - A deleted pod (deletionTimestamp) gets SIGTERM to each process group, SIGKILL after
    ``deletionGracePeriodSeconds``, then is deleted from the API with grace 0.

cluster DNS
  hosts files kept from Services and pods (dns.py): ``<pod>.<svc>.<ns>.svc.cluster.local`` for
  pods whose ``subdomain`` is a headless Service selecting them (ready pods, or all with
  ``publishNotReadyAddresses``), ``<svc>.<ns>.svc.cluster.local`` -> the addresses of the Ready
  pods the Service selects (no virtual IP: a client connects to a pod address on the Service's
  port, so Service ports must equal target ports), and the short forms. Python children get the
  ``sitecustomize`` patch, the JVM ``-Djdk.net.hosts.file``, C code in local pods (librdkafka) a
  preloaded ``getaddrinfo`` (libc_dns.py); ``resolver()`` patches this process.

Every process is stopped by its process group id in ``stop()``; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import http.client
import itertools
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..buildah import Container as BuildahContainer
from ..buildah import ContainerProcess, Volume
from . import dns, libc_dns
from .image_mode import ImageMode
from .probes import KINDS, ProbeRules, ProbeTracker, invalid_probe
from .store import ApiError, LabelSelector, ObjectStore, now_iso

log = logging.getLogger(__name__)

__all__ = ["KubeletStandIn", "default_loopback_pool"]

Obj = dict[str, Any]
TICK_S = 0.1
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 8.0
PROBE_PERIOD_MAX_S = 1.0
STOP_GRACE_S = 5.0
NODE_NAME = "standin"

VENV_BIN = Path(sys.executable).parent
# The Spark image's ENTRYPOINT (Dockerfile target ``spark``), run from the repository.
SPARK_ENTRYPOINT = Path(__file__).resolve().parents[3] / "spark" / "k8s" / "entrypoint.sh"
ZOOKEEPER_IMAGE_ENV = {
    "ZOO_CONF_DIR": "/conf",
    "ZOO_DATA_DIR": "/data",
    "ZOO_DATA_LOG_DIR": "/datalog",
    "ZOO_LOG_DIR": "/logs",
    "ZOO_TICK_TIME": "2000",
    "ZOO_INIT_LIMIT": "5",
    "ZOO_SYNC_LIMIT": "2",
    "ZOO_AUTOPURGE_PURGEINTERVAL": "0",
    "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "3",
    "ZOO_MAX_CLIENT_CNXNS": "60",
    "ZOO_STANDALONE_ENABLED": "true",
    "ZOO_ADMINSERVER_ENABLED": "true",
}
ZOOKEEPER_IMAGE_DIRS = ("/conf", "/data", "/datalog", "/logs", "/apache-zookeeper/conf")
ODRADEK_IMAGE_DIRS = ("/var/lib/odradek", "/etc/odradek")
TMP_DIR = "/tmp"
READONLY_ROOT = Path(__file__).resolve().with_name("readonly_root.py")


def _loopback_addresses() -> Iterator[str]:
    first = 10 + os.getpid() % 200
    for n in itertools.chain(range(first, 250), range(10, first)):
        for m in range(1, 255):
            yield f"127.0.{n}.{m}"


class _SharedPool:
    """One sequence per test process, so that stand-ins alive at once never share addresses."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._addresses = _loopback_addresses()

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        with self._lock:
            return next(self._addresses)


_SHARED_POOL = _SharedPool()


def default_loopback_pool() -> Iterator[str]:
    """127.0.<N>.<M> (never 127.0.0.x), N starting from this process's id so that tests of
    other processes on the host likely use other blocks; shared by the stand-ins of a process."""
    return _SHARED_POOL


def is_odradek_image(image: str) -> bool:
    return "odradek" in image.rsplit("/", 1)[-1]


def is_spark_image(image: str) -> bool:
    """The Odradek image's ``spark`` target (``odradek-spark:<version>``, docs/spark.md)."""
    name = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    return is_odradek_image(image) and name.endswith("-spark")


def is_zookeeper_image(image: str) -> bool:
    name = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    return name == "zookeeper"


def readonly_root_argv(argv: list[str], writable: list[Path]) -> list[str]:
    """``argv`` run with a read-only root but for ``writable`` (readonly_root.py)."""
    flags = [arg for d in writable for arg in ("--writable", str(d))]
    return [sys.executable, "-I", "-S", str(READONLY_ROOT), *flags, "--", *argv]


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined names replaced, ``$$`` -> ``$``, else kept."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


class PathMap:
    """Container paths -> host directories, longest prefix first, whole path components only."""

    def __init__(
        self, mapping: dict[str, Path], extra: tuple[tuple[re.Pattern[str], str], ...] = ()
    ):
        self.extra = extra
        self.mapping = {k.rstrip("/") or "/": v for k, v in mapping.items()}
        prefixes = sorted(self.mapping, key=len, reverse=True)
        if prefixes:
            alternatives = "|".join(re.escape(p) for p in prefixes)
            self._pattern: re.Pattern[str] | None = re.compile(
                rf"(?<![\w/.-])({alternatives})(?![\w.-])"
            )
        else:
            self._pattern = None

    def rewrite(self, text: str) -> str:
        for pattern, replacement in self.extra:
            text = pattern.sub(replacement, text)
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: str(self.mapping[m.group(1)]), text)


def _template_hash(template: Obj) -> str:
    raw = json.dumps(template, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:10]


def _ordinal(name: str, sts_name: str) -> int | None:
    prefix = f"{sts_name}-"
    if name.startswith(prefix) and name[len(prefix) :].isdigit():
        return int(name[len(prefix) :])
    return None


@dataclass
class Container:
    name: str
    spec: Obj
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    paths: PathMap | None = None
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: str | None = None
    last_exit: int | None = None
    finished: bool = False  # exited and not to be restarted
    ready: bool = False
    # the probes of the running instance (probes.py) and the one in flight of each kind, with
    # the time it began
    probes: dict[str, ProbeTracker] = field(default_factory=dict)
    in_flight: dict[str, tuple[Future[bool], float]] = field(default_factory=dict)
    term_sent_at: float | None = None
    # image mode: the buildah working container, its volumes, and the running ``buildah run``
    in_image: bool = False
    mounts: list[Volume] = field(default_factory=list)
    sandbox: BuildahContainer | None = None
    boxed: ContainerProcess | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class PodRuntime:
    namespace: str
    name: str
    uid: str
    ip: str
    directory: Path
    containers: list[Container] = field(default_factory=list)
    started: bool = False
    pending_reason: str | None = None
    terminating_since: float | None = None
    grace: float = 30.0
    configmap_versions: dict[str, str] = field(default_factory=dict)
    last_status: Obj | None = None
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)


class KubeletStandIn:
    """See the module's docstring. ``api``: an ``ApiServerThread`` or an ``ObjectStore``."""

    def __init__(
        self,
        api: Any,
        workdir: Path,
        loopback_pool: Iterator[str] | None = None,
        *,
        namespaces: Collection[str] | None = None,
        probe_period_max: float | None = PROBE_PERIOD_MAX_S,
        odradek_image: str | None = None,
    ):
        """``odradek_image``: the built image's name (``localhost/odradek:<version>``); the
        Odradek image's containers then run from it with buildah (image_mode.py)."""
        self.namespaces = set(namespaces) if namespaces is not None else None
        self.store: ObjectStore = api.store if hasattr(api, "store") else api
        self._api_server = api if hasattr(api, "store") else None
        self.workdir = Path(workdir)
        self.pool = iter(loopback_pool) if loopback_pool is not None else default_loopback_pool()
        self.probe_period_max = probe_period_max
        self.dns_dir = self.workdir / "dns"
        self.shim_dir = self.workdir / "shims"
        self._hosts_lookup: Path | None = None  # libc_dns.py's library, built by start()
        self._ips: dict[tuple[str, str], str] = {}
        self._pods: dict[tuple[str, str], PodRuntime] = {}
        self._orphans: list[PodRuntime] = []
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._probes = ThreadPoolExecutor(max_workers=8, thread_name_prefix="standin-probe")
        self.errors: list[str] = []
        self.image_mode = (
            ImageMode(odradek_image, self.dns_dir) if odradek_image is not None else None
        )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeletStandIn:
        self.workdir.mkdir(parents=True, exist_ok=True)
        dns.install(self.dns_dir)
        self._write_shims()
        dns.write_hosts(self.hosts_file, [])
        if self.store.try_get("nodes", None, NODE_NAME) is None:
            node = {
                "metadata": {
                    "name": NODE_NAME,
                    "labels": {
                        "kubernetes.io/hostname": NODE_NAME,
                        "kubernetes.io/os": "linux",
                        "topology.kubernetes.io/zone": f"{NODE_NAME}-zone",
                    },
                },
                "spec": {},
            }
            with contextlib.suppress(ApiError):
                self.store.create("nodes", None, node)
        self.store.subscribe(self._wake.set)
        if self._api_server is not None and self._api_server.handler is not None:
            self._api_server.serve_pod_logs(self.current_log)  # kubectl logs
        self._thread = threading.Thread(target=self._run, name="kubelet-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the loop, then every process by its process group: SIGTERM, SIGKILL after 5 s."""
        self._stopping.set()
        self._wake.set()
        self.store.unsubscribe(self._wake.set)
        if self._api_server is not None and self._api_server.handler is not None:
            self._api_server.serve_pod_logs(None)
        if self._thread is not None:
            self._thread.join(30)
        with self._lock:
            runtimes = list(self._pods.values()) + self._orphans
        containers = [c for r in runtimes for c in r.containers if c.process is not None]
        for c in containers:
            self._signal(c, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for c in containers:
            assert c.process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.process.wait(max(0.0, deadline - time.monotonic()))
        for c in containers:
            assert c.process is not None
            if c.process.poll() is None:
                self._signal(c, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    c.process.wait(5)
            # the group may hold children that outlived their parent
            self._signal(c, signal.SIGKILL)
        self._probes.shutdown(wait=True, cancel_futures=True)
        for runtime in runtimes:
            self._remove_sandboxes(runtime)

    def __enter__(self) -> KubeletStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- API for tests ----------------------------------------------------------------------

    def manage(self, namespace: str) -> None:
        """Add a namespace to those of a stand-in made with ``namespaces=``."""
        if self.namespaces is None:
            return
        self.namespaces = self.namespaces | {namespace}
        self._wake.set()

    @property
    def hosts_file(self) -> Path:
        return self.dns_dir / "hosts"

    def resolver(self) -> contextlib.AbstractContextManager[None]:
        """Resolve the cluster's names in this process (e.g. around an in-process operator)."""
        return dns.resolver(self.hosts_file)

    def pods(self, namespace: str | None = None) -> list[str]:
        """``namespace/name`` of the pods this kubelet runs."""
        with self._lock:
            return sorted(f"{ns}/{name}" for ns, name in self._pods if namespace in (None, ns))

    def _runtime(self, pod: str) -> PodRuntime:
        with self._lock:
            if "/" in pod:
                ns, name = pod.split("/", 1)
                runtime = self._pods.get((ns, name))
            else:
                found = [r for (ns, name), r in self._pods.items() if name == pod]
                if len(found) > 1:
                    raise KeyError(f"{pod} is in several namespaces: say namespace/name")
                runtime = found[0] if found else None
            if runtime is None:
                raise KeyError(pod)
            return runtime

    def _container(self, pod: str, container: str | None) -> Container:
        runtime = self._runtime(pod)
        for c in runtime.containers:
            if container is None or c.name == container:
                return c
        raise KeyError(f"{pod}: no container {container}")

    def pid(self, pod: str, container: str | None = None) -> int | None:
        c = self._container(pod, container)
        if c.boxed is not None:
            return c.boxed.command_pid() if c.running else None
        return c.process.pid if c.running and c.process is not None else None

    def kill(self, pod: str, sig: int = signal.SIGKILL, container: str | None = None) -> None:
        """Signal a container's process group, or in image mode its command's processes (the
        pod stays; the container restarts)."""
        self._signal(self._container(pod, container), sig)

    def pod_ip(self, pod: str) -> str:
        return self._runtime(pod).ip

    def log_path(self, pod: str, container: str | None = None) -> Path:
        runtime = self._runtime(pod)
        c = self._container(pod, container)
        return runtime.directory / f"{c.name}.log"

    def log(self, pod: str, container: str | None = None) -> str:
        path = self.log_path(pod, container)
        return path.read_text(errors="replace") if path.exists() else ""

    def current_log(self, namespace: str, name: str, container: str | None = None) -> str:
        """What ``kubectl logs`` shows: the output of the container's current (or last) run,
        without the stand-in's ``--- start`` lines. KeyError for an unknown pod or container;
        a pod with several containers needs ``container``, as the API server asks."""
        try:
            runtime = self._runtime(f"{namespace}/{name}")
        except KeyError:
            raise KeyError("no container of it has run yet") from None
        if container is None and len(runtime.containers) > 1:
            names = " ".join(c.name for c in runtime.containers)
            raise KeyError(f"a container name must be specified, choose one of: [{names}]")
        text = self.log(f"{namespace}/{name}", container)
        runs = re.split(r"^--- [^\n]* start [^\n]*\n", text, flags=re.MULTILINE)
        return runs[-1]

    def pvc_dir(self, namespace: str, claim: str) -> Path:
        pvc = self.store.get("persistentvolumeclaims", namespace, claim)
        return self._pvc_path(pvc)

    # -- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(TICK_S)
            self._wake.clear()
            if self._stopping.is_set():
                break
            try:
                self._tick()
            except Exception as e:  # keep going; tests see the errors
                import traceback

                self.errors.append(traceback.format_exc())
                if len(self.errors) > 100:
                    del self.errors[:50]
                del e
                time.sleep(TICK_S)

    def _list(self, plural: str) -> list[Obj]:
        items, _ = self.store.list(plural)
        if self.namespaces is None:
            return items
        return [i for i in items if i["metadata"].get("namespace") in self.namespaces]

    def _tick(self) -> None:
        self._each_owner("deployments", self._deployment)
        self._each_owner("statefulsets", self._statefulset)
        self._claims()
        self._kubelet()
        self._dns()

    # -- StatefulSet and Deployment controllers ----------------------------------------------

    def _each_owner(self, plural: str, sync: Callable[[Obj, list[Obj]], None]) -> None:
        """``sync`` each live StatefulSet or Deployment with the pods as they are now; one that
        is deleted or changed meanwhile (404, 409) waits for the next tick."""
        pods = self._list("pods")
        for owner in self._list(plural):
            if owner["metadata"].get("deletionTimestamp"):
                continue
            try:
                sync(owner, pods)
            except ApiError as e:
                if e.code not in (404, 409):
                    raise

    def _statefulset(self, sts: Obj, all_pods: list[Obj]) -> None:
        meta, spec = sts["metadata"], sts["spec"]
        ns, name = meta["namespace"], meta["name"]
        replicas = spec.get("replicas", 1)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        revision = f"{name}-{_template_hash(spec['template'])}"
        owned = {}
        selector = LabelSelector.from_dict(spec.get("selector"))
        for pod in all_pods:
            pmeta = pod["metadata"]
            if pmeta["namespace"] != ns:
                continue
            ordinal = _ordinal(pmeta["name"], name)
            refs = pmeta.get("ownerReferences") or []
            if not any(r.get("uid") == meta["uid"] for r in refs):
                # adopt an orphan (its StatefulSet deleted with Orphan and made again)
                orphan = not any(r.get("controller") for r in refs)
                if ordinal is None or not orphan or not selector.matches(pmeta.get("labels")):
                    continue
                if pmeta.get("deletionTimestamp"):
                    continue
                pod = self.store.patch(
                    "pods",
                    ns,
                    pmeta["name"],
                    {"metadata": {"ownerReferences": [*refs, _owner_ref(sts, controller=True)]}},
                )
            if ordinal is not None:
                owned[ordinal] = pod
        retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}

        # scale down: highest ordinal first
        extra = sorted((o for o in owned if o >= replicas), reverse=True)
        for ordinal in extra:
            pod = owned[ordinal]
            if not pod["metadata"].get("deletionTimestamp"):
                self.store.delete("pods", ns, pod["metadata"]["name"])
            if not parallel:
                break
        if retention.get("whenScaled") == "Delete":
            for tmpl in spec.get("volumeClaimTemplates") or []:
                claims, _ = self.store.list("persistentvolumeclaims", ns)
                for claim in claims:
                    prefix = f"{tmpl['metadata']['name']}-{name}-"
                    cname = claim["metadata"]["name"]
                    if cname.startswith(prefix) and cname[len(prefix) :].isdigit():
                        ordinal = int(cname[len(prefix) :])
                        if ordinal >= replicas and ordinal not in owned:
                            with contextlib.suppress(ApiError):
                                self.store.delete("persistentvolumeclaims", ns, cname)

        # scale up / recreate missing pods
        if extra and not parallel:
            pass  # OrderedReady: finish the scale down first
        else:
            for ordinal in range(replicas):
                if ordinal in owned:
                    if not parallel and not _pod_ready(owned[ordinal]):
                        break
                    continue
                self._create_claims(sts, ordinal)
                self._create_pod(sts, ordinal, revision)
                if not parallel:
                    break

        # status
        current = [p for o, p in owned.items() if o < replicas]
        ready = sum(1 for p in current if _pod_ready(p))
        updated = sum(
            1
            for p in current
            if p["metadata"].get("labels", {}).get("controller-revision-hash") == revision
        )
        old_status = sts.get("status") or {}
        current_revision = old_status.get("currentRevision") or revision
        if updated == len(current) == replicas:
            current_revision = revision
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(owned),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": sum(
                1
                for p in current
                if p["metadata"].get("labels", {}).get("controller-revision-hash")
                == current_revision
            ),
            "updatedReplicas": updated,
            "currentRevision": current_revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        if status != old_status:
            self.store.replace("statefulsets", ns, name, {"status": status}, subresource="status")

    # -- Deployment controller --------------------------------------------------------------

    def _deployment(self, deployment: Obj, all_pods: list[Obj]) -> None:
        meta, spec = deployment["metadata"], deployment["spec"]
        ns, name = meta["namespace"], meta["name"]
        replicas = spec.get("replicas", 1)
        template_hash = _template_hash(spec["template"])
        owned = [
            p
            for p in all_pods
            if p["metadata"]["namespace"] == ns
            and any(r.get("uid") == meta["uid"] for r in p["metadata"].get("ownerReferences") or [])
        ]
        live = [p for p in owned if not p["metadata"].get("deletionTimestamp")]
        current = [p for p in live if _labels(p).get("pod-template-hash") == template_hash]
        old = [p for p in live if p not in current]
        for pod in old + current[replicas:]:
            self.store.delete("pods", ns, pod["metadata"]["name"])
        if all(_labels(p).get("pod-template-hash") == template_hash for p in owned):
            # Recreate: new pods once no pod of an old template is left, even terminating
            for _ in range(replicas - len(current)):
                self._create_deployment_pod(deployment, template_hash)
        current = current[:replicas]
        ready = sum(1 for p in current if _pod_ready(p))
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(live),
            "updatedReplicas": len(current),
            "readyReplicas": ready,
            "availableReplicas": ready,
        }
        if status != (deployment.get("status") or {}):
            self.store.replace("deployments", ns, name, {"status": status}, subresource="status")

    def _create_deployment_pod(self, deployment: Obj, template_hash: str) -> None:
        meta = deployment["metadata"]
        template = copy.deepcopy(deployment["spec"]["template"])
        suffix = "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
        pmeta = template.get("metadata") or {}
        pmeta["name"] = f"{meta['name']}-{template_hash}-{suffix}"
        pmeta["labels"] = {**(pmeta.get("labels") or {}), "pod-template-hash": template_hash}
        pmeta["ownerReferences"] = [_owner_ref(deployment, controller=True)]
        pmeta.pop("namespace", None)
        body = {"metadata": pmeta, "spec": template.get("spec") or {}}
        with contextlib.suppress(ApiError):
            self.store.create("pods", meta["namespace"], body)

    def _create_claims(self, sts: Obj, ordinal: int) -> None:
        meta, spec = sts["metadata"], sts["spec"]
        retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        match_labels = (spec.get("selector") or {}).get("matchLabels") or {}
        for tmpl in spec.get("volumeClaimTemplates") or []:
            claim_name = f"{tmpl['metadata']['name']}-{meta['name']}-{ordinal}"
            if self.store.try_get("persistentvolumeclaims", meta["namespace"], claim_name):
                continue
            claim_meta: Obj = {
                "name": claim_name,
                "labels": {**(tmpl["metadata"].get("labels") or {}), **match_labels},
            }
            if tmpl["metadata"].get("annotations"):
                claim_meta["annotations"] = tmpl["metadata"]["annotations"]
            if retention.get("whenDeleted") == "Delete":
                claim_meta["ownerReferences"] = [_owner_ref(sts, controller=True)]
            with contextlib.suppress(ApiError):
                self.store.create(
                    "persistentvolumeclaims",
                    meta["namespace"],
                    {"metadata": claim_meta, "spec": copy.deepcopy(tmpl.get("spec") or {})},
                )

    def _create_pod(self, sts: Obj, ordinal: int, revision: str) -> None:
        meta, spec = sts["metadata"], sts["spec"]
        template = copy.deepcopy(spec["template"])
        pod_name = f"{meta['name']}-{ordinal}"
        pmeta = template.get("metadata") or {}
        pmeta["name"] = pod_name
        pmeta["labels"] = {
            **(pmeta.get("labels") or {}),
            "statefulset.kubernetes.io/pod-name": pod_name,
            "apps.kubernetes.io/pod-index": str(ordinal),
            "controller-revision-hash": revision,
        }
        pmeta["ownerReferences"] = [_owner_ref(sts, controller=True)]
        pmeta.pop("namespace", None)
        pspec = template.get("spec") or {}
        pspec["hostname"] = pod_name
        if spec.get("serviceName"):
            pspec["subdomain"] = spec["serviceName"]
        volumes = pspec.setdefault("volumes", [])
        names = {v.get("name") for v in volumes}
        for tmpl in spec.get("volumeClaimTemplates") or []:
            vname = tmpl["metadata"]["name"]
            if vname not in names:
                claim = f"{vname}-{meta['name']}-{ordinal}"
                volumes.append({"name": vname, "persistentVolumeClaim": {"claimName": claim}})
        with contextlib.suppress(ApiError):
            self.store.create("pods", meta["namespace"], {"metadata": pmeta, "spec": pspec})

    def _claims(self) -> None:
        """Bind every PVC (status Bound), drop the directories of PVCs that are gone."""
        claims = self._list("persistentvolumeclaims")
        live = set()
        for claim in claims:
            live.add(self._pvc_path(claim))
            if (claim.get("status") or {}).get("phase") != "Bound":
                requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
                status = {
                    "phase": "Bound",
                    "accessModes": (claim.get("spec") or {}).get("accessModes") or [],
                    "capacity": {"storage": requests.get("storage", "1Gi")},
                }
                meta = claim["metadata"]
                with contextlib.suppress(ApiError):
                    self.store.patch(
                        "persistentvolumeclaims",
                        meta["namespace"],
                        meta["name"],
                        {"status": status},
                        subresource="status",
                    )
        root = self.workdir / "pvcs"
        if root.is_dir():
            for ns_dir in root.iterdir():
                for d in ns_dir.iterdir():
                    if d not in live:
                        shutil.rmtree(d, ignore_errors=True)

    def _pvc_path(self, claim: Obj) -> Path:
        meta = claim["metadata"]
        return self.workdir / "pvcs" / meta["namespace"] / f"{meta['name']}-{meta['uid'][:8]}"

    # -- kubelet -----------------------------------------------------------------------------

    def _kubelet(self) -> None:
        pods = self._list("pods")
        seen = set()
        for pod in pods:
            meta = pod["metadata"]
            key = (meta["namespace"], meta["name"])
            seen.add(key)
            with self._lock:
                runtime = self._pods.get(key)
                if runtime is not None and runtime.uid != meta["uid"]:
                    self._orphan(runtime)
                    runtime = None
                if runtime is None:
                    runtime = self._admit(pod)
                    if runtime is None:
                        continue
                    self._pods[key] = runtime
            try:
                self._sync(runtime, pod)
            except ApiError as e:
                if e.code != 404:
                    raise
        with self._lock:
            for key in list(self._pods):
                if key not in seen:
                    self._orphan(self._pods.pop(key))
            self._reap_orphans()

    def _admit(self, pod: Obj) -> PodRuntime | None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
            return None
        key = (meta["namespace"], meta["name"])
        ip = self._ips.get(key)
        if ip is None:
            ip = next(self.pool)
            self._ips[key] = ip
        directory = self.workdir / "pods" / meta["namespace"] / meta["name"]
        for sub in ("volumes", "rootfs"):
            shutil.rmtree(directory / sub, ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
        if not (pod.get("spec") or {}).get("nodeName"):
            self.store.patch(
                "pods", meta["namespace"], meta["name"], {"spec": {"nodeName": NODE_NAME}}
            )
        return PodRuntime(meta["namespace"], meta["name"], meta["uid"], ip, directory)

    def _orphan(self, runtime: PodRuntime) -> None:
        """A pod object that vanished (or was replaced): stop its processes in the background."""
        for c in runtime.containers:
            if c.running and c.term_sent_at is None:
                self._signal(c, signal.SIGTERM)
                c.term_sent_at = time.monotonic()
        runtime.grace = min(runtime.grace, 2.0)
        self._orphans.append(runtime)

    def _reap_orphans(self) -> None:
        kept = []
        for runtime in self._orphans:
            alive = [c for c in runtime.containers if c.running]
            for c in alive:
                if c.term_sent_at is not None and time.monotonic() - c.term_sent_at > 2.0:
                    self._signal(c, signal.SIGKILL)
            if alive:
                kept.append(runtime)
            else:
                self._remove_sandboxes(runtime)
                self._cleanup_dirs(runtime)
        self._orphans = kept

    def _remove_sandboxes(self, runtime: PodRuntime) -> None:
        """Image mode: the pod's buildah containers, once their processes are gone."""
        if self.image_mode is None:
            return
        for c in runtime.containers:
            if c.boxed is not None:
                self.image_mode.kill_leftovers(c.boxed)
            if c.sandbox is not None and not c.running:
                error = self.image_mode.remove(c.sandbox)
                if error is not None:
                    self.errors.append(error)
                c.sandbox = None

    def _cleanup_dirs(self, runtime: PodRuntime) -> None:
        shutil.rmtree(runtime.directory / "volumes", ignore_errors=True)
        shutil.rmtree(runtime.directory / "rootfs", ignore_errors=True)

    def _sync(self, runtime: PodRuntime, pod: Obj) -> None:
        meta = pod["metadata"]
        now = time.monotonic()
        if meta.get("deletionTimestamp"):
            self._terminate(runtime, pod, now)
            return
        if not runtime.started:
            reason = self._prepare(runtime, pod)
            if reason is not None:
                runtime.pending_reason = reason
                self._write_status(runtime, pod)
                return
            runtime.started = True
            runtime.pending_reason = None
        else:
            self._refresh_configmaps(runtime, pod)
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                if "downwardAPI" in volume:
                    directory = runtime.directory / "volumes" / volume["name"]
                    self._write_downward_api(runtime, pod, volume, directory)
        restart_policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        for c in runtime.containers:
            if c.process is not None and not c.running and not c.finished:
                if c.boxed is not None and self.image_mode is not None:
                    self.image_mode.kill_leftovers(c.boxed)
                code = c.process.returncode
                c.last_exit = code
                c.ready = False
                if restart_policy == "Never" or (restart_policy == "OnFailure" and code == 0):
                    c.finished = True
                else:
                    c.restarts += 1
                    delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (c.restarts - 1))
                    c.next_start = now + delay
                    c.process = None
            if c.process is None and not c.finished and now >= c.next_start:
                self._spawn(runtime, c)
            if c.running:
                self._probe(runtime, c, now)
        self._write_status(runtime, pod)

    def _terminate(self, runtime: PodRuntime, pod: Obj, now: float) -> None:
        if runtime.terminating_since is None:
            runtime.terminating_since = now
            grace = pod["metadata"].get("deletionGracePeriodSeconds")
            if grace is None:
                grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            runtime.grace = float(grace)
            for c in runtime.containers:
                if c.running:
                    self._signal(c, signal.SIGTERM)
                    c.term_sent_at = now
        if any(c.running for c in runtime.containers):
            if now - runtime.terminating_since >= runtime.grace:
                for c in runtime.containers:
                    if c.running:
                        self._signal(c, signal.SIGKILL)
            return
        for c in runtime.containers:
            c.ready = False
        with contextlib.suppress(ApiError):
            self.store.delete("pods", runtime.namespace, runtime.name, grace_period=0)
        with self._lock:
            if self._pods.get((runtime.namespace, runtime.name)) is runtime:
                del self._pods[(runtime.namespace, runtime.name)]
        self._remove_sandboxes(runtime)
        self._cleanup_dirs(runtime)

    # -- containers ------------------------------------------------------------------------

    def _prepare(self, runtime: PodRuntime, pod: Obj) -> str | None:
        """Volumes and containers' argv/env; a reason to stay Pending, or None."""
        spec = pod.get("spec") or {}
        ns = runtime.namespace
        volumes: dict[str, Path] = {}
        writable: set[str] = set()  # PVC and emptyDir volumes
        for volume in spec.get("volumes") or []:
            vname = volume["name"]
            if "persistentVolumeClaim" in volume or "emptyDir" in volume:
                writable.add(vname)
            if "persistentVolumeClaim" in volume:
                claim_name = volume["persistentVolumeClaim"]["claimName"]
                claim = self.store.try_get("persistentvolumeclaims", ns, claim_name)
                if claim is None:
                    return f'persistentvolumeclaim "{claim_name}" not found'
                path = self._pvc_path(claim)
            else:
                path = runtime.directory / "volumes" / vname
            path.mkdir(parents=True, exist_ok=True)
            volumes[vname] = path
        for cspec in spec.get("containers") or []:
            for kind in KINDS:
                if cspec.get(f"{kind}Probe") is not None:
                    invalid = invalid_probe(kind, cspec[f"{kind}Probe"])
                    if invalid is not None:
                        # a real API server refuses the pod; here it stays Pending, saying why
                        return f"container {cspec.get('name')}: {invalid}"
        containers = []
        for cspec in spec.get("containers") or []:
            image = cspec.get("image", "")
            if (
                self.image_mode is not None
                and is_odradek_image(image)
                and not is_spark_image(image)
            ):
                c_or_reason = self._prepare_in_image(runtime, pod, cspec, volumes, writable)
                if isinstance(c_or_reason, str):
                    return c_or_reason
                containers.append(c_or_reason)
                continue
            mapping: dict[str, Path] = {}
            image_dirs = ()
            if is_zookeeper_image(image):
                image_dirs = ZOOKEEPER_IMAGE_DIRS
            elif is_odradek_image(image):
                image_dirs = ODRADEK_IMAGE_DIRS
            for d in image_dirs:
                mapping[d] = runtime.directory / "rootfs" / d.strip("/")
            for mount in cspec.get("volumeMounts") or []:
                base = volumes.get(mount["name"])
                if base is None:
                    return f"volume {mount['name']} not found"
                if mount.get("subPath"):
                    base = base / mount["subPath"]
                mapping[mount["mountPath"]] = base
            for path in mapping.values():
                path.mkdir(parents=True, exist_ok=True)
            extra: tuple[tuple[re.Pattern[str], str], ...] = ()
            if is_zookeeper_image(image):
                # the image's scripts by absolute path: /docker-entrypoint.sh,
                # /apache-zookeeper-3.8.4-bin/bin/zkServer.sh -> the shims
                shims = str(self.shim_dir / "zookeeper")
                extra = (
                    (
                        re.compile(
                            r"(?<![\w/.-])(?:/apache-zookeeper[^/\s'\";]*/bin|/zookeeper/bin)?"
                            r"/(docker-entrypoint\.sh|zkServer\.sh)(?![\w.-])"
                        ),
                        shims.replace("\\", "\\\\") + r"/\1",
                    ),
                )
            paths = PathMap(mapping, extra)
            env = self._env(runtime, pod, cspec, paths, image)
            if env is None:
                return f"container {cspec['name']}: a referenced ConfigMap or Secret is missing"
            argv = self._argv(cspec, env, paths, image)
            if not argv:
                return f"container {cspec['name']}: no command, and image {image} has no known one"
            if tmp_dir := mapping.get(TMP_DIR):
                # the stand-in's /tmp is the host's: programs find the pod's by $TMPDIR
                env.setdefault("TMPDIR", str(tmp_dir))
            if (cspec.get("securityContext") or {}).get("readOnlyRootFilesystem"):
                argv = readonly_root_argv(argv, self._writable_dirs(cspec, volumes, writable))
            workdir = cspec.get("workingDir")
            cwd = Path(paths.rewrite(workdir)) if workdir else runtime.directory
            if not cwd.is_dir():
                cwd = runtime.directory
            containers.append(Container(cspec["name"], cspec, argv, env, cwd, paths))
        # ConfigMap and Secret volumes: written with every container's mount paths rewritten
        all_paths: dict[str, Path] = {}
        for c in containers:
            if c.in_image:
                continue  # its volumes are mounted at their paths: nothing to rewrite
            for mount in c.spec.get("volumeMounts") or []:
                all_paths[mount["mountPath"]] = volumes[mount["name"]] / mount.get("subPath", "")
        runtime_paths = PathMap(all_paths)
        for volume in spec.get("volumes") or []:
            if ("configMap" in volume or "secret" in volume) and not self._write_configmap(
                runtime, volume, volumes[volume["name"]], runtime_paths
            ):
                return f"volume {volume['name']}: the ConfigMap or Secret is missing"
            if "downwardAPI" in volume:
                self._write_downward_api(runtime, pod, volume, volumes[volume["name"]])
        runtime.containers = containers
        return None

    @staticmethod
    def _writable_dirs(cspec: Obj, volumes: dict[str, Path], writable: set[str]) -> list[Path]:
        """The host directories a read-only-root container may write: its emptyDir and PVC
        mounts not marked readOnly (ConfigMap, Secret and downwardAPI volumes are read-only in
        a real kubelet too)."""
        dirs = []
        for mount in cspec.get("volumeMounts") or []:
            if mount["name"] in writable and not mount.get("readOnly"):
                dirs.append(volumes[mount["name"]] / mount.get("subPath", ""))
        return dirs

    def _prepare_in_image(
        self,
        runtime: PodRuntime,
        pod: Obj,
        cspec: Obj,
        volumes: dict[str, Path],
        writable: set[str],
    ) -> Container | str:
        """An Odradek container run from the built image: its volumes bind-mounted at their
        mount paths (PVC and emptyDir directories owned by the image's user), env and args with
        ``$(VAR)`` expanded and nothing rewritten. A Container, or a reason to stay Pending."""
        assert self.image_mode is not None
        mounts: list[Volume] = []
        for mount in cspec.get("volumeMounts") or []:
            base = volumes.get(mount["name"])
            if base is None:
                return f"volume {mount['name']} not found"
            if mount.get("subPath"):
                base = base / mount["subPath"]
            if mount["name"] in writable:
                base.mkdir(parents=True, exist_ok=True)
                self.image_mode.give_to_user(base)
            options = ":ro" if mount.get("readOnly") else ""
            mounts.append((base, f"{mount['mountPath']}{options}"))
        mounts.append(self.image_mode.dns_volume())
        identity = PathMap({})
        env = self._env(runtime, pod, cspec, identity, cspec.get("image", ""))
        if env is None:
            return f"container {cspec['name']}: a referenced ConfigMap or Secret is missing"
        command = list(cspec.get("command") or ["odradek"])  # the image's ENTRYPOINT
        argv = [expand(a, env) for a in command + list(cspec.get("args") or [])]
        return Container(
            cspec["name"],
            cspec,
            argv,
            env,
            runtime.directory,
            identity,
            in_image=True,
            mounts=mounts,
        )

    def _write_configmap(
        self, runtime: PodRuntime, volume: Obj, directory: Path, paths: PathMap
    ) -> bool:
        is_cm = "configMap" in volume
        source = volume["configMap"] if is_cm else volume["secret"]
        name = source.get("name") if is_cm else source.get("secretName")
        obj = self.store.try_get("configmaps" if is_cm else "secrets", runtime.namespace, name)
        if obj is None:
            return bool(source.get("optional"))
        runtime.configmap_versions[volume["name"]] = obj["metadata"]["resourceVersion"]
        data: dict[str, str] = dict(obj.get("data") or {})
        if not is_cm:
            import base64

            data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            data.update(obj.get("stringData") or {})
        items = source.get("items")
        files = {i["path"]: data.get(i["key"], "") for i in items} if items else data
        for stale in directory.iterdir() if directory.is_dir() else []:
            if stale.is_file() and stale.name not in files:
                stale.unlink()
        for rel, text in files.items():
            target = directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            new = paths.rewrite(text)
            if not target.exists() or target.read_text() != new:
                tmp = target.with_name(f".{target.name}.tmp")
                tmp.write_text(new)
                os.replace(tmp, target)
        return True

    def _write_downward_api(
        self, runtime: PodRuntime, pod: Obj, volume: Obj, directory: Path
    ) -> None:
        """A downwardAPI volume's files from the pod as it is now; unchanged files untouched."""
        for item in volume["downwardAPI"].get("items") or []:
            path = (item.get("fieldRef") or {}).get("fieldPath", "")
            if path in ("metadata.labels", "metadata.annotations"):
                values = pod["metadata"].get(path.split(".")[1]) or {}
                text = "\n".join(f"{k}={json.dumps(str(v))}" for k, v in sorted(values.items()))
            elif "fieldRef" in item:
                text = self._field(runtime, pod, path)
            else:
                text = ""  # resourceFieldRef: no resources here
            target = directory / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text() != text:
                tmp = target.with_name(f".{target.name}.tmp")
                tmp.write_text(text)
                os.replace(tmp, target)

    def _refresh_configmaps(self, runtime: PodRuntime, pod: Obj) -> None:
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if "configMap" not in volume and "secret" not in volume:
                continue
            is_cm = "configMap" in volume
            name = volume["configMap"]["name"] if is_cm else volume["secret"].get("secretName")
            obj = self.store.try_get("configmaps" if is_cm else "secrets", runtime.namespace, name)
            if obj is None:
                continue
            if runtime.configmap_versions.get(volume["name"]) != obj["metadata"]["resourceVersion"]:
                directory = runtime.directory / "volumes" / volume["name"]
                self._write_configmap(runtime, volume, directory, self._pod_paths(runtime, pod))

    def _pod_paths(self, runtime: PodRuntime, pod: Obj) -> PathMap:
        mapping: dict[str, Path] = {}
        volumes = {}
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if "persistentVolumeClaim" in volume:
                claim = self.store.try_get(
                    "persistentvolumeclaims",
                    runtime.namespace,
                    volume["persistentVolumeClaim"]["claimName"],
                )
                if claim is not None:
                    volumes[volume["name"]] = self._pvc_path(claim)
            else:
                volumes[volume["name"]] = runtime.directory / "volumes" / volume["name"]
        for c in runtime.containers:
            if c.in_image:
                continue
            for mount in c.spec.get("volumeMounts") or []:
                if mount["name"] in volumes:
                    mapping[mount["mountPath"]] = volumes[mount["name"]] / mount.get("subPath", "")
        return PathMap(mapping)

    def _env(
        self, runtime: PodRuntime, pod: Obj, cspec: Obj, paths: PathMap, image: str
    ) -> dict[str, str] | None:
        env: dict[str, str] = {}
        if is_zookeeper_image(image):
            env.update(ZOOKEEPER_IMAGE_ENV)
        for source in cspec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            ref = source.get("configMapRef") or source.get("secretRef")
            plural = "configmaps" if "configMapRef" in source else "secrets"
            obj = self.store.try_get(plural, runtime.namespace, ref["name"])
            if obj is None:
                if ref.get("optional"):
                    continue
                return None
            for k, v in (obj.get("data") or {}).items():
                env[prefix + k] = _decode(plural, v)
        for item in cspec.get("env") or []:
            name = item["name"]
            if "value" in item:
                env[name] = expand(str(item["value"]), env)
                continue
            source = item.get("valueFrom") or {}
            if "fieldRef" in source:
                env[name] = self._field(runtime, pod, source["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in source or "secretKeyRef" in source:
                ref = source.get("configMapKeyRef") or source.get("secretKeyRef")
                plural = "configmaps" if "configMapKeyRef" in source else "secrets"
                obj = self.store.try_get(plural, runtime.namespace, ref["name"])
                value = None if obj is None else (obj.get("data") or {}).get(ref["key"])
                if value is None:
                    if ref.get("optional"):
                        continue
                    return None
                env[name] = _decode(plural, value)
            elif "resourceFieldRef" in source:
                env[name] = "1"
            else:
                env[name] = ""
        return {k: paths.rewrite(v) for k, v in env.items()}

    def _field(self, runtime: PodRuntime, pod: Obj, path: str) -> str:
        meta = pod["metadata"]
        match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        if match:
            return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
        values = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta["uid"],
            "status.podIP": runtime.ip,
            "status.podIPs": runtime.ip,
            "status.hostIP": "127.0.0.1",
            "spec.nodeName": NODE_NAME,
            "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName", "default"),
        }
        return values.get(path, "")

    def _argv(self, cspec: Obj, env: dict[str, str], paths: PathMap, image: str) -> list[str]:
        command = list(cspec.get("command") or [])
        args = list(cspec.get("args") or [])
        if is_zookeeper_image(image):
            if not command:
                command = [str(self.shim_dir / "zookeeper" / "docker-entrypoint.sh")]
                args = args or ["zkServer.sh", "start-foreground"]
        elif is_spark_image(image) and not command:
            command = [str(SPARK_ENTRYPOINT)]
        elif is_odradek_image(image) and not command:
            command = ["odradek"]
        argv = [paths.rewrite(expand(a, env)) for a in command + args]
        if argv:
            argv[0] = self._executable(argv[0], image)
        return argv

    def _executable(self, name: str, image: str) -> str:
        base = os.path.basename(name)
        if base in ("python", "python3", f"python3.{sys.version_info.minor}"):
            return sys.executable
        if is_zookeeper_image(image):
            shim = self.shim_dir / "zookeeper" / base
            if shim.exists():
                return str(shim)
        if "/" in name and os.path.exists(name):
            return name
        if is_odradek_image(image) and (VENV_BIN / base).exists():
            return str(VENV_BIN / base)
        return shutil.which(base) or name

    def _process_env(self, runtime: PodRuntime, c: Container) -> dict[str, str]:
        image = c.spec.get("image", "")
        path = [str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]
        if is_zookeeper_image(image):
            path.insert(0, str(self.shim_dir / "zookeeper"))
        env = {
            "PATH": os.pathsep.join(path),
            "HOME": str(runtime.directory),
            "HOSTNAME": runtime.name,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(self.dns_dir), os.environ.get("PYTHONPATH", "")) if p
            ),
            "ODRADEK_STANDIN_HOSTS": str(self.dns_dir / f"hosts-{runtime.namespace}"),
            "ODRADEK_STANDIN_POD_IP": runtime.ip,
            "ODRADEK_STANDIN_JAVA": shutil.which("java") or "java",
        }
        if self._hosts_lookup is not None:
            env["LD_PRELOAD"] = str(self._hosts_lookup)
        if is_spark_image(image):
            # Spark's JVMs (driver, executors) resolve the cluster's names from the hosts table.
            hosts = self.dns_dir / f"hosts-{runtime.namespace}"
            env["JAVA_TOOL_OPTIONS"] = f"-Djdk.net.hosts.file={hosts}"
            if "TMPDIR" in c.env:  # the pod's /tmp volume (the JVM's tmpdir is /tmp otherwise)
                env["JAVA_TOOL_OPTIONS"] += f" -Djava.io.tmpdir={c.env['TMPDIR']}"
        for key in ("JAVA_HOME", "TMPDIR", "KUBECONFIG"):
            if key in os.environ:
                env[key] = os.environ[key]
        kubeconfig = self._kubeconfig(runtime)
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        env.update(c.env)
        return env

    def _kubeconfig(self, runtime: PodRuntime) -> Path | None:
        """The pod's stand-in for its service account's credentials (see the docstring)."""
        if self._api_server is None or not getattr(self._api_server, "url", ""):
            return None
        pod = self.store.try_get("pods", runtime.namespace, runtime.name)
        if not pod:
            return None
        spec = pod.get("spec") or {}
        account = self.store.try_get(
            "serviceaccounts", runtime.namespace, spec.get("serviceAccountName") or "default"
        )
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = (account or {}).get("automountServiceAccountToken", True)
        if not automount:
            return None
        from .apiserver import write_kubeconfig

        path = runtime.directory / "kubeconfig"
        if not path.exists():
            write_kubeconfig(path, self._api_server.url, runtime.namespace)
        return path

    def _image_env(self, runtime: PodRuntime, c: Container) -> dict[str, str]:
        """The env of a container run from the image: the image's, then these."""
        assert self.image_mode is not None
        return {
            **self.image_mode.env(runtime.namespace),
            "HOSTNAME": runtime.name,
            "ODRADEK_STANDIN_POD_IP": runtime.ip,
            **c.env,
        }

    def _spawn_in_image(self, runtime: PodRuntime, c: Container, log: Path) -> None:
        assert self.image_mode is not None
        if c.sandbox is None:
            c.sandbox = self.image_mode.create(runtime.namespace, runtime.name, runtime.uid, c.name)
        c.boxed = c.sandbox.start(
            c.argv,
            log,
            volumes=c.mounts,
            env=self._image_env(runtime, c),
            workdir=c.spec.get("workingDir"),
        )
        c.process = c.boxed.popen

    def _spawn(self, runtime: PodRuntime, c: Container) -> None:
        log = runtime.directory / f"{c.name}.log"
        with open(log, "ab") as out:
            out.write(f"--- {now_iso()} start {c.argv!r}\n".encode())
        try:
            if c.in_image:
                self._spawn_in_image(runtime, c, log)
            else:
                with open(log, "ab") as out:
                    c.process = subprocess.Popen(
                        c.argv,
                        env=self._process_env(runtime, c),
                        cwd=c.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
        except (OSError, subprocess.SubprocessError) as e:
            with open(log, "ab") as out:
                out.write(f"--- cannot start: {e}\n".encode())
            c.restarts += 1
            c.next_start = time.monotonic() + BACKOFF_MAX_S
            return
        c.started_at = now_iso()
        c.term_sent_at = None
        c.ready = False
        now = time.monotonic()
        c.in_flight = {}  # a probe still running for the old instance is ignored
        c.probes = {
            kind: ProbeTracker(
                kind, ProbeRules.of(c.spec[f"{kind}Probe"]), now, self.probe_period_max
            )
            for kind in KINDS
            if c.spec.get(f"{kind}Probe") is not None
        }

    def _signal(self, c: Container, sig: int) -> None:
        if c.process is None:
            return
        if c.boxed is not None and self.image_mode is not None:
            self.image_mode.signal(c.boxed, sig)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.process.pid, sig)
            if sig == signal.SIGTERM:
                # a group paused by a fault test (SIGSTOP) would not see SIGTERM before SIGKILL
                os.killpg(c.process.pid, signal.SIGCONT)

    # -- probes ----------------------------------------------------------------------------

    def _probe(self, runtime: PodRuntime, c: Container, now: float) -> None:
        """Collect finished probes, act on changed verdicts, start the probes that are due."""
        for kind, tracker in c.probes.items():
            pending = c.in_flight.get(kind)
            if pending is not None and pending[0].done():
                del c.in_flight[kind]
                ok, elapsed_s = pending[0].result()
                verdict = tracker.record(ok, pending[1], elapsed_s)
                if verdict is not None:
                    self._act(c, kind, verdict)
        startup = c.probes.get("startup")
        started = startup is None or startup.verdict is True
        if "readiness" not in c.probes:
            c.ready = started
        for kind, tracker in c.probes.items():
            if kind != "startup" and not started:
                continue  # readiness and liveness wait for the startup probe
            if kind == "startup" and started:
                continue  # a startup probe stops once it succeeded
            if kind not in c.in_flight and tracker.due(now) and c.running:
                tracker.begin(now)
                future = self._probes.submit(self._timed_check, runtime, c, c.spec[f"{kind}Probe"])
                c.in_flight[kind] = (future, now)

    def _act(self, c: Container, kind: str, verdict: bool) -> None:
        if kind == "readiness":
            c.ready = verdict
        elif not verdict:  # liveness or startup failed: the kubelet restarts the container
            self._signal(c, signal.SIGKILL)
        # a startup success needs nothing more: readiness and liveness begin at the next pass,
        # their initial delay counted from the container's start

    def _timed_check(self, runtime: PodRuntime, c: Container, probe: Obj) -> tuple[bool, float]:
        begun = time.monotonic()
        ok = self._check(runtime, c, probe)
        return ok, time.monotonic() - begun

    def _check(self, runtime: PodRuntime, c: Container, probe: Obj) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "httpGet" in probe:
                get = probe["httpGet"]
                host = get.get("host") or runtime.ip
                conn = http.client.HTTPConnection(host, self._port(c, get["port"]), timeout=timeout)
                try:
                    headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
                    conn.request("GET", get.get("path", "/"), headers=headers)
                    return 200 <= conn.getresponse().status < 400
                finally:
                    conn.close()
            if "tcpSocket" in probe:
                tcp = probe["tcpSocket"]
                host = tcp.get("host") or runtime.ip
                with socket.create_connection((host, self._port(c, tcp["port"])), timeout):
                    return True
            if "exec" in probe and c.in_image and c.sandbox is not None:
                argv = [expand(a, c.env) for a in probe["exec"].get("command") or []]
                result = c.sandbox.run(
                    *argv,
                    volumes=c.mounts,
                    env=self._image_env(runtime, c),
                    workdir=c.spec.get("workingDir"),
                    timeout_s=max(timeout, 1.0),
                )
                return result.returncode == 0
            if "exec" in probe:
                argv = [expand(a, c.env) for a in probe["exec"].get("command") or []]
                argv = [(c.paths or PathMap({})).rewrite(a) for a in argv]
                if argv:
                    argv[0] = self._executable(argv[0], c.spec.get("image", ""))
                result = subprocess.run(
                    argv,
                    env=self._process_env(runtime, c),
                    cwd=c.cwd,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=max(timeout, 1.0),
                    start_new_session=True,
                )
                return result.returncode == 0
        except (OSError, subprocess.SubprocessError, http.client.HTTPException, ValueError):
            return False
        return False

    def _port(self, c: Container, port: int | str) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for p in c.spec.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
        raise ValueError(f"no port named {port}")

    # -- status ----------------------------------------------------------------------------

    def _write_status(self, runtime: PodRuntime, pod: Obj) -> None:
        statuses = []
        for c in runtime.containers:
            state: Obj
            if c.running:
                state = {"running": {"startedAt": c.started_at}}
            elif c.finished or c.last_exit is not None:
                reason = "Completed" if c.last_exit == 0 else "Error"
                if not c.finished:
                    state = {"waiting": {"reason": "CrashLoopBackOff"}}
                else:
                    state = {"terminated": {"exitCode": c.last_exit, "reason": reason}}
            else:
                state = {"waiting": {"reason": "ContainerCreating"}}
            statuses.append(
                {
                    "name": c.name,
                    "image": c.spec.get("image", ""),
                    "imageID": "",
                    "containerID": (
                        f"buildah://{c.sandbox.name}"
                        if c.sandbox is not None
                        else f"standin://{c.process.pid}"
                        if c.process
                        else ""
                    ),
                    "ready": c.ready and c.running,
                    "started": c.running
                    and ("startup" not in c.probes or c.probes["startup"].verdict is True),
                    "restartCount": c.restarts,
                    "state": state,
                }
            )
        containers_ready = bool(runtime.containers) and all(s["ready"] for s in statuses)
        if runtime.pending_reason is not None:
            phase = "Pending"
        elif runtime.containers and all(c.finished for c in runtime.containers):
            phase = "Succeeded" if all(c.last_exit == 0 for c in runtime.containers) else "Failed"
        elif any(c.running for c in runtime.containers):
            phase = "Running"
        else:
            phase = "Pending"
        conditions = []
        for ctype, ok in (
            ("PodScheduled", True),
            ("Initialized", runtime.pending_reason is None),
            ("ContainersReady", containers_ready),
            ("Ready", containers_ready),
        ):
            value = "True" if ok else "False"
            previous = runtime.transitions.get(ctype)
            if previous is None or previous[0] != value:
                runtime.transitions[ctype] = (value, now_iso())
            conditions.append(
                {
                    "type": ctype,
                    "status": value,
                    "lastTransitionTime": runtime.transitions[ctype][1],
                }
            )
        status: Obj = {
            "phase": phase,
            "conditions": conditions,
            "hostIP": "127.0.0.1",
            "podIP": runtime.ip,
            "podIPs": [{"ip": runtime.ip}],
            "containerStatuses": statuses,
            "qosClass": "BestEffort",
        }
        if runtime.pending_reason:
            status["message"] = runtime.pending_reason
            status["reason"] = "Unschedulable"
        if status == runtime.last_status:
            return
        written = dict(status, startTime=(pod.get("status") or {}).get("startTime") or now_iso())
        self.store.replace(
            "pods", runtime.namespace, runtime.name, {"status": written}, subresource="status"
        )
        runtime.last_status = status

    # -- DNS -------------------------------------------------------------------------------

    def _dns(self) -> None:
        services = self._list("services")
        pods = self._list("pods")
        qualified: list[tuple[str, str]] = []
        short: dict[str, list[tuple[str, str]]] = {}
        for svc in services:
            meta, spec = svc["metadata"], svc.get("spec") or {}
            ns, name = meta["namespace"], meta["name"]
            selector = spec.get("selector")
            if not selector:
                continue
            headless = spec.get("clusterIP") == "None"
            not_ready_too = bool(spec.get("publishNotReadyAddresses"))
            match = LabelSelector.from_dict({"matchLabels": selector})
            for pod in pods:
                pmeta = pod["metadata"]
                if pmeta["namespace"] != ns or not match.matches(pmeta.get("labels")):
                    continue
                ip = (pod.get("status") or {}).get("podIP")
                if not ip or pmeta.get("deletionTimestamp"):
                    continue
                ready = _pod_ready(pod)
                if ready or (headless and not_ready_too):
                    for fq in (f"{name}.{ns}.svc.cluster.local", f"{name}.{ns}.svc"):
                        qualified.append((ip, fq))
                    short.setdefault(ns, []).extend([(ip, name), (ip, f"{name}.{ns}")])
                    pspec = pod.get("spec") or {}
                    if headless and pspec.get("subdomain") == name:
                        host = pspec.get("hostname") or pmeta["name"]
                        for fq in (
                            f"{host}.{name}.{ns}.svc.cluster.local",
                            f"{host}.{name}.{ns}.svc",
                        ):
                            qualified.append((ip, fq))
                        short[ns].extend([(ip, f"{host}.{name}"), (ip, f"{host}.{name}.{ns}")])
        base = [("127.0.0.1", "localhost"), ("127.0.0.1", socket.gethostname())]
        dns.write_hosts(self.hosts_file, sorted(set(qualified)))
        namespaces = {p["metadata"]["namespace"] for p in pods} | set(short)
        for ns in namespaces:
            entries = base + sorted(set(qualified)) + sorted(set(short.get(ns, [])))
            dns.write_hosts(self.dns_dir / f"hosts-{ns}", entries)

    # -- shims -----------------------------------------------------------------------------

    def _write_shims(self) -> None:
        from . import zkshim

        directory = self.shim_dir / "zookeeper"
        directory.mkdir(parents=True, exist_ok=True)
        source = Path(zkshim.__file__).resolve()
        for name in ("docker-entrypoint.sh", "zkServer.sh"):
            path = directory / name
            path.write_text(
                f"#!{sys.executable}\n"
                "import runpy, sys\n"
                f"shim = runpy.run_path({str(source)!r}, run_name='zkshim')\n"
                f"shim['run']({str(path)!r}, sys.argv[1:])\n"
            )
            path.chmod(0o755)
        # the pods' outgoing connections from their own addresses (zkshim.py's docstring)
        if zkshim.build_pod_source(directory) is None:
            log.warning("no C compiler: ZooKeeper pods connect from 127.0.0.1")
        # cluster names for C libraries in the pods (librdkafka), libc_dns.py's docstring
        self._hosts_lookup = libc_dns.build(self.dns_dir)
        if self._hosts_lookup is None:
            log.warning("no C compiler: C libraries in pods do not resolve cluster names")


def _decode(plural: str, value: str) -> str:
    if plural == "secrets":
        import base64

        return base64.b64decode(value).decode(errors="replace")
    return str(value)


def _owner_ref(owner: Obj, controller: bool = False) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def _labels(obj: Obj) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def _pod_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False
