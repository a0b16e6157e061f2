/*
 * shm/evq.h — the eviction queues of the L2 tier: two FIFO lists threaded through per-entry
 * nodes (one node per L2 index entry, same index) and a ghost set of recently evicted keys, all
 * in SHM_REGION_POLICY under one writer mutex, and a table of departures (why a key left or was
 * refused) that misses are classified by. Mechanism only: which list an entry joins, when it moves
 * and what is evicted is the policy's (lib/l2/evict.c, benefit-weighted S3-FIFO). Protocol at the
 * top of shm/evq.c.
 *
 * Region layout (SHM_REGION_POLICY):
 *   [ header (4 KiB) | nodes: struct shm_evq_node[nodes] | ghost: struct shm_evq_ghost[slots]
 *     | departures: struct shm_evq_depart[slots] ]     slots = 2^ceil(log2(nodes)), at least 64
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

/* Largest credit a node carries (6 bits' worth: passes the policy may grant an unhit entry), and
 * the flag saying the policy has weighed the entry already (so an entry is granted credit once
 * per stay unless a hit renews it). */
#define SHM_EVQ_CREDIT_MAX 63u
#define SHM_EVQ_CREDIT_GRANTED 0x100u
#define SHM_EVQ_CREDIT(c) ((c) & ~SHM_EVQ_CREDIT_GRANTED)
/* Costs are clamped to this (2^50 ns: 13 days of compute for one prefix), so that density and
 * ratio arithmetic never overflows 128 bits. */
#define SHM_EVQ_COST_MAX (1ull << 50)
/* Densities are fixed point: cost (ns) per byte, in units of 2^-SHM_EVQ_DENS_SHIFT ns. */
#define SHM_EVQ_DENS_SHIFT 16

/*
 * One node per index entry: written only under the mutex. The first four words are the list
 * (prev, next, the membership record q, seq) and what it charges (bytes); the benefit fields
 * (cost, dens, credit) are the policy's per-entry state: a node's dens is always
 * shm_evq_density(cost, bytes) (fsck checks it, repair recomputes it), credit at most
 * SHM_EVQ_CREDIT_MAX (plus the SHM_EVQ_CREDIT_GRANTED flag).
 */
struct shm_evq_node {
	uint32_t prev;               /* idx+1 of the next older node of the list, 0: this is the tail */
	uint32_t next;               /* idx+1 of the next newer node, 0: this is the head */
	uint32_t q;                  /* SHM_EVQ_* holding it; the membership record repair trusts */
	uint32_t credit;             /* unhit passes the policy still grants it (lib/l2/evict.c) */
	uint64_t bytes;              /* bytes charged to the list while queued */
	uint64_t seq;                /* when it was (re)queued: order of the list, for repair */
	uint64_t cost;               /* compute a hit on it saves, ns (0: unknown), <= SHM_EVQ_COST_MAX */
	uint64_t dens;               /* shm_evq_density(cost, bytes): 0 when the cost is unknown */
};
_Static_assert(sizeof(struct shm_evq_node) == 48, "evq node layout");
_Static_assert(offsetof(struct shm_evq_node, bytes) == 16, "evq node layout");
_Static_assert(offsetof(struct shm_evq_node, cost) == 32, "evq node layout");

/* The benefit density of @cost ns over @bytes: (cost << SHM_EVQ_DENS_SHIFT) / bytes, at least 1
 * when the cost is known, saturated (never overflows: cost is clamped, the product is 128-bit). */
static inline uint64_t shm_evq_density(uint64_t cost, uint64_t bytes)
{
	if (!cost)
		return 0;
	if (cost > SHM_EVQ_COST_MAX)
		cost = SHM_EVQ_COST_MAX;
	unsigned __int128 d = ((unsigned __int128)cost << SHM_EVQ_DENS_SHIFT) / (bytes ? bytes : 1);
	return d > (UINT64_MAX >> 1) ? (UINT64_MAX >> 1) : d ? (uint64_t)d : 1;
}

/* One ghost slot: a key's fingerprint and the ghost clock after it went in (fp 0: empty). */
struct shm_evq_ghost {
	uint64_t fp;
	uint64_t clock;
};
_Static_assert(sizeof(struct shm_evq_ghost) == 16, "evq ghost layout");

/*
 * One departure slot: why a key (an L2 key, or a stage-independent prefix hash for the L3 tier)
 * left or was refused. `word` = seq << 16 | detail << 8 | reason (reason 0: empty). Written under
 * the mutex with relaxed atomic stores; read by misses without the lock (relaxed atomic loads): a
 * torn pair only misclassifies one miss (statistics), never anything else.
 */
struct shm_evq_depart {
	uint64_t fp;                 /* the key's fingerprint (0: empty) */
	uint64_t word;
};
_Static_assert(sizeof(struct shm_evq_depart) == 16, "evq departure layout");
#define SHM_EVQ_DEPART_REASON(w) ((uint32_t)((w) & 0xffu))
#define SHM_EVQ_DEPART_DETAIL(w) ((uint32_t)(((w) >> 8) & 0xffu))

enum { SHM_EVQ_OK = 0, SHM_EVQ_REBUILD = 1 };

