/* lib/l3/write.h — writing files durably: temp file, fsync, rename, fsync of the directory (lib/l3/write.c). */
#ifndef SC_LIB_L3_WRITE_H
#define SC_LIB_L3_WRITE_H

#include "types.h"

/* Register a token length in DIR/lengths (idempotent). */
int l3_put_length(struct sc_l3 *l3, uint32_t tokens);
/* Write @iov as @dfd/@sub/@final: a temp file (host identity in its name), fsync, rename (with
 * @noreplace: -EEXIST when it is there), fsync of the directory. */
int l3_write_file(struct sc_l3 *l3, int dfd, const char *sub, const char *final, const struct iovec *iov, int niov,
		  int noreplace);

#endif
