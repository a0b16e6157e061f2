/*
 * shm/l3ix.c — the L3 location index region: a set-associative table read without locks.
 *
 * Protocol
 * --------
 * Writers. Every change to the region (an entry, the page free list, the lengths table, the bound
 * directory) is made by the holder of hdr->mu (shm/mutex.h), so writers never race each other.
 * What they race with is readers, which take no lock and write nothing but an entry's `used`
 * hint.
 *
 * Entries: a sequence lock per entry. A writer changing entry E stores seq+1 (odd) relaxed, then a
 * release fence, then writes the fields, the token pages and the page links, then release-stores
 * seq+2 (even). A reader acquire-loads seq (s1; odd: the entry is being written, retry), reads the
 * fields with relaxed loads and compares the token pages, then an acquire fence and a relaxed load
 * of seq (s2). The acquire load of s1 pairs with the final release store of the write before it
 * (the reader sees everything that write did); the writer's fence after storing odd pairs with the
 * reader's fence before s2 (if the reader saw any byte of a later write, it sees s2 != s1). Only a
 * copy taken with s1 == s2, s1 even, is used; anything else is retried a few times and then
 * treated as a miss (SHM_L3IX_READ_TRIES: bounded work per lookup).
 *
 * Token pages are reused: freeing an entry's pages happens after its seq went odd, so a reader
 * still comparing them fails its s2 check and discards what it compared. A reader may therefore
 * read a page while a writer fills it for another entry: harmless, the result is discarded. Page
 * indices and links are validated before every use (idx < npages, chain no longer than the token
 * count needs), so a scribbled region yields a miss or -EBADMSG, never an access outside it.
 *
 * Lengths: the same sequence lock on len_seq over nlengths and the array.
 *
 * Completeness: complete_ns is release-stored by the directory scanner (holding sync_mu, after
 * every entry it wrote was published under mu) and acquire-loaded by readers, who then treat a key
 * absent from the index as absent from the directory until complete_ns + the refresh interval. A
 * writer that evicts a positive entry stores 0 (and sync_full = 1) before the entry's seq goes odd:
 * a reader that could miss the evicted entry either loads 0 or read complete_ns before the
 * eviction began, in which case its answer is one the directory gave at most an interval ago.
 *
 * Stale reads that are harmless: `used` is a relaxed CLOCK hint (lost updates only change which
 * entry of a set is evicted); counters are relaxed statistics; dir_gen is read (acquire, paired
 * with the release increment) to decide whether an entry is current, and a stale value only makes
 * a reader trust an entry for one more lookup, within the same bounds as its checked_ns.
 *
 * Crash repair. A writer killed while holding mu leaves at most one entry odd and the page free
 * list possibly inconsistent. The next locker gets -EOWNERDEAD and rebuilds: odd entries are
 * cleared, every entry's chain is validated (a broken one clears the entry), and the free list is
 * rebuilt from the pages no entry uses. A lengths writer's list (len_seq odd) may be torn: it is
 * made readable again with its check stamp zeroed, so lookups go to the directory (whose probe
 * loads the list again) instead of trusting it.
 *
 * Lock order: hdr->mu is a leaf: nothing else is locked while holding it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "l3ix.h"

#define RELAXED memory_order_relaxed

uint32_t shm_l3ix_entries(uint32_t entries)
{
	if (!entries)
		return 0;
	if (entries < SHM_L3IX_MIN_ENTRIES)
		entries = SHM_L3IX_MIN_ENTRIES;
	return shm_pow2_at_least((entries + SHM_L3IX_WAYS - 1) / SHM_L3IX_WAYS, 1) * SHM_L3IX_WAYS;
}

static uint32_t pages_for(uint32_t entries, int with_tokens)
{
	return with_tokens ? entries * SHM_L3IX_PAGES_PER_ENTRY : 0;
}

static uint64_t links_bytes(uint32_t npages)
{
	return shm_page_up((uint64_t)npages * 4);
}

static uint64_t region_bytes(uint32_t entries, uint32_t npages)
{
	return SHM_L3IX_HDR_BYTES + (uint64_t)entries * sizeof(struct shm_l3ix_entry) + links_bytes(npages) +
	       (uint64_t)npages * SHM_L3IX_PAGE_TOKENS * 4;
}

uint64_t shm_l3ix_bytes(uint32_t entries)
{
	/* sized for tokens; an arena without token verification leaves the pages unused. With no
	 * entries the header stays: it carries the collision counters of every level */
	return region_bytes(entries, pages_for(entries, 1));
}

