"""The keys file: how a Backfill's keys travel (one per line, in a ConfigMap mounted into its Jobs, and in the
environment when they fit) and which partition each key lands on (the producer's default partitioner).
Pure: nothing here talks to an API.
"""

from __future__ import annotations

import copy
from typing import Iterable, Sequence

#: Where the keys file is mounted in the Jobs Reprise runs, and its name in the keys ConfigMap.
KEYS_DIR = "/etc/reprise/keys"
KEYS_FILE = "keys.txt"
KEYS_PATH = f"{KEYS_DIR}/{KEYS_FILE}"
KEYS_VOLUME = "reprise-backfill-keys"
#: A ConfigMap holds at most 1 MiB; the keys file must fit with room for the metadata.
MAX_KEYS_BYTES = 1_000_000
#: REPRISE_KEYS is set only when the keys fit in this many bytes (a pod spec is stored in etcd, which
#: refuses objects over 1.5 MiB); the file is always there.
KEYS_ENV_LIMIT = 128 * 1024


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (Java `Utils.murmur2`, librdkafka `rd_murmur2`), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition the default keyed partitioner gives `key`: `toPositive(murmur2(bytes)) % partitions`."""
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


def keys_from_text(text: str) -> list[str]:
    """The keys of a keys file: one per line, surrounding blanks dropped, blank lines ignored."""
    return unique(line.strip() for line in text.splitlines() if line.strip())


def unique(keys: Iterable[str]) -> list[str]:
    """Keys without repeats, in first-seen order."""
    return list(dict.fromkeys(keys))


def check_file_keys(keys: Sequence[str]) -> None:
    """Keys travel as lines of a file (the worker and the upstream CLI read them back line by line)."""
    for key in keys:
        if "\n" in key or "\r" in key or key != key.strip():
            raise ValueError(
                f"key {key[:80]!r} has a line break or surrounding whitespace, which a keys file (one key per "
                "line) cannot carry"
            )
    size = sum(len(k.encode("utf-8")) + 1 for k in keys)
    if size > MAX_KEYS_BYTES:
        raise ValueError(
            f"the keys take {size} bytes, over the {MAX_KEYS_BYTES} a ConfigMap holds: split them "
            "over several Backfills"
        )


def keys_env(keys: Sequence[str], topic: str) -> list[dict]:
    """What the upstream command is told: the keys file, the keys (when they fit), the target topic.

    The file is the authority: REPRISE_KEYS is comma-separated, so a key with a comma in it is only
    unambiguous in the file."""
    env = [
        {"name": "REPRISE_KEYS_FILE", "value": KEYS_PATH},
        {"name": "REPRISE_KEY_COUNT", "value": str(len(keys))},
        {"name": "REPRISE_TOPIC", "value": topic},
    ]
    joined = ",".join(keys)
    if len(joined.encode("utf-8")) <= KEYS_ENV_LIMIT:
        env.insert(1, {"name": "REPRISE_KEYS", "value": joined})
    return env


def with_keys_file(pod_spec: dict, configmap: str) -> dict:
    """The pod spec with the keys ConfigMap mounted read-only at KEYS_DIR in every container."""
    spec = copy.deepcopy(pod_spec)
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != KEYS_VOLUME]
    volumes.append(
        {"name": KEYS_VOLUME, "configMap": {"name": configmap, "items": [{"key": KEYS_FILE, "path": KEYS_FILE}]}}
    )
    spec["volumes"] = volumes
    containers = []
    for container in spec.get("containers") or []:
        mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != KEYS_VOLUME]
        mounts.append({"name": KEYS_VOLUME, "mountPath": KEYS_DIR, "readOnly": True})
        containers.append({**container, "volumeMounts": mounts})
    spec["containers"] = containers
    return spec
