"""A replay handler with a planted bug: it loses the records of one key, then records the rest like `sink`.

The shadow pattern's verify Job must catch it (REPRISE_TEST_DROP_KEY names the key).
"""

from __future__ import annotations

import os

from tests.integration.replay_worker import sink


def record(messages) -> None:
    dropped = os.environ["REPRISE_TEST_DROP_KEY"].encode()
    sink.record([m for m in messages if m.key() != dropped])
