/*
 * bpf/stagecache_maps.h — the layouts of the maps of bpf/stagecache.bpf.c, shared by the BPF
 * program and every user-space reader (tools/cmd_trace.c, tests/check_trace.c, bpftool through BTF).
 *
 * Plain fixed-width structs only: the BPF side sees the kernel's __u64 from vmlinux.h, user space
 * sees <linux/types.h>. No pointers, no enums in the layouts (enum sizes differ across compilers),
 * no implicit padding (each struct is asserted below), so a dump made by one build reads the same
 * in another.
 *
 * The maps, pinned under SC_BPF_PIN_DIR_DEFAULT (mode 0700) by `stagecache trace`:
 *   counters           HASH      sc_bpf_key        -> sc_bpf_counter   per (stage, pid, event)
 *   reasons            HASH      sc_bpf_reason_key -> sc_bpf_count     per (stage, event, reason)
 *   latency            HASH      sc_bpf_hist_key   -> sc_bpf_hist      log2 histograms per (stage, kind)
 *   recent_promotions  ARRAY     u32 slot          -> sc_bpf_promotion the last SC_BPF_RECENT promotions
 *   promotion_payoff   LRU_HASH  sc_bpf_digest     -> sc_bpf_payoff    hits served since each promotion
 *   trace_state        ARRAY     u32 0             -> sc_bpf_state     sequence of promotions, drops
 */
#ifndef SC_BPF_STAGECACHE_MAPS_H
#define SC_BPF_STAGECACHE_MAPS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Pins live in a versioned directory: a change of any layout below bumps it. */
#define SC_BPF_PIN_DIR_DEFAULT "/sys/fs/bpf/stagecache/v1"
#define SC_BPF_LAYOUT_VERSION 1

/* Events counted in `counters` (field `event` of sc_bpf_key). */
#define SC_EV_L2_HIT 0         /* every l2_hit; bytes = entry bytes, ns = lookup_ns */
#define SC_EV_L2_HIT_PROMOTED 1 /* l2_hit with origin FROM_L3: a promotion hit (also in L2_HIT) */
#define SC_EV_L2_MISS 2        /* tokens = prefix tokens, ns = lookup_ns */
#define SC_EV_L2_ADMIT 3       /* every l2_admit; bytes */
#define SC_EV_L2_ADMIT_FROM_L3 4 /* l2_admit with origin FROM_L3 (also in L2_ADMIT) */
#define SC_EV_L2_REJECT 5      /* bytes; reason (enum sc_l2_refusal of stagecache.h) in `reasons` */
#define SC_EV_L2_EVICT 6       /* bytes */
#define SC_EV_L2_REMOVE 7      /* bytes; reason in `reasons` */
#define SC_EV_PROMOTE 8        /* promote_decision with decision 1; tokens, bytes */
#define SC_EV_PROMOTE_NOT 9    /* promote_decision with decision 0; why in `reasons` */
#define SC_EV_FILL_START 10    /* bytes */
#define SC_EV_FILL_DONE 11     /* l3_fill_done with result 0; bytes, ns = duration */
#define SC_EV_FILL_ERROR 12    /* l3_fill_done with result < 0; reason = -result in `reasons` */
#define SC_EV_L3_QUARANTINE 13 /* stage 0; reason in `reasons` */
#define SC_EV_COMMIT 14        /* commit_emit; stage field = ring index; tokens = batch tokens */
#define SC_EV_RING_FULL 15     /* ring_full; stage field = ring index; tokens = pending tokens */
#define SC_EV_L3IX_HIT 16      /* l3_index result 0 (answered by a positive entry); stage 0; tokens, ns */
#define SC_EV_L3IX_FALLBACK 17 /* l3_index result > 0: directory probe; reason = result in `reasons` */
#define SC_EV_L3IX_REFRESH 18  /* l3_index_refresh; tokens = entries written, bytes = entries evicted */
#define SC_EV_KEY_COLLISION 19 /* key_collision; stage 0; tokens; reason = level in `reasons` */
#define SC_EV_PROMOTE_PUBLISHED 20 /* promote_outcome, published; bytes */
#define SC_EV_PROMOTE_REFUSED 21   /* promote_outcome, not published; bytes; reason (enum sc_l2_refusal) in `reasons` */
#define SC_EV_L2_SEG_LOGICAL 22 /* l2_segments; bytes = the admitted wire */
#define SC_EV_L2_SEG_STORED 23  /* l2_segments; bytes = what the admit stored (physical) */
#define SC_EV_L3_SEG_LOGICAL 24 /* l3_segments; stage 0; bytes = the object whole (header + payload) */
#define SC_EV_L3_SEG_STORED 25  /* l3_segments; stage 0; bytes = what the put wrote (manifest + new segments) */
#define SC_EV_MISS_L2 26       /* miss_reason level 0 (an L2 lookup); reason (enum sc_miss_reason) in `reasons` */
#define SC_EV_MISS_RESTORE 27  /* miss_reason level 1 (a restore with no state); reason in `reasons` */
#define SC_EV_MISS_REFUSED 28  /* miss_reason level 0, reason REFUSED; the refusal (enum sc_l2_refusal) in `reasons` */
#define SC_EV_MISS_DEADLINE 29 /* miss_reason level 1, reason DEADLINE; its detail (enum sc_deadline_detail) in `reasons` */
#define SC_EV_COUNT 30
/* Refusal reasons (`reasons` of SC_EV_L2_REJECT and SC_EV_PROMOTE_REFUSED): enum sc_l2_refusal. */
#define SC_BPF_REFUSALS 9
/* Miss reasons (`reasons` of SC_EV_MISS_L2 and SC_EV_MISS_RESTORE): enum sc_miss_reason. */
#define SC_BPF_MISS_REASONS 16
#define SC_BPF_DEADLINE_DETAILS 4

