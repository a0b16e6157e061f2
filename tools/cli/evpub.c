/*
 * tools/cli/evpub.c — the publisher's model (entries and reference-counted blocks per medium) and the
 * msgpack encoding of vLLM's KVEventBatch. See tools/cli/evpub.h and docs/ROUTING.md for the format.
 *
 * Tables are open addressing with linear probing and backward-shift deletion (no tombstones), so
 * a long-running publisher's tables never fill with dead slots; they double at 1/2 load.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evpub.h"

/* ---- msgpack, the subset the wire format needs ---- */

struct mp {
	uint8_t *b;
	size_t n, cap;
	int oom;
};

static void mp_put(struct mp *m, const void *p, size_t len)
{
	if (m->oom)
		return;
	if (m->n + len > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		while (cap < m->n + len)
			cap *= 2;
		uint8_t *b = realloc(m->b, cap);
		if (!b) {
			m->oom = 1;
			return;
		}
		m->b = b;
		m->cap = cap;
	}
	memcpy(m->b + m->n, p, len);
	m->n += len;
}

static void mp_be(struct mp *m, uint8_t tag, uint64_t v, int bytes)
{
	uint8_t t[9];
	t[0] = tag;
	for (int i = 0; i < bytes; i++)
		t[1 + i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	mp_put(m, t, (size_t)bytes + 1);
}

static void mp_array(struct mp *m, uint32_t n)
{
	if (n < 16) {
		uint8_t t = (uint8_t)(0x90 | n);
		mp_put(m, &t, 1);
	} else if (n < 65536) {
		mp_be(m, 0xdc, n, 2);
	} else {
		mp_be(m, 0xdd, n, 4);
	}
}

static void mp_str(struct mp *m, const char *s)
{
	size_t n = strlen(s);
	if (n < 32) {
		uint8_t t = (uint8_t)(0xa0 | n);
		mp_put(m, &t, 1);
	} else if (n < 256) {
		mp_be(m, 0xd9, n, 1);
	} else if (n < 65536) {
		mp_be(m, 0xda, n, 2);
	} else {
		mp_be(m, 0xdb, n, 4);
	}
	mp_put(m, s, n);
}

static void mp_uint(struct mp *m, uint64_t v)
{
	if (v < 128) {
		uint8_t t = (uint8_t)v;
		mp_put(m, &t, 1);
	} else if (v <= 0xff) {
		mp_be(m, 0xcc, v, 1);
	} else if (v <= 0xffff) {
		mp_be(m, 0xcd, v, 2);
	} else if (v <= 0xffffffffu) {
		mp_be(m, 0xce, v, 4);
	} else {
		mp_be(m, 0xcf, v, 8);
	}
}

static void mp_int(struct mp *m, int64_t v)
{
	if (v >= 0) {
		mp_uint(m, (uint64_t)v);
	} else if (v >= -32) {
		uint8_t t = (uint8_t)(0xe0 | (v & 0x1f));
		mp_put(m, &t, 1);
	} else if (v >= -128) {
		mp_be(m, 0xd0, (uint64_t)v & 0xff, 1);
	} else if (v >= -32768) {
		mp_be(m, 0xd1, (uint64_t)v & 0xffff, 2);
	} else if (v >= INT32_MIN) {
		mp_be(m, 0xd2, (uint64_t)v & 0xffffffffu, 4);
	} else {
		mp_be(m, 0xd3, (uint64_t)v, 8);
	}
}

static void mp_map(struct mp *m, uint32_t n)
{
	if (n < 16) {
		uint8_t t = (uint8_t)(0x80 | n);
		mp_put(m, &t, 1);
	} else {
		mp_be(m, 0xde, n, 2);
	}
}

static void mp_nil(struct mp *m)
{
	uint8_t t = 0xc0;
	mp_put(m, &t, 1);
}

static void mp_f64(struct mp *m, double d)
{
	uint64_t v;
	memcpy(&v, &d, 8);
	mp_be(m, 0xcb, v, 8);
}

/* ---- tables ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

struct ent {
	struct sc_key key;
	struct sc_digest dg;
	uint32_t nblocks;            /* 0: empty slot (entries without a whole block are not kept) */
	uint32_t ntok;
	uint64_t *hashes;
};

struct blk {
	uint64_t hash;
	uint32_t refs;               /* 0: empty slot */
	uint32_t mark;               /* the snapshot that last wrote it */
	int32_t *tokens;             /* block_size ids */
};

struct ents {
	struct ent *s;
	uint64_t cap, n;             /* cap a power of two */
};

