/*
 * tests/check_events.c — the event stream of what the arena holds (shm/evring.c, lib/events.c),
 * the lookups a publisher and a router use (sc_l2_entry_tokens, sc_l3_prefix_get/list, sc_lookup,
 * sc_block_hashes), and that an L3 change is made everywhere it shows before its event is written
 * (lib/bind.c). Real processes, real kill -9. `stagecache events` end to end is
 * tests/check_events_pub.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../lib/l3/l3.h"
#include "../shm/evring.h"
#include "../shm/fault.h"
#include "../shm/index.h"
#include "../lib/l2/view.h"

static void toks(int32_t *t, uint32_t n, int32_t base)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = base + (int32_t)i;
}

static int admit(struct sc_stage *st, const char *ns, const int32_t *t, uint32_t n, size_t bytes, uint32_t salt)
{
	uint8_t *b = malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		b[i] = (uint8_t)(i * 131 + salt);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { bytes } };
	int rc = sc_l2_admit(st, ns, t, n, sc_digest(b, bytes), &p, SC_ORIGIN_DIRECT);
	free(b);
	return rc;
}

static int l3_put(struct sc_l3 *l3, const char *ns, const int32_t *t, uint32_t n, size_t bytes, uint32_t salt)
{
	uint8_t *b = malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		b[i] = (uint8_t)(i * 7 + salt);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { bytes } };
	struct sc_l3_put_args a = { .ns = ns, .tokens = t, .token_count = n, .payload = &p };
	int rc = sc_l3_put(l3, &a, NULL);
	free(b);
	return rc;
}

/* Read events until @max are collected or @secs pass (the ring may hold a hole for 50 ms). */
static int read_events(struct sc_events *ev, struct sc_event *out, int max, double secs)
{
	int n = 0;
	double end = sc_test_now_s() + secs;
	while (n < max && sc_test_now_s() < end) {
		int k = sc_events_read(ev, out + n, (unsigned)(max - n));
		ck_assert_int_ge(k, 0);
		n += k;
		if (!k)
			sc_test_pause_ms(2);
	}
	return n;
}

static int count_type(const struct sc_event *e, int n, uint32_t type)
{
	int c = 0;
	for (int i = 0; i < n; i++)
		c += e[i].type == type;
	return c;
}

/* Shards whose listener mark (ev_listener) is @want, of SHM_INDEX_SHARDS. */
static int shards_marked(struct sc_arena *a, uint32_t want)
{
	struct shm_index ix;
	ck_assert_int_eq(shm_index_view(a->shm, &ix), 0);
	int n = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		n += atomic_load(&ix.hdr->shards[s].ev_listener) == want;
	return n;
}

/* ---- the library ---- */

START_TEST(test_nobody_listens)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evnone", 32ull << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	int32_t t[64];
	for (int i = 0; i < 20; i++) {
		toks(t, 64, i * 100);
		ck_assert_int_eq(admit(st, "ns", t, 64, 4096, (uint32_t)i), 0);
	}
	ck_assert_int_eq(sc_l2_clear(a), 20);
	struct sc_events_stats s;
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	ck_assert_uint_eq(s.appended, 0); /* a writer read one word and went on */
	ck_assert_uint_eq(s.listener, 0);
	ck_assert_int_eq(shards_marked(a, 0), SHM_INDEX_SHARDS); /* that word: no shard is marked */
	ck_assert_uint_ge(s.records, SHM_EVRING_MIN_RECORDS);
	struct sc_event e = { .type = SC_EVENT_L2_STORED };
	ck_assert_int_eq(sc_events_post(a, &e), -ENOTCONN);
	e.type = SC_EVENT_LOST;
	ck_assert_int_eq(sc_events_post(a, &e), -EINVAL);
	ck_assert_int_eq(sc_events_open(NULL, NULL), -EINVAL);
	ck_assert_int_eq(sc_events_read(NULL, &e, 1), -EINVAL);
	ck_assert_str_eq(sc_event_type_name(SC_EVENT_L3_OBJECT_GONE), "l3_object_gone");
	ck_assert_str_eq(sc_event_type_name(99), "?");
	ck_assert_str_eq(sc_event_lost_name(SC_EVENT_LOST_WRITER_DIED), "writer_died");
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_l2_changes)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evl2", 32ull << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	int32_t t1[40], t2[70];
	toks(t1, 40, 1);
	toks(t2, 70, 1);
	ck_assert_int_eq(admit(st, "ns", t1, 40, 4096, 1), 0);
	ck_assert_int_eq(admit(st, "ns", t2, 70, 8192, 2), 0);
	ck_assert_int_eq(admit(st, "ns", t1, 40, 4096, 3), 0); /* a replacement */
	struct sc_key k1, k2;
	ck_assert_int_eq(sc_l2_key(st, "ns", t1, 40, &k1), 0);
	ck_assert_int_eq(sc_l2_key(st, "ns", t2, 70, &k2), 0);
	/* the entry's own token ids, by key */
	int32_t back[80];
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_entry_tokens(a, k2, &info, back, 80), 70);
	ck_assert_int_eq(memcmp(back, t2, sizeof(t2)), 0);
	ck_assert_uint_eq(info.stage_id, sc_stage_id(st));
	ck_assert_int_eq(sc_l2_entry_tokens(a, k2, NULL, back, 10), 70); /* only 10 copied */
	ck_assert_int_eq(sc_l2_entry_tokens(a, k2, NULL, NULL, 0), 70);
	ck_assert_int_eq(sc_l2_entry_tokens(a, k2, NULL, NULL, 5), -EINVAL);
	ck_assert_int_eq(sc_l2_entry_tokens(NULL, k2, NULL, back, 80), -EINVAL);
	pid_t pid = fork(); /* the parent's handle in a forked child */
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(sc_l2_entry_tokens(a, k2, NULL, back, 80) == -ECHILD ? 0 : 1);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	{ /* an entry whose meta was scribbled to say it stores no token ids: damaged, not empty */
		struct shm_index_entry *e = sc_test_l2_entry(a, k2);
		ck_assert_ptr_nonnull(e);
		uint32_t meta = e->meta;
		e->meta &= ~L2_META_TOKENS;
		ck_assert_int_eq(sc_l2_entry_tokens(a, k2, NULL, back, 80), -EBADMSG);
		e->meta = meta;
		ck_assert_int_eq(sc_l2_entry_tokens(a, k2, NULL, back, 80), 70);
	}
	ck_assert_int_eq(sc_l2_remove(st, k2), 0);
	ck_assert_int_eq(sc_l2_entry_tokens(a, k2, NULL, back, 80), -ENOENT);
	ck_assert_int_eq(sc_l2_invalidate_digest(a, info.digest), 0); /* k2's digest: gone already */
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "ns", t1, 40, NULL, &l), 0);
	struct sc_digest d1 = l.digest;
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_invalidate_digest(a, d1), 1);
	ck_assert_int_eq(admit(st, "ns", t2, 70, 8192, 4), 0);
	ck_assert_int_eq(sc_l2_clear(a), 1);
	struct sc_event e[16];
	int n = read_events(ev, e, 7, 2.0);
	ck_assert_int_eq(n, 7);
	uint32_t want[7] = { SC_EVENT_L2_STORED, SC_EVENT_L2_STORED, SC_EVENT_L2_STORED, SC_EVENT_L2_REMOVED,
			     SC_EVENT_L2_REMOVED, SC_EVENT_L2_STORED, SC_EVENT_L2_CLEARED };
	for (int i = 0; i < 7; i++)
		ck_assert_uint_eq(e[i].type, want[i]);
	ck_assert_uint_eq(e[0].key.lo, k1.lo);
	ck_assert_uint_eq(e[0].key.hi, k1.hi);
	ck_assert_uint_eq(e[0].token_count, 40);
	ck_assert_uint_eq(e[0].stage_id, sc_stage_id(st));
	ck_assert_uint_eq(e[1].key.lo, k2.lo);
	ck_assert_uint_eq(e[3].key.lo, k2.lo);
	ck_assert_uint_eq(e[4].key.lo, k1.lo);
	ck_assert(sc_digest_equal(e[4].digest, d1));
	ck_assert_int_eq(sc_events_read(ev, e, 16), 0);
	struct sc_events_stats s;
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	ck_assert_uint_eq(s.appended, 7);
	ck_assert_uint_eq(s.consumed, 7);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_int_eq(s.listener_alive, 1);
	ck_assert_uint_eq(s.listener, sc_arena_token(a));
	sc_events_close(ev);
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	ck_assert_uint_eq(s.listener, 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Every eviction is an event: REMOVED events = evictions + removals, STORED = inserts. */
/* An entry fsck's repair drops (its bytes no longer match its digest) is announced like any other
 * removal: an L2 REMOVED event with its key and digest; the others stay. */
START_TEST(test_fsck_drop_is_announced)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evfsck", 32ull << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	int32_t t[3][20];
	for (int i = 0; i < 3; i++) {
		toks(t[i], 20, (unsigned)(10 + i));
		ck_assert_int_eq(admit(st, "ns", t[i], 20, 4096, (uint32_t)i), 0);
	}
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "ns", t[1], 20, NULL, &l), 0);
	struct sc_digest d = l.digest;
	((uint8_t *)l.sec[0])[100] ^= 1; /* a bit flipped in the arena: the digest no longer matches */
	sc_lease_release(&l);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(st, "ns", t[1], 20, &k), 0);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.dropped, 1);
	ck_assert_uint_eq(r.entries, 2);
	struct sc_event e[8];
	int n = read_events(ev, e, 4, 2.0);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(count_type(e, n, SC_EVENT_L2_STORED), 3);
	ck_assert_uint_eq(e[3].type, SC_EVENT_L2_REMOVED);
	ck_assert(e[3].key.lo == k.lo && e[3].key.hi == k.hi);
	ck_assert(e[3].digest.lo == d.lo && e[3].digest.hi == d.hi);
	ck_assert_uint_eq(e[3].stage_id, sc_stage_id(st));
	sc_events_close(ev);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_evictions)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evevict", 16ull << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	int32_t t[32];
	for (int i = 0; i < 200; i++) {
		toks(t, 32, i * 1000);
		ck_assert_int_eq(admit(st, "ns", t, 32, 256 << 10, (uint32_t)i), 0);
	}
	struct sc_l2_stats ls;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	ck_assert_uint_gt(ls.evictions, 0);
	static struct sc_event e[1024];
	int n = read_events(ev, e, (int)(ls.inserts + ls.evictions), 2.0);
	ck_assert_int_eq(n, (int)(ls.inserts + ls.evictions));
	ck_assert_int_eq(count_type(e, n, SC_EVENT_L2_STORED), (int)ls.inserts);
	ck_assert_int_eq(count_type(e, n, SC_EVENT_L2_REMOVED), (int)ls.evictions);
	sc_events_close(ev);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Child: open the arena and try to listen; exit 0 listening (then wait to be killed), 1 -EBUSY. */
