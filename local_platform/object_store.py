"""The local platform's object store: S3Proxy (a real S3 API server) on loopback, over a folder.

`ensure_s3proxy()` fetches the S3Proxy jar-with-dependencies from Maven Central into the cache once (like
Kafka's jars); `ObjectStore` runs it with the `filesystem-nio2` backend, so every bucket is a folder of
`data_dir` and every object a plain file under it (tests inspect, damage or remove them there; they
upload through the S3 API with `put_object`, which records the ETag s3a checks). Addressing is
path-style (no `s3proxy.virtual-host`), which is what s3a needs for a loopback endpoint. Access key and
secret are made per store and are only ever handed to the process that needs them (never logged).
"""

from __future__ import annotations

import base64
import email.utils
import fcntl
import hashlib
import hmac
import http.client
import logging
import re
import secrets
import urllib.parse
from pathlib import Path

from . import processes
from .cache import component_dir, maven_artifact
from .errors import PlatformError
from .prerequisites import missing

S3PROXY_VERSION = "4.1.0"
ARTIFACT = f"org.gaul:s3proxy:{S3PROXY_VERSION}:jar:jar-with-dependencies"
DEMO_BUCKET = "lake"
REGION = "us-east-1"  # S3Proxy ignores it; SigV4 clients need one
ENV_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"

# S3 bucket names: 3-63 lower-case letters, digits, dots and hyphens, starting and ending alphanumeric.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_log = logging.getLogger(__name__)


def ensure_s3proxy() -> Path:
    """The S3Proxy jar, fetched with Maven into the cache the first time only."""
    for tool in ("java", "mvn"):
        problem = missing(tool)
        if problem:
            raise PlatformError(problem)
    home = component_dir("s3proxy", S3PROXY_VERSION)
    path = f"org/gaul/s3proxy/{S3PROXY_VERSION}/s3proxy-{S3PROXY_VERSION}-jar-with-dependencies.jar"
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a test session and `make run` may fetch at once
        return maven_artifact(ARTIFACT, path, home / "mvn-get.log")


class ObjectStore:
    """One S3Proxy on loopback with its buckets under `workdir/data`; stopped by its PID."""

    def __init__(self, workdir: Path, port: int | None = None, *, heap: str = "256m") -> None:
        self.workdir = Path(workdir).resolve()
        self.port = port or processes.free_port()
        self.heap = heap
        self.access_key = "reprise-" + secrets.token_hex(6)
        self.secret_key = secrets.token_urlsafe(24)
        self._process: processes.ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "s3proxy.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.alive() else None

    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    def create_bucket(self, name: str) -> None:
        """Create the bucket through the S3 API (an existing one of ours is fine)."""
        if not _BUCKET.match(name):
            raise PlatformError(f"bucket name {name!r} is not a valid S3 bucket name (3-63 of a-z 0-9 . -)")
        status, body = self._request("PUT", f"/{name}")
        if status not in (200, 409) or (status == 409 and b"BucketAlreadyOwnedByYou" not in body):
            raise PlatformError(f"S3Proxy refused to create bucket {name}: HTTP {status} {body[:300]!r}")

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        """Upload one object through the S3 API, as a producer of the lake would (S3Proxy then keeps the
        ETag that s3a's change detection asks for: a file copied into the data dir has none)."""
        status, body = self._request("PUT", f"/{bucket}/{urllib.parse.quote(key)}", data)
        if status != 200:
            raise PlatformError(f"S3Proxy refused to store s3://{bucket}/{key}: HTTP {status} {body[:300]!r}")

    def _request(self, method: str, path: str, data: bytes = b"") -> tuple[int, bytes]:
        # AWS signature version 2 (S3Proxy accepts v2 and v4): enough for a loopback test client.
        date = email.utils.formatdate(usegmt=True)
        content_type = "application/octet-stream"
        to_sign = f"{method}\n\n{content_type}\n{date}\n{path}".encode()
        signature = base64.b64encode(hmac.new(self.secret_key.encode(), to_sign, hashlib.sha1).digest()).decode()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request(
                method,
                path,
                body=data,
                headers={
                    "Date": date,
                    "Content-Type": content_type,
                    "Authorization": f"AWS {self.access_key}:{signature}",
                },
            )
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def object_path(self, bucket: str, key: str) -> Path:
        """Where the object `s3://bucket/key` lives on disk."""
        return self.data_dir / bucket / key

    def hadoop_conf(self) -> dict[str, str]:
        """The s3a settings that reach this store (credentials excluded: they go by environment)."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.endpoint.region": REGION,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            # Only the environment: the default chain would also ask an instance metadata endpoint.
            "fs.s3a.aws.credentials.provider": ENV_CREDENTIALS_PROVIDER,
        }

    def credentials_env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def start(self, timeout: float = 120.0) -> "ObjectStore":
        jar = ensure_s3proxy()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        processes.require_port_free(self.port, "S3Proxy")
        conf = self.workdir / "s3proxy.conf"
        conf.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={self.access_key}",
                    f"s3proxy.credential={self.secret_key}",
                    # 4.1.0 has no jclouds classes but keeps the jclouds.* names for its backends.
                    "jclouds.provider=filesystem-nio2",
                    f"jclouds.filesystem.basedir={self.data_dir}",
                ]
            )
            + "\n"
        )
        conf.chmod(0o600)  # it holds the secret key
        argv = ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar", str(jar)]
        self._process = processes.start("s3proxy", [*argv, "--properties", str(conf)], self.log_path)
        processes.wait_until(self._process, self._answers, timeout, "answering HTTP")
        _log.info("S3Proxy %s on %s (pid %s), data in %s", S3PROXY_VERSION, self.endpoint, self.pid, self.data_dir)
        return self

    def _answers(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/")
            connection.getresponse().read()  # any status: an unsigned request is refused, but answered
            return True
        finally:
            connection.close()

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def __enter__(self) -> "ObjectStore":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    print(ensure_s3proxy())
