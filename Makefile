# Build, test and run fak. `make help` lists the targets.

GO        ?= go
BIN       := bin
# Directories holding code generated from the .proto files by `make generate`.
GENERATED := api/gen fsm/fsmpb

.DEFAULT_GOAL := build
# Run prerequisites one at a time even under -j: check-generate rewrites
# files that vet and the tests read (go parallelizes within each step).
.NOTPARALLEL:

# The long chaos run of `make chaos`: CHAOS_DURATION of faults, CHAOS_SEED
# (0 = random, printed), CHAOS_MODE process or docker.
CHAOS_DURATION ?= 10m
CHAOS_SEED     ?= 0
CHAOS_MODE     ?= process
# The soak of `make soak`: SOAK_RUNS runs of SOAK_DURATION in each mode,
# every run with a fresh random seed.
SOAK_RUNS      ?= 10
SOAK_DURATION  ?= 5m
# Every package except the chaos runs, which `test` runs after them on their
# own so their fleets do not compete for the CPU with the cluster tests.
# The slowest packages first: go test runs -p (GOMAXPROCS) at once in
# this order, and node's cluster tests alone take about six minutes. The
# browser witness comes after the others: beside node, both took twice as
# long.
SLOW_PKGS = ./node ./fsm ./cmd/fak ./cmd/fakctl ./e2e ./cluster ./e2e/witness
UNIT_PKGS = $$({ $(GO) list $(SLOW_PKGS); $(GO) list ./...; } | grep -v -e '/chaos$$' -e '/deploy$$' | awk '!seen[$$0]++')

# The compose fleet of deploy/: `docker compose` when the plugin exists,
# else docker-compose; project "fak" (containers fak_n1_1 or fak-n1-1).
COMPOSE       ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
FLEET         := $(COMPOSE) -p fak -f deploy/docker-compose.yml
IMAGE         ?= fak:dev
FLEET_TIMEOUT ?= 90

.PHONY: image fleet-up fleet-down fleet-clean
.PHONY: help build test vet-race test-chaos-short test-compose run chaos soak generate check-generate lint vet fmt-check buf-lint bench bench-runner bench-gateway bench-etcd fuzz clean

help:
	@echo "Targets:"
	@echo "  build           build bin/fak and bin/fakctl (static, CGO_ENABLED=0)"
	@echo "  test            vet, gofmt check, generated-code check, all tests with -race, short chaos runs"
	@echo "  chaos           the long chaos run (CHAOS_DURATION=10m, CHAOS_SEED, CHAOS_MODE=process|docker)"
	@echo "  soak            SOAK_RUNS (10) random-seed runs of SOAK_DURATION (5m) in process mode, then in docker mode"
	@echo "  run             build, then run a three-node dev fleet on loopback (bin/fak dev)"
	@echo "  generate        lint the .proto files and regenerate Go code with buf"
	@echo "  check-generate  fail if the generated code is stale"
	@echo "  lint            go vet, gofmt check and buf lint"
	@echo "  bench           run the fsm and cluster benchmarks"
	@echo "  bench-runner    real agents: runner overhead, streaming, 50 model sessions (docs/speed.md)"
	@echo "  bench-etcd      fak beside etcd v3.7: one client's latency, 64 clients' rate (docs/speed.md)"
	@echo "  fuzz            run every fuzz target for FUZZTIME (30s) each; make test runs their seed corpora"
	@echo "  bench-gateway   the metering gateway: overhead at 64 streams, exactness over 10,000 calls (docs/speed.md)"
	@echo "  image           build the FROM scratch image fak:dev (deploy/Dockerfile) around bin/"
	@echo "  fleet-up        start the three-node compose fleet (deploy/), wait until every node is ready"
	@echo "  fleet-down      stop and remove its containers and network (keeps the data volumes)"
	@echo "  fleet-clean     fleet-down and remove the data volumes too"
	@echo "  clean           remove bin/"

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fak ./cmd/fak
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fakctl ./cmd/fakctl