static void listener_child(const char *name, int hold, int ready_fd)
{
	struct sc_arena *a;
	struct sc_events *ev;
	if (sc_arena_open(name, &a))
		_exit(90);
	int rc = sc_events_open(a, &ev);
	if (rc == -EBUSY)
		_exit(1);
	if (rc)
		_exit(91);
	if (!hold)
		_exit(0);
	(void)!write(ready_fd, "r", 1);
	for (;;)
		pause();
}

static int child_status(pid_t pid)
{
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(test_one_listener)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evone", 32ull << 20, &name);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	ck_assert_int_eq(shards_marked(a, a->shm->token), SHM_INDEX_SHARDS); /* every shard knows */
	struct sc_events *again = NULL;
	ck_assert_int_eq(sc_events_open(a, &again), -EBUSY); /* a handle does not listen twice */
	ck_assert_ptr_null(again);
	ck_assert_int_eq(shards_marked(a, a->shm->token), SHM_INDEX_SHARDS);
	pid_t pid = fork();
	if (!pid)
		listener_child(name, 0, -1);
	ck_assert_int_eq(child_status(pid), 1); /* refused: we listen */
	ck_assert_int_eq(shards_marked(a, a->shm->token), SHM_INDEX_SHARDS); /* and left ours alone */
	sc_events_close(ev);
	ck_assert_int_eq(shards_marked(a, 0), SHM_INDEX_SHARDS);
	/* a listener killed with kill -9 is taken over by the next */
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	if (!pid)
		listener_child(name, 1, p[1]);
	char c;
	ck_assert_int_eq(read(p[0], &c, 1), 1); /* waits for: the child listens */
	ck_assert_int_eq(sc_events_open(a, &ev), -EBUSY);
	kill(pid, SIGKILL);
	sc_test_wait_killed(pid);
	/* writers stop appending for the dead listener: the periodic reap (every 100 ms, by writers)
	 * clears its word */
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	struct sc_events_stats s;
	int32_t t[16];
	double end = sc_test_now_s() + 5;
	int i = 0;
	do {
		toks(t, 16, i * 100);
		ck_assert_int_eq(admit(st, "ns", t, 16, 4096, (uint32_t)i++), 0);
		ck_assert_int_eq(sc_events_stats(a, &s), 0);
		if (s.listener)
			sc_test_pause_ms(10);
	} while (s.listener && sc_test_now_s() < end);
	ck_assert_msg(!s.listener, "waited 5 s for the periodic reap to clear a dead listener's word");
	ck_assert_int_eq(shards_marked(a, 0), SHM_INDEX_SHARDS); /* and its marks, before the word */
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	sc_events_close(ev);
	/* and a live process takes a dead one's role at once, without waiting for the reap: its
	 * marks replace the dead one's, and the writers' changes reach it */
	pid = fork();
	if (!pid)
		listener_child(name, 1, p[1]);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	ck_assert_int_eq(shards_marked(a, 0), 0);
	kill(pid, SIGKILL);
	sc_test_wait_killed(pid);
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	ck_assert_int_eq(shards_marked(a, a->shm->token), SHM_INDEX_SHARDS);
	toks(t, 16, 99900);
	ck_assert_int_eq(admit(st, "ns", t, 16, 4096, 7), 0);
	struct sc_event got[64];
	int n = 0, stored = 0;
	for (double until = sc_test_now_s() + 5; !stored && n < 64 && sc_test_now_s() < until;) {
		int k = read_events(ev, got + n, 1, 0.1); /* waits for: the admission's event */
		stored += count_type(got + n, k, SC_EVENT_L2_STORED);
		n += k;
	}
	ck_assert_msg(stored == 1, "no l2_stored event after a takeover (%d events in 5 s)", n);
	sc_events_close(ev);
	ck_assert_int_eq(shards_marked(a, 0), SHM_INDEX_SHARDS);
	close(p[0]);
	close(p[1]);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_full_ring_drops)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evfull", 32ull << 20, &name);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	struct sc_events_stats s;
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	uint32_t cap = s.records;
	struct sc_event e = { .type = SC_EVENT_L3_REMOVED };
	for (uint32_t i = 0; i < cap + 10; i++) {
		e.key.lo = i;
		ck_assert_int_eq(sc_events_post(a, &e), i < cap ? 0 : -ENOSPC); /* never a wait */
	}
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	ck_assert_uint_eq(s.dropped, 10);
	ck_assert_uint_eq(s.pending, cap);
	struct sc_event *out = calloc(cap + 8, sizeof(*out));
	int n = read_events(ev, out, (int)cap + 1, 2.0);
	ck_assert_int_eq(n, (int)cap + 1);
	ck_assert_uint_eq(out[0].type, SC_EVENT_LOST); /* the reader learns it first */
	ck_assert_uint_eq(out[0].lost_why, SC_EVENT_LOST_DROPPED);
	ck_assert_uint_eq(out[0].token_count, 10);
	for (uint32_t i = 0; i < cap; i++)
		ck_assert_uint_eq(out[1 + i].key.lo, i);
	/* room again */
	ck_assert_int_eq(sc_events_post(a, &e), 0);
	free(out);
	sc_events_close(ev);
	sc_test_arena_destroy(a, name);
}
END_TEST

static void poster(const char *name, uint64_t id, uint32_t count, const char *fault)
{
	struct sc_arena *a;
	if (sc_arena_open(name, &a))
		_exit(90);
	if (fault)
		sc_fault_arm(fault);
	struct sc_event e = { .type = SC_EVENT_L2_REMOVED, .stage_id = id };
	uint32_t dropped = 0;
	for (uint32_t i = 0; i < count; i++) {
		e.key = (struct sc_key){ id, i };
		int rc = sc_events_post(a, &e);
		if (rc == -ENOSPC)
			dropped++;
		else if (rc)
			_exit(92);
	}
	sc_arena_close(a);
	_exit(dropped ? 1 : 0);
}

