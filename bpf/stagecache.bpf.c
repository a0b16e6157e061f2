// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpf/stagecache.bpf.c — eBPF programs for the USDT probes of libstagecache (lib/probes.h).
 *
 * One SEC("usdt") program per probe, named exactly like the probe, so the loader attaches program
 * X to probe stagecache:X (bpf_program__attach_usdt with pid -1 and the library or binary path:
 * every process mapping that file, now or later). CO-RE: built against build/vmlinux.h.
 *
 * All aggregation happens here, in maps laid out in bpf/stagecache_maps.h and pinned by the
 * loader. Counters are shared (not per-CPU) so `bpftool map dump` shows one value per key; every
 * update is an atomic add, so concurrent firings on several CPUs never lose a count. An entry is
 * created with BPF_NOEXIST and looked up again, so two CPUs creating the same key both land on the
 * one the map kept. A full map costs the event (counted in trace_state.drops), never a wrong count
 * for an existing key.
 *
 * Probe arguments are taken in the order lib/probes.h documents; do not reorder.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "stagecache_maps.h"

/* GPL: the USDT argument fetcher may call bpf_probe_read_user. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SC_BPF_COUNTER_ENTRIES);
	__type(key, struct sc_bpf_key);
	__type(value, struct sc_bpf_counter);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SC_BPF_REASON_ENTRIES);
	__type(key, struct sc_bpf_reason_key);
	__type(value, struct sc_bpf_count);
} reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SC_BPF_HIST_ENTRIES);
	__type(key, struct sc_bpf_hist_key);
	__type(value, struct sc_bpf_hist);
} latency SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SC_BPF_RECENT);
	__type(key, __u32);
	__type(value, struct sc_bpf_promotion);
} recent_promotions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SC_BPF_PAYOFF_ENTRIES);
	__type(key, struct sc_bpf_digest);
	__type(value, struct sc_bpf_payoff);
} promotion_payoff SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sc_bpf_state);
} trace_state SEC(".maps");

static __always_inline void note_drop(void)
{
	__u32 zero = 0;
	struct sc_bpf_state *st = bpf_map_lookup_elem(&trace_state, &zero);
	if (st)
		__sync_fetch_and_add(&st->drops, 1);
}

static __always_inline __u32 current_pid(void)
{
	return (__u32)(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline void count(__u64 stage, __u32 event, __u64 bytes, __u64 tokens, __u64 ns)
{
	struct sc_bpf_key k = { .stage = stage, .pid = current_pid(), .event = event };
	struct sc_bpf_counter *c = bpf_map_lookup_elem(&counters, &k);
	if (!c) {
		struct sc_bpf_counter zero = {};
		bpf_map_update_elem(&counters, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&counters, &k);
		if (!c) {
			note_drop();
			return;
		}
	}
	__sync_fetch_and_add(&c->count, 1);
	if (bytes)
		__sync_fetch_and_add(&c->bytes, bytes);
	if (tokens)
		__sync_fetch_and_add(&c->tokens, tokens);
	if (ns)
		__sync_fetch_and_add(&c->ns, ns);
}

static __always_inline void count_reason(__u64 stage, __u32 event, __u32 reason)
{
	struct sc_bpf_reason_key k = { .stage = stage, .event = event, .reason = reason };
	struct sc_bpf_count *c = bpf_map_lookup_elem(&reasons, &k);
	if (!c) {
		struct sc_bpf_count zero = {};
		bpf_map_update_elem(&reasons, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&reasons, &k);
		if (!c) {
			note_drop();
			return;
		}
	}
	__sync_fetch_and_add(&c->count, 1);
}

/* floor(log2(v)), 0 for v == 0: five halvings, no loop for the verifier to bound. */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

static __always_inline void hist_add(__u64 stage, __u32 kind, __u64 value)
{
	struct sc_bpf_hist_key k = { .stage = stage, .kind = kind };
	struct sc_bpf_hist *h = bpf_map_lookup_elem(&latency, &k);
	if (!h) {
		/* sc_bpf_hist is 512 bytes: too big for the stack next to the rest, so the zero
		 * value comes from a read-only global */
		static const struct sc_bpf_hist empty;
		bpf_map_update_elem(&latency, &k, &empty, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&latency, &k);
		if (!h) {
			note_drop();
			return;
		}
	}
	__u32 slot = log2_slot(value) & (SC_BPF_HIST_SLOTS - 1);
	__sync_fetch_and_add(&h->slots[slot], 1);
}

