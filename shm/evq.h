/*
 * shm/evq.h — the eviction queues of the L2 tier: two FIFO lists threaded through per-entry
 * nodes (one node per L2 index entry, same index) and a ghost set of recently evicted keys, all
 * in SHM_REGION_POLICY under one writer mutex. Mechanism only: which list an entry joins, when
 * it moves and what is evicted is the policy's (lib/l2/evict.c, S3-FIFO). Protocol at the top of
 * shm/evq.c.
 *
 * Region layout (SHM_REGION_POLICY):
 *   [ header (4 KiB) | nodes: struct shm_evq_node[nodes] | ghost: struct shm_evq_ghost[ghost_slots] ]
 */
#ifndef SC_SHM_EVQ_H
#define SC_SHM_EVQ_H

#include "region.h"
#include "util.h"
#include "mutex.h"

#define SHM_EVQ_MAGIC 0x3151564543545353ull /* "SSTCEVQ1" */
#define SHM_EVQ_HDR_BYTES 4096u
#define SHM_EVQ_GHOST_WAYS 4u

/* The lists. A node's `q` says which one holds it (0: none). */
enum { SHM_EVQ_NONE = 0, SHM_EVQ_SMALL = 1, SHM_EVQ_MAIN = 2, SHM_EVQ_LISTS = 2 };

/* One node per index entry: written only under the mutex. */
struct shm_evq_node {
	uint32_t prev;               /* idx+1 of the next older node of the list, 0: this is the tail */
	uint32_t next;               /* idx+1 of the next newer node, 0: this is the head */
	uint32_t q;                  /* SHM_EVQ_* holding it; the membership record repair trusts */
	uint32_t pad;
	uint64_t bytes;              /* bytes charged to the list while queued */
	uint64_t seq;                /* when it was (re)queued: order of the list, for repair */
};
_Static_assert(sizeof(struct shm_evq_node) == 32, "evq node layout");

/* One ghost slot: a key's fingerprint and the ghost clock after it went in (fp 0: empty). */
struct shm_evq_ghost {
	uint64_t fp;
	uint64_t clock;
};
_Static_assert(sizeof(struct shm_evq_ghost) == 16, "evq ghost layout");

enum { SHM_EVQ_OK = 0, SHM_EVQ_REBUILD = 1 };

struct shm_evq_hdr {
	/* identity: written at format, never changed */
	uint64_t magic;
	uint32_t nodes;              /* == the index's entries */
	uint32_t ghost_slots;        /* a power of two, multiple of SHM_EVQ_GHOST_WAYS */
	uint64_t nodes_off, ghost_off; /* from the region start */
	uint8_t pad0[32];
	/* the writer lock, on its own line */
	struct shm_mutex mu;
	uint8_t pad1[56];
	/* protected by mu */
	uint32_t head[SHM_EVQ_LISTS];  /* idx+1 of the newest node of list 1, 2 (index q-1); 0: empty */
	uint32_t tail[SHM_EVQ_LISTS];  /* idx+1 of the oldest */
	uint32_t count[SHM_EVQ_LISTS];
	uint32_t state;              /* SHM_EVQ_OK, or REBUILD (persisted before a rebuild starts) */
	uint32_t has_evicted;        /* the policy evicted at least once (S3-FIFO's warm-up rule) */
	uint64_t bytes[SHM_EVQ_LISTS];
	uint64_t seq;                /* last seq given to a node */
	uint64_t ghost_clock;        /* bytes put into the ghost so far */
	uint64_t repairs;            /* rebuilds (after a holder died or an inconsistency) */
	/* policy counters (lib/l2/evict.c), totals since creation */
	uint64_t to_main, reinserted, ghost_hits, ghost_puts, skipped;
	/* serialises searches for room by address (lib/l2/evict.c): guards no state, so a dead
	 * holder leaves nothing to repair; taken before any shard lock */
	struct shm_mutex search_mu;
	uint8_t pad2[8];
};
_Static_assert(offsetof(struct shm_evq_hdr, mu) == 64, "evq header layout");
_Static_assert(offsetof(struct shm_evq_hdr, head) == 128, "evq header layout");
_Static_assert(offsetof(struct shm_evq_hdr, search_mu) == 240, "evq header layout");
_Static_assert(sizeof(struct shm_evq_hdr) == 256, "evq header layout");
_Static_assert(sizeof(struct shm_evq_hdr) <= SHM_EVQ_HDR_BYTES, "evq header fits");

/* A validated, process-local view of the region. */
struct shm_evq {
	struct shm_arena *a;
	struct shm_evq_hdr *hdr;
	struct shm_evq_node *node;
	struct shm_evq_ghost *ghost;
	uint32_t nodes, ghost_mask;
};

/* Bytes the region needs for @nodes nodes (shm/layout.c). */
uint64_t shm_evq_bytes(uint32_t nodes);
/* Format at creation (empty lists, empty ghost, the mutex). */
int shm_evq_format(struct shm_arena *a);
/* Validate the region against the arena header and fill @q. 0 or -EBADMSG. */
int shm_evq_view(struct shm_arena *a, struct shm_evq *q);

/* Take the mutex; when the last holder died (or left the lists inconsistent) rebuild the lists
 * from the nodes first. 0, or -errno of shm_mutex_lock (-EBADMSG, -ECHILD). May block. */
int shm_evq_lock(struct shm_evq *q);
void shm_evq_unlock(struct shm_evq *q);

/* ---- with the mutex held ---- */
/* Put node @idx at the head (newest end) of list @which, first taking it off any list. */
void shm_evq_push_locked(struct shm_evq *q, uint32_t idx, uint32_t which, uint64_t bytes);
/* Take node @idx off its list (nothing when it is on none). */
void shm_evq_remove_locked(struct shm_evq *q, uint32_t idx);
/* The oldest node of list @which: idx+1, or 0 when the list is empty. A corrupted list is
 * rebuilt first (so a bad link never escapes to the caller). */
uint32_t shm_evq_tail_locked(struct shm_evq *q, uint32_t which);
/* The node one step newer than @idx on its list: idx+1, or 0 at the head. */
uint32_t shm_evq_newer_locked(struct shm_evq *q, uint32_t idx);
/* Ghost: remember @fp (nonzero) as evicted, charging @bytes to the ghost clock. */
void shm_evq_ghost_put_locked(struct shm_evq *q, uint64_t fp, uint64_t bytes);
/* Ghost: was @fp put within the last @window bytes of ghost insertions? Then forget it and
 * return 1; else 0. */
int shm_evq_ghost_take_locked(struct shm_evq *q, uint64_t fp, uint64_t window);
/* Rebuild the lists (order by seq), counts and bytes from the nodes' membership records. Needs
 * O(nodes) time and O(queued) memory; without memory it leaves state REBUILD for the next
 * locker and returns -ENOMEM. */
int shm_evq_rebuild_locked(struct shm_evq *q);
/* Check the lists against the nodes (fsck): 0, or -EBADMSG with a reason in @why. */
int shm_evq_check_locked(struct shm_evq *q, const char **why);

#endif
