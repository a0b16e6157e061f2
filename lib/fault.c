/* lib/fault.c — the public face of fault injection (shm/fault.c does the work). */
#include "stagecache.h"
#include "../shm/fault.h"

int sc_fault_arm(const char *spec)
{
	return shm_fault_arm(spec);
}

/* Every shm_fault_point() name in the tree; tests/check_fault.c keeps this list complete. */
static const char *const points[] = {
	"heap.alloc.unlinked", "heap.alloc.align", "heap.alloc.split", "heap.alloc.done",
	"heap.free.marked",    "heap.free.merge",  "l2.admit.busy",    "l2.admit.popped",
	"l2.admit.tagged",     "l2.admit.copied",  "l2.admit.linked",  "l2.evict.unlinked",
	"l2.remove.unlinked",  "l2.repair.rebuilt", "l2.index.replaced", "l2.index.unlinked",
	"l2.reclaim.freeing",  "l2.reclaim.freed", "l3.put.before_rename", "fill.after_read",
	"ring.publish",        NULL,
};

const char *const *sc_fault_points(void)
{
	return points;
}
