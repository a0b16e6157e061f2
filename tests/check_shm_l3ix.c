/*
 * tests/check_shm_l3ix.c — the L3 location index region (shm/l3ix.c) driven directly, in a real
 * arena: its geometry and the view's refusal of each wrong header word; puts and lookups (which
 * way a key takes, what a refresh may replace, the CLOCK victim within a set and when an eviction
 * ends completeness); token pages (how many an entry takes, what happens without room or with a
 * scribbled free list, exact compares at page bounds, broken chains); the lengths table (the
 * longest kept, the longest at most n, insertion, refusal of a damaged table); the repair of each
 * kind of damage alone; a writer killed inside a put. The index built on it (lib/l3/locindex.c)
 * is tests/check_l3ix.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/fault.h"
#include "../shm/l3ix.h"

#define ARENA (64ull << 20)
#define PT SHM_L3IX_PAGE_TOKENS

struct fx {
	struct sc_arena *a;
	const char *name;
	struct shm_l3ix ix;
};

/* An arena whose L3 index has 64 entries (8 sets) and 256 token pages, locked by this process. */
static void fx_open(struct fx *f)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .l3_index_entries = 64 };
	f->a = sc_test_arena_opts("l3ix", &o, &f->name);
	ck_assert_int_eq(shm_l3ix_view(f->a->shm, &f->ix), 0);
	ck_assert_uint_eq(f->ix.nsets, 8);
	ck_assert_uint_eq(f->ix.npages, 64 * SHM_L3IX_PAGES_PER_ENTRY);
	ck_assert_uint_eq(f->ix.hdr->free_pages, f->ix.npages);
	ck_assert_int_eq(shm_l3ix_lock(&f->ix), 0);
}

static void fx_close(struct fx *f)
{
	shm_l3ix_unlock(&f->ix);
	sc_test_arena_destroy(f->a, f->name);
}

/* Token ids of prefix @seed: distinct per seed and position. */
static void toks(int32_t *t, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)(seed * 100003u + i * 7u + 1u);
}

/* A positive entry for key (@lo, @hi) of @count tokens; @ver lands in the digest. */
static struct shm_l3ix_entry ent(uint64_t lo, uint64_t hi, uint32_t count, uint32_t flags, uint64_t ver)
{
	struct shm_l3ix_entry e = { .flags = flags, .token_count = count, .key_lo = lo, .key_hi = hi,
				    .l3key_lo = lo ^ 0x5555, .l3key_hi = hi ^ 0xaaaa, .digest_lo = ver,
				    .digest_hi = ~ver, .sec_len = { 10, 20 }, .kind = 1, .checked_ns = 1000 + ver };
	return e;
}

static int32_t tk[32 * PT + 8], tk2[32 * PT + 8];

/* Put @e with token ids of @seed (none when @seed is 0); the number evicted. */
static uint32_t put(struct fx *f, struct shm_l3ix_entry e, uint32_t seed)
{
	uint32_t ev = 99;
	if (seed)
		toks(tk, e.token_count, seed);
	ck_assert_int_eq(shm_l3ix_put_locked(&f->ix, &e, seed ? tk : NULL, &ev), 0);
	ck_assert_uint_le(ev, 1);
	return ev;
}

/* The way of set @set holding the key, or -1. */
static int way_of(struct fx *f, uint64_t lo, uint64_t hi, uint32_t count)
{
	uint32_t set = (uint32_t)(lo & (f->ix.nsets - 1));
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++) {
		const struct shm_l3ix_entry *e = &f->ix.ent[set * SHM_L3IX_WAYS + w];
		if (e->flags && e->key_lo == lo && e->key_hi == hi && e->token_count == count)
			return (int)w;
	}
	return -1;
}

/* Look the key up comparing token ids of @seed (0: none): find's result, *@eq its token answer. */
static int find(struct fx *f, uint64_t lo, uint64_t hi, uint32_t count, uint32_t seed, int *eq,
		struct shm_l3ix_snap *s)
{
	if (seed)
		toks(tk2, count, seed);
	return shm_l3ix_find(&f->ix, lo, hi, count, seed ? tk2 : NULL, SHM_L3IX_POS | SHM_L3IX_NEG, eq, s);
}

/* Pages on the free list, walked (each at most once), and whether the walk was sound. */
static uint32_t free_walk(struct fx *f, uint8_t *seen)
{
	uint32_t n = 0;
	for (uint32_t pg = f->ix.hdr->free_head; pg; pg = f->ix.links[pg - 1]) {
		ck_assert_uint_le(pg, f->ix.npages);
		ck_assert_msg(!seen[pg - 1], "page %u twice", pg);
		seen[pg - 1] = 1;
		n++;
	}
	return n;
}

/* The free list and the entries' chains use every page exactly once, and free_pages is the list's
 * length. */
static void assert_pages_sound(struct fx *f)
{
	uint8_t *seen = calloc(f->ix.npages, 1);
	ck_assert_ptr_nonnull(seen);
	uint32_t nfree = free_walk(f, seen), used = 0;
	ck_assert_uint_eq(nfree, f->ix.hdr->free_pages);
	for (uint32_t i = 0; i < f->ix.nsets * SHM_L3IX_WAYS; i++) {
		const struct shm_l3ix_entry *e = &f->ix.ent[i];
		if (!(e->flags & SHM_L3IX_TOKENS))
			continue;
		uint32_t need = (e->token_count + PT - 1) / PT, pg = e->first_page;
		for (uint32_t k = 0; k < need; k++) {
			ck_assert_msg(pg && pg <= f->ix.npages, "entry %u: page %u of its chain is %u", i, k, pg);
			ck_assert_msg(!seen[pg - 1], "entry %u: page %u used twice", i, pg);
			seen[pg - 1] = 1;
			used++;
			pg = f->ix.links[pg - 1];
		}
	}
	ck_assert_uint_eq(nfree + used, f->ix.npages);
	free(seen);
}

START_TEST(geometry_rounds_to_whole_sets_of_a_power_of_two)
{
	ck_assert_uint_eq(shm_l3ix_entries(0), 0);
	ck_assert_uint_eq(shm_l3ix_entries(1), SHM_L3IX_MIN_ENTRIES);
	ck_assert_uint_eq(shm_l3ix_entries(63), 64);
	ck_assert_uint_eq(shm_l3ix_entries(64), 64);
	ck_assert_uint_eq(shm_l3ix_entries(65), 128);
	ck_assert_uint_eq(shm_l3ix_entries(128), 128);
	ck_assert_uint_eq(shm_l3ix_entries(129), 256);
	ck_assert_uint_eq(shm_l3ix_entries(1000), 1024);
	/* header, entries, links (a page per 1024 token pages), token pages */
	uint64_t pages = 64 * SHM_L3IX_PAGES_PER_ENTRY;
	ck_assert_uint_eq(shm_l3ix_bytes(64), SHM_L3IX_HDR_BYTES + 64 * sizeof(struct shm_l3ix_entry) + 4096 +
						     pages * PT * 4);
	ck_assert_uint_eq(shm_l3ix_bytes(1024), SHM_L3IX_HDR_BYTES + 1024 * sizeof(struct shm_l3ix_entry) +
						       4 * 4096 + 1024ull * SHM_L3IX_PAGES_PER_ENTRY * PT * 4);
	ck_assert_uint_eq(shm_l3ix_bytes(0), SHM_L3IX_HDR_BYTES);

	/* the formatted region: every page on the free list once, in order */
	struct fx f;
	fx_open(&f);
	ck_assert_uint_eq(f.ix.hdr->free_head, 1);
	for (uint32_t i = 0; i < f.ix.npages; i++)
		ck_assert_uint_eq(f.ix.links[i], i + 1 < f.ix.npages ? i + 2 : 0);
	assert_pages_sound(&f);
	fx_close(&f);
}
END_TEST

/* A hand-made arena (sc_test_fake_arena) whose L3 index region of @bytes holds @entries entries
 * and no token pages (an arena that keeps no token ids), formatted and viewed into @f; NULL after a
 * SKIP line. */
