/*
 * shm/evring.h — the event ring: a bounded, lock-free, multi-producer ring of 64-byte records with
 * one consumer (the arena's listener), in SHM_REGION_EVENTS. Protocol at the top of shm/evring.c.
 *
 * Region layout:
 *   [ header (4 KiB): immutable line, head line, listener line, tail line, drop line, consumer
 *     lines | records: struct shm_evrec[nrec] ]
 *
 * The ring knows nothing of caching: a record is a type, a small word and five 64-bit words that
 * the layer above (lib/events.c) gives meaning to.
 */
#ifndef SC_SHM_EVRING_H
#define SC_SHM_EVRING_H

#include "region.h"

#define SHM_EVRING_MAGIC 0x31474e4952564553ull /* "SEVRING1" */
#define SHM_EVRING_HDR_BYTES 4096u
#define SHM_EVRING_MIN_RECORDS 4096u
#define SHM_EVRING_MAX_RECORDS 65536u
/* A producer gives up (the event is dropped and counted) after this many lost races for a slot. */
#define SHM_EVRING_SPINS 64u
/* A slot the head has passed and that stays uncommitted this long is skipped by the consumer (its
 * producer died between claim and commit, or was descheduled that long): counted as lost. */
#define SHM_EVRING_HOLE_NS (50ull * 1000 * 1000)

/* One record: one cache line. stamp is the slot's sequence word (shm/evring.c); the rest is
 * written by the producer that claimed the slot, between its claim and its commit. */
struct shm_evrec {
	_Atomic uint64_t stamp;
	uint32_t type;              /* meaning given by the layer above; 0 is never valid */
	uint32_t aux;
	uint64_t w[5];
	uint32_t check;             /* shm_evrec_check(): a torn or scribbled record fails it */
	uint32_t pad;
};
_Static_assert(sizeof(struct shm_evrec) == 64, "event record: one cache line");
_Static_assert(offsetof(struct shm_evrec, w) == 16, "event record layout");
_Static_assert(offsetof(struct shm_evrec, check) == 56, "event record layout");

struct shm_evring_hdr {
	/* line 0: written at format, never changed */
	uint64_t magic;
	uint32_t nrec;              /* power of two */
	uint32_t rec_bytes;         /* sizeof(struct shm_evrec) */
	uint64_t recs_off;          /* from the region start */
	uint8_t pad0[SHM_CACHELINE - 24];
	/* line 1: producers (CAS) */
	_Atomic uint64_t head;      /* next position to claim */
	uint8_t pad1[SHM_CACHELINE - 8];
	/* line 2: the listener's owner token (0: nobody listens). Producers read it on every change;
	 * it changes only when a listener comes or goes */
	_Atomic uint32_t listener;
	uint32_t listener_pid;      /* for people only */
	uint64_t listener_since_ns; /* CLOCK_REALTIME, for people only */
	uint8_t pad2[SHM_CACHELINE - 16];
	/* line 3: the consumer */
	_Atomic uint64_t tail;      /* next position to consume */
	uint8_t pad3[SHM_CACHELINE - 8];
	/* line 4: producers that found the ring full (fetch_add, release) */
	_Atomic uint64_t dropped;
	uint8_t pad4[SHM_CACHELINE - 8];
	/* line 5: the consumer's own counters and the state it keeps across listeners */
	_Atomic uint64_t lost;      /* slots skipped (never committed) or records that failed their check */
	_Atomic uint64_t consumed;
	_Atomic uint64_t resets;    /* times a consumer found the ring corrupted and reset it */
	_Atomic uint64_t user_seq;  /* kept for the layer above: the listener's next batch number */
	uint8_t pad5[SHM_CACHELINE - 32];
};
_Static_assert(offsetof(struct shm_evring_hdr, head) == 64, "event ring header layout");
_Static_assert(offsetof(struct shm_evring_hdr, listener) == 128, "event ring header layout");
_Static_assert(offsetof(struct shm_evring_hdr, tail) == 192, "event ring header layout");
_Static_assert(offsetof(struct shm_evring_hdr, dropped) == 256, "event ring header layout");
_Static_assert(offsetof(struct shm_evring_hdr, lost) == 320, "event ring header layout");
_Static_assert(sizeof(struct shm_evring_hdr) == 384, "event ring header layout");
_Static_assert(sizeof(struct shm_evring_hdr) <= SHM_EVRING_HDR_BYTES, "event ring header fits");

