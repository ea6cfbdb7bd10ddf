"""`make run`'s headline gives the time the user waited (issue 32 item 4: "local platform up in 16.7s" was printed
after about 75 s, the time of Kafka and Kubernetes alone, before the CRDs and the Spark operator)."""

from local_platform.__main__ import summary_line


def test_the_headline_is_the_time_that_passed_and_the_parts_follow():
    line = summary_line(74.9, 16.7, 9.2)
    assert line.startswith("local platform up in 74.9s ")
    assert "Kafka, Kubernetes and the node agent 16.7s" in line and "control plane 9.2s" in line
