# hmm — top-level Makefile.
#
#   make          build everything whose dependencies are present into $(B)/
#   make check    unit tests (plain and ASan+UBSan, some under TSan),
#                 integration, GPU (skip without one), fuzz (short), the VM
#                 runner; ends with "N passed, N failed, N skipped"
#   make demo     install deps, build, run the main job
#   make deps     scripts/deps.sh (Debian packages)
#   make kmod     the kernel module for KVER= (default: the running kernel
#                 when its headers are installed, else the newest installed)
#   make kmod-install  modules_install + depmod (mk/install.mk)
#   make fuzz     the fuzz targets (clang, libFuzzer)
#
# Sources are found by wildcard: a new file in libhmm/src/*/, kernels/*,
# tools/NAME/, daemon/ or tests/*/ needs no edit here.  Include paths are
# per layer (see "layers" below): a file sees libhmm/include and the
# folders its layer is granted, nothing else, so a layer violation fails
# to compile.  Files named *_avx2.c / *_avx512.c / *_amx.c get their ISA's
# flags and are only called after a cpuid check.  B=DIR picks another
# build folder, SAN=address|thread a sanitizer build (libraries and unit
# tests only), by default into build/asan or build/tsan: objects do not
# record their flags, so a sanitizer build in build/ would take the plain
# objects as up to date (and leave its own for the next plain build).

SAN	?=
ifneq ($(filter-out address thread,$(SAN)),)
$(error SAN=$(SAN): not address or thread)
endif
B	?= build$(if $(SAN),/$(patsubst address,asan,$(patsubst thread,tsan,$(SAN))))
CC	?= cc
ifeq ($(origin CC),default)
CC	:= gcc
endif
NVCC	?= nvcc
CLANG	?= clang

O	:= $(B)/obj
CPPFLAGS += -D_GNU_SOURCE -Ilibhmm/include
CFLAGS	?= -O2 -g
CFLAGS	+= -std=gnu11 -fPIC -pthread -Wall -Wextra -Werror \
	   -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers
LDLIBS	:= -luring -lnuma -lpthread -lm -ldl
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
ISA_amx    := $(ISA_avx512) -mavx512bf16 -mamx-tile -mamx-bf16

ifeq ($(SAN),address)
CFLAGS	+= -fsanitize=address,undefined -fno-omit-frame-pointer \
	   -fno-sanitize-recover=undefined
LDFLAGS	+= -fsanitize=address,undefined
else ifeq ($(SAN),thread)
CFLAGS	+= -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS	+= -fsanitize=thread
endif