SEC("usdt")
int BPF_USDT(l2_hit, __u64 stage, __u64 lo, __u64 hi, __u64 bytes, __u64 origin, __u64 lookup_ns)
{
	count(stage, SC_EV_L2_HIT, bytes, 0, lookup_ns);
	hist_add(stage, SC_HIST_LOOKUP_HIT, lookup_ns);
	if (origin != 1)
		return 0;
	count(stage, SC_EV_L2_HIT_PROMOTED, bytes, 0, lookup_ns);

	struct sc_bpf_digest d = { .lo = lo, .hi = hi };
	__u64 now = bpf_ktime_get_ns();
	struct sc_bpf_payoff *p = bpf_map_lookup_elem(&promotion_payoff, &d);
	if (!p) {
		/* promoted before this trace started: count its hits from now on */
		struct sc_bpf_payoff fresh = { .stage = stage, .bytes = bytes };
		bpf_map_update_elem(&promotion_payoff, &d, &fresh, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&promotion_payoff, &d);
		if (!p) {
			note_drop();
			return 0;
		}
	}
	__sync_fetch_and_add(&p->hits, 1);
	__sync_fetch_and_add(&p->hit_bytes, bytes);
	p->last_hit_ns = now; /* a racing hit may win: either time is right */
	return 0;
}

SEC("usdt")
int BPF_USDT(l2_miss, __u64 stage, __u64 tokens, __u64 reason, __u64 lookup_ns)
{
	count(stage, SC_EV_L2_MISS, 0, tokens, lookup_ns);
	count_reason(stage, SC_EV_L2_MISS, (__u32)reason);
	hist_add(stage, SC_HIST_LOOKUP_MISS, lookup_ns);
	return 0;
}

