/*
 * shm/l3ix.h — the L3 location index: prefix hash -> where the durable copy is, shared by every
 * process that binds an L3 directory to the arena. Mechanism only (what the entries mean, when
 * they are trusted and who refreshes them is lib/l3/locindex.c). Protocol at the top of shm/l3ix.c.
 *
 * Region layout (SHM_REGION_L3IX):
 *   [ header (4 KiB) | lengths (4 KiB) | directory scan state (4 KiB) |
 *     entries: struct shm_l3ix_entry[nsets * WAYS] | page links: u32[npages] |
 *     token pages: int32[npages][SHM_L3IX_PAGE_TOKENS] ]
 * The table is set-associative: a key lives in set (key_lo & (nsets - 1)), in any of its WAYS
 * entries, so a lookup reads at most WAYS entries (two cache lines of keys) and a full set evicts
 * one of its own entries. An entry's tokens are a chain of pages (page_next links them).
 */
#ifndef SC_SHM_L3IX_H
#define SC_SHM_L3IX_H

#include "region.h"
#include "util.h"
#include "mutex.h"

#define SHM_L3IX_MAGIC 0x3158495333435353ull /* "SSC3SIX1" */
#define SHM_L3IX_WAYS 8u
#define SHM_L3IX_PAGE_TOKENS 256u        /* one page: 1 KiB of token ids */
#define SHM_L3IX_PAGES_PER_ENTRY 4u      /* pool: room for 1024 tokens per entry on average */
#define SHM_L3IX_MAX_LENGTHS 1000u       /* token lengths of the directory kept in the arena */
#define SHM_L3IX_MIN_ENTRIES 64u
#define SHM_L3IX_MAX_ENTRIES (1u << 22)
#define SHM_L3IX_READ_TRIES 4            /* seqlock retries before a reader calls it a miss */
#define SHM_L3IX_HDR_BYTES 12288u        /* header, lengths, scan state */
#define SHM_L3IX_SUBDIRS 256u            /* DIR/prefix/<2 hex>/ */

/* Entry flags. */
#define SHM_L3IX_POS 0x1u      /* a prefix entry exists: the location fields are meaningful */
#define SHM_L3IX_NEG 0x2u      /* no prefix entry at this key (checked against the directory) */
#define SHM_L3IX_DESC 0x4u     /* the object carries a KV descriptor (read it from its header) */
#define SHM_L3IX_TOKENS 0x8u   /* the entry's token ids are stored (first_page) */

/*
 * One entry, 128 bytes. seq is a sequence lock: odd while the writer (holding the region's
 * mutex) changes the entry; everything but seq and used is written only then. used is a CLOCK
 * hint readers set (relaxed) and the evictor clears.
 */
struct shm_l3ix_entry {
	_Atomic uint32_t seq;
	_Atomic uint32_t used;
	uint32_t flags;              /* SHM_L3IX_*; 0: empty */
	uint32_t token_count;
	uint64_t key_lo, key_hi;     /* prefix hash P (arena-keyed; lib/key.c) */
	uint64_t l3key_lo, l3key_hi; /* the directory's prefix key (names the prefix entry's file) */
	uint64_t digest_lo, digest_hi;
	uint64_t sec_len[2];
	uint32_t kind;               /* enum sc_payload_kind */
	uint32_t first_page;         /* page idx + 1 of the token chain; 0: none */
	uint64_t checked_ns;         /* CLOCK_MONOTONIC: last confirmed against the directory */
	uint64_t dir_gen;            /* the header's dir_gen when confirmed */
	uint64_t pad[3];
};
_Static_assert(sizeof(struct shm_l3ix_entry) == 128, "l3ix entry layout");
_Static_assert(offsetof(struct shm_l3ix_entry, key_lo) == 16, "l3ix entry layout");
_Static_assert(offsetof(struct shm_l3ix_entry, digest_lo) == 48, "l3ix entry layout");
_Static_assert(offsetof(struct shm_l3ix_entry, checked_ns) == 88, "l3ix entry layout");

