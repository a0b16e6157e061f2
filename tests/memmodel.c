/*
 * tests/memmodel.c — the weak-memory model checker (see memmodel.h for the model).
 *
 * Stateless exploration: an execution is a sequence of choices (which thread runs at a scheduling
 * point, which message a load reads); each execution replays a prefix of the previous one's
 * choices, takes the next alternative at its last open choice, and then the first alternative at
 * every new choice (depth first). Threads are ucontext coroutines of the calling process, so plain
 * memory is sequentially consistent between them and only the modelled atomics are weak. The real
 * memory of a modelled location always holds its latest store (what the non-modelled code sees);
 * a load may return an older message.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <ucontext.h>

#include "memmodel.h"

#define MAXLOC 512
#define MAXMSG 8192
#define MAXMSG_PER_LOC 256
#define MAXCHOICE 8192
#define MAXREGION 16
#define MAXSTEPS 200000
#define STACK_BYTES (512u << 10)
#define TRACE_MAX 96

typedef uint16_t ts_t;

struct loc {
	uintptr_t addr;
	unsigned size;
	unsigned n;                     /* messages */
	uint32_t msg[MAXMSG_PER_LOC];   /* message ids, in modification order (index = timestamp) */
};

struct message {
	uint64_t val;
	ts_t *view;                     /* NULL: the empty view */
};

struct thread {
	ts_t cur[MAXLOC], acq[MAXLOC], rel[MAXLOC];
	int done;
	int wait_loc;                   /* blocked in mm_futex_wait on location wait_loc - 1 (0: runs) */
	uint64_t wait_val;              /* ... until its latest value is not this */
	int timed_out;                  /* woken by the scenario's time-out, not by a change */
};

/* the shared set, kept across executions: who touched each address, who wrote it */
struct seen {
	uintptr_t addr;
	uint8_t touched, wrote;
};

static struct {
	const struct mm_scenario *s;
	struct { uintptr_t lo, hi, canon; } region[MAXREGION];
	unsigned nregion;
	/* per execution */
	struct loc loc[MAXLOC];
	unsigned nloc;
	int32_t loc_hash[2 * MAXLOC];   /* loc index + 1 */
	struct message msg[MAXMSG];
	unsigned nmsg;
	ts_t *views;                    /* MAXMSG views of MAXLOC */
	struct thread th[MM_MAX_THREADS];
	ts_t sc[MAXLOC];
	int cur;
	unsigned long steps;
	int overflow;                   /* an execution went past a bound: a test error */
	int deadlock;                   /* every thread not done waits on a futex word that does not change */
	/* choices */
	uint16_t taken[MAXCHOICE], count[MAXCHOICE];
	unsigned nchoice, plen;
	uint16_t prefix[MAXCHOICE];
	/* trace of the execution (for the first failure) */
	char trace[TRACE_MAX][40];
	unsigned ntrace;
	/* shared set */
	struct seen seen[4 * MAXLOC];
	unsigned nseen;
	int grew;
	/* coroutines */
	ucontext_t main_ctx, th_ctx[MM_MAX_THREADS];
	/* switches after a coroutine's start: _setjmp/_longjmp (no signal mask system call) */
	jmp_buf main_jmp, th_jmp[MM_MAX_THREADS];
	int started[MM_MAX_THREADS];
	void *stack[MM_MAX_THREADS];
} M = { .cur = -1 };

void mm_region_alias(void *p, size_t len, void *canon)
{
	if (M.nregion < MAXREGION) {
		M.region[M.nregion].lo = (uintptr_t)p;
		M.region[M.nregion].hi = (uintptr_t)p + len;
		M.region[M.nregion].canon = (uintptr_t)canon;
		M.nregion++;
	}
}

void mm_region(void *p, size_t len)
{
	mm_region_alias(p, len, p);
}

void mm_regions_clear(void)
{
	M.nregion = 0;
	M.nseen = 0;
}

int mm_self(void)
{
	return M.cur;
}

