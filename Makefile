# Reprise: the two commands a new user needs are `make run` and `make test`.
# Everything heavy (the Python environment, Kafka's jars, the Kubernetes binaries) is cached
# outside the repository under $(REPRISE_CACHE), so a fresh clone reuses it.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON_BOOT ?= python3
REPRISE_CACHE ?= $(HOME)/.cache/reprise
export REPRISE_CACHE
ENV_KEY := $(shell sha256sum constraints.txt | cut -c1-12)
VENV := $(REPRISE_CACHE)/venv-$(ENV_KEY)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# The integration tests spend most of their time waiting on Kafka and the API server, not on the CPU, so
# `make test` spreads the test files over several pytest workers, each with its own platform (broker,
# control plane, operator). TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 3

.PHONY: help venv platform run lint lint-go test test-unit test-node test-integration crds vectors bench soak demo demo-jvm demo-backfill demo-rewind demo-lake e2e-kind image constraints clean-platform

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# The environment holds only the pinned dependencies (constraints.txt is the lock file); the project's
# own packages run from this checkout through PYTHONPATH, so one cached environment serves every clone.
export PYTHONPATH := $(CURDIR):$(CURDIR)/operator

$(STAMP): constraints.txt
	@$(PYTHON_BOOT) -m local_platform.prerequisites python
	@test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check -r constraints.txt
	@touch $(STAMP)

venv: $(STAMP) ## the Python environment (cached by the hash of constraints.txt)
	@ln -sfn $(VENV) .venv

platform: venv ## build or fetch Kafka, etcd, the Kubernetes control plane, kubectl, helm, the Spark operator, promtool and Prometheus into the cache
	@$(PY) -m local_platform build

# TENANTS=1: the multi-tenant form (a SASL listener with ACLs, namespaces team-a and team-b; docs/security.md).
TENANTS ?=
# NODE=real: a kubelet + containerd node, the operator installed by the Helm chart in the Dockerfile's image (root and
# six Debian packages; docs/local-platform.md). The default, the node agent, needs neither.
NODE ?=
run: platform ## run the operator: on the local platform, or on the cluster in $KUBECONFIG (TENANTS=1: multi-tenant Kafka; NODE=real: the chart on a real node)
	@$(PY) -m local_platform run-operator $(if $(TENANTS),--local --multi-tenant) $(if $(NODE),--local --node $(NODE))

# mypy's cache per checkout (two worktrees writing one cache corrupt it), outside the repository.
MYPY_CACHE := $(REPRISE_CACHE)/mypy/$(shell echo '$(CURDIR)' | sha256sum | cut -c1-12)

# The Java build's output per checkout too, outside the repository.
JAVA_LINT_BUILD := $(REPRISE_CACHE)/java-lint/$(shell echo '$(CURDIR)' | sha256sum | cut -c1-12)

lint: venv ## ruff, the import-linter layer contracts, mypy, and Java's formatter check and javac -Xlint (the first step of `make test`)
	@RUFF_CACHE_DIR=$(REPRISE_CACHE)/ruff $(VENV)/bin/ruff check --quiet .
	@RUFF_CACHE_DIR=$(REPRISE_CACHE)/ruff $(VENV)/bin/ruff format --check --quiet .
	@$(VENV)/bin/lint-imports --no-cache --no-logo
	@$(PY) -m mypy --cache-dir $(MYPY_CACHE) -p reprise_operator -m replay_worker.contract
	@cd java && mvn -B -P lint -Dreprise.build.dir=$(JAVA_LINT_BUILD) -DskipTests clean verify >$(JAVA_LINT_BUILD).log 2>&1 \
		|| { grep -E '^\[(ERROR|WARNING)\]' $(JAVA_LINT_BUILD).log; exit 1; }
	@# javac's lint warnings fail the build too, but for sun.misc.Signal's, which no flag can silence (see java/pom.xml).
	@! grep -E '^\[WARNING\] .*\.java' $(JAVA_LINT_BUILD).log | grep -v 'sun.misc.Signal is internal proprietary API'
	@$(MAKE) --no-print-directory lint-go

