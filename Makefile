# mkitfdb: see README.md. Every target runs with nothing but Go installed,
# except test-fdb (FoundationDB server and client) and proto (protoc).

GO        ?= go
FUZZTIME  ?= 10s
FUZZPKG   ?= ./...
BENCHTIME ?= 1s
BENCHCOUNT ?= 6

.PHONY: all generate test test-readme fuzz bench lint test-fdb check-generated

all: lint test

## generate: rewrite gen/ (and examples) from the schemas
generate:
	$(GO) generate ./...

## test: the README's test command; CI runs exactly this (.ci/run). It also
## vets and tests the nested benchmark modules: bench/codecs, which holds
## gen's codecs byte-identical to its hand-written baseline, and bench/river,
## whose harness must fire every timer and River job exactly once; and ends
## with test-readme. go test ./... runs no benchmark, fuzzing or README
## command: each test binary stays within a few minutes on a loaded 2-core
## machine.
test: lint
	$(GO) test -race -count=1 ./...
	$(GO) -C bench/codecs vet ./...
	$(GO) -C bench/codecs test -count=1 ./...
	$(GO) -C bench/river vet ./...
	$(GO) -C bench/river test -count=1 ./...
	$(MAKE) --no-print-directory test-readme

## test-readme: run every command of the README: the demo, the quick start
## as a module of its own, each benchmark command for one iteration (make
## bench: every benchmark once), make fuzz on one package, make generate's
## check (see internal/checks/readme). Plain go test only checks that each command
## is covered; MKITFDB_README_COMMANDS=1 makes it run them. README_TIMEOUT
## bounds the whole step, so that a hung command fails it (killed a minute
## before, the failure naming it) long before CI's limit; it is generous,
## since the step takes 1 min warm and 3 to 4 min cold on 2 loaded cores, and
## a time limit must not fail a slow machine. README_PARALLEL commands run
## side by side: many of them wait (builds, injected latency) rather than
## compute.
README_TIMEOUT ?= 20m
README_PARALLEL ?= 3
test-readme:
	MKITFDB_README_COMMANDS=1 $(GO) test -count=1 -parallel $(README_PARALLEL) -timeout $(README_TIMEOUT) ./internal/checks/readme

## fuzz: every native fuzz target (of FUZZPKG) for FUZZTIME each (default
## 10s); fails only on a real failure (see scripts/fuzz.sh)
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh $(FUZZPKG)

## bench: every benchmark, benchstat-friendly (BENCHCOUNT runs each)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./...

## lint: gofmt, every module tidy (go mod tidy -diff), go vet, and go vet of the FoundationDB engine's module
## (fdblayer/fdbengine, which needs cgo) where FoundationDB's C headers are
## found: in FDB_INCLUDE (default ../shared/fdb-c/include beside the
## checkout; vet compiles the cgo code, nothing links) or installed with
## libfdb_c. Without them it says so in one line.
FDB_INCLUDE ?= $(abspath $(CURDIR)/../shared/fdb-c/include)
lint: check-generated
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in . fdblayer/fdbengine bench/codecs bench/river; do \
	  $(GO) -C $$m mod tidy -diff >/dev/null || { echo "go.mod or go.sum of $$m is not tidy: run go -C $$m mod tidy"; exit 1; }; done
	$(GO) vet ./...
	@if [ -f "$(FDB_INCLUDE)/foundationdb/fdb_c.h" ]; then \
	  echo 'CGO_CFLAGS="-I$(FDB_INCLUDE)" $(GO) -C fdblayer/fdbengine vet ./...'; \
	  CGO_CFLAGS="-I$(FDB_INCLUDE)" $(GO) -C fdblayer/fdbengine vet ./...; \
	elif ldconfig -p 2>/dev/null | grep -q libfdb_c; then \
	  echo '$(GO) -C fdblayer/fdbengine vet ./...'; $(GO) -C fdblayer/fdbengine vet ./...; \
	else echo "lint: no FoundationDB headers in $(FDB_INCLUDE) and libfdb_c not installed; skipping go vet of fdblayer/fdbengine"; fi

## check-generated: fail when gen/, refdomain/, ordersgen/ (and the older
## ordersv1/ordersgen), bankgen/, dispatchgen/ or ledgergen/, or a schema's
## layout.lock, is not what its schema generates, or when a schema breaks its lock
check-generated:
	$(GO) run ./cmd/codegen -schema schema -out gen -pkg gen -check
	$(GO) run ./cmd/codegen -schema examples/orders/schema -out examples/orders/ordersgen -pkg ordersgen -check
	$(GO) run ./cmd/codegen -schema examples/orders/internal/ordersv1/schema -out examples/orders/internal/ordersv1/ordersgen -pkg ordersgen -unregistered -check
	$(GO) run ./cmd/codegen -schema refdomain/schema -out refdomain -pkg refdomain -check
	$(GO) run ./cmd/codegen -schema internal/testkit/bank/schema -out internal/testkit/bank/bankgen -pkg bankgen -check
	$(GO) run ./cmd/codegen -schema internal/testkit/dispatch/schema -out internal/testkit/dispatch/dispatchgen -pkg dispatchgen -check
	$(GO) run ./cmd/codegen -schema internal/testkit/ledger/schema -out internal/testkit/ledger/ledgergen -pkg ledgergen -check

## test-fdb: the FoundationDB engine module's tests (fdblayer/fdbengine:
## the store's conformance suite on a cluster, the engine's own tests, the
## tuple layer against the binding's) against a throwaway local
## FoundationDB
test-fdb:
	./scripts/test-fdb.sh