/* The canonical address of @p when it is modelled (one location, whichever mapping reaches it), else 0. */
static uintptr_t modelled(const volatile void *p)
{
	if (M.cur < 0)
		return 0;
	uintptr_t a = (uintptr_t)p;
	for (unsigned i = 0; i < M.nregion; i++)
		if (a >= M.region[i].lo && a < M.region[i].hi)
			return M.region[i].canon + (a - M.region[i].lo);
	return 0;
}

static uint64_t real_load(const volatile void *p, unsigned size)
{
	switch (size) {
	case 1: return __atomic_load_n((const volatile uint8_t *)p, __ATOMIC_SEQ_CST);
	case 2: return __atomic_load_n((const volatile uint16_t *)p, __ATOMIC_SEQ_CST);
	case 4: return __atomic_load_n((const volatile uint32_t *)p, __ATOMIC_SEQ_CST);
	default: return __atomic_load_n((const volatile uint64_t *)p, __ATOMIC_SEQ_CST);
	}
}

static void real_store(volatile void *p, unsigned size, uint64_t v)
{
	switch (size) {
	case 1: __atomic_store_n((volatile uint8_t *)p, (uint8_t)v, __ATOMIC_SEQ_CST); break;
	case 2: __atomic_store_n((volatile uint16_t *)p, (uint16_t)v, __ATOMIC_SEQ_CST); break;
	case 4: __atomic_store_n((volatile uint32_t *)p, (uint32_t)v, __ATOMIC_SEQ_CST); break;
	default: __atomic_store_n((volatile uint64_t *)p, v, __ATOMIC_SEQ_CST); break;
	}
}

static uint64_t apply(int op, uint64_t old, uint64_t v, unsigned size)
{
	uint64_t r;
	switch (op) {
	case MM_XCHG: r = v; break;
	case MM_ADD: r = old + v; break;
	case MM_SUB: r = old - v; break;
	case MM_OR: r = old | v; break;
	case MM_AND: r = old & v; break;
	default: r = old ^ v; break;
	}
	return size >= 8 ? r : r & ((1ull << (8 * size)) - 1);
}

/* ---- choices ---- */

static unsigned choose(unsigned n)
{
	if (n <= 1)
		return 0;
	if (M.nchoice >= MAXCHOICE) {
		M.overflow = 1;
		return 0;
	}
	unsigned c = M.nchoice < M.plen ? M.prefix[M.nchoice] : 0;
	if (c >= n)
		c = 0; /* cannot happen in a deterministic replay; stay safe */
	M.taken[M.nchoice] = (uint16_t)c;
	M.count[M.nchoice] = (uint16_t)n;
	M.nchoice++;
	return c;
}

static void trace(const char *fmt, int a, unsigned b, unsigned long long c)
{
	if (M.ntrace < TRACE_MAX)
		snprintf(M.trace[M.ntrace++], sizeof(M.trace[0]), fmt, a, b, c);
}

/* ---- the shared set ---- */

static struct seen *seen_of(uintptr_t a)
{
	for (unsigned i = 0; i < M.nseen; i++)
		if (M.seen[i].addr == a)
			return &M.seen[i];
	if (M.nseen >= sizeof(M.seen) / sizeof(M.seen[0])) {
		M.overflow = 1;
		return NULL;
	}
	M.seen[M.nseen] = (struct seen){ .addr = a };
	return &M.seen[M.nseen++];
}

static int is_shared(const struct seen *s)
{
	return s && __builtin_popcount(s->touched) >= 2 && s->wrote;
}

/* Record this thread's access; the exploration restarts when a location becomes shared. */
static int note_access(uintptr_t a, int write)
{
	struct seen *s = seen_of(a);
	if (!s)
		return 0;
	int was = is_shared(s);
	s->touched |= (uint8_t)(1u << M.cur);
	if (write)
		s->wrote = 1;
	if (!was && is_shared(s))
		M.grew = 1;
	return was;
}

/* ---- scheduling ---- */

