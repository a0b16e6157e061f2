/*
 * examples/llama/cache.c — see cache.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "layout.h"

uint64_t llc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int file_digest(const char *path, struct sc_digest *d, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || st.st_size <= 0) {
		close(fd);
		return -EINVAL;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	*d = sc_digest_of(p, (size_t)st.st_size);
	*size = (uint64_t)st.st_size;
	munmap(p, (size_t)st.st_size);
	return 0;
}

int llc_identify(struct llc *c, const char *model_path, const struct eng *e, const struct llc_opts *o)
{
	memset(c, 0, sizeof(*c));
	uint64_t size = 0;
	int rc = file_digest(model_path, &c->model_digest, &size);
	if (rc)
		return rc;
	char hex[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(c->model_digest, hex);
	/* the file's bytes name the model: a renamed copy is the same model, a regenerated one is not */
	snprintf(c->model_id, sizeof(c->model_id), "gguf-xxh128:%s:%llu", hex, (unsigned long long)size);
	/* what decides whether bytes of llama_state_seq_get_data fit this engine */
	snprintf(c->state_id, sizeof(c->state_id), "llama_state_seq/v%d:%s+logits/f32+trailer/v1%s", eng_state_version(),
		 e->desc, o->token_major ? ",layout=token-major" : "");
	c->token_major = o->token_major;
	c->block = e->block;
	struct sc_digest f = sc_digest_of(c->state_id, strlen(c->state_id));
	c->format = f.lo;
	/* The L3 prefix index is keyed by namespace and tokens only: a namespace per model and
	 * state format keeps one model's prefixes from being offered to another. */
	struct sc_digest both = sc_digest_sections(c->model_id, strlen(c->model_id), c->state_id, strlen(c->state_id));
	if (o->ns_raw)
		snprintf(c->ns, sizeof(c->ns), "%s", o->ns);
	else
		snprintf(c->ns, sizeof(c->ns), "%s@%016llx", o->ns, (unsigned long long)both.lo);
	return 0;
}

/*
 * Touch every page of the arena's payload memory once, now. On this machine (a VM) the first read
 * of a shared page by a process costs ~20 us even after MAP_POPULATE or MADV_POPULATE_READ/WRITE
 * (measured: 2.7 s for 512 MiB of 4 KiB pages, then 20 ms), so a worker's first restore of a state
 * another worker exported paid that per page: 24 576 of them for a 96 MiB state, more than
 * llama.cpp's import. A long-lived worker reaches the same steady state as it reuses heap blocks;
 * this reaches it at start-up (a second per GiB of 4 KiB pages; nothing on 2 MiB pages).
 */
static void prefault(struct llc *c)
{
	struct sc_arena_extent x[4];
	int n = sc_arena_extents(c->arena, x, 4);
	uint64_t t0 = llc_now_ns();
	volatile uint8_t sink = 0;
	for (int i = 0; i < n && i < 4; i++)
		for (uint64_t off = 0; off < x[i].bytes; off += 4096)
			sink += ((const volatile uint8_t *)x[i].base)[off];
	(void)sink;
	c->prefault_ns = llc_now_ns() - t0;
}

int llc_open(struct llc *c, const struct llc_opts *o, const char **what)
{
	int rc;
	*what = "sc_arena_open";
	if ((rc = sc_arena_open(o->arena, &c->arena)))
		return rc;
	if (o->prefault)
		prefault(c);
	*what = "sc_stage_open";
	if ((rc = sc_stage_open(c->arena, c->model_id, c->state_id, &c->stage)))
		return rc;
	*what = "sc_l3_open";
	struct sc_l3_opts lo = { 0 };
	if ((rc = sc_l3_open(o->l3_dir, &lo, &c->l3)))
		return rc;
	*what = "sc_l3_bind_arena";
	if ((rc = sc_l3_bind_arena(c->l3, c->arena)))
		return rc;
	/* every ring held by a producer or by records nobody consumed yet: serve without streaming
	 * (the worker says so) rather than not at all */
	if (o->ring && (rc = sc_ring_open(c->arena, &c->ring)) && rc != -ENOSPC) {
		*what = "sc_ring_open";
		return rc;
	}
	return 0;
}

void llc_close(struct llc *c)
{
	if (c->ring)
		sc_ring_close(c->ring);
	sc_l3_close(c->l3);
	sc_stage_close(c->stage);
	sc_arena_close(c->arena);
	free(c->buf);
	free(c->tmp);
	c->ring = NULL, c->l3 = NULL, c->stage = NULL, c->arena = NULL, c->buf = NULL, c->tmp = NULL;
}

static int grow(uint8_t **b, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	uint8_t *nb = realloc(*b, need);
	if (!nb)
		return -ENOMEM;
	*b = nb, *cap = need;
	return 0;
}

/* The trailer of a stored wire, if it is this engine's; NULL otherwise. */
static const struct llc_trailer *trailer_ok(const struct llc *c, const struct eng *e, const uint8_t *wire,
					    uint64_t len, uint32_t tokens)
{
	if (len < sizeof(struct llc_trailer))
		return NULL;
	struct llc_trailer t;
	memcpy(&t, wire + len - sizeof(t), sizeof(t));
	static struct llc_trailer ok;
	if (t.magic != LLC_TRAILER_MAGIC || t.version != 1 || t.token_count != tokens ||
	    t.n_vocab != (uint32_t)e->n_vocab || t.logits_bytes != (uint64_t)e->n_vocab * 4 ||
	    !sc_digest_equal(t.model, c->model_digest) || t.format != c->format ||
	    t.state_bytes > len || len - t.state_bytes != t.logits_bytes + sizeof(t))
		return NULL;
	ok = t;
	return &ok;
}

