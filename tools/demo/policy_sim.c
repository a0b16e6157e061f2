/*
 * tools/demo/policy_sim.c — LRU, S3-FIFO and OPT over a request sequence (see policy_sim.h).
 *
 * Queues are doubly-linked lists threaded through per-object arrays (objects are dense ids), so
 * every step is O(1) except OPT's, which keeps a max-heap of next uses (O(log n) per request).
 *
 * S3-FIFO follows libCacheSim's S3FIFO.c (the authors' implementation) with its defaults: a small
 * FIFO of 10 % of the capacity, a main FIFO of the rest, a ghost FIFO of evicted keys holding 90 %
 * of the capacity in their bytes; a hit adds 1 to the object's counter; an object leaves the small
 * FIFO for the main one when its counter is at least 2, else it goes to the ghost; the main FIFO
 * reinserts objects whose counter is at least 1 with min(counter, 3) - 1; a miss on a ghost key is
 * inserted into the main FIFO; objects at least as large as the small FIFO are not cached; until
 * the first eviction, inserts go to the main FIFO once the small one is full.
 *
 * OPT: on a miss the object is admitted unless it is never requested again; while over capacity
 * the cached object (the newcomer included) whose next request is furthest is evicted.
 *
 * GDSF (Cherkasova '98): each cached object has H = L + f x v / c (f its hits since admission, v
 * its value, c its cost in bytes); the object of least H is evicted and L becomes its H. A
 * min-heap with lazy deletion (an object's entry is stale once its H changed).
 *
 * Benefit (the arena's policy, lib/l2/evict.c, with the same integer arithmetic): S3-FIFO as above
 * plus, with D the moving average (1/8 per eviction) of the densities v / c of evicted objects and
 * r = density / D: a small-FIFO object moves to main with two hits, one hit when r >= 2, none
 * when r >= 4; an object moving to main or hit there gets credit min(r - 1, 63), spent one per
 * unhit pass at the main FIFO's tail before it is evicted (one in main since the warm-up gets it
 * the first time it reaches the tail unhit); a newcomer not in the ghost with
 * r < 1/16, when room must be made, is refused and put in the ghost; one whose value is below
 * 50 ps per byte of its size is refused. The ghost here is exact (the arena's is set-associative).
 *
 * OPT-by-benefit: as OPT, but the victim is the cached object of least v / (c x (next request -
 * now)), objects never requested again first: a greedy heuristic, not an optimum (the problem
 * with sizes and values is NP-hard), labelled so in the reports.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy_sim.h"

const char *psim_name(enum psim_policy p)
{
	switch (p) {
	case PSIM_LRU: return "lru";
	case PSIM_S3FIFO: return "s3fifo";
	case PSIM_OPT: return "opt";
	case PSIM_GDSF: return "gdsf";
	case PSIM_BENEFIT: return "benefit";
	case PSIM_OPT_BENEFIT: return "opt_benefit";
	case PSIM_COUNT: break;
	}
	return "?";
}

double psim_object_ratio(const struct psim_result *r)
{
	return r->reqs ? (double)r->hits / (double)r->reqs : 0;
}

double psim_byte_ratio(const struct psim_result *r)
{
	return r->req_bytes ? (double)r->hit_bytes / (double)r->req_bytes : 0;
}

double psim_saved_per_byte(const struct psim_result *r, uint64_t capacity)
{
	return capacity ? (double)r->saved / (double)capacity : 0;
}

/* ---- intrusive lists over object ids; list heads are extra nodes at nobj + k ---- */

struct lists {
	uint32_t *prev, *next;
	uint32_t n; /* first head node */
};

static int lists_init(struct lists *l, uint32_t nobj, uint32_t heads)
{
	l->n = nobj;
	l->prev = malloc((size_t)(nobj + heads) * sizeof(uint32_t));
	l->next = malloc((size_t)(nobj + heads) * sizeof(uint32_t));
	if (!l->prev || !l->next) {
		free(l->prev);
		free(l->next);
		return -ENOMEM;
	}
	for (uint32_t h = 0; h < heads; h++)
		l->prev[nobj + h] = l->next[nobj + h] = nobj + h;
	return 0;
}

