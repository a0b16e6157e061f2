/*
 * shm/evq.c — the L2 eviction queues (two FIFO lists and a ghost set) in SHM_REGION_POLICY.
 *
 * Protocol
 * --------
 * Who writes what. Everything in the region is written only by the holder of the header's mutex
 * (shm/mutex.h), except at format time. Lock-free L2 readers never look at the lists: the one
 * piece of policy state they write (an entry's frequency counter) lives in the index entry
 * (shm/index.h, `freq`). So within the protocol every load and store of the lists may be plain;
 * the mutex orders them (acquire at lock, release at unlock, or the robust takeover after a
 * holder died). The one thing read without the mutex is the departure table, by a lookup that
 * missed (never by a hit): its slots are stored and loaded with relaxed atomics, and what a reader
 * can see — a fingerprint with another key's word, an old word — only misclassifies that miss in
 * the statistics. Nothing is decided on it.
 *
 * What the lists mean. A node belongs to the index entry with the same number. Its `q` field is
 * the membership record: SMALL or MAIN when the entry is on that list, NONE otherwise; `seq` says
 * when it was put there. The links (prev/next, head/tail), counts and byte totals are derived
 * state: every change writes the membership record first (push: bytes, seq, q, then links;
 * remove: q = NONE, then links), so a holder killed at any instruction leaves records that
 * describe the lists it meant. The next locker gets -EOWNERDEAD, persists state = REBUILD, and
 * rebuilds links, counts and bytes from the records, ordering each list by seq (shm_evq_rebuild).
 * A holder that finds a link that does not point back, a node on the wrong list or an index out
 * of range does the same. So the lists are never trusted beyond what the records say, and a
 * hostile region costs a rebuild, never an out-of-bounds access or an endless walk (every walk is
 * bounded by the node count).
 *
 * What the lists do not promise. Membership is a hint kept by the L2 tier under this mutex,
 * separate from the index's own state: an entry is queued before it is linked into the index and
 * dequeued after it was unlinked, and a writer killed between the two steps leaves a queued entry
 * that is not LIVE. The policy (lib/l2/evict.c) therefore checks every entry it meets under its
 * shard lock and drops the ones that are not LIVE; it never evicts on the strength of a node.
 *
 * Benefit fields. Each node also carries the compute its entry saves per hit (cost), the density
 * derived from it (dens = shm_evq_density(cost, bytes)) and a credit (passes the policy still
 * grants the entry unhit). They are written under the mutex before the membership record of a
 * push, and are per-entry data, not derived state: a rebuild keeps them, recomputing dens from
 * cost and bytes and clamping credit, so a hostile or half-written node cannot make the policy do
 * arithmetic on garbage. evict_dens in the header is a hint (a moving average): any value only
 * scales credits.
 *
 * Ghost. A set-associative table (SHM_EVQ_GHOST_WAYS slots per bucket) of key fingerprints, each
 * with the ghost clock (bytes put into the ghost so far) after its insertion. A fingerprint is in
 * the ghost while fewer than `window` bytes were put after it; a full bucket forgets its oldest
 * slot. Stale or lost ghost slots only change which list a re-admitted entry joins.
 *
 * Departures. The same geometry (as many slots as the ghost, 4-way sets): a fingerprint and a
 * word naming why the key left L2 (evicted under pressure or for the budget, removed, quarantined,
 * gone from L3) or was refused (and the refusal's reason), with a sequence number that ages the
 * slot. Noted by whoever evicts, removes or refuses, forgotten when the key is stored again; a
 * lookup that misses reads it (above) to say why it missed.
 *
 * Lock order: search_mu (searches for room by address, holding nothing else) before any shard;
 * the index's shard locks (at most one blocking) before this mutex; while holding it, further
 * shards only by trylock (lib/l2/evict.c); the heap's mutex after it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "fault.h"

static uint32_t ghost_slots_for(uint32_t nodes)
{
	return shm_pow2_at_least(nodes, 64);
}

uint64_t shm_evq_bytes(uint32_t nodes)
{
	return SHM_EVQ_HDR_BYTES + (uint64_t)nodes * sizeof(struct shm_evq_node) +
	       (uint64_t)ghost_slots_for(nodes) * (sizeof(struct shm_evq_ghost) + sizeof(struct shm_evq_depart));
}

static uint64_t depart_off_for(uint32_t nodes)
{
	return SHM_EVQ_HDR_BYTES + (uint64_t)nodes * sizeof(struct shm_evq_node) +
	       (uint64_t)ghost_slots_for(nodes) * sizeof(struct shm_evq_ghost);
}

int shm_evq_format(struct shm_arena *a)
{
	uint64_t size;
	uint8_t *r = shm_region(a, SHM_REGION_POLICY, &size);
	uint32_t n = a->hv.index_entries;
	if (!n || size < shm_evq_bytes(n))
		return -EINVAL;
	struct shm_evq_hdr *h = (struct shm_evq_hdr *)r;
	memset(h, 0, sizeof(*h));
	h->nodes = n;
	h->ghost_slots = ghost_slots_for(n);
	h->nodes_off = SHM_EVQ_HDR_BYTES;
	h->ghost_off = SHM_EVQ_HDR_BYTES + (uint64_t)n * sizeof(struct shm_evq_node);
	h->depart_off = depart_off_for(n);
	shm_mutex_init(&h->mu);
	shm_mutex_init(&h->search_mu);
	h->magic = SHM_EVQ_MAGIC; /* nodes and ghost are zero in a fresh file: empty */
	return 0;
}