int shm_l3ix_format(struct shm_arena *a)
{
	uint64_t size;
	uint8_t *r = shm_region(a, SHM_REGION_L3IX, &size);
	uint32_t n = a->hv.l3ix_entries;
	uint32_t npages = pages_for(n, !(a->hv.arena_flags & SHM_ARENA_NO_TOKEN_VERIFY));
	if (n != shm_l3ix_entries(n) || n > SHM_L3IX_MAX_ENTRIES || size < region_bytes(n, npages))
		return -EINVAL;
	struct shm_l3ix_hdr *h = (struct shm_l3ix_hdr *)r;
	memset(h, 0, sizeof(*h));
	h->nsets = n / SHM_L3IX_WAYS;
	h->npages = npages;
	h->entries_off = SHM_L3IX_HDR_BYTES;
	h->links_off = h->entries_off + (uint64_t)n * sizeof(struct shm_l3ix_entry);
	h->pages_off = h->links_off + links_bytes(npages);
	shm_mutex_init(&h->mu);
	shm_mutex_init(&h->sync_mu);
	memset(r + 8192, 0, 4096);
	uint32_t *links = (uint32_t *)(r + h->links_off);
	for (uint32_t i = 0; i < npages; i++)
		links[i] = i + 1 < npages ? i + 2 : 0;
	h->free_head = npages ? 1 : 0;
	h->free_pages = npages;
	h->magic = SHM_L3IX_MAGIC;
	return 0;
}

int shm_l3ix_view(struct shm_arena *a, struct shm_l3ix *ix)
{
	uint64_t size;
	uint8_t *r = shm_region(a, SHM_REGION_L3IX, &size);
	uint32_t n = a->hv.l3ix_entries;
	struct shm_l3ix_hdr *h = (struct shm_l3ix_hdr *)r;
	uint32_t npages = pages_for(n, !(a->hv.arena_flags & SHM_ARENA_NO_TOKEN_VERIFY));
	/* the format-time words are re-derived from the validated arena header, never trusted */
	if (size < SHM_L3IX_HDR_BYTES || h->magic != SHM_L3IX_MAGIC || n != shm_l3ix_entries(n) ||
	    n > SHM_L3IX_MAX_ENTRIES || h->nsets != n / SHM_L3IX_WAYS || h->npages != npages ||
	    size < region_bytes(n, npages) || h->entries_off != SHM_L3IX_HDR_BYTES ||
	    h->links_off != SHM_L3IX_HDR_BYTES + (uint64_t)n * sizeof(struct shm_l3ix_entry) ||
	    h->pages_off != h->links_off + links_bytes(npages))
		return -EBADMSG;
	*ix = (struct shm_l3ix){
		.a = a,
		.hdr = h,
		.scan = (struct shm_l3ix_scan *)(void *)(r + 8192),
		.lengths = (_Atomic uint32_t *)(void *)(r + 4096),
		.ent = (struct shm_l3ix_entry *)(void *)(r + h->entries_off),
		.links = (uint32_t *)(void *)(r + h->links_off),
		.pages = (int32_t *)(void *)(r + h->pages_off),
		.nsets = n / SHM_L3IX_WAYS,
		.npages = npages,
	};
	return 0;
}