/* A writer killed between claiming a slot and committing it blocks nobody: other writers go on,
 * the listener skips the hole after 50 ms and says so. */
START_TEST(test_writer_killed_mid_append)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evkill", 32ull << 20, &name);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	pid_t pid = fork();
	if (!pid)
		poster(name, 1, 1, "events.append.claimed");
	sc_test_wait_killed(pid);
	pid = fork();
	if (!pid)
		poster(name, 2, 5, NULL);
	ck_assert_int_eq(child_status(pid), 0); /* five appended after the hole, none waited */
	/* the killed writer's death is reported too (WRITER_DIED); the hole waits 50 ms, then TORN
	 * comes before the five records */
	struct sc_event e[16];
	int n = 0, torn_at = -1, recs = 0;
	double end = sc_test_now_s() + 3;
	while (recs < 5 && sc_test_now_s() < end) {
		int k = sc_events_read(ev, e + n, (unsigned)(16 - n));
		ck_assert_int_ge(k, 0);
		for (int i = n; i < n + k; i++) {
			if (e[i].type == SC_EVENT_LOST && e[i].lost_why == SC_EVENT_LOST_TORN) {
				ck_assert_uint_eq(e[i].token_count, 1);
				torn_at = i;
			} else if (e[i].type == SC_EVENT_L2_REMOVED) {
				ck_assert_int_ge(torn_at, 0);
				ck_assert_uint_eq(e[i].key.lo, 2);
				ck_assert_uint_eq(e[i].key.hi, (uint64_t)recs++);
			} else {
				ck_assert_uint_eq(e[i].type, SC_EVENT_LOST);
				ck_assert_uint_eq(e[i].lost_why, SC_EVENT_LOST_WRITER_DIED);
			}
		}
		n += k;
		if (!k)
			sc_test_pause_ms(2);
	}
	ck_assert_msg(recs == 5, "waited 3 s for the hole to be skipped and the five records read");
	/* the slot is usable on its next lap: a whole ring's worth more goes through */
	struct sc_events_stats s;
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	ck_assert_uint_eq(s.lost, 1);
	struct sc_event p = { .type = SC_EVENT_L3_REMOVED };
	static struct sc_event out[1024];
	for (uint32_t lap = 0; lap < 2 * s.records; lap += 512) {
		for (int i = 0; i < 512; i++)
			ck_assert_int_eq(sc_events_post(a, &p), 0);
		ck_assert_int_eq(read_events(ev, out, 512, 2.0), 512);
	}
	sc_events_close(ev);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The listener hears of every process that died: its last change may have no event. */
START_TEST(test_writer_death_reported)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evdeath", 32ull << 20, &name);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	struct sc_event e[8];
	(void)read_events(ev, e, 8, 0.15); /* nothing yet: a clean detach is no death */
	pid_t pid = fork();
	if (!pid) {
		struct sc_arena *c;
		if (sc_arena_open(name, &c))
			_exit(90);
		sc_arena_close(c);
		_exit(0);
	}
	ck_assert_int_eq(child_status(pid), 0);
	ck_assert_int_eq(read_events(ev, e, 1, 0.3), 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	if (!pid) {
		struct sc_arena *c;
		if (sc_arena_open(name, &c))
			_exit(90);
		(void)!write(p[1], "r", 1);
		for (;;)
			pause();
	}
	char ch;
	ck_assert_int_eq(read(p[0], &ch, 1), 1);
	kill(pid, SIGKILL);
	sc_test_wait_killed(pid);
	int n = read_events(ev, e, 1, 2.0);
	ck_assert_msg(n == 1, "waited 2 s for the listener to reap the dead and report it");
	ck_assert_uint_eq(e[0].type, SC_EVENT_LOST);
	ck_assert_uint_eq(e[0].lost_why, SC_EVENT_LOST_WRITER_DIED);
	close(p[0]);
	close(p[1]);
	sc_events_close(ev);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Two writers at once while the listener reads: every event is delivered once, in each writer's
 * order, or counted as dropped. */
START_TEST(test_many_writers)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evmp", 32ull << 20, &name);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	enum { PER = 30000 };
	pid_t w[2];
	for (int i = 0; i < 2; i++)
		if (!(w[i] = fork()))
			poster(name, 10 + (uint64_t)i, PER, NULL);
	static struct sc_event e[2048];
	uint64_t next[2] = { 0, 0 }, got = 0, lost = 0, dropped = 0;
	int done = 0, status;
	double end = sc_test_now_s() + 60;
	while (sc_test_now_s() < end) {
		int n = sc_events_read(ev, e, 2048);
		ck_assert_int_ge(n, 0);
		for (int i = 0; i < n; i++) {
			if (e[i].type == SC_EVENT_LOST) {
				if (e[i].lost_why == SC_EVENT_LOST_DROPPED)
					dropped += e[i].token_count;
				else
					lost += e[i].token_count;
				continue;
			}
			int id = (int)e[i].key.lo - 10;
			ck_assert(id == 0 || id == 1);
			ck_assert_uint_ge(e[i].key.hi, next[id]); /* in order; a gap is a drop */
			next[id] = e[i].key.hi + 1;
			got++;
		}
		for (int i = 0; i < 2; i++)
			if (w[i] && waitpid(w[i], &status, WNOHANG) == w[i]) {
				ck_assert(WIFEXITED(status) && WEXITSTATUS(status) <= 1);
				w[i] = 0;
				done++;
			}
		if (done == 2 && !n && got + dropped + lost >= 2 * PER)
			break;
		if (!n)
			sc_test_pause_ms(1);
	}
	ck_assert_uint_eq(lost, 0);
	ck_assert_uint_eq(got + dropped, 2 * PER);
	struct sc_events_stats s;
	ck_assert_int_eq(sc_events_stats(a, &s), 0);
	ck_assert_uint_eq(s.dropped, dropped);
	ck_assert_uint_eq(s.consumed, got);
	sc_events_close(ev);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A corrupted event region: hostile positions, stamps, records and header fields give -EBADMSG or
 * a reported loss, never a crash; a reset heals it. */
START_TEST(test_corrupted_ring)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evbad", 32ull << 20, &name);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	uint64_t size;
	struct shm_evring_hdr *h = shm_region(a->shm, SHM_REGION_EVENTS, &size);
	struct shm_evrec *rec = (struct shm_evrec *)(void *)((uint8_t *)h + SHM_EVRING_HDR_BYTES);
	uint32_t nrec = h->nrec;
	struct sc_event p = { .type = SC_EVENT_L3_REMOVED }, e[64];
	/* a tail beyond the head */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sc_events_post(a, &p), 0);
	atomic_store(&h->tail, atomic_load(&h->head) + 5);
	ck_assert_int_eq(sc_events_read(ev, e, 64), -EBADMSG);
	ck_assert_int_eq(sc_events_reset(ev), 0);
	ck_assert_int_eq(sc_events_read(ev, e, 64), 1); /* the reset is a loss: said once */
	ck_assert_uint_eq(e[0].type, SC_EVENT_LOST);
	ck_assert_uint_eq(e[0].lost_why, SC_EVENT_LOST_RESET);
	ck_assert_int_eq(sc_events_read(ev, e, 64), 0);
	/* a head a whole ring ahead: writers drop, the reader refuses, a reset heals */
	atomic_store(&h->head, atomic_load(&h->tail) + 3ull * nrec);
	ck_assert_int_eq(sc_events_post(a, &p), -ENOSPC);
	ck_assert_int_eq(sc_events_read(ev, e, 64), 1); /* the drop is reported first */
	ck_assert_uint_eq(e[0].type, SC_EVENT_LOST);
	ck_assert_uint_eq(e[0].lost_why, SC_EVENT_LOST_DROPPED);
	ck_assert_int_eq(sc_events_read(ev, e, 64), -EBADMSG);
	ck_assert_int_eq(sc_events_reset(ev), 0);
	ck_assert_int_eq(sc_events_post(a, &p), 0);
	int n = read_events(ev, e, 2, 1.0);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(e[0].lost_why, SC_EVENT_LOST_RESET);
	ck_assert_uint_eq(e[1].type, SC_EVENT_L3_REMOVED);
	/* a stamp no protocol step writes */
	uint64_t tail = atomic_load(&h->tail);
	ck_assert_int_eq(sc_events_post(a, &p), 0);
	atomic_store(&rec[tail & (nrec - 1)].stamp, tail + 12345);
	ck_assert_int_eq(sc_events_read(ev, e, 64), -EBADMSG);
	/* fsck sees it, and its repair is a reset the listener hears of */
	struct sc_fsck_report fr;
	ck_assert_int_gt(sc_arena_fsck(a, 0, NULL, NULL, &fr), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &fr), 0);
	ck_assert_int_eq(sc_events_read(ev, e, 64), 1);
	ck_assert_uint_eq(e[0].lost_why, SC_EVENT_LOST_RESET);
	/* a scribbled record body, and a type no writer writes: reported lost, the rest read */
	tail = atomic_load(&h->tail);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sc_events_post(a, &p), 0);
	rec[tail & (nrec - 1)].w[2] ^= 0x5a;
	rec[(tail + 1) & (nrec - 1)].type = 0;
	n = read_events(ev, e, 2, 1.0);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(e[0].type, SC_EVENT_LOST);
	ck_assert_uint_eq(e[0].lost_why, SC_EVENT_LOST_TORN);
	ck_assert_uint_eq(e[0].token_count, 2);
	ck_assert_uint_eq(e[1].type, SC_EVENT_L3_REMOVED);
	/* random scribbles over the header's mutable lines and the records: never a crash */
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int round = 0; round < 300; round++) {
		for (int k = 0; k < 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t off = 64 + (seed >> 20) % (size - 64 - 8);
			if (off >= sizeof(struct shm_evring_hdr) && off < SHM_EVRING_HDR_BYTES)
				continue;
			memcpy((uint8_t *)h + (off & ~7ull), &seed, 8);
		}
		(void)sc_events_post(a, &p);
		int k = sc_events_read(ev, e, 64);
		ck_assert(k >= 0 || k == -EBADMSG);
		if (k == -EBADMSG)
			ck_assert_int_eq(sc_events_reset(ev), 0);
	}
	ck_assert_int_eq(sc_events_reset(ev), 0);
	ck_assert_int_eq(sc_events_post(a, &p), 0);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &fr), 0); /* consistent again */
	/* a header that does not match the arena's plan: a new listener or a stats reader refuses */
	sc_events_close(ev);
	h->nrec = nrec * 2;
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_eq(sc_events_open(b, &ev), -EBADMSG);
	struct sc_events_stats s;
	ck_assert_int_eq(sc_events_stats(b, &s), -EBADMSG);
	sc_arena_close(b);
	h->nrec = nrec;
	h->magic ^= 1;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_eq(sc_events_stats(b, &s), -EBADMSG);
	ck_assert_int_gt(sc_arena_fsck(b, 0, NULL, NULL, &fr), 0);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(b, "m", "s", &st), 0);
	int32_t t[16];
	toks(t, 16, 1);
	ck_assert_int_eq(admit(st, "ns", t, 16, 4096, 1), 0); /* writers do not mind: no ring, no event */
	/* fsck --repair rewrites the header from the plan: a new handle listens again */
	ck_assert_int_eq(sc_arena_fsck(b, SC_FSCK_REPAIR, NULL, NULL, &fr), 0);
	struct sc_arena *c;
	ck_assert_int_eq(sc_arena_open(name, &c), 0);
	ck_assert_int_eq(sc_events_open(c, &ev), 0);
	sc_events_close(ev);
	sc_arena_close(c);
	sc_stage_close(st);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- the ring itself (shm/evring.c), driven directly ---- */

