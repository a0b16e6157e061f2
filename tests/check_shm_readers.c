/*
 * tests/check_shm_readers.c — the reader table (shm/readers.c) on its own, through shm/readers.h on
 * a real arena: claim and release of slots, owner tokens, a full table, holders killed with
 * SIGKILL (their slot, epoch and lease area cleared by the reap or by the next claimer), epochs,
 * and hostile slot contents (scribbled states, epochs, incarnations; tokens that name nothing).
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../lib/l2/l2.h"
#include "../shm/arena.h"
#include "../shm/heap.h"
#include "../shm/readers.h"

#define SLOTS 4u

static struct sc_arena *readers_arena(const char **name)
{
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS };
	return sc_test_arena_opts("readers", &o, name);
}

static struct sc_arena *attach(const char *name)
{
	struct sc_arena *b = NULL;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	return b;
}

static uint32_t state_of(struct sc_arena *a, uint32_t i)
{
	return atomic_load(&shm_reader_slot(a->shm, i)->state);
}

static int ext_is_zero(struct sc_arena *a, uint32_t i)
{
	const uint8_t *x = shm_reader_slot(a->shm, i)->ext;
	for (size_t k = 0; k < SHM_READER_EXT_BYTES; k++)
		if (x[k])
			return 0;
	return 1;
}

/* At the reap's lock of a slot: how often, and whether @token is alive to @a there. */
struct in_reap {
	struct shm_arena *a;
	uint32_t token;
	int hits, alive;
};

static void on_reap_locked(const char *point, void *ctx)
{
	struct in_reap *r = ctx;
	if (strcmp(point, "readers.reap.locked"))
		return;
	r->hits++;
	if (r->a)
		r->alive = shm_token_alive(r->a, r->token);
}

/* At the cleaner's new incarnation: whether slot @slot's lock is held, as @fd sees it. */
struct lock_seen {
	int fd;
	uint32_t slot;
	int hits, held;
};

static void on_clean_inc(const char *point, void *ctx)
{
	struct lock_seen *l = ctx;
	if (strcmp(point, "readers.clean.inc"))
		return;
	l->hits++;
	l->held = shm_ofd_held(l->fd, SHM_LOCK_SLOT(l->slot));
}

START_TEST(test_claim_and_release)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	ck_assert_uint_eq(shm_readers_count(a->shm), SLOTS);
	struct shm_arena *s = a->shm;
	ck_assert_int_eq(s->reader_slot, 0);
	ck_assert_uint_eq(shm_token_slot(s->token), 0);
	ck_assert_uint_eq(shm_token_inc(s->token), atomic_load(&shm_reader_slot(s, 0)->inc));
	ck_assert_uint_eq(state_of(a, 0), SHM_SLOT_LIVE);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, 0)->pid), (uint32_t)getpid());
	ck_assert_int_eq(shm_token_alive(s, s->token), 1);
	ck_assert_int_eq(shm_slot_alive(s, 0), 1);

	/* a second handle in this process: its own slot and lock, alive to the first */
	struct sc_arena *b = attach(name);
	ck_assert_int_eq(b->shm->reader_slot, 1);
	uint32_t tb = b->shm->token;
	ck_assert_uint_ne(tb, s->token);
	ck_assert_int_eq(shm_token_alive(s, tb), 1);
	ck_assert_int_eq(shm_slot_alive(s, 1), 1);
	ck_assert_int_eq(shm_slot_alive(s, 2), 0);

	/* release through the shm API: the slot is free and every token of it dead */
	uint64_t cleaned = shm_readers_cleaned(s);
	uint32_t inc = shm_token_inc(tb);
	shm_readers_release(b->shm, 0);
	ck_assert_int_eq(b->shm->reader_slot, -1);
	ck_assert_uint_eq(b->shm->token, 0);
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_FREE);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, 1)->inc), inc + 1);
	ck_assert_uint_eq(shm_readers_cleaned(s), cleaned + 1);
	ck_assert_int_eq(shm_token_alive(s, tb), 0);
	ck_assert_int_eq(shm_slot_alive(s, 1), 0);
	/* claiming again takes the first free slot, at a new incarnation */
	ck_assert_int_eq(shm_readers_claim(b->shm), 1);
	ck_assert_uint_eq(shm_token_inc(b->shm->token), inc + 2);
	ck_assert_int_eq(shm_token_alive(s, tb), 0); /* the old incarnation stays dead */
	ck_assert_int_eq(shm_token_alive(s, b->shm->token), 1);
	sc_arena_close(b);
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_FREE);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_table_full)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name), *h[SLOTS];
	for (uint32_t i = 1; i < SLOTS; i++)
		h[i] = attach(name);
	struct sc_arena *x = NULL;
	ck_assert_int_eq(sc_arena_open(name, &x), -EUSERS);
	ck_assert_ptr_null(x);
	/* hostile: a slot that says FREE but whose lock is held is still not claimable */
	atomic_store(&shm_reader_slot(a->shm, 2)->state, SHM_SLOT_FREE);
	ck_assert_int_eq(sc_arena_open(name, &x), -EUSERS);
	atomic_store(&shm_reader_slot(a->shm, 2)->state, SHM_SLOT_LIVE);
	sc_arena_close(h[2]);
	x = attach(name);
	ck_assert_int_eq(x->shm->reader_slot, 2);
	sc_arena_close(x);
	for (uint32_t i = 1; i < SLOTS; i++)
		if (i != 2)
			sc_arena_close(h[i]);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A child that attaches, enters an epoch, writes into its lease area, reports its token and slot
 * on @fd, and dies by SIGKILL. Returns the token. */
static uint32_t dead_reader(const char *name, uint64_t *epoch_out)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *b;
		if (sc_arena_open(name, &b))
			_exit(2);
		shm_epoch_enter(b->shm);
		struct shm_reader_slot *s = shm_reader_slot(b->shm, (uint32_t)b->shm->reader_slot);
		memset(s->ext, 0xa5, 64);
		uint64_t msg[2] = { b->shm->token, atomic_load(&s->epoch) };
		if (write(p[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	close(p[1]);
	uint64_t msg[2] = { 0, 0 };
	ck_assert_int_eq(read(p[0], msg, sizeof(msg)), sizeof(msg));
	close(p[0]);
	sc_test_wait_killed(pid);
	*epoch_out = msg[1];
	return (uint32_t)msg[0];
}

START_TEST(test_dead_holder_reaped)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct shm_arena *s = a->shm;
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	uint64_t ep;
	uint32_t t = dead_reader(name, &ep);
	uint32_t i = shm_token_slot(t);
	ck_assert_uint_eq(i, 1);
	ck_assert(ep != 0);
	/* dead, but its slot still says LIVE until someone clears it */
	ck_assert_uint_eq(state_of(a, i), SHM_SLOT_LIVE);
	ck_assert_int_eq(shm_token_alive(s, t), 0);
	ck_assert_int_eq(shm_slot_alive(s, i), 0);
	/* its epoch counts until the reap: reclamation waits, it never guesses */
	ck_assert_uint_eq(shm_epoch_min_active(s), ep);
	ck_assert(!ext_is_zero(a, i));
	uint64_t cleaned = shm_readers_cleaned(s);
	/* the reap locks only the slot it clears (slots 2 and 3 are FREE: a claim arriving meanwhile
	 * must find them unlocked) */
	struct in_reap ir = { NULL, 0, 0, 0 };
	sc_sched_set(on_reap_locked, &ir);
	ck_assert_int_eq(shm_readers_reap(s), 1);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(ir.hits, 1);
	ck_assert_uint_eq(shm_readers_cleaned(s), cleaned + 1);
	ck_assert_uint_eq(state_of(a, i), SHM_SLOT_FREE);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, i)->epoch), 0);
	ck_assert(ext_is_zero(a, i));
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, i)->inc), shm_token_inc(t) + 1);
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	/* once cleared, a second reap has nothing to do; our own slot is never reaped */
	ck_assert_int_eq(shm_readers_reap(s), 0);
	ck_assert_uint_eq(state_of(a, 0), SHM_SLOT_LIVE);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* At the cleaner's new incarnation: one byte on the descriptor *@ctx. */
