/*
 * lib/l3/lru.c — the last-use order of a shared L3 directory, as the janitor sees it: the table
 * DIR/lru that each pass inherits and writes back, and the access segments DIR/access/<writer>.<n>
 * that every host's fills and repeated puts append to (lib/l3/hosts.c writes them).
 *
 * Only the janitor reads and writes these, under its lease (lib/l3/janitor.c). DIR/lru is written
 * whole (tmp + fsync + rename, after a fence check), so a reader sees one table or the next; it is
 * validated (magic, version, size, XXH3-64 of the entries) and a bad one is ignored: the order
 * then starts over from mtimes and the segments. Segment records carry their own checksum, so the
 * torn tail of a writer killed mid-write is skipped. Merging is a maximum per digest: merging a
 * segment twice (a janitor died after writing the table, before removing the segment) is harmless.
 * A segment is closed (removable once the table that merged it is written) when its writer has
 * moved on to a newer one, or has let go of it (its writer holds an OFD lock on it while it
 * appends): lib/l3/hosts.c's l3_left_over.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "../xxh.h"

#include "types.h"
#include "files.h"
#include "hosts.h"
#include "lru.h"
#include "write.h"
#include "../../shm/arena.h"

#define LRU_MAGIC 0x0a55524c33435350ull /* "PSC3LRU\n" */
#define SEGMENT_READ_MAX (1u << 20)     /* more than a segment can be: the rest is ignored */

struct lru_hdr {
	uint64_t magic;
	uint32_t version, reserved;
	uint64_t count;                /* entries of struct l3_lru_ent that follow */
	uint64_t check;                /* XXH3-64 of the entries */
};
_Static_assert(sizeof(struct lru_hdr) == 32 && sizeof(struct l3_lru_ent) == 24, "lru table layout");


/* ---- the map: open addressing, digest -> last use (0: empty slot) ---- */

static size_t slot(const struct l3_lru *m, uint64_t lo, uint64_t hi)
{
	size_t i = (size_t)(lo ^ (hi * 0x9e3779b97f4a7c15ull)) & (m->cap - 1);
	while (m->e[i].t_ns && (m->e[i].lo != lo || m->e[i].hi != hi))
		i = (i + 1) & (m->cap - 1);
	return i;
}


static int put(struct l3_lru *m, uint64_t lo, uint64_t hi, uint64_t t)
{
	if (!t)
		return 0;
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		struct l3_lru b = { .e = calloc(cap, sizeof(struct l3_lru_ent)), .cap = cap };
		if (!b.e)
			return -ENOMEM;
		for (size_t i = 0; i < m->cap; i++)
			if (m->e[i].t_ns) {
				b.e[slot(&b, m->e[i].lo, m->e[i].hi)] = m->e[i];
				b.n++;
			}
		free(m->e);
		m->e = b.e, m->cap = b.cap, m->n = b.n;
	}
	size_t s = slot(m, lo, hi);
	if (!m->e[s].t_ns) {
		m->e[s] = (struct l3_lru_ent){ lo, hi, t };
		m->n++;
	} else if (t > m->e[s].t_ns) {
		m->e[s].t_ns = t;
	}
	return 0;
}


uint64_t l3_lru_get(const struct l3_lru *m, uint64_t lo, uint64_t hi)
{
	return m->cap ? m->e[slot(m, lo, hi)].t_ns : 0;
}


void l3_lru_free(struct l3_lru *m)
{
	free(m->e);
	free(m->closed);
	memset(m, 0, sizeof(*m));
}


/* ---- loading: the table, then the segments ---- */