static struct shm_arena *fake_index(struct shm_arena *fake, uint32_t entries, uint64_t bytes, struct fx *f)
{
	struct shm_arena *sa = sc_test_fake_arena(fake, 4096 + bytes);
	if (!sa)
		return NULL;
	sa->hv.regions[SHM_REGION_L3IX] = (struct shm_region){ 4096, bytes };
	sa->hv.l3ix_entries = entries;
	sa->hv.arena_flags = SHM_ARENA_NO_TOKEN_VERIFY;
	*f = (struct fx){ .a = NULL };
	ck_assert_int_eq(shm_l3ix_format(sa), 0);
	ck_assert_int_eq(shm_l3ix_view(sa, &f->ix), 0);
	ck_assert_uint_eq(f->ix.npages, 0);
	return sa;
}

/* The largest index (SHM_L3IX_MAX_ENTRIES entries: 16.6 GiB with its token pages) in a hand-made
 * arena of untouched address space is formatted, viewed and used to its last set (the format
 * writes no links when the arena keeps no token ids). */
START_TEST(the_largest_index_is_allowed)
{
	static struct shm_arena fake;
	struct fx f;
	struct shm_arena *sa = fake_index(&fake, SHM_L3IX_MAX_ENTRIES, shm_l3ix_bytes(SHM_L3IX_MAX_ENTRIES), &f);
	if (!sa)
		return;
	ck_assert_uint_eq(f.ix.nsets, SHM_L3IX_MAX_ENTRIES / SHM_L3IX_WAYS);
	ck_assert_int_eq(shm_l3ix_lock(&f.ix), 0);
	uint64_t last = f.ix.nsets - 1;
	put(&f, ent(last, 9, 3, SHM_L3IX_POS, 1), 0);
	ck_assert_int_eq(way_of(&f, last, 9, 3), 0);
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, last, 9, 3, 0, &eq, &s), 1);
	ck_assert_uint_eq(s.idx, last * SHM_L3IX_WAYS);
	shm_l3ix_unlock(&f.ix);
	sc_test_fake_arena_close(sa);
}
END_TEST

/* An arena that keeps no token ids needs no links or token pages: a region of exactly the header
 * and the entries (its end against a guard page) is formatted and used without a byte past it. */
START_TEST(a_region_without_token_pages_ends_at_its_entries)
{
	static struct shm_arena fake;
	struct fx f;
	struct shm_arena *sa = fake_index(&fake, 64, SHM_L3IX_HDR_BYTES + 64 * sizeof(struct shm_l3ix_entry), &f);
	if (!sa)
		return;
	ck_assert_uint_eq(f.ix.hdr->free_head, 0);
	ck_assert_uint_eq(f.ix.hdr->free_pages, 0);
	ck_assert_int_eq(shm_l3ix_lock(&f.ix), 0);
	put(&f, ent(63, 2, 2 * PT, SHM_L3IX_POS, 1), 0); /* set 7, the last: entries 56..63 */
	ck_assert_int_eq(way_of(&f, 63, 2, 2 * PT), 0);
	shm_l3ix_repair_locked(&f.ix);
	ck_assert_int_eq(way_of(&f, 63, 2, 2 * PT), 0);
	shm_l3ix_unlock(&f.ix);
	sc_test_fake_arena_close(sa);
}
END_TEST

/* Each format-time word of the header, wrong alone, makes the view refuse the region. */
START_TEST(the_view_refuses_each_wrong_header_word)
{
	struct fx f;
	fx_open(&f);
	struct shm_l3ix_hdr *h = f.ix.hdr, keep = *h;
	struct shm_l3ix v;
	for (int c = 0; c < 6; c++) {
		switch (c) {
		case 0: h->magic ^= 1; break;
		case 1: h->nsets++; break;
		case 2: h->npages--; break;
		case 3: h->entries_off += 128; break;
		case 4: h->links_off += 4096; break;
		case 5: h->pages_off -= 4096; break;
		}
		ck_assert_msg(shm_l3ix_view(f.a->shm, &v) == -EBADMSG, "case %d accepted", c);
		memcpy(h, &keep, offsetof(struct shm_l3ix_hdr, mu));
		ck_assert_int_eq(shm_l3ix_view(f.a->shm, &v), 0);
	}
	ck_assert_ptr_eq(v.ent, f.ix.ent);
	ck_assert_ptr_eq(v.pages, f.ix.pages);
	ck_assert_ptr_eq(v.links, f.ix.links);
	fx_close(&f);
}
END_TEST

/* A key takes the first empty way of its set; keys that differ only in key_hi or in the token
 * count are other entries; a lookup copies the whole entry and marks it used. */
START_TEST(puts_and_lookups_by_the_whole_key)
{
	struct fx f;
	fx_open(&f);
	ck_assert_uint_eq(put(&f, ent(3, 7, 300, SHM_L3IX_POS, 1), 11), 0);
	ck_assert_uint_eq(put(&f, ent(3, 8, 300, SHM_L3IX_POS, 2), 12), 0);
	ck_assert_uint_eq(put(&f, ent(3, 7, 301, SHM_L3IX_NEG, 3), 13), 0);
	ck_assert_uint_eq(put(&f, ent(3 + 8, 7, 300, SHM_L3IX_POS, 4), 14), 0);
	ck_assert_int_eq(way_of(&f, 3, 7, 300), 0);
	ck_assert_int_eq(way_of(&f, 3, 8, 300), 1);
	ck_assert_int_eq(way_of(&f, 3, 7, 301), 2);
	ck_assert_int_eq(way_of(&f, 11, 7, 300), 3);
	assert_pages_sound(&f);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 4 * 2);

	struct shm_l3ix_snap s;
	int eq;
	uint64_t ver[] = { 1, 2, 3, 4 }, lo[] = { 3, 3, 3, 11 }, hi[] = { 7, 8, 7, 7 };
	uint32_t cnt[] = { 300, 300, 301, 300 };
	for (int i = 0; i < 4; i++) {
		struct shm_l3ix_entry *e = &f.ix.ent[3 * SHM_L3IX_WAYS + (uint32_t)i];
		atomic_store(&e->used, 0);
		memset(&s, 0xee, sizeof(s));
		ck_assert_int_eq(find(&f, lo[i], hi[i], cnt[i], 11 + (uint32_t)i, &eq, &s), 1);
		ck_assert_int_eq(eq, 1);
		ck_assert_uint_eq(s.idx, 3 * SHM_L3IX_WAYS + (uint32_t)i);
		ck_assert_uint_eq(s.seq, atomic_load(&e->seq));
		ck_assert_uint_eq(s.seq % 2, 0);
		ck_assert_uint_eq(s.e.digest_lo, ver[i]);
		ck_assert_uint_eq(s.e.digest_hi, ~ver[i]);
		ck_assert_uint_eq(s.e.l3key_hi, hi[i] ^ 0xaaaa);
		ck_assert_uint_eq(s.e.sec_len[1], 20);
		ck_assert_uint_eq(s.e.checked_ns, 1000 + ver[i]);
		ck_assert_uint_eq(s.e.flags & SHM_L3IX_TOKENS, SHM_L3IX_TOKENS);
		ck_assert_uint_eq(atomic_load(&e->used), 1);
		/* the same tokens of another prefix: a hit whose tokens differ */
		ck_assert_int_eq(find(&f, lo[i], hi[i], cnt[i], 50, &eq, &s), 1);
		ck_assert_int_eq(eq, 0);
		ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), 0);
		toks(tk2, cnt[i], 11 + (uint32_t)i);
		ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), 1);
	}
	/* misses: another key_lo of the set, key_hi, count; no tokens given: no answer about them */
	ck_assert_int_eq(find(&f, 3 + 16, 7, 300, 11, &eq, &s), 0);
	ck_assert_int_eq(eq, -1);
	ck_assert_int_eq(find(&f, 3, 9, 300, 11, &eq, &s), 0);
	ck_assert_int_eq(find(&f, 3, 7, 299, 11, &eq, &s), 0);
	ck_assert_int_eq(find(&f, 4, 7, 300, 11, &eq, &s), 0);
	ck_assert_int_eq(find(&f, 3, 7, 300, 0, &eq, &s), 1);
	ck_assert_int_eq(eq, -1);
	/* compared only when the caller asks for the entry's kind */
	toks(tk2, 300, 11);
	ck_assert_int_eq(shm_l3ix_find(&f.ix, 3, 7, 300, tk2, SHM_L3IX_NEG, &eq, &s), 1);
	ck_assert_int_eq(eq, -1);
	ck_assert_int_eq(shm_l3ix_find(&f.ix, 3, 7, 300, tk2, SHM_L3IX_POS, NULL, &s), 1);

	/* cleared: a miss, its pages back on the free list; clearing an empty way changes nothing */
	uint32_t seq = atomic_load(&f.ix.ent[3 * SHM_L3IX_WAYS].seq);
	shm_l3ix_clear_locked(&f.ix, 3 * SHM_L3IX_WAYS);
	ck_assert_uint_eq(atomic_load(&f.ix.ent[3 * SHM_L3IX_WAYS].seq), seq + 2);
	ck_assert_int_eq(find(&f, 3, 7, 300, 11, &eq, &s), 0);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 3 * 2);
	seq = atomic_load(&f.ix.ent[3 * SHM_L3IX_WAYS + 5].seq);
	shm_l3ix_clear_locked(&f.ix, 3 * SHM_L3IX_WAYS + 5);
	ck_assert_uint_eq(atomic_load(&f.ix.ent[3 * SHM_L3IX_WAYS + 5].seq), seq);
	assert_pages_sound(&f);
	/* the cleared way is the first empty one: the next new key of the set takes it */
	ck_assert_uint_eq(put(&f, ent(3 + 24, 1, 5, SHM_L3IX_POS, 5), 15), 0);
	ck_assert_int_eq(way_of(&f, 27, 1, 5), 0);
	fx_close(&f);
}
END_TEST