# ---- what is here ---------------------------------------------------------
have_hdr = $(shell printf '\#include <$(1)>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo y)
HAVE_URING := $(call have_hdr,liburing.h)
HAVE_NUMA  := $(call have_hdr,numa.h)
HAVE_INIH  := $(call have_hdr,ini.h)
HAVE_BLAS  := $(call have_hdr,cblas.h)
NVCC_PATH  := $(shell command -v $(NVCC) 2>/dev/null)
HAVE_NVCC  := $(if $(SAN),,$(NVCC_PATH))
HAVE_CLANG := $(shell command -v $(CLANG) 2>/dev/null)
# the toolkit's cuda.h, for test_cuda_abi only (libhmm needs no CUDA header)
CUDA_H	   := $(firstword $(wildcard $(if $(CUDA_HOME),$(CUDA_HOME)/include/cuda.h) \
		$(if $(NVCC_PATH),$(dir $(NVCC_PATH))../include/cuda.h) \
		/usr/local/cuda/include/cuda.h /usr/include/cuda.h))
# The module's kernel: KVER=, else the running kernel when its headers
# are installed, else Debian's newest installed amd64 headers (`make kmod`
# says so: a container's or a VM host's kernel is often not the target).
KVER_RUN    := $(shell uname -r)
KVER_NEWEST := $(shell ls -1d /usr/src/linux-headers-*-amd64 2>/dev/null | \
		sed 's,.*/linux-headers-,,' | sort -V | tail -1)
kver_hdrs    = $(firstword $(wildcard /lib/modules/$(1)/build/Makefile \
		/usr/src/linux-headers-$(1)/Makefile))
KVER	?= $(if $(call kver_hdrs,$(KVER_RUN)),$(KVER_RUN),$(KVER_NEWEST))
KDIR	?= $(if $(KVER),$(patsubst %/Makefile,%,$(call kver_hdrs,$(KVER))))
HAVE_KDIR := $(if $(SAN),,$(if $(wildcard $(KDIR)/Makefile),$(if $(wildcard kmod/Kbuild),y)))

comma := ,
SKIPPED :=
# hmmd reads its config with libinih, hmm-train multiplies with OpenBLAS
USER_MISSING := $(if $(HAVE_URING),,liburing-dev) $(if $(HAVE_NUMA),,libnuma-dev) \
		$(if $(HAVE_INIH),,libinih-dev) $(if $(HAVE_BLAS),,libopenblas-dev)
ifneq ($(strip $(USER_MISSING)),)
HAVE_USER :=
SKIPPED += libhmm, tools, daemon and tests: $(strip $(USER_MISSING)) missing (make deps);
else
HAVE_USER := y
endif
ifeq ($(HAVE_NVCC),)
ifeq ($(SAN),)
SKIPPED += CUDA kernels: nvcc not found;
endif
endif
ifeq ($(HAVE_CLANG),)
ifneq ($(wildcard tests/fuzz/*.c),)
SKIPPED += fuzz targets: $(CLANG) not found (make deps);
endif
endif
ifeq ($(HAVE_KDIR),)
ifeq ($(SAN),)
SKIPPED += kmod: $(if $(wildcard kmod/Kbuild),no linux-headers-*-amd64 in /usr/src (make deps$(comma) or KDIR=),no kmod/Kbuild yet);
endif
endif

# ---- sources ----------------------------------------------------------------
LIBHMM_SRC := $(wildcard libhmm/src/*.c libhmm/src/*/*.c)
HK_SRC	   := $(wildcard kernels/core/cpu/*.c)
BIND_SRC   := $(wildcard kernels/bind/*.c)
CU_SRC	   := $(wildcard kernels/core/cuda/*.cu)
DAEMON_SRC := $(wildcard daemon/*.c)
TOOLS	   := $(sort $(patsubst tools/%/,%,$(dir $(wildcard tools/*/*.c))))
UNIT_SRC   := $(wildcard tests/unit/*.c)
INTEG_SRC  := $(wildcard tests/integration/*.c)
GPU_SRC	   := $(wildcard tests/gpu/*.cu)
FUZZ_SRC   := $(wildcard tests/fuzz/*.c)
TSAN_NAMES := $(basename $(notdir $(shell grep -l 't: tsan' $(UNIT_SRC) /dev/null 2>/dev/null)))

obj = $(patsubst %.c,$(O)/%.o,$(1))
LIBHMM_A := $(B)/lib/libhmm.a
HK_A	 := $(B)/lib/libhk.a
BIND_A	 := $(B)/lib/libhkbind.a
CUDA_A	 := $(B)/lib/libhk_cuda.a
LIBHMM_SO := $(B)/lib/libhmm.so.0
LIBS	 := $(BIND_A) $(LIBHMM_A) $(HK_A)
# libhmm without shared mode (remote/, open.c): what hmmd links
LIBHMM_EMB_SRC := $(filter-out libhmm/src/remote/% libhmm/src/open.c,$(LIBHMM_SRC))
LIBHMM_EMB_A := $(B)/lib/libhmm_embedded.a

UNIT_BINS  := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
INTEG_BINS := $(patsubst tests/integration/%.c,$(B)/tests/integration/%,$(INTEG_SRC))
TOOL_BINS  := $(patsubst %,$(B)/bin/%,$(TOOLS)) $(if $(DAEMON_SRC),$(B)/bin/hmmd)
GPU_BINS   := $(patsubst tests/gpu/%.cu,$(B)/tests/gpu/%,$(GPU_SRC))
FAKECUDA := $(if $(wildcard tests/fakecuda/*.c),$(B)/tests/fakecuda/libcuda.so.1)

ALL := $(HK_A)
ifeq ($(HAVE_USER),y)
ALL += $(LIBHMM_A) $(BIND_A) $(if $(SAN),,$(LIBHMM_SO) $(TOOL_BINS) $(FAKECUDA))
endif
ifneq ($(HAVE_NVCC),)
ALL += $(if $(CU_SRC),$(CUDA_A)) $(GPU_BINS)
endif

.PHONY: all units check demo deps kmod fuzz clean skipped
all: $(ALL) $(if $(HAVE_KDIR),kmod) skipped
skipped:
	@printf '%s' '$(SKIPPED)' | tr ';' '\n' | sed 's/^ *//;/^$$/d;s/^/make: skipped /' >&2

units: $(if $(HAVE_USER),$(UNIT_BINS) $(INTEG_BINS))

# ---- layers: who may include what ------------------------------------------
# libhmm/src/base (err, sizes) <- store (knows nothing of tensors), proto
# (the wire codec and socket rules) <- engine (the embedded engine) <-
# remote (shared mode: the hmmd client and the backend over it) <- the
# front door (libhmm/src/*.c: api.c, open.c, dlpack.c).  INC is empty
# for anything not named here: public headers only.
L	:= libhmm/src
INC_base   := -I$(L)/base
INC_store  := $(INC_base) -I$(L)/store
INC_proto  := $(INC_base) -I$(L)/proto
INC_engine := $(INC_store) -Iinclude -I$(L)/engine
INC_remote := $(INC_engine) -I$(L)/proto -I$(L)/remote
INC_kern   := -Ikernels/core -Ikernels/bind
$(O)/$(L)/base/%.o:   INC := $(INC_base)
$(O)/$(L)/store/%.o:  INC := $(INC_store)
$(O)/$(L)/proto/%.o:  INC := $(INC_proto)
$(O)/$(L)/engine/%.o: INC := $(INC_engine)
$(O)/$(L)/remote/%.o: INC := $(INC_remote)
$(call obj,$(wildcard $(L)/*.c)): INC := $(INC_engine)
$(O)/$(L)/open.o:     INC := $(INC_remote)
$(O)/kernels/core/%.o: INC := -Ikernels/core
$(O)/kernels/bind/%.o: INC := $(INC_kern)
# hmmd: the engine (hmm_engine_open, the budget), store and proto, and
# no remote/: it links $(LIBHMM_EMB_A), which has none of it
$(O)/daemon/%.o:      INC := $(INC_engine) $(INC_proto)
# tools: public headers, plus what each declares here
$(O)/tools/hmm-train/%.o: INC := $(INC_kern)
$(O)/tools/hmm-bench/%.o: INC := $(INC_kern)
$(O)/tools/hmm-bench/io.o $(O)/tools/hmm-bench/tensors.o: INC := $(INC_store)
$(O)/tools/hmm-bench/shared.o: INC := $(INC_proto) -I$(L)/remote
$(O)/tools/hmm-bench/uvm.o: INC := -Ilibhmm/include -I$(L)/engine
$(O)/tools/hmm-train/cuda.o: INC := -Ilibhmm/include -I$(L)/engine
$(O)/tools/hmm-train/gpu_%.o: INC := $(INC_kern) -I$(L)/engine
$(O)/tools/hmmctl/%.o: INC := $(INC_proto) -I$(L)/remote
# tests: tests/ and the kernels' headers, plus a layer per group
$(O)/tests/%.o: INC := -Itests $(INC_kern)
T_STORE := alloc crc32c offload pool region_starved table tensor_fault \
	   tensor_writeback \
	   $(patsubst tests/unit/test_%.c,%,$(wildcard tests/unit/test_store*.c))
$(patsubst %,$(O)/tests/unit/test_%.o,$(T_STORE)): INC := -Itests $(INC_kern) $(INC_store)
$(O)/tests/unit/test_proto.o $(O)/tests/unit/test_proto_sock.o \
$(O)/tests/integration/test_hmmd_proto.o \
$(O)/tests/integration/test_hmmd_attack.o: INC := -Itests $(INC_proto)
$(O)/tests/unit/test_cuda_abi.o: INC := -Itests -I$(L)/engine
$(O)/tests/unit/test_budget.o \
$(O)/tests/unit/test_crc_order.o: INC := -Itests $(INC_engine)
$(O)/tests/unit/test_client_version.o \
$(O)/tests/integration/test_hmm_remote.o \
$(O)/tests/integration/test_hmmd_engine.o: INC := -Itests $(INC_proto) -I$(L)/remote

# ---- compile ----------------------------------------------------------------
$(O)/tests/unit/test_cuda_abi.o: CPPFLAGS += $(if $(CUDA_H),-DHMM_HAVE_CUDA_H -isystem $(dir $(CUDA_H)))
$(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(INC) $(CFLAGS) $(ISA) -MMD -MP $(DEPNAMES) -c -o $@ $<
$(O)/%_avx2.o: ISA := $(ISA_avx2)
$(O)/%_avx512.o: ISA := $(ISA_avx512)
$(O)/%_amx.o: ISA := $(ISA_amx)

$(LIBHMM_A): $(call obj,$(LIBHMM_SRC))
$(LIBHMM_EMB_A): $(call obj,$(LIBHMM_EMB_SRC))
$(HK_A): $(call obj,$(HK_SRC))
$(BIND_A): $(call obj,$(BIND_SRC))
# an archive is made anew when the Makefile changes too: its list of
# objects may have (an object added that is older than the archive)
$(B)/lib/%.a: Makefile
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $(filter %.o,$^)

$(LIBHMM_SO): $(call obj,$(LIBHMM_SRC)) libhmm/libhmm.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libhmm.so.0 -Wl,--version-script=libhmm/libhmm.map \
		-o $@ $(call obj,$(LIBHMM_SRC)) $(LDFLAGS) $(LDLIBS)
	ln -sf libhmm.so.0 $(B)/lib/libhmm.so

# The CPU kernels and the offloaded step as one shared library, for
# ctypes (python/hmm); it needs libhmm.so.0, found next to it.
HK_SO := $(B)/lib/libhk.so.0
$(HK_SO): $(call obj,$(HK_SRC) $(BIND_SRC)) kernels/libhk.map $(LIBHMM_SO)
	$(CC) -shared -Wl,-soname,libhk.so.0 -Wl,--version-script=kernels/libhk.map \
		-Wl,-rpath,'$$ORIGIN' -o $@ $(call obj,$(HK_SRC) $(BIND_SRC)) \
		$(LDFLAGS) -L$(B)/lib -l:libhmm.so.0 -lpthread -lm
all: $(if $(HAVE_USER),$(if $(SAN),,$(HK_SO)))

# Each tools/NAME/ directory is one program; hmmd is daemon/*.c.
# TOOL_A_NAME: an archive of some of the tool's files, linked by the tool
# and by a test (hmm-train's model, for test_gpt_grad).
TRAIN_A	  := $(B)/lib/libhmmtrain.a
TRAIN_SRC := $(addprefix tools/hmm-train/,attn.c block.c cuda.c gpu_blas.c gpu_lib.c \
	     gpu_plan.c layers.c model.c optim.c) $(wildcard tools/hmm-train/state*.c)
$(TRAIN_A): $(call obj,$(TRAIN_SRC))
TOOL_A_hmm-train := $(TRAIN_A)
TOOL_A_SRC_hmm-train := $(TRAIN_SRC)
define tool_rule
$(B)/bin/$(1): $(call obj,$(filter-out $(TOOL_A_SRC_$(1)),$(wildcard tools/$(1)/*.c))) $(TOOL_A_$(1)) $(LIBS)
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(TOOL_A_$(1)) $(LIBS) $$(LDLIBS) $$(TOOL_LDLIBS_$(1))
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))
TOOL_LDLIBS_hmm-train := -lopenblas
$(B)/bin/hmmd: $(call obj,$(DAEMON_SRC)) $(BIND_A) $(LIBHMM_EMB_A) $(HK_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BIND_A) \
		$(LIBHMM_EMB_A) $(HK_A) $(LDLIBS) -linih

$(B)/tests/%: $(O)/tests/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_A) $(LIBS) $(LDLIBS)
# test_gpt_grad: hmm-train's model (its headers, its archive)
$(O)/tests/unit/test_gpt_grad.o: CPPFLAGS += -Itools/hmm-train
$(B)/tests/unit/test_gpt_grad: TEST_A := $(TRAIN_A)
$(B)/tests/unit/test_gpt_grad: $(TRAIN_A)
# test_gpu_plan: hmm-train --device cuda's plan (the archive's gpu_plan.c)
$(O)/tests/unit/test_gpu_plan.o: CPPFLAGS += -Itools/hmm-train
$(O)/tests/unit/test_gpu_plan.o: INC := -Itests $(INC_kern) -I$(L)/engine
$(B)/tests/unit/test_gpu_plan: TEST_A := $(TRAIN_A)
$(B)/tests/unit/test_gpu_plan: $(TRAIN_A)

# ---- a fake CUDA driver over host memory: dev_cuda.c tested without a GPU --
# (tests/integration/test_cuda_fake.sh).  No sanitizer flags: the one
# library serves the plain and the ASan test binaries.
$(B)/tests/fakecuda/libcuda.so.1: $(wildcard tests/fakecuda/*.c tests/fakecuda/*.h) \
		libhmm/src/engine/cuda_abi.h
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 -g -fPIC -pthread -Wall -Wextra -Werror \
		-Wno-unused-parameter -Ilibhmm/src/engine -shared -Wl,-soname,libcuda.so.1 \
		-Wl,-z,nodelete \
		-o $@ $(filter %.c,$^)

# ---- CUDA: built whenever nvcc exists, run only where a GPU is -------------
NVFLAGS := -O3 -std=c++17 -Iinclude -Ikernels/core -lineinfo \
	   -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
	   -gencode arch=compute_80,code=compute_80
CU_OBJ := $(patsubst %.cu,$(O)/%.o,$(CU_SRC))
$(O)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -Xcompiler -fPIC -MMD -MP -c -o $@ $<
$(CUDA_A): $(CU_OBJ)
# hmm-bench uvm's sweep kernel: a fatbin embedded in the binary
# (uvm_fatbin.S) and loaded through the driver at run time, so hmm-bench
# links no CUDA runtime; without nvcc, hmm-bench uvm says so.
HB_FATBIN := $(O)/tools/hmm-bench/uvm_sweep.fatbin
$(HB_FATBIN): tools/hmm-bench/uvm_sweep.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) --fatbin -o $@ $<
$(O)/tools/hmm-bench/uvm_fatbin.o: tools/hmm-bench/uvm_fatbin.S $(HB_FATBIN)
	$(CC) -c -DHB_UVM_FATBIN='"$(HB_FATBIN)"' -o $@ $<
ifneq ($(HAVE_NVCC),)
$(B)/bin/hmm-bench: $(O)/tools/hmm-bench/uvm_fatbin.o
endif
# hmm-train --device cuda's kernels (gpu_kern.cu, with kernels/core's
# SIMT attention): the same way, a fatbin in the binary (gpu_fatbin.S)
# loaded through the dlopen'ed driver; without nvcc the GPU step says so.
HT_FATBIN := $(O)/tools/hmm-train/gpu_kern.fatbin
$(HT_FATBIN): tools/hmm-train/gpu_kern.cu $(wildcard kernels/core/cuda/attn_*.cuh \
		kernels/core/cuda/attn_args.h) kernels/core/hk_attn.h
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) --fatbin -o $@ $<
$(O)/tools/hmm-train/gpu_fatbin.o: tools/hmm-train/gpu_fatbin.S $(HT_FATBIN)
	$(CC) -c -DHT_GPU_FATBIN='"$(HT_FATBIN)"' -o $@ $<
ifneq ($(HAVE_NVCC),)
$(B)/bin/hmm-train: $(O)/tools/hmm-train/gpu_fatbin.o
endif
$(B)/tests/gpu/%: tests/gpu/%.cu $(wildcard tests/gpu/*.h) $(CUDA_A) $(HK_A)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -Itests -o $@ $< $(CUDA_A) $(HK_A) -lpthread -lm

# ---- kernel module: in-tree Kbuild (./Kbuild), copied to $(B)/kmod ---------
kmod:
ifeq ($(HAVE_KDIR),y)
	$(if $(filter-out $(KVER_RUN),$(KVER)),$(if $(filter command line environment,$(origin KVER)),,\
		@echo "kmod: no headers for the running kernel $(KVER_RUN): building for the newest installed, $(KVER) (KVER= to choose)" >&2))
	$(MAKE) -C $(KDIR) M=$(CURDIR) W= KBUILD_EXTRA_WARN= CONFIG_DEBUG_INFO_BTF_MODULES= modules
	@mkdir -p $(B)/kmod && { cmp -s kmod/hmmk.ko $(B)/kmod/hmmk.ko || cp kmod/hmmk.ko $(B)/kmod/hmmk.ko; }
	@echo "kmod: built $(B)/kmod/hmmk.ko for $(KVER)"
else
	@echo "kmod: skipped: no headers for '$(KVER)' (/lib/modules/KVER/build or /usr/src/linux-headers-KVER; make deps, or KDIR=)" >&2
endif

# ---- fuzz (clang libFuzzer) -------------------------------------------------
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
fuzz: $(FUZZ_BINS)
FUZZ_LINK_fuzz_proto := $(L)/proto/proto.c $(L)/proto/proto_msg.c $(L)/base/err.c
# fuzz_api: the whole library, built with the target so that libFuzzer
# sees its coverage; each file gets every layer's folders (no two
# layers share a header name)
FUZZ_LINK_fuzz_api := $(LIBHMM_SRC)
FUZZ_INC_fuzz_api  := $(INC_remote)
# fuzz_store: the same, and the store's format (table.h, crc32c.h)
FUZZ_LINK_fuzz_store := $(LIBHMM_SRC)
FUZZ_INC_fuzz_store  := $(INC_remote)
$(B)/fuzz/%: tests/fuzz/%.c $(LIBHMM_SRC) $(DAEMON_SRC)
	@mkdir -p $(@D)
	$(CLANG) $(CPPFLAGS) $(INC_proto) $(FUZZ_INC_$*) -Idaemon -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
		-o $@ $< $(FUZZ_LINK_$*) $(LDLIBS)

# ---- check ------------------------------------------------------------------
# tests/check assembles the list (plain, asan, tsan, integration, gpu,
# fuzz, vm) and hands it to tests/run, the one runner.
check: all units
	$(MAKE) --no-print-directory B=$(B)/asan SAN=address units \
		$(if $(HAVE_USER),$(B)/asan/bin/hmmd)
	$(if $(TSAN_NAMES),$(MAKE) --no-print-directory B=$(B)/tsan SAN=thread \
		$(patsubst %,$(B)/tsan/tests/unit/%,$(TSAN_NAMES)) \
		$(if $(HAVE_USER),$(B)/tsan/bin/hmmd))
	$(if $(FUZZ_BINS),$(if $(HAVE_CLANG),$(MAKE) --no-print-directory fuzz))
	@B=$(B) TSAN_NAMES="$(TSAN_NAMES)" tests/check

# ---- demo: the main job -----------------------------------------------------
demo: deps
	$(MAKE) --no-print-directory all
	@scripts/demo.sh $(B)

deps:
	scripts/deps.sh

# ---- install (DESTDIR, PREFIX, LIBDIR ...): mk/install.mk -----------------
include mk/install.mk

clean:
	rm -rf $(B)
	-$(if $(HAVE_KDIR),$(MAKE) -C $(KDIR) M=$(CURDIR) clean >/dev/null)

# Keep the objects of tests and tools between builds.
.SECONDARY:

# An object's .d names it by its absolute path and, under this folder,
# by its relative one: a make run with B absolute (test_install,
# test_service) rewrites the .d files of what it rebuilds, and a later
# run with B relative did not match them, so it missed header changes
# and linked stale objects (a struct hmm of two layouts, which hung).
DEPNAMES = $(addprefix -MT ,$(sort $(abspath $@) \
	   $(patsubst $(CURDIR)/%,%,$(abspath $@))))
-include $(shell find $(O) -name '*.d' 2>/dev/null)
