/*
 * shm/seg.c — the segment table: content-addressed, reference-counted segments of L2 payloads.
 *
 * Protocol
 * --------
 * Who writes what. The table (slots, header counters) and the mutable words of every segment
 * record (flags, pins, the slot/gen of its pieces) are written only by the holder of the table
 * mutex `mu`. A record's other fields and its pieces' ranges are written by the committer of its
 * entry while the record is still a private block (tag SHM_TAG_PRIV) and never change after it is
 * tagged for the entry. The bytes of a segment never move: a slot names the same bytes for as long
 * as it is LIVE.
 *
 * References. A record is HELD when each of its pieces that names a slot is counted in that
 * slot's refs (the entry's own stored segments too). A slot goes (TOMB, gen + 1) when its refs
 * reach 0, and then its holder record loses one pin. A record's data block is freed only when its
 * entry is gone and no LIVE slot points into it (pins 0); while pins > 0 the record and its data
 * block stay as a holder (SHM_TAG_SEGHOLD, flag ORPHAN). Entries are released only by the index's
 * reclamation (after shm_epoch_min_active passed their retirement and no lease names them,
 * shm/index.c), so a reader inside its epoch or holding a lease on an entry always finds every
 * piece of it: the entry's HELD record keeps each slot LIVE, each LIVE slot keeps its bytes.
 * Readers never read the table; they read an entry's record (immutable while the entry is
 * reachable or leased) and validate every offset in it.
 *
 * Check-then-act. An admit looks its segments up under the mutex, drops it to copy what is
 * missing (seconds for a large payload), and takes the references at commit under the mutex
 * again (shm_seg_hold_locked): a slot that went in between (gen changed) fails the hold, and the
 * admit stores the payload whole. Schedule point "seg.admit.planned" sits in that window.
 *
 * Crash repair. A holder that dies inside the mutex may leave counts half-updated: the next
 * locker (-EOWNERDEAD) rebuilds every refs and pins from the HELD records found in the heap
 * (shm_seg_recount_locked; fsck runs the same check). Records tagged for an entry that does not
 * own them (a writer died between tagging and linking, or while freeing) are released by the
 * index's shard repair (shm_seg_sweep_shard, the shard lock held, so no live committer of that
 * shard is between its tagging and its hold).
 *
 * Lock order: an index shard lock, then mu, then the heap's mutex (inside heap calls).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "fault.h"
#include "heap.h"
#include "seg.h"

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

uint32_t shm_seg_slots(uint64_t total_bytes, uint32_t seg_bytes)
{
	if (!seg_bytes)
		return 0;
	uint64_t want = total_bytes / seg_bytes * 2, n = 256;
	while (n < want && n < (1u << 24))
		n <<= 1;
	return (uint32_t)n;
}

uint64_t shm_seg_table_bytes(uint32_t nslots)
{
	return nslots ? SHM_SEG_HDR_BYTES + (uint64_t)nslots * sizeof(struct shm_seg_slot) : 0;
}

uint64_t shm_seg_table_off(const struct shm_arena *a)
{
	return a->hv.regions[SHM_REGION_POLICY].off + align_up(shm_evq_bytes(a->hv.index_entries), 4096);
}

int shm_seg_format(struct shm_arena *a)
{
	struct shm_seg_hdr *h = shm_ptr(a, shm_seg_table_off(a), shm_seg_table_bytes((uint32_t)a->hv.seg_slots));
	if (!h)
		return -EINVAL;
	h->magic = SHM_SEG_MAGIC;
	h->nslots = (uint32_t)a->hv.seg_slots;
	h->seg_bytes = a->hv.seg_bytes;
	shm_mutex_init(&h->mu);
	return 0;
}

int shm_seg_view(struct shm_arena *a, struct shm_index *ix, struct shm_segtab *t)
{
	if (!a->hv.seg_bytes)
		return -ENOTSUP;
	uint64_t off = shm_seg_table_off(a), bytes = shm_seg_table_bytes((uint32_t)a->hv.seg_slots);
	const struct shm_region *r = &a->hv.regions[SHM_REGION_POLICY];
	struct shm_seg_hdr *h = shm_ptr(a, off, bytes);
	if (!h || off + bytes > r->off + r->size || h->magic != SHM_SEG_MAGIC || h->nslots != a->hv.seg_slots ||
	    h->seg_bytes != a->hv.seg_bytes)
		return -EBADMSG;
	const struct shm_region *hp = &a->hv.regions[SHM_REGION_HEAP];
	*t = (struct shm_segtab){ .a = a, .hdr = h, .slot = (struct shm_seg_slot *)(void *)((uint8_t *)h + SHM_SEG_HDR_BYTES),
				  .nslots = h->nslots, .mask = h->nslots - 1, .seg_bytes = h->seg_bytes,
				  .heap_lo = hp->off, .heap_hi = hp->off + hp->size, .ix = ix };
	return 0;
}

static int in_heap(const struct shm_segtab *t, uint64_t off, uint64_t len)
{
	return off >= t->heap_lo && off <= t->heap_hi && len <= t->heap_hi - off;
}

struct shm_seg_rec *shm_seg_rec_at(const struct shm_segtab *t, uint64_t off)
{
	if (off % 64 || !in_heap(t, off, sizeof(struct shm_seg_rec)))
		return NULL;
	struct shm_seg_rec *r = (struct shm_seg_rec *)(void *)(t->a->base + off);
	uint32_t n = __atomic_load_n(&r->npieces, __ATOMIC_RELAXED);
	if (r->magic != SHM_SEG_REC_MAGIC || n > SHM_SEG_MAX_PIECES || !in_heap(t, off, shm_seg_rec_bytes(n)) ||
	    r->local > r->wire || !in_heap(t, r->data, r->local))
		return NULL;
	return r;
}

/* ---- the mutex ---- */

