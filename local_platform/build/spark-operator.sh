#!/usr/bin/env bash
# Builds the Kubeflow Spark operator (controller and webhook in one binary) of one release from the Go module
# proxy into the cache, outside the repository.
#
# Its go.mod pins k8s.io/* with replace directives, which `go install ...@version` refuses and a wrapper module
# would silently drop; so the build runs in the release's own module folder (read-only in the module cache),
# with its own go.mod and go.sum, and writes only the binary. The ldflags are the ones its Makefile sets.
set -euo pipefail
version=${SPARK_OPERATOR_VERSION:?SPARK_OPERATOR_VERSION is required, e.g. v2.5.0}
out=${1:?usage: spark-operator.sh OUT_DIR}
mkdir -p "$out/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly

[ -x "$out/bin/spark-operator" ] && exit 0

module=github.com/kubeflow/spark-operator/v2
dir=$(go mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitTreeState=clean"

echo "building spark-operator $version from $dir" >&2
started=$(date +%s)
tmp="$out/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
(cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$tmp/spark-operator" ./cmd/operator)
mv "$tmp/spark-operator" "$out/bin/spark-operator"
rmdir "$tmp"
echo "built in $(( $(date +%s) - started ))s" >&2
"$out/bin/spark-operator" version >&2 || true