struct blks {
	struct blk *s;
	uint64_t cap, n;
};

enum { OP_STORED = 1, OP_REMOVED = 2, OP_CLEARED = 3 };
struct op {
	int kind, medium, has_parent;
	uint64_t parent;
	uint32_t nh;
	uint64_t *hashes;
	int32_t *tokens;             /* nh * block_size (STORED) */
};

struct evpub {
	struct evpub_opts o;
	struct ents e[EVPUB_MEDIA];
	struct blks b[EVPUB_MEDIA];
	struct op *ops;
	uint64_t nops, capops;
	uint32_t snap;
};

static uint64_t ent_slot(const struct ents *t, struct sc_key k)
{
	return mix(k.lo ^ mix(k.hi)) & (t->cap - 1);
}

static struct ent *ent_find(const struct ents *t, struct sc_key k)
{
	if (!t->cap)
		return NULL;
	for (uint64_t i = ent_slot(t, k);; i = (i + 1) & (t->cap - 1)) {
		struct ent *e = &t->s[i];
		if (!e->nblocks)
			return NULL;
		if (e->key.lo == k.lo && e->key.hi == k.hi)
			return e;
	}
}

static int ents_grow(struct ents *t)
{
	uint64_t cap = t->cap ? t->cap * 2 : 256;
	struct ent *s = calloc(cap, sizeof(*s));
	if (!s)
		return -ENOMEM;
	struct ents nt = { s, cap, t->n };
	for (uint64_t i = 0; i < t->cap; i++)
		if (t->s[i].nblocks) {
			uint64_t j = ent_slot(&nt, t->s[i].key);
			while (s[j].nblocks)
				j = (j + 1) & (cap - 1);
			s[j] = t->s[i];
		}
	free(t->s);
	*t = nt;
	return 0;
}

/* A free slot for @k (not present); grows first when half full. */
static struct ent *ent_insert(struct ents *t, struct sc_key k)
{
	if ((t->n + 1) * 2 > t->cap && ents_grow(t))
		return NULL;
	uint64_t i = ent_slot(t, k);
	while (t->s[i].nblocks)
		i = (i + 1) & (t->cap - 1);
	t->n++;
	t->s[i].key = k;
	return &t->s[i];
}

/* Remove the slot @e (its contents already released): shift the run after it back. */
static void ent_delete(struct ents *t, struct ent *e)
{
	uint64_t i = (uint64_t)(e - t->s), mask = t->cap - 1;
	t->s[i].nblocks = 0;
	t->n--;
	for (uint64_t j = (i + 1) & mask; t->s[j].nblocks; j = (j + 1) & mask) {
		uint64_t home = ent_slot(t, t->s[j].key);
		/* move j to the hole i when its home is not in (i, j] (cyclically) */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->s[i] = t->s[j];
			t->s[j].nblocks = 0;
			i = j;
		}
	}
}

static uint64_t blk_slot(const struct blks *t, uint64_t h)
{
	return mix(h) & (t->cap - 1);
}

static struct blk *blk_find(const struct blks *t, uint64_t h)
{
	if (!t->cap)
		return NULL;
	for (uint64_t i = blk_slot(t, h);; i = (i + 1) & (t->cap - 1)) {
		struct blk *b = &t->s[i];
		if (!b->refs)
			return NULL;
		if (b->hash == h)
			return b;
	}
}

static int blks_grow(struct blks *t)
{
	uint64_t cap = t->cap ? t->cap * 2 : 1024;
	struct blk *s = calloc(cap, sizeof(*s));
	if (!s)
		return -ENOMEM;
	struct blks nt = { s, cap, t->n };
	for (uint64_t i = 0; i < t->cap; i++)
		if (t->s[i].refs) {
			uint64_t j = blk_slot(&nt, t->s[i].hash);
			while (s[j].refs)
				j = (j + 1) & (cap - 1);
			s[j] = t->s[i];
		}
	free(t->s);
	*t = nt;
	return 0;
}

static struct blk *blk_insert(struct blks *t, uint64_t h)
{
	if ((t->n + 1) * 2 > t->cap && blks_grow(t))
		return NULL;
	uint64_t i = blk_slot(t, h);
	while (t->s[i].refs)
		i = (i + 1) & (t->cap - 1);
	t->n++;
	t->s[i].hash = h;
	t->s[i].mark = 0;
	t->s[i].tokens = NULL;
	return &t->s[i];
}

