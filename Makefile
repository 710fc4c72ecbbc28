# The Redis Cluster operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN ?= $(CURDIR)/bin
export KUBEBUILDER_ASSETS ?= $(BIN)
# bin/kubectl (make tools) matches the API server's release; every target uses it first.
export PATH := $(BIN):$(PATH)
CONTROLLER_GEN := go tool controller-gen
# One set of build flags for every go command make runs, and for the go builds the tests
# start (they inherit the environment): the tools (hack/build-tools.sh) and the images'
# binaries (hack/images.sh) are built with CGO_ENABLED=0 and -trimpath, and Go's build
# cache keys on both, so lint, the modules, the unit and e2e suites reuse the packages
# those builds compiled instead of compiling them a second time (a cold machine's CI).
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-16s %s\n",$$1,$$2}'

.PHONY: deps
deps: ## Install the Debian packages the tests and the demo need (apt-get as root).
	@bash hack/deps.sh

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager, kube-proxy, kube-scheduler, kubelet, kubectl, weed (SeaweedFS), kustomize, argocd, the test Vault (vaultserver) and the OCI registry (registry) into bin/ (no-op when present).
	@bash hack/build-tools.sh

.PHONY: images
images: ## Build the real nodes' images (pause, redis 7.0, redis 8.0, valkey 8.1, redis_exporter from Debian packages; the operator from this checkout; Argo CD from bin/argocd on Debian) into the per-user registry cache (root; no-op when up to date).
	@bash hack/images.sh

.PHONY: generate
generate: ## Generate deepcopy code and the argocd-cm patch from health.lua.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	go generate ./health/argocd

.PHONY: manifests
manifests: ## Generate the CRDs and RBAC under kustomize/base, then each overlay's render into kustomize/rendered (what the binary embeds).
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=kustomize/base/crd/bases
	go run ./hack/crdtrim kustomize/base/crd/bases/cache.redis.io_redisclusters.yaml
	$(CONTROLLER_GEN) rbac:roleName=redis-operator paths="./cmd/redis-operator;./controllers/...;./webhooks/..." output:rbac:artifacts:config=kustomize/base/rbac
	$(CONTROLLER_GEN) webhook paths=./webhooks/... output:webhook:artifacts:config=kustomize/base/webhook
	go run ./hack/rendermanifests

.PHONY: lint
lint: ## gofmt and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...

.PHONY: verify-generated
verify-generated: generate manifests api-docs ## Fail when generated files are out of date.
	@git diff --exit-code -- apis kustomize/base kustomize/components/argocd kustomize/rendered docs/reference || { echo "generated files are out of date: run make generate manifests api-docs"; exit 1; }

# The API reference, one page per version, generated from the Go types by crd-ref-docs
# (its own module, hack/tools/crd-ref-docs, run with go tool) with templates that escape
# the doc comments for mkdocs. Committed, so that it reads on the forge too; verify-generated
# checks it.
CRD_REF_DOCS := hack/tools/crd-ref-docs
.PHONY: api-docs
api-docs: ## Generate the API reference (docs/reference/v1beta1.md, v1alpha1.md) from apis/cache with crd-ref-docs.
	@for v in v1beta1 v1alpha1; do \
	  GOWORK=off go -C $(CRD_REF_DOCS) tool crd-ref-docs --log-level=WARN --max-depth=30 --renderer=markdown \
	    --config=$(CURDIR)/$(CRD_REF_DOCS)/config.yaml --templates-dir=$(CURDIR)/$(CRD_REF_DOCS)/templates \
	    --source-path=$(CURDIR)/apis/cache/$$v --output-path=$(CURDIR)/docs/reference/$$v.md || exit 1; \
	done

.PHONY: docs
docs: api-docs ## Build the documentation site from docs/ (mkdocs.yml) into _site/, strict: a broken link, a missing page or any warning fails.
	mkdocs build --strict --site-dir $(CURDIR)/_site

.PHONY: build
build: ## Build the operator binary into bin/.
	go build -o $(BIN)/redis-operator ./cmd/redis-operator

.PHONY: unit
unit: ## Unit and envtest suites of the main module; the tests that call t.Parallel (the topology engine's long real-Redis ones) run three at a time.
	go test ./... -count=1 -parallel 3 -timeout 20m

.PHONY: modules
modules: ## Vet and test the separate test modules (test Vault server, local control plane, Argo CD's own Lua VM).
	cd test/vaultserver && go vet ./... && go test -count=1 ./...
	cd test/localplane && go vet ./... && go test -count=1 -timeout 20m ./...
	cd test/argocdlua && go vet ./... && go test -count=1 ./...