/* A refresh older than the entry (same directory generation) does not put the older view back;
 * the same age, or another generation, replaces it in its own way. */
START_TEST(a_refresh_replaces_only_what_is_not_newer)
{
	struct fx f;
	fx_open(&f);
	put(&f, ent(5, 1, 10, SHM_L3IX_POS, 100), 1);
	struct shm_l3ix_entry older = ent(5, 1, 10, SHM_L3IX_NEG, 99);
	older.checked_ns = 1000 + 100 - 1;
	put(&f, older, 2);
	ck_assert_uint_eq(f.ix.ent[5 * 8].digest_lo, 100);
	ck_assert_uint_eq(f.ix.ent[5 * 8].flags, SHM_L3IX_POS | SHM_L3IX_TOKENS);
	older.checked_ns = 1000 + 100;
	put(&f, older, 2);
	ck_assert_uint_eq(f.ix.ent[5 * 8].digest_lo, 99);
	ck_assert_uint_eq(f.ix.ent[5 * 8].flags, SHM_L3IX_NEG | SHM_L3IX_TOKENS);
	struct shm_l3ix_entry other = ent(5, 1, 10, SHM_L3IX_POS, 7);
	other.checked_ns = 1;
	other.dir_gen = 3;
	put(&f, other, 3);
	ck_assert_uint_eq(f.ix.ent[5 * 8].digest_lo, 7);
	ck_assert_uint_eq(f.ix.ent[5 * 8].dir_gen, 3);
	ck_assert_int_eq(way_of(&f, 5, 1, 10), 0);
	ck_assert_uint_eq(f.ix.ent[5 * 8 + 1].flags, 0);
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, 5, 1, 10, 3, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	assert_pages_sound(&f);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 1);
	fx_close(&f);
}
END_TEST

/* Fill set 2 with eight keys of key_hi 0..7; the entries of @neg_mask are negative. */
static void fill_set(struct fx *f, uint32_t neg_mask)
{
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
		ck_assert_uint_eq(put(f, ent(2 + 8 * w, w, 1, (neg_mask >> w & 1) ? SHM_L3IX_NEG : SHM_L3IX_POS, w), 0),
				  0);
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
		ck_assert_int_eq(way_of(f, 2 + 8 * w, w, 1), (int)w);
	atomic_store(&f->ix.hdr->complete_ns, 12345);
	atomic_store(&f->ix.hdr->sync_full, 0);
}

/* used flags of set 2 as a bit mask */
static uint32_t used_mask(struct fx *f)
{
	uint32_t m = 0;
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
		m |= (atomic_load(&f->ix.ent[2 * 8 + w].used) ? 1u : 0u) << w;
	return m;
}

/* A full set evicts by CLOCK from way key_hi % 8: negative entries first, a used one gets a
 * second chance (its flag cleared) during the first round only; a positive victim ends the
 * index's completeness, a negative one does not. */
START_TEST(a_full_set_evicts_by_clock_negatives_first)
{
	struct fx f;
	fx_open(&f);
	/* all positive, all used: every flag cleared once, then the start way (3) goes */
	fill_set(&f, 0);
	ck_assert_uint_eq(used_mask(&f), 0xff);
	ck_assert_uint_eq(put(&f, ent(2 + 8 * 20, 3 + 8 * 5, 1, SHM_L3IX_POS, 50), 0), 1);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 20, 3 + 8 * 5, 1), 3);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 3, 3, 1), -1);
	ck_assert_uint_eq(used_mask(&f), 1u << 3);
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->complete_ns), 0);
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->sync_full), 1);
	fx_close(&f);

	/* the first unused way from the start, wrapping: 6 and 7 used, 0 not */
	fx_open(&f);
	fill_set(&f, 0);
	atomic_store(&f.ix.ent[2 * 8 + 0].used, 0);
	atomic_store(&f.ix.ent[2 * 8 + 5].used, 0);
	ck_assert_uint_eq(put(&f, ent(2 + 8 * 20, 6, 1, SHM_L3IX_POS, 50), 0), 1);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 20, 6, 1), 0);
	ck_assert_uint_eq(used_mask(&f), 0xff & ~(1u << 6 | 1u << 7 | 1u << 5));
	fx_close(&f);

	/* negatives 5 and 6, both used, start 3: positives are passed over untouched, 5 and 6 get
	 * their second chance, and 5 goes on the second round; completeness stays */
	fx_open(&f);
	fill_set(&f, 1u << 5 | 1u << 6);
	ck_assert_uint_eq(put(&f, ent(2 + 8 * 20, 3, 1, SHM_L3IX_POS, 50), 0), 1);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 20, 3, 1), 5);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 6, 6, 1), 6);
	ck_assert_uint_eq(used_mask(&f), 0xff & ~(1u << 6));
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->complete_ns), 12345);
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->sync_full), 0);
	fx_close(&f);

	/* an unused negative is taken at once: nothing else loses its flag */
	fx_open(&f);
	fill_set(&f, 1u << 1 | 1u << 4);
	atomic_store(&f.ix.ent[2 * 8 + 4].used, 0);
	ck_assert_uint_eq(put(&f, ent(2 + 8 * 20, 3, 1, SHM_L3IX_NEG, 50), 0), 1);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 20, 3, 1), 4);
	ck_assert_uint_eq(used_mask(&f), 0xff);
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->complete_ns), 12345);
	/* a key already there is replaced in place: nothing evicted */
	ck_assert_uint_eq(put(&f, ent(2 + 8 * 7, 7, 1, SHM_L3IX_POS, 51), 0), 0);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 7, 7, 1), 7);
	ck_assert_uint_eq(f.ix.ent[2 * 8 + 7].digest_lo, 51);
	/* an empty way is preferred to any victim */
	shm_l3ix_clear_locked(&f.ix, 2 * 8 + 6);
	ck_assert_uint_eq(put(&f, ent(2 + 8 * 21, 0, 1, SHM_L3IX_POS, 52), 0), 0);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 21, 0, 1), 6);
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->complete_ns), 12345);
	fx_close(&f);
}
END_TEST

/* At l3ix.clock.cleared: every way of set 2 marked used again, as readers looking them up would. */
static void mark_all_used(const char *point, void *ctx)
{
	struct fx *f = ctx;
	if (strcmp(point, "l3ix.clock.cleared"))
		return;
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
		atomic_store(&f->ix.ent[2 * 8 + w].used, 1);
}

/* A full set's CLOCK pass ends with a victim even when readers mark every way used again after
 * each clear: the second round takes the start way (3) without a further chance. */
