/*
 * tests/mm_atomics.h — include after <stdatomic.h> and before the code to model: every C11
 * atomic operation below goes through tests/memmodel.c (which passes addresses outside its
 * registered regions to the real atomics).
 */
#ifndef SC_TESTS_MM_ATOMICS_H
#define SC_TESTS_MM_ATOMICS_H

#include <stdatomic.h>
#include "memmodel.h"

#undef atomic_load_explicit
#undef atomic_store_explicit
#undef atomic_exchange_explicit
#undef atomic_compare_exchange_strong_explicit
#undef atomic_compare_exchange_weak_explicit
#undef atomic_fetch_add_explicit
#undef atomic_fetch_sub_explicit
#undef atomic_fetch_or_explicit
#undef atomic_fetch_and_explicit
#undef atomic_fetch_xor_explicit
#undef atomic_thread_fence
#undef atomic_load
#undef atomic_store

/* @p is evaluated once (sizeof and typeof do not evaluate it) */
#define MM_VAL(p, r) ((__typeof__(*(p) + 0))(r))

#define atomic_load_explicit(p, o) MM_VAL(p, mm_load((const void *)(p), sizeof(*(p)), (o)))
#define atomic_store_explicit(p, v, o) mm_store((void *)(p), sizeof(*(p)), (uint64_t)(v), (o))
#define MM_RMW(p, op, v, o) MM_VAL(p, mm_rmw((void *)(p), sizeof(*(p)), (op), (uint64_t)(v), (o)))
#define atomic_exchange_explicit(p, v, o) MM_RMW(p, MM_XCHG, v, o)
#define atomic_fetch_add_explicit(p, v, o) MM_RMW(p, MM_ADD, v, o)
#define atomic_fetch_sub_explicit(p, v, o) MM_RMW(p, MM_SUB, v, o)
#define atomic_fetch_or_explicit(p, v, o) MM_RMW(p, MM_OR, v, o)
#define atomic_fetch_and_explicit(p, v, o) MM_RMW(p, MM_AND, v, o)
#define atomic_fetch_xor_explicit(p, v, o) MM_RMW(p, MM_XOR, v, o)
#define atomic_compare_exchange_strong_explicit(p, e, d, s, f) \
	mm_cas((void *)(p), sizeof(*(p)), (void *)(e), (uint64_t)(d), (s), (f))
#define atomic_compare_exchange_weak_explicit atomic_compare_exchange_strong_explicit
#define atomic_thread_fence(o) mm_fence(o)
#define atomic_load(p) atomic_load_explicit(p, memory_order_seq_cst)
#define atomic_store(p, v) atomic_store_explicit(p, v, memory_order_seq_cst)

#endif