int shm_evq_view(struct shm_arena *a, struct shm_evq *q)
{
	uint64_t size;
	uint8_t *r = shm_region(a, SHM_REGION_POLICY, &size);
	struct shm_evq_hdr *h = (struct shm_evq_hdr *)r;
	uint32_t n = a->hv.index_entries;
	if (size < SHM_EVQ_HDR_BYTES || !n || size < shm_evq_bytes(n) || h->magic != SHM_EVQ_MAGIC || h->nodes != n ||
	    h->ghost_slots != ghost_slots_for(n) || h->nodes_off != SHM_EVQ_HDR_BYTES ||
	    h->ghost_off != SHM_EVQ_HDR_BYTES + (uint64_t)n * sizeof(struct shm_evq_node) ||
	    h->depart_off != depart_off_for(n))
		return -EBADMSG;
	*q = (struct shm_evq){
		.a = a,
		.hdr = h,
		.node = (struct shm_evq_node *)(r + h->nodes_off),
		.ghost = (struct shm_evq_ghost *)(r + h->ghost_off),
		.depart = (struct shm_evq_depart *)(r + h->depart_off),
		.nodes = n,
		.ghost_mask = ghost_slots_for(n) - 1,
	};
	return 0;
}

/* ---- lock and rebuild ---- */

int shm_evq_lock(struct shm_evq *q)
{
	int rc = shm_mutex_lock(q->a, &q->hdr->mu);
	if (rc == -EOWNERDEAD)
		q->hdr->state = SHM_EVQ_REBUILD; /* persisted first: dying in the rebuild repeats it */
	else if (rc)
		return rc;
	if (q->hdr->state != SHM_EVQ_OK && shm_evq_rebuild_locked(q)) {
		shm_mutex_unlock(q->a, &q->hdr->mu);
		return -ENOMEM;
	}
	return 0;
}

void shm_evq_unlock(struct shm_evq *q)
{
	shm_mutex_unlock(q->a, &q->hdr->mu);
}

struct seq_idx {
	uint64_t seq;
	uint32_t idx;
};

static int cmp_seq(const void *x, const void *y)
{
	const struct seq_idx *a = x, *b = y;
	if (a->seq != b->seq)
		return (a->seq > b->seq) - (a->seq < b->seq);
	return (a->idx > b->idx) - (a->idx < b->idx);
}

static void link_head(struct shm_evq *q, uint32_t idx, uint32_t which)
{
	struct shm_evq_hdr *h = q->hdr;
	struct shm_evq_node *n = &q->node[idx];
	uint32_t old = h->head[which - 1];
	n->prev = old;
	n->next = 0;
	if (old)
		q->node[old - 1].next = idx + 1;
	else
		h->tail[which - 1] = idx + 1;
	h->head[which - 1] = idx + 1;
	h->count[which - 1]++;
	h->bytes[which - 1] += n->bytes;
}