# How many side-by-side scenarios (those calling t.Parallel, test/e2e/doc.go)
# run at once.
E2E_PARALLEL ?= 4
# The e2e tier (test/e2e/doc.go, Tiers): ci exercises every capability once
# (what make test runs); all adds the scenarios that repeat a ci scenario's
# coverage. Each top-level test declares its tier with tier(t, ...).
E2E_TIER ?= ci
E2E_TIMEOUT ?= 40m
E2E_LOG ?= $(BIN)/e2e.log
.PHONY: test-e2e
test-e2e: ## End-to-end suite, tier E2E_TIER (ci: every capability once, what make test runs; all: every scenario): the operator against the local control plane with real Redis (root). One start and one end line per scenario, then `e2e: N passed, N failed, N skipped (tier T)`.
	@E2E_TIER=$(E2E_TIER) bash hack/e2e.sh $(E2E_LOG) -count=1 -parallel $(E2E_PARALLEL) -timeout $(E2E_TIMEOUT)

# The scenarios whose failures depend on timing run twice more (three runs
# in all with test-e2e-all) on the machine loaded by the rest of CI. They
# run whatever their tier (E2E_TIER=all).
E2E_REPEAT_RUN ?= ^(TestDisruptive|TestDataSafety|TestMidMigration|TestOperatorKilled)$$/^(delete-all-pods|asymmetric-partition|pause|delete|scale-out-3-6|scale-in-6-3)$$
.PHONY: test-e2e-repeat
test-e2e-repeat: ## The timing-sensitive e2e scenarios twice more (every pod deleted, a partition, pause/delete mid-migration, the operator killed in a scale-out and a scale-in); part of test-e2e-all.
	@E2E_TIER=all bash hack/e2e.sh $(BIN)/e2e-repeat.log -count=2 -parallel $(E2E_PARALLEL) -timeout $(E2E_TIMEOUT) -run '$(E2E_REPEAT_RUN)'

.PHONY: test-e2e-all
test-e2e-all: ## Every e2e scenario, both tiers (ci and all; log bin/e2e-all.log), then test-e2e-repeat; not part of make test. Prints how long each part took.
	@bash hack/timed.sh e2e-all $(MAKE) --no-print-directory test-e2e E2E_TIER=all E2E_TIMEOUT=60m E2E_LOG=$(BIN)/e2e-all.log
	@bash hack/timed.sh e2e-repeat $(MAKE) --no-print-directory test-e2e-repeat

# Every benchmark appends its rows to $(BENCH_TABLE) (package test/benchtable);
# `make bench` empties it first and ends by printing the table (bench-table).
BENCH_TABLE ?= $(BIN)/bench.jsonl
export BENCH_TABLE

.PHONY: bench
bench: ## Benchmarks, ending with one table: resharding engine vs redis-cli (idle, under writes, in passes), apply→Ready with its stages (median of 3), failover, backup and restore MB/s with a writer's p99, many clusters, unrelated objects.
	@mkdir -p $(dir $(BENCH_TABLE)) && rm -f $(BENCH_TABLE)
	$(MAKE) --no-print-directory bench-reshard
	$(MAKE) --no-print-directory bench-reshard-load
	$(MAKE) --no-print-directory bench-reshard-passes
	$(MAKE) --no-print-directory bench-ready
	$(MAKE) --no-print-directory bench-failover
	go test -tags e2e -run '^$$' -bench BackupRestore -benchtime 1x -timeout 30m ./test/e2e/
	$(MAKE) --no-print-directory bench-many
	$(MAKE) --no-print-directory bench-unrelated
	@$(MAKE) --no-print-directory bench-table

.PHONY: bench-ready
bench-ready: images ## apply→Ready of 3×1, 5×1 and 10×2 on the local plane (the kubelet with containerd; the operator image of this checkout), median of 3, with where the time goes (pods scheduled, running, Redis up, MEET, replicas synced) and a pod's bound→Ready median.
	go test -tags e2e -run '^$$' -bench ApplyToReady -benchtime 3x -timeout 45m ./test/e2e/

.PHONY: bench-failover
bench-failover: images ## A 3×1 master lost under writes, 5 times by pod deletion and 5 by killing redis-server: time to the first write on its slots and to Ready.
	go test -tags e2e -run '^$$' -bench Failover -benchtime 1x -timeout 30m ./test/e2e/

