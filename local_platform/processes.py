"""Child processes of the platform: free ports, start with logs, wait until ready, stop by PID.

Every process is started in its own session so that stopping it also stops anything it forked,
and it is always stopped by its PID (never by name).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .errors import PlatformError


#: Where listening ports are picked from when the kernel's ephemeral range leaves room below it.
LISTEN_PORTS_FROM = 15000


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now, and that stays free until it is listened on.

    Picked below the kernel's ephemeral range, where it can be: a port the kernel hands out for `bind(0)` is
    also a candidate source port of every outgoing connection, and one was taken that way in the seconds
    between choosing it and a JVM binding it (the broker failed with "Address already in use")."""
    low, _ = _ephemeral_range()
    if low - LISTEN_PORTS_FROM >= 1000:
        for _ in range(200):
            port = random.randrange(LISTEN_PORTS_FROM, low)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortClaims:
    """Host ports handed out to processes that have not listened on them yet, claimed machine-wide.

    Checking that a port is free and handing it out is not atomic: two pods that declare the same port and
    start together both find it free, and the second to bind it crashes with EADDRINUSE. So a port is first
    claimed, by an exclusive `flock` on a file named after it in a folder every claimer on the machine shares
    (node agents of other platforms included), and only then checked: a port is handed out once, until its
    holder releases it. The kernel drops the lock when the holder dies, so a killed agent leaves no claim.
    """

    def __init__(self, folder: Path | None = None) -> None:
        import tempfile
        import threading

        self.folder = folder or Path(tempfile.gettempdir()) / f"reprise-host-ports-{os.getuid()}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self._held: dict[int, int] = {}  # port -> the descriptor whose lock claims it
        self._lock = threading.Lock()

    def claim(self, port: int) -> bool:
        """Claim `port` when no one holds it and nothing listens on it; False otherwise."""
        import fcntl

        with self._lock:
            if port in self._held:
                return False
            fd = os.open(self.folder / str(port), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            if not port_is_bindable(port):
                os.close(fd)  # closing the descriptor drops the lock
                return False
            self._held[port] = fd
            return True

    def claim_port(self, preferred: int | None = None) -> int:
        """`preferred` when it can be claimed, else a free port (claimed)."""
        if preferred is not None and self.claim(preferred):
            return preferred
        for _ in range(100):
            port = free_port()
            if self.claim(port):
                return port
        raise PlatformError("no free port could be claimed in 100 attempts")

    def release(self, port: int) -> None:
        with self._lock:
            fd = self._held.pop(port, None)
        if fd is not None:
            os.close(fd)

    def release_all(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for fd in held.values():
            os.close(fd)


def port_is_bindable(port: int) -> bool:
    """Whether a server could listen on `port` on every address now (as servers do, with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def require_port_free(port: int, what: str) -> None:
    if port_is_open(port):
        raise PlatformError(f"port {port} for {what} is already in use: stop what listens there or pick another port")


@dataclass
class ManagedProcess:
    """One started process, its log file, and how to stop it."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stop_signal: int = signal.SIGTERM
    _log_file: object = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        """Signal the process group, wait, then SIGKILL it if it does not go."""
        if self.alive():
            _signal_group(self.pid, self.stop_signal)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        else:
            # The leader may have exited while children of its session live on.
            _signal_group(self.pid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def start(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start `argv` in a new session, output to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(log_path, "ab")
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    try:
        popen = subprocess.Popen(
            list(argv),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        log_file.close()
        raise PlatformError(
            f"cannot start {name}: {argv[0]} not found ({exc.strerror}); run `make platform` to build it"
        ) from None
    return ManagedProcess(name=name, popen=popen, log_path=log_path, _log_file=log_file)


def wait_until(
    process: ManagedProcess,
    ready: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.25,
) -> None:
    """Poll `ready()` until it is true; fail fast with the log tail if the process dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.alive():
            raise PlatformError(
                f"{process.name} exited with code {process.popen.returncode} before it was {what}; "
                f"see {process.log_path}:\n{process.log_tail()}"
            )
        try:
            if ready():
                return
        except Exception:  # readiness probes fail in many ways while a server starts
            pass
        time.sleep(interval)
    raise PlatformError(
        f"{process.name} was not {what} within {timeout:.0f}s; see {process.log_path}:\n{process.log_tail()}"
    )
