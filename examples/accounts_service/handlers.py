"""The accounts service's record handler, for the live loop and for a replay (`REPRISE_HANDLER`).

    REPRISE_HANDLER=examples.accounts_service.handlers:apply_batch
    ACCOUNTS_DB=/data/accounts.sqlite

The replay worker calls `apply_batch` with a list of confluent_kafka Messages per batch; an exception makes
the worker retry the records one by one and dead-letter the ones that keep failing.
"""

from __future__ import annotations

import os
from typing import Any

from .store import AccountsStore, default_path

_store: AccountsStore | None = None


def _the_store() -> AccountsStore:
    global _store
    if _store is None:
        _store = AccountsStore(default_path())
    return _store


def apply_batch(messages: list[Any]) -> None:
    """Apply a batch of user events; the ledger names the applier (`ACCOUNTS_APPLIED_BY`, default `replay`)."""
    _the_store().apply(messages, os.environ.get("ACCOUNTS_APPLIED_BY", "replay"))
