"""The one list of the kinds the operator runs: each kind's lifecycle hooks, in the order of `api.KINDS`.

The handlers register these; the CRDs, the chart's RBAC plurals, the Argo CD health scripts and the tests'
lists of kinds follow `api.KINDS`, and `tests/unit/operator/test_driver.py` holds the two lists equal.
"""

from __future__ import annotations

from .backfill import steps as backfill
from .lakereplay import steps as lakereplay
from .reconsume import steps as reconsume
from ..core.driver import KindLifecycle

KINDS: tuple[KindLifecycle, ...] = (reconsume.LIFECYCLE, backfill.LIFECYCLE, lakereplay.LIFECYCLE)