test: vet-race fmt-check check-generate
	$(GO) test -race -count=1 -timeout 15m $(UNIT_PKGS)
	$(MAKE) --no-print-directory test-chaos-short
	$(MAKE) --no-print-directory test-compose

# About three minutes of faults: a fixed seed (issue 12's regression run) and
# a random (printed) seed in process mode, a random seed in docker mode, and
# a deliberately broken build the harness must reject.
test-chaos-short:
	$(GO) test -race -count=1 -timeout 15m -v ./chaos

# The secured compose fleet of deploy/, built, driven by fakctl through its
# published ports, its leader's container stopped, then removed (skipped
# without a Docker engine, except under CI=true).
test-compose:
	$(GO) test -count=1 -timeout 10m -v ./deploy

chaos: build
	$(GO) run ./cmd/fakchaos -duration $(CHAOS_DURATION) -seed $(CHAOS_SEED) -mode $(CHAOS_MODE)

# A soak: every run prints its line as it ends, then a table of all of them;
# exit status non-zero if any failed. The two modes can also run side by
# side: go run ./cmd/fakchaos -runs 10 -duration 5m -mode docker.
soak: build
	$(GO) run ./cmd/fakchaos -runs $(SOAK_RUNS) -duration $(SOAK_DURATION) -mode process
	$(GO) run ./cmd/fakchaos -runs $(SOAK_RUNS) -duration $(SOAK_DURATION) -mode docker

# `fak dev` prints the nodes' addresses and the token, and runs until Ctrl-C.
run: build
	$(BIN)/fak dev

# Old outputs are removed first, so a renamed or deleted .proto leaves no
# stale generated file behind.
generate: buf-lint
	find $(GENERATED) -name '*.go' -delete
	$(GO) tool buf generate
	@$(GEN_SUM) > $(GEN_STAMP)

# The stamp: one SHA-256 over what make generate read (the .proto files,
# buf's two configs, the pinned versions of buf and of the two plugins'
# modules) and what it wrote. check-generate regenerates — which compiles
# buf from source, about three minutes on a fresh machine — only when the
# tree no longer matches the stamp; then any difference is stale code (or
# a stamp not committed with it).
GEN_STAMP := api/generated.sha256
GEN_SUM = { find api/proto fsm/proto -name '*.proto' | LC_ALL=C sort | xargs sha256sum; \
	sha256sum buf.yaml buf.gen.yaml; \
	$(GO) list -m github.com/bufbuild/buf google.golang.org/protobuf connectrpc.com/connect; \
	find $(GENERATED) -name '*.go' | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -d' ' -f1

check-generate:
	@if [ "$$($(GEN_SUM))" = "$$(cat $(GEN_STAMP) 2>/dev/null)" ] && \
	    [ -z "$$(git ls-files --others --exclude-standard -- $(GENERATED))" ]; then \
	    echo "generated code is up to date: its .proto files, tools and output match $(GEN_STAMP)"; \
	    exit 0; \
	fi; \
	echo "$(GEN_STAMP) does not match the tree: regenerating"; \
	$(MAKE) --no-print-directory generate && \
	if ! git diff --exit-code --stat -- $(GENERATED) $(GEN_STAMP) || \
	    [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED) $(GEN_STAMP))" ]; then \
	    git ls-files --others --exclude-standard -- $(GENERATED) $(GEN_STAMP) | sed 's/^/untracked: /'; \
	    echo "generated code is stale: run make generate and commit $(GENERATED) and $(GEN_STAMP)" >&2; \
	    exit 1; \
	fi; \
	echo "generated code is up to date"

lint: vet fmt-check buf-lint

vet:
	$(GO) vet ./...

# make test vets with -race, the tests' build flags, so a fresh machine
# compiles every package once for both instead of twice.
vet-race:
	$(GO) vet -race ./...

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