static void say_clean_inc(const char *point, void *ctx)
{
	if (!strcmp(point, "readers.clean.inc") && write(*(int *)ctx, "i", 1) != 1)
		_exit(5);
}

/* A reaper killed half-way through clearing a dead holder's slot (after the new incarnation,
 * before the rest): the slot says CLEANING, the dead holder's epoch and lease area are still
 * there (reclamation still waits for them), and the next reap clears it from the top. */
START_TEST(test_reaper_killed_half_way)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct shm_arena *s = a->shm;
	uint64_t ep;
	uint32_t t = dead_reader(name, &ep), i = shm_token_slot(t);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *r;
		close(p[0]);
		if (sc_arena_open(name, &r) || sc_fault_arm("readers.clean.half"))
			_exit(2);
		/* the explorer can park the cleaner at its new incarnation, before it dies there */
		sc_sched_set(say_clean_inc, &p[1]);
		shm_readers_reap(r->shm);
		_exit(3);
	}
	close(p[1]);
	sc_test_wait_killed(pid);
	char said[8];
	ck_assert_int_eq(read(p[0], said, sizeof(said)), 1);
	close(p[0]);
	ck_assert_uint_eq(state_of(a, i), SHM_SLOT_CLEANING);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, i)->inc), shm_token_inc(t) + 1);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, i)->epoch), ep);
	ck_assert(!ext_is_zero(a, i));
	ck_assert_uint_eq(shm_epoch_min_active(s), ep);
	ck_assert_int_eq(shm_token_alive(s, t), 0);
	ck_assert_int_eq(shm_readers_reap(s), 2); /* the dead holder's slot, and the reaper's own */
	ck_assert_uint_eq(state_of(a, i), SHM_SLOT_FREE);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, i)->inc), shm_token_inc(t) + 2);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, i)->epoch), 0);
	ck_assert(ext_is_zero(a, i));
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* With every slot taken and one holder dead, the next claimer cleans that slot and takes it. */
START_TEST(test_claim_takes_dead_slot)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct sc_arena *b = attach(name), *c = attach(name);
	uint64_t ep;
	uint32_t t = dead_reader(name, &ep); /* the last slot */
	ck_assert_uint_eq(shm_token_slot(t), SLOTS - 1);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), ep);
	uint64_t cleaned = shm_readers_cleaned(a->shm);
	struct sc_arena *d = attach(name);
	ck_assert_uint_eq(d->shm->reader_slot, SLOTS - 1);
	ck_assert_uint_eq(shm_readers_cleaned(a->shm), cleaned + 1);
	ck_assert_uint_eq(shm_token_inc(d->shm->token), shm_token_inc(t) + 2); /* cleaned, then claimed */
	ck_assert_int_eq(shm_token_alive(a->shm, t), 0);
	ck_assert_int_eq(shm_token_alive(a->shm, d->shm->token), 1);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), UINT64_MAX);
	ck_assert(ext_is_zero(a, SLOTS - 1));
	sc_arena_close(d);
	sc_arena_close(c);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_epochs)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct sc_arena *b = attach(name);
	uint64_t e1 = shm_epoch_advance(a->shm), e2 = shm_epoch_advance(a->shm);
	ck_assert_uint_eq(e2, e1 + 1);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), UINT64_MAX);
	shm_epoch_enter(b->shm);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), e2);
	shm_epoch_advance(a->shm);
	shm_epoch_enter(a->shm);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), e2); /* the older one rules */
	shm_epoch_exit(b->shm);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), e2 + 1);
	shm_epoch_exit(a->shm);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), UINT64_MAX);
	/* the older epoch in the lower slot this time: the minimum, not the last one seen */
	shm_epoch_enter(a->shm);
	uint64_t ea = atomic_load(&shm_reader_slot(a->shm, 0)->epoch);
	shm_epoch_advance(a->shm);
	shm_epoch_enter(b->shm);
	ck_assert_uint_gt(atomic_load(&shm_reader_slot(a->shm, 1)->epoch), ea);
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), ea);
	shm_epoch_exit(b->shm);
	shm_epoch_exit(a->shm);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_hostile_tokens)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct shm_arena *s = a->shm;
	struct sc_arena *b = attach(name);
	uint32_t tb = b->shm->token, inc = shm_token_inc(tb);
	ck_assert_int_eq(shm_token_alive(s, shm_token(SLOTS, 1)), 0);       /* no such slot */
	ck_assert_int_eq(shm_token_alive(s, shm_token(0xffff, inc)), 0);
	ck_assert_int_eq(shm_token_alive(s, shm_token(1, 0)), 0);           /* incarnation 0 */
	ck_assert_int_eq(shm_token_alive(s, 0), 0);
	ck_assert_int_eq(shm_token_alive(s, shm_token(1, SHM_INC_MAX + 1)), 0);
	ck_assert_int_eq(shm_token_alive(s, 0xffffffffu), 0);
	ck_assert_int_eq(shm_token_alive(s, shm_token(1, inc + 1)), 0);     /* another incarnation */
	ck_assert_int_eq(shm_token_alive(s, tb), 1);
	/* b's live slot scribbled to incarnations no token may name (0, past SHM_INC_MAX): tokens
	 * naming them are dead, though the slot is LIVE and its lock held */
	atomic_store(&shm_reader_slot(s, 1)->inc, 0);
	ck_assert_int_eq(shm_token_alive(s, shm_token(1, 0)), 0);
	atomic_store(&shm_reader_slot(s, 1)->inc, SHM_INC_MAX + 1);
	ck_assert_int_eq(shm_token_alive(s, shm_token(1, SHM_INC_MAX + 1)), 0);
	atomic_store(&shm_reader_slot(s, 1)->inc, inc);
	ck_assert_int_eq(shm_token_alive(s, tb), 1);
	/* a handle that only looks (no slot: its own token is 0) sees token 0 dead, and a token
	 * whose slot is not LIVE at its incarnation dead without asking the kernel, even when the
	 * kernel could not answer (the handle's descriptor gone: "cannot tell" is kept for slots
	 * that say LIVE) */
	struct sc_arena *c = attach(name);
	ck_assert_int_eq(c->shm->reader_slot, 2);
	sc_arena_close(c);
	uint32_t inc2 = atomic_load(&shm_reader_slot(s, 2)->inc); /* FREE at this incarnation */
	struct shm_arena *ro = NULL;
	ck_assert_int_eq(shm_arena_open(NULL, name, NULL, SHM_OPEN_NO_SLOT, &ro), 0);
	ck_assert_uint_eq(ro->token, 0);
	ck_assert_int_eq(ro->lock_fd, -1);
	ck_assert_int_eq(shm_token_alive(ro, 0), 0);
	ck_assert_int_eq(shm_token_alive(ro, tb), 1);
	ck_assert_int_eq(shm_token_alive(ro, shm_token(2, 1)), 0);
	int rofd = ro->fd;
	ck_assert_int_eq(close(rofd), 0);
	ck_assert_int_eq(shm_token_alive(ro, shm_token(2, 1)), 0);
	ck_assert_int_eq(shm_token_alive(ro, shm_token(2, inc2)), 0); /* FREE */
	ck_assert_int_eq(shm_token_alive(ro, shm_token(1, inc + 1)), 0);
	ck_assert_int_eq(shm_token_alive(ro, tb), 1); /* LIVE, and the kernel cannot tell */
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC); /* a descriptor for its close */
	ck_assert_int_ge(nul, 0);
	ck_assert_int_eq(dup2(nul, rofd), rofd);
	close(nul);
	shm_arena_close(ro);
	ck_assert_int_eq(shm_slot_alive(s, SLOTS), 0);
	ck_assert_int_eq(shm_slot_alive(s, UINT32_MAX), 0);
	/* the bytes just past the table (padding of the region's last page) made to say LIVE at
	 * incarnation 1, and the lock byte after the last slot's held: still no such slot */
	struct shm_reader_slot *past = shm_reader_slot(s, SLOTS);
	ck_assert_uint_le((uint64_t)((uint8_t *)(past + 1) - (uint8_t *)shm_reader_slot(s, 0)),
			  s->hv.regions[SHM_REGION_READERS].size);
	atomic_store(&past->inc, 1);
	atomic_store(&past->state, SHM_SLOT_LIVE);
	int lfd = open(s->path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(shm_ofd_trylock(lfd, SHM_LOCK_SLOT(SLOTS)), 0);
	ck_assert_int_eq(shm_ofd_held(s->lock_fd, SHM_LOCK_SLOT(SLOTS)), 1);
	ck_assert_int_eq(shm_token_alive(s, shm_token(SLOTS, 1)), 0);
	close(lfd);
	/* nor do those bytes hold back reclamation with an epoch */
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	atomic_store(&past->epoch, 2);
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	memset(past, 0, sizeof(*past));
	/* a live holder's slot scribbled to another state: its token no longer reads alive, but no
	 * reap clears a slot whose lock is held */
	atomic_store(&shm_reader_slot(s, 1)->state, SHM_SLOT_CLEANING);
	ck_assert_int_eq(shm_token_alive(s, tb), 0);
	ck_assert_int_eq(shm_readers_reap(s), 0); /* its lock is held: never cleared under a live holder */
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_CLEANING);
	atomic_store(&shm_reader_slot(s, 1)->state, SHM_SLOT_LIVE);
	ck_assert_int_eq(shm_token_alive(s, tb), 1);
	sc_arena_close(b);
	/* the last incarnation a token can name is alive like any other */
	atomic_store(&shm_reader_slot(s, 1)->inc, SHM_INC_MAX - 1);
	b = attach(name);
	ck_assert_int_eq(b->shm->reader_slot, 1);
	ck_assert_uint_eq(shm_token_inc(b->shm->token), SHM_INC_MAX);
	ck_assert_int_eq(shm_token_alive(s, b->shm->token), 1);
	ck_assert_int_eq(shm_slot_alive(s, 1), 1);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Slots nobody holds, with scribbled contents: the reap clears them, claims are not misled. */
