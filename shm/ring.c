/*
 * shm/ring.c — the commit ring directory: one single-producer/single-consumer ring per producer.
 *
 * Protocol
 * --------
 * Ownership. Each ring has an owner word (owner token | state | claim generation, see
 * shm/ring.h). A producer claims a ring with a release CAS (R1) from FREE (or from a reclaimable
 * state: CLOSED, or a LIVE owner whose token is dead — in every state only when the ring is
 * empty, head == tail) to LIVE with a bumped generation and its own token; pid and claimed_ns are
 * written after, for people only. Liveness is the token's (shm_token_alive: the kernel-released
 * lock of the owner's reader slot), never a pid. Readers of the word load it with acquire (A1,
 * pairs with R1/R2). A producer gives its ring up with a release CAS LIVE -> CLOSED
 * (R2) after its last tail store. The consumer frees a drained ring with a CAS to FREE that keeps
 * the generation: CLOSED rings at once, LIVE rings whose owner is dead (checked at most every
 * SHM_RING_REAP_INTERVAL_NS). Every CAS compares the whole word, generation included, so a
 * decision taken on a stale word fails instead of freeing somebody else's ring.
 * A ring is only ever handed to a new producer when it is empty, so positions need no reset:
 * head and tail are 64-bit byte positions that only grow, across owners.
 *
 * Records. Only the owning producer writes tail, records, ring_full and the bytes in
 * [tail, head + size). It writes a record (header, tokens, and a PAD record first when the
 * record does not fit before the end of the data area), calls the "ring.publish" fault point,
 * then release-stores tail (R3) — shm_ring_write / shm_ring_publish, inline in shm/ring.h
 * because they run per commit. The header is stored as a plain 48-byte image: nobody may read
 * those bytes before R3. A bulk submit writes several records and publishes them with one R3.
 * After R3 the producer prefetches for writing the lines its next records go to, never beyond
 * head_cache + size (space the consumer has released). The consumer acquire-loads tail (A3, pairs with R3) and only
 * then reads the records below it, so it never sees a torn record. Its prefetches (hints for
 * the next records' headers) also stay below that tail. A producer killed before R3
 * leaves bytes beyond tail that nobody reads: what it committed (R3 done) is delivered.
 *
 * Space. Only the consumer-lock holder writes head and consumed. It reads a ring through a cursor
 * (open: A3; next: one validated record; close: R4) and publishes head with a release-store (R4)
 * only when the caller is done with the records — callbacks read tokens in place. The
 * producer acquire-loads head (A4, pairs with R4) before it reuses the space below it. The
 * producer caches head and reloads it only when the cached value says the ring is full, so in
 * steady state a submit touches only its own cache lines and the data.
 *
 * Consumer lock. One consumer at a time (a second gets -EBUSY): the directory's consumer_id is
 * CAS'd from 0, or from a holder whose token is dead, to the taker's owner token (acq_rel: pairs
 * with the previous holder's release). A consumer that dies keeps no
 * ring: its successor resumes at the published heads, so records delivered after the dead
 * consumer's last R4 are delivered again (at-least-once; seq tells duplicates apart).
 *
 * Stale reads that are harmless: a stale cached head makes a submit reload it (or report -EAGAIN
 * one call too early); a stale tail makes a poll deliver fewer records; records / consumed /
 * ring_full are statistics read relaxed. Everything read from the region is validated: the
 * directory against the header, tail - head within the ring, each record's length, flags and
 * token count within the record and the published bytes. A violation is -EBADMSG, never a read
 * outside the ring.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"

uint64_t shm_ring_region_bytes(uint32_t count, uint32_t bytes)
{
	return shm_ring_data_off(count) + (uint64_t)count * bytes;
}

int shm_ring_region_format(struct shm_arena *a)
{
	uint64_t size;
	struct shm_ring_dir *d = shm_region(a, SHM_REGION_RINGS, &size);
	const struct shm_header *h = a->hdr;
	if (size < shm_ring_region_bytes(h->ring_count, h->ring_bytes))
		return -EINVAL;
	/* the file is zero-filled: every ring is FREE with head == tail == 0 */
	d->ring_count = h->ring_count;
	d->ring_bytes = h->ring_bytes;
	d->ctl_off = SHM_RING_DIR_BYTES;
	d->data_off = shm_ring_data_off(h->ring_count);
	d->magic = SHM_RING_MAGIC; /* published with the arena's initialised word */
	return 0;
}

