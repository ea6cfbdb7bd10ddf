"""`make demo-jvm` ends with a check line as the other demos do (issue 32 item 5), from the Java service's ledger
files, holding them to the handover's guarantee: a same-group repeat is reported apart, not a failure."""

from __future__ import annotations

from examples.demo_jvm import __main__ as demo_jvm


def test_the_jvm_demo_prints_a_check_line_and_reports_same_group_repeats_apart(tmp_path, monkeypatch, capsys):
    topic = demo_jvm.TOPIC
    # Partition 0: live did 0..14 and 20..29 (20..21 twice: a batch read again after a rebalance), the replay 0..19.
    live = [*range(0, 15), *range(20, 30), 20, 21]
    (tmp_path / "L-host-1.log").write_text("".join(f"L {topic} 0 {o} accounts-jvm\n" for o in live) + f"L {topic} 0")
    (tmp_path / "R-host-2.log").write_text("".join(f"R {topic} 0 {o} reprise-x\n" for o in range(20)))
    monkeypatch.setattr(demo_jvm, "LEDGER", tmp_path)
    monkeypatch.setattr(demo_jvm, "PARTITIONS", 1)
    assert demo_jvm.ledger_check({0: 10}, {0: 30}, {0: 20})
    shown = capsys.readouterr().out.splitlines()
    assert "0 applied by both groups, 0 lost" in shown[0]
    assert "2 records applied again by the live group" in shown[1]
    assert shown[-1].startswith("demo: check passed:")
    (tmp_path / "R-host-3.log").write_text(f"R {topic} 0 25 reprise-x\n")
    assert not demo_jvm.ledger_check({0: 10}, {0: 30}, {0: 20})
    assert capsys.readouterr().out.splitlines()[-1].startswith("demo: check FAILED:")