int shm_evq_rebuild_locked(struct shm_evq *q)
{
	struct shm_evq_hdr *h = q->hdr;
	h->state = SHM_EVQ_REBUILD;
	uint32_t k = 0;
	for (uint32_t i = 0; i < q->nodes; i++) {
		struct shm_evq_node *n = &q->node[i];
		uint32_t w = n->q;
		if (w == SHM_EVQ_SMALL || w == SHM_EVQ_MAIN)
			k++;
		else if (w != SHM_EVQ_NONE)
			n->q = SHM_EVQ_NONE; /* garbage: on no list */
		/* the benefit fields are kept, made consistent: dens from cost and bytes, credit bounded */
		if (n->cost > SHM_EVQ_COST_MAX)
			n->cost = SHM_EVQ_COST_MAX;
		n->dens = shm_evq_density(n->cost, n->bytes);
		if (n->credit & ~(SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED))
			n->credit = SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED;
	}
	struct seq_idx *v = malloc((k ? k : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM; /* still REBUILD: the next locker tries again */
	k = 0;
	for (uint32_t i = 0; i < q->nodes; i++)
		if (q->node[i].q != SHM_EVQ_NONE)
			v[k++] = (struct seq_idx){ q->node[i].seq, i };
	qsort(v, k, sizeof(*v), cmp_seq);
	for (uint32_t w = 0; w < SHM_EVQ_LISTS; w++) {
		h->head[w] = h->tail[w] = h->count[w] = 0;
		h->bytes[w] = 0;
	}
	shm_fault_point("evq.rebuild.cleared");
	uint64_t top = h->seq;
	for (uint32_t j = 0; j < k; j++) { /* oldest first: each push makes it the newest so far */
		link_head(q, v[j].idx, q->node[v[j].idx].q);
		if (v[j].seq > top)
			top = v[j].seq;
	}
	free(v);
	h->seq = top;
	h->repairs++;
	h->state = SHM_EVQ_OK;
	return 0;
}

/* Found a link that does not agree with the records: rebuild (we hold the mutex). */
static void corrupt(struct shm_evq *q)
{
	(void)shm_evq_rebuild_locked(q);
}

/* ---- list operations ---- */

void shm_evq_remove_locked(struct shm_evq *q, uint32_t idx)
{
	if (idx >= q->nodes)
		return;
	struct shm_evq_hdr *h = q->hdr;
	struct shm_evq_node *n = &q->node[idx];
	uint32_t w = n->q;
	if (w == SHM_EVQ_NONE)
		return;
	n->q = SHM_EVQ_NONE; /* the record first: a crash from here on leaves it off the list */
	if (w > SHM_EVQ_LISTS) {
		corrupt(q);
		return;
	}
	uint32_t me = idx + 1, older = n->prev, newer = n->next;
	/* both neighbours must point back at us (else the links lie: rebuild from the records) */
	if (older > q->nodes || newer > q->nodes || (newer ? q->node[newer - 1].prev != me : h->head[w - 1] != me) ||
	    (older ? q->node[older - 1].next != me : h->tail[w - 1] != me)) {
		corrupt(q);
		return;
	}
	shm_fault_point("evq.remove.unlinking");
	if (newer)
		q->node[newer - 1].prev = older;
	else
		h->head[w - 1] = older;
	if (older)
		q->node[older - 1].next = newer;
	else
		h->tail[w - 1] = newer;
	n->prev = n->next = 0;
	h->count[w - 1] -= h->count[w - 1] ? 1 : 0;
	h->bytes[w - 1] -= n->bytes < h->bytes[w - 1] ? n->bytes : h->bytes[w - 1];
}

void shm_evq_push_locked(struct shm_evq *q, uint32_t idx, uint32_t which, uint64_t bytes)
{
	if (idx >= q->nodes || which < SHM_EVQ_SMALL || which > SHM_EVQ_MAIN)
		return;
	struct shm_evq_node *n = &q->node[idx];
	if (n->q != SHM_EVQ_NONE)
		shm_evq_remove_locked(q, idx);
	uint32_t old = q->hdr->head[which - 1];
	if (old > q->nodes || (old && (q->node[old - 1].q != which || q->node[old - 1].next)))
		corrupt(q); /* link_head reads the rebuilt head */
	n->bytes = bytes;
	n->dens = shm_evq_density(n->cost, bytes);
	n->seq = ++q->hdr->seq;
	n->q = which; /* the record first: a crash from here on puts it on the list at repair */
	shm_fault_point("evq.push.linking");
	if (q->hdr->state != SHM_EVQ_OK)
		return; /* the rebuild had no memory: the head still lies; the next lock's rebuild links it */
	link_head(q, idx, which);
}

void shm_evq_set_cost_locked(struct shm_evq *q, uint32_t idx, uint64_t cost, uint32_t credit)
{
	if (idx >= q->nodes)
		return;
	struct shm_evq_node *n = &q->node[idx];
	n->cost = cost > SHM_EVQ_COST_MAX ? SHM_EVQ_COST_MAX : cost;
	n->dens = shm_evq_density(n->cost, n->bytes);
	n->credit = (credit & SHM_EVQ_CREDIT_GRANTED) |
		    (SHM_EVQ_CREDIT(credit) > SHM_EVQ_CREDIT_MAX ? SHM_EVQ_CREDIT_MAX : SHM_EVQ_CREDIT(credit));
}

uint32_t shm_evq_tail_locked(struct shm_evq *q, uint32_t which)
{
	if (which < SHM_EVQ_SMALL || which > SHM_EVQ_MAIN)
		return 0;
	/* a tail that lies costs a rebuild, and one more when the first had no memory for its sort */
	for (int rebuilds = 0;; rebuilds++) {
		uint32_t t = q->hdr->tail[which - 1];
		if (!t)
			return 0;
		if (t <= q->nodes && q->node[t - 1].q == which && q->node[t - 1].prev == 0)
			return t;
		if (rebuilds == 2)
			return 0;
		corrupt(q);
	}
}

uint32_t shm_evq_newer_locked(struct shm_evq *q, uint32_t idx)
{
	if (idx >= q->nodes)
		return 0;
	const struct shm_evq_node *n = &q->node[idx];
	uint32_t nx = n->next;
	if (!nx)
		return 0;
	if (nx > q->nodes || q->node[nx - 1].q != n->q || q->node[nx - 1].prev != idx + 1) {
		corrupt(q);
		return 0;
	}
	return nx;
}

/* ---- ghost ---- */

static struct shm_evq_ghost *bucket(struct shm_evq *q, uint64_t fp)
{
	/* keys are uniform hashes: their low bits pick the bucket */
	return &q->ghost[(uint32_t)fp & q->ghost_mask & ~(SHM_EVQ_GHOST_WAYS - 1)];
}

void shm_evq_prefetch(const struct shm_evq *q, uint64_t fp)
{
	/* the ghost set and the departure set of @fp: their lines only, nothing is read */
	uint32_t i = (uint32_t)fp & q->ghost_mask & ~(SHM_EVQ_GHOST_WAYS - 1);
	__builtin_prefetch(&q->ghost[i], 1);
	__builtin_prefetch(&q->depart[i], 1);
}

void shm_evq_ghost_put_locked(struct shm_evq *q, uint64_t fp, uint64_t bytes)
{
	if (!fp)
		return;
	struct shm_evq_ghost *b = bucket(q, fp), *victim = NULL;
	q->hdr->ghost_clock += bytes ? bytes : 1;
	/* its own slot wherever it is (a take may have left a hole before it: a second copy would
	 * outlive the key's next take), else the first empty slot, else the oldest */
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS && !victim; i++)
		if (b[i].fp == fp)
			victim = &b[i];
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS && !victim; i++)
		if (!b[i].fp)
			victim = &b[i];
	if (!victim) {
		victim = &b[0];
		for (uint32_t i = 1; i < SHM_EVQ_GHOST_WAYS; i++)
			if (b[i].clock < victim->clock)
				victim = &b[i];
	}
	victim->fp = fp;
	victim->clock = q->hdr->ghost_clock;
}

