"""The job's own account of its failure, for the driver pod's termination message."""

from __future__ import annotations

import json

from spark_app.failure_report import failure_summary, termination_message_path, write_termination_message


class Py4JLike(Exception):
    """What a Py4JJavaError's str() looks like: the call, then ': ' and the Java exception with its trace."""


def test_a_jvm_error_gives_its_root_cause():
    exc = Py4JLike(
        "An error occurred while calling o55.parquet.\n"
        ": java.lang.RuntimeException: java.lang.ClassNotFoundException: Class "
        "org.apache.hadoop.fs.s3a.S3AFileSystem not found\n"
        "\tat org.apache.hadoop.conf.Configuration.getClass(Configuration.java:2737)\n"
        "Caused by: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found\n"
    )
    assert (
        failure_summary(exc)
        == "java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found"
    )


def test_a_py4j_error_without_a_cause_gives_the_java_exception():
    exc = Py4JLike(
        'An error occurred while calling o1.load.\n: org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3a"\n\tat x'
    )
    assert failure_summary(exc) == 'org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3a"'


def test_a_python_error_names_its_type():
    assert failure_summary(KeyError("day")) == "KeyError: 'day'"
    assert failure_summary(RuntimeError()) == "RuntimeError"


def test_the_message_goes_to_the_mapped_file_on_the_local_platform(tmp_path, monkeypatch):
    target = tmp_path / "termination" / "spark-kubernetes-driver"
    target.parent.mkdir()
    monkeypatch.setenv("REPRISE_PATH_PREFIX_MAP", json.dumps({"/dev/termination-log": str(target)}))
    assert termination_message_path() == target
    write_termination_message("é" * 3000)
    assert len(target.read_bytes()) <= 4096 and target.read_text().startswith("é")


def test_no_file_to_write_is_no_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRISE_PATH_PREFIX_MAP", json.dumps({"/dev/termination-log": str(tmp_path / "no" / "f")}))
    write_termination_message("x")
    assert not (tmp_path / "no").exists()
