"""Which Kafka address the plugin reaches for a manifest's `spec.kafka.bootstrapServers`: the one the operator
reaches, through the same mapping of in-cluster names (reprise_operator.shared.bootstrap_aliases).

A manifest names Kafka as the cluster does (`kafka-bootstrap.kafka:9092`). Where that name does not resolve on
the user's machine and the operator is given a mapping for it, as on the local platform of `make run`, `plan`
must map it the same way, or it reads no Kafka at all. The mapping is taken from, first found wins:

1. `REPRISE_KAFKA_BOOTSTRAP_ALIASES` in the plugin's environment (the operator's own variable and syntax);
2. the local platform of this checkout, when the plugin talks to its API server: `make run` records the mapping
   it gives the operator in its state file (`.reprise/platform.json`, `kafka_bootstrap_aliases`), so
   `kubectl reprise plan -f examples/...` works there with nothing exported.

Against any other cluster neither applies, and names resolve through the machine's DNS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from reprise_operator.shared import bootstrap_aliases
from reprise_operator.shared.bootstrap_aliases import Aliases

from .connection import PluginError

#: The key of the local platform's state file that holds the mapping (local_platform.platform writes it).
STATE_KEY = "kafka_bootstrap_aliases"


@dataclass(frozen=True)
class KafkaAddressing:
    aliases: Aliases = ()
    #: Where the mapping came from, for messages ("" when there is none).
    source: str = ""


def addressing(api_server: str, env: Mapping[str, str], platform_state: Mapping[str, Any] | None) -> KafkaAddressing:
    """The mapping the plugin applies (see the module docstring for the order)."""
    text = env.get(bootstrap_aliases.ENV, "")
    if text.strip():
        return KafkaAddressing(_parse(text, bootstrap_aliases.ENV), bootstrap_aliases.ENV)
    if platform_state and _same_server(platform_state.get("api_server"), api_server):
        recorded = str(platform_state.get(STATE_KEY) or "")
        if recorded:
            return KafkaAddressing(_parse(recorded, "the local platform's state file"), "the local platform (make run)")
    return KafkaAddressing()


def _parse(text: str, where: str) -> Aliases:
    try:
        return bootstrap_aliases.parse(text)
    except bootstrap_aliases.AliasError as exc:
        raise PluginError(f"{where}: {exc}") from None


def _same_server(recorded: Any, api_server: str) -> bool:
    return bool(recorded) and str(recorded).rstrip("/") == api_server.rstrip("/")
