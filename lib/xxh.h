/*
 * lib/xxh.h — the one place the library includes xxHash.
 *
 * On x86 the library calls XXH3 through libxxhash's runtime dispatch (xxh_x86dispatch.h picks
 * SSE2, AVX2 or AVX-512 for the CPU it runs on); elsewhere (aarch64: NEON is always there) the
 * plain header is the fast path. Callers use the plain names (XXH3_128bits_update ...): the
 * dispatch header redefines them to its dispatching versions.
 */
#ifndef SC_LIB_XXH_H
#define SC_LIB_XXH_H

#ifndef XXH_STATIC_LINKING_ONLY
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t by value (stage handles, fill ops) */
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h>
#else
#include <xxhash.h>
#endif

#endif