/* ---- readers ---- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Compare the entry's token chain with @tokens: 1 equal, 0 different, -EBADMSG broken chain. */
static int tokens_cmp(const struct shm_l3ix *ix, uint32_t first, uint32_t count, const int32_t *tokens)
{
	uint32_t pg = first, done = 0;
	while (done < count) {
		if (!pg || pg > ix->npages)
			return -EBADMSG;
		uint32_t m = count - done < SHM_L3IX_PAGE_TOKENS ? count - done : SHM_L3IX_PAGE_TOKENS;
		/* a page being rewritten is compared in vain: the sequence check discards the result */
		if (memcmp(ix->pages + (uint64_t)(pg - 1) * SHM_L3IX_PAGE_TOKENS, tokens + done, (size_t)m * 4))
			return 0;
		done += m;
		pg = __atomic_load_n(&ix->links[pg - 1], __ATOMIC_RELAXED);
	}
	return 1;
}

static void copy_entry(struct shm_l3ix_entry *dst, const struct shm_l3ix_entry *src)
{
	/* word by word, relaxed: the writer may be changing it (the sequence check decides) */
	const uint64_t *s = (const uint64_t *)(const void *)src;
	uint64_t *d = (uint64_t *)(void *)dst;
	for (size_t i = 0; i < sizeof(*src) / 8; i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

int shm_l3ix_find(const struct shm_l3ix *ix, uint64_t key_lo, uint64_t key_hi, uint32_t token_count,
		  const int32_t *tokens, uint32_t cmp_flags, int *tokens_equal, struct shm_l3ix_snap *out)
{
	int busy = 0;
	if (tokens_equal)
		*tokens_equal = -1;
	if (!ix->nsets)
		return 0;
	uint32_t set = (uint32_t)(key_lo & (ix->nsets - 1));
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++) {
		uint32_t idx = set * SHM_L3IX_WAYS + w;
		struct shm_l3ix_entry *e = &ix->ent[idx];
		for (int t = 0; t < SHM_L3IX_READ_TRIES; t++) {
			/* acquire: pairs with the writer's final release store of seq */
			uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
			if (s1 & 1) {
				busy = 1;
				cpu_relax();
				continue;
			}
			if (__atomic_load_n(&e->key_lo, __ATOMIC_RELAXED) != key_lo ||
			    __atomic_load_n(&e->key_hi, __ATOMIC_RELAXED) != key_hi ||
			    __atomic_load_n(&e->token_count, __ATOMIC_RELAXED) != token_count)
				break; /* not this way (a torn read here is only a miss) */
			copy_entry(&out->e, e);
			int eq = -1;
			if (tokens && (out->e.flags & SHM_L3IX_TOKENS) && (out->e.flags & cmp_flags))
				eq = tokens_cmp(ix, out->e.first_page, token_count, tokens);
			/* acquire fence: pairs with the writer's release fence after it made seq odd */
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(&e->seq, RELAXED) != s1) {
				busy = 1;
				continue;
			}
			if (!out->e.flags || out->e.key_lo != key_lo || out->e.key_hi != key_hi ||
			    out->e.token_count != token_count)
				break;
			if (eq == -EBADMSG)
				return -EBADMSG;
			if (tokens_equal)
				*tokens_equal = eq;
			out->idx = idx;
			out->seq = s1;
			if (!atomic_load_explicit(&e->used, RELAXED))
				atomic_store_explicit(&e->used, 1, RELAXED);
			return 1;
		}
	}
	return busy ? -EAGAIN : 0;
}

int shm_l3ix_tokens_equal(const struct shm_l3ix *ix, const struct shm_l3ix_snap *snap, const int32_t *tokens)
{
	if (snap->idx >= ix->nsets * SHM_L3IX_WAYS || !(snap->e.flags & SHM_L3IX_TOKENS))
		return -EBADMSG;
	const struct shm_l3ix_entry *e = &ix->ent[snap->idx];
	if (atomic_load_explicit(&e->seq, memory_order_acquire) != snap->seq)
		return -EAGAIN;
	int eq = tokens_cmp(ix, snap->e.first_page, snap->e.token_count, tokens);
	shm_sched_point("l3ix.tokens.compared"); /* compared, not yet validated: vs a writer */
	/* pairs with the writer's release fence, as in shm_l3ix_find */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->seq, RELAXED) != snap->seq)
		return -EAGAIN;
	return eq;
}

