# sluice's build and test entry points. `make test` is what CI runs.

GO ?= go

.PHONY: test deps doctor vet staticcheck proto proto-check deploy-check unit fuzz bench soak demo

## test: install what the tests need, then vet, staticcheck, a check of the generated gRPC code and of the
## alert rules in deploy/, short fuzz runs and every test with the race detector.
test: deps vet staticcheck proto-check deploy-check fuzz unit

## deps: the Debian packages the tests need, installed when missing (scripts/deps.sh has the list).
## Go tools are pinned in go.mod with tool directives and run with `go tool`: nothing goes into GOBIN.
deps:
	@scripts/deps.sh install

## doctor: one screen of what this machine has and lacks for make test, and how to install each.
doctor:
	@scripts/deps.sh doctor

vet:
	$(GO) vet ./...
	$(GO) vet -tags soak ./cmd/sluice ./internal/soak

staticcheck:
	$(GO) tool staticcheck ./...

## proto: regenerate the gRPC code from proto/ (protoc from Debian, its plugins from go.mod's tools).
proto:
	@scripts/proto.sh .

## proto-check: the committed generated code is what make proto writes.
proto-check:
	@scripts/proto.sh --check

## deploy-check: the Prometheus alert rules in deploy/ are valid (promtool from Debian's prometheus); the
## unit tests check that every metric they and the Grafana dashboard query is one sluice exports. The
## Kubernetes manifests in deploy/kubernetes decode strictly into Kubernetes's API types (k8s.io/api, in
## that directory's own module, offline) and refer to each other as sluice serve needs.
deploy-check:
	promtool check rules deploy/prometheus/alerts.yml
	cd deploy/kubernetes && $(GO) test -count=1 ./...

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
	@scripts/deps.sh install
	cd bench && $(GO) run . $(BENCHFLAGS)

## soak: a chaos soak of the Redis store, about 10 minutes, not part of make test: 8 processes x 32 goroutines
## decide a mix of policies on a standalone server, a Cluster and a Sentinel setup (WaitForReplicas) while
## their masters are flushed, restarted, frozen and failed over, 3 more processes decide one budgeted rule
## above its limit (one SIGKILLed and restarted), and a checker that knows nothing of sluice
## counts what each fault cost (docs/failure-modes.md, "Chaos soak"). Shorter: SOAKTIME=3m; fewer:
## SOAKTOPOLOGIES=cluster (of standalone,cluster,sentinel-acks, and cluster-acks, sentinel, sentinel2); SOAKLOSSY=1 adds
## the faults that lose admissions or refuse service by design, to measure them; SOAKCONTROL=1 two phases
## with no fault (as is, and with every goroutine in step);
## SOAKRATE (decisions/s, 4000), SOAKTIMEOUT (per call, 1s), SOAKOUT (the table), SOAKTRACE (per 100 ms).
## Then a fresh deployment of three servers on a Cluster, five times: none of their first second's
## decisions under 64 clients may be degraded (cmd/sluice TestServeWarmCluster). Both run even when the
## first fails; make soak fails when either did, and says which.
# make soak writes its results (TestSoak's table, TestServeWarmCluster's
# runs, each verdict) to SOAKOUT: by default a file in bench/results named
# by the date, the time and the soak's length.
ifndef SOAKOUT
SOAKOUT := $(CURDIR)/bench/results/$(shell date -u +%Y-%m-%d-%H%M)-soak-$(or $(SOAKTIME),10m).md
endif

soak:
	@scripts/deps.sh install
	@mkdir -p $(dir $(SOAKOUT)); rm -f $(SOAKOUT); failed=""; \
	SOAKOUT=$(SOAKOUT) $(GO) test -tags soak -run TestSoak -timeout 30m -count=1 -v ./internal/soak || failed="TestSoak (internal/soak)"; \
	SOAKOUT=$(SOAKOUT) $(GO) test -tags soak -run TestServeWarmCluster -timeout 10m -count=1 -v ./cmd/sluice || failed="$${failed:+$$failed and }TestServeWarmCluster (cmd/sluice)"; \
	if [ -n "$$failed" ]; then echo "make soak: $$failed failed; results in $(SOAKOUT)"; exit 1; fi; \
	echo "make soak: TestSoak and TestServeWarmCluster passed; results in $(SOAKOUT)"

demo:
	$(GO) run ./cmd/sluice demo