static struct shm_evring ring_of(struct sc_arena *a)
{
	struct shm_evring r;
	ck_assert_int_eq(shm_evring_view(a->shm, &r), 0);
	return r;
}

static const uint64_t W5[5] = { 1, 2, 3, 4, 5 };

/* The ring's formatting, reset and check (and its repair) touch its records only: the word after
 * the last record (the padding before the heap) is neither written nor taken for a slot. */
START_TEST(test_ring_stays_in_its_records)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evedge", 32ull << 20, &name);
	uint64_t size;
	uint8_t *base = shm_region(a->shm, SHM_REGION_EVENTS, &size);
	struct shm_evring r = ring_of(a);
	uint64_t end = shm_evring_bytes(r.nrec);
	ck_assert_uint_ge(a->shm->hv.regions[SHM_REGION_HEAP].off, a->shm->hv.regions[SHM_REGION_EVENTS].off + end + 8);
	uint64_t *after = (uint64_t *)(void *)(base + end);
	ck_assert_uint_eq(*after, 0); /* the format wrote nothing there */
	const uint64_t mark = 0x5a5a5a5a5a5a5a5aull;
	*after = mark;
	ck_assert_int_eq(shm_evring_check(a->shm, 0), 0); /* not read as a slot */
	ck_assert_int_eq(shm_evring_append(&r, 1, 0, W5), 0);
	shm_evring_reset(&r);
	ck_assert_uint_eq(*after, mark);
	ck_assert_int_eq(shm_evring_check(a->shm, 0), 0);
	r.hdr->magic ^= 1; /* repaired: the header rewritten, every slot reset */
	ck_assert_int_eq(shm_evring_check(a->shm, 1), 1);
	ck_assert_uint_eq(*after, mark);
	ck_assert_int_eq(shm_evring_check(a->shm, 0), 0);
	ck_assert_int_eq(shm_evring_format(a->shm), 0);
	ck_assert_uint_eq(*after, mark);
	*after = 0;
	/* every line-0 field is checked against the plan before the ring is used */
	struct shm_evring v;
	uint32_t *fields32[2] = { &r.hdr->nrec, &r.hdr->rec_bytes };
	for (int i = 0; i < 2; i++) {
		*fields32[i] ^= 64;
		ck_assert_int_eq(shm_evring_view(a->shm, &v), -EBADMSG);
		*fields32[i] ^= 64;
	}
	uint64_t *fields64[2] = { &r.hdr->magic, &r.hdr->recs_off };
	for (int i = 0; i < 2; i++) {
		*fields64[i] ^= 64;
		ck_assert_int_eq(shm_evring_view(a->shm, &v), -EBADMSG);
		*fields64[i] ^= 64;
	}
	ck_assert_int_eq(shm_evring_view(a->shm, &v), 0);
	/* a region smaller than the plan's ring (this handle's private copy of the table says so):
	 * refused by every entry point, nothing written */
	ck_assert_int_eq(shm_evring_append(&r, 1, 9, W5), 0);
	uint64_t head = atomic_load(&r.hdr->head), magic = r.hdr->magic;
	a->shm->hv.regions[SHM_REGION_EVENTS].size = end - 4096;
	ck_assert_int_eq(shm_evring_format(a->shm), -EINVAL);
	ck_assert_int_eq(shm_evring_view(a->shm, &v), -EBADMSG);
	ck_assert_int_eq(shm_evring_check(a->shm, 0), 1);
	r.hdr->magic ^= 1;
	ck_assert_int_eq(shm_evring_check(a->shm, 1), -EBADMSG);
	ck_assert_uint_eq(r.hdr->magic, magic ^ 1); /* not rewritten */
	r.hdr->magic = magic;
	a->shm->hv.regions[SHM_REGION_EVENTS].size = size;
	ck_assert_int_eq(shm_evring_view(a->shm, &v), 0);
	ck_assert_uint_eq(atomic_load(&r.hdr->head), head);
	ck_assert_uint_eq(atomic_load(&r.rec[(head - 1) & r.mask].stamp), head); /* the record still committed */
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A take returns at most @max records; a claimed slot that is never committed is skipped exactly
 * SHM_EVRING_HOLE_NS after the consumer first saw it (a hole first seen at time 0 counts from 1). */