int shm_l3ix_lengths(const struct shm_l3ix *ix, uint32_t n, uint32_t *out, uint32_t max, uint64_t *checked_ns)
{
	struct shm_l3ix_hdr *h = ix->hdr;
	for (int t = 0; t < SHM_L3IX_READ_TRIES; t++) {
		uint32_t s1 = atomic_load_explicit(&h->len_seq, memory_order_acquire);
		if (s1 & 1) {
			cpu_relax();
			continue;
		}
		uint32_t cnt = __atomic_load_n(&h->nlengths, __ATOMIC_RELAXED);
		uint64_t chk = atomic_load_explicit(&h->len_checked_ns, RELAXED);
		if (cnt > SHM_L3IX_MAX_LENGTHS)
			return -EBADMSG;
		/* the longest lengths <= n: binary search for the end, copy up to max below it */
		uint32_t lo = 0, hi = cnt;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			if (atomic_load_explicit(&ix->lengths[mid], RELAXED) <= n)
				lo = mid + 1;
			else
				hi = mid;
		}
		uint32_t from = lo > max ? lo - max : 0, k = 0;
		for (uint32_t i = from; i < lo; i++)
			out[k++] = atomic_load_explicit(&ix->lengths[i], RELAXED);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&h->len_seq, RELAXED) != s1)
			continue;
		for (uint32_t i = 1; i < k; i++)
			if (out[i] <= out[i - 1])
				return -EBADMSG;
		*checked_ns = chk;
		return (int)k;
	}
	return -EAGAIN;
}

/* ---- writers ---- */

int shm_l3ix_lock(struct shm_l3ix *ix)
{
	int rc = shm_mutex_lock(ix->a, &ix->hdr->mu);
	if (rc == -EOWNERDEAD) {
		shm_l3ix_repair_locked(ix);
		rc = 0;
	}
	return rc;
}

void shm_l3ix_unlock(struct shm_l3ix *ix)
{
	shm_mutex_unlock(ix->a, &ix->hdr->mu);
}

static void seq_begin(struct shm_l3ix_entry *e)
{
	atomic_store_explicit(&e->seq, atomic_load_explicit(&e->seq, RELAXED) | 1u, RELAXED);
	/* release fence: a reader that sees anything written after it sees seq odd (or moved) */
	atomic_thread_fence(memory_order_release);
}

static void seq_end(struct shm_l3ix_entry *e)
{
	/* release: pairs with the reader's acquire load of seq */
	atomic_store_explicit(&e->seq, (atomic_load_explicit(&e->seq, RELAXED) | 1u) + 1u, memory_order_release);
}

static void pages_free_locked(struct shm_l3ix *ix, uint32_t first, uint32_t count)
{
	uint32_t pg = first, need = (count + SHM_L3IX_PAGE_TOKENS - 1) / SHM_L3IX_PAGE_TOKENS;
	for (uint32_t i = 0; i < need && pg && pg <= ix->npages; i++) {
		uint32_t next = ix->links[pg - 1];
		ix->links[pg - 1] = ix->hdr->free_head;
		ix->hdr->free_head = pg;
		ix->hdr->free_pages++;
		pg = next;
	}
}

/* Zero every field of an entry whose seq is already odd but seq (its pages are the caller's). */
static void wipe_open(struct shm_l3ix_entry *e)
{
	shm_sched_point("l3ix.wipe"); /* the entry is about to be emptied: a reader finds it busy */
	uint32_t seq = atomic_load_explicit(&e->seq, RELAXED);
	memset((uint8_t *)e + 8, 0, sizeof(*e) - 8);
	atomic_store_explicit(&e->seq, seq, RELAXED);
	atomic_store_explicit(&e->used, 0, RELAXED);
}