START_TEST(clock_ends_while_readers_mark_every_way)
{
	struct fx f;
	fx_open(&f);
	fill_set(&f, 0);
	shm_sched_set(mark_all_used, &f);
	uint32_t ev = put(&f, ent(2 + 8 * 20, 3 + 8 * 5, 1, SHM_L3IX_POS, 50), 0);
	shm_sched_set(NULL, NULL);
	ck_assert_uint_eq(ev, 1);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 20, 3 + 8 * 5, 1), 3);
	ck_assert_int_eq(way_of(&f, 2 + 8 * 3, 3, 1), -1);
	for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
		if (w != 3)
			ck_assert_int_eq(way_of(&f, 2 + 8 * w, w, 1), (int)w);
	ck_assert_uint_eq(used_mask(&f), 0xff);
	fx_close(&f);
}
END_TEST

/* An arena made without an index (SC_L3_INDEX_NONE) has its header alone (the collision counters
 * of every level live there): the view accepts it with no sets; puts refuse, lookups miss. */
START_TEST(no_sets_refuses_puts_and_misses)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .l3_index_entries = SC_L3_INDEX_NONE };
	const char *nname;
	struct sc_arena *na = sc_test_arena_opts("l3ix-none", &o, &nname);
	struct shm_l3ix none;
	ck_assert_int_eq(shm_l3ix_view(na->shm, &none), 0);
	ck_assert_uint_eq(none.nsets, 0);
	ck_assert_uint_eq(none.npages, 0);
	struct fx f;
	fx_open(&f);
	struct shm_l3ix_entry e = ent(1, 1, 1, SHM_L3IX_POS, 1);
	uint32_t ev = 7;
	ck_assert_int_eq(shm_l3ix_put_locked(&none, &e, NULL, &ev), -ENOSPC);
	ck_assert_uint_eq(ev, 0);
	put(&f, e, 0);
	struct shm_l3ix_snap s;
	int eq = 5;
	ck_assert_int_eq(shm_l3ix_find(&none, 1, 1, 1, NULL, SHM_L3IX_POS, &eq, &s), 0);
	ck_assert_int_eq(eq, -1);
	fx_close(&f);
	sc_test_arena_destroy(na, nname);
}
END_TEST

/* Counts the comparisons tokens_equal made (l3ix.tokens.compared). */
static void count_compared(const char *point, void *ctx)
{
	if (!strcmp(point, "l3ix.tokens.compared"))
		++*(int *)ctx;
}

/* Token pages: a chain of ceil(count / 256) pages; exact compares at the page bounds; with too
 * few pages free, or a scribbled free list, the entry goes without token ids (and a scribbled
 * list is forgotten); replacing or clearing an entry gives its pages back. */
START_TEST(token_pages_are_taken_given_back_and_compared_exactly)
{
	struct fx f;
	fx_open(&f);
	uint32_t np = f.ix.npages;
	uint32_t counts[] = { 1, PT - 1, PT, PT + 1, 2 * PT, 4 * PT };
	uint32_t need = 0;
	for (uint32_t i = 0; i < 6; i++) {
		put(&f, ent(i, 1, counts[i], SHM_L3IX_POS, i), 20 + i);
		need += (counts[i] + PT - 1) / PT;
		ck_assert_uint_eq(f.ix.hdr->free_pages, np - need);
		ck_assert_uint_eq(f.ix.ent[i * 8].flags, SHM_L3IX_POS | SHM_L3IX_TOKENS);
	}
	assert_pages_sound(&f);
	int eq;
	struct shm_l3ix_snap s;
	for (uint32_t i = 0; i < 6; i++) {
		ck_assert_int_eq(find(&f, i, 1, counts[i], 20 + i, &eq, &s), 1);
		ck_assert_int_eq(eq, 1);
		/* one token differs: the first, the last of a page, the first of the next, the last */
		uint32_t at[] = { 0, PT - 1, PT, counts[i] - 1 };
		for (int k = 0; k < 4; k++) {
			if (at[k] >= counts[i])
				continue;
			toks(tk2, counts[i], 20 + i);
			tk2[at[k]] ^= 0x40000;
			ck_assert_int_eq(shm_l3ix_find(&f.ix, i, 1, counts[i], tk2, SHM_L3IX_POS, &eq, &s), 1);
			ck_assert_msg(eq == 0, "count %u: token %u differs, compared equal", counts[i], at[k]);
			ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), 0);
		}
	}

	/* without tokens: no pages */
	put(&f, ent(6, 1, 3 * PT, SHM_L3IX_POS, 6), 0);
	ck_assert_uint_eq(f.ix.ent[6 * 8].flags, SHM_L3IX_POS);
	ck_assert_uint_eq(f.ix.ent[6 * 8].first_page, 0);
	ck_assert_uint_eq(f.ix.hdr->free_pages, np - need);
	/* replacing the 4-page entry by one of 1 token gives 3 back; clearing gives the last one */
	put(&f, ent(5, 1, 4 * PT, SHM_L3IX_POS, 5), 0);
	ck_assert_uint_eq(f.ix.hdr->free_pages, np - need + 4);
	need -= 4;
	assert_pages_sound(&f);

	/* take all but 3 free pages (32-page entries in set 7, then 1-page ones in sets 1 to 5),
	 * then: 4 needed, 3 free: none; 3 needed, 3 free: taken */
	for (uint32_t k = 0; f.ix.hdr->free_pages > 3 + 32; k++) {
		ck_assert_uint_lt(k, 7);
		ck_assert_uint_eq(put(&f, ent(7 + 8 * k, 100 + k, 32 * PT, SHM_L3IX_POS, 0), 40 + k), 0);
	}
	for (uint32_t k = 0; f.ix.hdr->free_pages > 3; k++) {
		ck_assert_uint_lt(k, 30);
		ck_assert_uint_eq(put(&f, ent(1 + k % 5 + 8 * (1 + k / 5), 200 + k, 1, SHM_L3IX_POS, 0), 40), 0);
	}
	ck_assert_uint_eq(f.ix.hdr->free_pages, 3);
	put(&f, ent(6, 2, 3 * PT + 1, SHM_L3IX_POS, 1), 60);
	ck_assert_uint_eq(f.ix.ent[6 * 8 + 1].flags, SHM_L3IX_POS);
	ck_assert_uint_eq(f.ix.hdr->free_pages, 3);
	ck_assert_int_eq(find(&f, 6, 2, 3 * PT + 1, 60, &eq, &s), 1);
	ck_assert_int_eq(eq, -1);
	put(&f, ent(6, 3, 3 * PT, SHM_L3IX_POS, 1), 61);
	ck_assert_uint_eq(f.ix.ent[6 * 8 + 2].flags, SHM_L3IX_POS | SHM_L3IX_TOKENS);
	ck_assert_uint_eq(f.ix.hdr->free_pages, 0);
	ck_assert_int_eq(find(&f, 6, 3, 3 * PT, 61, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	assert_pages_sound(&f);
	fx_close(&f);
}
END_TEST

/* Every page taken (eight entries of 32 pages), then every entry cleared: all pages come back,
 * the region's last one too, and the next puts take them again. */
START_TEST(every_page_taken_and_given_back)
{
	struct fx f;
	fx_open(&f);
	for (int round = 0; round < 2; round++) {
		for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
			ck_assert_uint_eq(put(&f, ent(7 + 8 * w, w, 32 * PT, SHM_L3IX_POS, 0), 70 + w), 0);
		ck_assert_uint_eq(f.ix.hdr->free_pages, 0);
		ck_assert_uint_eq(f.ix.hdr->free_head, 0);
		assert_pages_sound(&f);
		shm_l3ix_repair_locked(&f.ix); /* nothing to repair, the last page in use included */
		ck_assert_uint_eq(f.ix.hdr->free_pages, 0);
		int eq;
		struct shm_l3ix_snap s;
		for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++) {
			ck_assert_int_eq(find(&f, 7 + 8 * w, w, 32 * PT, 70 + w, &eq, &s), 1);
			ck_assert_int_eq(eq, 1);
		}
		for (uint32_t w = 0; w < SHM_L3IX_WAYS; w++)
			shm_l3ix_clear_locked(&f.ix, 7 * 8 + w);
		ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages);
		assert_pages_sound(&f);
	}
	fx_close(&f);
}
END_TEST

/* Clearing an entry gives back the pages its token count needs and no more: a chain that a
 * scribble made run on into another entry's page does not free that page. */