/* Was a slot put at @at fewer than @window bytes ago? (A clock from the future: no.) */
static int in_window(const struct shm_evq *q, uint64_t at, uint64_t window)
{
	return at <= q->hdr->ghost_clock && q->hdr->ghost_clock - at < window;
}

int shm_evq_ghost_take_locked(struct shm_evq *q, uint64_t fp, uint64_t window)
{
	if (!fp)
		return 0;
	struct shm_evq_ghost *b = bucket(q, fp);
	int in = 0;
	/* every copy goes: a second one (a scribble, or a set an older library wrote) must not
	 * outlive the take */
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS; i++) {
		if (b[i].fp != fp)
			continue;
		in |= in_window(q, b[i].clock, window);
		b[i].fp = 0;
		b[i].clock = 0;
	}
	return in;
}

int shm_evq_ghost_has_locked(struct shm_evq *q, uint64_t fp, uint64_t window)
{
	if (!fp)
		return 0;
	const struct shm_evq_ghost *b = bucket(q, fp);
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS; i++)
		if (b[i].fp == fp && in_window(q, b[i].clock, window))
			return 1;
	return 0;
}

/* ---- departures ---- */

static struct shm_evq_depart *depart_set(const struct shm_evq *q, uint64_t fp)
{
	return &q->depart[(uint32_t)fp & q->ghost_mask & ~(SHM_EVQ_GHOST_WAYS - 1)];
}