/* A validated, process-local view of the region. */
struct shm_evring {
	struct shm_evring_hdr *hdr;
	struct shm_evrec *rec;
	uint32_t nrec, mask;
};

/* Records the plan gives an arena with @index_entries L2 entries (a power of two). */
uint32_t shm_evring_records(uint32_t index_entries);
/* Bytes the region needs for @nrec records. */
uint64_t shm_evring_bytes(uint32_t nrec);
/* Format the region at creation (every slot free for its first lap). */
int shm_evring_format(struct shm_arena *a);
/* Validate the region's header and fill @r. 0 or -EBADMSG. */
int shm_evring_view(struct shm_arena *a, struct shm_evring *r);

/* The check word of a record for position @pos. */
uint32_t shm_evrec_check(const struct shm_evrec *r, uint64_t pos);

/* ---- producers (any process) ---- */
/* Append one record (its stamp and check are set here). 0, or -ENOSPC (full, or the slot race was
 * lost SHM_EVRING_SPINS times: dropped and counted in hdr->dropped). Never blocks. */
int shm_evring_append(const struct shm_evring *r, uint32_t type, uint32_t aux, const uint64_t w[5]);

/* ---- the listener role ---- */
/* Take the listener role for @token: from nobody, or from a holder @alive says is dead (it is
 * called with the holder's token, which may be @token itself). 0, -EBUSY (a live holder, @token's
 * own holder included), -EBADMSG. */
int shm_evring_listen(const struct shm_evring *r, uint32_t token, int (*alive)(void *ctx, uint32_t token), void *ctx);
/* Give the role up (only if @token holds it). */
void shm_evring_unlisten(const struct shm_evring *r, uint32_t token);

/* ---- the consumer (the listener) ---- */
/* The consumer's memory of a hole it is waiting on (process-local). */
struct shm_evring_cursor {
	uint64_t hole_pos;          /* position of the uncommitted slot seen at the tail */
	uint64_t hole_since_ns;     /* when it was first seen (0: no hole being timed) */
};
/*
 * Take up to @max committed records from the tail into @out (copies; stamps cleared), in ring
 * order, freeing their slots. Skips a slot that stayed uncommitted SHM_EVRING_HOLE_NS after the
 * head passed it, and a record that fails its check: each adds 1 to *@lost (and hdr->lost).
 * @now_ns: CLOCK_MONOTONIC. Returns the count, or -EBADMSG (head and tail disagree, a stamp no
 * protocol step writes): the ring is corrupted, nothing was taken; shm_evring_reset repairs it.
 */
int shm_evring_take(const struct shm_evring *r, struct shm_evring_cursor *c, struct shm_evrec *out, unsigned max,
		    uint64_t now_ns, uint64_t *lost);
/* Make the ring empty at the current head (consumer only): tail = head, every slot free for its
 * next lap. Producers may append meanwhile; what they wrote into a slot being reset is lost
 * (the consumer resynchronises after a reset). */
void shm_evring_reset(const struct shm_evring *r);

/* fsck: 0 the ring is consistent (header as planned, positions and every slot's stamp possible),
 * 1 it is not (with @repair: the header rewritten from the plan, then reset), -EBADMSG the region
 * is too small for the plan. Without @repair, safe while producers and a listener use the ring (a
 * pass that shows a take in progress is taken again, up to 32 ms: shm/evring.c); the repair's
 * reset is the consumer's operation (run it with nobody listening, or the listener is told). */
int shm_evring_check(struct shm_arena *a, int repair);

#endif