START_TEST(a_clear_frees_only_the_pages_its_entry_needs)
{
	struct fx f;
	fx_open(&f);
	put(&f, ent(1, 1, PT, SHM_L3IX_POS, 1), 1);
	put(&f, ent(2, 1, PT, SHM_L3IX_POS, 2), 2);
	uint32_t pa = f.ix.ent[8].first_page, pb = f.ix.ent[16].first_page;
	f.ix.links[pa - 1] = pb;
	shm_l3ix_clear_locked(&f.ix, 8);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 1);
	assert_pages_sound(&f);
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, 2, 1, PT, 2, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	fx_close(&f);
}
END_TEST

/* The repair visits the index's entries and nothing past them: page links right after the table
 * that read as a torn entry (an odd first word) are not cleared as one. */
START_TEST(the_repair_reads_no_entry_past_the_table)
{
	struct fx f;
	fx_open(&f);
	/* an entry on pages 1 and 3: links[0] = 3, odd */
	struct shm_l3ix_entry e = ent(5, 1, 2 * PT, SHM_L3IX_POS | SHM_L3IX_TOKENS, 1);
	e.first_page = 1;
	toks(tk, 2 * PT, 8);
	memcpy(f.ix.pages, tk, PT * 4);
	memcpy(f.ix.pages + 2 * PT, tk + PT, PT * 4);
	f.ix.links[0] = 3;
	f.ix.links[2] = 0;
	memcpy((uint8_t *)&f.ix.ent[5 * 8] + 8, (uint8_t *)&e + 8, sizeof(e) - 8);
	shm_l3ix_repair_locked(&f.ix);
	ck_assert_uint_eq(f.ix.links[0], 3);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 2);
	assert_pages_sound(&f);
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, 5, 1, 2 * PT, 8, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	fx_close(&f);
}
END_TEST

/* A free list that ends (a 0 link) or leaves the pages before the put has walked all it needs is
 * forgotten: the entry goes without token ids, and no page outside the region is written. */
START_TEST(a_scribbled_free_list_is_forgotten_not_followed)
{
	for (int c = 0; c < 3; c++) {
		struct fx f;
		fx_open(&f);
		uint32_t np = f.ix.npages;
		/* planted past the last page: a link that would lead back into the list */
		int32_t *past = f.ix.pages + (uint64_t)np * PT;
		uint8_t keep[64];
		memcpy(keep, past, sizeof(keep));
		switch (c) {
		case 0: f.ix.hdr->free_head = np + 1; break;
		case 1: f.ix.links[1] = 0; break;          /* page 2 ends the list: 2 of the 3 */
		case 2: f.ix.links[1] = np + 1; break;     /* page 2 leads out of the region */
		}
		put(&f, ent(1, 1, 3 * PT, SHM_L3IX_POS, 1), 5);
		ck_assert_msg(f.ix.ent[8].flags == SHM_L3IX_POS, "case %d: flags %x", c, f.ix.ent[8].flags);
		ck_assert_uint_eq(f.ix.hdr->free_head, 0);
		ck_assert_uint_eq(f.ix.hdr->free_pages, 0);
		ck_assert_int_eq(memcmp(keep, past, sizeof(keep)), 0);
		/* the lookup still hits, with no answer about tokens */
		int eq;
		struct shm_l3ix_snap s;
		ck_assert_int_eq(find(&f, 1, 1, 3 * PT, 5, &eq, &s), 1);
		ck_assert_int_eq(eq, -1);
		fx_close(&f);
	}
	/* a list of exactly the pages needed, ending in 0, is fine */
	struct fx f;
	fx_open(&f);
	f.ix.links[2] = 0;
	f.ix.hdr->free_pages = 3;
	put(&f, ent(1, 1, 3 * PT, SHM_L3IX_POS, 1), 5);
	ck_assert_uint_eq(f.ix.ent[8].flags, SHM_L3IX_POS | SHM_L3IX_TOKENS);
	ck_assert_uint_eq(f.ix.hdr->free_pages, 0);
	ck_assert_uint_eq(f.ix.hdr->free_head, 0);
	fx_close(&f);
}
END_TEST

/* A chain that a scribble broke makes a lookup -EBADMSG: a first page of 0 or past the region,
 * a link past the region; the region's last page is a page like any other. */
START_TEST(a_broken_chain_is_an_error_not_a_read_outside)
{
	struct fx f;
	fx_open(&f);
	put(&f, ent(4, 1, 2 * PT, SHM_L3IX_POS, 1), 9);
	struct shm_l3ix_entry *e = &f.ix.ent[4 * 8];
	uint32_t np = f.ix.npages;
	int eq;
	struct shm_l3ix_snap s;
	/* move the chain to the last two pages: still equal */
	toks(tk, 2 * PT, 9);
	memcpy(f.ix.pages + (uint64_t)(np - 2) * PT, tk, PT * 4);
	memcpy(f.ix.pages + (uint64_t)(np - 1) * PT, tk + PT, PT * 4);
	f.ix.links[np - 2] = np;
	f.ix.links[np - 1] = 0;
	e->first_page = np - 1;
	ck_assert_int_eq(find(&f, 4, 1, 2 * PT, 9, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), 1);
	/* bytes past the last page that equal the tokens: a chain through them is broken all the same */
	int32_t *past = f.ix.pages + (uint64_t)np * PT;
	memcpy(past, tk + PT, PT * 4);
	uint32_t bad_first[] = { 0, np + 1 };
	for (int c = 0; c < 2; c++) {
		e->first_page = bad_first[c];
		ck_assert_int_eq(find(&f, 4, 1, 2 * PT, 9, &eq, &s), -EBADMSG);
	}
	e->first_page = np - 1;
	f.ix.links[np - 2] = np + 1;
	ck_assert_int_eq(find(&f, 4, 1, 2 * PT, 9, &eq, &s), -EBADMSG);
	f.ix.links[np - 2] = 0; /* the chain ends one page early */
	ck_assert_int_eq(find(&f, 4, 1, 2 * PT, 9, &eq, &s), -EBADMSG);
	f.ix.links[np - 2] = np;
	ck_assert_int_eq(find(&f, 4, 1, 2 * PT, 9, &eq, &s), 1);

	/* tokens_equal refuses a snapshot naming no entry or an entry without tokens, and one whose
	 * entry was rewritten since */
	struct shm_l3ix_snap bad = s;
	bad.idx = f.ix.nsets * SHM_L3IX_WAYS;
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &bad, tk2), -EBADMSG);
	bad = s;
	bad.e.flags &= ~SHM_L3IX_TOKENS;
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &bad, tk2), -EBADMSG);
	bad = s;
	bad.seq += 2;
	/* ... before its pages are compared (l3ix.tokens.compared not reached): they may be another
	 * entry's by now */
	int compared = 0;
	shm_sched_set(count_compared, &compared);
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &bad, tk2), -EAGAIN);
	ck_assert_int_eq(compared, 0);
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), 1);
	shm_sched_set(NULL, NULL);
	ck_assert_int_eq(compared, 1);
	/* the last entry of the index is an entry */
	put(&f, ent(7 + 8 * 1, 2, 5, SHM_L3IX_POS, 1), 3);
	put(&f, ent(7 + 8 * 2, 2, 5, SHM_L3IX_POS, 1), 3);
	for (uint32_t w = 2; w < 8; w++)
		put(&f, ent(7 + 8 * (w + 1), 2, 5, SHM_L3IX_POS, 1), 3);
	ck_assert_int_eq(way_of(&f, 7 + 8 * 8, 2, 5), 7);
	ck_assert_int_eq(find(&f, 7 + 8 * 8, 2, 5, 3, &eq, &s), 1);
	ck_assert_uint_eq(s.idx, f.ix.nsets * SHM_L3IX_WAYS - 1);
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), 1);
	fx_close(&f);
}
END_TEST

/* A region whose header was damaged is formatted anew empty (fsck): every entry emptied under
 * its sequence lock, every page free once; a snapshot taken before sees the change. A format
 * refuses an entry count that is not whole sets of a power of two, or one its region is too small
 * for, and writes nothing then. */
