"""A replay handler that never returns: a replay that stalls as one does when its downstream hangs (a
database that stopped answering). Its worker holds the first batch forever, so the replay's processed count
never moves while it has lag left; SIGTERM from the pod's deletion ends it."""

from __future__ import annotations

import threading


def record(messages) -> None:
    threading.Event().wait()