static void lists_free(struct lists *l)
{
	free(l->prev);
	free(l->next);
}

/* Insert @x right after the head of list @h (the "most recent" end). */
static void push_head(struct lists *l, uint32_t h, uint32_t x)
{
	uint32_t hd = l->n + h, first = l->next[hd];
	l->next[x] = first;
	l->prev[x] = hd;
	l->prev[first] = x;
	l->next[hd] = x;
}

static void unlink_node(struct lists *l, uint32_t x)
{
	l->next[l->prev[x]] = l->next[x];
	l->prev[l->next[x]] = l->prev[x];
}

/* The oldest element of list @h, or UINT32_MAX when it is empty. */
static uint32_t tail_of(const struct lists *l, uint32_t h)
{
	uint32_t hd = l->n + h, t = l->prev[hd];
	return t == hd ? UINT32_MAX : t;
}

static void count(struct psim_result *res, const struct psim_trace *t, uint32_t i, int is_hit, uint8_t *hit,
		  const uint8_t *sel)
{
	if (hit)
		hit[i] = (uint8_t)is_hit;
	if (sel && !sel[i])
		return;
	uint64_t b = t->bytes[t->req[i]], v = t->value ? t->value[t->req[i]] : 0;
	res->reqs++;
	res->req_bytes += b;
	res->req_value = res->req_value + v < res->req_value ? UINT64_MAX : res->req_value + v;
	if (is_hit) {
		res->hits++;
		res->hit_bytes += b;
		res->saved = res->saved + v < res->saved ? UINT64_MAX : res->saved + v;
	}
}

/* ---- LRU ---- */

static int run_lru(const struct psim_trace *t, uint64_t cap, uint8_t *hit, const uint8_t *sel, struct psim_result *res)
{
	struct lists l;
	uint8_t *in = calloc(t->nobj ? t->nobj : 1, 1);
	if (!in || lists_init(&l, t->nobj, 1)) {
		free(in);
		return -ENOMEM;
	}
	uint64_t used = 0;
	for (uint32_t i = 0; i < t->nreq; i++) {
		uint32_t o = t->req[i];
		if (in[o]) {
			unlink_node(&l, o);
			push_head(&l, 0, o);
			count(res, t, i, 1, hit, sel);
			continue;
		}
		count(res, t, i, 0, hit, sel);
		if (t->cost[o] > cap)
			continue;
		while (used + t->cost[o] > cap) {
			uint32_t v = tail_of(&l, 0);
			unlink_node(&l, v);
			in[v] = 0;
			used -= t->cost[v];
		}
		push_head(&l, 0, o);
		in[o] = 1;
		used += t->cost[o];
	}
	lists_free(&l);
	free(in);
	return 0;
}

/* ---- S3-FIFO ---- */

enum { Q_NONE = 0, Q_SMALL = 1, Q_MAIN = 2, Q_GHOST = 3 };
enum { L_SMALL = 0, L_MAIN = 1, L_GHOST = 2 };

struct s3 {
	const struct psim_trace *t;
	struct lists l;
	uint8_t *q;        /* Q_* per object */
	uint32_t *freq;
	uint64_t cap, small_cap, main_cap, ghost_cap;
	uint64_t small_used, main_used, ghost_used;
	int has_evicted;
	/* benefit mode (PSIM_BENEFIT) */
	int benefit;
	uint32_t *credit;
	uint8_t *granted;
	uint64_t evict_dens;
};

/* lib/l2/evict.c's arithmetic, exactly: densities in 2^-16 ns per byte, ratios in sixteenths */
#define B_DENS_SHIFT 16
#define B_COST_MAX (1ull << 50)
#define B_R_ONE 16u
#define B_R_HIT_MOVE 32u
#define B_R_KEEP 64u
#define B_R_LOW 1u
#define B_CREDIT_MAX 63u

