/* lib/l3/dirindex.h — the directory's prefix index: lengths, lookups, the directory probe, listing, verification, dropping a prefix entry (lib/l3/dirindex.c). */
#ifndef SC_LIB_L3_DIRINDEX_H
#define SC_LIB_L3_DIRINDEX_H

#include "types.h"

/* What a directory probe saw at each length it probed (to refresh the arena's location index). */
enum { L3_PROBE_SKIPPED = 0, L3_PROBE_ABSENT, L3_PROBE_FOUND, L3_PROBE_COLLISION, L3_PROBE_UNVERIFIABLE };
#define L3_LOG_LENGTHS SHM_L3IX_MAX_LENGTHS
struct l3_probe_log {
	uint32_t n, found;                 /* lengths probed (ascending); index of the found one */
	uint32_t lens[L3_MAX_PROBES];
	uint8_t state[L3_MAX_PROBES];
	struct sc_digest l3key[L3_MAX_PROBES];
	uint32_t nall;                     /* the directory's lengths (the longest L3_LOG_LENGTHS) */
	int64_t all_mtime_ns;
	uint32_t all[L3_LOG_LENGTHS];
};
/* The directory's token lengths (the longest @max, ascending; reloaded when they changed, or
 * @force): the count, or a negative errno. */
int l3_lengths_snapshot(struct sc_l3 *l3, uint32_t *out, uint32_t max, int64_t *mtime_ns, int force);
/* The directory probe (what sc_l3_locate_longest did before the location index); @log optional.
 * *@bad (may be NULL): when nothing was found (0), the length of the longest matching prefix entry
 * that named an object that failed verification (now, or a quarantined one), else 0; that entry
 * is dropped, so restore reports it once instead of the shorter prefix. */
int l3_locate_dir(struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n, struct sc_location *loc,
		  struct l3_probe_log *log, uint32_t *bad);

/* Drop the prefix entry @key if it still names @lo/@hi. */
void l3_drop_prefix(struct sc_l3 *l3, uint64_t key_lo, uint64_t key_hi, uint64_t lo, uint64_t hi);

#endif
