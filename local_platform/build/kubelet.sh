#!/usr/bin/env bash
# Builds the kubelet of one Kubernetes release from the Go module proxy into the cache, for the
# real node (REPRISE_NODE=real). Same wrapper-module trick as kube.sh (k8s.io/kubernetes replaces its
# staging modules with local paths), in a wrapper of its own so that the control plane's build is
# never touched; the Go module and build caches are shared with it, so most of the work is reused.
set -euo pipefail
version=${KUBE_VERSION:?KUBE_VERSION is required, e.g. v1.35.4}
out=${1:?usage: kubelet.sh OUT_DIR}
staging_version="v0.${version#v1.}"
work="$out/wrapper"
mkdir -p "$work" "$out/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
[ -x "$out/bin/kubelet" ] && exit 0

cd "$work"
go mod download -json "k8s.io/kubernetes@$version" > download.json
gomod=$(python3 -c 'import json,sys; print(json.load(open("download.json"))["GoMod"])')
{
  echo "module reprise.local/kubelet-wrapper"
  echo
  echo "go $(awk '/^go /{print $2; exit}' "$gomod")"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  grep -oE '^\s+k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
go mod tidy -e 2>&1 | grep -v 'is a program, not an importable package' >&2 || true
go mod download
minor=$(echo "$version" | cut -d. -f2)
released=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Time"])' "$(python3 -c 'import json; print(json.load(open("download.json"))["Info"])')")
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=release-$version -X $pkg.buildDate=$released"
done
echo "building kubelet $version" >&2
go build -p 1 -tags tools -trimpath -ldflags "$ldflags" -o "$out/bin/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet
mv "$out/bin/kubelet.tmp" "$out/bin/kubelet"
"$out/bin/kubelet" --version >&2
