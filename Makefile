# podslo: `make test` runs every check CI runs; `make build` builds bin/podslo.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go

# The control-plane binaries are cached by Kubernetes version, so they are
# built once per machine and version (a cold kube-apiserver build takes
# about 5 minutes on 2 cores).
# TOOLS_DIR is the module that pins them: hack/tools for the default
# version, a module hack/versions writes for each other version of the
# matrix (make test-versions).
TOOLS_DIR ?= hack/tools
K8S_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' $(TOOLS_DIR)/go.mod | head -n 1)
CACHE_HOME := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
TESTBIN ?= $(CACHE_HOME)/podslo/testbin/$(K8S_VERSION)
export PODSLO_TESTBIN := $(TESTBIN)
export PODSLO_K8S_VERSION := $(K8S_VERSION)
# kwok and kwokctl (hack/kwok) fake nodes and pod lifecycles for the
# end-to-end tests; versioned by kwok's own version, under the same cache.
KWOK_VERSION := $(shell sed -n 's|^[[:space:]]*sigs.k8s.io/kwok \(v[^ ]*\).*|\1|p' hack/kwok/go.mod | head -n 1)
KWOKBIN ?= $(TESTBIN)/kwok-$(KWOK_VERSION)
export PODSLO_KWOKBIN := $(KWOKBIN)
# helm (hack/helm) renders and lints charts/podslo in the chart tests;
# versioned by helm's own version, under the same cache.
HELM_VERSION := $(shell sed -n 's|^[[:space:]]*helm.sh/helm/v4 \(v[^ ]*\).*|\1|p' hack/helm/go.mod | head -n 1)
HELM ?= $(CACHE_HOME)/podslo/helm-$(HELM_VERSION)/helm
export PODSLO_HELM := $(HELM)

# The release build: a static binary (no cgo, so it runs on an empty or
# distroless base), with paths trimmed and the build stamped into
# prometheus/common/version, which `podslo version` and podslo_build_info
# read. The date is the commit's, so a commit always builds the same
# binary and image; REVISION says "-dirty" when uncommitted changes (tracked
# or not, outside .gitignore) went into the build.
VERSION := $(shell cat VERSION)
REVISION := $(shell git rev-parse HEAD)$(shell test -z "$$(git status --porcelain)" || echo -dirty)
BRANCH := $(shell git rev-parse --abbrev-ref HEAD)
BUILD_USER ?= $(shell id -un)@$(shell hostname)
BUILD_DATE := $(shell TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd)
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) \
	-X $(VERSION_PKG).Branch=$(BRANCH) -X $(VERSION_PKG).BuildUser=$(BUILD_USER) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)
# make test builds without -trimpath (TRIMPATH=): outside -race, its builds
# and tests then share one compile of every dependency (CGO_ENABLED=0, no
# -trimpath, as internal/testenv's go build), where -trimpath would compile
# them all a second time. Releases and the Dockerfile keep -trimpath.
TRIMPATH ?= -trimpath
GOBUILD = CGO_ENABLED=0 $(GO) build $(TRIMPATH) -ldflags '$(LDFLAGS)'

# The image (make image): one static binary per platform on an empty base,
# written as an OCI layout by hack/image, offline. IMAGE_LICENSES is the
# org.opencontainers.image.licenses label: the repository's LICENSE.
IMAGE ?= ghcr.io/podslo/podslo
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_SOURCE ?= https://github.com/podslo/podslo
IMAGE_LICENSES ?= Apache-2.0
CA_CERTS ?= /etc/ssl/certs/ca-certificates.crt

.PHONY: build image image-test release test demo e2e screenshot unit testbin clusterbin nodebin runtimebin promstackbin kwokbin helmbin manifests lint bench fuzz mixin mixin-check dashboard-lint clean help

## build: bin/podslo, the release build (static, stamped with VERSION and the
## commit), and bin/podslo-exporter, the same program with the exporter
## alone (the podslo_exporter build tag: no agent, no demo, no clientset;
## less than half the size, and an exporter's memory is mostly its binary's
## pages). The default target.
build:
	$(GOBUILD) -o bin/podslo .
	$(GOBUILD) -tags podslo_exporter -o bin/podslo-exporter .