int llc_restore(struct llc *c, struct eng *e, const int32_t *tok, uint32_t n, int calibrate, struct llc_restored *out)
{
	memset(out, 0, sizeof(*out));
	struct sc_restore r;
	int rc = sc_restore(c->stage, c->l3, c->ns, tok, n, SC_RESTORE_WAIT, &r);
	if (rc == -ENOENT || rc == 0) {
		eng_reset(e);
		return 0;
	}
	if (rc < 0) {
		eng_reset(e);
		return rc;
	}
	out->source = r.source;
	out->promoted = r.promoted;
	out->locate_ns = r.locate_ns, out->lookup_ns = r.lookup_ns, out->fill_ns = r.fill_ns;
	out->restore_ns = r.total_ns;
	out->digest = r.digest;
	const uint8_t *wire = r.sec[0];
	uint64_t len = r.sec_len[0];
	const struct llc_trailer *t = r.kind == SC_PAYLOAD_FULL_STATE && !r.sec_len[1] ?
					      trailer_ok(c, e, wire, len, (uint32_t)rc) : NULL;
	if (!t) {
		/* another model's or format's state under our namespace: never import it */
		sc_restore_release(&r);
		c->refused++;
		out->refused = 1;
		out->source = 0;
		eng_reset(e);
		return 0;
	}
	uint64_t t0 = llc_now_ns();
	const uint8_t *state = wire;
	int bad = 0;
	if (c->token_major) { /* back into llama.cpp's form: one copy */
		bad = grow(&c->tmp, &c->tmp_cap, t->state_bytes) ||
		      layout_from_tokens(wire, t->state_bytes, c->block, c->tmp);
		state = c->tmp;
	}
	bad = bad || eng_state_set(e, state, t->state_bytes, rc, (const float *)(const void *)(wire + t->state_bytes));
	out->import_ns = llc_now_ns() - t0;
	out->state_bytes = t->state_bytes;
	if (!bad && calibrate) {
		/* the floor: the same bytes copied at memcpy speed, and llama.cpp's own import of them
		 * from a private buffer */
		void *priv = malloc(len);
		if (priv) {
			memcpy(priv, wire, len); /* faults the pages in and warms the source, outside the clock */
			uint64_t a = llc_now_ns();
			memcpy(priv, wire, len);
			uint64_t b = llc_now_ns();
			bad = eng_state_set(e, priv, t->state_bytes, rc, (const float *)(void *)((uint8_t *)priv + t->state_bytes));
			uint64_t d = llc_now_ns();
			out->memcpy_ns = b - a, out->set_private_ns = d - b;
			free(priv);
		}
	}
	sc_restore_release(&r);
	if (bad) {
		eng_reset(e);
		c->refused++;
		out->refused = 1;
		out->source = 0;
		return 0;
	}
	out->tokens = (uint32_t)rc;
	return 0;
}

int llc_export(struct llc *c, struct eng *e, const int32_t *tok, uint64_t *get_ns, uint64_t *admit_ns,
	       uint64_t *put_ns)
{
	uint64_t t0 = llc_now_ns();
	size_t sz = eng_state_size(e), lb = (size_t)e->n_vocab * 4, need = sz + lb + sizeof(struct llc_trailer);
	if (grow(&c->buf, &c->cap, need) || (c->token_major && grow(&c->tmp, &c->tmp_cap, sz)))
		return -ENOMEM;
	size_t got = eng_state_get(e, c->token_major ? c->tmp : c->buf, sz);
	if (got == 0 || got > sz)
		return -EIO;
	if (c->token_major && layout_to_tokens(c->tmp, got, c->block, c->buf))
		return -EPROTO; /* not the one-sequence form layout.h knows */
	memcpy(c->buf + got, e->logits, lb);
	struct llc_trailer t = { .magic = LLC_TRAILER_MAGIC, .version = 1, .token_count = (uint32_t)e->n_past,
				 .n_vocab = (uint32_t)e->n_vocab, .state_bytes = got, .logits_bytes = lb,
				 .model = c->model_digest, .format = c->format };
	memcpy(c->buf + got + lb, &t, sizeof(t));
	uint64_t wire = got + lb + sizeof(t);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { c->buf }, .sec_len = { wire } };
	uint64_t t1 = llc_now_ns();
	int rc = sc_l2_admit(c->stage, c->ns, tok, (uint32_t)e->n_past, sc_digest_of(c->buf, wire), &pl, SC_ORIGIN_DIRECT);
	if (rc)
		c->admit_fail++; /* L2 may refuse (no room, over budget): L3 still keeps it */
	uint64_t t2 = llc_now_ns();
	struct sc_l3_put_args a = { .model_identity = c->model_id, .state_identity = c->state_id, .ns = c->ns,
				    .tokens = tok, .token_count = (uint32_t)e->n_past, .payload = &pl };
	int prc = sc_l3_put(c->l3, &a, NULL);
	uint64_t t3 = llc_now_ns();
	if (get_ns)
		*get_ns += t1 - t0;
	if (admit_ns)
		*admit_ns += t2 - t1;
	if (put_ns)
		*put_ns += t3 - t2;
	if (prc) {
		c->put_fail++;
		return prc;
	}
	c->exports++;
	c->export_bytes += wire;
	return 0;
}