/* Empty an entry whose seq is already odd, its pages back on the free list. */
static void clear_open(struct shm_l3ix *ix, struct shm_l3ix_entry *e)
{
	if (e->flags & SHM_L3IX_TOKENS)
		pages_free_locked(ix, e->first_page, e->token_count);
	wipe_open(e);
}

void shm_l3ix_clear_locked(struct shm_l3ix *ix, uint32_t idx)
{
	struct shm_l3ix_entry *e = &ix->ent[idx];
	if (!e->flags)
		return;
	seq_begin(e);
	clear_open(ix, e);
	seq_end(e);
}

void shm_l3ix_incomplete(struct shm_l3ix *ix)
{
	atomic_store_explicit(&ix->hdr->sync_full, 1, RELAXED);
	/* seq_cst: ordered before the evicted entry's seq goes odd (see the protocol above) */
	atomic_store(&ix->hdr->complete_ns, 0);
}

int shm_l3ix_put_locked(struct shm_l3ix *ix, const struct shm_l3ix_entry *src, const int32_t *tokens,
			uint32_t *evicted)
{
	*evicted = 0;
	if (!ix->nsets)
		return -ENOSPC;
	uint32_t set = (uint32_t)(src->key_lo & (ix->nsets - 1)), target = UINT32_MAX, empty = UINT32_MAX;
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++) {
		uint32_t idx = set * SHM_L3IX_WAYS + w;
		struct shm_l3ix_entry *e = &ix->ent[idx];
		if (e->flags && e->key_lo == src->key_lo && e->key_hi == src->key_hi &&
		    e->token_count == src->token_count) {
			/* newer knowledge wins: a refresh that read the directory before a writer
			 * changed it (and updated this entry) must not put the older view back */
			if (e->checked_ns > src->checked_ns && e->dir_gen == src->dir_gen)
				return 0;
			target = idx;
			break;
		}
		if (!e->flags && empty == UINT32_MAX)
			empty = idx;
	}
	if (target == UINT32_MAX)
		target = empty;
	if (target == UINT32_MAX) {
		/* CLOCK within the set, negative entries first: the first way not used since the last
		 * pass (a positive victim ends completeness: the directory has it, the index no more) */
		for (int pass = 0; pass < 2 && target == UINT32_MAX; pass++)
			for (uint32_t w = 0; w < 2 * SHM_L3IX_WAYS && target == UINT32_MAX; w++) {
				uint32_t idx = set * SHM_L3IX_WAYS + (uint32_t)((src->key_hi + w) % SHM_L3IX_WAYS);
				struct shm_l3ix_entry *e = &ix->ent[idx];
				if (pass == 0 && !(e->flags & SHM_L3IX_NEG))
					continue;
				if (atomic_load_explicit(&e->used, RELAXED) && w < SHM_L3IX_WAYS) {
					atomic_store_explicit(&e->used, 0, RELAXED);
					shm_sched_point("l3ix.clock.cleared"); /* readers may mark it again */
				} else {
					target = idx;
				}
			}
		if (ix->ent[target].flags & SHM_L3IX_POS)
			shm_l3ix_incomplete(ix);
		(*evicted)++;
	}
	struct shm_l3ix_entry *e = &ix->ent[target];
	uint32_t need = tokens ? (src->token_count + SHM_L3IX_PAGE_TOKENS - 1) / SHM_L3IX_PAGE_TOKENS : 0;
	seq_begin(e);
	shm_fault_point("l3ix.put.open");
	clear_open(ix, e);
	if (need > ix->hdr->free_pages)
		need = 0; /* no room for the token ids: the entry goes without (lib/l3/locindex.c reads them from
			   * the directory when it needs them) */
	/* the free list is shared memory too: walk what we are about to take before taking it */
	for (uint32_t i = 0, pg = ix->hdr->free_head; i < need; i++) {
		if (!pg || pg > ix->npages) {
			/* scribbled: forget the list (its pages leak until the next repair) and go without */
			ix->hdr->free_head = 0;
			ix->hdr->free_pages = 0;
			need = 0;
			break;
		}
		pg = ix->links[pg - 1];
	}
	uint32_t first = 0, prev = 0;
	for (uint32_t i = 0; i < need; i++) {
		uint32_t pg = ix->hdr->free_head;
		ix->hdr->free_head = ix->links[pg - 1];
		ix->hdr->free_pages--;
		ix->links[pg - 1] = 0;
		uint32_t m = src->token_count - i * SHM_L3IX_PAGE_TOKENS;
		if (m > SHM_L3IX_PAGE_TOKENS)
			m = SHM_L3IX_PAGE_TOKENS;
		memcpy(ix->pages + (uint64_t)(pg - 1) * SHM_L3IX_PAGE_TOKENS, tokens + (size_t)i * SHM_L3IX_PAGE_TOKENS,
		       (size_t)m * 4);
		if (prev)
			ix->links[prev - 1] = pg;
		else
			first = pg;
		prev = pg;
	}
	uint32_t seq = atomic_load_explicit(&e->seq, RELAXED);
	memcpy((uint8_t *)e + 8, (const uint8_t *)src + 8, sizeof(*e) - 8);
	atomic_store_explicit(&e->seq, seq, RELAXED);
	e->flags = (src->flags & ~SHM_L3IX_TOKENS) | (need ? SHM_L3IX_TOKENS : 0);
	e->first_page = first;
	atomic_store_explicit(&e->used, 1, RELAXED);
	shm_fault_point("l3ix.put.written");
	seq_end(e);
	return 0;
}

