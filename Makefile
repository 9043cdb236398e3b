# planproof: the two set-up commands of the README.
#   make run   install what is missing, build, check every spec in verify-specs/
#   make test  install what is missing, build, run the whole test suite (ctest)
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build run test clean docs

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

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

docs: build
	cmake --build $(BUILD) --target planproof-docs

clean:
	rm -rf $(BUILD)