static uint64_t b_density(uint64_t cost, uint64_t bytes)
{
	if (!cost)
		return 0;
	if (cost > B_COST_MAX)
		cost = B_COST_MAX;
	unsigned __int128 d = ((unsigned __int128)cost << B_DENS_SHIFT) / (bytes ? bytes : 1);
	return d > (UINT64_MAX >> 1) ? (UINT64_MAX >> 1) : d ? (uint64_t)d : 1;
}

static uint64_t b_ratio16(uint64_t dens, uint64_t ed)
{
	if (!dens || !ed)
		return B_R_ONE;
	unsigned __int128 r = ((unsigned __int128)dens * B_R_ONE) / ed;
	return r > (1ull << 32) ? (1ull << 32) : (uint64_t)r;
}

static uint32_t b_credit(uint64_t dens, uint64_t ed)
{
	uint64_t r = b_ratio16(dens, ed);
	if (r < B_R_HIT_MOVE)
		return 0;
	r = r / B_R_ONE - 1;
	return r > B_CREDIT_MAX ? B_CREDIT_MAX : (uint32_t)r;
}

static uint64_t s3_dens(const struct s3 *s, uint32_t o)
{
	return s->benefit && s->t->value ? b_density(s->t->value[o], s->t->cost[o]) : 0;
}

static void s3_note_evicted(struct s3 *s, uint32_t o)
{
	uint64_t dens = s3_dens(s, o), d = s->evict_dens;
	if (!dens)
		return;
	s->evict_dens = !d ? dens : dens >= d ? d + ((dens - d) >> 3) : d - ((d - dens) >> 3);
}

static void s3_ghost_insert(struct s3 *s, uint32_t o)
{
	uint64_t c = s->t->cost[o];
	if (c > s->ghost_cap)
		return;
	while (s->ghost_used + c > s->ghost_cap) {
		uint32_t v = tail_of(&s->l, L_GHOST);
		unlink_node(&s->l, v);
		s->q[v] = Q_NONE;
		s->ghost_used -= s->t->cost[v];
	}
	push_head(&s->l, L_GHOST, o);
	s->q[o] = Q_GHOST;
	s->ghost_used += c;
}

static void s3_evict_small(struct s3 *s)
{
	uint32_t v;
	while ((v = tail_of(&s->l, L_SMALL)) != UINT32_MAX) {
		uint64_t c = s->t->cost[v];
		unlink_node(&s->l, v);
		s->small_used -= c;
		uint64_t r16 = b_ratio16(s3_dens(s, v), s->evict_dens);
		if (s->freq[v] >= 2 || (s->benefit && ((s->freq[v] >= 1 && r16 >= B_R_HIT_MOVE) || r16 >= B_R_KEEP))) {
			push_head(&s->l, L_MAIN, v);
			s->q[v] = Q_MAIN;
			s->freq[v] = 0;
			s->main_used += c;
			if (s->benefit) {
				s->credit[v] = b_credit(s3_dens(s, v), s->evict_dens);
				s->granted[v] = 1;
			}
			continue;
		}
		s->q[v] = Q_NONE;
		s3_note_evicted(s, v);
		s3_ghost_insert(s, v);
		return;
	}
}

static void s3_evict_main(struct s3 *s)
{
	uint32_t v;
	while ((v = tail_of(&s->l, L_MAIN)) != UINT32_MAX) {
		unlink_node(&s->l, v);
		if (s->freq[v] >= 1) {
			s->freq[v] = (s->freq[v] < 3 ? s->freq[v] : 3) - 1;
			if (s->benefit) {
				s->credit[v] = b_credit(s3_dens(s, v), s->evict_dens);
				s->granted[v] = 1;
			}
			push_head(&s->l, L_MAIN, v);
			continue;
		}
		if (s->benefit && s->credit[v]) {
			s->credit[v]--;
			push_head(&s->l, L_MAIN, v);
			continue;
		}
		if (s->benefit && !s->granted[v] && b_credit(s3_dens(s, v), s->evict_dens)) {
			s->credit[v] = b_credit(s3_dens(s, v), s->evict_dens) - 1;
			s->granted[v] = 1;
			push_head(&s->l, L_MAIN, v);
			continue;
		}
		s->q[v] = Q_NONE;
		s->main_used -= s->t->cost[v];
		s3_note_evicted(s, v);
		return;
	}
}

