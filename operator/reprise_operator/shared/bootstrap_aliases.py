"""Bootstrap aliases: the Kafka address a replay names in `spec.kafka.bootstrapServers`, as this operator reaches it.

A cluster's in-cluster name (`kafka-bootstrap.kafka:9092`) resolves only inside that cluster. Where the operator
and its pods run outside any cluster DNS, as on the local platform of `make run`, `REPRISE_KAFKA_BOOTSTRAP_ALIASES`
maps such names to an address that works there, so the same manifests apply unchanged. It is a comma-separated
list of `pattern=address` entries; a pattern is a shell-style wildcard over one `host:port` entry of the list
(`*.kafka:*` matches every Service of the namespace `kafka`, at any port). The first matching pattern wins; an
entry no pattern matches is kept; equal results are listed once.

The alias is applied when the operator reads a spec, so its own clients, the pods and SparkApplications it makes
and the continuation of a LakeReplay all use the mapped address; the resource keeps what the user wrote.
On a real cluster the setting is empty and nothing is mapped.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Sequence

Aliases = tuple[tuple[str, str], ...]

ENV = "REPRISE_KAFKA_BOOTSTRAP_ALIASES"


class AliasError(ValueError):
    """A malformed entry of REPRISE_KAFKA_BOOTSTRAP_ALIASES; the message names it."""


def parse(text: str) -> Aliases:
    """`"*.kafka:*=127.0.0.1:39092,old:9092=new:9092"` -> ((pattern, address), ...)."""
    aliases = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        pattern, sep, address = entry.partition("=")
        pattern, address = pattern.strip(), address.strip()
        if not sep or not pattern or not _is_host_port(address):
            raise AliasError(f"{ENV}: {entry!r} is not pattern=host:port (for example *.kafka:*=127.0.0.1:9092)")
        aliases.append((pattern, address))
    return tuple(aliases)


def _is_host_port(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit()


def resolve(bootstrap_servers: str, aliases: Sequence[tuple[str, str]]) -> str:
    """The bootstrap list with every aliased entry replaced; unchanged when nothing matches."""
    if not aliases:
        return bootstrap_servers
    out: list[str] = []
    for entry in bootstrap_servers.split(","):
        mapped = next((address for pattern, address in aliases if fnmatchcase(entry, pattern)), entry)
        if mapped not in out:
            out.append(mapped)
    return ",".join(out)


def aliased_spec(spec: Any, aliases: Sequence[tuple[str, str]]) -> Any:
    """A typed spec whose `kafka.bootstrapServers` is resolved (the same object when nothing changes)."""
    kafka = getattr(spec, "kafka", None)
    if kafka is None or not aliases:
        return spec
    servers = resolve(kafka.bootstrap_servers, aliases)
    if servers == kafka.bootstrap_servers:
        return spec
    return spec.model_copy(update={"kafka": kafka.model_copy(update={"bootstrap_servers": servers})})
