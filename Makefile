# cshare: see README.md. `make demo` runs a local mesh; `make test` runs tiers 1-3.
GO        ?= go
BIN       := bin/cshare
PKGS      := ./...
TESTFLAGS ?= -race -timeout 15m

.PHONY: build test check bench e2e chaos nat nat-bench demo testimage browser clean fuzz

build:
	$(GO) build -o $(BIN) ./cmd/cshare

# Tier 1-3: unit/property tests, in-process meshes, real Docker (skipped with a
# printed reason when no engine is reachable).
test: testimage browser
	@bash scripts/promtool.sh
	$(GO) test $(TESTFLAGS) $(PKGS)
	$(MAKE) nat
	$(MAKE) chaos CHAOS_DURATION=2m

testimage:
	@if docker info >/dev/null 2>&1; then bash scripts/testimage.sh; \
	else echo "make test: no Docker engine reachable: Docker driver tests will be skipped"; fi

# The dashboard's browser tests drive Debian's Chromium (installed here
# when missing; they skip with the reason when it cannot be).
browser:
	@bash scripts/browser.sh

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags chaos ./chaos/
	@if ! command -v staticcheck >/dev/null 2>&1; then $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.6.1; fi
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck $(PKGS)
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck -tags chaos ./chaos/
	@cp go.mod /tmp/cshare.go.mod.bak; cp go.sum /tmp/cshare.go.sum.bak; $(GO) mod tidy; \
	if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changes go.mod/go.sum"; git diff --stat -- go.mod go.sum; \
	cp /tmp/cshare.go.mod.bak go.mod; cp /tmp/cshare.go.sum.bak go.sum; exit 1; fi

# BenchmarkCatchUp1M builds its ledger first (some 4 minutes at a million
# entries on 2 cores, compacting as it goes): make bench runs it at 100,000 unless
# CSHARE_CHAIN_ENTRIES says otherwise.
bench:
	CSHARE_CHAIN_ENTRIES=$${CSHARE_CHAIN_ENTRIES:-100000} $(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Tier 4: separate node processes (kill -9, restart, convergence).
e2e: build testimage
	CSHARE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags e2e -race -timeout 20m -count=1 -v ./e2e/

# Every fuzz target for FUZZTIME each (default 1m), corpus in testdata/fuzz.
FUZZTIME ?= 1m
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz.sh
# The nemesis (chaos/): 5 node processes in network namespaces under a job
# workload, with partitions, kill -9, SIGSTOP and clock skew, then checks.
# Needs root (skipped with the reason otherwise). CHAOS_SUMMARY gets the summary.
CHAOS_DURATION ?= 10m
chaos: build
	CSHARE_BIN=$(CURDIR)/$(BIN) CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -tags chaos -run TestChaos -v -count=1 -timeout 60m ./chaos/

# Across NATs (chaos/nat_test.go, issue 32): a relay machine and three
# machines behind NAT routers in network namespaces (one of them hole
# punching cannot pass) form an org, run a job and share a dataset. Needs
# root (skipped with the reason otherwise); scripts/natdeps.sh installs
# iptables when it is missing. nat-bench adds NAT_ATTEMPTS (default 20)
# fresh hole punches and reports successes and relayed-to-direct times.
# TestNATMove carries a running machine from one NAT to another (a laptop
# moving between networks) and checks the org finds it again.
nat: build
	@bash scripts/natdeps.sh
	CSHARE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags chaos -run 'TestNAT$$|TestNATMove$$' -v -count=1 -timeout 15m ./chaos/

NAT_ATTEMPTS ?= 20
nat-bench: build
	@bash scripts/natdeps.sh
	NAT_ATTEMPTS=$(NAT_ATTEMPTS) CSHARE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags chaos -run 'TestNAT$$' -v -count=1 -timeout 30m ./chaos/

demo: build testimage
	bash scripts/demo.sh

clean:
	rm -rf bin
