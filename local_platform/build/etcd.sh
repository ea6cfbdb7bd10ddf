#!/usr/bin/env bash
# Builds the etcd server of one release from the Go module proxy into the cache, outside the repository.
#
# `go install go.etcd.io/etcd/server/v3@vX` is refused because etcd's modules carry replace directives
# (`=> ../api`); replace directives of a dependency are ignored, so a small wrapper module that requires
# the server module and builds its main package (`etcdmain.Main`) gives the same binary.
set -euo pipefail
version=${ETCD_VERSION:?ETCD_VERSION is required, e.g. v3.6.16}
out=${1:?usage: etcd.sh OUT_DIR}
work="$out/wrapper"
mkdir -p "$work" "$out/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod

[ -x "$out/bin/etcd" ] && exit 0

cd "$work"
cat > go.mod <<MOD
module reprise.local/etcd-wrapper

go 1.24

require go.etcd.io/etcd/server/v3 $version
MOD
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
go mod tidy
echo "building etcd $version" >&2
# etcd's version is a constant of go.etcd.io/etcd/api/v3/version; only the commit is a link-time variable.
go build -tags tools -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=release-$version" \
  -o "$out/bin/etcd.tmp" go.etcd.io/etcd/server/v3
mv "$out/bin/etcd.tmp" "$out/bin/etcd"
"$out/bin/etcd" --version >&2
