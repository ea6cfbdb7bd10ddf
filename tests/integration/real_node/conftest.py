"""The real node's fixtures (REPRISE_NODE=real only): a control plane with a kubelet + containerd node instead of
the node agent, and the project's image built from its Dockerfile and loaded into the node.

Without REPRISE_NODE=real every test here is skipped, so the default `make test` is unchanged: the real node
needs root, Debian's containerd, runc, podman and mmdebstrap, and a kubelet build (see docs/local-platform.md).
"""

from __future__ import annotations

import atexit
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from local_platform.control_plane import ControlPlane
from local_platform.node_images import reprise_image
from local_platform.real_node import RealNode
from tests.fixtures.kube import fresh_namespace, Kube

#: What pod specs in these tests name the project's image as (imagePullPolicy Never: nothing is pulled).
IMAGE = "reprise:dev"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("REPRISE_NODE") != "real":
        skip = pytest.mark.skip(reason="the real node runs only with REPRISE_NODE=real (see docs/local-platform.md)")
        for item in items:
            if "real_node" in item.nodeid:
                item.add_marker(skip)


@dataclass
class NodeCluster:
    kube: Kube
    node: RealNode


@pytest.fixture(scope="module")  # per module: a node starts in ~2 s, and test_stop.py needs the store's lock free
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    workdir = tmp_path_factory.mktemp("real-node")
    control_plane = ControlPlane(workdir / "control-plane")
    node = RealNode(control_plane.kubeconfig, workdir / "node")
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            try:
                node.stop()
            finally:
                control_plane.stop()

    atexit.register(stop)
    try:
        control_plane.start()
        node.start()
        # REPRISE_NODE_IMAGE: a podman tag to run instead of building this checkout (e.g. an older commit's image,
        # to see a test fail on it).
        tag = os.environ.get("REPRISE_NODE_IMAGE") or reprise_image()[0]
        node.load_image(tag, IMAGE)
        yield NodeCluster(Kube(control_plane, None), node)  # type: ignore[arg-type]  # no node agent here
    finally:
        stop()
        atexit.unregister(stop)


@pytest.fixture
def node_namespace(real_cluster: NodeCluster) -> Iterator[str]:
    with fresh_namespace(real_cluster.kube, f"real-node-{uuid.uuid4().hex[:6]}") as name:
        yield name


def process_status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as a dict: what the kernel says the container's process runs as."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def root_mount_options(pid: int) -> list[str]:
    """The mount options of the container's root filesystem (its mountinfo line for `/`)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[5].split(",")
    raise AssertionError(f"no root mount in /proc/{pid}/mountinfo")