void shm_l3ix_set_lengths_locked(struct shm_l3ix *ix, const uint32_t *lens, uint32_t n, uint64_t checked_ns,
				 uint64_t mtime_ns)
{
	struct shm_l3ix_hdr *h = ix->hdr;
	if (n > SHM_L3IX_MAX_LENGTHS) {
		lens += n - SHM_L3IX_MAX_LENGTHS; /* keep the longest */
		n = SHM_L3IX_MAX_LENGTHS;
	}
	atomic_store_explicit(&h->len_seq, atomic_load_explicit(&h->len_seq, RELAXED) | 1u, RELAXED);
	atomic_thread_fence(memory_order_release);
	for (uint32_t i = 0; i < n; i++)
		atomic_store_explicit(&ix->lengths[i], lens[i], RELAXED);
	__atomic_store_n(&h->nlengths, n, __ATOMIC_RELAXED); /* readers load it racing (len_seq decides) */
	h->len_mtime_ns = mtime_ns;
	atomic_store_explicit(&h->len_checked_ns, checked_ns, RELAXED);
	atomic_store_explicit(&h->len_seq, (atomic_load_explicit(&h->len_seq, RELAXED) | 1u) + 1u, memory_order_release);
}

void shm_l3ix_add_length_locked(struct shm_l3ix *ix, uint32_t len)
{
	struct shm_l3ix_hdr *h = ix->hdr;
	uint32_t n = h->nlengths > SHM_L3IX_MAX_LENGTHS ? 0 : h->nlengths, at = 0;
	while (at < n && atomic_load_explicit(&ix->lengths[at], RELAXED) < len)
		at++;
	if (at < n && atomic_load_explicit(&ix->lengths[at], RELAXED) == len)
		return;
	atomic_store_explicit(&h->len_seq, atomic_load_explicit(&h->len_seq, RELAXED) | 1u, RELAXED);
	atomic_thread_fence(memory_order_release);
	if (n == SHM_L3IX_MAX_LENGTHS) { /* full: drop the shortest */
		for (uint32_t i = 1; i < at; i++)
			atomic_store_explicit(&ix->lengths[i - 1], atomic_load_explicit(&ix->lengths[i], RELAXED), RELAXED);
		if (at)
			atomic_store_explicit(&ix->lengths[at - 1], len, RELAXED);
	} else {
		for (uint32_t i = n; i > at; i--)
			atomic_store_explicit(&ix->lengths[i], atomic_load_explicit(&ix->lengths[i - 1], RELAXED), RELAXED);
		atomic_store_explicit(&ix->lengths[at], len, RELAXED);
		__atomic_store_n(&h->nlengths, n + 1, __ATOMIC_RELAXED);
	}
	atomic_store_explicit(&h->len_seq, (atomic_load_explicit(&h->len_seq, RELAXED) | 1u) + 1u, memory_order_release);
}

