# caudal — the two commands of the quick start are `make run` and `make test`.
BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= $(shell nproc)
CMAKE     ?= cmake
GENERATOR ?= Ninja

.PHONY: deps build build-asan run simulate test test-valkey test-asan nemesis package image bench fuzz format clean

deps:
	@./scripts/install-deps

build: deps
	@$(CMAKE) -S . -B $(BUILD_DIR) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

run: build
	./scripts/run-demo $(BUILD_DIR)/caudal

# Every algorithm against the fixed window's worst case: a table, and a chart in build/.
simulate: build
	./scripts/simulate-demo $(BUILD_DIR)/caudal

test: build
	ctest --test-dir $(BUILD_DIR) -j $(JOBS) --output-on-failure --timeout 300

# The Redis suites alone on Valkey (label valkey; `make test` runs them too): docs/stores.md.
test-valkey: build
	ctest --test-dir $(BUILD_DIR) -L valkey -j $(JOBS) --output-on-failure --timeout 400

# The whole suite again under AddressSanitizer and UndefinedBehaviorSanitizer.
build-asan: deps
	@$(CMAKE) -S . -B $(ASAN_DIR) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCAUDAL_SANITIZE=address,undefined -DCAUDAL_BUILD_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	$(CMAKE) --build $(ASAN_DIR) -j $(JOBS)

test-asan: build-asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_DIR) -j $(JOBS) --output-on-failure --timeout 600

# The nemesis (docs/testing.md): random faults from SEED for DURATION seconds against a Redis
# Cluster (TOPOLOGY=sentinel: a Sentinel group) and four instances, then the checker; the run is
# kept in $(BUILD_DIR)/nemesis-<seed> (nemesis-sentinel-<seed>), replacing an earlier one.
DURATION ?= 1800
SEED     ?= 1
TOPOLOGY ?= cluster
NEMESIS_RUN = $(BUILD_DIR)/nemesis-$(if $(filter cluster,$(TOPOLOGY)),,$(TOPOLOGY)-)$(SEED)
nemesis: build
	rm -rf $(NEMESIS_RUN)
	/usr/bin/python3 tests/nemesis/nemesis.py --bin $(BUILD_DIR) --duration $(DURATION) \
	  --seed $(SEED) --topology $(TOPOLOGY) --out $(NEMESIS_RUN)

# A .deb (CPack): $(BUILD_DIR)/caudal_<version>-1_<arch>.deb; docs/operations.md, "Installing".
package: build
	$(CMAKE) --build $(BUILD_DIR) --target package

# The container image, an OCI archive built from Debian 12 packages with no container engine:
# $(BUILD_DIR)/image/caudal-image.tar and its package list; docs/operations.md, "Container image".
image: package
	./packaging/image/build-image "$$(ls -t $(BUILD_DIR)/caudal_*.deb | head -1)" $(BUILD_DIR)/image

bench: build
	./bench/run-all $(BUILD_DIR)

fuzz: deps
	@$(CMAKE) -S . -B build-fuzz -G $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DCAUDAL_BUILD_FUZZ=ON -DCAUDAL_BUILD_TESTS=OFF \
	  -DCAUDAL_BUILD_BENCH=OFF >/dev/null
	$(CMAKE) --build build-fuzz -j $(JOBS)
	./fuzz/run-all build-fuzz

format:
	find include src tests bench fuzz proto -name '*.h' -o -name '*.cc' -o -name '*.proto' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) build-fuzz