void shm_evq_depart_note_locked(struct shm_evq *q, uint64_t fp, uint32_t reason, uint32_t detail)
{
	if (!fp || !reason || reason > 0xff)
		return;
	/* as in the ghost: its own slot wherever it is, else the first empty slot, else the oldest */
	struct shm_evq_depart *b = depart_set(q, fp), *victim = NULL, *empty = NULL, *old = &b[0];
	uint64_t oldest = UINT64_MAX;
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS && !victim; i++) {
		uint64_t f = __atomic_load_n(&b[i].fp, __ATOMIC_RELAXED), w = __atomic_load_n(&b[i].word, __ATOMIC_RELAXED);
		if (f == fp) {
			victim = &b[i];
		} else if (!f) {
			if (!empty)
				empty = &b[i];
		} else if ((w >> 16) < oldest) {
			oldest = w >> 16;
			old = &b[i];
		}
	}
	if (!victim)
		victim = empty ? empty : old;
	uint64_t word = (++q->hdr->depart_seq << 16) | (uint64_t)(detail & 0xff) << 8 | reason;
	shm_sched_point("evq.depart.noting"); /* under the queue's lock: no two writers in one slot */
	/* two relaxed stores: a lock-free reader may see either without the other, and a holder
	 * killed between them leaves the replaced key's fingerprint with this word (its misses
	 * misclassified until the slot is noted again); only the statistics of misses read it (see
	 * the top of this file) */
	__atomic_store_n(&victim->word, word, __ATOMIC_RELAXED);
	__atomic_store_n(&victim->fp, fp, __ATOMIC_RELAXED);
}

void shm_evq_depart_forget_locked(struct shm_evq *q, uint64_t fp)
{
	if (!fp)
		return;
	struct shm_evq_depart *b = depart_set(q, fp);
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS; i++) {
		if (__atomic_load_n(&b[i].fp, __ATOMIC_RELAXED) == fp) {
			__atomic_store_n(&b[i].fp, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&b[i].word, 0, __ATOMIC_RELAXED);
		}
	}
}

uint64_t shm_evq_depart_find(const struct shm_evq *q, uint64_t fp)
{
	if (!fp || !q->depart)
		return 0;
	const struct shm_evq_depart *b = depart_set(q, fp);
	for (uint32_t i = 0; i < SHM_EVQ_GHOST_WAYS; i++) {
		if (__atomic_load_n(&b[i].fp, __ATOMIC_RELAXED) != fp)
			continue;
		uint64_t w = __atomic_load_n(&b[i].word, __ATOMIC_RELAXED);
		return SHM_EVQ_DEPART_REASON(w) ? w : 0;
	}
	return 0;
}

/* ---- fsck ---- */

int shm_evq_check_locked(struct shm_evq *q, const char **why)
{
	struct shm_evq_hdr *h = q->hdr;
	uint32_t seen = 0;
	for (uint32_t w = SHM_EVQ_SMALL; w <= SHM_EVQ_MAIN; w++) {
		uint32_t cur = h->tail[w - 1], prev = 0, n = 0;
		uint64_t bytes = 0;
		while (cur) {
			if (cur > q->nodes || n >= q->nodes) {
				*why = "a list link out of range or a cycle";
				return -EBADMSG;
			}
			const struct shm_evq_node *nd = &q->node[cur - 1];
			if (nd->q != w || nd->prev != prev) {
				*why = "a node whose record or back link disagrees with its list";
				return -EBADMSG;
			}
			bytes += nd->bytes;
			prev = cur;
			cur = nd->next;
			n++;
		}
		if (prev != h->head[w - 1] || n != h->count[w - 1] || bytes != h->bytes[w - 1]) {
			*why = "a list's head, count or byte total disagrees with its nodes";
			return -EBADMSG;
		}
		seen += n;
	}
	uint32_t members = 0;
	for (uint32_t i = 0; i < q->nodes; i++) {
		const struct shm_evq_node *nd = &q->node[i];
		members += nd->q != SHM_EVQ_NONE;
		if (nd->q != SHM_EVQ_NONE && (nd->cost > SHM_EVQ_COST_MAX ||
					      (nd->credit & ~(SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED)) ||
					      nd->dens != shm_evq_density(nd->cost, nd->bytes))) {
			*why = "a node's benefit fields disagree (cost, density, credit)";
			return -EBADMSG;
		}
	}
	if (members != seen) {
		*why = "nodes recorded on a list that the list does not reach";
		return -EBADMSG;
	}
	return 0;
}
