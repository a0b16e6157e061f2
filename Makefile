# stagecache — one plain Makefile; every output under build/.
#   make [all] | check | demo | demo-llama | bench | deps | install | clean | fuzz
#   switches: ASAN=1 TSAN=1 V=1 PREFIX=/usr/local DESTDIR=
.DELETE_ON_ERROR:
SHELL := /bin/bash
.SUFFIXES:
.SECONDARY:

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin

CC ?= cc
CLANG ?= clang
BPFTOOL ?= bpftool
CFLAGS ?= -O2 -g
LDFLAGS ?=

B := build
ifeq ($(ASAN),1)
B := build/asan
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer
endif
ifeq ($(TSAN),1)
B := build/tsan
SAN := -fsanitize=thread
endif

override CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wno-missing-field-initializers \
	-fPIC -pthread -MMD -MP -D_GNU_SOURCE -DSTAP_SDT_ARG_CONSTRAINT=nr -Ilib -I$(B) $(SAN)
override LDFLAGS += -pthread $(SAN)
LIBS := -luring -lxxhash
# the CLI depends only on liburing, libbpf (libelf, zlib), libxxhash and libc
TOOL_LIBS :=
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt)

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-7s %s\n' $(1) $(2)
endif

LIB_SRCS := $(sort $(wildcard shm/*.c lib/*.c lib/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
# tools/, one folder per product: common/ (what every tool links), cli/ (the `stagecache` command),
# demo/ (the demo, its workload and the policy simulators: part of the command), stress/ (the
# stress harness: only in the test build's command), bench/ (`stagecache-bench`), scripts/.
TOOL_COMMON_SRCS := $(sort $(wildcard tools/common/*.c))
TOOL_SRCS := $(TOOL_COMMON_SRCS) $(sort $(wildcard tools/cli/*.c tools/demo/*.c))
TOOL_OBJS := $(TOOL_SRCS:%.c=$(B)/obj/%.o)
TEST_SRCS := $(sort $(wildcard tests/check_*.c))
TEST_BINS := $(TEST_SRCS:tests/%.c=$(B)/tests/%)
TEST_HELPERS := $(filter-out $(TEST_SRCS),$(sort $(wildcard tests/*.c)))
TEST_HELPER_OBJS := $(TEST_HELPERS:%.c=$(B)/obj/%.o)

STATIC := $(B)/libstagecache.a
SHARED := $(B)/libstagecache.so.0
CLI := $(B)/stagecache

# The test build: the same sources compiled with -DSC_TEST_HOOKS (fault points, the promotion
# clock override, schedule points, poisoned frees), declared in lib/stagecache_test.h. Tests and
# `stagecache stress` use it; the product library above has none of it (and `make install`
# installs only the product).
T := $(B)/test
TEST_LIB_OBJS := $(LIB_SRCS:%.c=$(T)/obj/%.o)
# the test build's command has the stress harness itself (tools/stress/) where the product's
# `stress` runs the test build's (tools/cli/cmd_stress.c)
TEST_TOOL_SRCS := $(filter-out tools/cli/cmd_stress.c,$(TOOL_SRCS)) $(sort $(wildcard tools/stress/*.c))
TEST_TOOL_OBJS := $(TEST_TOOL_SRCS:%.c=$(T)/obj/%.o)
TEST_STATIC := $(T)/libstagecache.a
TEST_SHARED := $(T)/libstagecache.so.0
TEST_CLI := $(T)/stagecache

all: $(STATIC) $(SHARED) $(B)/libstagecache.so $(CLI) $(TEST_CLI)

$(B)/obj/tests/%.o: tests/%.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DSC_TEST_HOOKS -c -o $@ $<

$(B)/obj/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(STATIC): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJS) lib/stagecache.map
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libstagecache.so.0 -Wl,--version-script=lib/stagecache.map -Wl,-z,defs \
		$(LDFLAGS) -o $@ $(LIB_OBJS) $(LIBS)

$(B)/libstagecache.so: $(SHARED)
	$(Q)ln -sf libstagecache.so.0 $@

# The CLI links the shared library (rpath $ORIGIN), so `stagecache trace` attaches where it runs.
$(CLI): $(TOOL_OBJS) $(SHARED)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJS) -L$(B) -l:libstagecache.so.0 -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' $(LIBS) $(TOOL_LIBS)

# ---- the test build (hooks compiled in) ----
$(T)/obj/%.o: %.c
	$(call msg,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DSC_TEST_HOOKS -c -o $@ $<

$(TEST_STATIC): $(TEST_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(TEST_SHARED): $(TEST_LIB_OBJS) lib/stagecache.map
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libstagecache.so.0 -Wl,--version-script=lib/stagecache.map -Wl,-z,defs \
		$(LDFLAGS) -o $@ $(TEST_LIB_OBJS) $(LIBS)

$(TEST_CLI): $(TEST_TOOL_OBJS) $(TEST_SHARED)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TEST_TOOL_OBJS) -L$(T) -l:libstagecache.so.0 -Wl,-rpath,'$$ORIGIN' $(LIBS) $(TOOL_LIBS)

$(T)/obj/tools/cli/cmd_trace.o: $(B)/stagecache.skel.h # BPF_SKEL is defined further down
# every tool includes its folder's headers and tools/common/cli.h
$(B)/obj/tools/%.o $(T)/obj/tools/%.o: override CFLAGS += -Itools/common

# Tests link the test build's static library (and may use its private headers and the hooks).
$(B)/tests/%: tests/%.c $(TEST_STATIC) $(TEST_HELPER_OBJS)
	$(call msg,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DSC_TEST_HOOKS -Wno-unused-parameter $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJS) $(TEST_STATIC) $(LIBS) $(CHECK_LIBS)

# tests/check_memmodel.c compiles the protocols' own sources with their atomics redirected to a
# weak memory model (tests/mm_atomics.h); their external functions are renamed mm_* there so they
# do not clash with the library's copies.
MM_SRCS := shm/readers.c shm/index.c shm/mutex.c shm/ring.c shm/l3ix.c shm/evring.c lib/l2/lease.c lib/holders.c
$(B)/tests/mm_renames.h: $(MM_SRCS)
	@mkdir -p $(dir $@)
	$(Q)grep -hE '^[a-z][a-z0-9_ *]*[ *]?(shm|l2|sc)_[a-z0-9_]+\(' $^ | grep -v '^static' | \
		sed -E 's/^[^(]*[ *]((shm|l2|sc)_[a-z0-9_]+)\(.*/#define \1 mm_\1/' | sort -u > $@
$(B)/tests/check_memmodel: $(B)/tests/mm_renames.h $(MM_SRCS) shm/readers.h shm/index.h shm/mutex.h shm/ring.h shm/l3ix.h shm/evring.h lib/l2/view.h lib/l2/lease.h
$(B)/tests/check_memmodel: override CFLAGS += -I$(B)/tests

# ---- benchmarks (tools/bench/, see its README.md): build/stagecache-bench, run as `stagecache bench ...` ----
# Everything that compares with other systems lives in this binary, never in the CLI: LMDB is
# linked, DPDK's librte_ring is dlopen'ed (its inline ring code comes from the headers), memcached,
# Redis and fio are spoken to over their sockets / run as programs.
BENCH := $(B)/stagecache-bench
BENCH_SRCS := $(sort $(wildcard tools/bench/*.c)) $(TOOL_COMMON_SRCS) tools/demo/policy_sim.c
BENCH_OBJS := $(BENCH_SRCS:%.c=$(B)/obj/%.o)
BENCH_LIBS := -llmdb -lm -ldl
DPDK_VERSION := $(shell pkg-config --modversion libdpdk 2>/dev/null)

$(BENCH): $(BENCH_OBJS) $(SHARED)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJS) -L$(B) -l:libstagecache.so.0 -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' $(LIBS) $(BENCH_LIBS)

all: $(BENCH)

# the ring benchmark (both sides' consumers and producers) as DPDK builds its applications' hot
# paths: -O3 -march=native, after DPDK's own flags (which say -march=corei7)
$(B)/obj/tools/bench/ring.o: override CFLAGS += $(shell pkg-config --cflags libdpdk 2>/dev/null) -O3 -march=native
$(B)/obj/tools/bench/ring.o: override CFLAGS += -DSC_DPDK_VERSION='"$(DPDK_VERSION)"'

BENCH_DIR := $(B)/bench
# make bench: every benchmark, the JSON lines in $(BENCH_DIR)/bench.json, the table, then plots and
# $(BENCH_DIR)/report.{md,html}; the exit status is the benchmark's (1 when a target is missed).
bench-run: all
	@mkdir -p $(BENCH_DIR)
	@set +e; $(BENCH) all --out $(BENCH_DIR)/bench.json --table $(BENCH_ARGS) | tee $(BENCH_DIR)/bench.txt; \
		rc=$${PIPESTATUS[0]}; $(BENCH) report $(BENCH_DIR)/bench.json $(BENCH_DIR) || rc=1; \
		echo "bench: $(BENCH_DIR)/report.html, $(BENCH_DIR)/report.md, $(BENCH_DIR)/bench.json (exit $$rc)"; exit $$rc

$(B)/tests/check_bench: $(CLI) $(BENCH)

.PHONY: bench-run
# ---- end of benchmarks ----

# ---- BPF ----
# bpf/stagecache.bpf.c (CO-RE) -> build/bpf/stagecache.bpf.o -> skeleton build/stagecache.skel.h,
# against build/vmlinux.h dumped from the running kernel's BTF. Nothing generated is committed.
# System include dirs go in with -idirafter (as libbpf-bootstrap does): usdt.bpf.h needs
# <linux/errno.h> and its asm/ under /usr/include/<multiarch triplet>. The target arch of the
# probes' register access (__TARGET_ARCH_x86, _arm64 ...) is the build host's: the programs
# attach to the binaries built beside them.
BPF_OBJ := $(B)/bpf/stagecache.bpf.o
BPF_SKEL := $(B)/stagecache.skel.h
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/i.86/x86/' -e 's/aarch64/arm64/' \
	-e 's/arm.*/arm/' -e 's/riscv64/riscv/' -e 's/ppc64le/powerpc/' -e 's/s390x/s390/' -e 's/loongarch64/loongarch/')
MULTIARCH := $(shell $(CC) -dumpmachine 2>/dev/null)
BPF_SYS_INCS = $(shell $(CLANG) -v -E - </dev/null 2>&1 | \
	sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }') \
	-idirafter /usr/include/$(MULTIARCH)
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Werror -I$(B) -Ibpf
TOOL_LIBS += -lbpf -lelf -lz

$(B)/vmlinux.h:
	$(call msg,BTF,$@)
	@mkdir -p $(dir $@)
	$(Q)test -r /sys/kernel/btf/vmlinux || { echo "no kernel BTF at /sys/kernel/btf/vmlinux: cannot build bpf/" >&2; exit 1; }
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BPF_OBJ): bpf/stagecache.bpf.c bpf/stagecache_maps.h $(B)/vmlinux.h
	$(call msg,BPF,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(BPF_SYS_INCS) -c -o $@.tmp.o $<
	$(Q)$(BPFTOOL) gen object $@ $@.tmp.o && rm -f $@.tmp.o

$(BPF_SKEL): $(BPF_OBJ)
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name stagecache_bpf > $@

$(B)/obj/tools/cli/cmd_trace.o: $(BPF_SKEL)

# The probe benchmark compares the same L2 hit loop linked statically against build/libstagecache.a
# and against build/noprobes/libstagecache.a (every object rebuilt with -DSC_NO_PROBES).
NOPROBES_OBJS := $(LIB_SRCS:%.c=$(B)/noprobes/obj/%.o)
PROBE_HELPERS := $(B)/bench_probes_helper $(B)/noprobes/bench_probes_helper

$(B)/noprobes/obj/%.o: %.c
	$(call msg,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DSC_NO_PROBES -c -o $@ $<

$(B)/noprobes/libstagecache.a: $(NOPROBES_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/bench_probes_helper: tools/bench/probes.c $(STATIC)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) -Itools/common -DSC_PROBES_HELPER $(LDFLAGS) -o $@ $< $(STATIC) $(LIBS)

$(B)/noprobes/bench_probes_helper: tools/bench/probes.c $(B)/noprobes/libstagecache.a
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -Itools/common -DSC_PROBES_HELPER -DSC_NO_PROBES $(LDFLAGS) -o $@ $< $(B)/noprobes/libstagecache.a $(LIBS)

# check_probes reads the notes of a binary linked statically with every object of the archive.
$(B)/tests/static_probes: $(STATIC)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)printf 'int main(void) { return 0; }\n' | $(CC) $(LDFLAGS) -o $@ -x c - -x none \
		-Wl,--whole-archive $(STATIC) -Wl,--no-whole-archive $(LIBS)

$(B)/tests/check_probes: $(B)/tests/static_probes $(BPF_SKEL)
$(B)/tests/check_trace: $(CLI)
$(B)/tests/check_liveness: $(CLI) $(TEST_CLI)
$(B)/tests/check_product: $(CLI) $(TEST_CLI) $(STATIC)
$(B)/tests/check_product: override CFLAGS += -DSC_BUILD_DIR='"$(B)"'
$(B)/tests/check_events_pub: $(CLI)
$(B)/tests/check_events_pub: override CFLAGS += -DSC_SRC_DIR='"$(CURDIR)"'

all: $(PROBE_HELPERS)

-include $(NOPROBES_OBJS:.o=.d) $(PROBE_HELPERS:=.d)


# ---- fuzzing (libFuzzer): make fuzz [FUZZ_SECONDS=N] ----
FUZZ_SECONDS ?= 30
FB := build/fuzz
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(FB)/%)
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -DSTAP_SDT_ARG_CONSTRAINT=nr -DSC_TEST_HOOKS -Ilib -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(FB)/obj/%.o)

$(FB)/obj/%.o: %.c
	$(call msg,CLANG,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FB)/%: tests/fuzz/%.c $(FUZZ_LIB_OBJS)
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -MF $@.d -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJS) $(LIBS) -pthread

-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_BINS:=.d)

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@for f in $(FUZZ_BINS); do \
		n=$$(basename $$f); mkdir -p $(FB)/corpus/$$n; \
		echo "== $$n: $(FUZZ_SECONDS)s"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -rss_limit_mb=4096 -timeout=10 \
			-artifact_prefix=$(FB)/$$n- $(FB)/corpus/$$n 2>&1 | grep -E '^(stat::|==|SUMMARY|#[0-9]+ *DONE)' ; \
		test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

