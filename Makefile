# podslo: `make test` runs every check CI runs; `make build` builds bin/podslo.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go

# The control-plane binaries are cached by Kubernetes version, so they are
# built once per machine and version (a cold kube-apiserver build takes
# about 5 minutes on 2 cores).
K8S_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' hack/tools/go.mod | head -n 1)
CACHE_HOME := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
TESTBIN ?= $(CACHE_HOME)/podslo/testbin/$(K8S_VERSION)
export PODSLO_TESTBIN := $(TESTBIN)
# kwok and kwokctl (hack/kwok) fake nodes and pod lifecycles for the
# end-to-end tests; versioned by kwok's own version, under the same cache.
KWOK_VERSION := $(shell sed -n 's|^[[:space:]]*sigs.k8s.io/kwok \(v[^ ]*\).*|\1|p' hack/kwok/go.mod | head -n 1)
KWOKBIN ?= $(TESTBIN)/kwok-$(KWOK_VERSION)
export PODSLO_KWOKBIN := $(KWOKBIN)

.PHONY: build test demo e2e unit testbin clusterbin kwokbin lint bench fuzz mixin mixin-check dashboard-lint clean

build:
	$(GO) build -o bin/podslo .

## test: lint, build the real control plane if missing, run every test with -race.
## The alert and dashboard tests need promtool (Debian: apt-get install prometheus).
test: lint dashboard-lint testbin clusterbin kwokbin
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v '/e2e$$')
	cd hack/chaos && $(GO) test -race -count=1 ./...
	$(MAKE) e2e
	$(MAKE) chaos-short

## demo: podslo on a simulated cluster (kwok), with a live table per class;
## Ctrl-C stops it. A first run builds the control plane and kwok (about 10
## minutes on 2 cores, behind a progress bar). DEMO_FLAGS passes flags, e.g.
## DEMO_FLAGS=--prometheus.
demo: build
	bin/podslo demo --source-dir . $(DEMO_FLAGS)

## e2e: the simulated cluster with a real Prometheus (part of `make test`).
## Alone and without -race: it compares measured latencies with the kwok
## stages' configured delays, and a loaded machine makes kwok late (the race
## detector slows the in-process exporter and agents several times). The
## same code runs under -race in the other packages' tests.
e2e: testbin clusterbin kwokbin
	$(GO) test -count=1 -timeout 20m ./e2e/

## unit: the tests that need no API server.
unit:
	$(GO) test -race -short ./...

testbin: $(TESTBIN)/etcd $(TESTBIN)/kube-apiserver

# No file prerequisites on purpose: a fresh clone has new mtimes, and the
# versioned path already says when a rebuild is due. Build to a temporary
# name so an interrupted build never leaves a truncated binary behind.
$(TESTBIN)/etcd:
	@mkdir -p $(@D)
	cd hack/tools && $(GO) build -o $@.tmp ./cmd/etcd && mv $@.tmp $@

$(TESTBIN)/kube-apiserver:
	@mkdir -p $(@D)
	cd hack/tools && $(GO) build -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver && mv $@.tmp $@

## clusterbin: the rest of a real control plane, for kwok clusters (about
## 2 minutes for both after testbin, on 2 cores).
clusterbin: testbin $(TESTBIN)/kube-scheduler $(TESTBIN)/kube-controller-manager

$(TESTBIN)/kube-scheduler $(TESTBIN)/kube-controller-manager:
	@mkdir -p $(@D)
	cd hack/tools && $(GO) build -o $@.tmp k8s.io/kubernetes/cmd/$(@F) && mv $@.tmp $@

## kwokbin: kwok and kwokctl, pinned in hack/kwok (about 3.5 minutes cold
## on 2 cores).
kwokbin: $(KWOKBIN)/kwok $(KWOKBIN)/kwokctl

$(KWOKBIN)/kwok $(KWOKBIN)/kwokctl:
	@mkdir -p $(@D)
	cd hack/kwok && $(GO) build -o $@.tmp sigs.k8s.io/kwok/cmd/$(@F) && mv $@.tmp $@

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd hack/tools && $(GO) mod tidy -diff
	cd hack/kwok && $(GO) mod tidy -diff
	cd hack/scale && $(GO) mod tidy -diff && $(GO) vet ./...
	cd hack/chaos && $(GO) mod tidy -diff && $(GO) vet ./...
	cd dashboards/lint && $(GO) mod tidy -diff

