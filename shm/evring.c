/*
 * shm/evring.c — the event ring: many producers (any attached process, on every change it makes),
 * one consumer (the listener), bounded, lock-free, and never a wait for a producer.
 *
 * Protocol
 * --------
 * Positions. head and tail are 64-bit positions that only grow; position p lives in slot
 * p & mask. Each slot has a sequence word, stamp, that says which step of which lap it is in:
 *   stamp == p        free for position p (no producer has written it for this lap);
 *   stamp == p + 1    committed: the record for position p is complete;
 *   stamp == p + nrec freed by the consumer (or skipped): free for position p + nrec.
 * The format writes stamp = i into slot i (all free for the first lap), so a fresh arena is an
 * empty ring with head == tail == 0.
 *
 * Producers (any process). Read the listener word (after a seq_cst fence, done by the caller:
 * lib/events.c) and append only when somebody listens. To append: load head (relaxed), then the
 * stamp of its slot (A1, acquire: pairs with the consumer's release R2, so the consumer's reads of
 * the previous lap's record happened before we overwrite it). stamp == pos: claim pos with a CAS
 * on head (pos -> pos + 1; relaxed: the stamp orders the record, not head). stamp < pos: the
 * consumer has not freed this slot yet — the ring is full: the event is dropped and `dropped` is
 * incremented (release: pairs with the consumer's acquire, which then resynchronises after
 * seeing every change made before the drop). stamp > pos: another producer took pos: reload head.
 * A producer that loses SHM_EVRING_SPINS races drops the same way: nobody ever waits. The claimed
 * slot's record is then written and committed with a CAS of its stamp pos -> pos + 1 (R1,
 * release: pairs with the consumer's acquire A2, so a committed record is read whole). The commit
 * is a CAS, not a store, because the consumer may have skipped the slot meanwhile (below): the
 * late commit then fails and the record is lost (the consumer already counted it).
 *
 * Consumer (the listener only). Load head (acquire) and its own tail; at the tail slot acquire the
 * stamp (A2). stamp == tail + 1: copy the record, check it, release the slot for the next lap by
 * storing stamp = tail + nrec (R2), tail + 1. stamp == tail with head > tail: a producer claimed
 * the slot and has not committed. It is either slow (preempted) or dead: the consumer waits for
 * it across calls, and once SHM_EVRING_HOLE_NS have passed since it first saw the hole, skips it
 * with a CAS stamp tail -> tail + nrec (fails if the commit landed first: then it is read as
 * committed). A skipped slot is counted in `lost`. A slow producer that then writes its record
 * may overlap the next lap's producer in that slot: the record's check word (a hash of its body
 * keyed with its position) makes such a torn record fail, and it is counted as lost too. Lost and
 * dropped events are reported to the layer above, which resynchronises from the truth.
 *
 * Crash rule. A producer killed anywhere leaves at most one claimed, uncommitted slot: the
 * consumer skips it after SHM_EVRING_HOLE_NS, and producers go on appending after it meanwhile
 * (until the ring is full, when they drop). A killed consumer leaves tail where it was: the next
 * listener takes over (owner token, below) and continues from there. Nothing blocks on the dead.
 *
 * Listener role. The `listener` word holds the listener's owner token (shm/readers.h), or 0. It
 * is taken with a CAS from 0, or from a token that the liveness test says is dead (the CAS
 * compares the exact word, so a decision taken on a stale word fails). Producers read it once per
 * change: the only cost of the ring when nobody listens. A dead listener's word is cleared by
 * whoever tests it (the periodic reap in lib/l2/lease.c), so producers stop appending soon after.
 *
 * Stale reads that are harmless: a producer that reads a stale listener word appends one record
 * too many (read by the next listener) or skips one while a listener is coming (who reads the
 * truth after taking the role: lib/events.c). Counters (dropped, lost, consumed, resets) are
 * statistics except `dropped`, which the consumer compares with its last value.
 *
 * Hostile contents. The header is checked against the arena's own plan at view time; head - tail
 * beyond nrec, a tail slot whose stamp is none of the values above, a record whose check fails or
 * whose type is 0: -EBADMSG for the first two (shm_evring_reset repairs), a lost record for the
 * others. No index read from the region is used without the mask.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "evring.h"
#include "fault.h"
#include "util.h"

#define SHM_EVRING_CHECK_PASSES 32
#define SHM_EVRING_CHECK_PAUSE_NS (1000 * 1000) /* a take stores its tail within microseconds */