static void s3_evict(struct s3 *s)
{
	s->has_evicted = 1;
	if (s->main_used > s->main_cap || s->small_used == 0)
		s3_evict_main(s);
	else
		s3_evict_small(s);
}

static int run_s3fifo(const struct psim_trace *t, uint64_t cap, uint8_t *hit, const uint8_t *sel,
		      struct psim_result *res, int benefit)
{
	struct s3 s = { .t = t, .cap = cap, .benefit = benefit };
	s.small_cap = cap / 10;
	s.main_cap = cap - s.small_cap;
	s.ghost_cap = cap / 10 * 9;
	s.q = calloc(t->nobj ? t->nobj : 1, 1);
	s.freq = calloc(t->nobj ? t->nobj : 1, sizeof(uint32_t));
	s.credit = calloc(t->nobj ? t->nobj : 1, sizeof(uint32_t));
	s.granted = calloc(t->nobj ? t->nobj : 1, 1);
	if (!s.q || !s.freq || !s.credit || !s.granted || lists_init(&s.l, t->nobj, 3)) {
		free(s.q);
		free(s.freq);
		free(s.credit);
		free(s.granted);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->nreq; i++) {
		uint32_t o = t->req[i];
		if (s.q[o] == Q_SMALL || s.q[o] == Q_MAIN) {
			s.freq[o]++;
			count(res, t, i, 1, hit, sel);
			continue;
		}
		count(res, t, i, 0, hit, sel);
		int ghost = s.q[o] == Q_GHOST;
		if (ghost) {
			unlink_node(&s.l, o);
			s.q[o] = Q_NONE;
			s.ghost_used -= t->cost[o];
		}
		uint64_t c = t->cost[o];
		if (c > cap || (!ghost && c >= s.small_cap))
			continue;
		if (benefit && t->value && t->value[o] &&
		    (unsigned __int128)t->value[o] * 1000u < (unsigned __int128)t->bytes[o] * 50u) {
			res->refused++; /* a hit would copy more than recomputing costs */
			continue;
		}
		if (benefit && !ghost && s.has_evicted && s.small_used + s.main_used + c > cap &&
		    b_ratio16(s3_dens(&s, o), s.evict_dens) < B_R_LOW) {
			res->refused++; /* the doorkeeper: remembered, its return is admitted */
			s3_ghost_insert(&s, o);
			continue;
		}
		while (s.small_used + s.main_used + c > cap)
			s3_evict(&s);
		s.freq[o] = 0;
		s.credit[o] = 0;
		s.granted[o] = 0;
		if (ghost || (!s.has_evicted && s.small_used >= s.small_cap)) {
			push_head(&s.l, L_MAIN, o);
			s.q[o] = Q_MAIN;
			s.main_used += c;
			if (benefit && ghost) {
				s.credit[o] = b_credit(s3_dens(&s, o), s.evict_dens);
				s.granted[o] = 1;
			}
		} else {
			push_head(&s.l, L_SMALL, o);
			s.q[o] = Q_SMALL;
			s.small_used += c;
		}
	}
	lists_free(&s.l);
	free(s.q);
	free(s.freq);
	free(s.credit);
	free(s.granted);
	return 0;
}

/* ---- OPT (furthest next use) ---- */

/* A max-heap of (key, object, version) items: OPT pops the furthest next use, GDSF the lowest
 * priority (its key negated). Stale items (an older version) are skipped by the caller. */
struct heap_item {
	double key;
	uint32_t obj;
	uint32_t ver;
};

