"""The example accounts service's store is exactly-once in its own database: a batch delivered again to the
same group (its commit was refused in a rebalance) is recognised by the offsets kept with the rows."""

from __future__ import annotations

import json
from dataclasses import dataclass

from examples.accounts_service.store import AccountsStore


@dataclass
class Record:
    """The four methods of a confluent_kafka Message the store reads."""

    partition_: int
    offset_: int
    user: str
    locale: str

    def topic(self) -> str:
        return "users"

    def partition(self) -> int:
        return self.partition_

    def offset(self) -> int:
        return self.offset_

    def value(self) -> bytes:
        return json.dumps({"user": self.user, "locale": self.locale}).encode()


def test_a_batch_delivered_again_to_the_same_group_takes_effect_once(tmp_path):
    store = AccountsStore(str(tmp_path / "accounts.sqlite"))
    try:
        batch = [Record(0, 5, "u-1", "et"), Record(0, 6, "u-1", "de")]
        first = store.apply(batch, "accounts-service")
        # The user changed the locale again meanwhile; a redelivery of 5..6 must not set it back.
        store.apply([Record(0, 7, "u-1", "fr")], "accounts-service")
        again = store.apply([*batch, Record(0, 8, "u-2", "en")], "accounts-service")
        assert (first.records, first.repeated) == (2, 0)
        assert (again.records, again.repeated) == (1, 2)
        assert store.db.execute("SELECT locale FROM users WHERE user='u-1'").fetchone() == ("fr",)
        rows = {(r.offset, r.applied_by): (r.applied, r.redelivered) for r in store.rows("users")}
        assert rows[(5, "accounts-service")] == (1, 1) and rows[(6, "accounts-service")] == (1, 1)
        assert rows[(8, "accounts-service")] == (1, 0)
        # Another group applying the same record is a different row: the ledger check sees both.
        store.apply([Record(0, 5, "u-1", "et")], "replay")
        assert store.applied_counts()[("users", 0, 5)] == 2
    finally:
        store.close()


def test_failed_commits_are_kept_with_their_error(tmp_path):
    store = AccountsStore(str(tmp_path / "accounts.sqlite"))
    try:
        store.commit_failed("accounts-service", "ILLEGAL_GENERATION")
        store.commit_failed("accounts-service", "REBALANCE_IN_PROGRESS")
        assert store.commit_failures() == {"accounts-service": ["ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS"]}
    finally:
        store.close()
