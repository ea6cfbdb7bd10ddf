"""The local platform's object store and the lake's jar sets, for real: S3Proxy answers the S3 API on loopback
with signed requests only, keeps objects as files, and stops by its PID; the s3a set is the slim one (no AWS
SDK bundle, nothing pyspark already ships)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from local_platform.errors import PlatformError
from local_platform.lake_jars import needed_sets, resolve_lake_jars
from local_platform.object_store import ObjectStore

pytestmark = pytest.mark.integration


def test_objects_go_in_and_out_through_the_s3_api_and_unsigned_or_wrongly_signed_requests_are_refused(tmp_path):
    store = ObjectStore(tmp_path / "s3")
    try:
        store.start()
        store.create_bucket("lake")
        store.create_bucket("lake")  # ours already: fine
        store.put_object("lake", "events/dt=2024-01-01/part 0.avro", b"Obj\x01...")
        assert store.object_path("lake", "events/dt=2024-01-01/part 0.avro").read_bytes() == b"Obj\x01..."
        assert store._answers()  # an unsigned GET is answered (refused), which is what readiness needs

        impostor = ObjectStore(tmp_path / "other", port=store.port)
        with pytest.raises(PlatformError, match="HTTP 403") as refused:
            impostor.put_object("lake", "x", b"y")  # its own made-up keys: not the store's
        assert impostor.secret_key not in str(refused.value) and store.secret_key not in str(refused.value)
        assert not store.object_path("lake", "x").exists()
        with pytest.raises(PlatformError, match="not a valid S3 bucket name"):
            store.create_bucket("Lake_Bucket")
        pid = store.pid
        assert pid is not None
    finally:
        store.stop()
    assert not store.running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped by its PID, and gone


def test_a_lake_needs_the_sets_of_its_uri_and_its_format():
    assert needed_sets("s3a://lake/events", "avro") == ("s3a", "avro")
    assert needed_sets("file:///tmp/lake", "delta") == ("delta",)
    assert needed_sets("S3A://lake/events", "parquet") == ("s3a",)
    assert needed_sets("file:///tmp/lake", "json") == ()


def test_the_s3a_set_is_hadoop_aws_and_the_sdk_modules_without_the_bundle_or_what_pyspark_ships():
    import pyspark

    jars = resolve_lake_jars(["s3a"])
    names = {p.name for p in jars}
    assert "hadoop-aws-3.4.2.jar" in names and "s3-2.29.52.jar" in names and "sts-2.29.52.jar" in names
    assert "s3-transfer-manager-2.29.52.jar" in names
    assert not any(n.startswith(("bundle-", "slf4j-", "httpclient-", "wildfly-")) for n in names)
    # io.netty is Spark's own; netty-nio-client is an SDK module (software.amazon.awssdk) that runs on it.
    assert [n for n in names if n.startswith("netty-")] == ["netty-nio-client-2.29.52.jar"]
    shipped = {re.sub(r"-\d[^/]*\.jar$", "", p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert not {re.sub(r"-\d[^/]*\.jar$", "", n) for n in names} & shipped
    assert sum(p.stat().st_size for p in jars) < 20 * 2**20  # the bundle alone is 612 MiB
