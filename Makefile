# sluice's build and test entry points. `make test` is what CI runs.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@2026.2.2
GOBIN       := $(shell $(GO) env GOPATH)/bin

.PHONY: test deps vet staticcheck unit fuzz bench demo

## test: install what the tests need, then vet, staticcheck, short fuzz runs and every test with the race detector.
test: deps vet staticcheck fuzz unit

## deps: from Debian when missing, redis-server (the tests start their own servers, standalone, Cluster
## and Sentinel) and caddy (the forward-auth test puts it in front of sluice serve); and staticcheck.
DEBS := redis-server caddy
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v caddy >/dev/null 2>&1 || missing="$$missing caddy"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Debian packages)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@# The tests start their own servers: keep the packages' services from holding their ports.
	@for svc in $(DEBS); do \
		command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet $$svc 2>/dev/null && systemctl stop $$svc; \
	done; true
	@test -x $(GOBIN)/staticcheck || $(GO) install $(STATICCHECK)

vet:
	$(GO) vet ./...

staticcheck:
	$(GOBIN)/staticcheck ./...

unit:
	$(GO) test -race -count=1 -timeout 20m ./...

## fuzz: each fuzz target for 20,000 inputs, a few seconds (longer runs: FUZZTIME=2000000x make fuzz).
## A count, not a duration: with a duration, Go 1.26's fuzzing coordinator can fail a target with a
## bare "context deadline exceeded" as the time runs out (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
fuzz:
	@for file in $$(grep -rlE '^func Fuzz' --include='*_test.go' --exclude-dir=bench .); do \
		for target in $$(grep -oE '^func Fuzz[A-Za-z0-9_]+' $$file | sed 's/^func //'); do \
			echo "fuzz $$(dirname $$file) $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./$$(dirname $$file) || exit 1; \
		done; \
	done

## bench: sluice against its peers, one run on a redis-server of its own (bench/ has its own go.mod);
## tables on stdout, progress on stderr. Flags through BENCHFLAGS, e.g. BENCHFLAGS="-rounds 1 -d 2s".
BENCHFLAGS ?=
bench:
	@command -v redis-server >/dev/null 2>&1 || $(MAKE) deps
	cd bench && $(GO) run . $(BENCHFLAGS)

demo:
	$(GO) run ./cmd/sluice demo