.PHONY: bench-table
bench-table: ## Print the table of the rows the benchmarks recorded in $(BENCH_TABLE).
	@go run ./hack/benchtable $(BENCH_TABLE)

.PHONY: bench-short
bench-short: ## Short reshard under writes (3→4, 20 000 keys, 1 000 writes/s) that fails only on lost or failed writes or keys not verified.
	go test -run '^$$' -bench ReshardShort -benchtime 1x -timeout 10m ./controllers/topology/

.PHONY: bench-many
bench-many: ## 10, 30, 100 RedisClusters (3x0) under one operator (E2E_BENCH_COUNTS): RSS, idle CPU, pass p50/p99, API writes, Redis commands; the operator's RSS and CPU per cluster (10→30) and projected to 1000; scale-out ratio.
	go test -tags e2e -run '^$$' -bench ManyClusters -benchtime 1x -timeout 150m ./test/e2e/

.PHONY: test
test: ## Everything CI runs (.ci/run), with its own set-up: tools, the real nodes' images, lint, verify-generated, the docs site, modules, then unit, envtest and bench-short beside the e2e ci tier (hack/unit-beside-e2e.sh; make test-e2e-all runs the rest); prints how long each part took.
	@bash hack/timed.sh deps $(MAKE) --no-print-directory deps
	@bash hack/timed.sh tools $(MAKE) --no-print-directory tools
	@bash hack/timed.sh images $(MAKE) --no-print-directory images
	@bash hack/timed.sh lint $(MAKE) --no-print-directory lint
	@bash hack/timed.sh verify-generated $(MAKE) --no-print-directory verify-generated
	@bash hack/timed.sh docs $(MAKE) --no-print-directory docs
	@bash hack/timed.sh modules $(MAKE) --no-print-directory modules
	@bash hack/unit-beside-e2e.sh

IMG ?= ghcr.io/redis-operator/redis-operator:v0.1.0
CONTAINER_TOOL ?= docker
.PHONY: docker-build
docker-build: ## Build the operator image (not run in CI: there is no container engine there).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: bench-unrelated
bench-unrelated: ## Operator RSS with one cluster, before and after 2000 unrelated Secrets and 2000 ConfigMaps (target: within 10%).
	go test -tags e2e -run '^$$' -bench UnrelatedObjects -benchtime 1x -timeout 30m ./test/e2e/

.PHONY: bench-servers
bench-servers: ## Redis 8.0 and Valkey 8.1 on the host for the reshard benchmarks: trees of their images (make images) with redis-server/redis-cli wrappers in the per-user cache's servers/ (no-op when up to date).
	@bash hack/bench-servers.sh

# The reshard benchmarks run on every server in $(BENCH_SERVERS) (default: the host's
# redis-7.0 and each server bench-servers put in the cache), each against its own CLI;
# their timeouts are three times what one server needed.
.PHONY: bench-reshard
bench-reshard: bench-servers ## Time the engine against redis-cli rebalance, 3→4 and 4→8 masters at 200 000 and 1 000 000 keys, on Redis 7.0, Redis 8.0 and Valkey 8.1 (BENCH_SERVERS); ratio and 1M/200k growth.
	go test -run '^$$' -bench 'Reshard$$' -benchtime 1x -timeout 270m ./controllers/topology/

.PHONY: bench-reshard-load
bench-reshard-load: bench-servers ## The 200 000-key moves under 5 000 writes/s (100 B and 10 KB), per server as bench-reshard: wall time, write p50/p99/max, failed and lost writes, engine vs redis-cli.
	go test -run '^$$' -bench ReshardUnderLoad -benchtime 1x -timeout 270m ./controllers/topology/

.PHONY: bench-reshard-passes
bench-reshard-passes: ## Keys/s of a 3→4 200 000-key move in 1 s passes against one inline Reconcile (target ≥ 0.90).
	go test -run '^$$' -bench ReshardPasses -benchtime 1x -timeout 30m ./controllers/topology/

.PHONY: demo-gitops
demo-gitops: ## Argo CD core on the local plane installs and scales the operator and a RedisCluster from Git (hack/gitops-demo.sh).
	@bash hack/gitops-demo.sh

.PHONY: demo dev-up dev-down
demo: ## Run a 3x1 Redis Cluster on the local control plane; Ctrl-C stops everything and exits 0.
	@bash hack/localplane.sh demo
dev-up: ## Start the local plane and the operator in the background (KUBECONFIG=.localplane/dev/kubeconfig).
	@bash hack/localplane.sh dev-up
dev-down: ## Stop what dev-up started (its state stays).
	@bash hack/localplane.sh dev-down