int shm_seg_lock(struct shm_segtab *t)
{
	int rc = shm_mutex_lock(t->a, &t->hdr->mu);
	if (rc == -EOWNERDEAD) {
		(void)shm_seg_recount_locked(t, 1);
		t->hdr->recounts++;
		rc = 0;
	}
	return rc;
}

void shm_seg_unlock(struct shm_segtab *t)
{
	shm_mutex_unlock(t->a, &t->hdr->mu);
}

/* ---- the table (mutex held) ---- */

int64_t shm_seg_find_locked(struct shm_segtab *t, uint64_t lo, uint64_t hi, uint64_t len)
{
	for (uint32_t i = 0; i < SHM_SEG_MAX_PROBE && i < t->nslots; i++) {
		struct shm_seg_slot *s = &t->slot[(lo + i) & t->mask];
		if (s->state == SHM_SEG_EMPTY)
			return -1;
		if (s->state == SHM_SEG_LIVE && s->digest_lo == lo && s->digest_hi == hi && s->len == len)
			return (int64_t)((lo + i) & t->mask);
	}
	return -1;
}

static int64_t insert_locked(struct shm_segtab *t, uint64_t lo)
{
	for (uint32_t i = 0; i < SHM_SEG_MAX_PROBE && i < t->nslots; i++) {
		uint32_t k = (uint32_t)((lo + i) & t->mask);
		if (t->slot[k].state != SHM_SEG_LIVE)
			return k;
	}
	return -1;
}

/* Free a record and its data block. Crash order: the record forgets its data block before the
 * block is freed (a death in between leaves a data block no record names: the shard sweep frees
 * a SEGDATA one, the recount a SEGHOLD one), and loses its magic before its own block is freed
 * (a death in between leaves a record block that does not validate: the shard sweep frees a SEGREC
 * one, the recount a SEGHOLD one). No state names a block that was freed. */
static void free_rec(struct shm_segtab *t, struct shm_seg_rec *r, uint64_t rec_off)
{
	struct shm_seg_hdr *h = t->hdr;
	uint64_t data = r->data, local = r->local;
	h->stored -= local < h->stored ? local : h->stored;
	if (r->flags & SHM_SEG_ORPHAN) {
		h->orphan_bytes -= local < h->orphan_bytes ? local : h->orphan_bytes;
		if (h->orphans)
			h->orphans--;
	}
	__atomic_store_n(&r->data, 0, __ATOMIC_RELEASE); /* program order as a crash leaves it */
	if (data)
		(void)shm_heap_free(t->a, data);
	shm_fault_point("seg.free.data");
	__atomic_store_n(&r->magic, 0, __ATOMIC_RELEASE); /* a stale offset to it no longer validates */
	(void)shm_heap_free(t->a, rec_off);
}

static void slot_drop(struct shm_segtab *t, struct shm_seg_slot *s, struct shm_seg_rec *self)
{
	uint64_t holder = s->rec;
	s->state = SHM_SEG_TOMB;
	s->refs = 0;
	s->gen++;
	if (t->hdr->live)
		t->hdr->live--;
	t->hdr->tombs++;
	struct shm_seg_rec *hr = shm_seg_rec_at(t, holder);
	if (!hr)
		return;
	if (hr->pins)
		hr->pins--;
	if (hr != self && !hr->pins && (hr->flags & SHM_SEG_ORPHAN))
		free_rec(t, hr, holder);
}