void shm_l3ix_repair_locked(struct shm_l3ix *ix)
{
	uint32_t n = ix->nsets * SHM_L3IX_WAYS;
	shm_l3ix_incomplete(ix); /* entries may be cleared below */
	uint8_t *used = ix->npages ? calloc(ix->npages, 1) : NULL;
	for (uint32_t idx = 0; idx < n; idx++) {
		struct shm_l3ix_entry *e = &ix->ent[idx];
		/* what fsck checks (lib/fsck.c check_l3_index): a torn write, flags no writer sets */
		int bad = (atomic_load_explicit(&e->seq, RELAXED) & 1) != 0 ||
			  (e->flags & ~(SHM_L3IX_POS | SHM_L3IX_NEG | SHM_L3IX_DESC | SHM_L3IX_TOKENS)) ||
			  ((e->flags & SHM_L3IX_POS) && (e->flags & SHM_L3IX_NEG));
		if (!bad && (e->flags & SHM_L3IX_TOKENS)) {
			uint32_t pg = e->first_page, need = (e->token_count + SHM_L3IX_PAGE_TOKENS - 1) / SHM_L3IX_PAGE_TOKENS;
			for (uint32_t i = 0; i < need && !bad; i++) {
				if (!pg || pg > ix->npages || !used || used[pg - 1])
					bad = 1;
				else
					used[pg - 1] = 1, pg = ix->links[pg - 1];
			}
		}
		if (bad) {
			seq_begin(e);
			wipe_open(e); /* its pages are rebuilt below */
			seq_end(e);
		}
	}
	/* pages marked by an entry cleared above after marking stay unused until the next repair:
	 * a leak bounded by one entry's pages, never a double use */
	ix->hdr->free_head = 0;
	ix->hdr->free_pages = 0;
	for (uint32_t i = ix->npages; i-- > 0;) {
		if (used && used[i])
			continue;
		ix->links[i] = ix->hdr->free_head;
		ix->hdr->free_head = i + 1;
		ix->hdr->free_pages++;
	}
	_Atomic uint32_t *len_seq = &ix->hdr->len_seq;
	if (atomic_load_explicit(len_seq, RELAXED) & 1) {
		/* a length writer died: its list may be torn. Never checked, so lookups go to the
		 * directory (whose probe loads the list again) instead of trusting it */
		atomic_store_explicit(&ix->hdr->len_checked_ns, 0, RELAXED);
		atomic_store_explicit(len_seq, atomic_load_explicit(len_seq, RELAXED) + 1, memory_order_release);
	}
	free(used);
}

int shm_l3ix_reformat(struct shm_arena *a)
{
	struct shm_l3ix ix;
	int rc = shm_l3ix_format(a);
	if (rc || (rc = shm_l3ix_view(a, &ix)))
		return rc;
	for (uint32_t i = 0; i < ix.nsets * SHM_L3IX_WAYS; i++) {
		seq_begin(&ix.ent[i]);
		wipe_open(&ix.ent[i]);
		seq_end(&ix.ent[i]);
	}
	return 0;
}
