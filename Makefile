# Build, test and run fak. `make help` lists the targets.

GO        ?= go
BIN       := bin
# Directories holding code generated from the .proto files by `make generate`.
GENERATED := api/gen fsm/fsmpb

.DEFAULT_GOAL := build
# Run prerequisites one at a time even under -j: check-generate rewrites
# files that vet and the tests read (go parallelizes within each step).
.NOTPARALLEL:

.PHONY: help build test run generate check-generate lint vet fmt-check buf-lint bench clean

help:
	@echo "Targets:"
	@echo "  build           build bin/fak and bin/fakctl (static, CGO_ENABLED=0)"
	@echo "  test            vet, gofmt check, generated-code check, then all tests with -race"
	@echo "  run             build, then run a three-node dev fleet on loopback (bin/fak dev)"
	@echo "  generate        lint the .proto files and regenerate Go code with buf"
	@echo "  check-generate  fail if the generated code is stale"
	@echo "  lint            go vet, gofmt check and buf lint"
	@echo "  bench           run the fsm and cluster benchmarks"
	@echo "  clean           remove bin/"

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fak ./cmd/fak
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fakctl ./cmd/fakctl

test: vet fmt-check check-generate
	$(GO) test -race -count=1 -timeout 15m ./...

# `fak dev` prints the nodes' addresses and the token, and runs until Ctrl-C.
run: build
	$(BIN)/fak dev

generate: buf-lint
	$(GO) tool buf generate

check-generate: generate
	@if ! git diff --exit-code --stat -- $(GENERATED) || \
	    [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED))" ]; then \
	    git ls-files --others --exclude-standard -- $(GENERATED) | sed 's/^/untracked: /'; \
	    echo "generated code is stale: run make generate" >&2; \
	    exit 1; \
	fi
	@echo "generated code is up to date"

lint: vet fmt-check buf-lint

vet:
	$(GO) vet ./...

fmt-check:
	@echo "gofmt -l ."
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then \
	    echo "$$unformatted"; \
	    echo "these files are not gofmt-ed: run gofmt -w on them" >&2; \
	    exit 1; \
	fi

buf-lint:
	$(GO) tool buf lint

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./fsm/
	$(GO) test -run '^$$' -bench . -benchtime 5000x ./node/

clean:
	rm -rf $(BIN)
