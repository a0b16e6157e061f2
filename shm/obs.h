/*
 * shm/obs.h — the promotion observation table storage (the policy that uses it is lib/promote.c).
 * Protocol in shm/obs.c.
 */
#ifndef SC_SHM_OBS_H
#define SC_SHM_OBS_H

#include "region.h"
#include "util.h"
#include "mutex.h"

#define SHM_OBS_MAGIC 0x0a53424f50435453ull /* "STCPOBS\n" */
#define SHM_OBS_CLAIMS 256u
#define SHM_OBS_MAX_ENTRIES (1u << 20) /* the largest obs_entries an arena may ask for */
#define SHM_OBS_HDR_BYTES 256u
#define SHM_OBS_REFUSALS 8u /* reasons a promotion was not published (lib: enum sc_l2_refusal) */

/* USED: a live slot. TERMINAL: no further "promote" (attempted, refused for good, or oversize).
 * PUBLISHED (with TERMINAL): the last "promote" was published. LEFT (with PUBLISHED): that entry
 * has left L2 since (evicted or removed), so a later fill of it is promoted at once (returning). */
enum { SHM_OBS_USED = 1u, SHM_OBS_TERMINAL = 2u, SHM_OBS_PUBLISHED = 4u, SHM_OBS_LEFT = 8u };
#define SHM_OBS_FLAGS (SHM_OBS_USED | SHM_OBS_TERMINAL | SHM_OBS_PUBLISHED | SHM_OBS_LEFT)
#define SHM_OBS_RETURNING (SHM_OBS_TERMINAL | SHM_OBS_PUBLISHED | SHM_OBS_LEFT)

/* One observation: (stage, digest) -> first sight, hits, terminal. All fields under hdr->mu. */
struct shm_obs_entry {
	uint64_t stage_id;
	uint64_t digest_lo, digest_hi;
	uint64_t first_seen_ns;      /* policy clock (CLOCK_MONOTONIC unless injected) */
	uint32_t hits;
	uint32_t flags;              /* SHM_OBS_* ; 0: empty slot */
	uint64_t pad[3];
};
_Static_assert(sizeof(struct shm_obs_entry) == 64, "observation layout");
_Static_assert(offsetof(struct shm_obs_entry, flags) == 36, "observation layout");

/* One single-flight claim. owner == 0: free. All fields under hdr->mu. */
struct shm_obs_claim {
	uint64_t stage_id;
	uint64_t digest_lo, digest_hi;
	uint32_t owner;              /* the claimer's owner token (shm/readers.h): alive or not */
	uint32_t pid;                /* for people only, in the claimer's pid namespace */
	uint64_t claimed_ns;
	uint64_t pad[3];
};
_Static_assert(sizeof(struct shm_obs_claim) == 64, "claim layout");

struct shm_obs_hdr {
	uint64_t magic;              /* written once at format */
	uint32_t slots;              /* hash slots, a power of two >= 2 * capacity */
	uint32_t capacity;           /* observations kept at most (the arena's obs_entries) */
	uint32_t claims;             /* SHM_OBS_CLAIMS */
	uint32_t count;              /* live observations (under mu) */
	uint64_t considered, promoted, evicted, expired, repairs; /* under mu */
	struct shm_mutex mu;         /* guards everything below the header too (shm/mutex.h) */
	uint8_t pad1[64 - sizeof(struct shm_mutex)];
	/* under mu: what became of the "promote" decisions (lib/promote.c sc_promote_outcome) */
	uint64_t published;
	uint64_t refused[SHM_OBS_REFUSALS];
	uint64_t refused_low_benefit; /* refusals of the benefit policy (lib: SC_L2_REFUSE_LOW_BENEFIT) */
	uint8_t pad2[SHM_OBS_HDR_BYTES - 128 - 16 - 8 * SHM_OBS_REFUSALS];
};
_Static_assert(sizeof(struct shm_obs_hdr) == SHM_OBS_HDR_BYTES, "observation header layout");
_Static_assert(offsetof(struct shm_obs_hdr, mu) == 64, "mutex on its own line");
_Static_assert(offsetof(struct shm_obs_hdr, published) == 128, "observation header layout");

/* Bytes the observation region needs for @entries observations (shm/layout.c). */
uint64_t shm_obs_bytes(uint32_t entries);
/* Format the observation region at creation. */
int shm_obs_format(struct shm_arena *a);

/* The validated table, or NULL (-EBADMSG) when the header does not fit the region. */
struct shm_obs_hdr *shm_obs_table(struct shm_arena *a);
static inline struct shm_obs_entry *shm_obs_entries(struct shm_obs_hdr *h)
{
	return (struct shm_obs_entry *)(void *)((uint8_t *)h + SHM_OBS_HDR_BYTES);
}
static inline struct shm_obs_claim *shm_obs_claims(struct shm_obs_hdr *h)
{
	return (struct shm_obs_claim *)(void *)(shm_obs_entries(h) + h->slots);
}

/* Lock the table as @a's holder, repairing it if the last holder died. 0 or -EBADMSG. */
int shm_obs_lock(struct shm_arena *a, struct shm_obs_hdr *h);
void shm_obs_unlock(struct shm_arena *a, struct shm_obs_hdr *h);

/* Under the lock: the slot of (stage, digest), or NULL. */
struct shm_obs_entry *shm_obs_find_locked(struct shm_obs_hdr *h, uint64_t stage, uint64_t lo, uint64_t hi);
/* Under the lock: insert a fresh entry (caller ensured count < capacity and absence). */
struct shm_obs_entry *shm_obs_insert_locked(struct shm_obs_hdr *h, uint64_t stage, uint64_t lo, uint64_t hi);
/* Under the lock: remove the entry @e (backward-shift deletion keeps probe chains whole). */
void shm_obs_remove_locked(struct shm_obs_hdr *h, struct shm_obs_entry *e);

#endif