/* Histogram kinds (field `kind` of sc_bpf_hist_key). */
#define SC_HIST_FILL 0        /* l3_fill_done duration_ns (successful fills) */
#define SC_HIST_LOOKUP_HIT 1  /* l2_hit lookup_ns */
#define SC_HIST_LOOKUP_MISS 2 /* l2_miss lookup_ns */
#define SC_HIST_COUNT 3
/* Slot i counts values v with floor(log2(v)) == i (v == 0 lands in slot 0). */
#define SC_BPF_HIST_SLOTS 64

#define SC_BPF_RECENT 256        /* recent_promotions slots (a power of two) */
#define SC_BPF_COUNTER_ENTRIES 16384
#define SC_BPF_REASON_ENTRIES 4096
#define SC_BPF_HIST_ENTRIES 1024
#define SC_BPF_PAYOFF_ENTRIES 16384

struct sc_bpf_key {
	__u64 stage; /* stage id (low 64 bits of the stage identity hash); ring index for ring events */
	__u32 pid;   /* tgid of the process that fired the probe */
	__u32 event; /* SC_EV_* */
};

struct sc_bpf_counter {
	__u64 count;  /* probe firings */
	__u64 bytes;  /* sum of the probe's byte argument */
	__u64 tokens; /* sum of the probe's token argument */
	__u64 ns;     /* sum of the probe's duration argument */
};

struct sc_bpf_reason_key {
	__u64 stage;
	__u32 event;  /* SC_EV_* */
	__u32 reason; /* the probe's reason / why / -result */
};

struct sc_bpf_count {
	__u64 count;
};

struct sc_bpf_hist_key {
	__u64 stage;
	__u32 kind; /* SC_HIST_* */
	__u32 pad;  /* zero */
};

struct sc_bpf_hist {
	__u64 slots[SC_BPF_HIST_SLOTS];
};

struct sc_bpf_digest {
	__u64 lo; /* sc_digest low64 */
	__u64 hi; /* sc_digest high64 */
};

struct sc_bpf_promotion {
	__u64 seq; /* 1-based promotion sequence number; 0: slot never written */
	__u64 lo, hi;
	__u64 stage;
	__u64 tokens;
	__u64 bytes;
	__u64 time_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u32 pid;
	__u32 why;     /* enum sc_promote_why */
};

struct sc_bpf_payoff {
	__u64 stage;
	__u64 tokens;
	__u64 bytes;
	__u64 promoted_ns; /* 0: promoted before this trace started (first seen on a hit) */
	__u64 hits;        /* promotion hits served by this entry since it was promoted */
	__u64 hit_bytes;
	__u64 last_hit_ns;
	__u32 pid;         /* the process that promoted it */
	__u32 pad;
};

struct sc_bpf_state {
	__u64 promotions_seq; /* promotions recorded in recent_promotions */
	__u64 drops;          /* events lost because a map was full */
	__u64 layout_version; /* SC_BPF_LAYOUT_VERSION, written by the loader */
};

_Static_assert(sizeof(struct sc_bpf_key) == 16, "sc_bpf_key layout");
_Static_assert(sizeof(struct sc_bpf_counter) == 32, "sc_bpf_counter layout");
_Static_assert(sizeof(struct sc_bpf_reason_key) == 16, "sc_bpf_reason_key layout");
_Static_assert(sizeof(struct sc_bpf_hist_key) == 16, "sc_bpf_hist_key layout");
_Static_assert(sizeof(struct sc_bpf_hist) == 8 * SC_BPF_HIST_SLOTS, "sc_bpf_hist layout");
_Static_assert(sizeof(struct sc_bpf_digest) == 16, "sc_bpf_digest layout");
_Static_assert(sizeof(struct sc_bpf_promotion) == 64, "sc_bpf_promotion layout");
_Static_assert(sizeof(struct sc_bpf_payoff) == 64, "sc_bpf_payoff layout");
_Static_assert(sizeof(struct sc_bpf_state) == 24, "sc_bpf_state layout");

#endif