# The Go modules: gofmt's layout and go vet's checks (the build cache stays in Go's own cache).
GO_MODULES ?= go examples/seed003-go
lint-go: ## gofmt and go vet over the Go modules
	@command -v gofmt >/dev/null || { echo "lint-go: gofmt not found; install Go (https://go.dev/dl/)"; exit 1; }
	@for m in $(GO_MODULES); do \
		bad=$$(cd $$m && gofmt -l .); \
		test -z "$$bad" || { echo "lint-go: not gofmt-formatted in $$m: $$bad (run: gofmt -w $$m)"; exit 1; }; \
		(cd $$m && GOFLAGS=-buildvcs=false go vet ./...) || { echo "lint-go: go vet failed in $$m"; exit 1; }; \
	done

test: platform lint ## install everything the suite needs, lint, then run it
	@$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

test-unit: venv ## only the fast unit tests (no platform)
	@$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# One process: one real node per machine at a time (containerd's image store in the cache is locked).
test-node: platform ## the real node's tests (kubelet + containerd, images from the Dockerfile; root, see docs/local-platform.md)
	@REPRISE_NODE=real $(PY) -m pytest tests/integration/real_node -p no:randomly $(PYTEST_ARGS)

crds: venv ## generate crds/ and the chart's CRDs from the typed models
	@$(PY) -m reprise_operator.api.generate

vectors: venv ## generate conformance/vectors/ (the handover protocol's test vectors for every port) from the Python reference
	@$(PY) -m replay_worker.conformance

bench: platform ## the benchmarks, as ratios against baselines measured in the same run
	@$(PY) -m benchmarks

soak: platform ## long fault loops, run by hand
	@$(PY) -m pytest tests/soak -p no:cacheprovider $(PYTEST_ARGS)

demo: venv ## after `make run`: a Handover Reconsume on a few hundred thousand records, shown until Complete
	@$(PY) -m examples.demo

demo-jvm: venv ## after `make run`: a Handover Reconsume of the JVM example service (Java guard and replay role)
	@$(PY) -m examples.demo_jvm

demo-backfill: venv ## after `make run`: a Backfill of three users, complete once two downstream groups consumed them
	@$(PY) -m examples.demo.backfill

demo-rewind: venv ## after `make run`: a Rewind of a live group, its plan approved, then the rollback from its ConfigMap
	@$(PY) -m examples.demo.rewind

demo-lake: venv ## after `make run`: a LakeReplay from a generated Parquet lake, then on to the live topic at an exact seam
	@$(PY) -m examples.demo.lake

e2e-kind: ## on a host with Docker: the end-to-end suite on a kind cluster
	@if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then \
	  echo "e2e-kind skipped: no Docker engine on this host (kind needs one); run it where 'docker info' works"; exit 0; fi; \
	  kind create cluster --name reprise --config local_platform/kind.yaml && \
	  KUBECONFIG=$$(kind get kubeconfig-path --name reprise 2>/dev/null || echo $$HOME/.kube/config) $(PY) -m pytest tests/integration

image: ## build the operator/worker image and the Spark image (needs a Docker engine)
	docker build -t reprise:dev -f Dockerfile .
	docker build -t reprise-spark:dev -f spark_app/Dockerfile .

constraints: ## re-resolve constraints.txt from pyproject.toml
	@$(PYTHON_BOOT) -m venv /tmp/reprise-constraints && /tmp/reprise-constraints/bin/pip install -q -e '.[test]' && \
	  { echo "# Exact versions for a reproducible install"; /tmp/reprise-constraints/bin/pip freeze | grep -v -e '^-e' -e '^#'; } > constraints.txt

clean-platform: venv ## stop a platform left running by `make run`
	@$(PY) -m local_platform down