/* Counters (relaxed adds; statistics only). Order is the public struct's (lib/l3/locindex.c). */
enum shm_l3ix_counter {
	L3IX_HITS, L3IX_NEG_HITS, L3IX_MISSES, L3IX_FALLBACKS, L3IX_STALE, L3IX_REFRESHES, L3IX_INSERTS,
	L3IX_EVICTIONS, L3IX_DROPS, L3IX_FULL, L3IX_COLL_L2, L3IX_COLL_INDEX, L3IX_COLL_L3, L3IX_VANISHED,
	L3IX_FOREIGN, L3IX_NCOUNTERS = 24,
};

struct shm_l3ix_hdr {
	/* written at format, never changed */
	uint64_t magic;
	uint32_t nsets, npages;
	uint64_t entries_off, links_off, pages_off;  /* from the region start */
	uint8_t pad0[24];
	/* line 1: the writer lock and what it protects */
	struct shm_mutex mu;
	uint32_t free_pages;         /* pages on the free list */
	uint32_t free_head;          /* page idx + 1 */
	uint32_t hand;               /* page-pressure eviction hand (entry index) */
	uint64_t dir_dev, dir_ino;   /* the bound directory (0: none yet); set once, under mu */
	_Atomic uint64_t dir_gen;    /* bumped when entries must all be re-checked (release) */
	_Atomic uint64_t repl_seen;  /* the directory's re-put journal applied up to here, + 1 (0: never) */
	uint8_t pad1[8];
	/* line 2: the directory's token lengths, a sequence lock of their own (writers hold mu) */
	_Atomic uint32_t len_seq;
	uint32_t nlengths;
	_Atomic uint64_t len_checked_ns; /* CLOCK_MONOTONIC of the last load from the directory */
	uint64_t len_mtime_ns;       /* the lengths directory's mtime then */
	/* completeness: the index holds every prefix entry of the directory as of complete_ns
	 * (CLOCK_MONOTONIC; 0: not known to). Stored (release) by the scanner holding sync_mu; zeroed
	 * by any writer that evicts a positive entry, which also sets sync_full */
	_Atomic uint64_t complete_ns;
	struct shm_mutex sync_mu;    /* the directory scanner (lock order: sync_mu, then mu) */
	_Atomic uint32_t sync_full;  /* the next scan must look at every subdirectory */
	uint32_t pad2a;
	uint64_t scan_real_ns;       /* sync_mu: CLOCK_REALTIME when the last scan started */
	uint64_t scan_backoff_ns;    /* sync_mu: no full scan before (CLOCK_MONOTONIC) */
	/* lines 3..: counters */
	_Atomic uint64_t counters[L3IX_NCOUNTERS];
};
_Static_assert(offsetof(struct shm_l3ix_hdr, mu) == 64, "l3ix header layout");
_Static_assert(offsetof(struct shm_l3ix_hdr, len_seq) == 128, "l3ix header layout");
_Static_assert(offsetof(struct shm_l3ix_hdr, repl_seen) == 112, "l3ix header layout");
_Static_assert(offsetof(struct shm_l3ix_hdr, counters) == 192, "l3ix header layout");
_Static_assert(sizeof(struct shm_l3ix_hdr) <= 4096, "l3ix header fits its page");
_Static_assert(SHM_L3IX_MAX_LENGTHS * 4 <= 4096, "lengths fit their page");

/* Page 2 of the region: what the scanner (holding sync_mu) saw of each prefix subdirectory. */
struct shm_l3ix_scan {
	uint64_t sub_mtime_ns[SHM_L3IX_SUBDIRS]; /* CLOCK_REALTIME mtime at the last scan (0: never) */
};
_Static_assert(sizeof(struct shm_l3ix_scan) <= 4096, "scan state fits its page");

/* A validated, process-local view of the region. */
struct shm_l3ix {
	struct shm_arena *a;
	struct shm_l3ix_hdr *hdr;
	struct shm_l3ix_scan *scan;
	_Atomic uint32_t *lengths;   /* SHM_L3IX_MAX_LENGTHS, ascending, nlengths valid */
	struct shm_l3ix_entry *ent;
	uint32_t *links;             /* page_next: idx + 1, 0 end */
	int32_t *pages;
	uint32_t nsets, npages;
};

/* A reader's consistent copy of one entry (shm_l3ix_find). */
struct shm_l3ix_snap {
	struct shm_l3ix_entry e;     /* copied under the sequence lock */
	uint32_t idx;
	uint32_t seq;
};

