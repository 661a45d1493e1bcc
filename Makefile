# Kontinue. `make run-local` runs it on a local cluster with an example chain
# of a Job and a Deployment; `make test` runs every test. Both work on a fresh
# clone with only Go installed: they build what they need (the control plane
# from the Go module proxy, cached in ~/.cache/kontinue).

GO       ?= go
BIN      := _output/bin
STATICCHECK_VERSION := v0.8.2
E2E_TIMEOUT ?= 40m
E2E_REAL_TIMEOUT ?= 20m
E2E_RELEASE_TIMEOUT ?= 20m
ROBUSTNESS_TIMEOUT ?= 20m

.PHONY: all build generate test tools unit e2e e2e-main e2e-lane1 e2e-lane2 e2e-real robustness robustness-seeds kwok tekton kuttl debs chromium promtool conformance conformance-cartographer lint fmt vet staticcheck run-local e2e-kind crds controlplane realcontrollers bench clean

all: build

# The version of the next release: version/VERSION is the one source
# (CHANGELOG.md's newest entry and the chart's version agree with it:
# hack/release's TestOneVersion). `make release` builds it; `make build`
# stamps none, so the binary says VERSION-dev and its commit.
VERSION ?= $(shell cat version/VERSION)

build:
	$(GO) build -o $(BIN)/kontinue .

## test: lint, unit tests, the e2e suite on the local control plane (or
## $KUBECONFIG), the e2e suite on real workload controllers and Tekton
## (e2e/real, always on its own local cluster), the release's and the
## robustness suite's fixed seeds, and Cartographer's own kuttl suite
## (conformance): the suites in two lanes side by side (below).
test: tools lint unit
	@$(MAKE) --no-print-directory -j2 --output-sync=target e2e-lane1 e2e-lane2

## tools: everything the tests need from outside the repository, built or
## installed side by side (one's downloads overlap another's compiles); each
## is cached (~/.cache/kontinue, Go's caches, apt) and skipped when present.
tools:
	@$(MAKE) --no-print-directory -j6 controlplane kwok tekton kuttl debs $(BIN)/staticcheck

unit: controlplane promtool
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /e2e)
	$(GO) -C hack/crdgen test -count=1 ./...

## e2e: the e2e suites in two lanes side by side, each suite on its own
## cluster: ./e2e; ./e2e/real; ./e2e/release (a release built by the
## recipe, its chart installed, its image's binary run as the chart's
## Deployment would: needs root); the robustness suite's fixed seeds. The
## suites wait on controllers most of the time (./e2e keeps about 40% of 2
## cores busy), so two lanes take about the time of the longer. ./e2e is
## split in two by test name (E2E_LANE1: each half starts its own control
## plane and Kontinue) so that the lanes are about as long. Each lane's
## output is printed when it ends. `make test` adds the conformance suite
## to lane 1.
E2E_LANE1 := ^Test(Fault|GoTemplate|Dashboard|Helm|Rollout|Shard|Leader)
e2e: controlplane realcontrollers chromium
	@$(MAKE) --no-print-directory -j2 --output-sync=target e2e-lane1 e2e-lane2 E2E_CONFORMANCE=

## e2e-main: all of ./e2e in one go test.
e2e-main: controlplane chromium
	$(GO) test -count=1 -timeout $(E2E_TIMEOUT) ./e2e

E2E_CONFORMANCE ?= conformance
e2e-lane1: controlplane realcontrollers chromium build
	$(GO) test -count=1 -timeout $(E2E_TIMEOUT) -run '$(E2E_LANE1)' ./e2e
	$(GO) test -count=1 -timeout $(E2E_REAL_TIMEOUT) ./e2e/real
	$(if $(E2E_CONFORMANCE),@$(MAKE) --no-print-directory $(E2E_CONFORMANCE))

e2e-lane2: controlplane realcontrollers chromium
	$(GO) test -count=1 -timeout $(E2E_TIMEOUT) -skip '$(E2E_LANE1)' ./e2e
	$(GO) test -count=1 -timeout $(E2E_RELEASE_TIMEOUT) ./e2e/release
	@$(MAKE) --no-print-directory robustness-seeds

## robustness-seeds: the robustness suite's fixed seeds and its checks' own
## tests (e2e/robustness/README.md); part of e2e.
robustness-seeds: controlplane kwok
	$(GO) test -count=1 -timeout $(ROBUSTNESS_TIMEOUT) ./e2e/robustness/...

## robustness: random traffic and faults on the cluster with real
## controllers, every write checked against the API server's audit log
## (e2e/robustness/README.md): seeds one after the other for DURATION,
## from SEED (0: from the clock), TRAFFIC of traffic each; REPEAT runs
## each seed that many times; SHRINK=1 shrinks a failing op list.
DURATION ?= 30m
SEED ?= 0
TRAFFIC ?= 90s
REPEAT ?= 1
SHRINK ?=
robustness: controlplane kwok
	$(GO) test -count=1 -timeout 0 -v -run 'TestRobustness$$' ./e2e/robustness -args \
	  -robustness.duration=$(DURATION) -robustness.seed=$(SEED) -robustness.traffic=$(TRAFFIC) \
	  -robustness.repeat=$(REPEAT) $(if $(SHRINK),-robustness.shrink) $(ROBUSTNESS_ARGS)

## e2e-real: the suite on real workload controllers, kwok's fake nodes and
## Tekton alone (docs/testing.md).
e2e-real: realcontrollers
	$(GO) test -count=1 -timeout $(E2E_REAL_TIMEOUT) ./e2e/real