uint32_t shm_evring_records(uint32_t index_entries)
{
	uint32_t n = shm_pow2_at_least(index_entries, SHM_EVRING_MIN_RECORDS);
	return n > SHM_EVRING_MAX_RECORDS ? SHM_EVRING_MAX_RECORDS : n;
}

uint64_t shm_evring_bytes(uint32_t nrec)
{
	return SHM_EVRING_HDR_BYTES + (uint64_t)nrec * sizeof(struct shm_evrec);
}

int shm_evring_format(struct shm_arena *a)
{
	uint64_t size;
	struct shm_evring_hdr *h = shm_region(a, SHM_REGION_EVENTS, &size);
	uint32_t n = shm_evring_records(a->hv.index_entries);
	if (size < shm_evring_bytes(n))
		return -EINVAL;
	struct shm_evrec *rec = (struct shm_evrec *)(void *)((uint8_t *)h + SHM_EVRING_HDR_BYTES);
	for (uint32_t i = 0; i < n; i++)
		atomic_store_explicit(&rec[i].stamp, i, memory_order_relaxed);
	h->nrec = n;
	h->rec_bytes = sizeof(struct shm_evrec);
	h->recs_off = SHM_EVRING_HDR_BYTES;
	h->magic = SHM_EVRING_MAGIC; /* published with the arena's initialised word */
	return 0;
}

int shm_evring_view(struct shm_arena *a, struct shm_evring *r)
{
	uint64_t size;
	struct shm_evring_hdr *h = shm_region(a, SHM_REGION_EVENTS, &size);
	/* the record count follows from the private header copy: a process that rewrites the shared
	 * one cannot make us index beyond the region */
	uint32_t n = shm_evring_records(a->hv.index_entries);
	if (size < shm_evring_bytes(n) || h->magic != SHM_EVRING_MAGIC || h->nrec != n ||
	    h->rec_bytes != sizeof(struct shm_evrec) || h->recs_off != SHM_EVRING_HDR_BYTES)
		return -EBADMSG;
	r->hdr = h;
	r->rec = (struct shm_evrec *)(void *)((uint8_t *)h + SHM_EVRING_HDR_BYTES);
	r->nrec = n;
	r->mask = n - 1;
	return 0;
}

uint32_t shm_evrec_check(const struct shm_evrec *r, uint64_t pos)
{
	/* type, aux and the words, keyed with the position: a record left from another lap or
	 * written by two producers at once does not pass */
	return (uint32_t)XXH3_64bits_withSeed(&r->type, offsetof(struct shm_evrec, check) - offsetof(struct shm_evrec, type),
					      pos);
}

int shm_evring_append(const struct shm_evring *r, uint32_t type, uint32_t aux, const uint64_t w[5])
{
	struct shm_evring_hdr *h = r->hdr;
	uint64_t pos = atomic_load_explicit(&h->head, memory_order_relaxed);
	for (unsigned spin = 0; spin < SHM_EVRING_SPINS; spin++) {
		shm_sched_point("events.append.try");
		struct shm_evrec *s = &r->rec[pos & r->mask];
		/* A1: pairs with the consumer's R2 (the previous lap was read before we overwrite it) */
		uint64_t st = atomic_load_explicit(&s->stamp, memory_order_acquire);
		int64_t d = (int64_t)(st - pos);
		if (d < 0)
			break; /* not freed for this lap: full */
		if (d > 0) {
			pos = atomic_load_explicit(&h->head, memory_order_relaxed); /* taken: look again */
			continue;
		}
		/* release: a reader that acquires the new head (fsck's check) sees the free of the slot
		 * we acquired (A1), not an older stamp of it */
		if (!atomic_compare_exchange_weak_explicit(&h->head, &pos, pos + 1, memory_order_release,
							   memory_order_relaxed))
			continue; /* pos now holds the head another producer moved */
		shm_fault_point("events.append.claimed");
		shm_sched_point("events.append.writing");
		s->type = type;
		s->aux = aux;
		memcpy(s->w, w, sizeof(s->w));
		s->pad = 0;
		s->check = shm_evrec_check(s, pos);
		uint64_t exp = pos;
		/* R1: pairs with the consumer's A2 (the record before its commit); fails when the
		 * consumer gave up on this slot (it counted the record as lost) */
		if (!atomic_compare_exchange_strong_explicit(&s->stamp, &exp, pos + 1, memory_order_release,
							     memory_order_relaxed))
			return -ENOSPC;
		return 0;
	}
	atomic_fetch_add_explicit(&h->dropped, 1, memory_order_release);
	return -ENOSPC;
}