int shm_ring_dir_check(const struct shm_arena *a, struct shm_ring_dir **dir)
{
	uint64_t size;
	struct shm_ring_dir *d = shm_region(a, SHM_REGION_RINGS, &size);
	const struct shm_header *h = &a->hv; /* the validated private copy */
	uint32_t n = d->ring_count, rb = d->ring_bytes;
	if (size < SHM_RING_DIR_BYTES || d->magic != SHM_RING_MAGIC || n != h->ring_count ||
	    rb != h->ring_bytes || n == 0 || n > SHM_RING_COUNT_MAX || rb < SHM_RING_BYTES_MIN || rb > SHM_RING_BYTES_MAX || (rb & (rb - 1)) ||
	    d->ctl_off != SHM_RING_DIR_BYTES || d->data_off != shm_ring_data_off(n) ||
	    size < shm_ring_region_bytes(n, rb))
		return -EBADMSG;
	*dir = d;
	return 0;
}

static struct shm_ring_ctl *ring_ctl(struct shm_ring_dir *d, uint32_t i)
{
	return (struct shm_ring_ctl *)((uint8_t *)d + SHM_RING_DIR_BYTES + (uint64_t)i * SHM_RING_CTL_BYTES);
}

/* Ring geometry comes from the arena's validated private header copy (equal to the directory's
 * at the last shm_ring_dir_check), never from a re-read of the shared directory. */
static uint8_t *ring_data(struct shm_ring_dir *d, uint32_t count, uint32_t bytes, uint32_t i)
{
	return (uint8_t *)d + shm_ring_data_off(count) + (uint64_t)i * bytes;
}

/* Is the producer recorded in @w still attached? */
static int owner_alive(struct shm_arena *a, uint64_t w)
{
	return shm_token_alive(a, shm_ring_owner_token(w));
}

/* The ring directory, for taking a role in it (producer or consumer): -ECHILD through a forked
 * child's copy of the handle (unusable), else shm_ring_dir_check. */
static int ring_dir_own(struct shm_arena *a, struct shm_ring_dir **d)
{
	return a->forked ? -ECHILD : shm_ring_dir_check(a, d);
}

int shm_ring_claim(struct shm_arena *a, struct shm_ring_prod *p)
{
	struct shm_ring_dir *d;
	int rc = ring_dir_own(a, &d);
	if (rc)
		return rc;
	uint64_t size = a->hv.ring_bytes;
	uint32_t count = a->hv.ring_count;
	for (uint32_t i = 0; i < count; i++) {
		struct shm_ring_ctl *c = ring_ctl(d, i);
		/* A1: pairs with R2 (the producer's last tail) and the reap's release (the consumer's
		 * last head), and with R1 (what the previous claimer had acquired) */
		uint64_t w = atomic_load_explicit(&c->owner, memory_order_acquire);
		uint32_t st = shm_ring_owner_state(w);
		if (st > SHM_RING_CLOSED)
			continue; /* garbage owner word: leave the ring alone */
		if (st == SHM_RING_LIVE || st == SHM_RING_CLAIMING) {
			if (owner_alive(a, w))
				continue;
		}
		/* reuse only an empty ring: A3/A4 pair with the last R3/R4 */
		uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
		uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
		if (head != tail)
			continue; /* the consumer delivers the rest first, then frees it (a FREE ring is
				   * always empty: bytes in one are a scribble, never handed out) */
		if (head & (SHM_RING_ALIGN - 1))
			continue; /* a corrupted index: never hand this ring out */
		if (st != SHM_RING_FREE)
			shm_sched_point("ring.claim.owner_dead"); /* judged reclaimable: the CAS decides */
		uint32_t gen = (shm_ring_owner_gen(w) + 1) & 0xffffffu;
		uint64_t live = shm_ring_owner(gen, SHM_RING_LIVE, a->token);
		/* R1 (release) / acquire of the previous owner's R2 and the consumer's R4 */
		if (!atomic_compare_exchange_strong_explicit(&c->owner, &w, live, memory_order_acq_rel,
							     memory_order_relaxed))
			continue;
		atomic_store_explicit(&c->pid, (uint64_t)getpid(), memory_order_relaxed);
		atomic_store_explicit(&c->claimed_ns, shm_realtime_ns(), memory_order_relaxed);
		memset(p, 0, sizeof(*p));
		p->ctl = c;
		p->data = ring_data(d, count, (uint32_t)size, i);
		p->size = size;
		p->mask = size - 1;
		p->tail = atomic_load_explicit(&c->tail, memory_order_relaxed); /* only we write it now */
		p->head_cache = atomic_load_explicit(&c->head, memory_order_acquire); /* A4 */
		p->records = atomic_load_explicit(&c->records, memory_order_relaxed);
		p->ring_full = atomic_load_explicit(&c->ring_full, memory_order_relaxed);
		p->owner = live;
		p->index = i;
		p->gen = gen;
		p->max_tokens = shm_ring_max_tokens((uint32_t)size);
		return 0;
	}
	return -ENOSPC;
}

