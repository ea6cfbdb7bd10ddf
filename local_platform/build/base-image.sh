#!/usr/bin/env bash
# The Python base image of the real node, made from Debian's packages with mmdebstrap (no image registry is
# reachable here). It stands in for the Dockerfile's official python:3.11-slim-bookworm base and is passed to
# it as --build-arg PYTHON_BASE: the Dockerfile needs `python` and the venv module in it, nothing else.
# Tagged by the hash of this script, so a changed package list makes a new base.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../node/podman-env.sh"
tag="localhost/reprise-base/python:3.11-bookworm-$(sha256sum "$0" | cut -c1-12)"
if podman image exists "$tag"; then echo "$tag"; exit 0; fi
work=$(mktemp -d "$node_cache/base.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A private mount namespace: mmdebstrap's /proc and /dev mounts never show on the host.
unshare --mount --propagation private \
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    --aptopt='APT::Install-Recommends "false"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$work/rootfs.tar" http://deb.debian.org/debian >&2
podman import --change 'CMD ["python3"]' "$work/rootfs.tar" "$tag" >&2
echo "$tag"
