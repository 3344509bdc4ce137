# accelrun: one GNU Makefile for everything (house style §9).
#
#   make                 build build/bin/accelrun, build/lib/libaccelrun.{a,so}
#   make test            unit + golden + fuzz-replay tests (installs missing Debian packages)
#   make demo            build, then show `accelrun check` and `accelrun env` on an example
#   make install         PREFIX=/usr/local DESTDIR=
#   make fuzz            build the libFuzzer target and run it (FUZZ_SECONDS=600)
#   make oracle          regenerate tests/golden/env from the real `accelerate launch`
#   make bench           benchmarks against peers, as ratios
#
# Switches: SANITIZER=address|undefined|thread  WERROR=1  NO_CUDA=1  V=1

PREFIX    ?= /usr/local
# where install puts the libraries and pkgconfig/ (make deb: /usr/lib/<multiarch>)
LIBDIR    ?= $(PREFIX)/lib
DESTDIR   ?=
BUILD     ?= build
CC        ?= cc
SANITIZER ?=
WERROR    ?=
NO_CUDA   ?=
FUZZ_SECONDS ?= 600

ifeq ($(V),1)
Q :=
else
Q := @
endif

VERSION := 0.1.0

# ---------------------------------------------------------------- flags
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Wwrite-strings -Wundef -Wswitch-enum -Wno-missing-field-initializers
ifeq ($(WERROR),1)
WARN += -Werror
endif

HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong
OPT    := -O2 -g
ifneq ($(SANITIZER),)
ifeq ($(filter $(SANITIZER),address undefined thread),)
$(error SANITIZER must be address, undefined or thread, not '$(SANITIZER)')
endif
OPT    := -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZER)
ifeq ($(SANITIZER),undefined)
OPT    += -fno-sanitize-recover=all
endif
HARDEN :=
BUILD  := build-$(SANITIZER)
endif

YAML_CFLAGS := $(shell pkg-config --cflags yaml-0.1 2>/dev/null)
YAML_LIBS   := $(shell pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml)
HWLOC_CFLAGS := $(shell pkg-config --cflags hwloc 2>/dev/null)
HWLOC_LIBS   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
CJSON_CFLAGS := $(shell pkg-config --cflags libcjson 2>/dev/null)
CJSON_LIBS   := $(shell pkg-config --libs libcjson 2>/dev/null || echo -lcjson)

INCLUDES := -Icore/include -Itopology/include -Ickpt/include -Itests/harness
override CFLAGS := -std=gnu11 -fPIC $(OPT) $(HARDEN) $(WARN) $(INCLUDES) $(YAML_CFLAGS) \
                   $(CJSON_CFLAGS) $(HWLOC_CFLAGS) -MMD -MP $(CFLAGS)
override LDFLAGS := $(if $(SANITIZER),-fsanitize=$(SANITIZER)) -Wl,-z,relro -Wl,-z,now \
                    -Wl,-z,noexecstack $(LDFLAGS)

