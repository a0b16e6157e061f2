/* lib/abi.h — private to lib/abi.c and its test: the member tables behind sc_sizeof & co. */
#ifndef SC_LIB_ABI_H
#define SC_LIB_ABI_H

#include "stagecache.h"

struct member {
	const char *name;
	size_t offset, size;
	int pub;              /* 0: a reserved or private member (not reported by sc_type_field) */
};

struct abi_type {
	const char *name;     /* "sc_lease" */
	size_t size, align;
	const struct member *members; /* every member, in declaration order */
	unsigned nmembers;
};

/* The index-th known type (NULL past the end), and a type by name (NULL when unknown). */
const struct abi_type *abi_type_at(unsigned index);
const struct abi_type *abi_type_find(const char *name);

#endif