START_TEST(a_reformat_empties_every_entry)
{
	struct fx f;
	fx_open(&f);
	put(&f, ent(3, 1, 2 * PT, SHM_L3IX_POS, 1), 1);
	put(&f, ent(4, 1, 1, SHM_L3IX_NEG, 2), 0);
	atomic_fetch_add(&f.ix.ent[5 * 8 + 2].seq, 1); /* a writer died there */
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, 3, 1, 2 * PT, 1, &eq, &s), 1);
	shm_l3ix_unlock(&f.ix);
	struct shm_l3ix_hdr *h = f.ix.hdr;
	h->magic ^= 1;
	struct shm_arena *sa = f.a->shm;
	uint32_t n = sa->hv.l3ix_entries;
	uint32_t bad_n[] = { n - 8, n + 36, 2 * n }; /* not whole sets of a power of two (fits, does not), too many */
	for (int c = 0; c < 3; c++) {
		sa->hv.l3ix_entries = bad_n[c];
		int rc = shm_l3ix_format(sa), rc2 = shm_l3ix_reformat(sa);
		sa->hv.l3ix_entries = n;
		ck_assert_msg(rc == -EINVAL && rc2 == -EINVAL, "count %u formatted (%d, anew %d)", bad_n[c], rc, rc2);
		ck_assert_uint_eq(h->magic, SHM_L3IX_MAGIC ^ 1);
	}
	ck_assert_int_eq(shm_l3ix_view(sa, &f.ix), -EBADMSG);
	ck_assert_int_eq(shm_l3ix_reformat(sa), 0);
	ck_assert_int_eq(shm_l3ix_view(sa, &f.ix), 0);
	for (uint32_t i = 0; i < f.ix.nsets * SHM_L3IX_WAYS; i++) {
		ck_assert_msg(!f.ix.ent[i].flags && !f.ix.ent[i].key_lo, "entry %u kept", i);
		ck_assert_uint_eq(atomic_load(&f.ix.ent[i].seq) % 2, 0);
	}
	ck_assert_int_eq(shm_l3ix_tokens_equal(&f.ix, &s, tk2), -EAGAIN);
	ck_assert_int_eq(find(&f, 3, 1, 2 * PT, 1, &eq, &s), 0);
	ck_assert_int_eq(shm_l3ix_lock(&f.ix), 0);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages);
	assert_pages_sound(&f);
	put(&f, ent(3, 1, 2 * PT, SHM_L3IX_POS, 1), 1);
	ck_assert_int_eq(find(&f, 3, 1, 2 * PT, 1, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	fx_close(&f);
}
END_TEST

/* An empty entry is no entry: a lookup of the key that reads as zero misses. */
START_TEST(an_empty_entry_is_no_entry)
{
	struct fx f;
	fx_open(&f);
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, 0, 0, 0, 0, &eq, &s), 0);
	put(&f, ent(8, 0, 0, SHM_L3IX_NEG, 0), 0); /* set 0, key_lo 8 */
	ck_assert_int_eq(find(&f, 0, 0, 0, 0, &eq, &s), 0);
	ck_assert_int_eq(find(&f, 8, 0, 0, 0, &eq, &s), 1);
	/* the key that reads as zero, stored behind an empty way: a put of it again replaces it there
	 * (an empty way is not that key) */
	put(&f, ent(0, 0, 0, SHM_L3IX_POS, 1), 0);
	ck_assert_int_eq(way_of(&f, 0, 0, 0), 1);
	shm_l3ix_clear_locked(&f.ix, 0);
	struct shm_l3ix_entry z = ent(0, 0, 0, SHM_L3IX_POS, 2);
	z.checked_ns = 1 << 20;
	put(&f, z, 0);
	ck_assert_uint_eq(f.ix.ent[0].flags, 0);
	ck_assert_uint_eq(f.ix.ent[1].digest_lo, 2);
	fx_close(&f);
}
END_TEST

/* A lookup in the last set reads its eight ways and nothing past them: bytes after the table (the
 * page links) that read as an entry of the key are not a hit. */
START_TEST(a_lookup_reads_no_way_past_its_set)
{
	struct fx f;
	fx_open(&f);
	uint32_t last = f.ix.nsets - 1;
	struct shm_l3ix_entry fake = ent(last, 1, 0, SHM_L3IX_POS, 1), keep;
	uint8_t *past = (uint8_t *)&f.ix.ent[f.ix.nsets * SHM_L3IX_WAYS];
	ck_assert_ptr_eq(past, (uint8_t *)f.ix.links);
	memcpy(&keep, past, sizeof(keep));
	memcpy(past, &fake, sizeof(fake));
	int eq;
	struct shm_l3ix_snap s;
	int rc = find(&f, last, 1, 0, 0, &eq, &s);
	memcpy(past, &keep, sizeof(keep));
	ck_assert_int_eq(rc, 0);
	fx_close(&f);
}
END_TEST

/* An entry being written (odd seq) is not read: after its retries the lookup says busy, and the
 * other ways of the set are still searched. */
START_TEST(an_entry_being_written_is_busy)
{
	struct fx f;
	fx_open(&f);
	put(&f, ent(1, 1, 10, SHM_L3IX_POS, 1), 2);
	put(&f, ent(1, 2, 10, SHM_L3IX_POS, 2), 3);
	struct shm_l3ix_entry *e = &f.ix.ent[8];
	atomic_fetch_add(&e->seq, 1);
	int eq;
	struct shm_l3ix_snap s;
	ck_assert_int_eq(find(&f, 1, 1, 10, 2, &eq, &s), -EAGAIN);
	ck_assert_int_eq(find(&f, 1, 2, 10, 3, &eq, &s), 1);
	ck_assert_int_eq(eq, 1);
	ck_assert_int_eq(find(&f, 1, 3, 10, 3, &eq, &s), -EAGAIN); /* not sure it is absent */
	ck_assert_int_eq(find(&f, 2, 1, 10, 2, &eq, &s), 0);
	atomic_fetch_add(&e->seq, 1);
	ck_assert_int_eq(find(&f, 1, 1, 10, 2, &eq, &s), 1);
	fx_close(&f);
}
END_TEST

static void set_lengths(struct fx *f, const uint32_t *v, uint32_t n)
{
	shm_l3ix_set_lengths_locked(&f->ix, v, n, 777, 888);
}

static void assert_lengths(struct fx *f, const uint32_t *v, uint32_t n)
{
	ck_assert_uint_eq(f->ix.hdr->nlengths, n);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(atomic_load(&f->ix.lengths[i]) == v[i], "length %u is %u, not %u", i,
			      atomic_load(&f->ix.lengths[i]), v[i]);
	ck_assert_uint_eq(atomic_load(&f->ix.hdr->len_seq) % 2, 0);
}

/* The lengths table: set keeps the longest 1000; a read gives the longest lengths at most n
 * (at most max of them, ascending) and when they were checked; an add keeps the table sorted,
 * ignores a length it has, and when full drops the shortest; a damaged table is refused. */
