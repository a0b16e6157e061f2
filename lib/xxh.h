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

/*
 * libxxhash's AVX2 and AVX-512 kernels return with the upper halves of the vector registers in
 * use (Debian 12's 0.8.1 does: no vzeroupper on the way out). Our code is built for baseline x86-64
 * and moves 128-bit values with legacy SSE instructions, and on Intel cores each of those after
 * such a call pays a state transition: sc_l2_key of 4096 tokens took 4.5-5.0 us there instead of
 * 1.26 us (16 hashes of 1 KiB and 16 of 32 bytes, each followed by SSE moves). So every XXH3 call
 * of the library goes through a wrapper that clears the upper halves after it (vzeroupper, only
 * on a CPU with AVX: elsewhere the instruction does not exist, and nothing is dirty to clear).
 * The lower 128 bits are kept and our code holds nothing wider, so no value is lost.
 */
__attribute__((target("avx"))) static inline void sc_xxh_vzeroupper_(void)
{
	__builtin_ia32_vzeroupper();
}
static inline void sc_xxh_settle(void)
{
	if (__builtin_cpu_supports("avx"))
		sc_xxh_vzeroupper_();
}
#define SC_XXH_WRAP(ret, name, params, args)                     \
	static inline ret sc_##name params                       \
	{                                                        \
		ret r_ = name##_dispatch args;                   \
		sc_xxh_settle();                                 \
		return r_;                                       \
	}
SC_XXH_WRAP(XXH64_hash_t, XXH3_64bits, (const void *p, size_t n), (p, n))
SC_XXH_WRAP(XXH64_hash_t, XXH3_64bits_withSeed, (const void *p, size_t n, XXH64_hash_t seed), (p, n, seed))
SC_XXH_WRAP(XXH_errorcode, XXH3_64bits_update, (XXH3_state_t *st, const void *p, size_t n), (st, p, n))
SC_XXH_WRAP(XXH128_hash_t, XXH3_128bits, (const void *p, size_t n), (p, n))
SC_XXH_WRAP(XXH128_hash_t, XXH3_128bits_withSeed, (const void *p, size_t n, XXH64_hash_t seed), (p, n, seed))
SC_XXH_WRAP(XXH128_hash_t, XXH3_128bits_withSecret, (const void *p, size_t n, const void *sec, size_t sn),
	    (p, n, sec, sn))
SC_XXH_WRAP(XXH_errorcode, XXH3_128bits_update, (XXH3_state_t *st, const void *p, size_t n), (st, p, n))
#undef SC_XXH_WRAP
#undef XXH3_64bits
#define XXH3_64bits sc_XXH3_64bits
#undef XXH3_64bits_withSeed
#define XXH3_64bits_withSeed sc_XXH3_64bits_withSeed
#undef XXH3_64bits_update
#define XXH3_64bits_update sc_XXH3_64bits_update
#undef XXH3_128bits
#define XXH3_128bits sc_XXH3_128bits
#undef XXH128
#define XXH128 sc_XXH3_128bits_withSeed
#undef XXH3_128bits_withSeed
#define XXH3_128bits_withSeed sc_XXH3_128bits_withSeed
#undef XXH3_128bits_withSecret
#define XXH3_128bits_withSecret sc_XXH3_128bits_withSecret
#undef XXH3_128bits_update
#define XXH3_128bits_update sc_XXH3_128bits_update
#else
#include <xxhash.h>
#endif

#endif