static void sched_point(void)
{
	int me = M.cur;
	if (!_setjmp(M.th_jmp[me]))
		_longjmp(M.main_jmp, 1);
}

void mm_yield(void)
{
	if (M.cur >= 0)
		sched_point();
}

/* ---- locations and messages ---- */

static ts_t *new_view(void)
{
	if (M.nmsg >= MAXMSG) {
		M.overflow = 1;
		return NULL;
	}
	return M.views + (size_t)M.nmsg * MAXLOC;
}

static unsigned add_msg(struct loc *l, uint64_t val, const ts_t *view)
{
	if (M.nmsg >= MAXMSG || l->n >= MAXMSG_PER_LOC) {
		M.overflow = 1;
		return l->n ? l->n - 1 : 0;
	}
	unsigned id = M.nmsg;
	ts_t *v = NULL;
	if (view) {
		v = new_view();
		memcpy(v, view, sizeof(ts_t) * MAXLOC);
	}
	M.msg[id] = (struct message){ .val = val, .view = v };
	M.nmsg++;
	l->msg[l->n] = id;
	return l->n++;
}

static int loc_of(const volatile void *p, uintptr_t a, unsigned size)
{
	unsigned h = (unsigned)((a >> 2) * 2654435761u) % (2 * MAXLOC);
	for (unsigned k = 0; k < 2 * MAXLOC; k++, h = (h + 1) % (2 * MAXLOC)) {
		int32_t i = M.loc_hash[h];
		if (!i)
			break;
		if (M.loc[i - 1].addr == a)
			return i - 1;
	}
	if (M.nloc >= MAXLOC) {
		M.overflow = 1;
		return -1;
	}
	int i = (int)M.nloc++;
	M.loc_hash[h] = i + 1;
	M.loc[i].addr = a;
	M.loc[i].size = size;
	M.loc[i].n = 0;
	add_msg(&M.loc[i], real_load(p, size), NULL); /* the initial message: what memory holds now */
	return i;
}

static void join(ts_t *dst, const ts_t *src)
{
	if (!src)
		return;
	for (unsigned i = 0; i < M.nloc; i++)
		if (src[i] > dst[i])
			dst[i] = src[i];
}

static void fence_effect(int order)
{
	struct thread *t = &M.th[M.cur];
	if (order == memory_order_acquire || order == memory_order_consume || order == memory_order_acq_rel ||
	    order == memory_order_seq_cst)
		join(t->cur, t->acq);
	if (order == memory_order_seq_cst) {
		join(t->cur, M.sc);
		memcpy(M.sc, t->cur, sizeof(M.sc));
	}
	if (order == memory_order_release || order == memory_order_acq_rel || order == memory_order_seq_cst)
		memcpy(t->rel, t->cur, sizeof(t->rel));
}

static int is_acq(int o)
{
	return o == memory_order_acquire || o == memory_order_consume || o == memory_order_acq_rel ||
	       o == memory_order_seq_cst;
}

static int is_rel(int o)
{
	return o == memory_order_release || o == memory_order_acq_rel || o == memory_order_seq_cst;
}

/* Common prologue of an access: the scheduling point (when shared) and the step bound. */
static int begin(const volatile void *p, uintptr_t canon, unsigned size, int write)
{
	if (note_access(canon, write))
		sched_point();
	if (++M.steps > MAXSTEPS)
		M.overflow = 1;
	return loc_of(p, canon, size);
}

/* The current thread reads the latest message of location @li (a read-modify-write, a futex's
 * compare): its view of @li moves there, and the message's view joins its view when @acquire,
 * else only what an acquire fence would join. */
static struct message *read_latest(int li, int acquire)
{
	struct thread *t = &M.th[M.cur];
	struct loc *l = &M.loc[li];
	struct message *m = &M.msg[l->msg[l->n - 1]];
	t->cur[li] = (ts_t)(l->n - 1);
	join(acquire ? t->cur : t->acq, m->view);
	return m;
}