static void blk_delete(struct blks *t, struct blk *b)
{
	uint64_t i = (uint64_t)(b - t->s), mask = t->cap - 1;
	free(b->tokens);
	t->s[i].refs = 0;
	t->n--;
	for (uint64_t j = (i + 1) & mask; t->s[j].refs; j = (j + 1) & mask) {
		uint64_t home = blk_slot(t, t->s[j].hash);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->s[i] = t->s[j];
			t->s[j].refs = 0;
			i = j;
		}
	}
}

/* ---- pending events ---- */

static struct op *op_add(struct evpub *p, int kind, int medium)
{
	if (p->nops == p->capops) {
		uint64_t cap = p->capops ? p->capops * 2 : 64;
		struct op *o = realloc(p->ops, cap * sizeof(*o));
		if (!o)
			return NULL;
		p->ops = o;
		p->capops = cap;
	}
	struct op *o = &p->ops[p->nops++];
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->medium = medium;
	return o;
}

static void ops_free(struct evpub *p)
{
	for (uint64_t i = 0; i < p->nops; i++) {
		free(p->ops[i].hashes);
		free(p->ops[i].tokens);
	}
	p->nops = 0;
}

/* A BlockStored of @nh blocks (hashes @h, tokens @t) after @parent (when @has_parent). */
static int op_stored(struct evpub *p, int medium, int has_parent, uint64_t parent, const uint64_t *h, const int32_t *t,
		     uint32_t nh)
{
	size_t bs = p->o.block_size;
	struct op *o = op_add(p, OP_STORED, medium);
	if (!o)
		return -ENOMEM;
	o->has_parent = has_parent;
	o->parent = parent;
	o->hashes = malloc(nh * sizeof(*h));
	o->tokens = malloc(nh * bs * sizeof(*t));
	if (!o->hashes || !o->tokens)
		return -ENOMEM; /* freed with the batch */
	o->nh = nh;
	memcpy(o->hashes, h, nh * sizeof(*h));
	memcpy(o->tokens, t, nh * bs * sizeof(*t));
	return 0;
}

/* ---- the model ---- */

struct evpub *evpub_new(const struct evpub_opts *o)
{
	struct evpub *p = calloc(1, sizeof(*p));
	if (p)
		p->o = *o;
	return p;
}

static void forget_all(struct evpub *p)
{
	for (int m = 0; m < EVPUB_MEDIA; m++) {
		for (uint64_t i = 0; i < p->e[m].cap; i++)
			if (p->e[m].s[i].nblocks)
				free(p->e[m].s[i].hashes);
		for (uint64_t i = 0; i < p->b[m].cap; i++)
			if (p->b[m].s[i].refs)
				free(p->b[m].s[i].tokens);
		free(p->e[m].s);
		free(p->b[m].s);
		memset(&p->e[m], 0, sizeof(p->e[m]));
		memset(&p->b[m], 0, sizeof(p->b[m]));
	}
}

void evpub_free(struct evpub *p)
{
	if (!p)
		return;
	forget_all(p);
	ops_free(p);
	free(p->ops);
	free(p);
}

void evpub_clear(struct evpub *p)
{
	forget_all(p);
	ops_free(p);
	(void)op_add(p, OP_CLEARED, 0); /* the array has room: it was just emptied (or is allocated here) */
}