# ---------------------------------------------------------------- sources
BASE_SRC   := $(wildcard core/base/*.c)
CONFIG_SRC := $(wildcard core/config/*.c)
ENV_SRC    := $(wildcard core/env/*.c)
TOPO_SRC   := $(wildcard topology/*.c)
LIB_SRC    := $(BASE_SRC) $(CONFIG_SRC) $(ENV_SRC) $(TOPO_SRC)
# What the SPANK plugin links: never the runtime below (DESIGN, Layout).
PLUGIN_LIBS := $(YAML_LIBS) $(if $(TOPO_SRC),$(HWLOC_LIBS) -ldl) -lm
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)

# The runtime for native trainers: bootstrap and collectives.  core/comm/nccl*.c
# builds only where the CUDA toolkit with NCCL is found (NO_CUDA=1 forces
# that off); every other file always builds.  NCCL_HOME: where nccl.h and
# libnccl are when not in the toolkit (the nvidia-nccl wheel's folder, say;
# its libnccl.so.2 has no unversioned link).
# CUDA_HOME: /usr/local/cuda where it is a toolkit, else the kit of NVIDIA's
# PyPI wheels that `make test` assembles (scripts/cuda-kit.sh) when it is there.
CUDA_KIT   := $(shell sh scripts/cuda-kit.sh --path)
CUDA_HOME  ?= $(if $(wildcard /usr/local/cuda/include/cuda_runtime.h),/usr/local/cuda,$(if \
              $(wildcard $(CUDA_KIT)/.complete),$(CUDA_KIT),/usr/local/cuda))
NCCL_HOME  ?= $(CUDA_HOME)
NCCL_SRC   := $(wildcard core/comm/nccl*.c)
ifeq ($(NO_CUDA),1)
HAVE_NCCL  :=
else
HAVE_NCCL  := $(and $(wildcard $(NCCL_HOME)/include/nccl.h),$(wildcard $(CUDA_HOME)/include/cuda_runtime.h))
endif
RUNTIME_SRC := $(filter-out $(NCCL_SRC),$(wildcard core/bootstrap/*.c core/comm/*.c core/shard/*.c \
                                                  core/preflight/*.c ckpt/*.c))
ifneq ($(HAVE_NCCL),)
RUNTIME_SRC += $(NCCL_SRC)
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
NCCL_LIBDIR := $(firstword $(wildcard $(NCCL_HOME)/lib64 $(NCCL_HOME)/lib))
NCCL_RPATH := -Wl,-rpath,$(NCCL_LIBDIR)
CUDA_CFLAGS := -isystem $(CUDA_HOME)/include \
               $(if $(filter-out $(CUDA_HOME),$(NCCL_HOME)),-isystem $(NCCL_HOME)/include)
CUDA_LIBS  := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) \
              $(if $(filter-out $(CUDA_LIBDIR),$(NCCL_LIBDIR)),-L$(NCCL_LIBDIR) $(NCCL_RPATH)) \
              $(if $(wildcard $(NCCL_LIBDIR)/libnccl.so),-lnccl,-l:libnccl.so.2) -lcudart
$(NCCL_SRC:%.c=$(BUILD)/obj/%.o): override CFLAGS += $(CUDA_CFLAGS)
override CFLAGS += -DACCEL_HAVE_NCCL=1
endif
# For scripts that compile against the toolkit by hand (tests/gpu/*.sh):
# one line each, empty without NCCL.
print-cuda-cflags:
	@echo $(CUDA_CFLAGS)
print-cuda-libs:
	@echo $(CUDA_LIBS)
RUNTIME_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/obj/%.o)
XXHASH_LIBS := $(shell pkg-config --libs libxxhash 2>/dev/null || echo -lxxhash)
# ckpt/ (in the runtime) reads and writes JSON and checksums its data.
LIBS       := $(PLUGIN_LIBS) $(CJSON_LIBS) $(XXHASH_LIBS) $(CUDA_LIBS) -pthread

TRAINER_SRC := $(wildcard examples/gpt/*.c)
TRAINER_OBJ := $(TRAINER_SRC:%.c=$(BUILD)/obj/%.o)
TRAINER     := $(if $(TRAINER_SRC),$(BUILD)/bin/train_gpt)
TRAINER_LIBS := # cuBLAS is dlopen()ed by examples/gpt (docs/train-gpt.md)

# CUDA kernels (*.cu: core/shard's device path, the example's GPU kernels)
# build with nvcc where NCCL builds and nvcc is found; the C files then see
# ACCEL_HAVE_CUDA.  CUDA_ARCH: the SASS target (90 = H100/H200), plus PTX of
# it for newer GPUs.  Never with sanitizers' flags (nvcc's host pass gets
# -fPIC and warnings only).
NVCC       ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH  ?= 90
HAVE_CUDA  := $(if $(HAVE_NCCL),$(wildcard $(NVCC)))
CU_RUNTIME_SRC := $(wildcard core/shard/*.cu)
CU_TRAINER_SRC := $(wildcard examples/gpt/*.cu)
NVCCFLAGS  := -std=c++17 -O2 -g -lineinfo -Xcompiler -fPIC,-Wall,-Wextra \
              $(if $(filter 1,$(WERROR)),-Werror all-warnings -Xcompiler -Werror) \
              -gencode arch=compute_$(CUDA_ARCH),code=[sm_$(CUDA_ARCH),compute_$(CUDA_ARCH)] \
              $(INCLUDES) -DACCEL_HAVE_NCCL=1 -DACCEL_HAVE_CUDA=1
ifneq ($(HAVE_CUDA),)
RUNTIME_OBJ += $(CU_RUNTIME_SRC:%.cu=$(BUILD)/obj/%.cu.o)
TRAINER_OBJ += $(CU_TRAINER_SRC:%.cu=$(BUILD)/obj/%.cu.o)
LIBS       += -lstdc++
$(filter $(BUILD)/obj/core/shard/% $(BUILD)/obj/examples/gpt/%,$(RUNTIME_OBJ) $(TRAINER_OBJ)): \
    override CFLAGS += $(CUDA_CFLAGS) -DACCEL_HAVE_CUDA=1
endif

CLI_SRC    := $(wildcard cli/*.c)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

HARNESS_SRC := $(wildcard tests/harness/*.c)
HARNESS_OBJ := $(HARNESS_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/%_replay)

LIBA  := $(BUILD)/lib/libaccelrun.a
LIBSO := $(BUILD)/lib/libaccelrun.so
CLI   := $(BUILD)/bin/accelrun

# ---------------------------------------------------------------- SPANK plugin
SPANK_H := $(wildcard /usr/include/slurm/spank.h)
SPANK_SRC := $(wildcard spank/*.c)
SPANK_OBJ := $(SPANK_SRC:%.c=$(BUILD)/obj/%.o)
SPANK_SO := $(BUILD)/spank/accelrun.so
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
SLURM_PLUGINDIR ?= /usr/lib/$(MULTIARCH)/slurm-wlm



.PHONY: print-cuda-cflags print-cuda-libs bench-bins bench-run spank test-slurm test-slurm-preflight test-fresh all test unit golden fuzz-replay demo install uninstall fuzz oracle bench clean deps \
        format-check check
.DEFAULT_GOAL := all
.SECONDARY:

all: $(CLI) $(LIBA) $(LIBSO) spank $(TRAINER)
ifeq ($(HAVE_CUDA),)
	@echo "  SKIP    CUDA kernels (*.cu): $(if $(HAVE_NCCL),no $(NVCC),no NCCL build) (the CPU path is built)"
endif
ifeq ($(HAVE_NCCL),)
	@echo "  SKIP    core/comm/nccl.c: $(if $(filter 1,$(NO_CUDA)),NO_CUDA=1,no nccl.h and cuda_runtime.h under $(CUDA_HOME)) (the socket backend is built)"
endif

ifneq ($(SPANK_H),)
spank: $(SPANK_SO)
else
spank:
	@echo "  SKIP    spank/accelrun.so: no /usr/include/slurm/spank.h (apt-get install libslurm-dev)"
endif

# The preflight's helper, which the plugin runs in each task (plugstack
# accelrun=/PATH overrides it).
$(BUILD)/obj/spank/preflight.o: override CFLAGS += -DACCELRUN_BIN='"$(PREFIX)/bin/accelrun"'

# The plugin: library objects linked in; the version script exports only
# Slurm's symbols; libslurm is never linked (slurmstepd provides slurm_*).
$(SPANK_SO): $(SPANK_OBJ) $(LIB_OBJ) spank/accelrun.lds
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,--version-script=spank/accelrun.lds -o $@ $(SPANK_OBJ) \
	    $(LIB_OBJ) $(PLUGIN_LIBS)

# What a build folder was configured with: where it changes (a CUDA toolkit
# installed since, NO_CUDA given or dropped), every object is rebuilt, since
# ACCEL_HAVE_NCCL and ACCEL_HAVE_CUDA change what the C files compile to.
BUILD_CONF := nccl=$(if $(HAVE_NCCL),$(NCCL_HOME),no) cuda=$(if $(HAVE_CUDA),$(CUDA_HOME),no)
$(shell mkdir -p $(BUILD) && [ "$$(cat $(BUILD)/.config 2>/dev/null)" = "$(BUILD_CONF)" ] || \
    echo "$(BUILD_CONF)" >$(BUILD)/.config)

$(BUILD)/obj/%.o: %.c $(BUILD)/.config
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(BUILD)/.config
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVCCFLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

$(LIBA): $(LIB_OBJ) $(RUNTIME_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# The shared library exports only the public headers' functions, under the
# version node ACCELRUN_0 (core/libaccelrun.map; tests/deb/exports.sh checks).
$(LIBSO): $(LIB_OBJ) $(RUNTIME_OBJ) core/libaccelrun.map
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,libaccelrun.so.0 -Wl,--version-script=core/libaccelrun.map \
	    $(LDFLAGS) -o $@ $(LIB_OBJ) $(RUNTIME_OBJ) $(LIBS)

$(CLI): $(CLI_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBA) $(CJSON_LIBS) $(LIBS)

$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(HARNESS_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(HARNESS_OBJ) $(LIBA) $(CJSON_LIBS) $(LIBS)

$(BUILD)/tests/fuzz_%_replay: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay_main.o $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# The example trainer (examples/gpt/): public API only.
$(BUILD)/bin/train_gpt: $(TRAINER_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TRAINER_OBJ) $(LIBA) $(TRAINER_LIBS) $(LIBS)

# Multi-process programs started by a launcher (srun, accelrun launch) in
# the Slurm lab and the CLI tests.
PROG_SRC := $(wildcard tests/comm/*.c)
PROG_BIN := $(PROG_SRC:tests/comm/%.c=$(BUILD)/tests/%)
$(BUILD)/tests/%: $(BUILD)/obj/tests/comm/%.o $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

# nccl.c against a scripted stand-in for NCCL and CUDA (no GPU needed).
ifneq ($(HAVE_NCCL),)
$(BUILD)/obj/tests/gpu/nccl_fake.o: override CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/tests/test_nccl_fake: $(BUILD)/obj/tests/gpu/nccl_fake.o $(HARNESS_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(CJSON_LIBS) $(XXHASH_LIBS) $(PLUGIN_LIBS) -pthread
UNIT_BIN += $(BUILD)/tests/test_nccl_fake
endif

# tests/ckpt/ckpt_tool: saves and reads checkpoints for tests/ckpt/interop.sh
# and the ckpt cases of tests/cli/run.sh (which look for it at
# BIN/../tests/ckpt_tool).
CKPT_TOOL := $(BUILD)/tests/ckpt_tool
$(CKPT_TOOL): $(BUILD)/obj/tests/ckpt/ckpt_tool.o $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

# tests/ckpt/faults.sh's rank (ckpt_crash) and its LD_PRELOAD fault injector
# (libfaultfs.so: test code, never installed).
CKPT_CRASH := $(BUILD)/tests/ckpt_crash
FAULTFS    := $(BUILD)/tests/libfaultfs.so
$(CKPT_CRASH): $(BUILD)/obj/tests/ckpt/ckpt_crash.o $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LIBS)
$(FAULTFS): tests/ckpt/faultfs.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared -o $@ $< -ldl
test-ckpt-faults: $(CLI) $(CKPT_CRASH) $(FAULTFS)
	$(Q)bash tests/ckpt/faults.sh $(BUILD)
.PHONY: test-ckpt-faults

# tests/preflight/run.sh's stand-in for NVIDIA's libnvidia-ml.so.1 (test
# code, never installed; tests/gpu/run.sh checks the real one).
FAKENVML := $(BUILD)/tests/fakenvml/libnvidia-ml.so.1
$(FAKENVML): tests/preflight/fakenvml.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $<
test-preflight: $(CLI) $(FAKENVML)
	$(Q)bash tests/preflight/run.sh $(BUILD)
.PHONY: test-preflight

# ---------------------------------------------------------------- tests
deps:
	$(Q)sh scripts/deps.sh test

# The unit tests double as the golden tests (test_golden reads tests/golden/).
unit: $(UNIT_BIN) $(CLI) $(PROG_BIN) $(CKPT_TOOL)
	$(Q)sh tests/run_unit.sh $(BUILD)/tests

fuzz-replay: $(FUZZ_REPLAY)
	$(Q)for f in $(FUZZ_REPLAY); do \
	    t=$$(basename $$f _replay); \
	    $$f tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t || exit 1; \
	done

# The library's error messages in their one form (CONTRIBUTING.md, "Messages
# users see"): context: couldn't X: why.
lint-messages:
	$(Q)python3 tests/lint/messages.py
.PHONY: lint-messages

test: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory fuzz-replay
	$(Q)$(MAKE) --no-print-directory lint-messages
	$(Q)sh tests/cli/run.sh $(CLI)
	$(Q)bash tests/ckpt/interop.sh $(BUILD)
	$(Q)$(MAKE) --no-print-directory test-ckpt-faults
	$(Q)$(MAKE) --no-print-directory test-preflight
	$(Q)bash tests/examples/run.sh $(BUILD)
	$(Q)bash tests/examples/cuda_emu/run.sh $(BUILD) --train 5
	$(Q)sh tests/install/run.sh
	$(Q)$(MAKE) --no-print-directory test-webhook
	$(Q)$(MAKE) --no-print-directory test-deb
	$(Q)$(MAKE) --no-print-directory test-slurm
	$(Q)$(MAKE) --no-print-directory test-slurm-preflight
	$(Q)bash tests/slurm/deb.sh $(BUILD)/deb

# The two-node Slurm lab (root, network namespaces; says SKIP and why elsewhere).
test-slurm: all $(PROG_BIN)
	$(Q)bash tests/slurm/run.sh $(SPANK_SO) $(CLI) $(BUILD)/tests/comm_check

# srun --accel-preflight in the two-node lab, with real accelerate stacks.
test-slurm-preflight: all
	$(Q)bash tests/slurm/preflight.sh $(SPANK_SO) $(CLI)

check: test

# The README's two set-up commands in a clean Debian 12 root (debootstrap).
test-fresh:
	$(Q)sh scripts/deps.sh fresh
	$(Q)bash tests/fresh/run.sh $(FRESH_ARGS)

# ---------------------------------------------------------------- Debian packages
# make deb: the four binary packages (accelrun, libaccelrun0, libaccelrun-dev,
# slurm-accelrun-plugin) from debian/, built by dpkg-buildpackage in a copy of
# the tree (the tracked and untracked, not ignored files as they are now;
# DEB_REF=HEAD: that commit instead) under $(BUILD)/deb-src, so the working
# tree stays clean.  The .debs, .buildinfo and .changes land in $(BUILD)/deb/.
DEB_REF ?=
DEB_SRC := $(BUILD)/deb-src/accelrun-$(VERSION)
deb:
	$(Q)sh scripts/deps.sh deb
	$(Q)rm -rf $(BUILD)/deb-src $(BUILD)/deb && mkdir -p $(DEB_SRC) $(BUILD)/deb
	$(Q)if [ -n "$(DEB_REF)" ]; then \
	    git archive --format=tar "$(DEB_REF)" | tar -x -C $(DEB_SRC); \
	else \
	    git ls-files -z --cached --others --exclude-standard | \
	        xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
	        tar -c --null -T - -f - | tar -x -C $(DEB_SRC); \
	fi
	$(Q)cd $(DEB_SRC) && dpkg-buildpackage -us -uc -b >../build.log 2>&1 || \
	    { tail -n 40 ../build.log; echo "deb: dpkg-buildpackage failed; log: $(BUILD)/deb-src/build.log" >&2; \
	      exit 1; }
	$(Q)mv $(BUILD)/deb-src/*.deb $(BUILD)/deb-src/*.buildinfo $(BUILD)/deb-src/*.changes $(BUILD)/deb/
	$(Q)mv $(BUILD)/deb-src/*.ddeb $(BUILD)/deb/ 2>/dev/null || true
	$(Q)ls -1 $(BUILD)/deb/

# The packages' tier: lintian, file lists, exports, a program built against
# the unpacked -dev package (tests/deb/run.sh runs make deb itself).
test-deb:
	$(Q)bash tests/deb/run.sh $(BUILD)

.PHONY: deb test-deb

# ---------------------------------------------------------------- fuzzing
fuzz-deps:
	$(Q)sh scripts/deps.sh fuzz

FUZZ_CFLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined $(INCLUDES) $(YAML_CFLAGS)
FUZZ_LIB_SRC := $(LIB_SRC) $(filter-out $(NCCL_SRC),$(RUNTIME_SRC))
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_SRC)
	@mkdir -p $(dir $@)
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_SRC) $(PLUGIN_LIBS) $(CJSON_LIBS) $(XXHASH_LIBS) \
	    -pthread

fuzz: $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
	$(Q)for t in $(FUZZ_SRC:tests/fuzz/%.c=%); do \
	    mkdir -p $(BUILD)/fuzz/corpus-$$t; \
	    dict=tests/fuzz/$$t.dict; [ -f $$dict ] || dict=tests/fuzz/yaml.dict; \
	    $(BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
	        -dict=$$dict $(BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t \
	        2>&1 | tail -n 5; \
	done

# ---------------------------------------------------------------- webhook
# k8s-operator-shim/: the admission webhook's core (review, pod, patch,
# mutate; docs/webhook.md).  Never in libaccelrun: it links base, config and
# env from it (DESIGN, Layout), plus cJSON.
# The server around it (main, server, metrics, inputs): libmicrohttpd + GnuTLS;
# its API server client (api): libcurl.
WEBHOOK_SRV_SRC := k8s-operator-shim/main.c k8s-operator-shim/server.c k8s-operator-shim/metrics.c \
                   k8s-operator-shim/inputs.c k8s-operator-shim/api.c
WEBHOOK_SRC := $(filter-out $(WEBHOOK_SRV_SRC),$(wildcard k8s-operator-shim/*.c))
WEBHOOK_OBJ := $(WEBHOOK_SRC:%.c=$(BUILD)/obj/%.o)
webhook-core: $(WEBHOOK_OBJ)
all: webhook-core webhook
.PHONY: webhook-core webhook test-webhook

# build/bin/accelrun-webhook (docs/webhook.md); `make test-webhook` runs its
# TLS tier on loopback (tests/k8s/tls.sh), its API client's against a local
# HTTPS API and its patches through jsonpatch and kubernetes-validate
# (tests/k8s/api.sh), the Helm chart's (tests/k8s/chart.sh), and the live
# tier behind a real kube-apiserver v1.20.2 (tests/k8s/live.sh; built once
# from Debian's source by scripts/kube-apiserver.sh, ~4.5 min, cached).
# Then the pod lab (tests/k8s/podlab.sh, also `make test-podlab`): the pods
# it builds and the live tier's pods, read back from the API server
# ($(BUILD)/k8s-live/pods), run in network namespaces and train together.
LIVE_PODS := $(BUILD)/k8s-live/pods
test-podlab: webhook $(CLI) $(TRAINER)
	$(Q)PODLAB_SPECS=$(if $(wildcard $(LIVE_PODS)/*.get),$(LIVE_PODS)) bash tests/k8s/podlab.sh $(BUILD)
.PHONY: test-podlab
WEBHOOK_BIN := $(BUILD)/bin/accelrun-webhook
WEBHOOK_SRV_OBJ := $(WEBHOOK_SRV_SRC:%.c=$(BUILD)/obj/%.o)
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd gnutls libcurl 2>/dev/null)
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd gnutls libcurl 2>/dev/null || \
              echo -lmicrohttpd -lgnutls -lcurl)
$(WEBHOOK_SRV_OBJ): override CFLAGS += $(MHD_CFLAGS)
ifneq ($(wildcard /usr/include/microhttpd.h),)
ifneq ($(wildcard /usr/include/*/curl/curl.h /usr/include/curl/curl.h),)
webhook: $(WEBHOOK_BIN)
else
webhook:
	@echo "  SKIP    $(WEBHOOK_BIN): no curl/curl.h (sh scripts/deps.sh build)"
