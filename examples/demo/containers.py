"""The demos' services as containers, when `make run NODE=real` runs a real node (kubelet + containerd).

On the node agent a service's pod is a local process of this checkout and shares the host's files and loopback.
On the real node it is a container of an image built from its Dockerfile, so a demo asks here for:
- `service_image()`: the service's image, built by podman (cached by the hash of its inputs) on top of the
  `reprise` image the platform built, and loaded into the node's containerd under the name the pod spec uses;
- `on_node()`: the pod spec as a platform team would write it: the image's user and group named (a numeric image
  user without them runs with group 0), a read-only root filesystem with `/tmp` on an emptyDir; and, for this
  platform only, the folder of files the demo reads afterwards (a SQLite ledger) mounted from the host at the
  same path, owned by that user.
The pods have their own addresses on the node's bridge and reach Kafka at `Cluster.pod_bootstrap`, the broker's
listener on the bridge's address of the host.
"""

from __future__ import annotations

import os
from pathlib import Path

from local_platform import node_images

#: The user and group of the project's images (`USER 65532:65532` in the Dockerfiles).
IMAGE_USER = 65532
REPO = Path(__file__).resolve().parents[2]


def service_image(state: dict, name: str, dockerfile: Path, context: Path) -> None:
    """Build `dockerfile` FROM the platform's `reprise` image and load it into the real node as `name`."""
    env = node_images.podman_env()
    base, _ = node_images.reprise_image(env)
    repository = name.rsplit(":", 1)[0]
    tag, seconds = node_images.build(repository, dockerfile, context, {"REPRISE_IMAGE": base}, env)
    node_images.load(tag, [name], state["node_ctr"], env)
    print(f"demo: image {name} = {tag} ({'built in %.0fs' % seconds if seconds else 'cached'}), on the real node")


def shared_folder(folder: Path) -> None:
    """`folder` exists and the image's user owns it and what is in it (a ledger of an earlier run included)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in [folder, *folder.iterdir()]:
        os.chown(path, IMAGE_USER, IMAGE_USER)


def on_node(pod_spec: dict, shared: Path) -> dict:
    """`pod_spec` for the real node: the image's user and group, a read-only root filesystem with an emptyDir
    /tmp, and `shared` mounted from the host at the same path."""
    volumes = [
        *(pod_spec.get("volumes") or []),
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "shared", "hostPath": {"path": str(shared), "type": "Directory"}},
    ]
    mounts = [{"name": "tmp", "mountPath": "/tmp"}, {"name": "shared", "mountPath": str(shared)}]
    containers = [
        {
            **c,
            "imagePullPolicy": "Never",
            "securityContext": {**(c.get("securityContext") or {}), "readOnlyRootFilesystem": True},
            "volumeMounts": [*(c.get("volumeMounts") or []), *mounts],
        }
        for c in pod_spec["containers"]
    ]
    return {
        **pod_spec,
        "securityContext": {"runAsUser": IMAGE_USER, "runAsGroup": IMAGE_USER, "runAsNonRoot": True},
        "containers": containers,
        "volumes": volumes,
    }