struct shm_evq_hdr {
	/* identity: written at format, never changed */
	uint64_t magic;
	uint32_t nodes;              /* == the index's entries */
	uint32_t ghost_slots;        /* a power of two, multiple of SHM_EVQ_GHOST_WAYS (departures: as many) */
	uint64_t nodes_off, ghost_off; /* from the region start */
	uint64_t depart_off;         /* from the region start */
	uint8_t pad0[24];
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
	/* protected by mu: the benefit policy (lib/l2/evict.c). evict_dens is a hint (any value is
	 * safe: it only scales credits), so a rebuild keeps it */
	uint64_t evict_dens;         /* moving average of the densities of evicted entries (0: none yet) */
	uint64_t credit_kept;        /* unhit entries kept one more pass for their credit */
	uint64_t benefit_moves;      /* small -> main moves earned by benefit rather than two hits */
	uint64_t low_benefit;        /* newcomers refused for low benefit (lib/l2/evict.c) */
	uint64_t depart_seq;         /* departures noted (the age of a departure slot) */
	uint8_t pad3[24];
};
_Static_assert(offsetof(struct shm_evq_hdr, mu) == 64, "evq header layout");
_Static_assert(offsetof(struct shm_evq_hdr, head) == 128, "evq header layout");
_Static_assert(offsetof(struct shm_evq_hdr, search_mu) == 240, "evq header layout");
_Static_assert(offsetof(struct shm_evq_hdr, evict_dens) == 256, "evq header layout");
_Static_assert(sizeof(struct shm_evq_hdr) == 320, "evq header layout");
_Static_assert(sizeof(struct shm_evq_hdr) <= SHM_EVQ_HDR_BYTES, "evq header fits");

/* A validated, process-local view of the region. */
struct shm_evq {
	struct shm_arena *a;
	struct shm_evq_hdr *hdr;
	struct shm_evq_node *node;
	struct shm_evq_ghost *ghost;
	struct shm_evq_depart *depart;
	uint32_t nodes, ghost_mask;
};

/* Bytes the region needs for @nodes nodes (shm/layout.c). */
uint64_t shm_evq_bytes(uint32_t nodes);
/* Format at creation (empty lists, empty ghost, the mutex). */
int shm_evq_format(struct shm_arena *a);
/* Validate the region against the arena header and fill @q. 0 or -EBADMSG. */
int shm_evq_view(struct shm_arena *a, struct shm_evq *q);

/* Take the mutex; when the last holder died (or left the lists inconsistent) rebuild the lists
 * from the nodes first. 0, -errno of shm_mutex_lock (-EBADMSG, -ECHILD), or -ENOMEM when the
 * rebuild had no memory (the mutex is released, the rebuild left to the next locker). May block. */
int shm_evq_lock(struct shm_evq *q);
void shm_evq_unlock(struct shm_evq *q);

/* ---- with the mutex held ---- */
/* Put node @idx at the head (newest end) of list @which, first taking it off any list. When the
 * list's head lies and the rebuild has no memory, only the node's record is written (the next
 * lock's rebuild links it). */
void shm_evq_push_locked(struct shm_evq *q, uint32_t idx, uint32_t which, uint64_t bytes);
/* Set node @idx's compute cost (ns, 0: unknown; clamped to SHM_EVQ_COST_MAX), its density (from
 * the bytes it is charged) and its credit (clamped). A push keeps them (recomputing dens). */
void shm_evq_set_cost_locked(struct shm_evq *q, uint32_t idx, uint64_t cost, uint32_t credit);
/* Take node @idx off its list (nothing when it is on none). */
void shm_evq_remove_locked(struct shm_evq *q, uint32_t idx);
/* The oldest node of list @which: idx+1, or 0 when the list is empty. A corrupted list is
 * rebuilt first (so a bad link never escapes to the caller); 0 as well when two rebuilds had no
 * memory. */
uint32_t shm_evq_tail_locked(struct shm_evq *q, uint32_t which);
/* The node one step newer than @idx on its list: idx+1, or 0 at the head. */
uint32_t shm_evq_newer_locked(struct shm_evq *q, uint32_t idx);
/* Ghost: remember @fp (nonzero) as evicted, charging @bytes to the ghost clock. */
void shm_evq_ghost_put_locked(struct shm_evq *q, uint64_t fp, uint64_t bytes);
/* Start loading the lines an admission of fingerprint @fp will touch (ghost and departure sets),
 * without the mutex: a hint, no load's value is used. */
void shm_evq_prefetch(const struct shm_evq *q, uint64_t fp);
/* Ghost: forget @fp (every slot holding it); 1 if it was put within the last @window bytes of
 * ghost insertions, else 0. */
int shm_evq_ghost_take_locked(struct shm_evq *q, uint64_t fp, uint64_t window);
/* Ghost: was some copy of @fp put within the last @window bytes (not forgetting it)? */
int shm_evq_ghost_has_locked(struct shm_evq *q, uint64_t fp, uint64_t window);

/* Departures: note why the key of fingerprint @fp (nonzero) left or was refused (@reason 1..255,
 * @detail 0..255); a full set forgets its oldest slot. */
void shm_evq_depart_note_locked(struct shm_evq *q, uint64_t fp, uint32_t reason, uint32_t detail);
/* Forget @fp's departure (it is stored again). */
void shm_evq_depart_forget_locked(struct shm_evq *q, uint64_t fp);
/* Without the mutex (a miss): the departure word of @fp (0: none). Relaxed loads: may be stale. */
uint64_t shm_evq_depart_find(const struct shm_evq *q, uint64_t fp);

/* Rebuild the lists (order by seq), counts and bytes from the nodes' membership records. Needs
 * O(nodes) time and O(queued) memory; without memory it leaves state REBUILD for the next
 * locker and returns -ENOMEM. */
int shm_evq_rebuild_locked(struct shm_evq *q);
/* Check the lists against the nodes (fsck): 0, or -EBADMSG with a reason in @why. */
int shm_evq_check_locked(struct shm_evq *q, const char **why);

#endif