int shm_ring_release(struct shm_ring_prod *p)
{
	uint64_t w = p->owner;
	uint64_t closed = shm_ring_owner(p->gen, SHM_RING_CLOSED, shm_ring_owner_token(w));
	/* R2: after our last R3, so a consumer that sees CLOSED sees the final tail */
	if (!atomic_compare_exchange_strong_explicit(&p->ctl->owner, &w, closed, memory_order_release,
						     memory_order_relaxed))
		return -ESTALE;
	return 0;
}

int shm_ring_reserve_slow(struct shm_ring_prod *p, uint64_t end)
{
	uint64_t head = atomic_load_explicit(&p->ctl->head, memory_order_acquire); /* A4 */
	if (p->tail - head > p->size || (head & (SHM_RING_ALIGN - 1)))
		return -EBADMSG; /* head ahead of tail, further behind than the ring, or misaligned */
	p->head_cache = head;
	if (end - head > p->size) {
		atomic_store_explicit(&p->ctl->ring_full, ++p->ring_full, memory_order_relaxed);
		return -EAGAIN;
	}
	return 0;
}

int shm_ring_consumer_acquire(struct shm_arena *a, struct shm_ring_cons *c)
{
	struct shm_ring_dir *d;
	int rc = ring_dir_own(a, &d);
	if (rc)
		return rc;
	c->a = a;
	c->id = a->token;
	/* acquire: pairs with the previous holder's release below, so its last head stores are seen */
	uint64_t cur = atomic_load_explicit(&d->consumer_id, memory_order_acquire);
	if (cur == c->id) {
		c->held = 1;
		return 0;
	}
	if (cur) {
		if (cur > UINT32_MAX || shm_token_alive(a, (uint32_t)cur))
			return cur > UINT32_MAX ? -EBADMSG : -EBUSY;
		shm_sched_point("ring.consumer.holder_dead");
	}
	if (!atomic_compare_exchange_strong_explicit(&d->consumer_id, &cur, c->id, memory_order_acq_rel,
						     memory_order_acquire))
		return -EBUSY;
	atomic_store_explicit(&d->consumer_pid, (uint64_t)getpid(), memory_order_relaxed);
	c->held = 1;
	return 0;
}

void shm_ring_consumer_release(struct shm_arena *a, struct shm_ring_cons *c)
{
	struct shm_ring_dir *d;
	/* a forked child's copy gives nothing back: a role its parent held is still the parent's */
	if (!c->held || ring_dir_own(a, &d))
		return;
	uint64_t mine = c->id;
	/* release: our head stores happen-before the next holder's acquire */
	atomic_compare_exchange_strong_explicit(&d->consumer_id, &mine, 0, memory_order_release, memory_order_relaxed);
	c->held = 0;
}

/* Free a drained ring if its producer closed it or died. @head is the ring's (published) head.
 * Liveness costs a /proc read, so empty LIVE rings are checked only when c->reap_due says so; the
 * clock behind it is read at most once per poll, and only if some empty ring is LIVE. */
static void ring_reap(struct shm_ring_ctl *ctl, uint64_t head, struct shm_ring_cons *c)
{
	uint64_t w = atomic_load_explicit(&ctl->owner, memory_order_acquire); /* A1: pairs with R1/R2 */
	uint32_t st = shm_ring_owner_state(w);
	if (st == SHM_RING_LIVE) {
		if (c->reap_due < 0) {
			uint64_t now = shm_now_ns();
			c->reap_due = now >= c->next_reap_ns;
			if (c->reap_due)
				c->next_reap_ns = now + SHM_RING_REAP_INTERVAL_NS;
		}
		if (!c->reap_due || owner_alive(c->a, w))
			return;
		shm_sched_point("ring.reap.owner_dead");
	} else if (st != SHM_RING_CLOSED) {
		return;
	}
	/* A3 after A1: a CLOSED (or dead) producer's final tail is visible now */
	if (atomic_load_explicit(&ctl->tail, memory_order_acquire) != head)
		return; /* more to deliver first */
	uint64_t free_w = shm_ring_owner(shm_ring_owner_gen(w), SHM_RING_FREE, 0);
	atomic_compare_exchange_strong_explicit(&ctl->owner, &w, free_w, memory_order_release, memory_order_relaxed);
}

