"""What the operator prints while a Handover replay runs start to finish (issue 32 item 4): no Kopf line per
successful handler or timer run at INFO, and no raw librdkafka line (`%0|...|FATAL|...`, `TXNERR`): every line is
one of the operator's JSON log lines. The operator as a process, the real API server, broker and replay pods."""

from __future__ import annotations

import re

import pytest

from .scenario import KeepProducing, apply, reconsume, wait_phase

pytestmark = pytest.mark.integration

#: One line of the operator's log (its format is in reprise_operator/__main__.py).
LOG_LINE = re.compile(
    r'^\{"time":"[^"]*","level":"(?P<level>[A-Z]+)","logger":"(?P<logger>[^"]*)","message":"(?P<message>.*)"\}$'
)
ROUTINE = re.compile(r"^(Handler|Timer) '[^']*' succeeded\.$")


def test_a_handover_replay_leaves_no_routine_success_lines_and_no_raw_librdkafka_lines(
    kube, kafka, operator, namespace, topic_name, live_service
):
    since = len(operator.log())
    with KeepProducing(kafka.bootstrap, topic_name):
        body = reconsume("quiet", kafka.bootstrap, topic_name, "Handover", "accounts", str(live_service))
        apply(kube, namespace, body)
        wait_phase(kube, namespace, "reconsume", "quiet", "Complete", timeout=240, operator=operator)
    lines = [line for line in operator.log()[since:].splitlines() if line.strip()]
    parsed = [LOG_LINE.match(line) for line in lines]
    raw = [
        line for line, match in zip(lines, parsed) if match is None and not line.startswith((" ", "\t", "Traceback"))
    ]
    routine = [m.group(0) for m in parsed if m and m["level"] == "INFO" and ROUTINE.match(m["message"])]
    tracebacks = [line for line in lines if line.startswith("Traceback")]
    assert lines, "the operator printed nothing while the replay ran"
    assert not routine, f"{len(routine)} routine success lines at INFO, e.g. {routine[:3]}"
    assert not raw, f"{len(raw)} lines not of the operator's log (raw librdkafka?), e.g. {raw[:3]}"
    assert not tracebacks, f"{len(tracebacks)} tracebacks in the operator's log"