START_TEST(test_take_bounds)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evtake", 32ull << 20, &name);
	struct shm_evring r = ring_of(a);
	struct shm_evring_cursor c = { 0, 0 };
	for (uint32_t k = 0; k < 3; k++)
		ck_assert_int_eq(shm_evring_append(&r, 1, k, W5), 0);
	struct shm_evrec out[3];
	memset(out, 0x5a, sizeof(out));
	uint64_t lost = 0;
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 2, 1000, &lost), 2);
	ck_assert_uint_eq(out[0].aux, 0);
	ck_assert_uint_eq(out[1].aux, 1);
	ck_assert_uint_eq(out[2].type, 0x5a5a5a5a); /* past @max: untouched */
	ck_assert_uint_eq(atomic_load(&r.hdr->tail), 2);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, 1000, &lost), 1);
	ck_assert_uint_eq(out[0].aux, 2);
	const uint64_t t0s[2] = { 5000, 0 };
	for (int k = 0; k < 2; k++) {
		uint64_t pos = atomic_load(&r.hdr->head), t0 = t0s[k], first = t0 ? t0 : 1;
		atomic_store(&r.hdr->head, pos + 1); /* claimed by a producer that never commits */
		ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, t0, &lost), 0);
		ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, first + SHM_EVRING_HOLE_NS - 1, &lost), 0);
		ck_assert_uint_eq(lost, (uint64_t)k);
		ck_assert_uint_eq(atomic_load(&r.hdr->tail), pos);
		ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, first + SHM_EVRING_HOLE_NS, &lost), 0);
		ck_assert_uint_eq(lost, (uint64_t)k + 1);
		ck_assert_uint_eq(atomic_load(&r.hdr->tail), pos + 1);
	}
	/* a hole being timed, then the ring reset under the consumer (fsck's repair, another process:
	 * the cursor is not told): a hole at the new tail is timed from when it is first seen */
	uint64_t pos = atomic_load(&r.hdr->head);
	atomic_store(&r.hdr->head, pos + 1);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, 7000, &lost), 0);
	shm_evring_reset(&r);
	atomic_store(&r.hdr->head, pos + 2);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, 7000 + SHM_EVRING_HOLE_NS, &lost), 0);
	ck_assert_uint_eq(atomic_load(&r.hdr->tail), pos + 1);
	ck_assert_uint_eq(lost, 2);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 3, 7000 + 2 * SHM_EVRING_HOLE_NS, &lost), 0);
	ck_assert_uint_eq(atomic_load(&r.hdr->tail), pos + 2);
	ck_assert_uint_eq(lost, 3);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* What a take returns: a record of type 0 (no writer writes one) is lost, not returned; records
 * taken before a slot no step writes are returned (their slots are freed already), the error comes
 * on the next take; a new listener's first hole, at position 0, is timed like any other. */
START_TEST(test_take_returns_what_it_freed)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evret", 32ull << 20, &name);
	struct shm_evring r = ring_of(a);
	struct shm_evring_cursor c = { 0, 0 };
	struct shm_evrec out[8];
	uint64_t lost = 0, now = 10ull * 1000 * 1000 * 1000;
	atomic_store(&r.hdr->head, 1); /* position 0 claimed, never committed */
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now, &lost), 0);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now + SHM_EVRING_HOLE_NS - 1, &lost), 0);
	ck_assert_uint_eq(atomic_load(&r.hdr->tail), 0);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now + SHM_EVRING_HOLE_NS, &lost), 0);
	ck_assert_uint_eq(atomic_load(&r.hdr->tail), 1);
	ck_assert_uint_eq(lost, 1);
	/* type 0 */
	ck_assert_int_eq(shm_evring_append(&r, 0, 1, W5), 0);
	ck_assert_int_eq(shm_evring_append(&r, 1, 2, W5), 0);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now, &lost), 1);
	ck_assert_uint_eq(out[0].aux, 2);
	ck_assert_uint_eq(lost, 2);
	/* two records, then a stamp no step writes */
	for (uint32_t k = 0; k < 3; k++)
		ck_assert_int_eq(shm_evring_append(&r, 1, 10 + k, W5), 0);
	uint64_t head = atomic_load(&r.hdr->head);
	atomic_store(&r.rec[(head - 1) & r.mask].stamp, head + 77);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now, &lost), 2);
	ck_assert_uint_eq(out[1].aux, 11);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now, &lost), -EBADMSG);
	/* a torn record, then that stamp: the loss is counted and no error yet */
	shm_evring_reset(&r);
	for (uint32_t k = 0; k < 2; k++)
		ck_assert_int_eq(shm_evring_append(&r, 1, 20 + k, W5), 0);
	head = atomic_load(&r.hdr->head);
	r.rec[(head - 2) & r.mask].w[0] ^= 1;
	atomic_store(&r.rec[(head - 1) & r.mask].stamp, head + 77);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now, &lost), 0);
	ck_assert_uint_eq(lost, 3);
	ck_assert_int_eq(shm_evring_take(&r, &c, out, 8, now, &lost), -EBADMSG);
	sc_test_arena_destroy(a, name);
}
END_TEST

struct mover {
	struct shm_evring r;
	struct shm_evring_cursor c;
	int passes, takes, unpublished;
	uint64_t head_at_point; /* nonzero: the head is set to this at the point */
	uint64_t publish;       /* nonzero: the tail a take in progress stores at the next point */
};

/* A live listener (and producers) at work while fsck's check is between reading the tail and the
 * rest: @takes records taken, one per pass; with @unpublished, the first pass meets a take that
 * has freed every committed slot but not stored the tail yet, and producers that filled the ring
 * again behind it; the take ends (stores its tail) at the next pass. */
static void work_while_checked(const char *point, void *ctx)
{
	struct mover *m = ctx;
	if (strcmp(point, "events.check.tail_read"))
		return;
	m->passes++;
	if (m->head_at_point) {
		atomic_store(&m->r.hdr->head, m->head_at_point);
		return;
	}
	if (m->publish) {
		atomic_store(&m->r.hdr->tail, m->publish);
		m->publish = 0;
		return;
	}
	struct shm_evrec out[64];
	uint64_t lost = 0;
	if (m->unpublished) {
		uint64_t tail = atomic_load(&m->r.hdr->tail);
		int n = shm_evring_take(&m->r, &m->c, out, 64, 1, &lost);
		ck_assert_int_gt(n, 0);
		m->publish = atomic_load(&m->r.hdr->tail);
		atomic_store(&m->r.hdr->tail, tail); /* its store still to come */
		m->unpublished = 0;
		for (uint32_t k = 0; k < m->r.nrec; k++)
			ck_assert_int_eq(shm_evring_append(&m->r, 1, k, W5), 0);
	} else if (m->takes > 0 && shm_evring_take(&m->r, &m->c, out, 1, 1, &lost) == 1) {
		m->takes--;
	}
}

/* Is @a's ring consistent (0, or 1), after how many passes of the check (*@passes)? */
static int checked(struct sc_arena *a, struct mover *m, int *passes)
{
	m->passes = 0;
	int rc = shm_evring_check(a->shm, 0);
	*passes = m->passes;
	return rc;
}

/* fsck's check of a ring in use: a listener moving on during a pass does not make a consistent
 * ring look corrupt (the pass is taken again); a slot or a head really wrong is found whether the
 * listener moves or not, after 32 passes (1 ms apart when the tail did not move), and so are the
 * look-alikes of a take in progress that never ends: a slot one lap ahead at rest, the slots of a
 * listener killed in the middle of a take. */