static void heap_push(struct heap_item *h, size_t *n, struct heap_item it)
{
	size_t i = (*n)++;
	while (i) {
		size_t p = (i - 1) / 2;
		if (h[p].key >= it.key)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = it;
}

static struct heap_item heap_pop(struct heap_item *h, size_t *n)
{
	struct heap_item top = h[0], last = h[--*n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1].key > h[c].key)
			c++;
		if (h[c].key <= last.key)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = last;
	return top;
}

/* next[i]: the index of the next request of request i's object (UINT64_MAX: never again); @seen
 * (nobj entries) is scratch. What OPT and OPT-by-benefit look ahead with. */
static void next_uses(const struct psim_trace *t, size_t nobj, uint64_t *next, uint64_t *seen)
{
	for (size_t o = 0; o < nobj; o++)
		seen[o] = UINT64_MAX;
	for (uint32_t i = t->nreq; i-- > 0;) {
		next[i] = seen[t->req[i]];
		seen[t->req[i]] = i;
	}
}

static int run_opt(const struct psim_trace *t, uint64_t cap, uint8_t *hit, const uint8_t *sel, struct psim_result *res)
{
	size_t nobj = t->nobj ? t->nobj : 1;
	uint64_t *next = malloc((t->nreq ? t->nreq : 1) * sizeof(uint64_t));
	uint64_t *seen = malloc(nobj * sizeof(uint64_t));
	uint32_t *ver = calloc(nobj, sizeof(uint32_t));
	uint8_t *in = calloc(nobj, 1);
	/* each request pushes at most one item: the heap never holds more than nreq + 1 */
	struct heap_item *h = malloc(((size_t)t->nreq + 1) * sizeof(*h));
	int rc = -ENOMEM;
	if (!next || !seen || !ver || !in || !h)
		goto out;
	next_uses(t, nobj, next, seen);
	size_t n = 0;
	uint64_t used = 0;
	for (uint32_t i = 0; i < t->nreq; i++) {
		uint32_t o = t->req[i];
		if (in[o]) {
			count(res, t, i, 1, hit, sel);
			ver[o]++;
			heap_push(h, &n, (struct heap_item){ (double)next[i], o, ver[o] });
			continue;
		}
		count(res, t, i, 0, hit, sel);
		if (next[i] == UINT64_MAX || t->cost[o] > cap)
			continue; /* never again (or never fits): caching it cannot help */
		in[o] = 1;
		used += t->cost[o];
		ver[o]++;
		heap_push(h, &n, (struct heap_item){ (double)next[i], o, ver[o] });
		while (used > cap && n) {
			struct heap_item v = heap_pop(h, &n);
			if (!in[v.obj] || v.ver != ver[v.obj])
				continue; /* stale: the object was requested (or evicted) since */
			in[v.obj] = 0;
			used -= t->cost[v.obj];
		}
	}
	rc = 0;
out:
	free(next);
	free(seen);
	free(ver);
	free(in);
	free(h);
	return rc;
}

/* ---- GDSF ---- */

static int run_gdsf(const struct psim_trace *t, uint64_t cap, uint8_t *hit, const uint8_t *sel, struct psim_result *res)
{
	size_t nobj = t->nobj ? t->nobj : 1;
	uint8_t *in = calloc(nobj, 1);
	uint32_t *f = calloc(nobj, sizeof(uint32_t)), *ver = calloc(nobj, sizeof(uint32_t));
	double *H = calloc(nobj, sizeof(double));
	struct heap_item *h = malloc(((size_t)t->nreq + 1) * sizeof(*h)); /* one push per request at most */
	int rc = -ENOMEM;
	if (!in || !f || !ver || !H || !h)
		goto out;
	size_t n = 0;
	uint64_t used = 0;
	double L = 0;
	for (uint32_t i = 0; i < t->nreq; i++) {
		uint32_t o = t->req[i];
		double v = t->value ? (double)t->value[o] : (double)t->cost[o]; /* no values: GDS-F by bytes */
		if (in[o]) {
			count(res, t, i, 1, hit, sel);
			f[o]++;
		} else {
			count(res, t, i, 0, hit, sel);
			if (t->cost[o] > cap)
				continue;
			f[o] = 1;
			in[o] = 1;
			used += t->cost[o];
		}
		H[o] = L + (double)f[o] * v / (double)(t->cost[o] ? t->cost[o] : 1);
		ver[o]++;
		heap_push(h, &n, (struct heap_item){ -H[o], o, ver[o] });
		while (used > cap && n) {
			struct heap_item it = heap_pop(h, &n);
			if (!in[it.obj] || it.ver != ver[it.obj])
				continue;
			L = -it.key;
			in[it.obj] = 0;
			used -= t->cost[it.obj];
		}
	}
	rc = 0;
out:
	free(in);
	free(f);
	free(ver);
	free(H);
	free(h);
	return rc;
}