START_TEST(the_lengths_table)
{
	struct fx f;
	fx_open(&f);
	uint32_t v[SHM_L3IX_MAX_LENGTHS + 5], out[SHM_L3IX_MAX_LENGTHS + 5];
	uint64_t chk = 0;
	for (uint32_t i = 0; i < SHM_L3IX_MAX_LENGTHS + 5; i++)
		v[i] = 10 * (i + 1);
	set_lengths(&f, v, SHM_L3IX_MAX_LENGTHS + 5);
	assert_lengths(&f, v + 5, SHM_L3IX_MAX_LENGTHS);
	ck_assert_uint_eq(f.ix.hdr->len_mtime_ns, 888);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, UINT32_MAX, out, SHM_L3IX_MAX_LENGTHS, &chk),
			 (int)SHM_L3IX_MAX_LENGTHS);
	ck_assert_uint_eq(chk, 777);
	ck_assert_uint_eq(out[0], 60);
	ck_assert_uint_eq(out[SHM_L3IX_MAX_LENGTHS - 1], 10 * (SHM_L3IX_MAX_LENGTHS + 5));

	uint32_t four[] = { 10, 20, 30, 40 };
	set_lengths(&f, four, 4);
	assert_lengths(&f, four, 4);
	struct {
		uint32_t n, max, k, first;
	} q[] = { { 30, 2, 2, 20 }, { 30, 10, 3, 10 }, { 31, 1, 1, 30 }, { 29, 1, 1, 20 }, { 9, 4, 0, 0 },
		  { 10, 4, 1, 10 }, { 40, 4, 4, 10 }, { 1000, 3, 3, 20 }, { 40, 0, 0, 0 } };
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		memset(out, 0, sizeof(out));
		int k = shm_l3ix_lengths(&f.ix, q[i].n, out, q[i].max, &chk);
		ck_assert_msg(k == (int)q[i].k, "n %u max %u: %d lengths", q[i].n, q[i].max, k);
		if (k)
			ck_assert_uint_eq(out[0], q[i].first);
		for (int j = 1; j < k; j++)
			ck_assert_uint_eq(out[j], out[j - 1] + 10);
		ck_assert_uint_eq(out[k], 0); /* nothing written past what it returned */
	}

	/* add: in order, at either end, once */
	uint32_t seq = atomic_load(&f.ix.hdr->len_seq);
	shm_l3ix_add_length_locked(&f.ix, 20);
	ck_assert_uint_eq(atomic_load(&f.ix.hdr->len_seq), seq);
	shm_l3ix_add_length_locked(&f.ix, 25);
	shm_l3ix_add_length_locked(&f.ix, 5);
	shm_l3ix_add_length_locked(&f.ix, 45);
	shm_l3ix_add_length_locked(&f.ix, 40);
	uint32_t after[] = { 5, 10, 20, 25, 30, 40, 45 };
	assert_lengths(&f, after, 7);
	/* a length left past the count by a longer table before is not "had" */
	set_lengths(&f, four, 4);
	set_lengths(&f, four, 3);
	shm_l3ix_add_length_locked(&f.ix, 40);
	assert_lengths(&f, four, 4);

	/* full: the shortest goes; one shorter than all is not kept */
	set_lengths(&f, v, SHM_L3IX_MAX_LENGTHS);
	shm_l3ix_add_length_locked(&f.ix, 15);
	ck_assert_uint_eq(f.ix.hdr->nlengths, SHM_L3IX_MAX_LENGTHS);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[0]), 15);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[1]), 20);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[SHM_L3IX_MAX_LENGTHS - 1]), 10 * SHM_L3IX_MAX_LENGTHS);
	shm_l3ix_add_length_locked(&f.ix, 1);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[0]), 15);
	shm_l3ix_add_length_locked(&f.ix, 10 * SHM_L3IX_MAX_LENGTHS + 1);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[0]), 20);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[SHM_L3IX_MAX_LENGTHS - 2]), 10 * SHM_L3IX_MAX_LENGTHS);
	ck_assert_uint_eq(atomic_load(&f.ix.lengths[SHM_L3IX_MAX_LENGTHS - 1]), 10 * SHM_L3IX_MAX_LENGTHS + 1);
	ck_assert_uint_eq(f.ix.hdr->nlengths, SHM_L3IX_MAX_LENGTHS);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, UINT32_MAX, out, SHM_L3IX_MAX_LENGTHS, &chk),
			 (int)SHM_L3IX_MAX_LENGTHS);
	/* one below full: added, nothing dropped */
	set_lengths(&f, v + 1, SHM_L3IX_MAX_LENGTHS - 1);
	shm_l3ix_add_length_locked(&f.ix, 10);
	assert_lengths(&f, v, SHM_L3IX_MAX_LENGTHS);

	/* damaged: a count past the table, out of order, a repeat; a write in progress */
	f.ix.hdr->nlengths = SHM_L3IX_MAX_LENGTHS + 1;
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 10, &chk), -EBADMSG);
	shm_l3ix_add_length_locked(&f.ix, 7); /* an add starts the table again */
	assert_lengths(&f, (uint32_t[]){ 7 }, 1);
	set_lengths(&f, four, 4);
	atomic_store(&f.ix.lengths[2], 20);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 10, &chk), -EBADMSG);
	atomic_store(&f.ix.lengths[2], 15);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 10, &chk), -EBADMSG);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 1, &chk), 1); /* only 40 read */
	set_lengths(&f, four, 4);
	atomic_fetch_add(&f.ix.hdr->len_seq, 1);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 10, &chk), -EAGAIN);
	/* that writer died: the repair makes the list readable again, marked never checked (a lookup
	 * goes to the directory, which loads it again); a repair after no such death keeps the stamp */
	shm_l3ix_repair_locked(&f.ix);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 10, &chk), 4);
	ck_assert_uint_eq(chk, 0);
	set_lengths(&f, four, 4);
	shm_l3ix_repair_locked(&f.ix);
	ck_assert_int_eq(shm_l3ix_lengths(&f.ix, 100, out, 10, &chk), 4);
	ck_assert_uint_ne(chk, 0);
	fx_close(&f);
}
END_TEST

enum { R_ODD, R_FLAGS, R_POSNEG, R_FIRST0, R_FIRSTPAST, R_SHARED, R_SHORT, R_CASES };

/* At l3ix.wipe (an entry about to be emptied): entry @lo's key looked up, the answers counted. */
struct wipe_probe {
	struct fx *f;
	uint64_t lo;
	int calls, busy, found;
};

static void wipe_probe(const char *point, void *ctx)
{
	struct wipe_probe *p = ctx;
	if (strcmp(point, "l3ix.wipe"))
		return;
	struct shm_l3ix_snap s;
	int r = shm_l3ix_find(&p->f->ix, p->lo, 1, 2 * PT, NULL, 0, NULL, &s);
	p->calls++;
	p->busy += r == -EAGAIN;
	p->found += r == 1;
}

/* An entry being emptied — cleared (its pages already back on the free list), repaired, or
 * formatted anew by fsck — is busy to a reader then, never found with its pages free. */
START_TEST(an_entry_being_emptied_is_busy)
{
	struct fx f;
	fx_open(&f);
	struct wipe_probe p = { .f = &f, .lo = 3 };
	for (int c = 0; c < 3; c++) {
		put(&f, ent(3, 1, 2 * PT, SHM_L3IX_POS, 1), 1); /* set 3 way 0: entry 24 */
		put(&f, ent(4, 1, 5, SHM_L3IX_POS, 2), 0);
		ck_assert_int_eq(way_of(&f, 3, 1, 2 * PT), 0);
		p.calls = p.busy = p.found = 0;
		if (c == 2) {
			shm_l3ix_unlock(&f.ix);
			f.ix.hdr->magic ^= 1;
		}
		shm_sched_set(wipe_probe, &p);
		switch (c) {
		case 0: shm_l3ix_clear_locked(&f.ix, 24); break;
		case 1: f.ix.ent[24].flags |= 0x10; shm_l3ix_repair_locked(&f.ix); break; /* flags no writer sets */
		case 2: ck_assert_int_eq(shm_l3ix_reformat(f.a->shm), 0); break;
		}
		shm_sched_set(NULL, NULL);
		/* the reformat empties all 64 entries in order: the key is found while the 24 before
		 * its entry are emptied, busy while any way of its set is (8), then absent */
		ck_assert_msg(p.busy == (c == 2 ? 8 : 1), "case %d: busy %d times in %d calls", c, p.busy, p.calls);
		ck_assert_int_eq(p.calls, c == 2 ? 64 : 1);
		ck_assert_int_eq(p.found, c == 2 ? 24 : 0);
		ck_assert_int_eq(way_of(&f, 3, 1, 2 * PT), -1);
	}
	ck_assert_int_eq(shm_l3ix_view(f.a->shm, &f.ix), 0);
	ck_assert_int_eq(shm_l3ix_lock(&f.ix), 0);
	assert_pages_sound(&f);
	fx_close(&f);
}
END_TEST

/* Each kind of damage alone: the repair clears the damaged entry and only it, rebuilds the free
 * list from the pages no kept entry uses, ends completeness and finishes a torn lengths write. */