uint64_t mm_load(const volatile void *p, unsigned size, int order)
{
	uintptr_t canon = modelled(p);
	if (!canon)
		return real_load(p, size);
	int li = begin(p, canon, size, 0);
	if (li < 0)
		return real_load(p, size);
	struct thread *t = &M.th[M.cur];
	if (order == memory_order_seq_cst)
		fence_effect(memory_order_seq_cst);
	struct loc *l = &M.loc[li];
	unsigned lo = t->cur[li], n = l->n - lo;
	unsigned c = choose(n);
	unsigned ts = l->n - 1 - c; /* 0: the latest message; then older ones */
	struct message *m = &M.msg[l->msg[ts]];
	if (ts > t->cur[li])
		t->cur[li] = (ts_t)ts;
	if (is_acq(order))
		join(t->cur, m->view);
	else
		join(t->acq, m->view);
	if (c)
		trace("T%d ld #%u stale(%llu)", M.cur, (unsigned)li, (unsigned long long)m->val);
	return m->val;
}

/* Append a store of @v by the current thread; @extra: a view it also carries (release sequence). */
static void do_store(struct loc *l, int li, const volatile void *p, uint64_t v, int order, const ts_t *extra)
{
	struct thread *t = &M.th[M.cur];
	ts_t *tmp = M.views + (size_t)(MAXMSG - 1) * MAXLOC; /* scratch: the last view is never a message's */
	unsigned ts = l->n;
	if (is_rel(order))
		memcpy(tmp, t->cur, sizeof(ts_t) * MAXLOC);
	else
		memcpy(tmp, t->rel, sizeof(ts_t) * MAXLOC);
	tmp[li] = (ts_t)ts;
	join(tmp, extra);
	if (M.nmsg >= MAXMSG - 1) {
		M.overflow = 1;
		return;
	}
	add_msg(l, v, tmp);
	t->cur[li] = (ts_t)ts;
	real_store((volatile void *)p, l->size, v);
}

void mm_store(volatile void *p, unsigned size, uint64_t v, int order)
{
	uintptr_t canon = modelled(p);
	if (!canon) {
		real_store(p, size, v);
		return;
	}
	int li = begin(p, canon, size, 1);
	if (li < 0) {
		real_store(p, size, v);
		return;
	}
	do_store(&M.loc[li], li, p, v, order, NULL);
	if (order == memory_order_seq_cst)
		fence_effect(memory_order_seq_cst);
}

uint64_t mm_rmw(volatile void *p, unsigned size, int op, uint64_t v, int order)
{
	uintptr_t canon = modelled(p);
	if (!canon) {
		uint64_t old = real_load(p, size);
		real_store(p, size, apply(op, old, v, size));
		return old;
	}
	int li = begin(p, canon, size, 1);
	if (li < 0)
		return 0;
	if (order == memory_order_seq_cst)
		fence_effect(memory_order_seq_cst);
	struct loc *l = &M.loc[li];
	struct message *m = read_latest(li, is_acq(order));
	uint64_t old = m->val;
	do_store(l, li, p, apply(op, old, v, size), order, m->view);
	if (order == memory_order_seq_cst)
		fence_effect(memory_order_seq_cst);
	return old;
}

int mm_cas(volatile void *p, unsigned size, void *expected, uint64_t desired, int succ, int fail)
{
	uint64_t want = 0;
	memcpy(&want, expected, size); /* little-endian: the low bytes */
	uintptr_t canon = modelled(p);
	if (!canon) {
		uint64_t old = real_load(p, size);
		if (old == want) {
			real_store(p, size, desired);
			return 1;
		}
		memcpy(expected, &old, size);
		return 0;
	}
	int li = begin(p, canon, size, 1);
	if (li < 0)
		return 0;
	struct loc *l = &M.loc[li];
	uint64_t old = M.msg[l->msg[l->n - 1]].val;
	int ok = old == want;
	int order = ok ? succ : fail;
	if (order == memory_order_seq_cst)
		fence_effect(memory_order_seq_cst);
	struct message *m = read_latest(li, is_acq(order));
	if (ok)
		do_store(l, li, p, desired, succ, m->view);
	else
		memcpy(expected, &old, size);
	if (order == memory_order_seq_cst)
		fence_effect(memory_order_seq_cst);
	return ok;
}