START_TEST(test_check_of_a_ring_in_use)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evcheck", 32ull << 20, &name);
	struct mover m = { .r = ring_of(a), .unpublished = 1 };
	int passes;
	for (uint32_t k = 0; k < 20; k++)
		ck_assert_int_eq(shm_evring_append(&m.r, 1, k, W5), 0);
	sc_sched_set(work_while_checked, &m);
	ck_assert_int_eq(checked(a, &m, &passes), 0);
	ck_assert_int_eq(passes, 3); /* the take in progress, ending during the next, then at rest */
	ck_assert_uint_eq(atomic_load(&m.r.hdr->tail), 20); /* the take ended */
	ck_assert_uint_eq(atomic_load(&m.r.hdr->head), 20 + m.r.nrec); /* the ring full again */
	/* a take that ends during the pass */
	m.takes = 1;
	ck_assert_int_eq(checked(a, &m, &passes), 0);
	ck_assert_int_eq(passes, 2);
	ck_assert_int_eq(m.takes, 0);
	/* a stamp no step writes, ahead of the listener: at rest, and with the listener moving */
	uint64_t tail = atomic_load(&m.r.hdr->tail);
	struct shm_evrec *s = &m.r.rec[(tail + 40) & m.r.mask];
	uint64_t keep = atomic_load(&s->stamp);
	atomic_store(&s->stamp, keep + 12345);
	ck_assert_int_eq(checked(a, &m, &passes), 1);
	ck_assert_int_eq(passes, 32);
	m.takes = 100;
	ck_assert_int_eq(checked(a, &m, &passes), 1);
	ck_assert_int_eq(passes, 32);
	ck_assert_int_eq(m.takes, 100 - 32);
	m.takes = 0;
	atomic_store(&s->stamp, keep);
	ck_assert_int_eq(checked(a, &m, &passes), 0);
	ck_assert_int_eq(passes, 1);
	/* a slot one lap ahead at rest (the ring emptied first): nobody will ever take it */
	struct shm_evrec out[64];
	uint64_t lost = 0;
	while (shm_evring_take(&m.r, &m.c, out, 64, 1, &lost) > 0)
		;
	tail = atomic_load(&m.r.hdr->tail);
	ck_assert_uint_eq(atomic_load(&m.r.hdr->head), tail);
	s = &m.r.rec[tail & m.r.mask];
	atomic_store(&s->stamp, tail + m.r.nrec);
	ck_assert_int_eq(checked(a, &m, &passes), 1);
	ck_assert_int_eq(passes, 32);
	atomic_store(&s->stamp, tail);
	/* a listener killed in the middle of a take: slots freed, its tail never stored */
	for (uint32_t k = 0; k < 5; k++)
		ck_assert_int_eq(shm_evring_append(&m.r, 1, k, W5), 0);
	ck_assert_int_eq(shm_evring_take(&m.r, &m.c, out, 64, 1, &lost), 5);
	atomic_store(&m.r.hdr->tail, tail);
	ck_assert_int_eq(checked(a, &m, &passes), 1);
	atomic_store(&m.r.hdr->tail, tail + 5);
	ck_assert_int_eq(checked(a, &m, &passes), 0);
	/* a head further ahead than the slots freed let producers go */
	uint64_t head = atomic_load(&m.r.hdr->head);
	atomic_store(&m.r.hdr->head, atomic_load(&m.r.hdr->tail) + m.r.nrec + 1);
	ck_assert_int_eq(checked(a, &m, &passes), 1);
	atomic_store(&m.r.hdr->head, head);
	/* the head is read after the point (the tail before it): a head moved there is judged */
	m.head_at_point = atomic_load(&m.r.hdr->tail) + m.r.nrec + 1;
	ck_assert_int_eq(checked(a, &m, &passes), 1);
	m.head_at_point = 0;
	atomic_store(&m.r.hdr->head, head);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(shm_evring_check(a->shm, 0), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

struct flip {
	struct shm_evring_hdr *hdr;
	int calls;
};

/* the listener @tok is dead, and a racer puts another dead one in its place before our CAS */
static int dead_and_replaced(void *ctx, uint32_t tok)
{
	struct flip *f = ctx;
	f->calls++;
	atomic_store(&f->hdr->listener, tok + 1);
	return 0;
}

static void count_append_tries(const char *point, void *ctx)
{
	if (!strcmp(point, "events.append.try"))
		++*(int *)ctx;
}

/* Nobody waits: a listener that keeps losing the race for the word gives up after 8 tries, a
 * producer that keeps finding its slot taken after SHM_EVRING_SPINS (and counts a drop). */
START_TEST(test_listen_and_append_give_up)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evgive", 32ull << 20, &name);
	struct shm_evring r = ring_of(a);
	struct flip f = { r.hdr, 0 };
	/* the word empty: taken without asking about a token */
	ck_assert_int_eq(shm_evring_listen(&r, 100, dead_and_replaced, &f), 0);
	ck_assert_int_eq(f.calls, 0);
	ck_assert_uint_eq(atomic_load(&r.hdr->listener), 100);
	atomic_store(&r.hdr->listener, 7);
	ck_assert_int_eq(shm_evring_listen(&r, 100, dead_and_replaced, &f), -EBUSY);
	ck_assert_int_eq(f.calls, 8);
	ck_assert_uint_eq(atomic_load(&r.hdr->listener), 15);
	atomic_store(&r.hdr->listener, 0);
	uint64_t pos = atomic_load(&r.hdr->head), dropped = atomic_load(&r.hdr->dropped);
	struct shm_evrec *s = &r.rec[pos & r.mask];
	atomic_store(&s->stamp, pos + 3); /* as if another producer had taken it: look again */
	int tries = 0;
	sc_sched_set(count_append_tries, &tries);
	ck_assert_int_eq(shm_evring_append(&r, 1, 0, W5), -ENOSPC);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(tries, SHM_EVRING_SPINS);
	ck_assert_uint_eq(atomic_load(&r.hdr->dropped), dropped + 1);
	ck_assert_uint_eq(atomic_load(&r.hdr->head), pos);
	atomic_store(&s->stamp, pos);
	ck_assert_int_eq(shm_evring_append(&r, 1, 0, W5), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

static int cb_count(const struct sc_l3_prefix_info *i, const int32_t *tk, void *ctx)
{
	(void)i;
	(void)tk;
	++*(int *)ctx;
	return 0;
}

START_TEST(test_l3_changes)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evl3", 32ull << 20, &name);
	char dir[] = "/tmp/sc-evl3-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, a), 0);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(a, &ev), 0);
	int32_t t[48];
	toks(t, 48, 7);
	struct sc_location loc;
	uint8_t buf[8192];
	memset(buf, 3, sizeof(buf));
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_l3_put_args pa = { .ns = "n3", .tokens = t, .token_count = 48, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(l3, &pa, &loc), 0);
	ck_assert_int_eq(l3_put(l3, "n3", t, 20, 4096, 9), 0);
	struct sc_event e[8];
	int n = read_events(ev, e, 2, 2.0);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(e[0].type, SC_EVENT_L3_STORED);
	ck_assert_uint_eq(e[0].key.lo, loc.prefix.lo);
	ck_assert_uint_eq(e[0].key.hi, loc.prefix.hi);
	ck_assert(sc_digest_equal(e[0].digest, loc.digest));
	ck_assert_uint_eq(e[0].token_count, 48);
	/* the prefix entry, as the publisher reads it */
	struct sc_l3_prefix_info *pi = malloc(sizeof(*pi));
	int32_t back[64];
	ck_assert_int_eq(sc_l3_prefix_get(l3, loc.prefix, pi, back, 64), 48);
	ck_assert_int_eq(memcmp(back, t, sizeof(t)), 0);
	ck_assert_int_eq(pi->object_present, 1);
	ck_assert_str_eq(pi->ns, "n3");
	ck_assert(sc_digest_equal(pi->digest, loc.digest));
	ck_assert_int_eq(sc_l3_prefix_get(l3, (struct sc_digest){ 1, 2 }, pi, back, 64), -ENOENT);
	ck_assert_int_eq(sc_l3_prefix_get(l3, loc.prefix, NULL, NULL, 3), -EINVAL);
	int count = 0;
	ck_assert_int_eq(sc_l3_prefix_list(l3, cb_count, &count), 2);
	ck_assert_int_eq(count, 2);
	/* eviction: the objects are gone, their prefix entries dangle */
	ck_assert_int_eq(sc_l3_evict_to(l3, 0), 2);
	n = read_events(ev, e, 2, 2.0);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(count_type(e, n, SC_EVENT_L3_OBJECT_GONE), 2);
	ck_assert_int_eq(sc_events_read(ev, e, 8), 0); /* one event per object gone, none more */
	ck_assert(sc_digest_equal(e[0].digest, loc.digest) || sc_digest_equal(e[1].digest, loc.digest));
	ck_assert_int_eq(sc_l3_prefix_get(l3, loc.prefix, pi, back, 64), 48);
	ck_assert_int_eq(pi->object_present, 0);
	free(pi);
	sc_events_close(ev);
	sc_l3_close(l3);
	sc_test_rm_tree(dir);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- an L3 change shows everywhere before the listener hears of it ---- */

/* What a schedule hook saw of the arena at each event being written. A hook reads shared memory
 * only: it calls nothing in the library, whose locks its caller may hold. */
#define SEEN_MAX 32
static struct {
	struct shm_l3ix *ix;             /* the arena's location index */
	struct shm_index l2;             /* the arena's L2 index */
	struct sc_digest digest, prefix; /* the object and the prefix key watched */
	int n;
	struct {
		int ix_object, ix_prefix, l2_live;
	} at[SEEN_MAX];
} seen;

/* Does a positive entry of the location index name @v (a prefix key when @prefix, else a digest)? */
static int ix_names(const struct shm_l3ix *ix, struct sc_digest v, int prefix)
{
	for (uint32_t i = 0; i < ix->nsets * SHM_L3IX_WAYS; i++) {
		const struct shm_l3ix_entry *e = &ix->ent[i];
		uint64_t lo = prefix ? e->l3key_lo : e->digest_lo, hi = prefix ? e->l3key_hi : e->digest_hi;
		if ((e->flags & SHM_L3IX_POS) && lo == v.lo && hi == v.hi)
			return 1;
	}
	return 0;
}

/* Is an L2 entry of digest @d live (linked, servable)? */
static int l2_live(const struct shm_index *ix, struct sc_digest d)
{
	for (uint32_t i = 0; i < ix->nentries; i++) {
		const struct shm_index_entry *e = &ix->ent[i];
		if (atomic_load(&e->state) == SHM_ENT_LIVE && e->digest_lo == d.lo && e->digest_hi == d.hi)
			return 1;
	}
	return 0;
}

static void at_event_written(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "events.append.writing") || seen.n == SEEN_MAX)
		return;
	seen.at[seen.n].ix_object = ix_names(seen.ix, seen.digest, 0);
	seen.at[seen.n].ix_prefix = ix_names(seen.ix, seen.prefix, 1);
	seen.at[seen.n].l2_live = l2_live(&seen.l2, seen.digest);
	seen.n++;
}