endif
else
webhook:
	@echo "  SKIP    $(WEBHOOK_BIN): no /usr/include/microhttpd.h (sh scripts/deps.sh build)"
endif
$(WEBHOOK_BIN): $(WEBHOOK_SRV_OBJ) $(WEBHOOK_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(WEBHOOK_SRV_OBJ) $(WEBHOOK_OBJ) $(LIBA) $(MHD_LIBS) $(CJSON_LIBS) \
	    $(LIBS)
test-webhook: webhook $(CLI) $(TRAINER)
	$(Q)bash tests/k8s/tls.sh $(BUILD)
	$(Q)sh tests/k8s/api.sh $(BUILD)
	$(Q)bash tests/k8s/chart.sh $(BUILD)
	$(Q)LIVE_PODS=$(LIVE_PODS) bash tests/k8s/live.sh $(BUILD)
	$(Q)$(MAKE) --no-print-directory test-podlab

$(BUILD)/tests/test_webhook: $(BUILD)/obj/tests/unit/test_webhook.o $(WEBHOOK_OBJ) $(HARNESS_OBJ) \
    $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(WEBHOOK_OBJ) $(HARNESS_OBJ) $(LIBA) $(CJSON_LIBS) $(LIBS)

$(BUILD)/tests/fuzz_review_replay: $(BUILD)/obj/tests/fuzz/fuzz_review.o \
    $(BUILD)/obj/tests/fuzz/replay_main.o $(WEBHOOK_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/fuzz_objects_replay: $(BUILD)/obj/tests/fuzz/fuzz_objects.o \
    $(BUILD)/obj/tests/fuzz/replay_main.o $(WEBHOOK_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/fuzz/fuzz_objects: tests/fuzz/fuzz_objects.c $(WEBHOOK_SRC) $(FUZZ_LIB_SRC)
	@mkdir -p $(dir $@)
	$(Q)clang $(FUZZ_CFLAGS) $(CJSON_CFLAGS) -o $@ $< $(WEBHOOK_SRC) $(FUZZ_LIB_SRC) $(PLUGIN_LIBS) \
	    $(CJSON_LIBS) $(XXHASH_LIBS) -pthread

$(BUILD)/fuzz/fuzz_review: tests/fuzz/fuzz_review.c $(WEBHOOK_SRC) $(FUZZ_LIB_SRC)
	@mkdir -p $(dir $@)
	$(Q)clang $(FUZZ_CFLAGS) $(CJSON_CFLAGS) -o $@ $< $(WEBHOOK_SRC) $(FUZZ_LIB_SRC) $(PLUGIN_LIBS) \
	    $(CJSON_LIBS) $(XXHASH_LIBS) -pthread

# ---------------------------------------------------------------- the rest
# all in a sub-make: what it builds (the plugin, the CUDA paths) is decided
# when the Makefile is read, so after deps has installed spank.h and the kit
demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)sh scripts/demo.sh $(CLI)

oracle:
	$(Q)sh scripts/deps.sh oracle
	$(Q)sh scripts/oracle.sh

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

bench: all
	$(Q)sh scripts/deps.sh bench
	$(Q)sh scripts/oracle.sh --venv-only || echo "bench: no venv with the real accelerate (above); bench/run.sh's peer line says SKIP"
	$(Q)$(MAKE) --no-print-directory bench-run

# Each bench/*.sh names its peer and prints ratios; bench/comm.sh and
# bench/rendezvous.sh build what they need with `make bench-bins`.
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(filter-out bench/mpi_%.c,$(wildcard bench/*.c)))
bench-bins: $(BENCH_BINS)

bench-run: bench-bins
	$(Q)sh bench/run.sh $(CLI)
	$(Q)sh bench/topo_sim.sh $(BUILD)/bench/topo_sim
	$(Q)bash bench/slurm.sh $(SPANK_SO) $(CLI)
	$(Q)bash bench/preflight.sh $(SPANK_SO) $(CLI)
	$(Q)if [ -f bench/comm.sh ]; then bash bench/comm.sh $(BUILD); fi
	$(Q)bash bench/comm_lab.sh $(SPANK_SO) $(BUILD)
	$(Q)if [ -f bench/rendezvous.sh ]; then bash bench/rendezvous.sh $(BUILD); fi
	$(Q)if [ -f bench/store_attack.sh ]; then bash bench/store_attack.sh $(BUILD); fi
	$(Q)bash bench/train.sh $(BUILD)
	$(Q)bash bench/ckpt.sh $(BUILD)
	$(Q)bash bench/webhook.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PREFIX)/include/accel \
	    $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/accelrun
	install -m 0644 $(LIBA) $(DESTDIR)$(LIBDIR)/libaccelrun.a
	install -m 0755 $(LIBSO) $(DESTDIR)$(LIBDIR)/libaccelrun.so.$(VERSION)
	ln -sf libaccelrun.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libaccelrun.so.0
	ln -sf libaccelrun.so.0 $(DESTDIR)$(LIBDIR)/libaccelrun.so
	install -m 0644 core/include/accel/*.h topology/include/accel/*.h ckpt/include/accel/*.h \
	    $(DESTDIR)$(PREFIX)/include/accel/
	if [ -f $(SPANK_SO) ]; then \
	    install -d $(DESTDIR)$(SLURM_PLUGINDIR) && \
	    install -m 0755 $(SPANK_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/accelrun.so; fi
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|^libdir=.*|libdir=$(LIBDIR)|' -e 's|@VERSION@|$(VERSION)|g' \
	    scripts/accelrun.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/accelrun.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/accelrun $(DESTDIR)$(LIBDIR)/libaccelrun.* \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/accelrun.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/accel

format-check:
	$(Q)clang-format --dry-run --Werror $(LIB_SRC) $(RUNTIME_SRC) $(CLI_SRC) core/include/accel/*.h \
	    ckpt/include/accel/*.h ckpt/*.h \
	    examples/gpt/*.[ch] tests/examples/gradcheck.c $(CU_RUNTIME_SRC) $(CU_TRAINER_SRC) \
	    $(WEBHOOK_SRC) $(WEBHOOK_SRV_SRC) k8s-operator-shim/*.h $(wildcard tests/unit/test_webhook.c tests/fuzz/fuzz_review.c \
	    tests/fuzz/fuzz_objects.c)

clean:
	rm -rf build build-address build-undefined build-thread

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
