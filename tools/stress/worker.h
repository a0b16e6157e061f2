/* tools/stress/worker.h — a worker of `stagecache stress` (worker.c). */
#ifndef SC_TOOLS_STRESS_WORKER_H
#define SC_TOOLS_STRESS_WORKER_H

#include "shared.h"

/* One worker incarnation @inc in slot @slot: the weighted ops until sh->stop_workers (arming a
 * fault point now and then when kills are on). Its exit status. */
int stress_worker_main(struct shared *sh, uint32_t slot, uint32_t inc, const struct stress_opts *o);

#endif