int shm_evring_listen(const struct shm_evring *r, uint32_t token, int (*alive)(void *ctx, uint32_t token), void *ctx)
{
	struct shm_evring_hdr *h = r->hdr;
	uint32_t cur = atomic_load_explicit(&h->listener, memory_order_acquire);
	for (int tries = 0; tries < 8; tries++) {
		/* our own token is a live holder too: a handle does not listen twice */
		if (cur && alive(ctx, cur))
			return -EBUSY;
		/* acq_rel: pairs with the previous listener's release (its tail and counters) */
		if (atomic_compare_exchange_strong_explicit(&h->listener, &cur, token, memory_order_acq_rel,
							    memory_order_acquire)) {
			/* store-load: producers that change something after this see us (lib/events.c
			 * reads the truth after it, and producers fence before reading the word) */
			atomic_thread_fence(memory_order_seq_cst);
			return 0;
		}
	}
	return -EBUSY;
}

void shm_evring_unlisten(const struct shm_evring *r, uint32_t token)
{
	uint32_t cur = token;
	atomic_compare_exchange_strong_explicit(&r->hdr->listener, &cur, 0, memory_order_release, memory_order_relaxed);
}

int shm_evring_take(const struct shm_evring *r, struct shm_evring_cursor *c, struct shm_evrec *out, unsigned max,
		    uint64_t now_ns, uint64_t *lost)
{
	struct shm_evring_hdr *h = r->hdr;
	uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed); /* ours alone */
	uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
	if (head - tail > r->nrec) /* a head behind the tail wraps to a difference beyond nrec */
		return -EBADMSG;
	unsigned n = 0;
	uint64_t skipped = 0;
	int bad = 0;
	while (n < max && tail != head) {
		struct shm_evrec *s = &r->rec[tail & r->mask];
		/* A2: pairs with the producer's R1 */
		uint64_t st = atomic_load_explicit(&s->stamp, memory_order_acquire);
		if (st == tail + 1) {
			struct shm_evrec copy;
			memcpy((uint8_t *)&copy + 8, (const uint8_t *)s + 8, sizeof(copy) - 8);
			atomic_store_explicit(&copy.stamp, 0, memory_order_relaxed);
			/* R2: the slot is free for the next lap once we have read it */
			atomic_store_explicit(&s->stamp, tail + r->nrec, memory_order_release);
			if (copy.type && copy.check == shm_evrec_check(&copy, tail))
				out[n++] = copy;
			else
				skipped++;
			tail++;
			c->hole_since_ns = 0;
			continue;
		}
		if (st != tail) {
			bad = 1; /* no protocol step writes this: corrupted */
			break;
		}
		/* claimed, not committed: time the hole, skip it once it is old */
		if (!c->hole_since_ns || c->hole_pos != tail) {
			c->hole_pos = tail;
			c->hole_since_ns = now_ns ? now_ns : 1;
			break;
		}
		if (now_ns - c->hole_since_ns < SHM_EVRING_HOLE_NS)
			break;
		uint64_t exp = tail;
		if (atomic_compare_exchange_strong_explicit(&s->stamp, &exp, tail + r->nrec, memory_order_acq_rel,
							    memory_order_acquire)) {
			skipped++;
			tail++;
			c->hole_since_ns = 0;
		} /* else it was committed just now: read it on the next turn */
	}
	/* release: for whoever reads the counters; the producers' order comes from the stamps */
	atomic_store_explicit(&h->tail, tail, memory_order_release);
	if (n)
		atomic_fetch_add_explicit(&h->consumed, n, memory_order_relaxed);
	if (skipped) {
		atomic_fetch_add_explicit(&h->lost, skipped, memory_order_relaxed);
		*lost += skipped;
	}
	if (bad && !n && !skipped)
		return -EBADMSG;
	return (int)n;
}

