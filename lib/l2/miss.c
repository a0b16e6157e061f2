/*
 * lib/l2/miss.c — why a lookup missed. Whatever makes a key leave L2 or refuses it notes why in
 * the departure table (shm/evq.c: fingerprint -> reason, detail; bounded, oldest forgotten first):
 * eviction under pressure or for the budget (lib/l2/evict.c), removal and invalidation
 * (lib/l2/admin.c: explicit, stale mirror, quarantine, an L3 object gone), a refused admission
 * and its reason (lib/l2/admit.c), a fill the promotion policy did not promote (lib/restore.c).
 * Storing the key again forgets the note. A lookup that finds nothing reads the note without a
 * lock (relaxed loads: a torn read misclassifies that one miss, nothing else) and counts the miss
 * under its reason; with no note, the key was never stored (or its note was forgotten).
 *
 * Restores that return no state are classified by the restore path itself (identity, quarantine,
 * deadline, busy), or, when nothing was located at all, by the notes of the prefix hashes the
 * location index dropped when their L3 objects went (lib/l3/locindex.c): "evicted by the
 * janitor" rather than "never stored".
 *
 * Counting follows the hit and miss counters (lib/l2/stage.c): L2 misses accumulate in the stage
 * handle and are added to the arena's lines with them (the read path writes no shared line);
 * restore misses are rarer and slower, and are added at once.
 */
#include <errno.h>
#include <string.h>

#include "miss.h"
#include "stage.h"
#include "../probes.h"

const char *sc_miss_reason_name(int reason)
{
	static const char *const names[SC_MISS_COUNT] = {
		[SC_MISS_NEVER_STORED] = "never_stored",       [SC_MISS_EVICTED_PRESSURE] = "evicted_pressure",
		[SC_MISS_EVICTED_BUDGET] = "evicted_budget",   [SC_MISS_EVICTED_JANITOR] = "evicted_janitor",
		[SC_MISS_REFUSED] = "refused",                 [SC_MISS_NOT_PROMOTED] = "not_promoted",
		[SC_MISS_REMOVED] = "removed",                 [SC_MISS_IDENTITY] = "identity",
		[SC_MISS_QUARANTINED] = "quarantined",         [SC_MISS_DEADLINE] = "deadline",
		[SC_MISS_COLLISION] = "collision",             [SC_MISS_CORRUPT] = "corrupt",
		[SC_MISS_BUSY] = "busy",
	};
	return reason >= 0 && reason < SC_MISS_COUNT ? names[reason] : "?";
}

const char *sc_deadline_detail_name(int detail)
{
	static const char *const names[SC_DEADLINE_COUNT] = {
		[SC_DEADLINE_PREDICTED] = "predicted", [SC_DEADLINE_PAST] = "past",
		[SC_DEADLINE_ABANDONED] = "abandoned", [SC_DEADLINE_WAITED] = "waited",
	};
	return detail >= 0 && detail < SC_DEADLINE_COUNT ? names[detail] : "?";
}

/* The departure table stores reason + 1 (0 is an empty slot). */
void l2_depart_note(struct sc_arena *a, uint64_t fp, int reason, int detail)
{
	if (reason < 0 || reason >= SC_MISS_COUNT || l2_ready(a))
		return;
	struct shm_evq *q = l2_q(a);
	if (shm_evq_lock(q))
		return; /* a lost note only makes a later miss "never stored" */
	shm_evq_depart_note_locked(q, fp, (uint32_t)reason + 1, (uint32_t)detail);
	shm_evq_unlock(q);
}

int l2_depart_reason(struct sc_arena *a, uint64_t fp, uint32_t *detail)
{
	*detail = 0;
	if (!a->l2_ready)
		return SC_MISS_NEVER_STORED;
	uint64_t w = shm_evq_depart_find(l2_q(a), fp);
	uint32_t r = SHM_EVQ_DEPART_REASON(w);
	if (!r || r > SC_MISS_COUNT)
		return SC_MISS_NEVER_STORED;
	*detail = SHM_EVQ_DEPART_DETAIL(w);
	return (int)r - 1;
}

void l2_count_l2_miss(struct sc_stage *st, int reason, uint32_t detail)
{
	if (reason < 0 || reason >= SC_MISS_COUNT)
		reason = SC_MISS_CORRUPT;
	st->local_miss_by[reason]++;
	if (reason == SC_MISS_REFUSED) /* an unknown refusal is "other", as l2_refuse counts it */
		st->local_refused_by[detail < L2_REFUSE_SLOTS ? detail : SC_L2_REFUSE_OTHER]++;
	uint64_t sid = st->id, lvl = 0, why = (uint64_t)reason, det = detail;
	SC_PROBE(miss_reason, sid, lvl, why, det);
}

void l2_count_restore_miss(struct sc_arena *a, uint64_t stage_id, int reason, uint32_t detail)
{
	if (reason < 0 || reason >= SC_MISS_COUNT)
		return;
	struct l2_misses *g = &l2_stats_region(a)->misses_global, *s = l2_misses_of(a, stage_id);
	atomic_fetch_add_explicit(&g->restore[reason], 1, memory_order_relaxed);
	if (s)
		atomic_fetch_add_explicit(&s->restore[reason], 1, memory_order_relaxed);
	if (reason == SC_MISS_DEADLINE && detail < L2_DEADLINE_SLOTS) {
		atomic_fetch_add_explicit(&g->deadline[detail], 1, memory_order_relaxed);
		if (s)
			atomic_fetch_add_explicit(&s->deadline[detail], 1, memory_order_relaxed);
	}
	uint64_t sid = stage_id, lvl = 1, why = (uint64_t)reason, det = detail;
	SC_PROBE(miss_reason, sid, lvl, why, det);
}

int sc_miss_stats(struct sc_arena *a, uint64_t stage_id, struct sc_miss_stats *out)
{
	if (!a || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	int rc = l2_ready(a);
	if (rc)
		return rc;
	for (struct sc_stage *s = a->l2_stages; s; s = s->next)
		l2_flush(s);
	struct l2_misses *m = &l2_stats_region(a)->misses_global;
	if (stage_id && !(m = l2_misses_of(a, stage_id)))
		return -ENOENT;
	for (unsigned i = 0; i < L2_MISS_SLOTS; i++) {
		out->l2[i] = atomic_load_explicit(&m->l2[i], memory_order_relaxed);
		out->restore[i] = atomic_load_explicit(&m->restore[i], memory_order_relaxed);
	}
	for (unsigned i = 0; i < L2_REFUSE_SLOTS; i++)
		out->l2_refused[i] = atomic_load_explicit(&m->refused[i], memory_order_relaxed);
	for (unsigned i = 0; i < L2_DEADLINE_SLOTS; i++)
		out->deadline[i] = atomic_load_explicit(&m->deadline[i], memory_order_relaxed);
	return 0;
}
