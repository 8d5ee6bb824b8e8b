# Makefile — the README's two commands: `make run` (the main job) and `make test` (the suite).
BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
DEB_PKGS  := build-essential cmake pkg-config libopenblas-openmp-dev zlib1g-dev libcjson-dev \
             libzip-dev libomp-dev clang libclang-rt-dev libstb-dev dataset-fashion-mnist \
             openmpi-bin libopenmpi-dev fortunes libdnnl-dev \
             libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata libdlpack-dev \
             liblapacke-dev abigail-tools \
             python3-dev python3-numpy python3-pytest python3-venv python3-pip

.PHONY: all deps configure build run test asan tsan clean python

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
# Builds only what it runs (the library and the `tessera` command); `make test` builds the rest in
# the same folder (the tests, examples, benchmarks and the Python package).
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target tessera_cli
	$(BUILD)/tessera train --model lenet --data fashion-mnist --epochs 2

# The Python package (import tessera) in $(BUILD)/python: PYTHONPATH=$(BUILD)/python python3 ...
python: configure
	cmake --build $(BUILD) -j $(JOBS) --target tessera_python

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The sanitizer run of CI: ASan + UBSan with leak checking. Without CUDA: nvcc's host code is not
# instrumented, the GPU tests skip on CI's machines, and the Release build already compiles and
# links every .cu file with warnings as errors (this build took minutes of CI's 40 for nothing).
# oneDNN capped below AMX unless the caller caps it: creating oneDNN 2.6.3's AMX bf16 convolution
# (brgconv:avx512_core_amx_bf16, a stride-2 3x3 one over 11x7) reads past the end of an array of
# its own, which faults where ASan's allocator puts that array at the end of a mapping (glibc's heap
# always has its top chunk there); Tessera's code runs the same under AVX512-BF16's kernels
# (docs/ARCHITECTURE.md, "Vector ISA variants").
#
# One thread per test (OMP_NUM_THREADS=1): the sanitizers look at memory, and the Release suite
# already runs every kernel split over the host's cores (TSan: the threaded tests). Two 2-thread
# tests side by side under ctest -j2 took 1.5x as long as two 1-thread ones over the 40 heaviest
# tests, 4x for some (docs/TESTING.md, "CI's time"). JOBS is passed down as the parent counted
# them: nproc itself honours OMP_NUM_THREADS and would answer 1.
asan:
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} \
	ONEDNN_MAX_CPU_ISA=$${ONEDNN_MAX_CPU_ISA:-AVX512_CORE_BF16} $(MAKE) test JOBS=$(JOBS) BUILD=build-asan CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON -DTS_BUILD_BENCH=OFF -DTS_CUDA=OFF $(CMAKE_ARGS)"

# ThreadSanitizer over the tests that run threads (tests/test_threads.c: training in 4 threads at
# once, a model shared for inference; the loader's workers; data parallel's replica threads; the
# allocation-failure sweeps of training and the loader, whose errors cross threads). The kernels
# run without OpenMP and with the built-in GEMM there: libgomp, OpenBLAS and oneDNN are not
# instrumented, so their threads' accesses would be reported as races. No CUDA, no MPI.
TSAN_TESTS := test_threads test_loader test_loader_fast test_data_parallel \
              test_data_parallel_blocks test_fault_train test_fault_io
tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTS_TSAN=ON -DTS_OPENMP=OFF -DTS_BLAS=OFF \
	  -DTS_DNNL=OFF -DTS_MPI=OFF -DTS_CUDA=OFF -DTS_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir build-tsan \
	  --output-on-failure -j $(JOBS) -R '^($(subst $() ,|,$(TSAN_TESTS)))$$'

clean:
	rm -rf build build-asan build-tsan