START_TEST(test_hostile_free_slots)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct shm_arena *s = a->shm;
	struct shm_reader_slot *s1 = shm_reader_slot(s, 1), *s2 = shm_reader_slot(s, 2), *s3 = shm_reader_slot(s, 3);
	/* slot 1: says LIVE with an epoch, nobody holds it; slot 2: a state no writer sets;
	 * slot 3: FREE at the last incarnation (the next one wraps to 1, never 0) */
	atomic_store(&s1->state, SHM_SLOT_LIVE);
	atomic_store(&s1->inc, 5);
	atomic_store(&s1->epoch, 3);
	memset(s1->ext, 0x5a, SHM_READER_EXT_BYTES);
	atomic_store(&s2->state, 77);
	atomic_store(&s2->inc, 0xffffffffu);
	atomic_store(&s3->inc, SHM_INC_MAX);
	ck_assert_int_eq(shm_token_alive(s, shm_token(1, 5)), 0);
	ck_assert_int_eq(shm_slot_alive(s, 1), 0);
	ck_assert_int_eq(shm_slot_alive(s, 2), 0);
	ck_assert_uint_eq(shm_epoch_min_active(s), 3); /* counted until cleared */
	/* a claimer prefers a free slot and leaves the scribbled ones alone */
	struct sc_arena *b = attach(name);
	ck_assert_int_eq(b->shm->reader_slot, 3);
	ck_assert_uint_eq(shm_token_inc(b->shm->token), 1);
	ck_assert_uint_ne(b->shm->token, 0);
	ck_assert_int_eq(shm_token_alive(s, b->shm->token), 1);
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_LIVE);
	ck_assert_int_eq(shm_readers_reap(s), 2);
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_FREE);
	ck_assert_uint_eq(state_of(a, 2), SHM_SLOT_FREE);
	ck_assert_uint_eq(atomic_load(&s1->epoch), 0);
	ck_assert(ext_is_zero(a, 1));
	ck_assert_uint_eq(atomic_load(&s1->inc), 6);
	ck_assert_uint_eq(atomic_load(&s2->inc), 1); /* out of range: restarts at 1 */
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	ck_assert_int_eq(shm_token_alive(s, b->shm->token), 1); /* the reap left the live one alone */
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A live holder in a child: attaches, reports its token, and waits for EOF on @in. */
static pid_t live_reader(const char *name, uint32_t *token, int *in_w)
{
	int p[2], q[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(pipe(q), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(q[1]);
		struct sc_arena *b;
		if (sc_arena_open(name, &b))
			_exit(2);
		uint32_t t = b->shm->token;
		if (write(p[1], &t, sizeof(t)) != sizeof(t))
			_exit(3);
		char c;
		while (read(q[0], &c, 1) > 0)
			;
		sc_arena_close(b);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	ck_assert_int_eq(read(p[0], token, sizeof(*token)), (ssize_t)sizeof(*token));
	close(p[0]);
	*in_w = q[1];
	return pid;
}

/* A pid that names no process here (a child we reaped; pids are not reused at once). */
static pid_t vanished_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	ck_assert_int_gt(pid, 0);
	waitpid(pid, NULL, 0);
	ck_assert_msg(kill(pid, 0) == -1 && errno == ESRCH, "pid %d still exists", (int)pid);
	return pid;
}

/* The slot's pid and pid namespace are for people: whatever they say, a holder is alive exactly
 * while it holds its slot's lock. A live holder whose pid names no process here (another pid
 * namespace), or 0, or nonsense, is alive; a dead holder whose pid names a live process here (ours,
 * init's) is dead. */
START_TEST(test_pids_decide_nothing)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	struct shm_arena *s = a->shm;
	uint32_t tl;
	int in_w;
	pid_t live = live_reader(name, &tl, &in_w);
	struct shm_reader_slot *sl = shm_reader_slot(s, shm_token_slot(tl));
	ck_assert_uint_eq(atomic_load(&sl->pid), (uint32_t)live);
	const uint32_t absent[] = { (uint32_t)vanished_pid(), 0, 0x7fffffffu, 0xffffffffu };
	const uint64_t nss[] = { atomic_load(&sl->pidns), 0, 1, ~0ull };
	for (unsigned i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		for (unsigned j = 0; j < sizeof(nss) / sizeof(nss[0]); j++) {
			atomic_store(&sl->pid, absent[i]);
			atomic_store(&sl->pidns, nss[j]);
			ck_assert_msg(shm_token_alive(s, tl) == 1, "live holder judged dead by its pid %u", absent[i]);
			ck_assert_int_eq(shm_slot_alive(s, shm_token_slot(tl)), 1);
			ck_assert_int_eq(shm_readers_reap(s), 0);
			ck_assert_uint_eq(state_of(a, shm_token_slot(tl)), SHM_SLOT_LIVE);
			struct sc_holder h[8];
			int n = sc_arena_holders(a, h, 8);
			for (int k = 0; k < n; k++)
				if (h[k].token == tl)
					ck_assert_int_eq(h[k].alive, 1);
		}
	close(in_w);
	int stt;
	waitpid(live, &stt, 0);
	ck_assert(WIFEXITED(stt) && WEXITSTATUS(stt) == 0);

	/* dead, its slot not cleared yet, its pid naming live processes here */
	uint64_t ep;
	uint32_t td = dead_reader(name, &ep);
	struct shm_reader_slot *sd = shm_reader_slot(s, shm_token_slot(td));
	const uint32_t present[] = { (uint32_t)getpid(), 1, (uint32_t)getppid() };
	for (unsigned i = 0; i < sizeof(present) / sizeof(present[0]); i++) {
		atomic_store(&sd->pid, present[i]);
		atomic_store(&sd->pidns, atomic_load(&shm_reader_slot(s, 0)->pidns)); /* "our namespace" */
		ck_assert_msg(shm_token_alive(s, td) == 0, "dead holder judged alive by its pid %u", present[i]);
		ck_assert_int_eq(shm_slot_alive(s, shm_token_slot(td)), 0);
	}
	ck_assert_uint_eq(shm_epoch_min_active(s), ep); /* counted until cleared, never guessed */
	ck_assert_int_eq(shm_readers_reap(s), 1);
	ck_assert_uint_eq(state_of(a, shm_token_slot(td)), SHM_SLOT_FREE);
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* sc_arena_holders, exactly: one row per attachment, its leases and the bytes of the entries they
 * pin (a record whose generation is stale pins nothing), its reservations' heap bytes, who it is
 * and whether it lives — for a live holder in a child, and after its death (until the reap). */
START_TEST(test_holders_rows_are_exact)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS };
	struct sc_arena *a = sc_test_arena_opts("holders", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t buf[3][20000];
	int32_t t[3][2];
	for (int k = 0; k < 3; k++) {
		memset(buf[k], 0x11 * (k + 1), sizeof(buf[k]));
		t[k][0] = 100 + k, t[k][1] = 7;
		size_t n = 5000u * (size_t)(k + 1);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf[k] }, .sec_len = { n } };
		ck_assert_int_eq(sc_l2_admit(st, "h", t[k], 2, sc_digest(buf[k], n), &p, SC_ORIGIN_DIRECT), 0);
	}
	int p[2], q[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(pipe(q), 0);
	pid_t pid = fork();
	if (pid == 0) {
		/* two leases (entries 0 and 2), one reservation of 100000 bytes, then wait */
		close(q[1]);
		struct sc_arena *b;
		struct sc_stage *bs;
		struct sc_lease l0, l2;
		struct sc_l2_resv r;
		if (sc_arena_open(name, &b) || sc_stage_open(b, "m", "s", &bs) || sc_l2_get(bs, "h", t[0], 2, NULL, &l0) ||
		    sc_l2_get(bs, "h", t[2], 2, NULL, &l2) || sc_l2_reserve(bs, 100000, &r))
			_exit(2);
		uint64_t msg[2] = { sc_arena_token(b), r.bytes };
		if (write(p[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(3);
		char c;
		(void)read(q[0], &c, 1);
		raise(SIGKILL);
		_exit(4);
	}
	close(q[0]);
	close(p[1]);
	uint64_t msg[2];
	ck_assert_int_eq(read(p[0], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	uint32_t tok = (uint32_t)msg[0];
	struct shm_index *ix = l2_ix(a);
	uint64_t fp[3];
	for (int k = 0; k < 3; k++) {
		struct sc_key key;
		int err;
		ck_assert_int_eq(sc_l2_key(st, "h", t[k], 2, &key), 0);
		struct shm_index_entry *e = shm_index_find(ix, key.lo, key.hi, &err);
		ck_assert_ptr_nonnull(e);
		fp[k] = e->footprint;
	}
	ck_assert_uint_ne(fp[0], fp[2]);
	for (int round = 0; round < 2; round++) {
		struct sc_holder h[8];
		int n = sc_arena_holders(a, h, 8);
		ck_assert_int_eq(n, 2);
		const struct sc_holder *me = NULL, *it = NULL;
		for (int i = 0; i < n; i++) {
			if (h[i].token == sc_arena_token(a))
				me = &h[i];
			if (h[i].token == tok)
				it = &h[i];
		}
		ck_assert_ptr_nonnull(me);
		ck_assert_ptr_nonnull(it);
		ck_assert_int_eq(me->alive, 1);
		ck_assert_uint_eq(me->leases, 0);
		ck_assert_uint_eq(me->leased_bytes, 0);
		ck_assert_uint_eq(me->reserved_bytes, 0);
		ck_assert_uint_eq(me->pid, (uint32_t)getpid());
		ck_assert_uint_eq(it->slot, shm_token_slot(tok));
		ck_assert_uint_eq(it->pid, (uint32_t)pid);
		ck_assert_uint_eq(it->uid, (uint32_t)geteuid());
		ck_assert_int_eq(it->other_pidns, 0);
		ck_assert_int_eq(it->alive, round == 0);
		ck_assert_uint_eq(it->leases, 2);
		ck_assert_uint_eq(it->leased_bytes, fp[0] + fp[2]);
		ck_assert_uint_ge(msg[1], 100000);
		ck_assert_uint_eq(it->reserved_bytes, shm_heap_footprint(100000) - SHM_HEAP_BLOCK_HDR); /* its block */
		if (round == 0) {
			close(q[1]); /* die now */
			sc_test_wait_killed(pid);
		}
	}
	/* a record whose generation is stale still counts as a lease, but pins no bytes */
	struct l2_ext *x = l2_ext_of(shm_reader_slot(a->shm, shm_token_slot(tok)));
	for (int j = 0; j < SC_LEASES_MAX; j++) {
		uint64_t rec = atomic_load(&x->rec[j]);
		if (rec && (uint32_t)rec - 1 < ix->nentries && ix->ent[(uint32_t)rec - 1].footprint == fp[2])
			atomic_store(&x->rec[j], rec + (1ull << 32));
	}
	struct sc_holder h[8];
	ck_assert_int_eq(sc_arena_holders(a, h, 8), 2);
	for (int i = 0; i < 2; i++)
		if (h[i].token == tok) {
			ck_assert_uint_eq(h[i].leases, 2);
			ck_assert_uint_eq(h[i].leased_bytes, fp[0]);
		}
	/* and one naming an entry far past the index (scribbled) pins nothing, and reads nothing there */
	for (int j = 0; j < SC_LEASES_MAX; j++) {
		uint64_t rec = atomic_load(&x->rec[j]);
		if (rec && (uint32_t)rec - 1 < ix->nentries && ix->ent[(uint32_t)rec - 1].footprint == fp[2])
			atomic_store(&x->rec[j], (rec & ~0xffffffffull) | 0x40000000u);
	}
	ck_assert_int_eq(sc_arena_holders(a, h, 8), 2);
	for (int i = 0; i < 2; i++)
		if (h[i].token == tok) {
			ck_assert_uint_eq(h[i].leases, 2);
			ck_assert_uint_eq(h[i].leased_bytes, fp[0]);
		}
	/* the reap clears it: its slot, its leases; its reservation goes with the sweep */
	ck_assert_int_ge(l2_reap(a, 1), 0);
	ck_assert_int_eq(sc_arena_holders(a, h, 8), 1);
	ck_assert_uint_eq(h[0].token, sc_arena_token(a));
	ck_assert_int_eq(sc_arena_holders(a, NULL, 0), 1);
	ck_assert_int_eq(sc_arena_holders(a, NULL, 3), -EINVAL);
	/* more rows than room: the count says so, and nothing past @max is written */
	struct sc_arena *c;
	ck_assert_int_eq(sc_arena_open(name, &c), 0);
	memset(h, 0xa5, sizeof(h));
	ck_assert_int_eq(sc_arena_holders(a, h, 1), 2);
	const uint8_t *canary = (const uint8_t *)&h[1];
	for (size_t k = 0; k < sizeof(h) - sizeof(h[0]); k++)
		ck_assert_uint_eq(canary[k], 0xa5);
	ck_assert_int_eq(sc_arena_holders(a, NULL, 3), -EINVAL);
	ck_assert_int_eq(sc_arena_holders(NULL, h, 8), -EINVAL);
	/* a handle inherited through fork lists nothing: the child must open its own */
	pid_t child = fork();
	if (child == 0) {
		struct sc_holder ch[8];
		memset(ch, 0xa5, sizeof(ch));
		int crc = sc_arena_holders(a, ch, 8);
		_exit(crc == -ECHILD && ((const uint8_t *)ch)[0] == 0xa5 ? 0 : 1);
	}
	int cst = 0;
	ck_assert_int_eq(waitpid(child, &cst, 0), child);
	ck_assert_msg(WIFEXITED(cst) && WEXITSTATUS(cst) == 0, "a forked child's inherited handle listed holders");
	sc_arena_close(c);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/*
 * A free reader slot holds no lease, whatever its record words say: a slot is cleaned before it is
 * freed, and a member may scribble on one that nobody holds; nor does a word past a live slot's
 * last lease record. A removed entry named only by such words is reclaimed at once (nothing
 * pending), as is one named by none.
 */
START_TEST(test_records_in_a_free_slot_lease_nothing)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS };
	struct sc_arena *a = sc_test_arena_opts("free-recs", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t buf[5000];
	memset(buf, 0x3c, sizeof(buf));
	int32_t t[2] = { 4, 2 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	ck_assert_int_eq(sc_l2_admit(st, "f", t, 2, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	struct sc_key key;
	int err;
	ck_assert_int_eq(sc_l2_key(st, "f", t, 2, &key), 0);
	struct shm_index *ix = l2_ix(a);
	struct shm_index_entry *e = shm_index_find(ix, key.lo, key.hi, &err);
	ck_assert_ptr_nonnull(e);
	uint64_t real = shm_index_rec(ix, e);
	/* every slot but mine is free: each gets a record naming the entry */
	uint32_t mine = shm_token_slot(sc_arena_token(a)), planted = 0;
	for (uint32_t i = 0; i < SLOTS; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a->shm, i);
		if (i == mine)
			continue;
		ck_assert_uint_eq(atomic_load(&s->state), SHM_SLOT_FREE);
		atomic_store(&l2_ext_of(s)->rec[i % SC_LEASES_MAX], real);
		planted++;
	}
	ck_assert_uint_gt(planted, 0);
	/* and my own live slot: a record-shaped word just past its last lease record */
	struct l2_ext *me = l2_ext_of(shm_reader_slot(a->shm, mine));
	me->spare[0] = real;
	ck_assert_int_eq(sc_l2_remove(st, key), 0);
	struct sc_l2_stats stats;
	ck_assert_int_eq(sc_l2_stats(a, st, &stats), 0);
	ck_assert_uint_eq(stats.pending_reclaim_bytes, 0);
	ck_assert_uint_eq(stats.leases, 0);
	for (uint32_t i = 0; i < SLOTS; i++)
		if (i != mine)
			atomic_store(&l2_ext_of(shm_reader_slot(a->shm, i))->rec[i % SC_LEASES_MAX], 0);
	me->spare[0] = 0;
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/*
 * The holder listing reads the slot table, each slot's lease records and the index entries they
 * name, and nothing past any of them: the unused bytes after the last slot, after a slot's last
 * lease record and after the index's last entry may hold anything a member wrote there (they are
 * writable like the rest), and none of it makes a holder, a lease or leased bytes.
 */
START_TEST(test_holders_read_nothing_past_their_tables)
{
	const char *name;
	/* 1040 index entries (65 per shard): the entries end half-way into a page, so the bytes after
	 * the last one are the index region's own padding; likewise 4 slots of 512 bytes */
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS,
				   .index_entries = 1040 };
	struct sc_arena *a = sc_test_arena_opts("holders-past", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t buf[5000];
	memset(buf, 0x5a, sizeof(buf));
	int32_t t[2] = { 9, 9 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	ck_assert_int_eq(sc_l2_admit(st, "h", t, 2, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "h", t, 2, NULL, &l), 0);
	struct shm_index *ix = l2_ix(a);
	struct sc_key key;
	int err;
	ck_assert_int_eq(sc_l2_key(st, "h", t, 2, &key), 0);
	struct shm_index_entry *e = shm_index_find(ix, key.lo, key.hi, &err);
	ck_assert_ptr_nonnull(e);
	uint64_t fp = e->footprint, real = shm_index_rec(ix, e);

	uint64_t rsize, isize;
	uint8_t *readers = shm_region(a->shm, SHM_REGION_READERS, &rsize);
	uint8_t *index = shm_region(a->shm, SHM_REGION_INDEX, &isize);
	ck_assert_uint_ge(rsize, (SLOTS + 1) * SHM_READER_SLOT_BYTES);
	uint8_t *ent_end = (uint8_t *)&ix->ent[ix->nentries];
	ck_assert_uint_ge(isize, (uint64_t)(ent_end - index) + sizeof(struct shm_index_entry));
	/* a slot-shaped record after the last slot: live, with a lease on the entry */
	struct shm_reader_slot *past = (struct shm_reader_slot *)(void *)(readers + SLOTS * SHM_READER_SLOT_BYTES);
	atomic_store(&past->state, SHM_SLOT_LIVE);
	atomic_store(&past->inc, 1);
	atomic_store(&past->pid, 4242);
	atomic_store(&l2_ext_of(past)->rec[0], real);
	/* a lease record after my slot's last one, naming the entry */
	struct l2_ext *mine = l2_ext_of(shm_reader_slot(a->shm, shm_token_slot(sc_arena_token(a))));
	mine->spare[0] = real;
	/* an entry-shaped record after the index's last entry, and a lease record naming it */
	struct shm_index_entry *ghost = (struct shm_index_entry *)(void *)ent_end;
	ghost->gen = 77;
	ghost->footprint = 1u << 20;
	int j = 0;
	while (j < SC_LEASES_MAX && atomic_load(&mine->rec[j]))
		j++;
	ck_assert_int_lt(j, SC_LEASES_MAX);
	atomic_store(&mine->rec[j], (77ull << 32) | (ix->nentries + 1u));

	struct sc_holder h[8];
	memset(h, 0xa5, sizeof(h));
	ck_assert_int_eq(sc_arena_holders(a, h, 8), 1); /* mine only */
	const uint8_t *canary = (const uint8_t *)&h[1]; /* room for 7 more rows: nothing written there */
	for (size_t k = 0; k < sizeof(h) - sizeof(h[0]); k++)
		ck_assert_uint_eq(canary[k], 0xa5);
	ck_assert_uint_eq(h[0].token, sc_arena_token(a));
	ck_assert_uint_eq(h[0].leases, 2);          /* the real lease and the record past the index */
	ck_assert_uint_eq(h[0].leased_bytes, fp);   /* only the real one pins bytes */

	/* put everything back as it was: the lease releases, fsck finds nothing */
	atomic_store(&mine->rec[j], 0);
	mine->spare[0] = 0;
	memset(ghost, 0, sizeof(*ghost));
	memset(past, 0, SHM_READER_SLOT_BYTES);
	sc_lease_release(&l);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &rep), 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A handle whose view of the index fails (a damaged index header) lists nothing: the listing
 * reports the damage (-EBADMSG, as every L2 call does), writes no row, and works once the header
 * is whole again. */
START_TEST(test_holders_refuse_a_damaged_index)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS };
	struct sc_arena *a = sc_test_arena_opts("holders-ix", &o, &name);
	struct shm_index_hdr *ih = shm_region(a->shm, SHM_REGION_INDEX, NULL);
	uint32_t nbuckets = ih->nbuckets;
	ih->nbuckets = 3; /* before any L2 call of this handle: its view is made by the listing */
	struct sc_holder h[4];
	memset(h, 0xa5, sizeof(h));
	ck_assert_int_eq(sc_arena_holders(a, h, 4), -EBADMSG);
	const uint8_t *b = (const uint8_t *)h;
	for (size_t k = 0; k < sizeof(h); k++)
		ck_assert_uint_eq(b[k], 0xa5);
	ih->nbuckets = nbuckets;
	ck_assert_int_eq(sc_arena_holders(a, h, 4), 1);
	ck_assert_uint_eq(h[0].token, sc_arena_token(a));
	sc_test_arena_destroy(a, name);
}
END_TEST

/*
 * Out of memory while the listing grows its rows during the heap walk: -ENOMEM, not a crash. The
 * heap holds reservations of 20 000 owners (one row each: the row table grows to 32 768 rows,
 * 1.3 MiB, which malloc must map anew); a child whose address space is capped at what it already
 * maps asks for the listing. Only the first 64 rows are allocated before the walk (for the
 * slots), from memory malloc already has; every growth past them happens in the walk.
 */
START_TEST(test_holders_out_of_memory_in_the_heap_walk)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	printf("SKIP: holders out of memory: a sanitizer's allocator aborts where malloc returns NULL\n");
	return;
#endif
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS };
	struct sc_arena *a = sc_test_arena_opts("holders-oom", &o, &name);
	enum { OWNERS = 20000 };
	for (uint32_t i = 0; i < OWNERS; i++) {
		uint64_t off;
		ck_assert_int_eq(shm_heap_alloc(a->shm, 8, shm_tag_priv(0x100000u + i), &off), 0);
	}
	struct sc_holder h[4];
	ck_assert_int_eq(sc_arena_holders(a, h, 4), 1 + OWNERS); /* with memory: every owner */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* a fixed mmap threshold (no dynamic raise, no big free chunk kept): rows above 128 KiB
		 * are mapped anew, and freed ones go back to the kernel */
		if (!mallopt(M_MMAP_THRESHOLD, 128 << 10) || !mallopt(M_TRIM_THRESHOLD, 128 << 10))
			_exit(7);
		struct sc_arena *b; /* the child's own handle (the parent's is refused after fork) */
		if (sc_arena_open(name, &b) || sc_arena_holders(b, h, 4) != 2 + OWNERS)
			_exit(2);
		if (sc_test_limit_vm(0))
			_exit(4);
		int rc = sc_arena_holders(b, h, 4);
		_exit(rc == -ENOMEM ? 0 : rc < 0 ? 5 : 6);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the capped listing: %s %d (0: -ENOMEM; 5: another error; 6: it succeeded; a signal: crash)",
		      WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The OFD lock helpers retry only a call that failed with EINTR: an errno left at EINTR by an
 * earlier call does not make a successful one loop (liveness tests run on every reclamation). */
START_TEST(test_ofd_helpers_ignore_a_stale_errno)
{
	char path[] = "/tmp/sc-ofd-XXXXXX";
	int fd = mkstemp(path), fd2 = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(fd2, 0);
	unlink(path);
	errno = EINTR;
	ck_assert_int_eq(shm_ofd_trylock(fd, 5), 0);
	errno = EINTR;
	ck_assert_int_eq(shm_ofd_held(fd2, 5), 1);
	errno = EINTR;
	ck_assert_int_eq(shm_ofd_trylock(fd2, 5), -EAGAIN);
	errno = EINTR;
	shm_ofd_unlock(fd, 5);
	errno = EINTR;
	ck_assert_int_eq(shm_ofd_held(fd2, 5), 0);
	close(fd);
	close(fd2);
	/* a descriptor that names nothing is an error, never "held" or "free" */
	ck_assert_int_eq(shm_ofd_held(fd2, 5), -EBADF);
	ck_assert_int_eq(shm_ofd_held(-1, 5), -EBADF);
	ck_assert_int_eq(shm_ofd_trylock(fd2, 5), -EBADF);
}
END_TEST

/* Descriptor 0 is a descriptor like any other: a worker started with its standard input closed
 * maps the arena through descriptor 0, and a claim whose lock is opened as descriptor 0 holds its
 * slot (neither is taken for a failure). In a child, which closes its own standard input. */
static int claim_on_descriptor_zero(struct sc_arena *a, const char *name)
{
	struct sc_arena *b = NULL, *c = NULL;
	/* a claim whose lock description is opened as descriptor 0 */
	if (sc_arena_open(name, &c) || !c)
		return 10;
	shm_readers_release(c->shm, 0);
	close(0);
	if (sc_test_lowest_free_fd() != 0)
		return 11;
	int slot = shm_readers_claim(c->shm);
	if (slot < 0 || c->shm->reader_slot != slot || c->shm->lock_fd != 0)
		return 12;
	if (state_of(a, (uint32_t)slot) != SHM_SLOT_LIVE || shm_token_alive(a->shm, c->shm->token) != 1)
		return 13;
	/* and reaps through it: a slot left LIVE by nobody is cleared; while the reap holds that
	 * slot's lock (on descriptor 0 too), the dead holder's token is still dead to this handle
	 * (its own lock description's locks are not another holder's) */
	struct shm_reader_slot *dead = shm_reader_slot(a->shm, SLOTS - 1);
	if ((uint32_t)slot == SLOTS - 1 || state_of(a, SLOTS - 1) != SHM_SLOT_FREE)
		return 18;
	atomic_store(&dead->inc, 5);
	atomic_store(&dead->state, SHM_SLOT_LIVE);
	struct in_reap ir = { c->shm, shm_token(SLOTS - 1, 5), 0, -1 };
	sc_sched_set(on_reap_locked, &ir);
	int freed = shm_readers_reap(c->shm);
	sc_sched_set(NULL, NULL);
	if (freed != 1 || state_of(a, SLOTS - 1) != SHM_SLOT_FREE || atomic_load(&dead->inc) != 6)
		return 19;
	if (ir.hits != 1 || ir.alive != 0)
		return 20;
	sc_arena_close(c); /* closes descriptor 0 again */
	if (state_of(a, (uint32_t)slot) != SHM_SLOT_FREE || sc_test_lowest_free_fd() != 0)
		return 14;
	/* an arena mapped through descriptor 0 */
	if (sc_arena_open(name, &b) || !b)
		return 15;
	if (b->shm->fd != 0 || b->shm->reader_slot < 0 || b->shm->lock_fd <= 0 ||
	    shm_token_alive(a->shm, b->shm->token) != 1)
		return 16;
	slot = b->shm->reader_slot;
	sc_arena_close(b);
	if (state_of(a, (uint32_t)slot) != SHM_SLOT_FREE || sc_test_lowest_free_fd() != 0)
		return 17;
	return 0;
}

START_TEST(test_descriptor_zero_is_a_descriptor)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(claim_on_descriptor_zero(a, name));
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s %d", WIFEXITED(st) ? "exit" : "signal",
		      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	for (uint32_t i = 1; i < SLOTS; i++)
		ck_assert_uint_eq(state_of(a, i), SHM_SLOT_FREE);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The namespace a slot records (and holders compare) is the inode /proc/self/ns names, in this
 * process and in a child of a new pid namespace (a different one there). */
static uint64_t ns_inode(const char *kind)
{
	char path[48];
	struct stat sb;
	snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

START_TEST(test_namespaces_are_the_proc_inodes)
{
	uint64_t pid_ns = ns_inode("pid"), mnt_ns = ns_inode("mnt");
	ck_assert_uint_ne(pid_ns, 0);
	ck_assert_uint_ne(mnt_ns, 0);
	ck_assert_uint_eq(shm_pidns_self(), pid_ns);
	ck_assert_uint_eq(shm_mntns_self(), mnt_ns);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* a child that makes a pid namespace, and its child, pid 1 there */
		if (unshare(CLONE_NEWPID) != 0)
			_exit(77);
		pid_t inner = fork();
		if (inner == 0)
			_exit(shm_pidns_self() == ns_inode("pid") && shm_pidns_self() != pid_ns && getpid() == 1 ? 0 : 1);
		int ist;
		_exit(inner > 0 && waitpid(inner, &ist, 0) == inner && WIFEXITED(ist) ? WEXITSTATUS(ist) : 2);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		printf("SKIP: test_namespaces_are_the_proc_inodes (in a new pid namespace): unshare refused\n");
		return;
	}
	ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

/* A user's share of the slots (slots_per_user): a claim is refused with -EDQUOT when the user's
 * other live slots reach the limit; the refused slot is left FREE under a new incarnation and
 * counted cleaned, not dead. Only live slots of the same user count: not the claimer's own, not a
 * slot that says LIVE but whose holder is gone, not another user's. */
START_TEST(test_slots_per_user_limit)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .reader_slots = SLOTS,
				   .slots_per_user = 2 };
	struct sc_arena *a = sc_test_arena_opts("readers", &o, &name);
	struct shm_arena *s = a->shm;
	ck_assert_uint_eq(s->hv.slots_per_user, 2);
	struct sc_arena *b = attach(name), *c = NULL;
	ck_assert_int_eq(b->shm->reader_slot, 1);
	uint32_t inc2 = atomic_load(&shm_reader_slot(s, 2)->inc);
	uint64_t dead = shm_readers_dead(s), cleaned = shm_readers_cleaned(s);
	/* the refused claimer clears the slot while it still holds the slot's lock (nobody else may
	 * claim it half-cleared) */
	struct lock_seen ls = { s->lock_fd, 2, 0, -1 };
	sc_sched_set(on_clean_inc, &ls);
	ck_assert_int_eq(sc_arena_open(name, &c), -EDQUOT);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(ls.hits, 1);
	ck_assert_int_eq(ls.held, 1);
	ck_assert_ptr_null(c);
	ck_assert_uint_eq(state_of(a, 2), SHM_SLOT_FREE);
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, 2)->inc), inc2 + 2); /* claimed, then cleared */
	ck_assert_uint_eq(atomic_load(&shm_reader_slot(s, 2)->pid), 0);
	ck_assert_uint_eq(shm_readers_dead(s), dead);
	ck_assert_uint_eq(shm_readers_cleaned(s), cleaned + 1);
	ck_assert_int_eq(shm_slot_alive(s, 2), 0);
	/* the lock of the refused slot was let go: the reap finds nothing, a claim can take it */
	ck_assert_int_eq(shm_readers_reap(s), 0);

	/* b's slot scribbled to another user: this user holds one, so a claim succeeds */
	uint32_t uid = atomic_load(&shm_reader_slot(s, 1)->uid);
	atomic_store(&shm_reader_slot(s, 1)->uid, uid + 1);
	c = attach(name);
	ck_assert_int_eq(c->shm->reader_slot, 2);
	ck_assert_int_eq(shm_slot_alive(s, 2), 1);
	sc_arena_close(c);
	atomic_store(&shm_reader_slot(s, 1)->uid, uid);

	/* b gone, its slot left saying LIVE for this user (nobody holds its lock): not counted */
	uint32_t inc1 = atomic_load(&shm_reader_slot(s, 1)->inc);
	sc_arena_close(b);
	atomic_store(&shm_reader_slot(s, 1)->inc, inc1);
	atomic_store(&shm_reader_slot(s, 1)->uid, uid);
	atomic_store(&shm_reader_slot(s, 1)->state, SHM_SLOT_LIVE);
	ck_assert_int_eq(shm_slot_alive(s, 1), 0);
	atomic_store(&shm_reader_slot(s, 2)->state, SHM_SLOT_LIVE); /* and slot 2 the same */
	atomic_store(&shm_reader_slot(s, 2)->uid, uid);
	c = attach(name);
	ck_assert_int_eq(c->shm->reader_slot, 3); /* the first pass takes a FREE slot */
	struct sc_arena *d = NULL;
	dead = shm_readers_dead(s);
	ck_assert_int_eq(sc_arena_open(name, &d), -EDQUOT); /* now a and c: the limit */
	ck_assert_ptr_null(d);
	ck_assert_uint_eq(shm_readers_dead(s), dead + 1); /* slot 1's dead holder cleared on the way */
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_FREE);
	ck_assert_uint_eq(state_of(a, 2), SHM_SLOT_LIVE); /* the refused claim went no further */
	sc_arena_close(c);
	d = attach(name);
	ck_assert_int_eq(d->shm->reader_slot, 1);
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_LIVE);
	sc_arena_close(d);
	/* a header whose limit is 0 has none: this user may hold every slot */
	s->hdr->slots_per_user = 0; /* outside the header's checksum */
	struct sc_arena *all[SLOTS - 1];
	for (uint32_t i = 0; i < SLOTS - 1; i++)
		all[i] = attach(name);
	for (uint32_t i = 0; i < SLOTS - 1; i++)
		sc_arena_close(all[i]);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The claim's retry passes, seen through a schedule point at the start of each: @passes counted;
 * at the first, the byte lock held on @fd (by a claimer or cleaner busy on that slot) is let go. */
struct retries {
	int passes, fd;
};

static void on_retry(const char *point, void *ctx)
{
	struct retries *r = ctx;
	if (strcmp(point, "readers.claim.retry"))
		return;
	if (r->passes++ == 0 && r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
}

/* A claim retries (1 ms apart, 100 times) only while some slot is busy being claimed or cleaned
 * (its lock held, its state not LIVE); with every slot held by a live holder it gives up at once. */
START_TEST(test_claim_retries_only_while_a_slot_is_busy)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name), *h[SLOTS] = { 0 }, *x = NULL;
	for (uint32_t i = 1; i < SLOTS; i++)
		h[i] = attach(name);
	struct retries r = { 0, -1 };
	sc_sched_set(on_retry, &r);
	ck_assert_int_eq(sc_arena_open(name, &x), -EUSERS);
	ck_assert_int_eq(r.passes, 0); /* every slot LIVE and held: no retry */
	/* slot 2 let go, its byte locked by a claimer that has not written the slot yet (FREE) */
	sc_arena_close(h[2]);
	int fd = open(a->shm->path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(shm_ofd_trylock(fd, SHM_LOCK_SLOT(2)), 0);
	ck_assert_uint_eq(state_of(a, 2), SHM_SLOT_FREE);
	r = (struct retries){ 0, -1 };
	ck_assert_int_eq(sc_arena_open(name, &x), -EUSERS); /* that claimer never finishes */
	ck_assert_int_eq(r.passes, 100);
	/* the same slot busy in CLEANING, and its cleaner lets go during the first retry pass */
	atomic_store(&shm_reader_slot(a->shm, 2)->state, SHM_SLOT_CLEANING);
	r = (struct retries){ 0, fd };
	x = attach(name);
	ck_assert_int_eq(x->shm->reader_slot, 2);
	ck_assert_int_eq(r.passes, 1);
	ck_assert_int_eq(shm_slot_alive(a->shm, 2), 1);
	sc_sched_set(NULL, NULL);
	sc_arena_close(x);
	for (uint32_t i = 1; i < SLOTS; i++)
		if (i != 2)
			sc_arena_close(h[i]);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The largest table (65 536 slots): a slot index one past it, whose token would wrap to slot 0,
 * is no slot, even when the bytes after the table carry slot 0's incarnation. */
START_TEST(test_largest_table_has_no_slot_past_it)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 64u << 20, .huge = SC_HUGE_OFF, .reader_slots = SHM_READER_SLOTS_MAX };
	struct sc_arena *a = sc_test_arena_opts("readers", &o, &name);
	struct shm_arena *s = a->shm;
	ck_assert_uint_eq(shm_readers_count(s), SHM_READER_SLOTS_MAX);
	ck_assert_int_eq(shm_slot_alive(s, 0), 1);
	ck_assert_uint_eq(shm_token_slot(shm_token(SHM_READER_SLOTS_MAX, 7)), 0); /* the wrap */
	struct shm_reader_slot *past = shm_reader_slot(s, SHM_READER_SLOTS_MAX);
	ck_assert_uint_ge((uint64_t)((uint8_t *)past - s->base), s->hv.regions[SHM_REGION_READERS].off +
								     s->hv.regions[SHM_REGION_READERS].size);
	/* those bytes belong to the next region (statistics): saved and put back as plain bytes */
	uint8_t keep[sizeof(*past)];
	uint32_t inc0 = atomic_load(&shm_reader_slot(s, 0)->inc);
	memcpy(keep, (void *)past, sizeof(keep));
	memcpy((uint8_t *)(void *)past + offsetof(struct shm_reader_slot, inc), &inc0, sizeof(inc0));
	ck_assert_int_eq(shm_slot_alive(s, SHM_READER_SLOTS_MAX), 0);
	memcpy((void *)past, keep, sizeof(keep));
	sc_test_arena_destroy(a, name);
}
END_TEST

