# stagecache — one plain Makefile; every output under build/.
#   make [all] | check | demo | bench | deps | install | clean | fuzz
#   switches: ASAN=1 TSAN=1 V=1 PREFIX=/usr/local DESTDIR=
.DELETE_ON_ERROR:
.SUFFIXES:

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
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt)

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-7s %s\n' $(1) $(2)
endif

LIB_SRCS := $(sort $(wildcard shm/*.c lib/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TOOL_OBJS := $(TOOL_SRCS:%.c=$(B)/obj/%.o)
TEST_SRCS := $(sort $(wildcard tests/check_*.c))
TEST_BINS := $(TEST_SRCS:tests/%.c=$(B)/tests/%)
TEST_HELPERS := $(filter-out $(TEST_SRCS),$(sort $(wildcard tests/*.c)))
TEST_HELPER_OBJS := $(TEST_HELPERS:%.c=$(B)/obj/%.o)

STATIC := $(B)/libstagecache.a
SHARED := $(B)/libstagecache.so.0
CLI := $(B)/stagecache

all: $(STATIC) $(SHARED) $(B)/libstagecache.so $(CLI)

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
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJS) -L$(B) -l:libstagecache.so.0 -Wl,-rpath,'$$ORIGIN' $(LIBS) $(TOOL_LIBS)

# Tests link the static library (and may use its private headers).
$(B)/tests/%: tests/%.c $(STATIC) $(TEST_HELPER_OBJS)
	$(call msg,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -Wno-unused-parameter $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJS) $(STATIC) $(LIBS) $(CHECK_LIBS)

# ---- BPF (owned by observability) ----

# ---- checks ----
deps:
	@sh tools/deps.sh

setup: $(CLI)
	@if [ "$$(id -u)" = 0 ]; then $(CLI) setup; else echo "not root: run 'sudo $(CLI) setup' to reserve hugepages and mount hugetlbfs/bpffs"; fi

check: deps
	@$(MAKE) --no-print-directory all tests
	@$(MAKE) --no-print-directory setup
	@sh tests/run.sh $(B) $(TEST_BINS)

tests: $(TEST_BINS)

demo: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory setup
	$(CLI) demo

bench: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory setup
	$(CLI) bench all --json --out $(B)/bench.json

install: all
	install -d $(DESTDIR)$(INCDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 0644 lib/stagecache.h $(DESTDIR)$(INCDIR)/
	install -m 0644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 0755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libstagecache.so.0 $(DESTDIR)$(LIBDIR)/libstagecache.so
	sed -e 's|@PREFIX@|$(PREFIX)|;s|@LIBDIR@|$(LIBDIR)|;s|@INCDIR@|$(INCDIR)|;s|@VERSION@|0.1.0|' \
		lib/stagecache.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/stagecache.pc
	install -m 0755 $(CLI) $(DESTDIR)$(BINDIR)/stagecache
	@echo "installed under $(DESTDIR)$(PREFIX)"

clean:
	rm -rf build

.PHONY: all check tests demo bench deps setup install clean

-include $(LIB_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(TEST_HELPER_OBJS:.o=.d)