# Fuzz targets, PACKAGE:TARGET. `go test` (so make test) runs each over its
# seed corpus; `make fuzz` mutates from there for FUZZTIME each.
FUZZTIME ?= 30s
FUZZ_TARGETS = ./fsm:FuzzApply ./guard:FuzzParseHook ./cluster/snapshotfile:FuzzReadSnapshotFile \
	./api/gateway:FuzzUsageReaders ./node/workspace:FuzzUnmarshalManifest ./node/runner/exec:FuzzDecodeLine \
	./cmd/fak:FuzzConfigFile ./node:FuzzAPIRequests

fuzz:
	@for t in $(FUZZ_TARGETS); do \
	    pkg=$${t%%:*}; name=$${t##*:}; \
	    echo "== $$name ($$pkg) for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./fsm/
	$(GO) test -run '^$$' -bench 'ClusterApply|Append|RawRaft|Describe' -benchtime 5000x ./node/
	$(GO) test -run '^$$' -bench 'MoveIdleSession' -benchtime 500x ./node/
	$(GO) test -run '^$$' -bench 'RecoverDeadNode' -benchtime 3x ./node/

# Real agents in sessions (issue 14): the runner's overhead around a model
# call, a 2,000 tokens/s stream, 50 model sessions at once, beside echo.
# Each benchmark builds its own fleet once; one op is its whole workload.
bench-runner:
	$(GO) test -run '^$$' -bench 'BenchmarkRunner' -benchtime 1x ./node/

bench-gateway:
	$(GO) test -run '^$$' -bench 'BenchmarkGateway' -benchtime 1x ./node/

# fak and etcd v3.7 side by side (issue 17): raw hashicorp/raft, fak's API
# alone (a stale read) and fak's appends through the API, one client then
# 64, then etcd (bench/etcd, its own module: three embedded members in one
# process, like fak's test fleet), in one run.
bench-etcd:
	$(GO) test -run '^$$' -bench 'RawRaftApply/log=(boltdb|wal)$$|ClusterApply/clients=1$$|DescribeStale/clients=1$$|BenchmarkAppend/clients=1/' -benchtime 3000x ./node/
	$(GO) test -run '^$$' -bench 'RawRaftApply/log=wal,appliers=64|ClusterApply/clients=64|DescribeStale/clients=64|BenchmarkAppend/clients=64/batch=1$$' -benchtime 20000x ./node/
	cd bench/etcd && $(GO) run . -puts-1 3000 -puts-64 20000 2>/dev/null

clean:
	rm -rf $(BIN) chaos-out

# No base image and nothing pulled: the context is bin/, the static binaries.
image: build
	docker build -t $(IMAGE) -f deploy/Dockerfile $(BIN)

# deploy/secrets (git-ignored) holds the fleet's API tokens, gossip key and
# TLS certificates; made once here (remove it to make new ones).
deploy/secrets:
	deploy/gen-secrets.sh deploy/secrets 172.29.74 $(BIN)/fak

fleet-up: image deploy/secrets
	$(FLEET) up -d
	@echo "waiting up to $(FLEET_TIMEOUT)s for n1 n2 n3 to be healthy (fak health --ready)"
	@for i in $$(seq $(FLEET_TIMEOUT)); do \
	    s=$$(for n in n1 n2 n3; do docker inspect -f '{{.State.Health.Status}}' $$($(FLEET) ps -q $$n); done | sort -u | tr '\n' ' '); \
	    if [ "$$s" = "healthy " ]; then \
	        echo "fleet ready: . deploy/secrets/fakctl.env && bin/fakctl fleet"; exit 0; fi; \
	    sleep 1; \
	done; $(FLEET) ps; echo "fleet not healthy after $(FLEET_TIMEOUT)s: $$s" >&2; exit 1

fleet-down:
	$(FLEET) down

fleet-clean:
	$(FLEET) down -v
