/* lib/l3/l3.h — the L3 tier's internal interface, for the modules above it (binding, restore, fsck)
 * and the tests. */
#ifndef SC_LIB_L3_L3_H
#define SC_LIB_L3_L3_H

#include "dirindex.h"
#include "files.h"
#include "fill.h"
#include "format.h"
#include "hosts.h"
#include "janitor.h"
#include "locindex.h"
#include "lru.h"
#include "put.h"
#include "ring.h"
#include "quarantine.h"
#include "reconcile.h"
#include "segread.h"
#include "segstore.h"
#include "state.h"
#include "types.h"
#include "victims.h"
#include "write.h"

#endif
