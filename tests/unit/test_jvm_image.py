"""The JVM image build's pure parts: the reactor POM and the source hash that keys the cached build."""

from __future__ import annotations

from local_platform.jvm_image import reactor_pom
from local_platform.local_images import source_hash


def test_reactor_pom_names_each_module_relative_to_itself(tmp_path):
    at = tmp_path / "cache" / "images" / "x.build"
    pom = reactor_pom([tmp_path / "repo" / "java", tmp_path / "repo" / "examples" / "accounts-jvm"], at)
    assert "<module>../../../repo/java</module>" in pom
    assert "<module>../../../repo/examples/accounts-jvm</module>" in pom
    assert "<packaging>pom</packaging>" in pom


def test_source_hash_follows_sources_and_ignores_build_output(tmp_path):
    lib, app = tmp_path / "java", tmp_path / "app"
    (lib / "src").mkdir(parents=True)
    (app / "src").mkdir(parents=True)
    (lib / "pom.xml").write_text("<project/>")
    (app / "src" / "Main.java").write_text("class Main {}")
    first = source_hash(lib, app)
    (app / "target").mkdir()
    (app / "target" / "Main.class").write_bytes(b"\xca\xfe")
    assert source_hash(lib, app) == first, "build output does not change the key"
    (app / "src" / "Main.java").write_text("class Main { int x; }")
    assert source_hash(lib, app) != first, "a source change does"