## mixin: regenerate alerts/prometheus_{rules,alerts}.yaml and
## dashboards/dashboards_out/ from alerts/slos.yaml.
mixin:
	$(GO) generate ./alerts ./dashboards

## mixin-check: fail when the committed mixin is not what `make mixin` writes
## (the Go tests check the same; this also catches stray files).
mixin-check: mixin
	@out=$$(git status --porcelain -- alerts dashboards); if [ -n "$$out" ]; then echo "mixin out of date: run make mixin and commit"; echo "$$out"; exit 1; fi

## dashboard-lint: grafana/dashboard-linter, pinned in dashboards/lint, on every dashboard.
dashboard-lint:
	cd dashboards/lint && for f in ../dashboards_out/*.json; do $(GO) tool dashboard-linter lint --strict -c ../dashboard-linter.yaml "$$f" >/dev/null || { $(GO) tool dashboard-linter lint --strict -c ../dashboard-linter.yaml "$$f"; exit 1; }; done

## fuzz: fuzz the pod -> observation step for FUZZTIME, then keep the corpus
## it found under lifecycle/testdata, where `go test` replays it every run.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzStep$$' -fuzztime $(FUZZTIME) ./lifecycle/
	@mkdir -p lifecycle/testdata/fuzz/FuzzStep
	cp -n "$$($(GO) env GOCACHE)"/fuzz/github.com/podslo/podslo/lifecycle/FuzzStep/* lifecycle/testdata/fuzz/FuzzStep/ 2>/dev/null || true
	@echo "corpus: $$(ls lifecycle/testdata/fuzz/FuzzStep | wc -l) inputs in lifecycle/testdata/fuzz/FuzzStep"

## bench: the benchmarks of docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./...

## bench-scale: the scale benchmark of docs/benchmarks.md ("Scale on kwok"):
## podslo with and without per-pod series next to kube-state-metrics, on one
## kwok cluster grown to 10k, 50k and 100k pods (hack/scale). Not part of CI
## nor of `make test`; about 40 minutes on 2 cores. Writes
## hack/scale/results/ and docs/img/scale-*.png. SCALE_FLAGS passes flags,
## e.g. SCALE_FLAGS=--sizes=1000,5000 for a quick run.
KSM_VERSION ?= v2.20.0
KSMBIN ?= $(CACHE_HOME)/podslo/ksm-$(KSM_VERSION)/kube-state-metrics
.PHONY: bench-scale
bench-scale: build testbin kwokbin $(KSMBIN)
	cd hack/scale && $(GO) run . --ksm $(KSMBIN) $(SCALE_FLAGS)
	cd hack/scale && $(GO) run ./plot --in results/results.json --out ../../docs/img

## chaos: the chaos run of docs/reliability.md (hack/chaos): 10k pods
## churning on a kwok cluster while the exporter is SIGKILLed 20 times,
## kube-apiserver stops for 60 s, etcd is compacted and the state
## filesystem fills up; every exported histogram and counter is compared
## with a ground truth read from etcd. Not part of `make test`; about 30
## minutes on 2 cores; needs root (it loop-mounts the state filesystem).
## Writes hack/chaos/results/. CHAOS_FLAGS passes flags.
.PHONY: chaos chaos-short
chaos: build testbin kwokbin
	cd hack/chaos && $(GO) run . --out results/full.json --markdown results/full.md $(CHAOS_FLAGS)

## chaos-short: the same with 300 pods, 4 kills, a 15 s outage, one
## compaction and a 10 s full disk, in about 7 minutes (part of `make test`).
chaos-short: build testbin kwokbin
	cd hack/chaos && $(GO) run . --pods 300 --pods-per-node 50 --create-rate 30 --churn-rate 1.5 \
		--churn 285s --kills 4 --max-down 10s --outage 15s --compactions 1 --disk-full 10s \
		--sandbox-timeout 45s --min-life 20s --settle-timeout 5m \
		--out results/short.json --markdown results/short.md $(CHAOS_FLAGS)

# kube-state-metrics is built from its module on the Go module proxy, in the
# module cache, into the cache directory: its source never enters this
# repository. Built to a temporary name, as the control plane is.
$(KSMBIN):
	@mkdir -p $(@D)
	dir=$$(cd / && $(GO) mod download -json k8s.io/kube-state-metrics/v2@$(KSM_VERSION) | sed -n 's|^[[:space:]]*"Dir": "\(.*\)",$$|\1|p'); \
	test -n "$$dir" && cd "$$dir" && $(GO) build -trimpath -o $@.tmp . && mv $@.tmp $@

clean:
	rm -rf bin
