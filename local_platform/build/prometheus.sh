#!/usr/bin/env bash
# Builds promtool and the Prometheus server of one release from the Go module proxy into the cache,
# outside the repository.
#
# `-tags remove_all_sd` leaves out every service-discovery plugin but file and HTTP discovery
# (plugins/minimum.go); without it the build compiles the AWS, Azure, GCE and Kubernetes SDKs and takes
# tens of minutes on two cores. The server is built without the `builtinassets` tag: no web UI, but the
# HTTP API, the rule engine and the TSDB are all there, which is what the platform and the tests use.
# prometheus' module has no replace directives, so `go install ...@version` works.
set -euo pipefail
version=${PROMETHEUS_VERSION:?PROMETHEUS_VERSION is required, e.g. v0.316.0}
out=${1:?usage: prometheus.sh OUT_DIR}
mkdir -p "$out/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local

[ -x "$out/bin/promtool" ] && [ -x "$out/bin/prometheus" ] && exit 0

# `--version` prints what prometheus/common's version package was linked with; without this it is empty.
ldflags="-s -w -X github.com/prometheus/common/version.Version=${version#v}"
ldflags+=" -X github.com/prometheus/common/version.Branch=release -X github.com/prometheus/common/version.Revision=$version"
tmp="$out/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
# -p 1: the machine building this is usually running tests too; the build is once per machine.
# promtool first: the chart's unit tests need only it (toolchain.ensure_promtool), and it is the shorter build.
for cmd in promtool prometheus; do
  [ -x "$out/bin/$cmd" ] && continue
  echo "building $cmd $version (-tags remove_all_sd)" >&2
  started=$(date +%s)
  GOBIN="$tmp" go install -p 1 -trimpath -tags remove_all_sd -ldflags "$ldflags" \
    "github.com/prometheus/prometheus/cmd/$cmd@$version"
  echo "built $cmd in $(( $(date +%s) - started ))s" >&2
  mv "$tmp/$cmd" "$out/bin/$cmd"
done
rmdir "$tmp"
"$out/bin/promtool" --version >&2