void mm_fence(int order)
{
	if (M.cur < 0) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return;
	}
	if (order == memory_order_seq_cst)
		sched_point(); /* its place in the global order of seq_cst fences is a choice */
	fence_effect(order);
}

int mm_futex_wait(const volatile void *p, unsigned size, uint64_t val)
{
	uintptr_t canon = modelled(p);
	if (!canon) {
		/* outside the model, or a word nobody registered: a caller that retries would spin
		 * without a bound, so the test stops here and says why */
		fprintf(stderr, "mm_futex_wait: %p is not a modelled word (or not in a model thread)\n", (void *)p);
		abort();
	}
	int li = begin(p, canon, size, 0);
	if (li < 0) {
		sched_point(); /* out of locations: the main context sees the overflow and ends the run */
		return -1;
	}
	/* the kernel compares with what memory holds: the latest message (a relaxed read of it) */
	struct thread *t = &M.th[M.cur];
	if (read_latest(li, 0)->val != val)
		return -1;
	t->wait_loc = li + 1;
	t->wait_val = val;
	trace("T%d waits on #%u (%llu)", M.cur, (unsigned)li, (unsigned long long)val);
	sched_point(); /* resumed once the word holds another value, or by a time-out */
	t = &M.th[M.cur];
	t->wait_loc = 0;
	int timed_out = t->timed_out;
	t->timed_out = 0;
	return timed_out;
}

/* ---- executions ---- */

/* Thread @i may run: not done, and not waiting on a word that still holds the value it slept on. */
static int runnable(unsigned i)
{
	const struct thread *t = &M.th[i];
	if (t->done)
		return 0;
	if (!t->wait_loc)
		return 1;
	const struct loc *l = &M.loc[t->wait_loc - 1];
	return M.msg[l->msg[l->n - 1]].val != t->wait_val;
}

static void thread_main(unsigned who)
{
	M.s->thread(M.s->ctx, who);
	M.th[who].done = 1;
	_longjmp(M.main_jmp, 1);
}

/* The thread to run next (a choice), -1 when none can: the one that ran last first (fewest
 * switches first), then the others in order; when every thread left sleeps and the scenario has
 * time-outs, one of them times out; with none, a deadlock. */
static int next_thread(int last)
{
	const struct mm_scenario *s = M.s;
	unsigned en[MM_MAX_THREADS], n = 0;
	if (runnable((unsigned)last))
		en[n++] = (unsigned)last;
	for (unsigned i = 0; i < s->threads; i++)
		if (runnable(i) && (int)i != last)
			en[n++] = i;
	int timeout = 0;
	if (!n && s->timeouts)
		for (unsigned i = 0; i < s->threads; i++)
			if (!M.th[i].done)
				en[n++] = i, timeout = 1;
	if (!n) {
		for (unsigned i = 0; i < s->threads; i++)
			M.deadlock |= !M.th[i].done;
		return -1;
	}
	unsigned pick = en[choose(n)];
	if (timeout) {
		M.th[pick].wait_loc = 0;
		M.th[pick].timed_out = 1;
		trace("T%d times out%.0u%.0llu", (int)pick, 0, 0ull);
	}
	return (int)pick;
}

