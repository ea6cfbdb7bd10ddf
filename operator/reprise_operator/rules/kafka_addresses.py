"""The one spelling of a Kafka bootstrap list: what the operator's clients connect to and its caches key on.

`spec.kafka.bootstrapServers` is free text, and many spellings name the same brokers: `Kafka:9092`,
`kafka:09092`, `kafka:9092,kafka:9092`, a list in another order. Keyed on the text, every spelling cost the
operator another set of Kafka clients (threads and memory, security review H4), so the caches key on this
normal form instead, and the clients are made with it (a cache key and the connection it stands for never
differ). The form is: each entry's host lower-cased (DNS names and IPv4 literals are case-insensitive; an IPv6
literal keeps its brackets), without a trailing root dot, and a `PLAINTEXT://`-style listener prefix dropped
(librdkafka ignores it); the port as a plain number; duplicates removed; the entries sorted. The brokers a
client tries first change with the order, which does not matter: any bootstrap broker returns the whole
cluster's metadata.
"""

from __future__ import annotations


def normal_entry(entry: str) -> str:
    """`Kafka.Example.:09092` -> `kafka.example:9092`. Never refuses: the CRD's pattern already requires
    host:port, and an entry that is not (or a port above 65535) is kept, lower-cased, for the client to refuse
    with its own message."""
    text = entry.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        return text
    if not host.startswith("["):
        host = host.rstrip(".")
    return f"{host}:{int(port)}"


def normal_bootstrap(bootstrap_servers: str) -> str:
    """The normal form of a comma-separated bootstrap list (see the module docstring)."""
    return ",".join(sorted({normal_entry(e) for e in bootstrap_servers.split(",") if e.strip()}))
