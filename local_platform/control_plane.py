"""The real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.

`ControlPlane(workdir).start()` makes fresh certificates (a CA, the API server's serving certificate for
127.0.0.1/localhost, an admin client certificate in `system:masters`, a service-account key pair) with
the `openssl` CLI, starts the four processes on free ports with a fresh etcd data folder, writes an admin
kubeconfig, and returns when the API server answers `/readyz` and the controller manager has created the
`default` ServiceAccount (pods cannot be created before it exists). `stop()` stops them by PID in reverse
order. The flags follow envtest (controller-runtime's test control plane), plus the controllers and the
scheduler so that Deployments, Jobs and garbage collection work; the default admission plugins stay on,
so Pod Security admission enforces namespace labels. There is no kubelet: see `node_agent`.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import processes
from .errors import PlatformError
from .processes import ManagedProcess, free_port
from .toolchain import KubeBinaries, ensure_etcd, ensure_kube_binaries

SERVICE_CIDR = "10.0.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PlatformError(
            f"openssl {args[0]} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
        )


def make_certificates(pki: Path) -> None:
    """CA, serving cert, admin client cert and the service-account key pair, all ECDSA P-256 (fast)."""
    if shutil.which("openssl") is None:
        raise PlatformError(
            "openssl not found on PATH, needed to make the local cluster's certificates: "
            "install it (Debian: apt-get install openssl)"
        )
    pki.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=reprise-local-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=pki,
    )
    sans = (
        "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    )

    def leaf(name: str, subject: str, usage: str, *extra: str) -> None:
        # OpenSSL 3: `req -x509 -CA` issues a certificate signed by the CA in one step.
        _openssl(
            "req",
            "-x509",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.crt",
            "-days",
            "3650",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-subj",
            subject,
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            "-addext",
            f"extendedKeyUsage={usage}",
            *extra,
            cwd=pki,
        )

    with ThreadPoolExecutor(3) as pool:
        jobs = [
            pool.submit(leaf, "apiserver", "/CN=kube-apiserver", "serverAuth", "-addext", sans),
            pool.submit(leaf, "admin", "/O=system:masters/CN=reprise-admin", "clientAuth"),
            pool.submit(_openssl, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki),
        ]
        for job in jobs:
            job.result()
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def admin_kubeconfig(server: str, pki: Path) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "reprise-local", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}
            ],
            "users": [
                {
                    "name": "reprise-admin",
                    "user": {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
                }
            ],
            "contexts": [{"name": "reprise-local", "context": {"cluster": "reprise-local", "user": "reprise-admin"}}],
            "current-context": "reprise-local",
        },
        indent=2,
    )


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler of one local cluster.

    Everything lives under `workdir` (certificates in `pki/`, etcd data, logs in `logs/`, the admin
    kubeconfig); `start()` replaces what an earlier run left there.
    """

    def __init__(self, workdir: Path | str, binaries: KubeBinaries | None = None, etcd: Path | None = None) -> None:
        self.workdir = Path(workdir)
        self._binaries = binaries
        self._etcd = etcd
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.pki = self.workdir / "pki"
        self.ca_file = self.pki / "ca.crt"
        self.processes: list[ManagedProcess] = []
        self.etcd_port = 0
        self.port = 0
        self.startup_seconds = 0.0

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def binaries(self) -> KubeBinaries:
        if self._binaries is None:
            self._binaries = ensure_kube_binaries()
        return self._binaries

    @property
    def kubectl(self) -> Path:
        return self.binaries.kubectl

    def pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in self.processes}

    def start(self, timeout: float = 120.0) -> "ControlPlane":
        started = time.monotonic()
        binaries = self.binaries
        etcd = self._etcd or ensure_etcd()
        for stale in ("etcd", "pki", "logs"):
            shutil.rmtree(self.workdir / stale, ignore_errors=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        make_certificates(self.pki)
        self.__dict__.pop("_ctx", None)  # the certificates are new
        self.etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self.kubeconfig.write_text(admin_kubeconfig(self.server, self.pki))
        logs = self.workdir / "logs"
        pki = self.pki
        try:
            etcd_url = f"http://127.0.0.1:{self.etcd_port}"
            peer_url = f"http://127.0.0.1:{peer_port}"
            self.processes.append(
                processes.start(
                    "etcd",
                    [
                        str(etcd),
                        "--name",
                        "reprise",
                        "--data-dir",
                        str(self.workdir / "etcd"),
                        "--listen-client-urls",
                        etcd_url,
                        "--advertise-client-urls",
                        etcd_url,
                        "--listen-peer-urls",
                        peer_url,
                        "--initial-advertise-peer-urls",
                        peer_url,
                        "--initial-cluster",
                        f"reprise={peer_url}",
                        # a throwaway test store: durability costs startup and every write
                        "--unsafe-no-fsync",
                        "--log-level",
                        "warn",
                    ],
                    logs / "etcd.log",
                )
            )
            # The API server retries etcd while it starts, so both start at once.
            apiserver = processes.start(
                "kube-apiserver",
                [
                    str(binaries.apiserver),
                    f"--etcd-servers={etcd_url}",
                    f"--secure-port={self.port}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",  # hosts with no default route
                    f"--cert-dir={pki}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--authorization-mode=RBAC",
                    f"--service-account-issuer={SA_ISSUER}",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--allow-privileged=true",
                    # a real node (REPRISE_NODE=real) is reached by its address for logs and exec: its name is
                    # in no DNS
                    "--kubelet-preferred-address-types=InternalIP,Hostname",
                    "--enable-priority-and-fairness=false",
                    "--profiling=false",
                    "--v=0",
                ],
                logs / "kube-apiserver.log",
            )
            self.processes.append(apiserver)
            # The controller manager and the scheduler wait for /healthz themselves (the controller
            # manager gives up after 10s), so they start as soon as the API server serves at all and
            # load while it finishes its post-start hooks.
            processes.wait_until(apiserver, self._serving, timeout, "serving", interval=0.05)
            common = [f"--kubeconfig={self.kubeconfig}", "--leader-elect=false", "--profiling=false"]
            self.processes.append(
                processes.start(
                    "kube-controller-manager",
                    [
                        str(binaries.controller_manager),
                        *common,
                        f"--service-account-private-key-file={pki / 'sa.key'}",
                        f"--root-ca-file={pki / 'ca.crt'}",
                        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                        f"--cluster-signing-key-file={pki / 'ca.key'}",
                        "--use-service-account-credentials=true",
                        f"--service-cluster-ip-range={SERVICE_CIDR}",
                        "--secure-port=0",  # no HTTPS endpoint: two platforms on one machine must not clash on 10257
                        # the default 20 requests/s makes a Deployment of 200 replicas take many seconds
                        "--kube-api-qps=200",
                        "--kube-api-burst=400",
                    ],
                    logs / "kube-controller-manager.log",
                )
            )
            self.processes.append(
                processes.start(
                    "kube-scheduler",
                    [
                        str(binaries.scheduler),
                        *common,
                        "--secure-port=0",
                    ],
                    logs / "kube-scheduler.log",
                )
            )
            controller_manager = self.processes[-2]
            processes.wait_until(apiserver, self._ready, timeout, "ready (/readyz)", interval=0.1)
            processes.wait_until(
                controller_manager,
                self._default_service_account,
                timeout,
                "creating the default ServiceAccount",
                interval=0.1,
            )
            if not self.processes[-1].alive():
                sched = self.processes[-1]
                raise PlatformError(f"kube-scheduler exited with code {sched.popen.returncode}; see {sched.log_path}")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop every process by its PID, the last started first."""
        while self.processes:
            self.processes.pop().stop(timeout=15)

    def __enter__(self) -> "ControlPlane":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- readiness ----------------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        """GET `path` on the API server as the admin: (HTTP status, body)."""
        if not hasattr(self, "_ctx"):
            self._ctx = self._ssl_context()
        try:
            with urllib.request.urlopen(self.server + path, context=self._ctx, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _serving(self) -> bool:
        return self.get("/healthz", timeout=2.0)[0] in (200, 500)

    def _ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def _default_service_account(self) -> bool:
        return self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