/* @s's slot given back, then claimed again with the arena's path naming nothing (the file
 * renamed away; here the handle's private copy of its path, put back after): the claim's result. */
static int claim_with_path_gone(struct shm_arena *s)
{
	char keep[sizeof(s->path)];
	memcpy(keep, s->path, sizeof(keep));
	shm_readers_release(s, 0);
	snprintf(s->path, sizeof(s->path), "/nonexistent-%d/arena", (int)getpid());
	int rc = shm_readers_claim(s);
	memcpy(s->path, keep, sizeof(keep));
	return rc;
}

/* Without /proc (a container that does not mount it): the claim's lock description is opened by
 * the arena's path instead of through /proc/self/fd. */
static int claim_without_proc(const char *name)
{
	if (unshare(CLONE_NEWNS) != 0)
		return 77;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 || mount("none", "/proc", "tmpfs", 0, NULL) != 0)
		return 78;
	if (access("/proc/self/fd", F_OK) == 0)
		return 10;
	struct sc_arena *b = NULL;
	int rc = sc_arena_open(name, &b);
	if (rc)
		return 20 + (-rc > 30 ? 30 : -rc);
	int ok = b->shm->reader_slot > 0 && b->shm->lock_fd >= 0 && shm_slot_alive(b->shm, (uint32_t)b->shm->reader_slot) == 1;
	if (!ok)
		return 11;
	/* and when the path fails too, the claim says why, with no slot taken */
	rc = claim_with_path_gone(b->shm);
	ok = rc == -ENOENT && b->shm->reader_slot == -1 && b->shm->lock_fd == -1;
	sc_arena_close(b);
	return ok ? 0 : 12;
}

