#!/usr/bin/env bash
# Builds binaries of one Kubernetes release from the Go module proxy into the cache, outside the
# repository: the control plane's (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, the
# default), or those named after OUT_DIR (the real node's kubelet). Each OUT_DIR has a wrapper module of its
# own, so building one set never touches another; the Go module and build caches are shared.
#
# `go install k8s.io/kubernetes/cmd/...@vX` fails because k8s.io/kubernetes replaces its
# staging modules with local paths; a wrapper module that requires it and replaces every
# staging module with the matching published v0.x version builds the same binaries.
set -euo pipefail
version=${KUBE_VERSION:?KUBE_VERSION is required, e.g. v1.35.4}
out=${1:?usage: kube.sh OUT_DIR [BINARY ...]}
shift
staging_version="v0.${version#v1.}"
work="$out/wrapper"
mkdir -p "$work" "$out/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod

need=("$@")
[ ${#need[@]} -gt 0 ] || need=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
missing=0
for b in "${need[@]}"; do [ -x "$out/bin/$b" ] || missing=1; done
[ "$missing" = 0 ] && exit 0

cd "$work"
go mod download -json "k8s.io/kubernetes@$version" > download.json
gomod=$(python3 -c 'import json,sys; print(json.load(open("download.json"))["GoMod"])')
{
  echo "module reprise.local/kube-wrapper"
  echo
  echo "go $(awk '/^go /{print $2; exit}' "$gomod")"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  grep -oE '^\s+k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} > go.mod
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for b in "${need[@]}"; do
    # kubectl's commands live in the published k8s.io/kubectl module: pinned too, so tidy keeps it.
    [ "$b" = kubectl ] && printf '\t_ "k8s.io/kubectl/pkg/cmd"\n'
    printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b"
  done
  printf ')\n'
} > tools.go
# tools.go imports main packages only to pin them in the module graph; tidy -e reports that and
# goes on, and its other complaints show up again, clearer, in go build below.
go mod tidy -e 2>&1 | grep -v 'is a program, not an importable package' >&2 || true
go mod download
major=1
minor=$(echo "$version" | cut -d. -f2)
# Without these the binaries report v0.0.0 and kubectl warns about version skew (kubernetes#79384).
released=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Time"])' "$(python3 -c 'import json; print(json.load(open("download.json"))["Info"])')")
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=release-$version -X $pkg.buildDate=$released"
done
for b in "${need[@]}"; do
  if [ ! -x "$out/bin/$b" ]; then
    echo "building $b $version" >&2
    go build -tags tools -trimpath -ldflags "$ldflags" -o "$out/bin/$b.tmp" "k8s.io/kubernetes/cmd/$b"
    mv "$out/bin/$b.tmp" "$out/bin/$b"
  fi
done
"$out/bin/${need[0]}" --version >&2