int shm_seg_hold_locked(struct shm_segtab *t, struct shm_seg_rec *r, uint64_t rec_off, const uint64_t (*dg)[2])
{
	SHM_MUTEX_HELD(t->a, &t->hdr->mu);
	for (uint32_t i = 0; i < r->npieces; i++) {
		const struct shm_seg_piece *p = &r->p[i];
		if (p->local || p->slot == SHM_SEG_NONE)
			continue;
		const struct shm_seg_slot *s = p->slot < t->nslots ? &t->slot[p->slot] : NULL;
		if (!s || s->state != SHM_SEG_LIVE || s->gen != p->gen || s->len != p->len || s->off != p->at)
			return -ESTALE;
	}
	for (uint32_t i = 0; i < r->npieces; i++) {
		struct shm_seg_piece *p = &r->p[i];
		if (!p->local) {
			if (p->slot != SHM_SEG_NONE) {
				t->slot[p->slot].refs++;
				t->hdr->dedup_bytes += p->len;
			}
			continue;
		}
		p->slot = SHM_SEG_NONE;
		if (!dg || p->len != t->seg_bytes || shm_seg_find_locked(t, dg[i][0], dg[i][1], p->len) >= 0)
			continue; /* a tail, or stored already by someone else meanwhile: ours stays unindexed */
		int64_t k = insert_locked(t, dg[i][0]);
		if (k < 0)
			continue; /* the probe run is full: this copy is simply not shared */
		struct shm_seg_slot *s = &t->slot[k];
		if (s->state == SHM_SEG_TOMB && t->hdr->tombs)
			t->hdr->tombs--;
		s->digest_lo = dg[i][0];
		s->digest_hi = dg[i][1];
		s->off = p->at;
		s->len = p->len;
		s->rec = rec_off;
		s->refs = 1;
		s->state = SHM_SEG_LIVE;
		t->hdr->live++;
		p->slot = (uint32_t)k;
		p->gen = s->gen;
		r->pins++;
		shm_fault_point("seg.hold.partial");
	}
	r->flags |= SHM_SEG_HELD;
	t->hdr->logical += r->wire;
	t->hdr->stored += r->local;
	return 0;
}

static void release_locked(struct shm_segtab *t, struct shm_seg_rec *r, uint64_t rec_off)
{
	if (r->flags & SHM_SEG_ORPHAN)
		return; /* released already: a holder now */
	if (r->flags & SHM_SEG_HELD) {
		for (uint32_t i = 0; i < r->npieces; i++) {
			const struct shm_seg_piece *p = &r->p[i];
			if (p->slot >= t->nslots)
				continue;
			struct shm_seg_slot *s = &t->slot[p->slot];
			if (s->state != SHM_SEG_LIVE || s->gen != p->gen)
				continue;
			if (s->refs)
				s->refs--;
			if (!s->refs)
				slot_drop(t, s, r);
		}
		shm_fault_point("seg.release.dropped");
		r->flags &= ~SHM_SEG_HELD;
		t->hdr->logical -= r->wire < t->hdr->logical ? r->wire : t->hdr->logical;
	} else {
		t->hdr->stored += r->local; /* never counted: free_rec subtracts it */
	}
	if (!r->pins) {
		free_rec(t, r, rec_off);
		return;
	}
	/* others still use segments stored in our data block: keep it, owned by the table */
	r->flags |= SHM_SEG_ORPHAN;
	t->hdr->orphans++;
	t->hdr->orphan_bytes += r->local;
	(void)shm_heap_set_tag(t->a, r->data, (uint64_t)SHM_TAG_SEGHOLD << 60);
	(void)shm_heap_set_tag(t->a, rec_off, (uint64_t)SHM_TAG_SEGHOLD << 60);
}

int shm_seg_release(struct shm_segtab *t, uint64_t rec_off)
{
	int rc = shm_seg_lock(t);
	if (rc)
		return rc;
	struct shm_seg_rec *r = shm_seg_rec_at(t, rec_off);
	if (r)
		release_locked(t, r, rec_off);
	shm_seg_unlock(t);
	return r ? 0 : -EBADMSG;
}

/* ---- recount and sweep ---- */