int shm_ring_poll_begin(struct shm_arena *a, struct shm_ring_cons *c, struct shm_ring_dir **dir)
{
	/* a forked child's copy is refused even when the parent held the role: its c->held and the
	 * directory's id are the parent's, and the child would deliver as the parent */
	int rc = ring_dir_own(a, dir);
	if (rc)
		return rc;
	if (!c->held || atomic_load_explicit(&(*dir)->consumer_id, memory_order_relaxed) != c->id) {
		c->held = 0;
		rc = shm_ring_consumer_acquire(a, c);
		if (rc)
			return rc;
	}
	c->reap_due = -1;
	c->ring_count = a->hv.ring_count;
	c->ring_bytes = a->hv.ring_bytes;
	if (c->rr >= c->ring_count)
		c->rr = 0;
	return 0;
}

int shm_ring_cursor_open(struct shm_ring_dir *d, uint32_t i, struct shm_ring_cons *c, struct shm_ring_cursor *cur)
{
	if (i >= c->ring_count)
		return -EINVAL;
	struct shm_ring_ctl *ctl = ring_ctl(d, i);
	uint64_t size = c->ring_bytes;
	uint64_t head = atomic_load_explicit(&ctl->head, memory_order_relaxed); /* only we write it */
	uint64_t tail = atomic_load_explicit(&ctl->tail, memory_order_acquire); /* A3: pairs with R3 */
	/* positions are multiples of 64, so every record header lies wholly inside the ring */
	if (tail - head > size || ((tail | head) & (SHM_RING_ALIGN - 1)))
		return -EBADMSG;
	if (head == tail) {
		ring_reap(ctl, head, c);
		return 0;
	}
	cur->ctl = ctl;
	cur->data = ring_data(d, c->ring_count, c->ring_bytes, i);
	cur->size = size;
	cur->mask = size - 1;
	cur->start = cur->head = cur->pf = head;
	cur->tail = tail;
	cur->ring = i;
	cur->n = 0;
	return 1;
}

void shm_ring_cursor_close(struct shm_ring_cursor *cur)
{
	if (cur->head == cur->start)
		return;
	uint64_t consumed = atomic_load_explicit(&cur->ctl->consumed, memory_order_relaxed);
	atomic_store_explicit(&cur->ctl->consumed, consumed + cur->n, memory_order_relaxed);
	/* R4: after the caller is done with the tokens it read in place */
	atomic_store_explicit(&cur->ctl->head, cur->head, memory_order_release);
}

int shm_ring_stat(const struct shm_arena *a, uint32_t i, struct shm_ring_stat *st)
{
	struct shm_ring_dir *d;
	int rc = shm_ring_dir_check(a, &d);
	if (rc)
		return rc;
	uint64_t rb = a->hv.ring_bytes;
	if (i >= a->hv.ring_count)
		return -EINVAL;
	struct shm_ring_ctl *c = ring_ctl(d, i);
	uint64_t w = atomic_load_explicit(&c->owner, memory_order_acquire); /* A1 */
	memset(st, 0, sizeof(*st));
	st->state = shm_ring_owner_state(w);
	st->token = shm_ring_owner_token(w);
	st->pid = (uint32_t)atomic_load_explicit(&c->pid, memory_order_relaxed);
	st->gen = shm_ring_owner_gen(w);
	st->claimed_ns = atomic_load_explicit(&c->claimed_ns, memory_order_relaxed);
	st->tail = atomic_load_explicit(&c->tail, memory_order_acquire);
	st->head = atomic_load_explicit(&c->head, memory_order_acquire);
	st->records = atomic_load_explicit(&c->records, memory_order_relaxed);
	st->consumed = atomic_load_explicit(&c->consumed, memory_order_relaxed);
	st->ring_full = atomic_load_explicit(&c->ring_full, memory_order_relaxed);
	/* head read after tail: a concurrent consumer may have moved head past the tail read above,
	 * but never past the tail it had acquired, and our acquire of its head makes that tail
	 * visible: read tail again. A head still past it is corruption (fsck resets the ring). */
	if (st->head > st->tail)
		st->tail = atomic_load_explicit(&c->tail, memory_order_acquire);
	st->corrupt = st->state > SHM_RING_CLOSED || st->tail - st->head > rb ||
		      ((st->tail | st->head) & (SHM_RING_ALIGN - 1));
	return 0;
}