void shm_evring_reset(const struct shm_evring *r)
{
	struct shm_evring_hdr *h = r->hdr;
	uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
	for (uint32_t i = 0; i < r->nrec; i++) {
		uint64_t pos = head + ((i - head) & r->mask); /* the first position >= head in slot i */
		atomic_store_explicit(&r->rec[i].stamp, pos, memory_order_release);
	}
	atomic_store_explicit(&h->tail, head, memory_order_release);
	/* release: pairs with the listener's acquire of the count (lib/events.c), which then takes
	 * from the new tail and the restamped slots, not from the ring before the reset */
	atomic_fetch_add_explicit(&h->resets, 1, memory_order_release);
}

int shm_evring_check(struct shm_arena *a, int repair)
{
	struct shm_evring r;
	int bad = 0;
	if (shm_evring_view(a, &r)) {
		if (!repair)
			return 1;
		/* the immutable line from the arena's own plan, then every slot at the head */
		uint64_t size;
		struct shm_evring_hdr *h = shm_region(a, SHM_REGION_EVENTS, &size);
		uint32_t n = shm_evring_records(a->hv.index_entries);
		if (size < shm_evring_bytes(n))
			return -EBADMSG;
		h->nrec = n;
		h->rec_bytes = sizeof(struct shm_evrec);
		h->recs_off = SHM_EVRING_HDR_BYTES;
		h->magic = SHM_EVRING_MAGIC;
		if (shm_evring_view(a, &r))
			return -EBADMSG;
		shm_evring_reset(&r);
		return 1;
	}
	/* A live listener moves on while we read. Its take frees slots (stamp p + nrec; producers may
	 * then claim and commit them: p + nrec + 1) before it stores the tail once at its end, so a
	 * slot we judge by the tail we read may already be in its next lap, and the head read after
	 * that tail may be ahead of it by up to nrec plus the slots freed since. Such a pass proves
	 * nothing either way (a scribbled stamp can look like a freed one; a listener killed in the
	 * middle of a take leaves freed slots for good): it is taken again, at once when the tail
	 * moved, else after SHM_EVRING_CHECK_PAUSE_NS. A ring is consistent when a pass finds every
	 * slot at its position (claimed, committed or free) and the head within a ring of the tail;
	 * after SHM_EVRING_CHECK_PASSES passes that never did, it is not. The tail first: the head
	 * read after it is never behind it. */
	for (int pass = 1;; pass++) {
		uint64_t tail = atomic_load_explicit(&r.hdr->tail, memory_order_acquire);
		shm_sched_point("events.check.tail_read");
		uint64_t head = atomic_load_explicit(&r.hdr->head, memory_order_acquire);
		uint64_t freed = 0;
		bad = 0;
		/* slot i holds position p in [tail, tail + nrec): claimed (stamp p) or committed (p + 1),
		 * or freed since we read the tail (p + nrec, p + nrec + 1) */
		for (uint32_t i = 0; i < r.nrec && !bad; i++) {
			uint64_t pos = tail + ((i - tail) & r.mask);
			uint64_t d = atomic_load_explicit(&r.rec[i].stamp, memory_order_acquire) - pos;
			if (d == r.nrec || d == r.nrec + 1ull)
				freed++;
			else if (d > 1)
				bad = 1;
		}
		/* a head behind the tail wraps to a difference beyond that */
		if (head - tail > r.nrec + freed)
			bad = 1;
		if ((!bad && !freed) || pass == SHM_EVRING_CHECK_PASSES) {
			bad |= freed != 0;
			break;
		}
		if (atomic_load_explicit(&r.hdr->tail, memory_order_acquire) == tail) {
			struct timespec ts = { 0, SHM_EVRING_CHECK_PAUSE_NS };
			nanosleep(&ts, NULL);
		}
	}
	if (bad && repair)
		shm_evring_reset(&r);
	return bad;
}