## image: the multi-arch OCI image layout in bin/image, tagged $(VERSION)
## (skopeo copy --all oci:bin/image:$(VERSION) docker://$(IMAGE):$(VERSION)
## pushes it). Needs the CA bundle of Debian's ca-certificates.
image:
	for p in $(IMAGE_PLATFORMS); do \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GOBUILD) -o bin/$${p/\//_}/podslo . && \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GOBUILD) -tags podslo_exporter -o bin/$${p/\//_}/podslo-exporter . || exit 1; \
	done
	cd hack/image && CGO_ENABLED=0 $(GO) run . --out ../../bin/image --name $(IMAGE) --version $(VERSION) --revision $(REVISION) \
	  --created $(BUILD_DATE) --source $(IMAGE_SOURCE) --licenses $(IMAGE_LICENSES) --ca-certs $(CA_CERTS) \
	  $(foreach p,$(IMAGE_PLATFORMS),--binary $(p)=../../bin/$(subst /,_,$(p))/podslo --exporter-binary $(p)=../../bin/$(subst /,_,$(p))/podslo-exporter)

## image-test: build the image for this machine's platform only, check the
## layout, and run its binary. The other platform's build is a cross
## compile of every package, 4 minutes of a cold make test on 2 cores: make
## release builds and checks both (TestRelease), and
## make image-test IMAGE_PLATFORMS="linux/amd64 linux/arm64" checks both too.
image-test: IMAGE_PLATFORMS = linux/$(shell $(GO) env GOARCH)
image-test: TRIMPATH =
image-test: image
	cd hack/image && CGO_ENABLED=0 $(GO) test -vet=off -count=1 -skip '^TestRelease$$' . -args -platforms '$(IMAGE_PLATFORMS)'

## release: everything release $(VERSION) ships, in bin/release, offline:
## the image layout as an OCI archive (podslo-image-$(VERSION).oci.tar:
## skopeo copy --all oci-archive:bin/release/podslo-image-$(VERSION).oci.tar
## docker://$(IMAGE):$(VERSION) pushes it), the static binaries, the
## packaged chart (podslo-$(VERSION).tgz: helm push it to oci://...), the
## release's CHANGELOG.md section (CHANGELOG-$(VERSION).md) and SHA256SUMS
## of them all; then it checks them (hack/image's TestRelease). Refused
## while Chart.yaml's version or appVersion is not VERSION, CHANGELOG.md has
## no "## $(VERSION)" section, or the tree has uncommitted changes. Every
## file is dated with the commit, so a commit always gives the same
## checksums.
RELEASE_DIR := bin/release
CHART_VERSION := $(shell sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$$/\1/p' charts/podslo/Chart.yaml)
CHART_APP_VERSION := $(shell sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$$/\1/p' charts/podslo/Chart.yaml)
COMMIT_TIME := $(shell git log -1 --format=%ct)
release: image helmbin
	@if [ "$(CHART_VERSION)" != "$(VERSION)" ] || [ "$(CHART_APP_VERSION)" != "$(VERSION)" ]; then \
	  echo "charts/podslo/Chart.yaml has version '$(CHART_VERSION)' and appVersion '$(CHART_APP_VERSION)', VERSION is '$(VERSION)': make them agree"; exit 1; fi
	@grep -qx '## $(VERSION)' CHANGELOG.md || { echo "CHANGELOG.md has no section '## $(VERSION)'"; exit 1; }
	@case "$(REVISION)" in *-dirty) echo "uncommitted changes: a release is built from a commit (git status)"; exit 1;; esac
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	tar --create --file $(RELEASE_DIR)/podslo-image-$(VERSION).oci.tar --format=ustar --sort=name \
	  --mtime=@$(COMMIT_TIME) --owner=0 --group=0 --numeric-owner --mode=u+rw,go+r,go-w -C bin/image .
	$(foreach p,$(IMAGE_PLATFORMS),cp bin/$(subst /,_,$(p))/podslo $(RELEASE_DIR)/podslo-$(VERSION).$(subst /,-,$(p)) && touch -d @$(COMMIT_TIME) $(RELEASE_DIR)/podslo-$(VERSION).$(subst /,-,$(p)) && ) true
	# helm package dates each file with its mtime: a copy dated with the commit.
	chart=$$(mktemp -d) && trap 'rm -rf "$$chart"' EXIT && cp -R charts/podslo "$$chart/podslo" && \
	  find "$$chart/podslo" -exec touch -d @$(COMMIT_TIME) {} + && \
	  HELM_CACHE_HOME="$$chart/cache" HELM_CONFIG_HOME="$$chart/config" HELM_DATA_HOME="$$chart/data" \
	  $(HELM) package "$$chart/podslo" --destination $(RELEASE_DIR)
	awk '/^## / { in_section = ($$0 == "## $(VERSION)") } in_section' CHANGELOG.md > $(RELEASE_DIR)/CHANGELOG-$(VERSION).md
	touch -d @$(COMMIT_TIME) $(RELEASE_DIR)/*
	cd $(RELEASE_DIR) && sha256sum -- $$(ls | grep -vx SHA256SUMS) > SHA256SUMS
	cd hack/image && $(GO) test -count=1 -run '^TestRelease$$' . -args -release ../../$(RELEASE_DIR)
	@echo "release $(VERSION) in $(RELEASE_DIR):" && cat $(RELEASE_DIR)/SHA256SUMS

## test: lint, build and check the image, build the real control plane if
## missing, run every test with -race, then the end-to-end test beside the
## short chaos run (root: it mounts a tmpfs; its report goes to
## hack/chaos/results/short.md, which git ignores).
## The alert, dashboard and end-to-end tests run Prometheus 3 and its
## promtool (make promstackbin).
# The real-node packages run outside -race, as the e2e does: the race
# detector only slows the real kubelet's timing there. Each has its own
# -timeout, so a hang fails with a stack dump instead of CI's deadline; the
# race step's is 30m, not go test's 10m: on a cold machine the exporter
# package alone ran past 10 minutes (docs/testing.md).
#
# What comes before the tests runs as two chains at once, each one build
# after another, beside a download of every module the builds need (which
# waits on the network, not the CPU, so that the builds find their modules
# there). The chains are laid out so that packages compile once
# (docs/testing.md, "How long make test takes"): go does not share a
# compile in progress between two builds, so a package both need, built
# by both at once, compiles twice.
#  - Chain A builds outside -race, CGO_ENABLED=0 without -trimpath: podslo
#    and its image first, then the Kubernetes binaries and kwok, which take
#    every package they share with podslo (k8s.io/api, client-go, grpc...)
#    from the cache, since the modules pin the same versions (make lint
#    holds it: hack/buildshare); then Helm, whose own requirements are
#    newer (x/net v0.60).
#  - Chain B: make lint (go vet -race compiles podslo's dependencies as the
#    race step needs them), then the builds whose modules share nothing
#    with chain A's: the runtime, Prometheus and its stack, the dashboard
#    linter.
# Each step prints its duration ("step NAME: N s"), and so do the test
# steps below, so that every CI log says where the time went.
PREREQS_A := image-test k8sbin kwokbin helmbin
PREREQS_B := lint runtimebin promstackbin dashboard-lint
.PHONY: test-prereqs prereqs-a prereqs-b moddownload
test-prereqs:
	@$(call step,prereqs,$(MAKE) -j3 --output-sync=target prereqs-a prereqs-b moddownload)
prereqs-a:
	@$(call run_steps,$(PREREQS_A))
prereqs-b:
	@$(call run_steps,$(PREREQS_B))

# run_steps TARGETS makes each target in turn, printing its duration.
run_steps = for t in $(1); do s=$$(date +%s); $(MAKE) --no-print-directory $$t || exit 1; echo "step $$t: $$(( $$(date +%s) - s )) s"; done

# moddownload fetches every module the test builds read: podslo's modules,
# and those of the releases built in the module cache (the runtime,
# Prometheus, Alertmanager). It never fails the run: a build downloads
# what it misses, and fails for itself.
moddownload:
	@s=$$(date +%s); for d in . hack/tools hack/kwok hack/helm hack/image hack/chaos hack/scale hack/harness dashboards/lint; do \
	  (cd $$d && $(GO) mod download) || echo "moddownload: $$d failed; its build will say why"; done; \
	for mv in github.com/containerd/containerd/v2@$(CONTAINERD_VERSION) github.com/opencontainers/runc@$(RUNC_VERSION) \
	  github.com/containernetworking/plugins@$(CNI_PLUGINS_VERSION) github.com/prometheus/prometheus@$(PROMETHEUS_VERSION) \
	  github.com/prometheus/alertmanager@$(ALERTMANAGER_VERSION); do \
	  dir=$(call module_dir,$${mv%@*},$${mv#*@}) && test -n "$$dir" && (cd "$$dir" && GOWORK=off $(GO) mod download) \
	    || echo "moddownload: $$mv failed; its build will say why"; done; \
	echo "step moddownload: $$(( $$(date +%s) - s )) s"

# step NAME,COMMAND runs COMMAND and prints how long it took, also when it
# fails.
step = s=$$(date +%s); if $(2); then echo "step $(1): $$(( $$(date +%s) - s )) s"; else rc=$$?; echo "step $(1): failed after $$(( $$(date +%s) - s )) s"; exit $$rc; fi

# The end-to-end test and the short chaos run go at once, each on its own
# kwok cluster: they mostly wait (chaos-short used 97 s of CPU in its
# 397 s, a quarter of one core), and the chaos run judges counts, never
# latencies. The real-node suites stay alone: they compare podslo's
# milliseconds with the kubelet's. Nothing runs beside the race step,
# whose compiles once made kwok 23 s late (docs/testing.md).
#
# Every go test of make test runs with -vet=off: make lint has run the
# whole of go vet on every module, a superset of go test's checks, and go
# test's own vet runs on every dependency too, for its facts (280 packages
# for lifecycle alone: go test -n), under another cache key (its subset of
# analyzers).
#
# Every dependency compiles twice, not four times: with -race (make lint's go
# vet -race and the race steps), and with CGO_ENABLED=0 without -trimpath
# (image-test, the Kubernetes binaries, kwok, the tests outside -race, the
# builds of internal/testenv and of chaos-short).
test: test-prereqs
	@$(call step,race,$(GO) test -vet=off -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/internal/realnode$$' -e '/e2e/realnode$$'))
	@$(call step,internal/realnode,CGO_ENABLED=0 $(GO) test -vet=off -count=1 -timeout 10m ./internal/realnode/)
	@$(call step,e2e/realnode,CGO_ENABLED=0 $(GO) test -vet=off -count=1 -timeout 30m ./e2e/realnode/)
	@$(call step,hack/harness,(cd hack/harness && $(GO) test -vet=off -race -count=1 ./...))
	@$(call step,hack/chaos,(cd hack/chaos && $(GO) test -vet=off -race -count=1 ./...))
	@$(call step,hack/scale,(cd hack/scale && $(GO) test -vet=off -race -count=1 ./...))
	@$(call step,e2e and chaos-short,CGO_ENABLED=0 $(MAKE) --no-print-directory -j2 --output-sync=target e2e chaos-short TRIMPATH=)

## demo: podslo on a simulated cluster (kwok), with a live table per class;
## Ctrl-C stops it. A first run builds the control plane and kwok (about 10
## minutes on 2 cores, behind a progress bar). DEMO_FLAGS passes flags, e.g.
## DEMO_FLAGS=--prometheus.
demo: build $(if $(findstring --prometheus,$(DEMO_FLAGS)),promstackbin)
	bin/podslo demo --source-dir . --prometheus-binary $(PODSLO_PROMETHEUS_DIR)/prometheus $(DEMO_FLAGS)

## e2e: the simulated cluster with a real Prometheus (part of `make test`).
## Alone and without -race: it compares measured latencies with the kwok
## stages' configured delays, and a loaded machine makes kwok late (the race
## detector slows the in-process exporter and agents several times). The
## same code runs under -race in the other packages' tests.
e2e: testbin clusterbin kwokbin promstackbin helmbin
	$(GO) test -vet=off -count=1 -timeout 20m ./e2e/

## screenshot: what the README opens with, from a demo cluster: its landing
## page as headless Chromium renders it (docs/img/landing.png) and `podslo
## report` (docs/img/report.txt). About 5 minutes.
screenshot: build
	hack/screenshot.sh

## unit: the tests that need no API server.
unit:
	$(GO) test -race -short ./...

## testbin: etcd and kube-apiserver, pinned in hack/tools, for the tests that
## need a real API server (about 5 minutes cold on 2 cores).
testbin:
	$(call k8s_build,etcd kube-apiserver)

## clusterbin: testbin and the rest of a real control plane, for kwok
## clusters (about 2 minutes more on 2 cores).
clusterbin:
	$(call k8s_build,etcd kube-apiserver kube-scheduler kube-controller-manager)

## nodebin: clusterbin, the container runtime, and kubelet and kube-proxy,
## pinned in hack/tools, for the real-node tests (internal/realnode). About
## 4.5 minutes more on 2 cores, 20 s with a warm Go build cache
## (docs/testing.md).
nodebin: runtimebin k8sbin

# k8sbin: the Kubernetes binaries of nodebin without the runtime, for
# test-prereqs, which builds the runtime in its other chain.
.PHONY: k8sbin
k8sbin:
	$(call k8s_build,etcd kube-apiserver kube-scheduler kube-controller-manager kubelet kube-proxy)

# Every Kubernetes binary is stamped as Kubernetes' own release build
# stamps it (hack/lib/version.sh): unstamped, the node reports
# v0.0.0-master, and so does kube-apiserver, which `helm install` then
# refuses against the chart's kubeVersion. The build date is the module's
# release time, not the day of the build.
K8S_GIT_MAJOR := $(word 1,$(subst ., ,$(K8S_VERSION:v%=%)))
K8S_GIT_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION:v%=%)))
K8S_VERSION_LDFLAGS = $(foreach pkg,k8s.io/client-go/pkg/version k8s.io/component-base/version,\
	-X $(pkg).gitVersion=$(K8S_VERSION) -X $(pkg).gitMajor=$(K8S_GIT_MAJOR) -X $(pkg).gitMinor=$(K8S_GIT_MINOR) \
	-X $(pkg).gitTreeState=clean -X $(pkg).buildDate=$$date)

# k8s_build builds those of the binaries named in $(1) that are missing
# into TESTBIN: etcd when absent, a Kubernetes binary when it does not say
# it is K8S_VERSION. The versioned path alone cannot tell a binary cached
# before the stamping (it says v0.0.0-master) from a stamped one, so an old
# cache is rebuilt once (the link only, with a warm Go build cache:
# docs/testing.md), and a fresh clone on a stamped cache builds nothing: no
# file prerequisites on purpose, as a fresh clone has new mtimes. All of
# them in one `go build`, which loads their package graph once and links
# each binary while the others still compile: a cold make test spent
# minutes linking them one after another. They are built into a temporary
# directory and moved, so that an interrupted build never leaves a
# truncated binary behind. etcd takes the stamp too; it reads none of it.
define k8s_build
	@mkdir -p $(TESTBIN) && missing= && for b in $(1); do \
	  if [ $$b = etcd ]; then [ -x $(TESTBIN)/etcd ] || missing="$$missing ./cmd/etcd"; \
	  elif [ "$$($(TESTBIN)/$$b --version 2>/dev/null)" != "Kubernetes $(K8S_VERSION)" ]; then missing="$$missing k8s.io/kubernetes/cmd/$$b"; fi; \
	done; \
	if [ -n "$$missing" ]; then \
	  tmp=$$(mktemp -d $(TESTBIN)/.build-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	  cd $(TOOLS_DIR) && date=$$($(GO) list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes) && \
	  echo "build$$missing ($(K8S_VERSION)) into $(TESTBIN)" && \
	  CGO_ENABLED=0 $(GO) build -ldflags "$(K8S_VERSION_LDFLAGS)" -o $$tmp/ $$missing && \
	  for p in $$missing; do mv $$tmp/$${p##*/} $(TESTBIN)/; done; \
	fi
endef

## runtimebin: the real node's container runtime, built offline from the
## Go module proxy and cached by version like the control plane:
## containerd (with ctr and the runc shim), runc and the CNI plugins the
## node's network uses (bridge, host-local, loopback). runc needs cgo and
## libseccomp (Debian: libseccomp-dev). About 3 minutes cold on 2 cores.
## The versions are pinned in internal/realnode/runtime.txt, which the
## real-node tests read too.
runtime_version = $(shell awk '$$1 == "$(1)" { print $$3 }' internal/realnode/runtime.txt)
CONTAINERD_VERSION := $(call runtime_version,containerd)
RUNC_VERSION := $(call runtime_version,runc)
CNI_PLUGINS_VERSION := $(call runtime_version,cni-plugins)
RUNTIMEBIN ?= $(CACHE_HOME)/podslo/runtime
export PODSLO_RUNTIMEBIN := $(RUNTIMEBIN)
PODSLO_CONTAINERD_DIR := $(RUNTIMEBIN)/containerd-$(CONTAINERD_VERSION)
PODSLO_RUNC := $(RUNTIMEBIN)/runc-$(RUNC_VERSION)/runc
PODSLO_CNI_DIR := $(RUNTIMEBIN)/cni-plugins-$(CNI_PLUGINS_VERSION)
runtimebin: $(addprefix $(PODSLO_CONTAINERD_DIR)/,containerd containerd-shim-runc-v2 ctr) $(PODSLO_RUNC) \
	$(addprefix $(PODSLO_CNI_DIR)/,bridge host-local loopback)

# Each is built in the module cache's copy of its release (read-only; the
# output goes to a temporary name in the cache, then moved), with its
# release build's tags and version stamp, without the storage drivers and
# the Rust library the node does not use.
module_dir = $$(cd / && $(GO) mod download -json $(1)@$(2) | sed -n 's|^[[:space:]]*"Dir": "\(.*\)",$$|\1|p')

# Binaries of one module and one set of flags are built by one go build,
# as the control plane's are: static_build_into,dir,flags,packages. Outside
# any go.work a release may carry.
static_build_into = tmp=$$(mktemp -d $(1)/.build-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	CGO_ENABLED=0 GOWORK=off $(GO) build $(2) -o $$tmp/ $(addprefix ./,$(3)) && for p in $(notdir $(3)); do mv $$tmp/$$p $(1)/; done

# containerd and ctr: one grouped target (&:), built together.
$(PODSLO_CONTAINERD_DIR)/containerd $(PODSLO_CONTAINERD_DIR)/ctr &:
	@mkdir -p $(PODSLO_CONTAINERD_DIR)
	dir=$(call module_dir,github.com/containerd/containerd/v2,$(CONTAINERD_VERSION)) && test -n "$$dir" && cd "$$dir" && \
	  $(call static_build_into,$(PODSLO_CONTAINERD_DIR),-trimpath -tags 'urfave_cli_no_docs no_btrfs no_devmapper no_zfs' \
	    -ldflags '-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)',cmd/containerd cmd/ctr)

$(PODSLO_CONTAINERD_DIR)/containerd-shim-runc-v2:
	@mkdir -p $(@D)
	dir=$(call module_dir,github.com/containerd/containerd/v2,$(CONTAINERD_VERSION)) && test -n "$$dir" && cd "$$dir" && \
	  CGO_ENABLED=0 $(GO) build -trimpath -tags 'urfave_cli_no_docs no_grpc' \
	    -ldflags '-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)' -o $@.tmp ./cmd/$(@F) && mv $@.tmp $@

$(PODSLO_RUNC):
	@mkdir -p $(@D)
	dir=$(call module_dir,github.com/opencontainers/runc,$(RUNC_VERSION)) && test -n "$$dir" && cd "$$dir" && \
	  CGO_ENABLED=1 $(GO) build -trimpath -buildmode=pie -tags 'seccomp urfave_cli_no_docs' -o $@.tmp . && mv $@.tmp $@

$(addprefix $(PODSLO_CNI_DIR)/,bridge loopback host-local) &:
	@mkdir -p $(PODSLO_CNI_DIR)
	dir=$(call module_dir,github.com/containernetworking/plugins,$(CNI_PLUGINS_VERSION)) && test -n "$$dir" && cd "$$dir" && \
	  $(call static_build_into,$(PODSLO_CNI_DIR),-trimpath -ldflags '-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(CNI_PLUGINS_VERSION)',plugins/main/bridge plugins/main/loopback plugins/ipam/host-local)

## promstackbin: Prometheus 3 and promtool, which the alert, dashboard and
## end-to-end tests run podslo's rules on, and Alertmanager and amtool (see
## below), built offline from their modules on
## the Go module proxy and cached by version like the runtime
## (internal/testenv/promstack.txt pins it): in the module cache's copy of
## the release, with its own go.mod (and not its go.work, which names
## modules the release leaves out), as its release build; with only the
## Kubernetes, file and HTTP service discoveries (its remove_all_sd tags),
## and without the web UI's assets, which need npm (the API is all the
## tests use); stamped with its version. About 6 minutes cold on 2 cores.
promstack_version = $(shell awk '$$1 == "$(1)" { print $$3 }' internal/testenv/promstack.txt)
PROMETHEUS_VERSION := $(call promstack_version,prometheus)
PROMSTACKBIN ?= $(CACHE_HOME)/podslo/promstack
export PODSLO_PROMSTACKBIN := $(PROMSTACKBIN)
PODSLO_PROMETHEUS_DIR := $(PROMSTACKBIN)/prometheus-$(PROMETHEUS_VERSION)
# v0.316.0 -> 3.16.0, as its VERSION file says.
prometheus_release = $(shell echo $(PROMETHEUS_VERSION) | sed -E 's/^v0\.([0-9])([0-9]+)\.([0-9]+)$$/\1.\2.\3/')

ALERTMANAGER_VERSION := $(call promstack_version,alertmanager)
PODSLO_ALERTMANAGER_DIR := $(PROMSTACKBIN)/alertmanager-$(ALERTMANAGER_VERSION)
OPERATOR_VERSION := $(call promstack_version,prometheus-operator)
PODSLO_OPERATOR_DIR := $(PROMSTACKBIN)/prometheus-operator-$(OPERATOR_VERSION)
promstackbin: $(addprefix $(PODSLO_PROMETHEUS_DIR)/,prometheus promtool) $(addprefix $(PODSLO_ALERTMANAGER_DIR)/,alertmanager amtool) \
  $(PODSLO_OPERATOR_DIR)/operator

# The Prometheus Operator's go.mod replaces its two API modules
# (pkg/apis/monitoring, pkg/client) by its own directories, which its
# module's zip leaves out, each being a module of its own: it is built in a
# copy of the module that takes them from the proxy instead, at the
# release's own version. Its CRDs (example/prometheus-operator-crd), which
# the chart and end-to-end tests install, are kept beside it in crds/.
operator_api_modules = github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring github.com/prometheus-operator/prometheus-operator/pkg/client
$(PODSLO_OPERATOR_DIR)/operator:
	@mkdir -p $(PODSLO_OPERATOR_DIR)
	dir=$(call module_dir,github.com/prometheus-operator/prometheus-operator,$(OPERATOR_VERSION)) && test -n "$$dir" && \
	  tmp=$$(mktemp -d $(PODSLO_OPERATOR_DIR)/.build-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	  cp -R "$$dir" "$$tmp/src" && chmod -R u+w "$$tmp/src" && cp -R "$$tmp/src/example/prometheus-operator-crd" "$$tmp/crds" && \
	  cd "$$tmp/src" && $(GO) mod edit $(foreach m,$(operator_api_modules),-dropreplace=$(m) -require=$(m)@$(OPERATOR_VERSION)) && \
	  CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod $(GO) build -trimpath \
	    -ldflags '-s -w -X github.com/prometheus/common/version.Version=$(OPERATOR_VERSION:v%=%) -X github.com/prometheus/common/version.Revision=$(OPERATOR_VERSION) -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.BuildUser=podslo' \
	    -o "$$tmp/" ./cmd/operator && rm -rf $(PODSLO_OPERATOR_DIR)/crds && mv "$$tmp/crds" $(PODSLO_OPERATOR_DIR)/ && mv "$$tmp/operator" $(PODSLO_OPERATOR_DIR)/

# Alertmanager's ui package embeds its web UI as built by npm (ui/app/dist),
# which its module does not carry: it is built in a copy of the module with
# a placeholder page there. Its API and amtool, which the tests use, are
# whole; its web UI is that page.
$(PODSLO_ALERTMANAGER_DIR)/alertmanager $(PODSLO_ALERTMANAGER_DIR)/amtool &:
	@mkdir -p $(PODSLO_ALERTMANAGER_DIR)
	dir=$(call module_dir,github.com/prometheus/alertmanager,$(ALERTMANAGER_VERSION)) && test -n "$$dir" && \
	  tmp=$$(mktemp -d $(PODSLO_ALERTMANAGER_DIR)/.build-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	  cp -R "$$dir" "$$tmp/src" && chmod -R u+w "$$tmp/src" && mkdir -p "$$tmp/src/ui/app/dist" && \
	  printf '<!doctype html>\n<title>Alertmanager</title>\n<p>Built by podslo from its module, without the web UI.\n' > "$$tmp/src/ui/app/dist/index.html" && \
	  cd "$$tmp/src" && CGO_ENABLED=0 GOWORK=off $(GO) build -trimpath \
	    -ldflags '-s -w -X github.com/prometheus/common/version.Version=$(ALERTMANAGER_VERSION:v%=%) -X github.com/prometheus/common/version.Revision=$(ALERTMANAGER_VERSION) -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.BuildUser=podslo' \
	    -o "$$tmp/" ./cmd/alertmanager ./cmd/amtool && mv "$$tmp/alertmanager" "$$tmp/amtool" $(PODSLO_ALERTMANAGER_DIR)/

$(PODSLO_PROMETHEUS_DIR)/prometheus $(PODSLO_PROMETHEUS_DIR)/promtool &:
	@mkdir -p $(PODSLO_PROMETHEUS_DIR)
	dir=$(call module_dir,github.com/prometheus/prometheus,$(PROMETHEUS_VERSION)) && test -n "$$dir" && cd "$$dir" && \
	  $(call static_build_into,$(PODSLO_PROMETHEUS_DIR),-trimpath -tags 'remove_all_sd enable_kubernetes_sd' \
	    -ldflags '-s -w -X github.com/prometheus/common/version.Version=$(prometheus_release) -X github.com/prometheus/common/version.Revision=$(PROMETHEUS_VERSION) -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.BuildUser=podslo',cmd/prometheus cmd/promtool)

## kwokbin: kwok and kwokctl, pinned in hack/kwok (about 3.5 minutes cold
## on 2 cores).
kwokbin: $(KWOKBIN)/kwok $(KWOKBIN)/kwokctl

$(KWOKBIN)/kwok $(KWOKBIN)/kwokctl &:
	@mkdir -p $(KWOKBIN)
	cd hack/kwok && tmp=$$(mktemp -d $(KWOKBIN)/.build-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	  CGO_ENABLED=0 $(GO) build -o $$tmp/ sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl && mv $$tmp/kwok $$tmp/kwokctl $(KWOKBIN)/

## helmbin: helm, pinned in hack/helm, for the chart tests (about 2 minutes
## cold on 2 cores). The version is stamped as helm's own release build does.
helmbin: $(HELM)

$(HELM):
	@mkdir -p $(@D)
	cd hack/helm && $(GO) build -trimpath -ldflags '-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' -o $@.tmp helm.sh/helm/v4/cmd/helm && mv $@.tmp $@

## manifests: regenerate the kustomize bases deploy/exporter and deploy/agent
## from charts/podslo; the chart tests fail while they are stale.
manifests: helmbin
	$(GO) generate ./charts

## lint: gofmt, go vet and go mod tidy -diff, in podslo and every separate
## module (hack/*, dashboards/lint), no test that skips but under -short
## (`make test` must fail, not pass, when a test cannot run), and no package
## that podslo's build and a test tool's both compile at two versions
## (hack/buildshare).
# go vet -race: the race steps of make test then find every dependency
# compiled (vet compiles them as the tests do).
lint:
	@out=$$(git grep -n -B2 -E '\b[tb]\.Skip(f|Now)?\(' -- '*_test.go' '*.go' ':!hack/tools' | awk '/testing\.Short\(\)/ { ok = NR } /[tb]\.Skip(f|Now)?\(/ && !/not a test/ && (NR - ok > 2 || !ok) { print }'); \
	  if [ -n "$$out" ]; then echo "a test skips outside -short (make test must fail instead):"; echo "$$out"; exit 1; fi
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -race ./...
	$(GO) mod tidy -diff
	$(GO) run ./hack/buildshare
	cd hack/tools && $(GO) mod tidy -diff
	cd hack/kwok && $(GO) mod tidy -diff
	cd hack/helm && $(GO) mod tidy -diff
	cd hack/scale && $(GO) mod tidy -diff && $(GO) vet -race ./...
	cd hack/image && $(GO) mod tidy -diff && $(GO) vet ./...
	cd hack/chaos && $(GO) mod tidy -diff && $(GO) vet -race ./...
	cd hack/harness && $(GO) mod tidy -diff && $(GO) vet -race ./...
	cd dashboards/lint && $(GO) mod tidy -diff

## mixin: regenerate alerts/prometheus_{rules,alerts}.yaml,
## dashboards/dashboards_out/ and the chart's rule and dashboard templates
## and monitoring values (charts/podslo) from alerts/slos.yaml.
mixin:
	$(GO) generate ./alerts ./dashboards

## mixin-check: fail when the committed mixin is not what `make mixin` writes
## (the Go tests check the same; this also catches stray files).
mixin-check: mixin
	@out=$$(git status --porcelain -- alerts dashboards charts/podslo); if [ -n "$$out" ]; then echo "mixin out of date: run make mixin and commit"; echo "$$out"; exit 1; fi

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
## kwok cluster grown to 1k, 10k and 100k pods (hack/scale), their RSS idle
## at 0 pods and, at each size, each of them SIGKILLed and restarted
## (--restart): time to a complete /metrics, RSS once quiet. Not part of CI
## nor of `make test`; about 45 minutes on 2 cores. Writes
## hack/scale/results/ and docs/img/scale-*.png. SCALE_FLAGS passes flags,
## e.g. SCALE_FLAGS=--sizes=1000,5000 for a quick run.
KSM_VERSION ?= v2.20.0
KSMBIN ?= $(CACHE_HOME)/podslo/ksm-$(KSM_VERSION)/kube-state-metrics
.PHONY: bench-scale
bench-scale: build testbin kwokbin $(KSMBIN)
	cd hack/scale && $(GO) run . --ksm $(KSMBIN) --restart $(SCALE_FLAGS)
	cd hack/scale && $(GO) run ./plot --in results/results.json --out ../../docs/img

## bench-memlimit: issue 12's "memory under a limit" (docs/benchmarks.md):
## hack/scale with podslo alone (no kube-state-metrics) at 100k pods, each
## podslo in a memory cgroup limited to MEMLIMIT with GOMEMLIMIT at 90% of
## it, as the chart sets them, then SIGKILLed and restarted on its state.
## Fails if a podslo is OOM-killed or exits. Needs root and cgroup memory.
## Writes hack/scale/results/memlimit.{json,md}; SCALE_FLAGS passes flags.
MEMLIMIT ?= 512Mi
.PHONY: bench-memlimit
bench-memlimit: build testbin kwokbin
	cd hack/scale && $(GO) run . --ksm "" --podslo-memory-limit $(MEMLIMIT) --restart --sizes 100000 \
		--out results/memlimit.json --markdown results/memlimit.md $(SCALE_FLAGS)

## bench-shards: issue 14's sharding measurement (docs/scaling.md): 100k
## kwok pods, one unsharded podslo alone, then 4 shards alone (--shard,
## --total-shards); RSS, scrape time and update CPU of each, the API
## server's watches and CPU, and the shards' sums checked against the one
## exporter. Not part of `make test`; about 30 minutes on 2 cores. Writes
## hack/scale/results/layout-shards.{json,md}; SCALE_FLAGS passes flags.
.PHONY: bench-shards bench-pernode
bench-shards: build testbin kwokbin
	cd hack/scale && $(GO) run . --layout shards --shards 4 --sizes 100000 $(SCALE_FLAGS)

## bench-pernode: the same for per-node mode: 100 kwok nodes of 100 pods,
## one podslo alone, then one podslo per node (--node-name) alone. About
## 10 minutes. Writes hack/scale/results/layout-per-node.{json,md}.
bench-pernode: build testbin kwokbin
	cd hack/scale && $(GO) run . --layout per-node --sizes 10000 --pods-per-node 100 $(SCALE_FLAGS)

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
## compaction and a 10 s full disk, in about 7 minutes; the last step of
## `make test`, beside the end-to-end test. Its state filesystem is a tmpfs: CI containers may have no
## loop device.
chaos-short: build testbin kwokbin
	cd hack/chaos && CGO_ENABLED=0 $(GO) run . --pods 300 --pods-per-node 50 --create-rate 30 --churn-rate 1.5 \
		--churn 315s --kills 4 --max-down 10s --outage 15s --compactions 1 --disk-full 10s \
		--sandbox-timeout 75s --min-life 20s --settle-timeout 5m --state-fs tmpfs \
		--out results/short.json --markdown results/short.md $(CHAOS_FLAGS)

# kube-state-metrics is built from its module on the Go module proxy, in the
# module cache, into the cache directory: its source never enters this
# repository. Built to a temporary name, as the control plane is.
$(KSMBIN):
	@mkdir -p $(@D)
	dir=$$(cd / && $(GO) mod download -json k8s.io/kube-state-metrics/v2@$(KSM_VERSION) | sed -n 's|^[[:space:]]*"Dir": "\(.*\)",$$|\1|p'); \
	test -n "$$dir" && cd "$$dir" && $(GO) build -trimpath -o $@.tmp . && mv $@.tmp $@

## test-versions: the real-node suite (e2e/realnode) against each supported
## Kubernetes minor (hack/versions/matrix.sh; VERSIONS overrides the list),
## each built from its module and cached by version like the default one,
## with the same containerd, runc and CNI plugins; rewrites the matrix in
## docs/compatibility.md. Not part of `make test`: about 15 minutes a
## version cold on 2 cores (the build), 5 warm. Needs root.
VERSIONS ?=
.PHONY: test-versions
test-versions:
	hack/versions/matrix.sh $(VERSIONS)

## clean: remove bin/. The caches of built binaries stay (see TESTBIN).
clean:
	rm -rf bin

## help: list the targets and what they do (these ## comments).
help:
	@awk '/^## [A-Za-z0-9_-]+:/ { line = substr($$0, 4); name = line; sub(/:.*/, "", name); sub(/^[^:]*: */, "", line); printf "\n  %-15s %s\n", name, line; next } \
	     /^## / { printf "  %-15s %s\n", "", substr($$0, 4) }' $(MAKEFILE_LIST)