/* ---- OPT by benefit (greedy) ---- */

static int run_opt_benefit(const struct psim_trace *t, uint64_t cap, uint8_t *hit, const uint8_t *sel,
			   struct psim_result *res)
{
	size_t nobj = t->nobj ? t->nobj : 1;
	uint64_t *next = malloc((t->nreq ? t->nreq : 1) * sizeof(uint64_t));
	uint64_t *seen = malloc(nobj * sizeof(uint64_t)), *nu = malloc(nobj * sizeof(uint64_t));
	uint32_t *set = malloc(nobj * sizeof(uint32_t));
	uint8_t *in = calloc(nobj, 1);
	int rc = -ENOMEM;
	if (!next || !seen || !nu || !set || !in)
		goto out;
	next_uses(t, nobj, next, seen);
	uint32_t ns = 0;
	uint64_t used = 0;
	for (uint32_t i = 0; i < t->nreq; i++) {
		uint32_t o = t->req[i];
		if (in[o]) {
			count(res, t, i, 1, hit, sel);
			nu[o] = next[i];
			continue;
		}
		count(res, t, i, 0, hit, sel);
		if (next[i] == UINT64_MAX || t->cost[o] > cap)
			continue;
		nu[o] = next[i];
		in[o] = 1;
		used += t->cost[o];
		set[ns++] = o;
		while (used > cap && ns) {
			uint32_t b = 0;
			double bs = 0;
			for (uint32_t k = 0; k < ns; k++) {
				uint32_t v = set[k];
				double val = t->value ? (double)t->value[v] : (double)t->cost[v];
				double sc = nu[v] == UINT64_MAX ? -1.0
								  : val / ((double)(t->cost[v] ? t->cost[v] : 1) * (double)(nu[v] - i));
				if (k == 0 || sc < bs) {
					bs = sc;
					b = k;
				}
			}
			uint32_t v = set[b];
			in[v] = 0;
			used -= t->cost[v];
			set[b] = set[--ns];
		}
	}
	rc = 0;
out:
	free(next);
	free(seen);
	free(nu);
	free(set);
	free(in);
	return rc;
}

int psim_run(enum psim_policy p, const struct psim_trace *t, uint64_t capacity, uint8_t *hit, const uint8_t *sel,
	     struct psim_result *res)
{
	memset(res, 0, sizeof(*res));
	if (!t || (t->nreq && !t->req) || (t->nobj && (!t->cost || !t->bytes)))
		return -EINVAL;
	for (uint32_t i = 0; i < t->nreq; i++)
		if (t->req[i] >= t->nobj)
			return -EINVAL;
	switch (p) {
	case PSIM_LRU: return run_lru(t, capacity, hit, sel, res);
	case PSIM_S3FIFO: return run_s3fifo(t, capacity, hit, sel, res, 0);
	case PSIM_OPT: return run_opt(t, capacity, hit, sel, res);
	case PSIM_GDSF: return run_gdsf(t, capacity, hit, sel, res);
	case PSIM_BENEFIT: return run_s3fifo(t, capacity, hit, sel, res, 1);
	case PSIM_OPT_BENEFIT: return run_opt_benefit(t, capacity, hit, sel, res);
	case PSIM_COUNT: break;
	}
	return -EINVAL;
}
