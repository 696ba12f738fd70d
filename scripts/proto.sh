#!/usr/bin/env bash
# proto.sh: generate the Go code of proto/ with protoc and the plugins pinned
# in go.mod (go tool protoc-gen-go, go tool protoc-gen-go-grpc).
#
#   scripts/proto.sh .         write the generated files beside the .proto files
#   scripts/proto.sh --check   fail when the committed files differ from what it generates
set -euo pipefail
cd "$(dirname "$0")/.."
protos=(proto/sluice/v1/sluice.proto)

if ! command -v protoc >/dev/null 2>&1; then
	echo "proto: protoc is missing; make deps installs it (apt-get install -y protobuf-compiler)" >&2
	exit 1
fi
out=.
if [ "${1:-}" = --check ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
# go tool -n prints where the pinned plugin is built, building it if needed.
gen_go=$(go tool -n protoc-gen-go)
gen_grpc=$(go tool -n protoc-gen-go-grpc)
protoc --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	"${protos[@]}"
if [ "$out" != . ]; then
	for p in "${protos[@]}"; do
		for f in "${p%.proto}.pb.go" "${p%.proto}_grpc.pb.go"; do
			if ! cmp -s "$f" "$out/$f"; then
				echo "proto: $f is not what $p generates; run make proto and commit the result" >&2
				diff -u "$f" "$out/$f" | head -n 40 >&2 || true
				exit 1
			fi
		done
	done
	echo "proto: generated code is current"
fi
