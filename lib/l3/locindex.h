/* lib/l3/locindex.h — the arena's location index (lib/l3/locindex.c over shm/l3ix.c). */
#ifndef SC_LIB_L3_LOCINDEX_H
#define SC_LIB_L3_LOCINDEX_H

#include "types.h"
#include "dirindex.h"

/* Bind @l3's directory to @a's index (first binder wins): 1 bound to us, 0 another directory's. */
int l3ix_bind(struct sc_arena *a, struct sc_l3 *l3);
/* Coherence hooks of writers attached to @a (before they return). */
void l3ix_on_put(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens,
		 const struct sc_location *loc);
void l3ix_on_objects_gone(struct sc_arena *a, const struct sc_digest *digests, size_t n);
/* The same, the dropped prefixes' departures saying @why (enum sc_miss_reason; the hook says
 * SC_MISS_EVICTED_JANITOR). */
void l3ix_objects_gone_why(struct sc_arena *a, const struct sc_digest *digests, size_t n, int why);
void l3ix_on_prefix_gone(struct sc_arena *a, struct sc_digest l3key);
/* What l3ix_locate found. */
struct l3ix_found {
	int from_index;                    /* out: 1 answered by the index (snap), 0 by the directory (loc) */
	uint32_t bad;                      /* out (directory, nothing found): see l3_locate_dir */
	int gone;                          /* out (nothing found): 0, or 1 + the reason (enum
					    * sc_miss_reason) a prefix of the tokens was dropped for: its
					    * object went from L3 (evicted, quarantined) */
	uint32_t len;                      /* out: the prefix length */
	struct sc_key pfx;                 /* out: its prefix hash P (the L2 key is l2_key_of(stage, P)) */
	struct shm_l3ix_snap snap;         /* out (from_index): the positive entry */
};
/*
 * The longest stored prefix of @tokens[0..n): through the index when it can answer (no system
 * call; *@loc untouched, see @f->snap), else by the directory probe (*@loc filled, what it saw
 * refreshes the index). @now: CLOCK_MONOTONIC ns the caller just read (0: read it here).
 * Returns the length (> 0), 0 nothing stored, or a negative errno.
 */
int l3ix_locate(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		uint64_t now, struct l3ix_found *f, struct sc_location *loc);
/* The full location of an index answer (reads the object's header). -ENOENT: the object vanished,
 * or its header was bad (quarantined); either way its index entries and L2 mirrors were dropped. */
int l3ix_complete(struct sc_arena *a, struct sc_l3 *l3, const struct l3ix_found *f, struct sc_location *loc);
/* Are the index answer's token ids (and namespace) the caller's? From the entry's pages, or its
 * prefix entry file when it keeps none. 1, 0 (a collision: counted), -EAGAIN (the entry or the
 * file changed, or the file is gone: ask the directory). */
int l3ix_entry_tokens_equal(struct sc_arena *a, struct sc_l3 *l3, const struct l3ix_found *f, const char *ns,
			    const int32_t *tokens);
/* An object vanished under a fill: drop its index entries and L2 mirrors. */
void l3ix_vanished(struct sc_arena *a, struct sc_digest d);
/* Every entry must be re-checked against the directory (its reconciliation changed things). */
void l3ix_invalidate_all(struct sc_arena *a);
/* sc_l3_locate_longest through the index: a complete location (descriptor read from the header). */
int l3ix_locate_full(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_location *loc);

#endif
