/* dist_names.c — the conventional names (ts_..._new, decision 0025) of the constructors of process
 * groups, DDP and FSDP; the 0.1 names they forward to stay exported until 1.0. */
#include "tessera.h"

ts_module *ts_ddp_new(ts_module *module, ts_ddp_opts o) { return ts_ddp(module, o); }
ts_module *ts_fsdp_new(ts_module *module, ts_fsdp_opts o) { return ts_fsdp(module, o); }
ts_dist_group *ts_dist_group_new(const int *ranks, int n) { return ts_dist_new_group(ranks, n); }
