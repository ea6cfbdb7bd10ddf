#!/usr/bin/env bash
# Builds helm (v3) of one release from the Go module proxy into the cache, outside the repository.
#
# helm's module has no replace directives, so `go install ...@version` works; the ldflags are the ones
# helm's own Makefile sets, or `helm version` says v3.x-dev and the chart checks assume the wrong Kubernetes.
set -euo pipefail
version=${HELM_VERSION:?HELM_VERSION is required, e.g. v3.20.2}
out=${1:?usage: helm.sh OUT_DIR}
mkdir -p "$out/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local

[ -x "$out/bin/helm" ] && exit 0

# The Kubernetes version helm assumes (capabilities, lint) follows its k8s.io/client-go: v0.35 -> 1.35.
gomod=$(go mod download -json "helm.sh/helm/v3@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
client_go=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")
k8s_minor=$(echo "$client_go" | cut -d. -f2)
pkg=helm.sh/helm/v3
ldflags="-s -w -X $pkg/internal/version.version=$version -X $pkg/internal/version.gitTreeState=clean"
ldflags+=" -X $pkg/pkg/lint/rules.k8sVersionMajor=1 -X $pkg/pkg/lint/rules.k8sVersionMinor=$k8s_minor"
ldflags+=" -X $pkg/pkg/chartutil.k8sVersionMajor=1 -X $pkg/pkg/chartutil.k8sVersionMinor=$k8s_minor"

echo "building helm $version (Kubernetes 1.$k8s_minor)" >&2
tmp="$out/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "$pkg/cmd/helm@$version"
mv "$tmp/helm" "$out/bin/helm"
rmdir "$tmp"
"$out/bin/helm" version >&2