SEC("usdt")
int BPF_USDT(l2_admit, __u64 stage, __u64 lo, __u64 hi, __u64 bytes, __u64 origin)
{
	count(stage, SC_EV_L2_ADMIT, bytes, 0, 0);
	if (origin == 1)
		count(stage, SC_EV_L2_ADMIT_FROM_L3, bytes, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(l2_segments, __u64 stage, __u64 logical, __u64 stored, __u64 shared)
{
	(void)shared; /* logical - stored */
	count(stage, SC_EV_L2_SEG_LOGICAL, logical, 0, 0);
	count(stage, SC_EV_L2_SEG_STORED, stored, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(l3_segments, __u64 logical, __u64 stored, __u64 shared)
{
	(void)shared; /* payload bytes found stored already */
	count(0, SC_EV_L3_SEG_LOGICAL, logical, 0, 0);
	count(0, SC_EV_L3_SEG_STORED, stored, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(l2_reject, __u64 stage, __u64 bytes, __u64 err, __u64 reason)
{
	count(stage, SC_EV_L2_REJECT, bytes, 0, 0);
	count_reason(stage, SC_EV_L2_REJECT, (__u32)reason);
	return 0;
}

SEC("usdt")
int BPF_USDT(l2_evict, __u64 stage, __u64 lo, __u64 hi, __u64 bytes)
{
	count(stage, SC_EV_L2_EVICT, bytes, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(l2_remove, __u64 stage, __u64 lo, __u64 hi, __u64 bytes, __u64 reason)
{
	count(stage, SC_EV_L2_REMOVE, bytes, 0, 0);
	count_reason(stage, SC_EV_L2_REMOVE, (__u32)reason);
	return 0;
}

SEC("usdt")
int BPF_USDT(promote_decision, __u64 stage, __u64 lo, __u64 hi, __u64 tokens, __u64 bytes, __u64 decision,
	     __u64 why)
{
	if (!decision) {
		count(stage, SC_EV_PROMOTE_NOT, bytes, tokens, 0);
		count_reason(stage, SC_EV_PROMOTE_NOT, (__u32)why);
		return 0;
	}
	count(stage, SC_EV_PROMOTE, bytes, tokens, 0);
	count_reason(stage, SC_EV_PROMOTE, (__u32)why);

	__u64 now = bpf_ktime_get_ns();
	__u32 pid = current_pid();
	struct sc_bpf_digest d = { .lo = lo, .hi = hi };
	/* a new promotion of the same digest starts its payoff from zero */
	struct sc_bpf_payoff p = { .stage = stage, .tokens = tokens, .bytes = bytes, .promoted_ns = now, .pid = pid };
	if (bpf_map_update_elem(&promotion_payoff, &d, &p, BPF_ANY))
		note_drop();

	__u32 zero = 0;
	struct sc_bpf_state *st = bpf_map_lookup_elem(&trace_state, &zero);
	if (!st)
		return 0;
	__u64 seq = __sync_fetch_and_add(&st->promotions_seq, 1) + 1;
	__u32 slot = (__u32)(seq - 1) & (SC_BPF_RECENT - 1);
	struct sc_bpf_promotion *r = bpf_map_lookup_elem(&recent_promotions, &slot);
	if (!r)
		return 0;
	/* Not atomic as a whole: a reader may see a slot mid-rewrite 256 promotions later; seq is
	 * written last so a reader can tell (it is an operator's view, not an exact count). */
	r->lo = lo;
	r->hi = hi;
	r->stage = stage;
	r->tokens = tokens;
	r->bytes = bytes;
	r->time_ns = now;
	r->pid = pid;
	r->why = (__u32)why;
	r->seq = seq;
	return 0;
}

SEC("usdt")
int BPF_USDT(promote_outcome, __u64 stage, __u64 lo, __u64 hi, __u64 bytes, __u64 published, __u64 reason)
{
	if (published) {
		count(stage, SC_EV_PROMOTE_PUBLISHED, bytes, 0, 0);
		return 0;
	}
	count(stage, SC_EV_PROMOTE_REFUSED, bytes, 0, 0);
	count_reason(stage, SC_EV_PROMOTE_REFUSED, (__u32)reason);
	return 0;
}

SEC("usdt")
int BPF_USDT(l3_fill_start, __u64 stage, __u64 lo, __u64 hi, __u64 bytes)
{
	count(stage, SC_EV_FILL_START, bytes, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(l3_fill_done, __u64 stage, __u64 lo, __u64 hi, __u64 bytes, __u64 duration_ns, __s64 result)
{
	if (result < 0) {
		count(stage, SC_EV_FILL_ERROR, bytes, 0, duration_ns);
		count_reason(stage, SC_EV_FILL_ERROR, (__u32)-result);
		return 0;
	}
	count(stage, SC_EV_FILL_DONE, bytes, 0, duration_ns);
	hist_add(stage, SC_HIST_FILL, duration_ns);
	return 0;
}

SEC("usdt")
int BPF_USDT(l3_quarantine, __u64 lo, __u64 hi, __u64 reason)
{
	count(0, SC_EV_L3_QUARANTINE, 0, 0, 0);
	count_reason(0, SC_EV_L3_QUARANTINE, (__u32)reason);
	return 0;
}

SEC("usdt")
int BPF_USDT(l3_index, __u64 result, __u64 tokens, __u64 lookup_ns)
{
	if (result == 0) {
		count(0, SC_EV_L3IX_HIT, 0, tokens, lookup_ns);
	} else {
		count(0, SC_EV_L3IX_FALLBACK, 0, tokens, lookup_ns);
		count_reason(0, SC_EV_L3IX_FALLBACK, (__u32)result);
	}
	return 0;
}

SEC("usdt")
int BPF_USDT(l3_index_refresh, __u64 positive, __u64 negative, __u64 evicted)
{
	count(0, SC_EV_L3IX_REFRESH, evicted, positive + negative, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(key_collision, __u64 level, __u64 tokens)
{
	count(0, SC_EV_KEY_COLLISION, 0, tokens, 0);
	count_reason(0, SC_EV_KEY_COLLISION, (__u32)level);
	return 0;
}

SEC("usdt")
int BPF_USDT(miss_reason, __u64 stage, __u64 level, __u64 reason, __u64 detail)
{
	if (level == 0) {
		count(stage, SC_EV_MISS_L2, 0, 0, 0);
		count_reason(stage, SC_EV_MISS_L2, (__u32)reason);
		if (reason == 4) { /* SC_MISS_REFUSED: detail is the refusal */
			count(stage, SC_EV_MISS_REFUSED, 0, 0, 0);
			count_reason(stage, SC_EV_MISS_REFUSED, (__u32)detail);
		}
		return 0;
	}
	count(stage, SC_EV_MISS_RESTORE, 0, 0, 0);
	count_reason(stage, SC_EV_MISS_RESTORE, (__u32)reason);
	if (reason == 9) { /* SC_MISS_DEADLINE: detail is enum sc_deadline_detail */
		count(stage, SC_EV_MISS_DEADLINE, 0, 0, 0);
		count_reason(stage, SC_EV_MISS_DEADLINE, (__u32)detail);
	}
	return 0;
}

SEC("usdt")
int BPF_USDT(commit_emit, __u64 ring, __u64 request_id, __u64 running_total, __u64 batch_tokens)
{
	count(ring, SC_EV_COMMIT, 0, batch_tokens, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(ring_full, __u64 ring, __u64 request_id, __u64 pending_tokens)
{
	count(ring, SC_EV_RING_FULL, 0, pending_tokens, 0);
	return 0;
}
