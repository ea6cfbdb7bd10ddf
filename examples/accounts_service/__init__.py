"""A small live service that embeds Reprise's handover guard: the accounts service of the examples.

It consumes user events (`{"user": "u-17", "locale": "de-CH", ...}` with an `event-type` header), keeps each
user's locale in SQLite, and records in a ledger which group applied which record, so a run can show that
every record from the handover boundary on was applied exactly once. The same `handlers.apply_batch` serves
the live loop and a replay (`REPRISE_HANDLER=examples.accounts_service.handlers:apply_batch`): one code
path, two groups. See README.md.
"""