struct l3fx {
	const char *name;
	struct sc_arena *a;
	char dir[32];
	struct sc_l3 *l3;
	struct sc_stage *st;
	struct sc_events *ev;
	int32_t t[48];
	uint8_t buf[8192];
	struct sc_payload pl;
	struct sc_location loc;
};

/* An arena with a listener and a bound store holding one object (48 tokens), its location index
 * entry and an L2 mirror of it; the events so far read. */
static void l3fx_open(struct l3fx *f, const char *tag)
{
	f->a = sc_test_arena(tag, 32ull << 20, &f->name);
	snprintf(f->dir, sizeof(f->dir), "/tmp/sc-%s-XXXXXX", tag);
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	ck_assert_int_eq(sc_l3_open(f->dir, NULL, &f->l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(f->l3, f->a), 0);
	ck_assert_int_eq(sc_stage_open(f->a, "m", "s", &f->st), 0);
	ck_assert_int_eq(sc_events_open(f->a, &f->ev), 0);
	toks(f->t, 48, 11);
	for (size_t i = 0; i < sizeof(f->buf); i++)
		f->buf[i] = (uint8_t)(i * 7 + 5);
	f->pl = (struct sc_payload){ .kind = SC_PAYLOAD_FULL_STATE, .sec = { f->buf }, .sec_len = { sizeof(f->buf) } };
	struct sc_l3_put_args pa = { .ns = "n3", .tokens = f->t, .token_count = 48, .payload = &f->pl };
	ck_assert_int_eq(sc_l3_put(f->l3, &pa, &f->loc), 0);
	ck_assert_int_eq(sc_l2_admit(f->st, "n3", f->t, 48, f->loc.digest, &f->pl, SC_ORIGIN_DIRECT), 0);
	struct sc_event e[8];
	while (sc_events_read(f->ev, e, 8) > 0)
		;
	seen.ix = arena_l3ix(f->a);
	ck_assert_ptr_nonnull(seen.ix);
	ck_assert_uint_gt(seen.ix->nsets, 0);
	ck_assert_int_eq(shm_index_view(f->a->shm, &seen.l2), 0);
	seen.digest = f->loc.digest;
	seen.prefix = f->loc.prefix;
	seen.n = 0;
	/* what the cases watch go: all there now */
	ck_assert(ix_names(seen.ix, seen.digest, 0));
	ck_assert(ix_names(seen.ix, seen.prefix, 1));
	ck_assert(l2_live(&seen.l2, seen.digest));
}

static void l3fx_close(struct l3fx *f)
{
	sc_events_close(f->ev);
	sc_stage_close(f->st);
	sc_l3_close(f->l3);
	sc_test_rm_tree(f->dir);
	sc_test_arena_destroy(f->a, f->name);
}

/* The file of the fixture's object in its store. */
static void l3fx_object_path(const struct l3fx *f, char *path, size_t n)
{
	char rel[48];
	l3_obj_relpath(f->loc.digest.lo, f->loc.digest.hi, rel);
	snprintf(path, n, "%s/objects/%s", f->dir, rel);
}

/* The events written while the hook watched, in the order it saw them written. */
static int heard(struct l3fx *f, struct sc_event *e)
{
	ck_assert_int_lt(seen.n, SEEN_MAX);
	int n = read_events(f->ev, e, seen.n, 2.0);
	ck_assert_int_eq(n, seen.n);
	ck_assert_int_eq(sc_events_read(f->ev, e + n, 1), 0);
	return n;
}

/* Of the events heard, exactly one is of @type (L3_OBJECT_GONE: about the fixture's object;
 * L3_REMOVED: its prefix), and when it was written the location index no longer named that. */
static void heard_once_after_the_index_forgot(struct l3fx *f, uint32_t type)
{
	int by_prefix = type == SC_EVENT_L3_REMOVED, found = 0;
	struct sc_digest want = by_prefix ? f->loc.prefix : f->loc.digest;
	struct sc_event e[SEEN_MAX];
	int n = heard(f, e);
	for (int i = 0; i < n; i++) {
		struct sc_digest v = by_prefix ? (struct sc_digest){ e[i].key.lo, e[i].key.hi } : e[i].digest;
		if (e[i].type != type || !sc_digest_equal(v, want))
			continue;
		found++;
		ck_assert_msg(!(by_prefix ? seen.at[i].ix_prefix : seen.at[i].ix_object),
			      "the listener heard of %s while the location index named it", sc_event_type_name(type));
	}
	ck_assert_int_eq(found, 1);
}

/* A quarantined object: a listener that hears it is gone, and looks it up at once, finds neither
 * a location index entry naming it nor a live L2 mirror of it; by the time its L2 mirror's removal
 * is heard the index has forgotten it too. */
START_TEST(a_quarantine_is_heard_after_it_shows_everywhere)
{
	struct l3fx f;
	l3fx_open(&f, "evquar");
	char path[128];
	l3fx_object_path(&f, path, sizeof(path));
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t x = 0x5a;
	ck_assert_int_eq(pwrite(fd, &x, 1, L3_HDR_BLOCK + 100), 1);
	close(fd);
	sc_sched_set(at_event_written, NULL);
	int bad = sc_l3_verify(f.l3, NULL, NULL);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(bad, 1);
	struct sc_event e[SEEN_MAX];
	int n = heard(&f, e), gone = 0, removed = 0;
	for (int i = 0; i < n; i++) {
		if (!sc_digest_equal(e[i].digest, f.loc.digest))
			continue;
		if (e[i].type == SC_EVENT_L3_OBJECT_GONE) {
			gone++;
			ck_assert_msg(!seen.at[i].ix_object,
				      "the listener heard of the quarantine while the location index named the object");
			ck_assert_msg(!seen.at[i].l2_live,
				      "the listener heard of the quarantine while an L2 mirror of the object was live");
		} else if (e[i].type == SC_EVENT_L2_REMOVED) {
			removed++;
			ck_assert_msg(!seen.at[i].ix_object,
				      "the listener heard the mirror's removal while the location index named the object");
		}
	}
	ck_assert_int_eq(gone, 1);
	ck_assert_int_eq(removed, 1);
	l3fx_close(&f);
}
END_TEST

/* Objects evicted from L3: at each one's event the location index has forgotten it. */
START_TEST(an_l3_eviction_is_heard_after_the_index_forgets)
{
	struct l3fx f;
	l3fx_open(&f, "evevict");
	sc_sched_set(at_event_written, NULL);
	int evicted = sc_l3_evict_to(f.l3, 0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(evicted, 1);
	heard_once_after_the_index_forgot(&f, SC_EVENT_L3_OBJECT_GONE);
	l3fx_close(&f);
}
END_TEST

/* A prefix entry dropped (the janitor found its object missing): at its event the location index
 * no longer names the prefix. */
START_TEST(a_dropped_prefix_is_heard_after_the_index_forgets)
{
	struct l3fx f;
	l3fx_open(&f, "evpfx");
	char path[128];
	l3fx_object_path(&f, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0); /* behind the store's back: no hook runs */
	ck_assert(ix_names(seen.ix, seen.prefix, 1));
	struct sc_l3_janitor_report r;
	sc_sched_set(at_event_written, NULL);
	int rc = sc_l3_janitor(f.l3, SC_L3_JANITOR_FULL, &r);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(r.dropped, 1);
	heard_once_after_the_index_forgot(&f, SC_EVENT_L3_REMOVED);
	l3fx_close(&f);
}
END_TEST

START_TEST(test_lookup)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("evlook", 32ull << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	char dir[] = "/tmp/sc-evlook-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, a), 0);
	int32_t t[1000];
	toks(t, 1000, 5);
	struct sc_lookup r;
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 1000, 0, &r), 0);
	ck_assert_uint_eq(r.tokens, 0);
	ck_assert_int_eq(admit(st, "ns", t, 512, 4096, 1), 0);
	ck_assert_int_eq(sc_lookup(st, NULL, "ns", t, 1000, 0, &r), 0);
	ck_assert_uint_eq(r.l2_tokens, 512);
	ck_assert_uint_eq(r.tokens, 512);
	ck_assert_uint_eq(r.l2_bytes, 4096);
	ck_assert_int_eq(l3_put(l3, "ns", t, 700, 4096, 2), 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 1000, 0, &r), 0);
	ck_assert_uint_eq(r.l3_tokens, 700);
	ck_assert_uint_eq(r.l2_tokens, 512);
	ck_assert_uint_eq(r.tokens, 700);
	/* an L2 entry at L3's length (a promoted fill) is found though 700 is no multiple of 256 */
	ck_assert_int_eq(admit(st, "ns", t, 700, 4096, 3), 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 1000, 0, &r), 0);
	ck_assert_uint_eq(r.l2_tokens, 700);
	{ /* that entry damaged: an error, not a shorter multiple */
		struct sc_key k7;
		ck_assert_int_eq(sc_l2_key(st, "ns", t, 700, &k7), 0);
		struct shm_index_entry *e = sc_test_l2_entry(a, k7);
		ck_assert_ptr_nonnull(e);
		uint32_t meta = e->meta;
		e->meta = 0xff;
		ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 1000, 0, &r), -EBADMSG);
		e->meta = meta;
	}
	/* and a multiple held beyond it is longer, found first */
	ck_assert_int_eq(admit(st, "ns", t, 768, 4096, 6), 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 1000, 0, &r), 0);
	ck_assert_uint_eq(r.l2_tokens, 768);
	ck_assert_uint_eq(r.tokens, 768);
	/* another namespace, a shorter prompt, a block of 100 */
	ck_assert_int_eq(sc_lookup(st, l3, "other", t, 1000, 0, &r), 0);
	ck_assert_uint_eq(r.tokens, 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 600, 0, &r), 0);
	ck_assert_uint_eq(r.l2_tokens, 512);
	ck_assert_uint_eq(r.l3_tokens, 0);
	ck_assert_int_eq(sc_lookup(st, NULL, "ns", t, 600, 100, &r), 0);
	ck_assert_uint_eq(r.l2_tokens, 0); /* 512 is no multiple of 100 */
	ck_assert_int_eq(admit(st, "ns", t, 256, 4096, 7), 0); /* the shortest multiple */
	ck_assert_int_eq(sc_lookup(st, NULL, "ns", t, 300, 0, &r), 0);
	ck_assert_uint_eq(r.l2_tokens, 256);
	/* a lookup counts nothing */
	struct sc_l2_stats s0, s1;
	ck_assert_int_eq(sc_l2_stats(a, st, &s0), 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 1000, 0, &r), 0);
	ck_assert_int_eq(sc_l2_stats(a, st, &s1), 0);
	ck_assert_uint_eq(s0.hits + s0.misses, s1.hits + s1.misses);
	/* a prompt shorter than a block, held whole in L3 and (promoted) in L2: both found; one token
	 * shorter, neither */
	ck_assert_int_eq(l3_put(l3, "ns", t, 100, 4096, 4), 0);
	ck_assert_int_eq(admit(st, "ns", t, 100, 4096, 5), 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 100, 0, &r), 0);
	ck_assert_uint_eq(r.l3_tokens, 100);
	ck_assert_uint_eq(r.l2_tokens, 100);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 99, 0, &r), 0);
	ck_assert_uint_eq(r.tokens, 0);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 0, 0, &r), -EINVAL);
	ck_assert_int_eq(sc_lookup(NULL, l3, "ns", t, 10, 0, &r), -EINVAL);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", NULL, 10, 0, &r), -EINVAL);
	ck_assert_int_eq(sc_lookup(st, l3, "ns", t, 10, 0, NULL), -EINVAL);
	sc_l3_close(l3);
	sc_test_rm_tree(dir);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_block_hashes)
{
	int32_t t[40];
	toks(t, 40, 100);
	uint64_t h[4];
	ck_assert_int_eq(sc_block_hashes(t, 40, 16, 0, h, 4), 2);
	/* by hand: XXH3-64 of (parent LE u64 | 16 LE int32), top bit cleared */
	uint8_t buf[8 + 64];
	uint64_t parent = 0;
	for (int b = 0; b < 2; b++) {
		memcpy(buf, &parent, 8);
		memcpy(buf + 8, t + 16 * b, 64);
		parent = XXH3_64bits(buf, sizeof(buf)) & 0x7fffffffffffffffull;
		ck_assert_uint_eq(h[b], parent);
	}
	uint64_t h2[1];
	ck_assert_int_eq(sc_block_hashes(t + 16, 16, 16, h[0], h2, 1), 1); /* chained from a parent */
	ck_assert_uint_eq(h2[0], h[1]);
	ck_assert_int_eq(sc_block_hashes(t, 40, 16, 0, h, 1), 2); /* only one written */
	ck_assert_int_eq(sc_block_hashes(t, 15, 16, 0, h, 4), 0);
	ck_assert_int_eq(sc_block_hashes(t, 40, 0, 0, h, 4), -EINVAL);
	ck_assert_int_eq(sc_block_hashes(NULL, 40, 16, 0, h, 4), -EINVAL);
	ck_assert_int_eq(sc_block_hashes(t, 40, 16, 0, NULL, 4), -EINVAL);
	/* no token ids stored: the publisher cannot know an L2 entry's blocks */
	struct sc_arena_opts o = { .size_bytes = 16ull << 20, .huge = SC_HUGE_OFF, .flags = SC_ARENA_NO_TOKEN_VERIFY };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("evnotok", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	ck_assert_int_eq(admit(st, "ns", t, 40, 4096, 1), 0);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(st, "ns", t, 40, &k), 0);
	ck_assert_int_eq(sc_l2_entry_tokens(a, k, NULL, NULL, 0), -ENODATA);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *events_suite(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("ring");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_nobody_listens);
	tcase_add_test(tc, test_l2_changes);
	tcase_add_test(tc, test_fsck_drop_is_announced);
	tcase_add_test(tc, test_evictions);
	tcase_add_test(tc, test_one_listener);
	tcase_add_test(tc, test_full_ring_drops);
	tcase_add_test(tc, test_writer_killed_mid_append);
	tcase_add_test(tc, test_writer_death_reported);
	tcase_add_test(tc, test_many_writers);
	tcase_add_test(tc, test_corrupted_ring);
	tcase_add_test(tc, test_ring_stays_in_its_records);
	tcase_add_test(tc, test_take_bounds);
	tcase_add_test(tc, test_take_returns_what_it_freed);
	tcase_add_test(tc, test_listen_and_append_give_up);
	tcase_add_test(tc, test_check_of_a_ring_in_use);
	tcase_add_test(tc, test_l3_changes);
	tcase_add_test(tc, a_quarantine_is_heard_after_it_shows_everywhere);
	tcase_add_test(tc, an_l3_eviction_is_heard_after_the_index_forgets);
	tcase_add_test(tc, a_dropped_prefix_is_heard_after_the_index_forgets);
	tcase_add_test(tc, test_lookup);
	tcase_add_test(tc, test_block_hashes);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(events_suite)