# Replay every kept reproducer, tests/fuzz/regressions/<target>-<name>, against its target
# (mutex scribbling allowed: some reproducers need it). Fails while any still reproduces.
FUZZ_REGRESSIONS := $(sort $(wildcard tests/fuzz/regressions/fuzz_*-*))
fuzz-regress: $(FUZZ_BINS)
	@fail=0; mkdir -p $(FB)/regress; for r in $(FUZZ_REGRESSIONS); do \
		n=$$(basename $$r); t=$${n%%-*}; \
		if SC_FUZZ_SCRIBBLE_MUTEX=1 timeout 120 $(FB)/$$t -timeout=10 -rss_limit_mb=4096 $$r >$(FB)/regress/$$n.log 2>&1; \
		then echo "ok    $$r"; else echo "FAIL  $$r (see $(FB)/regress/$$n.log)"; fail=1; fi; \
	done; \
	for f in /dev/shm/stagecache.fuzz-*-[0-9]* /dev/shm/fuzz-l3-[0-9]*; do \
		p=$${f##*-}; test -e "$$f" && ! kill -0 $$p 2>/dev/null && rm -rf "$$f"; \
	done; exit $$fail

.PHONY: fuzz-regress

# ---- API: the C++ client, the Python and Rust bindings, the exporter, the docs ----
# The bindings are tested with Debian's interpreters and compilers, not whatever is first on PATH
# (a pyenv python without numpy, a rustup toolchain newer than Debian's rustc 1.63).
PYTHON3 ?= /usr/bin/python3
CARGO ?= /usr/bin/cargo
# the exporter's HTTP server: libmicrohttpd, loaded with dlopen when the exporter serves (its
# header is needed to build; the binary does not link it)

# A C++ client of the header, linked with the shared library as a C++ engine would.
$(B)/tests/cxx_client: tests/cxx_client.cpp lib/stagecache.h $(SHARED)
	$(call msg,CXX,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -std=c++17 -Wall -Wextra -Wpedantic -Werror -Ilib $(SAN) -o $@ $< -L$(B) -l:libstagecache.so.0 \
		-Wl,-rpath,'$$ORIGIN/..'

tests: $(B)/tests/cxx_client

# What `make check` runs besides the Check suites (each prints a Check-style summary line).
API_TESTS := $(B)/tests/cxx_client tests/api/python.sh tests/api/rust.sh tests/api/exporter.sh tests/api/docs.sh
check: export SC_BUILD := $(B)
check: export SC_SANITIZER := $(ASAN)$(TSAN)
check: export PYTHON3 := $(PYTHON3)
check: export CARGO := $(CARGO)

# make docs: man pages under $(B)/man (stagecache.1, stagecache-CMD.1 from each --help via
# help2man; libstagecache.3 from the header's comments via Doxygen), and docs/CLI.md (committed)
# from the same --help texts (`stress` and `bench` run the test build and stagecache-bench).
MANDIR ?= $(PREFIX)/share/man
docs: $(CLI) $(TEST_CLI) $(BENCH) lib/stagecache.h docs/Doxyfile docs/doxygen_filter.py docs/man.sh docs/cli.sh
	$(call msg,DOCS,$(B)/man)
	$(Q)sh docs/man.sh $(B) $(CLI)
	$(call msg,DOCS,docs/CLI.md)
	$(Q)sh docs/cli.sh $(CLI) > $(B)/CLI.md.tmp && mv $(B)/CLI.md.tmp docs/CLI.md

# make install also installs the man pages and the Python package (which then loads the
# library from $(LIBDIR), recorded in stagecache/_installed.py).
PYTHON_SITEDIR ?= $(PREFIX)/lib/python3/dist-packages
install: install-docs install-python

install-docs: docs
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man3type
	install -m 0644 $(B)/man/man1/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(B)/man/man3/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 $(B)/man/man3type/*.3type $(DESTDIR)$(MANDIR)/man3type/

install-python:
	install -d $(DESTDIR)$(PYTHON_SITEDIR)/stagecache
	install -m 0644 python/stagecache/*.py $(DESTDIR)$(PYTHON_SITEDIR)/stagecache/
	printf 'LIBDIR = %s\n' "'$(LIBDIR)'" > $(DESTDIR)$(PYTHON_SITEDIR)/stagecache/_installed.py

.PHONY: docs install-docs install-python

# ---- the llama.cpp example (examples/llama/): built when `make deps` installed the engine ----
# examples/llama/fetch-engine.sh puts the prebuilt libllama/libggml* in build/llama/lib, the
# headers in build/llama/include and gguf-py in build/llama/gguf-py; gen-model.py writes random-
# weight GGUF models into build/llama/models. Without the engine (no registry) none of this is
# built and tests/check_llama.c prints SKIP.
LLAMA_DIR := build/llama
LLAMA_SO := $(notdir $(wildcard $(LLAMA_DIR)/lib/libllama.v*.so))
LLAMA_EX := $(B)/examples/llama
LLAMA_WORKER := $(LLAMA_EX)/sc-llama-worker
LLAMA_CHAT := $(LLAMA_EX)/sc-llama-chat
LLAMA_MODELS := $(LLAMA_DIR)/models
LLAMA_CFLAGS := -I$(LLAMA_DIR)/include -DSC_LLAMA_LIBDIR='"$(abspath $(LLAMA_DIR)/lib)"'
LLAMA_LIBS := -L$(LLAMA_DIR)/lib -l:$(LLAMA_SO) $(patsubst $(LLAMA_DIR)/lib/%,-l:%,$(wildcard $(LLAMA_DIR)/lib/libggml.v*.so)) \
	-l:libggml-base.so -Wl,-rpath,'$(abspath $(LLAMA_DIR)/lib)'
LLAMA_WORKER_OBJS := $(addprefix $(B)/obj/examples/llama/,worker.o cache.o engine.o layout.o)

$(B)/obj/examples/llama/%.o: examples/llama/%.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(LLAMA_CFLAGS) -c -o $@ $<

$(LLAMA_WORKER): $(LLAMA_WORKER_OBJS) $(SHARED)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(LLAMA_WORKER_OBJS) -L$(B) -l:libstagecache.so.0 -Wl,-rpath,'$$ORIGIN/../..' $(LLAMA_LIBS)

# the same engine wrapper as a shared library, for examples/llama/worker.py (ctypes)
LLAMA_ENGINE_SO := $(LLAMA_EX)/libsc-llama-engine.so
$(LLAMA_ENGINE_SO): $(B)/obj/examples/llama/engine.o
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -shared $(LDFLAGS) -o $@ $< $(LLAMA_LIBS)

# the driver speaks to workers through pipes and reads their rings: it needs no llama.cpp
$(LLAMA_CHAT): $(B)/obj/examples/llama/chat.o $(B)/obj/examples/llama/trace.o $(SHARED)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -L$(B) -l:libstagecache.so.0 -Wl,-rpath,'$$ORIGIN/../..' -lm

$(LLAMA_MODELS)/%.gguf: examples/llama/gen-model.py $(LLAMA_DIR)/ENGINE
	$(call msg,GGUF,$@)
	@mkdir -p $(dir $@)
	$(Q)$(PYTHON3) examples/llama/gen-model.py --size $* --gguf-py $(LLAMA_DIR)/gguf-py $@ >/dev/null

llama: $(if $(LLAMA_SO),$(LLAMA_WORKER) $(LLAMA_CHAT) $(LLAMA_ENGINE_SO) $(LLAMA_MODELS)/tiny.gguf,llama-missing)
llama-models: $(if $(LLAMA_SO),$(LLAMA_MODELS)/tiny.gguf $(LLAMA_MODELS)/base.gguf,llama-missing)
bench-run: $(if $(LLAMA_SO),llama-models)
llama-missing:
	@echo "  SKIP    the llama.cpp example: the engine is not installed (make deps fetches it from the npm registry)"
all: llama
$(B)/tests/check_llama: $(if $(LLAMA_SO),$(LLAMA_WORKER) $(LLAMA_CHAT) $(LLAMA_ENGINE_SO) $(LLAMA_MODELS)/tiny.gguf)
$(B)/tests/check_llama: override CFLAGS += -DSC_LLAMA_WORKER='"$(abspath $(LLAMA_WORKER))"' \
	-DSC_LLAMA_MODELS='"$(abspath $(LLAMA_MODELS))"' -DSC_LLAMA_GEN='"$(abspath examples/llama/gen-model.py)"' \
	-DSC_LLAMA_GGUF_PY='"$(abspath $(LLAMA_DIR)/gguf-py)"' -DSC_PYTHON3='"$(PYTHON3)"' \
	-DSC_LLAMA_PY='"$(abspath examples/llama/worker.py)"' -DSC_LLAMA_ENGINE='"$(abspath $(LLAMA_ENGINE_SO))"' \
	-DSC_PYTHONPATH='"$(abspath python)"'

# make demo-llama: the engine act (examples/llama/demo.sh): workers answering a chat trace with
# and without the cache, time to first token side by side, where the cache's time went.
demo-llama: deps
	@$(MAKE) --no-print-directory all llama-models
	@$(MAKE) --no-print-directory setup
	@sh examples/llama/demo.sh $(B)

.PHONY: llama llama-models llama-missing demo-llama

-include $(LLAMA_WORKER_OBJS:.o=.d) $(B)/obj/examples/llama/chat.d $(B)/obj/examples/llama/trace.d

# ---- CephFS: tests/check_cephfs.c starts and stops a real cluster with tools/scripts/cephfs-dev.sh ----
$(B)/tests/check_cephfs: override CFLAGS += -DSC_CEPHFS_DEV='"$(CURDIR)/tools/scripts/cephfs-dev.sh"'
$(B)/tests/check_cephfs: tools/scripts/cephfs-dev.sh

# ---- make mutate: the mutation runner (tests/mutate/mutate.py) on a copy of the tree under
# build/mutate/tree (the checkout is never modified, but for KEEP=). FILES="shm/ring.c ..."
# (default: the groups of tests/mutate/suites.txt), PER_FILE=N mutants at most per file (sampled; 0:
# all), SEED, BUDGET (seconds for the run), OPS="cmp bound order skip swap", JOBS (mutants at once,
# one tree copy each), RERUN=build/mutate/results.json (run only that run's survivors again, and
# its kills by a timeout, keep the rest; with RERUN_SURVIVORS=1 only the survivors),
# RESUME=build/mutate/results.partial.json (keep a cut-short run's results, run the mutants it did
# not reach), COVER=1 (first measure, or bring up to date, which test cases run each
# line: build/mutate/coverage.json; with the map a mutant runs only the cases that run its lines),
# NO_COVER=1 (ignore the map), MUTATE_ASAN=1 (a survivor's cases run again in an AddressSanitizer
# build; a case that fails there and passes without the mutant kills it), QUICK=1 (a first pass:
# each mutant runs only the suites of its file's own line in tests/mutate/suites.txt, not BASE; its
# survivors are provisional, and RERUN= with the results, without QUICK=1, runs all of their cases),
# KEEP=tests/mutate/results/GROUP.json (the results also written there, one mutant a line, after
# every mutant: the record kept in the repository, which RESUME= or RERUN= on a new machine starts
# from), RUN_CLAIMED=1 (run the mutants tests/mutate/equivalent.txt claims equivalent too; by
# default they are counted equivalent without a run). Summary: build/mutate/summary.txt.
PER_FILE ?= 6
SEED ?= 1
BUDGET ?= 10800
JOBS ?= 2
mutate: all tests
	@$(PYTHON3) tests/mutate/mutate.py --per-file $(PER_FILE) --seed $(SEED) --budget $(BUDGET) --jobs $(JOBS) \
		$(if $(FILES),--files "$(FILES)") $(if $(OPS),--ops "$(OPS)") $(if $(RERUN),--rerun "$(RERUN)") $(if $(RERUN_SURVIVORS),--survivors-only) \
		$(if $(RESUME),--resume "$(RESUME)") $(if $(NO_VALIDATE),--no-validate) $(if $(COVER),--cover) \
		$(if $(NO_COVER),--no-cover) $(if $(MUTATE_ASAN),--asan) $(if $(QUICK),--quick) \
		$(if $(KEEP),--keep "$(KEEP)") $(if $(RUN_CLAIMED),--run-claimed)

.PHONY: mutate

# ---- checks ----
deps:
	@sh tools/scripts/deps.sh
	@sh examples/llama/fetch-engine.sh $(LLAMA_DIR)

# make cross: the library (static and shared) cross-compiled for aarch64 under build/aarch64,
# with Debian's gcc-aarch64-linux-gnu and the arm64 -dev packages (tools/scripts/deps.sh --cross installs
# them). CI runs it so that the first ARM user does not meet a build error.
CROSS_CC ?= aarch64-linux-gnu-gcc
cross:
	@sh tools/scripts/deps.sh --cross
	@$(MAKE) --no-print-directory B=build/aarch64 CC=$(CROSS_CC) ASAN= TSAN= \
		build/aarch64/libstagecache.a build/aarch64/libstagecache.so.0
	@readelf -h build/aarch64/libstagecache.so.0 | grep -q 'Machine: *AArch64' || { echo "build/aarch64/libstagecache.so.0 is not an aarch64 object" >&2; exit 1; }
	@echo "  OK      build/aarch64/libstagecache.a, libstagecache.so.0 (aarch64)"

setup: $(CLI)
	@if [ "$$(id -u)" = 0 ]; then $(CLI) setup; else echo "not root: run 'sudo $(CLI) setup' to reserve hugepages and mount hugetlbfs/bpffs"; fi

check: deps
	@$(MAKE) --no-print-directory all tests
	@$(MAKE) --no-print-directory setup
	@sh tests/run.sh $(B) $(TEST_BINS) $(API_TESTS)

tests: $(TEST_BINS)

demo: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory setup
	$(CLI) demo

bench: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory setup
	@$(MAKE) --no-print-directory bench-run

install: all
	install -d $(DESTDIR)$(INCDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 0644 lib/stagecache.h lib/stagecache_parts.h $(DESTDIR)$(INCDIR)/
	install -m 0644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 0755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libstagecache.so.0 $(DESTDIR)$(LIBDIR)/libstagecache.so
	sed -e 's|@PREFIX@|$(PREFIX)|;s|@LIBDIR@|$(LIBDIR)|;s|@INCDIR@|$(INCDIR)|;s|@VERSION@|0.1.0|' \
		lib/stagecache.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/stagecache.pc
	install -m 0755 $(CLI) $(DESTDIR)$(BINDIR)/stagecache
	install -m 0755 $(BENCH) $(DESTDIR)$(BINDIR)/stagecache-bench
	@echo "installed under $(DESTDIR)$(PREFIX)"

clean:
	rm -rf build

.PHONY: all check tests demo bench deps setup install clean fuzz fuzz-build cross

-include $(LIB_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(TEST_HELPER_OBJS:.o=.d) $(TEST_LIB_OBJS:.o=.d) $(TEST_TOOL_OBJS:.o=.d) $(BENCH_OBJS:.o=.d)