/* Bytes the region needs for @entries entries (0: a header only, for the counters). */
uint64_t shm_l3ix_bytes(uint32_t entries);
/* Entries actually provided for a request of @entries (rounded up to whole sets). */
uint32_t shm_l3ix_entries(uint32_t entries);
/* Format the region of a new arena (its entries are zero already). */
int shm_l3ix_format(struct shm_arena *a);
/* Format a region that was in use (fsck, after its header was damaged): as shm_l3ix_format, and
 * every entry emptied under its sequence lock (a reader copying one sees it change), because every
 * token page is on the new free list. 0, or the error of the format. */
int shm_l3ix_reformat(struct shm_arena *a);
/* Validate the region (against the arena header's l3ix_entries) and fill @ix. 0 or -EBADMSG.
 * An arena created without an index has nsets 0: every lookup misses. */
int shm_l3ix_view(struct shm_arena *a, struct shm_l3ix *ix);

/* ---- lock-free readers ---- */
/*
 * The entry of @key_lo/@key_hi with @token_count tokens, copied consistently into @out. Returns 1
 * found, 0 not present, -EAGAIN (writers kept changing it: treat as a miss), -EBADMSG. When the
 * entry's flags meet @cmp_flags and it stores tokens, *@tokens_equal says whether they equal
 * @tokens[0..token_count) (compared inside the same sequence-lock section); else it is -1.
 */
int shm_l3ix_find(const struct shm_l3ix *ix, uint64_t key_lo, uint64_t key_hi, uint32_t token_count,
		  const int32_t *tokens, uint32_t cmp_flags, int *tokens_equal, struct shm_l3ix_snap *out);
/* Compare entry @snap's tokens again (it must still be the same write): 1, 0, -EAGAIN (it
 * changed since), -EBADMSG. */
int shm_l3ix_tokens_equal(const struct shm_l3ix *ix, const struct shm_l3ix_snap *snap, const int32_t *tokens);
/* The lengths ≤ @n, at most @max of the longest, ascending, into @out; *@checked_ns, *@mtime_ns.
 * Returns the count, or -EAGAIN (being rewritten: a miss). */
int shm_l3ix_lengths(const struct shm_l3ix *ix, uint32_t n, uint32_t *out, uint32_t max, uint64_t *checked_ns);

/* ---- writers: hold hdr->mu (shm_l3ix_lock) ---- */
/* 0, -EOWNERDEAD turned into a repair (returns 0 then), -EBADMSG, -ECHILD. */
int shm_l3ix_lock(struct shm_l3ix *ix);
void shm_l3ix_unlock(struct shm_l3ix *ix);
/* Insert or replace the entry of (key, token_count) with @e's fields (flags, l3key, digest,
 * sec_len, kind, checked_ns, dir_gen) and @tokens when not NULL and there are free pages for them
 * (else the entry stores none: SHM_L3IX_TOKENS tells). A full set evicts one of its entries
 * (CLOCK, negative entries first); evicting a positive one ends completeness. An existing entry
 * of the key confirmed later than @e is kept. Returns 0, or -ENOSPC (no index). */
int shm_l3ix_put_locked(struct shm_l3ix *ix, const struct shm_l3ix_entry *e, const int32_t *tokens, uint32_t *evicted);
/* Completeness is lost (an entry was evicted, or the directory changed in a way nobody recorded). */
void shm_l3ix_incomplete(struct shm_l3ix *ix);
/* Empty entry @idx (frees its pages). */
void shm_l3ix_clear_locked(struct shm_l3ix *ix, uint32_t idx);
/* Replace the lengths table. */
void shm_l3ix_set_lengths_locked(struct shm_l3ix *ix, const uint32_t *lens, uint32_t n, uint64_t checked_ns,
				 uint64_t mtime_ns);
/* Add one length (kept sorted; the table's checked time is not moved). */
void shm_l3ix_add_length_locked(struct shm_l3ix *ix, uint32_t len);
/* Rebuild the free page list from the entries (after a writer died holding the lock). */
void shm_l3ix_repair_locked(struct shm_l3ix *ix);

static inline void shm_l3ix_count(const struct shm_l3ix *ix, enum shm_l3ix_counter c, uint64_t v)
{
	atomic_fetch_add_explicit(&ix->hdr->counters[c], v, memory_order_relaxed);
}

#endif
