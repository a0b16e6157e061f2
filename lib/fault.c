/* lib/fault.c — the test build's hooks (lib/stagecache_test.h); shm/fault.c does the work.
 * Compiled only into the test build: the product library has none of these symbols. */
#ifdef SC_TEST_HOOKS
#include "stagecache_test.h"
#include "../shm/fault.h"
#include "internal.h"

int sc_fault_arm(const char *spec)
{
	return shm_fault_arm(spec);
}

/* Every shm_fault_point() name in the tree; tests/check_fsck.c keeps this list complete. */
static const char *const points[] = {
	"heap.alloc.unlinked", "heap.alloc.align", "heap.alloc.split", "heap.alloc.done",
	"heap.free.marked",    "heap.free.merge",  "l2.admit.busy",    "l2.admit.popped",
	"l2.admit.tagged",     "l2.admit.copied",  "l2.admit.linked",  "l2.evict.unlinked",
	"l2.remove.unlinked",  "l2.repair.rebuilt", "l2.index.replaced", "l2.index.unlinked",
	"l2.reclaim.freeing",  "l2.reclaim.freed", "l3.put.before_rename", "fill.after_read",
	"ring.publish",        "readers.clean.half", "l3ix.put.open",  "l3ix.put.written",
	"l2.admit.queued",     "evq.push.linking", "evq.remove.unlinking", "evq.rebuild.cleared",
	"seg.hold.partial",    "seg.release.dropped", "seg.admit.held", "l3seg.put.segments", "seg.free.data",
	"events.append.claimed", "l3.put.created",  "l3.put.written",   "l3.put.after_rename", "l3.recon.judged",
	"l3.putmany.written",  "l3.putmany.synced", "l3.putmany.object_placed", "l3.putmany.placed",
	"l2.index.retire.stamped", "l2.repair.stamped", "heap.chain", NULL,
};

const char *const *sc_fault_points(void)
{
	return points;
}

void sc_sched_set(sc_sched_fn fn, void *ctx)
{
	shm_sched_set(fn, ctx);
}

/* Every shm_sched_point() name in the tree; tests/check_interleave.c keeps this list complete. */
static const char *const sched_points[] = {
	"arena.create.locked",   "readers.claim.locked",   "readers.reap.locked", "readers.clean.inc",
	"mutex.lock.wait",       "mutex.lock.acquired",    "heap.free.locked",    "l2.get.found",
	"l2.index.published",    "l2.index.unlinked",      "l2.reclaim.leases_read", "ring.claim.owner_dead",
	"ring.reap.owner_dead",  "ring.consumer.holder_dead", "fill.claim.found", "obs.locked",
	"l3ix.refresh.read",     "l3ix.sync.start",        "restore.fill",        "l2.evict.chosen",
	"l2.frag.window",        "l2.frag.alloc",          "restore.promote.outcome", "l3ix.sync.listed",
	"seg.admit.planned",     "l3seg.put.reused",       "l3seg.sweep.chosen",  "l3.fill.submitted",
	"restore.deadline.checked", "restore.abandoned",   "l2.reclaim.epochs_read", "fsck.pass.done",
	"l3ix.tokens.compared",  "l3.victims.checked",    "l3.put.there",        "readers.claim.retry",
	"heap.repair.locked",    "events.append.try",   "events.check.tail_read",
	"events.append.writing", "l3ix.wipe",           "l3ix.clock.cleared",  "arena.create.published",
	"l2.stage.claim",        "evq.depart.noting",     "arena.open.wait", "l2.admit.waiting",
	"l2.commit.popped",      "l2.frag.done",          "l3seg.fill.manifest_again",
	NULL,
};

const char *const *sc_sched_points(void)
{
	return sched_points;
}

void sc_test_set_key_mask(uint64_t lo_mask, uint64_t hi_mask)
{
	sc_key_mask_lo_ = lo_mask;
	sc_key_mask_hi_ = hi_mask;
}
#endif
