# The two commands of the README, each doing all of its set-up on a fresh Debian 12
# machine: `make demo` runs the main job, `make test` runs every test.
# A second run is incremental: packages are checked, not reinstalled; the build is ninja's.

BUILD      ?= build
DATA       ?= $(BUILD)/data
JOBS       ?= 2
PYTHON     ?= /usr/bin/python3
CMAKE_ARGS ?=
FASHION    ?= /usr/share/datasets/fashion-mnist
# ccache hashes absolute include paths; relative to the checkout, a fresh clone elsewhere
# (CI) still hits the cache.
export CCACHE_BASEDIR := $(CURDIR)

DEB_PACKAGES := build-essential cmake ninja-build ccache pkg-config git \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev \
  libeigen3-dev zlib1g-dev libopenblas-dev pybind11-dev python3-dev python3-numpy \
  python3-pytest python3-pip python3-venv libgtest-dev libgmock-dev libbenchmark-dev \
  python3-kubernetes yamllint dataset-fashion-mnist iproute2 python3-matplotlib prometheus-cpp-dev chromium \
  librocksdb-dev etcd-server

.PHONY: all deps configure build data demo demo-local test bench clean

all: build

# Installs whatever Debian package is missing (needs root; prints what it lacks otherwise).
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	    || { echo "error: could not install:" $$missing; exit 1; }; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DPython3_EXECUTABLE=$(PYTHON) \
	  $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache) \
	  $(CMAKE_ARGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Training data in the project's record format, converted once from the Debian package.
data: build
	@mkdir -p $(DATA)/fashion-mnist
	@[ -f $(DATA)/fashion-mnist/train.plrec.index ] || \
	  $(BUILD)/bin/pl-convert idx --images $(FASHION)/train-images-idx3-ubyte.gz \
	    --labels $(FASHION)/train-labels-idx1-ubyte.gz --out $(DATA)/fashion-mnist/train.plrec
	@[ -f $(DATA)/fashion-mnist/test.plrec.index ] || \
	  $(BUILD)/bin/pl-convert idx --images $(FASHION)/t10k-images-idx3-ubyte.gz \
	    --labels $(FASHION)/t10k-labels-idx1-ubyte.gz --out $(DATA)/fashion-mnist/test.plrec

# The main job: a master, 2 pservers and 2 trainers on 127.0.0.1 train the MLP on
# Fashion-MNIST. Part-way through one trainer is SIGKILLed and later a new one joins;
# the job still finishes every pass and reports the test accuracy.
DEMO_PASSES ?= 8
demo: data
	$(BUILD)/bin/pl-launch --pservers 2 --trainers 2 --data $(DATA)/fashion-mnist/train.plrec \
	  --passes $(DEMO_PASSES) --chunks_per_task 2 --kill_trainer_after_s 10 --add_trainer_after_s 20 -- \
	  $(BUILD)/bin/pl-trainer --model mlp --threads 1 --batch_size 64 --optimizer adam --lr 0.001 \
	    --test_data $(DATA)/fashion-mnist/test.plrec --log_every_s 10

# The same model in one process, for comparison.
demo-local: data
	$(BUILD)/bin/pl-trainer --model mlp --data $(DATA)/fashion-mnist --epochs 10 --threads $(JOBS)

# PL_MUTEX_DEADLOCK_CHECKS=1: the binaries keep abseil's lock-order checks under test
# (paddle_like/core/runtime.h); a job run by hand skips them.
test: data
	cd $(BUILD) && PL_MUTEX_DEADLOCK_CHECKS=1 ctest --output-on-failure -j$(JOBS) --timeout 900

bench: data
	bash benchmarks/run_all.sh $(BUILD)

clean:
	rm -rf $(BUILD)