int evpub_set(struct evpub *p, int medium, struct sc_key key, struct sc_digest dg, const int32_t *tokens, uint32_t n)
{
	struct ents *et = &p->e[medium];
	struct blks *bt = &p->b[medium];
	uint32_t bs = p->o.block_size, nb = n / bs;
	struct ent *e = ent_find(et, key);
	uint64_t *nh = NULL;
	if (nb) {
		if (!(nh = malloc(nb * sizeof(*nh))))
			return -ENOMEM;
		(void)sc_block_hashes(tokens, n, bs, 0, nh, nb);
	}
	if (e && e->nblocks == nb && !memcmp(e->hashes, nh, nb * sizeof(*nh))) {
		e->dg = dg; /* the same blocks (a replacement of the same prefix): nothing to say */
		e->ntok = n;
		free(nh);
		return 0;
	}
	/* the new blocks first: blocks both hold never look removed */
	uint32_t run = 0;
	for (uint32_t i = 0; i < nb; i++) {
		struct blk *b = blk_find(bt, nh[i]);
		int fresh = !b;
		if (fresh) {
			if (!(b = blk_insert(bt, nh[i])) || !(b->tokens = malloc(bs * sizeof(int32_t)))) {
				if (b)
					blk_delete(bt, b);
				free(nh);
				return -ENOMEM;
			}
			memcpy(b->tokens, tokens + (size_t)i * bs, bs * sizeof(int32_t));
		}
		b->refs++;
		if (fresh) {
			run++;
		} else if (run) {
			uint32_t f = i - run;
			if (op_stored(p, medium, f > 0, f ? nh[f - 1] : 0, nh + f, tokens + (size_t)f * bs, run))
				return free(nh), -ENOMEM;
			run = 0;
		}
	}
	if (run) {
		uint32_t f = nb - run;
		if (op_stored(p, medium, f > 0, f ? nh[f - 1] : 0, nh + f, tokens + (size_t)f * bs, run))
			return free(nh), -ENOMEM;
	}
	if (e) {
		struct op *o = NULL;
		for (uint32_t i = 0; i < e->nblocks; i++) {
			struct blk *b = blk_find(bt, e->hashes[i]);
			if (!b || --b->refs)
				continue;
			blk_delete(bt, b);
			if (!o) {
				if (!(o = op_add(p, OP_REMOVED, medium)) ||
				    !(o->hashes = malloc(e->nblocks * sizeof(uint64_t))))
					return free(nh), -ENOMEM;
			}
			o->hashes[o->nh++] = e->hashes[i];
		}
		free(e->hashes);
		e->hashes = NULL;
		if (!nb) {
			ent_delete(et, e);
			return 0;
		}
	} else if (nb && !(e = ent_insert(et, key))) {
		free(nh);
		return -ENOMEM;
	}
	if (e) {
		e->hashes = nh;
		e->nblocks = nb;
		e->dg = dg;
		e->ntok = n;
	}
	return 0;
}

