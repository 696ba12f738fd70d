#!/usr/bin/env bash
# deps.sh: what sluice's tests and benchmarks need from the machine, in one table.
#
#   scripts/deps.sh install   install the missing Debian packages (make deps); fails loudly
#   scripts/deps.sh doctor    print what is present, what is missing, and how to install it (make doctor)
#
# Go tools (staticcheck, ...) are not here: go.mod pins them with tool directives and
# `go tool NAME` builds them from the module proxy, so nothing is installed into GOBIN.
set -euo pipefail
cd "$(dirname "$0")/.."

# command | Debian package | needed by | how to print its version
needs=(
	"redis-server|redis-server|make test: the Redis store's tests start standalone, Sentinel and Cluster servers|redis-server --version"
	"redis-cli|redis-tools|make test: the test harness forms the Redis Cluster|redis-cli --version"
	"caddy|caddy|make test: the forward-auth tests put Caddy in front of sluice serve|caddy version"
	"nginx|nginx|make test: the forward-auth tests put nginx (auth_request) in front of sluice serve|nginx -v"
	"protoc|protobuf-compiler|make test: checks that the generated gRPC code is current (make proto)|protoc --version"
	"promtool|prometheus|make test: checks the alert rules in deploy/ (promtool check rules)|promtool --version"
	"chromium|chromium|make test: the admin page's test drives a headless browser against sluice serve|chromium --version"
	"curl|curl|make test: TestDocs runs the documentation's curl commands as written|curl --version"
	"wrk|wrk|make bench: the HTTP load of the service sections (sluice serve, envoyproxy/ratelimit, plain net/http)|wrk --version"
)

# go.mod's go line: the oldest Go that builds sluice.
want_go=$(awk '$1 == "go" { print $2; exit }' go.mod)

field() { local IFS='|'; set -f; local parts=($1); set +f; echo "${parts[$2]}"; }

# have reports whether the command is installed: on PATH, or in /usr/sbin,
# where Debian puts nginx and which a user's PATH may lack.
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

doctor() {
	local missing=() line cmd pkg why ver
	printf '%-14s %-10s %s\n' "what" "state" "version or how to install"
	if command -v go >/dev/null 2>&1; then
		ver=$(go env GOVERSION)
		if [ "$(printf '%s\n%s\n' "go$want_go" "$ver" | sort -V | head -n1)" = "go$want_go" ]; then
			printf '%-14s %-10s %s\n' go ok "$ver (go.mod wants go$want_go or later)"
		else
			printf '%-14s %-10s %s\n' go OLD "$ver; go.mod wants go$want_go: https://go.dev/dl/"
			missing+=(go)
		fi
	else
		printf '%-14s %-10s %s\n' go MISSING "install go$want_go or later: https://go.dev/dl/"
		missing+=(go)
	fi
	for line in "${needs[@]}"; do
		cmd=$(field "$line" 0); pkg=$(field "$line" 1); why=$(field "$line" 2)
		if have "$cmd"; then
			ver=$($(field "$line" 3) 2>/dev/null | head -n1 || true)
			printf '%-14s %-10s %s\n' "$cmd" ok "${ver:-present}"
		else
			printf '%-14s %-10s %s\n' "$cmd" MISSING "apt-get install -y $pkg   ($why)"
			missing+=("$cmd")
		fi
	done
	if command -v go >/dev/null 2>&1; then
		if ver=$(go tool staticcheck -version 2>/dev/null); then
			printf '%-14s %-10s %s\n' staticcheck ok "$ver (go tool, pinned in go.mod)"
		else
			printf '%-14s %-10s %s\n' staticcheck BROKEN "go tool staticcheck fails; run: go mod download"
			missing+=(staticcheck)
		fi
	fi
	echo
	if [ ${#missing[@]} -eq 0 ]; then
		echo "Everything make test needs is here."
	else
		echo "Missing: ${missing[*]}. 'make deps' installs the Debian packages (as root, or with sudo)."
		return 1
	fi
}

install() {
	local missing=() line
	for line in "${needs[@]}"; do
		have "$(field "$line" 0)" || missing+=("$(field "$line" 1)")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		local sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		echo "deps: installing ${missing[*]} (Debian packages)"
		if ! $sudo apt-get update -qq || ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
			echo "deps: could not install ${missing[*]}; install them by hand (apt-get install -y ${missing[*]}) and run make test again" >&2
			exit 1
		fi
		for line in "${needs[@]}"; do
			if ! have "$(field "$line" 0)"; then
				echo "deps: $(field "$line" 0) is still missing after installing $(field "$line" 1)" >&2
				exit 1
			fi
		done
	fi
	# The tests start their own servers on free loopback ports: keep the
	# packages' own services from running beside them.
	if command -v systemctl >/dev/null 2>&1; then
		for svc in redis-server caddy nginx prometheus prometheus-node-exporter; do
			if systemctl is-active --quiet "$svc" 2>/dev/null; then
				systemctl stop "$svc" || true
			fi
		done
	fi
}

case "${1:-}" in
install) install ;;
doctor) doctor ;;
*) echo "usage: $0 install|doctor" >&2; exit 2 ;;
esac