START_TEST(the_repair_clears_each_damaged_entry_alone)
{
	for (int c = 0; c < R_CASES; c++) {
		struct fx f;
		fx_open(&f);
		put(&f, ent(0, 1, 2 * PT, SHM_L3IX_POS, 1), 1);      /* set 0 way 0 */
		put(&f, ent(1, 1, PT + 5, SHM_L3IX_NEG, 2), 2);      /* set 1 way 0 */
		put(&f, ent(1, 2, 3, SHM_L3IX_POS | SHM_L3IX_DESC, 3), 3); /* set 1 way 1 */
		put(&f, ent(7 + 56, 1, 4 * PT, SHM_L3IX_POS, 4), 4); /* set 7 way 0 */
		struct shm_l3ix_entry *bad = &f.ix.ent[8], *good = &f.ix.ent[0];
		uint32_t np = f.ix.npages;
		switch (c) {
		case R_ODD: atomic_fetch_add(&bad->seq, 1); break;
		case R_FLAGS: bad->flags |= 0x10; break;
		case R_POSNEG: bad->flags |= SHM_L3IX_POS; break;
		case R_FIRST0: bad->first_page = 0; break;
		case R_FIRSTPAST: bad->first_page = np + 1; break;
		case R_SHARED: bad->first_page = f.ix.links[good->first_page - 1]; break; /* good's second page */
		case R_SHORT: f.ix.links[bad->first_page - 1] = 0; break;
		}
		atomic_store(&f.ix.hdr->complete_ns, 5);
		atomic_fetch_add(&f.ix.hdr->len_seq, 1);
		shm_l3ix_repair_locked(&f.ix);
		ck_assert_msg(bad->flags == 0, "case %d: the damaged entry kept", c);
		ck_assert_uint_eq(atomic_load(&bad->seq) % 2, 0);
		ck_assert_uint_eq(bad->key_lo, 0);
		ck_assert_uint_eq(atomic_load(&f.ix.hdr->complete_ns), 0);
		ck_assert_uint_eq(atomic_load(&f.ix.hdr->sync_full), 1);
		ck_assert_uint_eq(atomic_load(&f.ix.hdr->len_seq) % 2, 0);
		int eq;
		struct shm_l3ix_snap s;
		ck_assert_int_eq(find(&f, 0, 1, 2 * PT, 1, &eq, &s), 1);
		ck_assert_int_eq(eq, 1);
		ck_assert_int_eq(find(&f, 1, 2, 3, 3, &eq, &s), 1);
		ck_assert_int_eq(eq, 1);
		ck_assert_int_eq(find(&f, 7 + 56, 1, 4 * PT, 4, &eq, &s), 1);
		ck_assert_int_eq(eq, 1);
		ck_assert_int_eq(find(&f, 1, 1, PT + 5, 2, &eq, &s), 0);
		/* the free list: every page no kept entry uses, once (pages of a chain broken past its
		 * first page stay marked: at most the damaged entry's) */
		uint32_t kept = 2 + 1 + 4, lost = c == R_SHORT ? 1 : 0;
		ck_assert_msg(f.ix.hdr->free_pages == np - kept - lost, "case %d: %u free", c, f.ix.hdr->free_pages);
		uint8_t *seen = calloc(np, 1);
		ck_assert_uint_eq(free_walk(&f, seen), np - kept - lost);
		free(seen);
		/* the page order of the rebuilt list: ascending */
		uint32_t prev = 0;
		for (uint32_t pg = f.ix.hdr->free_head; pg; pg = f.ix.links[pg - 1]) {
			ck_assert_uint_gt(pg, prev);
			prev = pg;
		}
		fx_close(&f);
	}
	/* nothing damaged: nothing cleared, the free list the same pages */
	struct fx f;
	fx_open(&f);
	put(&f, ent(0, 1, 2 * PT, SHM_L3IX_POS, 1), 1);
	put(&f, ent(0, 2, 0, SHM_L3IX_NEG, 1), 1);
	put(&f, ent(0, 3, 10, SHM_L3IX_POS, 1), 0); /* tokens not stored: no chain to check */
	shm_l3ix_repair_locked(&f.ix);
	ck_assert_int_eq(way_of(&f, 0, 1, 2 * PT), 0);
	ck_assert_int_eq(way_of(&f, 0, 2, 0), 1);
	ck_assert_int_eq(way_of(&f, 0, 3, 10), 2);
	ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 2);
	assert_pages_sound(&f);
	fx_close(&f);
}
END_TEST

/* A writer killed inside a put (its entry odd, or written but not closed): the next locker
 * repairs; the entry is gone or whole, nothing else changed, every page accounted for. */
START_TEST(a_writer_killed_inside_a_put_is_repaired_by_the_next_locker)
{
	const char *points[] = { "l3ix.put.open", "l3ix.put.written" };
	for (int i = 0; i < 2; i++) {
		struct fx f;
		fx_open(&f);
		put(&f, ent(3, 1, 2 * PT, SHM_L3IX_POS, 1), 1);
		put(&f, ent(3, 2, PT, SHM_L3IX_POS, 2), 2);
		atomic_store(&f.ix.hdr->complete_ns, 5);
		shm_l3ix_unlock(&f.ix);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct sc_arena *ca;
			struct shm_l3ix cx;
			if (sc_arena_open(f.name, &ca) || shm_l3ix_view(ca->shm, &cx) || shm_l3ix_lock(&cx) ||
			    sc_fault_arm(points[i]))
				_exit(90);
			struct shm_l3ix_entry e = ent(3, 1, 2 * PT, SHM_L3IX_POS, 9);
			e.checked_ns = 1 << 30;
			toks(tk, 2 * PT, 9);
			uint32_t ev;
			(void)shm_l3ix_put_locked(&cx, &e, tk, &ev);
			_exit(92);
		}
		sc_test_wait_killed(pid);
		ck_assert_uint_eq(atomic_load(&f.ix.ent[3 * 8].seq) % 2, 1);
		/* what the dead writer left: at the open, the old entry whole (its pages still its own);
		 * written, the new one (its pages taken) */
		ck_assert_uint_eq(f.ix.ent[3 * 8].flags, SHM_L3IX_POS | SHM_L3IX_TOKENS);
		ck_assert_uint_eq(f.ix.ent[3 * 8].digest_lo, i ? 9 : 1);
		ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 3);
		ck_assert_int_eq(shm_l3ix_lock(&f.ix), 0);
		ck_assert_uint_eq(atomic_load(&f.ix.ent[3 * 8].seq) % 2, 0);
		ck_assert_uint_eq(f.ix.ent[3 * 8].flags, 0);
		ck_assert_uint_eq(atomic_load(&f.ix.hdr->complete_ns), 0);
		int eq;
		struct shm_l3ix_snap s;
		ck_assert_int_eq(find(&f, 3, 1, 2 * PT, 1, &eq, &s), 0);
		ck_assert_int_eq(find(&f, 3, 2, PT, 2, &eq, &s), 1);
		ck_assert_int_eq(eq, 1);
		assert_pages_sound(&f);
		ck_assert_uint_eq(f.ix.hdr->free_pages, f.ix.npages - 1);
		fx_close(&f);
	}
}
END_TEST

Suite *shm_l3ix_suite(void)
{
	Suite *s = suite_create("shm_l3ix");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, geometry_rounds_to_whole_sets_of_a_power_of_two);
	tcase_add_test(tc, the_largest_index_is_allowed);
	tcase_add_test(tc, a_region_without_token_pages_ends_at_its_entries);
	tcase_add_test(tc, the_view_refuses_each_wrong_header_word);
	tcase_add_test(tc, puts_and_lookups_by_the_whole_key);
	tcase_add_test(tc, a_refresh_replaces_only_what_is_not_newer);
	tcase_add_test(tc, a_full_set_evicts_by_clock_negatives_first);
	tcase_add_test(tc, clock_ends_while_readers_mark_every_way);
	tcase_add_test(tc, no_sets_refuses_puts_and_misses);
	tcase_add_test(tc, token_pages_are_taken_given_back_and_compared_exactly);
	tcase_add_test(tc, every_page_taken_and_given_back);
	tcase_add_test(tc, a_clear_frees_only_the_pages_its_entry_needs);
	tcase_add_test(tc, the_repair_reads_no_entry_past_the_table);
	tcase_add_test(tc, a_scribbled_free_list_is_forgotten_not_followed);
	tcase_add_test(tc, a_broken_chain_is_an_error_not_a_read_outside);
	tcase_add_test(tc, a_reformat_empties_every_entry);
	tcase_add_test(tc, an_empty_entry_is_no_entry);
	tcase_add_test(tc, a_lookup_reads_no_way_past_its_set);
	tcase_add_test(tc, an_entry_being_written_is_busy);
	tcase_add_test(tc, the_lengths_table);
	tcase_add_test(tc, an_entry_being_emptied_is_busy);
	tcase_add_test(tc, the_repair_clears_each_damaged_entry_alone);
	tcase_add_test(tc, a_writer_killed_inside_a_put_is_repaired_by_the_next_locker);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(shm_l3ix_suite)