struct blocks {
	uint64_t *off;
	uint64_t *tag;
	size_t n, cap;
	int shard;               /* sweep: only blocks tagged for entries of this shard; -1: records */
	int oom;
};

static int collect_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	struct blocks *b = ctx;
	(void)bytes;
	uint32_t ty = SHM_TAG_TYPE(tag);
	if (!allocated)
		return 0;
	if (b->shard < 0 ? !(ty == SHM_TAG_SEGREC || ty == SHM_TAG_SEGHOLD)
			 : !((ty == SHM_TAG_SEGREC || ty == SHM_TAG_SEGDATA) &&
			     (((tag >> 32) & 0xffffff) % SHM_INDEX_SHARDS) == (uint64_t)b->shard))
		return 0;
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 256;
		uint64_t *o = realloc(b->off, nc * sizeof(*o)), *g = o ? realloc(b->tag, nc * sizeof(*g)) : NULL;
		if (o)
			b->off = o;
		if (!o || !g) {
			b->oom = 1;
			return 1;
		}
		b->tag = g;
		b->cap = nc;
	}
	b->off[b->n] = off;
	b->tag[b->n++] = tag;
	return 0;
}

static int find_off(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (v[m] == x)
			return (int)m;
		if (v[m] < x)
			lo = m + 1;
		else
			hi = m;
	}
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Blocks tagged SEGHOLD that are neither a record that validates nor the data block of one: what a
 * holder's free left when its process died inside it (free_rec). Counted; freed when @fix. */
static int64_t holders_unnamed(struct shm_segtab *t, const struct blocks *b, int fix)
{
	uint64_t *named = malloc((b->n + 1) * sizeof(*named));
	size_t nn = 0;
	if (!named)
		return 0; /* no memory: nothing judged */
	for (size_t j = 0; j < b->n; j++) {
		const struct shm_seg_rec *r = shm_seg_rec_at(t, b->off[j]);
		if (r && r->data)
			named[nn++] = r->data;
	}
	qsort(named, nn, sizeof(*named), cmp_u64);
	int64_t wrong = 0;
	for (size_t j = 0; j < b->n; j++) {
		if (SHM_TAG_TYPE(b->tag[j]) != SHM_TAG_SEGHOLD || shm_seg_rec_at(t, b->off[j]))
			continue;
		if (find_off(named, nn, b->off[j]) >= 0)
			continue;
		wrong++;
		if (fix)
			(void)shm_heap_free(t->a, b->off[j]);
	}
	free(named);
	return wrong;
}

int64_t shm_seg_recount_locked(struct shm_segtab *t, int fix)
{
	struct blocks b = { .shard = -1 };
	int rc = shm_heap_walk(t->a, collect_cb, &b);
	uint32_t *refs = calloc(t->nslots, sizeof(*refs)), *pins = calloc(b.n + 1, sizeof(*pins));
	int64_t wrong = 0;
	if (rc || b.oom || !refs || !pins) {
		wrong = rc && !b.oom ? rc : -ENOMEM; /* the walk stopped by collect_cb returns its 1 */
		goto out;
	}
	/* heap walk order is address order: b.off is sorted */
	uint64_t logical = 0, stored = 0, orphan_bytes = 0, orphans = 0;
	for (size_t j = 0; j < b.n; j++) {
		struct shm_seg_rec *r = shm_seg_rec_at(t, b.off[j]);
		if (!r)
			continue;
		stored += r->local;
		if (r->flags & SHM_SEG_ORPHAN) {
			orphans++;
			orphan_bytes += r->local;
		}
		if (!(r->flags & SHM_SEG_HELD))
			continue;
		logical += r->wire;
		for (uint32_t i = 0; i < r->npieces; i++) {
			const struct shm_seg_piece *p = &r->p[i];
			if (p->slot < t->nslots && t->slot[p->slot].state == SHM_SEG_LIVE && t->slot[p->slot].gen == p->gen)
				refs[p->slot]++;
		}
	}
	uint64_t live = 0, tombs = 0;
	for (uint32_t k = 0; k < t->nslots; k++) {
		struct shm_seg_slot *s = &t->slot[k];
		if (s->state == SHM_SEG_TOMB)
			tombs++;
		if (s->state != SHM_SEG_LIVE)
			continue;
		int j = find_off(b.off, b.n, s->rec);
		if (!refs[k] || j < 0 || !shm_seg_rec_at(t, s->rec)) {
			/* nobody refers to it, or its holder is gone: the slot itself is wrong */
			wrong++;
			if (fix) {
				s->state = SHM_SEG_TOMB;
				s->refs = 0;
				s->gen++;
				tombs++;
			} else {
				live++;
			}
			continue;
		}
		live++;
		pins[j]++;
		if (s->refs != refs[k]) {
			wrong++;
			if (fix)
				s->refs = refs[k];
		}
	}
	for (size_t j = 0; j < b.n; j++) {
		struct shm_seg_rec *r = shm_seg_rec_at(t, b.off[j]);
		if (!r)
			continue;
		if (r->pins != pins[j]) {
			wrong++;
			if (fix)
				r->pins = pins[j];
		}
	}
	wrong += holders_unnamed(t, &b, fix);
	if (fix) {
		struct shm_seg_hdr *h = t->hdr;
		h->live = live;
		h->tombs = tombs;
		h->logical = logical;
		h->stored = stored;
		h->orphan_bytes = orphan_bytes;
		h->orphans = orphans;
		/* holders nobody needs any more */
		for (size_t j = 0; j < b.n; j++) {
			struct shm_seg_rec *r = shm_seg_rec_at(t, b.off[j]);
			if (r && (r->flags & SHM_SEG_ORPHAN) && !r->pins)
				free_rec(t, r, b.off[j]);
		}
	}
out:
	free(refs);
	free(pins);
	free(b.off);
	free(b.tag);
	return wrong;
}

