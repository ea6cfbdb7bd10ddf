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


def test_a_pom_of_its_own_gets_its_jar_from_target_without_the_other_build_products(tmp_path):
    """A user's Maven project without the example's `service.image.dir` (issue 32, item 8)."""
    from local_platform.jvm_image import app_jars

    target = tmp_path / "target"
    target.mkdir()
    for name in ("orders-1.0.jar", "orders-1.0-sources.jar", "orders-1.0-tests.jar", "orders-1.0-javadoc.jar"):
        (target / name).write_bytes(b"PK")
    assert [p.name for p in app_jars(target)] == ["orders-1.0.jar"]


def test_a_folder_built_by_hand_is_published_as_the_images_app(tmp_path, monkeypatch, capsys):
    from local_platform import local_images

    monkeypatch.setattr(local_images, "store_dir", lambda: tmp_path / "store")
    app = tmp_path / "orders-app"
    app.mkdir()
    assert local_images.main(["my-team/orders:dev", str(app)]) == 0
    assert local_images.image_paths("my-team/orders:dev", tmp_path / "store") == {"/app": str(app)}
    assert local_images.main(["my-team/orders:dev", str(tmp_path / "missing")]) == 2
    assert local_images.main(["--help"]) == 2
    assert "usage: python -m local_platform.local_images" in capsys.readouterr().err


def test_only_a_pom_that_writes_the_image_folder_itself_is_built_in_place():
    from local_platform.jvm_image import REPO, lays_out_app

    assert lays_out_app((REPO / "examples" / "accounts-jvm" / "pom.xml").read_text())
    own = REPO / "tests" / "integration" / "operator" / "own_services" / "orders-jvm" / "pom.xml"
    assert not lays_out_app(own.read_text())
