/* lib/l2/l2.h — the L2 tier's internal interface, for the modules above it (L3, restore, fsck). */
#ifndef SC_LIB_L2_L2_H
#define SC_LIB_L2_L2_H

#include "admin.h"
#include "admit.h"
#include "evict.h"
#include "lease.h"
#include "miss.h"
#include "place.h"
#include "read.h"
#include "seg.h"
#include "stage.h"
#include "view.h"

#endif