/* Does entry idx/gen of the index own the block at @off (a record when @is_rec, else data)? */
static int entry_owns(const struct shm_segtab *t, uint64_t tag, uint64_t off, int is_rec)
{
	const struct shm_index *ix = t->ix;
	uint32_t idx = (uint32_t)(tag >> 32) & 0xffffff, gen = (uint32_t)tag;
	if (idx >= ix->nentries)
		return 0;
	const struct shm_index_entry *e = &ix->ent[idx];
	uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
	if (e->gen != gen || !(e->meta & SHM_META_SEG) ||
	    (st != SHM_ENT_LIVE && st != SHM_ENT_RETIRED && st != SHM_ENT_BUSY && st != SHM_ENT_FREEING))
		return 0;
	return is_rec ? t->heap_lo + 64ull * e->seg_rec == off : e->payload_off == off;
}

int shm_seg_sweep_shard(struct shm_segtab *t, uint32_t shard)
{
	struct blocks b = { .shard = (int)shard };
	int rc = shm_heap_walk(t->a, collect_cb, &b), freed = 0;
	if (rc || b.oom) {
		free(b.off);
		free(b.tag);
		return rc && !b.oom ? rc : -ENOMEM; /* the walk stopped by collect_cb returns its 1 */
	}
	/* records first: releasing one frees (or keeps as a holder) its data block, and an owned one
	 * names its own: phase two must leave both alone */
	uint64_t *skip = calloc(b.n + 1, sizeof(*skip));
	size_t nskip = 0;
	if (!skip) {
		freed = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < b.n; j++) {
		if (SHM_TAG_TYPE(b.tag[j]) != SHM_TAG_SEGREC)
			continue;
		if (entry_owns(t, b.tag[j], b.off[j], 1)) {
			/* its data block stays whatever the entry's payload offset says (shared memory) */
			const struct shm_seg_rec *r = shm_seg_rec_at(t, b.off[j]);
			if (r)
				skip[nskip++] = r->data;
			continue;
		}
		if ((rc = shm_seg_lock(t))) {
			freed = rc; /* a record not released still names its data block: phase two must not run */
			goto out;
		}
		struct shm_seg_rec *r = shm_seg_rec_at(t, b.off[j]);
		if (r) {
			skip[nskip++] = r->data;
			release_locked(t, r, b.off[j]);
			freed++;
		} else if (shm_heap_free(t->a, b.off[j]) == 0) {
			freed++; /* a record that no longer validates (its free had begun): its data is not named */
		}
		shm_seg_unlock(t);
	}
	/* data blocks no record names (the writer died before tagging its record) */
	for (size_t j = 0; j < b.n; j++) {
		if (SHM_TAG_TYPE(b.tag[j]) != SHM_TAG_SEGDATA || entry_owns(t, b.tag[j], b.off[j], 0))
			continue;
		int named = 0;
		for (size_t k = 0; k < nskip && !named; k++)
			named = skip[k] == b.off[j];
		if (!named && shm_heap_free(t->a, b.off[j]) == 0)
			freed++;
	}
out:
	free(skip);
	free(b.off);
	free(b.tag);
	return freed;
}