int64_t evpub_keys(const struct evpub *p, int medium, struct evpub_key **out)
{
	const struct ents *t = &p->e[medium];
	*out = malloc((t->n ? t->n : 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	uint64_t k = 0;
	for (uint64_t i = 0; i < t->cap; i++)
		if (t->s[i].nblocks)
			(*out)[k++] = (struct evpub_key){ t->s[i].key, t->s[i].dg };
	return (int64_t)k;
}

uint64_t evpub_pending(const struct evpub *p)
{
	return p->nops;
}

uint64_t evpub_entries(const struct evpub *p, int medium)
{
	return p->e[medium].n;
}

uint64_t evpub_blocks(const struct evpub *p, int medium)
{
	return p->b[medium].n;
}

/* ---- encoding ---- */

/* An event's head: the tagged array [tag, fields...] (vLLM's array_like structs), or with
 * map_events the map {"type": tag, field: value...}; then each field through enc_field. */
static void enc_event(const struct evpub *p, struct mp *m, const char *tag, uint32_t nfields)
{
	if (p->o.map_events) {
		mp_map(m, nfields + 1);
		mp_str(m, "type");
	} else {
		mp_array(m, nfields + 1);
	}
	mp_str(m, tag);
}

static void enc_field(const struct evpub *p, struct mp *m, const char *name)
{
	if (p->o.map_events)
		mp_str(m, name);
}

/* BlockStored: block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name
 * (the field later vLLM added without a default: decoders of the six-field type ignore a trailing
 * element, decoders of the seven-field type need it); the token ids of block i from @tok(ctx, i) */
static void enc_stored(const struct evpub *p, struct mp *m, int medium, int has_parent, uint64_t parent,
		       const uint64_t *h, uint32_t nh, const int32_t *(*tok)(const void *ctx, uint32_t i), const void *ctx)
{
	uint32_t bs = p->o.block_size;
	enc_event(p, m, "BlockStored", 7);
	enc_field(p, m, "block_hashes");
	mp_array(m, nh);
	for (uint32_t i = 0; i < nh; i++)
		mp_uint(m, h[i]);
	enc_field(p, m, "parent_block_hash");
	if (has_parent)
		mp_uint(m, parent);
	else
		mp_nil(m);
	enc_field(p, m, "token_ids");
	mp_array(m, nh * bs);
	for (uint32_t i = 0; i < nh; i++) {
		const int32_t *t = tok(ctx, i);
		for (uint32_t k = 0; k < bs; k++)
			mp_int(m, t[k]);
	}
	enc_field(p, m, "block_size");
	mp_uint(m, bs);
	enc_field(p, m, "lora_id");
	if (p->o.has_lora_id)
		mp_int(m, p->o.lora_id);
	else
		mp_nil(m);
	enc_field(p, m, "medium");
	mp_str(m, p->o.medium[medium]);
	enc_field(p, m, "lora_name");
	if (p->o.lora_name)
		mp_str(m, p->o.lora_name);
	else
		mp_nil(m);
}

static void enc_cleared(const struct evpub *p, struct mp *m)
{
	enc_event(p, m, "AllBlocksCleared", 0);
}

struct op_tok {
	const struct op *o;
	uint32_t bs;
};
static const int32_t *op_tokens(const void *ctx, uint32_t i)
{
	const struct op_tok *t = ctx;
	return t->o->tokens + (size_t)i * t->bs;
}

static void enc_op(const struct evpub *p, struct mp *m, const struct op *o)
{
	if (o->kind == OP_CLEARED) {
		enc_cleared(p, m);
	} else if (o->kind == OP_REMOVED) {
		enc_event(p, m, "BlockRemoved", 2);
		enc_field(p, m, "block_hashes");
		mp_array(m, o->nh);
		for (uint32_t i = 0; i < o->nh; i++)
			mp_uint(m, o->hashes[i]);
		enc_field(p, m, "medium");
		mp_str(m, p->o.medium[o->medium]);
	} else {
		struct op_tok t = { o, p->o.block_size };
		enc_stored(p, m, o->medium, o->has_parent, o->parent, o->hashes, o->nh, op_tokens, &t);
	}
}

/* KVEventBatch: [ts, events] or [ts, events, data_parallel_rank] */
static void enc_head(const struct evpub *p, struct mp *m, double ts, uint64_t nevents)
{
	mp_array(m, p->o.has_dp_rank ? 3 : 2);
	mp_f64(m, ts);
	mp_array(m, (uint32_t)nevents);
}

static int64_t enc_done(const struct evpub *p, struct mp *m, uint8_t **buf)
{
	if (p->o.has_dp_rank)
		mp_int(m, p->o.dp_rank);
	if (m->oom) {
		free(m->b);
		return -ENOMEM;
	}
	*buf = m->b;
	return (int64_t)m->n;
}

int64_t evpub_flush(struct evpub *p, double ts, uint8_t **buf)
{
	struct mp m = { 0 };
	enc_head(p, &m, ts, p->nops);
	for (uint64_t i = 0; i < p->nops; i++)
		enc_op(p, &m, &p->ops[i]);
	ops_free(p);
	return enc_done(p, &m, buf);
}

struct blk_tok {
	const struct blks *t;
	const uint64_t *h;
};
static const int32_t *blk_tokens(const void *ctx, uint32_t i)
{
	const struct blk_tok *t = ctx;
	return blk_find(t->t, t->h[i])->tokens; /* held: the snapshot found it */
}

int64_t evpub_snapshot(struct evpub *p, double ts, uint8_t **buf)
{
	/* the runs are found first (to know how many events there are), then encoded */
	struct run {
		int medium, has_parent;
		uint64_t parent;
		const uint64_t *h;
		uint32_t nh;
	} *runs = NULL;
	uint64_t nruns = 0, cap = 0;
	if (++p->snap == 0)
		p->snap = 1; /* marks 0 mean "never": a wrap starts them again */
	for (int md = 0; md < EVPUB_MEDIA; md++) {
		struct ents *et = &p->e[md];
		for (uint64_t i = 0; i < et->cap; i++) {
			struct ent *e = &et->s[i];
			uint32_t start = 0;
			for (uint32_t j = 0; j <= e->nblocks; j++) {
				struct blk *b = j < e->nblocks ? blk_find(&p->b[md], e->hashes[j]) : NULL;
				int fresh = b && b->mark != p->snap;
				if (fresh) {
					b->mark = p->snap;
					continue;
				}
				if (j > start) {
					if (nruns == cap) {
						cap = cap ? cap * 2 : 256;
						struct run *r = realloc(runs, cap * sizeof(*r));
						if (!r) {
							free(runs);
							return -ENOMEM;
						}
						runs = r;
					}
					runs[nruns++] = (struct run){ md, start > 0, start ? e->hashes[start - 1] : 0,
								      e->hashes + start, j - start };
				}
				start = j + 1;
			}
		}
	}
	struct mp m = { 0 };
	enc_head(p, &m, ts, nruns + 1);
	enc_cleared(p, &m);
	for (uint64_t r = 0; r < nruns; r++) {
		struct blk_tok t = { &p->b[runs[r].medium], runs[r].h };
		enc_stored(p, &m, runs[r].medium, runs[r].has_parent, runs[r].parent, runs[r].h, runs[r].nh, blk_tokens,
			   &t);
	}
	free(runs);
	return enc_done(p, &m, buf);
}