START_TEST(test_claim_without_proc)
{
	const char *name;
	struct sc_arena *a = readers_arena(&name);
	/* here too, without a namespace: a handle whose descriptor number names nothing (so no
	 * /proc/self/fd entry) and whose path names nothing; the claim says why and takes no slot */
	struct sc_arena *b = attach(name);
	int kfd = b->shm->fd, gone = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(gone, 0);
	ck_assert_int_eq(close(gone), 0);
	b->shm->fd = gone;
	ck_assert_int_eq(claim_with_path_gone(b->shm), -ENOENT);
	ck_assert_int_eq(b->shm->reader_slot, -1);
	ck_assert_int_eq(b->shm->lock_fd, -1);
	b->shm->fd = kfd;
	sc_arena_close(b);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(claim_without_proc(name));
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77 || WEXITSTATUS(st) == 78) {
		printf("SKIP: test_claim_without_proc: a mount namespace without /proc cannot be made here (%s)\n",
		       WEXITSTATUS(st) == 77 ? "unshare" : "mount");
		sc_test_arena_destroy(a, name);
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) == 0, "the claim without /proc: child exit %d", WEXITSTATUS(st));
	ck_assert_uint_eq(state_of(a, 1), SHM_SLOT_FREE); /* its slot given back when it closed */
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *shm_readers_suite(void)
{
	Suite *s = suite_create("shm_readers");
	TCase *tc = tcase_create("readers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_claim_and_release);
	tcase_add_test(tc, test_table_full);
	tcase_add_test(tc, test_dead_holder_reaped);
	tcase_add_test(tc, test_claim_takes_dead_slot);
	tcase_add_test(tc, test_reaper_killed_half_way);
	tcase_add_test(tc, test_epochs);
	tcase_add_test(tc, test_hostile_tokens);
	tcase_add_test(tc, test_hostile_free_slots);
	tcase_add_test(tc, test_pids_decide_nothing);
	tcase_add_test(tc, test_holders_rows_are_exact);
	tcase_add_test(tc, test_records_in_a_free_slot_lease_nothing);
	tcase_add_test(tc, test_holders_read_nothing_past_their_tables);
	tcase_add_test(tc, test_holders_refuse_a_damaged_index);
	tcase_add_test(tc, test_holders_out_of_memory_in_the_heap_walk);
	tcase_add_test(tc, test_ofd_helpers_ignore_a_stale_errno);
	tcase_add_test(tc, test_descriptor_zero_is_a_descriptor);
	tcase_add_test(tc, test_namespaces_are_the_proc_inodes);
	tcase_add_test(tc, test_slots_per_user_limit);
	tcase_add_test(tc, test_claim_retries_only_while_a_slot_is_busy);
	tcase_add_test(tc, test_largest_table_has_no_slot_past_it);
	tcase_add_test(tc, test_claim_without_proc);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(shm_readers_suite)