## chromium: Debian's chromium, which the dashboard's e2e test drives
## headless; installed with apt-get when missing (needs root).
chromium:
	@hack/install-chromium.sh >/dev/null

## promtool: Debian's promtool, which runs the PrometheusRule's unit tests
## (deploy/monitoring/prometheusrule_test.yaml); installed with apt-get when
## missing (needs root).
promtool:
	@hack/install-promtool.sh >/dev/null

## conformance: Cartographer v0.8.11's own kuttl suite, unmodified, against
## Kontinue on a fresh local control plane (docs/conformance.md). Run one
## folder with CONFORMANCE_ARGS="-focus workload-status".
conformance: controlplane build
	$(GO) run ./hack/conformance $(CONFORMANCE_ARGS)

## conformance-cartographer: the same suite in the same harness against
## Cartographer v0.8.11's own controller: the reference (not part of `test`).
conformance-cartographer: controlplane
	$(GO) run ./hack/conformance -controller cartographer $(CONFORMANCE_ARGS)

## controlplane: build kube-apiserver, kube-controller-manager, kube-scheduler and etcd once.
controlplane:
	@hack/install-controlplane.sh >/dev/null

## realcontrollers: build kwok and Tekton Pipelines' controller once (the
## cluster with real workload controllers: docs/testing.md).
realcontrollers: controlplane kwok tekton

kwok:
	@hack/install-kwok.sh >/dev/null

tekton:
	@hack/install-tekton.sh >/dev/null

kuttl:
	@hack/install-kuttl.sh >/dev/null

## debs: chromium and promtool from Debian, one after the other (apt holds
## one lock).
debs:
	@hack/install-chromium.sh >/dev/null
	@hack/install-promtool.sh >/dev/null

lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/controlplane/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(BIN)/staticcheck
	$(BIN)/staticcheck ./...

$(BIN)/staticcheck:
	GOBIN=$(abspath $(BIN)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## run-local: local cluster (workload controllers, kube-scheduler, two fake
## nodes played by kwok) + CRDs + Kontinue + examples/real-chain.yaml; Ctrl-C
## stops it all (docs/walkthrough.md).
run-local: controlplane build
	$(GO) run ./hack/runlocal

## generate: write every generated file. The CRDs (crds/*.yaml) from their Go
## types (crds/kinds.go, reconciler/api, reconciler/status) with hack/crdgen,
## controller-gen's generator pinned in its own module; deploy/crds.yaml, the
## chart's crds/ and deploy/install.yaml (hack/installyaml); docs/crds.md
## (hack/crddocs). Unit tests fail when one is stale.
generate:
	$(GO) run -C hack/crdgen .
	$(GO) run ./hack/installyaml
	$(GO) run ./hack/crddocs

## crds: print the CRDs Kontinue serves.
crds: build
	@$(BIN)/kontinue crds

## bench: convergence, floor, API calls, idle writes, change latency and memory
## at 1,000 workloads on the local control plane (bench/README.md). Change the
## run with BENCH_ARGS, e.g. make bench BENCH_ARGS="-n 200 -idle 30s".
bench: controlplane build
	$(GO) run ./bench -kontinue $(BIN)/kontinue $(BENCH_ARGS)

## e2e-kind: for machines with Docker: build the image, install it in a kind cluster, run the suite there.
e2e-kind:
	IMAGE=$(IMAGE) hack/e2e-kind.sh

.PHONY: install-yaml image e2e-rbac release publish

## release: everything a release needs, without Docker, in
## _output/release/$(VERSION): CLI archives for linux/darwin × amd64/arm64
## with SBOMs, the image as an OCI layout, install.yaml and crds.yaml and the
## chart pinned to the image's digest, the krew manifest (with RELEASE_URL),
## SHA256SUMS (hack/release; docs/install.md). Pushes nothing: it says what
## `make publish` would push. Optional: REGISTRY=ghcr.io/you (default: the
## chart's image.repository), RELEASE_URL=<folder the archives are downloaded
## from>. `make test` runs it (hack/release's test, e2e/release).
release:
	$(GO) run ./hack/release -version "$(VERSION)" -registry "$(REGISTRY)" -url "$(RELEASE_URL)" $(RELEASE_ARGS)

## publish: the same, then push the image to $(REGISTRY)/kontinue:$(VERSION)
## and the chart to oci://$(REGISTRY)/charts/kontinue (credentials of
## ~/.docker/config.json and `helm registry login`; no Docker, no helm CLI).
publish:
	$(GO) run ./hack/release -version "$(VERSION)" -registry "$(REGISTRY)" -url "$(RELEASE_URL)" -push $(RELEASE_ARGS)
IMAGE ?= kontinue:dev

## install-yaml: regenerate deploy/install.yaml (namespace + the chart deploy/chart rendered with its defaults), deploy/crds.yaml and the chart's crds/.
install-yaml:
	$(GO) run ./hack/installyaml

## image: build the container image $(IMAGE) with Docker: the release's
## image (Dockerfile). It says VERSION-dev unless VERSION is given.
image:
	docker build $(if $(filter file,$(origin VERSION)),,--build-arg VERSION=$(VERSION)) -t $(IMAGE) .

## e2e-rbac: the e2e suite with Kontinue running as the kontinue service account of deploy/ (not part of `test`).
e2e-rbac: controlplane build
	hack/e2e-rbac.sh

clean:
	rm -rf _output
