/* tests/fuzz/fuzz_arena_attach.c — arena attach over a mutated header: the input is written as an
 * arena file and opened; every outcome must be an error code or a clean attach, never a crash. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stagecache.h"
#include "../../shm/arena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char name[64], path[128];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!name[0]) {
		snprintf(name, sizeof(name), "fuzz-attach-%d", (int)getpid());
		snprintf(path, sizeof(path), "/dev/shm/stagecache.%s", name);
	}
	/* the header is checked before anything else is trusted: the pure check first */
	if (size >= sizeof(struct shm_header)) {
		struct shm_header h;
		memcpy(&h, data, sizeof(h));
		(void)shm_header_check(&h, size);
	}
	/* then a real attach of the bytes as a file (capped so the corpus stays small). Steer the
	 * mutations past the cheap checks so the deep ones are exercised: mark the header published
	 * (an unpublished one only makes attach wait), and on request fix the size and checksum. */
	static uint8_t buf[1u << 20];
	size_t n = size > sizeof(buf) ? sizeof(buf) : size;
	memcpy(buf, data, n);
	if (n >= sizeof(struct shm_header)) {
		struct shm_header *h = (struct shm_header *)buf;
		atomic_store_explicit(&h->initialised, SHM_INIT_DONE, memory_order_relaxed);
		if (data[n - 1] & 1) {
			h->magic = SHM_MAGIC;
			h->layout_version = SHM_LAYOUT_VERSION;
			h->header_bytes = SHM_HEADER_BYTES;
			h->region_count = SHM_REGION_COUNT;
		}
		if (data[n - 1] & 2)
			h->total_bytes = n;
		if (data[n - 1] & 4)
			h->header_check = shm_header_checksum(h);
	}
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return 0;
	if (write(fd, buf, n) != (ssize_t)n) {
		close(fd);
		return 0;
	}
	close(fd);
	struct sc_arena *a = NULL;
	if (sc_arena_open(name, &a) == 0) {
		struct sc_arena_info in;
		sc_arena_info(a, &in);
		sc_arena_close(a);
	}
	unlink(path);
	return 0;
}