static void table_load(struct sc_l3 *l3, struct l3_lru *m)
{
	int fd = openat(l3->dirfd, "lru", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct lru_hdr h;
	struct stat sb;
	struct l3_lru_ent *e = NULL;
	if (pread(fd, &h, sizeof(h), 0) != sizeof(h) || fstat(fd, &sb) < 0 || h.magic != LRU_MAGIC ||
	    h.version != L3_FORMAT_VERSION || h.count > (1ull << 32) ||
	    (uint64_t)sb.st_size != sizeof(h) + h.count * sizeof(struct l3_lru_ent))
		goto out;
	size_t len = (size_t)h.count * sizeof(*e);
	if (len && !(e = malloc(len)))
		goto out;
	if (len && pread(fd, e, len, sizeof(h)) != (ssize_t)len)
		goto out;
	if (XXH3_64bits(e, len) != h.check)
		goto out; /* a torn or damaged table: start over from mtimes and the segments */
	for (size_t i = 0; i < h.count; i++)
		if (put(m, e[i].lo, e[i].hi, e[i].t_ns))
			break;
out:
	free(e);
	close(fd);
}


struct seg {
	char name[L3_WRITER_MAX + 16];
	char writer[L3_WRITER_MAX];
	unsigned long seq;
};

static void segments_merge(struct sc_l3 *l3, struct l3_lru *m, int (*left_over)(void *, const char *), void *ctx)
{
	int dfd = openat(l3->dirfd, "access", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct seg *s = NULL;
	size_t ns = 0, caps = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		const char *dot = strrchr(e->d_name, '.');
		size_t nl = strlen(e->d_name);
		if (e->d_name[0] == '.' || !dot || (size_t)(dot - e->d_name) >= L3_WRITER_MAX || nl >= sizeof(s->name))
			continue;
		unsigned long seq = strtoul(dot + 1, &end, 10);
		if (*end || end == dot + 1 || l3_grow((void **)&s, &caps, ns + 1, sizeof(*s)))
			continue;
		memcpy(s[ns].name, e->d_name, nl + 1);
		memcpy(s[ns].writer, e->d_name, (size_t)(dot - e->d_name));
		s[ns].writer[dot - e->d_name] = 0;
		s[ns].seq = seq;
		ns++;
	}
	struct l3_access *buf = malloc(SEGMENT_READ_MAX);
	for (size_t i = 0; buf && i < ns; i++) {
		int fd = openat(dirfd(d), s[i].name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		ssize_t n = pread(fd, buf, SEGMENT_READ_MAX, 0);
		close(fd);
		for (ssize_t k = 0; k + (ssize_t)sizeof(*buf) <= n; k += (ssize_t)sizeof(*buf)) {
			const struct l3_access *a = &buf[k / (ssize_t)sizeof(*buf)];
			/* a torn tail (a writer killed mid-write) fails its check */
			if (XXH3_64bits(a, offsetof(struct l3_access, check)) != a->check)
				continue;
			put(m, a->lo, a->hi, a->t_ns);
			m->accesses++;
		}
		/* closed: its writer has moved on to a newer segment, or let go of it (gone) */
		int newer = 0;
		for (size_t k = 0; k < ns && !newer; k++)
			newer = k != i && s[k].seq > s[i].seq && !strcmp(s[k].writer, s[i].writer);
		if ((newer || left_over(ctx, s[i].name)) &&
		    !l3_grow((void **)&m->closed, &m->capclosed, m->nclosed + 1, sizeof(*m->closed)))
			memcpy(m->closed[m->nclosed++], s[i].name, sizeof(s[i].name));
	}
	free(buf);
	free(s);
	closedir(d);
}


void l3_lru_load(struct sc_l3 *l3, struct l3_lru *m, int (*left_over)(void *, const char *), void *ctx)
{
	table_load(l3, m);
	segments_merge(l3, m, left_over, ctx);
}


/* ---- writing the table ---- */

int l3_lru_write(struct sc_l3 *l3, const struct l3_lru_ent *e, size_t n, int (*fence)(struct sc_l3 *))
{
	struct lru_hdr h = { LRU_MAGIC, L3_FORMAT_VERSION, 0, n, XXH3_64bits(e, n * sizeof(*e)) };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)e, n * sizeof(*e) } };
	return l3_replace_top(l3, "lru", iov, 2, 1, fence);
}


int l3_lru_write_merged(struct sc_l3 *l3, const struct l3_lru *m, int (*fence)(struct sc_l3 *))
{
	struct l3_lru_ent *e = malloc((m->n ? m->n : 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < m->cap; i++)
		if (m->e[i].t_ns)
			e[n++] = m->e[i];
	int rc = l3_lru_write(l3, e, n, fence);
	free(e);
	return rc;
}
