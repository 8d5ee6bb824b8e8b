# Makefile — the README's two commands: `make run` (the main job) and `make test` (the suite).
BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
DEB_PKGS  := build-essential cmake pkg-config libopenblas-openmp-dev zlib1g-dev libcjson-dev \
             libomp-dev clang libclang-rt-dev libstb-dev dataset-fashion-mnist \
             openmpi-bin libopenmpi-dev fortunes libdnnl-dev

.PHONY: all deps configure build run test asan clean

all: build

# Install what is missing (Debian/Ubuntu); silent when everything is present.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# LeNet-5 on Fashion-MNIST for 2 epochs on the best device present; prints the test accuracy.
run: build
	$(BUILD)/tessera train --model lenet --data fashion-mnist --epochs 2

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The sanitizer run of CI: ASan + UBSan with leak checking.
asan:
	$(MAKE) test BUILD=build-asan CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON -DTS_BUILD_BENCH=OFF $(CMAKE_ARGS)"

clean:
	rm -rf build build-asan