/* Run one execution following M.prefix/M.plen. 0, or -1 with @why set. */
static int run_once(char *why, size_t len)
{
	const struct mm_scenario *s = M.s;
	s->reset(s->ctx);
	M.nloc = 0;
	memset(M.loc_hash, 0, sizeof(M.loc_hash));
	M.nmsg = 0;
	memset(M.th, 0, sizeof(M.th));
	memset(M.sc, 0, sizeof(M.sc));
	M.nchoice = 0;
	M.steps = 0;
	M.ntrace = 0;
	M.overflow = 0;
	M.deadlock = 0;
	for (unsigned i = 0; i < s->threads; i++) {
		getcontext(&M.th_ctx[i]);
		M.th_ctx[i].uc_stack.ss_sp = M.stack[i];
		M.th_ctx[i].uc_stack.ss_size = STACK_BYTES;
		M.th_ctx[i].uc_link = &M.main_ctx;
		makecontext(&M.th_ctx[i], (void (*)(void))thread_main, 1, i);
		M.started[i] = 0;
	}
	volatile int last = 0;
	for (;;) {
		int pick = next_thread(last);
		if (pick < 0)
			break;
		if (pick != last)
			trace("T%d runs%.0u%.0llu", pick, 0, 0ull);
		last = pick;
		M.cur = pick;
		if (!_setjmp(M.main_jmp)) {
			if (!M.started[M.cur]) {
				M.started[M.cur] = 1;
				setcontext(&M.th_ctx[M.cur]);
			}
			_longjmp(M.th_jmp[M.cur], 1);
		}
		M.cur = -1;
		if (M.overflow)
			break;
	}
	if (M.overflow) {
		/* threads parked mid-way are abandoned with their stacks (reused next run) */
		snprintf(why, len, "execution exceeded the model's bounds (locations %u, messages %u, steps %lu)", M.nloc,
			 M.nmsg, M.steps);
		return -1;
	}
	if (M.deadlock) {
		snprintf(why, len, "deadlock: every thread not done waits on a futex word nobody changes");
		return -1;
	}
	return s->check(s->ctx, why, len) ? -1 : 0;
}

static int next_prefix(void)
{
	for (unsigned i = M.nchoice; i-- > 0;) {
		if (M.taken[i] + 1u < M.count[i]) {
			memcpy(M.prefix, M.taken, sizeof(M.taken[0]) * i);
			M.prefix[i] = (uint16_t)(M.taken[i] + 1);
			M.plen = i + 1;
			return 0;
		}
	}
	return -1;
}

int mm_explore(const struct mm_scenario *s, unsigned long max_executions, struct mm_result *r)
{
	memset(r, 0, sizeof(*r));
	M.s = s;
	M.views = calloc(MAXMSG, sizeof(ts_t) * MAXLOC);
	for (unsigned i = 0; i < s->threads; i++)
		M.stack[i] = malloc(STACK_BYTES);
	M.nseen = 0;
	for (;;) {
		M.plen = 0;
		M.grew = 0;
		unsigned long failures = 0;
		int exhausted = 0;
		r->first_failure[0] = 0;
		unsigned long ex = 0;
		for (;;) {
			char why[256] = "";
			int rc = run_once(why, sizeof(why));
			ex++;
			if (M.grew)
				break;
			if (rc) {
				if (!failures) {
					int off = snprintf(r->first_failure, sizeof(r->first_failure), "%s: %s; trace:", s->name, why);
					for (unsigned i = 0; i < M.ntrace && off < (int)sizeof(r->first_failure) - 44; i++)
						off += snprintf(r->first_failure + off, sizeof(r->first_failure) - (size_t)off, " %s;",
								M.trace[i]);
				}
				failures++;
			}
			if (next_prefix()) {
				exhausted = 1;
				break;
			}
			if (r->executions + ex >= max_executions)
				break;
		}
		r->executions += ex;
		if (M.grew && r->restarts < 64 && r->executions < max_executions) {
			r->restarts++;
			continue;
		}
		r->failures = failures;
		r->exhausted = exhausted && !M.grew;
		break;
	}
	for (unsigned i = 0; i < M.nseen; i++)
		r->shared += is_shared(&M.seen[i]);
	for (unsigned i = 0; i < s->threads; i++)
		free(M.stack[i]);
	free(M.views);
	M.views = NULL;
	printf("memmodel %-40s executions %7lu%s  shared locations %3u  restarts %u  failures %lu\n", s->name,
	       r->executions, r->exhausted ? " (all)" : " (bounded)", r->shared, r->restarts, r->failures);
	fflush(stdout);
	return r->failures ? -1 : 0;
}
