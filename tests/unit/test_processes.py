"""Free ports for the platform's servers: below the kernel's ephemeral range, where outgoing connections
never take them between the choice and the bind."""

from __future__ import annotations

import socket

from local_platform import processes


def test_free_ports_are_listenable_and_below_the_ephemeral_range() -> None:
    low, _ = processes._ephemeral_range()
    ports = {processes.free_port() for _ in range(50)}
    if low - processes.LISTEN_PORTS_FROM >= 1000:
        assert all(processes.LISTEN_PORTS_FROM <= p < low for p in ports), sorted(ports)
    for port in list(ports)[:5]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
            s.listen()


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", processes.free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        # The busy port comes up twice before another one; after that (and in the fallback), only busy ones.
        picks = iter([busy, busy, busy + 1])
        monkeypatch.setattr(processes.random, "randrange", lambda a, b: next(picks, busy))
        assert processes.free_port() != busy


def test_a_claimed_port_is_handed_out_once_until_released(tmp_path) -> None:
    # Two node agents (or one agent, twice) choosing for pods that have not listened yet: one port, one holder.
    first, second = processes.PortClaims(tmp_path), processes.PortClaims(tmp_path)
    port = first.claim_port()
    assert not second.claim(port) and not first.claim(port)
    assert second.claim_port(port) != port
    first.release(port)
    assert second.claim(port)
    second.release_all()
    assert first.claim(port)
    first.release_all()
