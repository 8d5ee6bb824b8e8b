/* placement_internal.h — what placement.c and placement_budget.c share. Not public. */
#ifndef TS_NN_PLACEMENT_INTERNAL_H
#define TS_NN_PLACEMENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ts_module ts_module;

/* "512 B", "1.50 KiB", "2.00 MiB", "3.00 GiB" */
void tsi_fmt_bytes(size_t b, char *buf, size_t n);

/* A module's units in execution order, as ts_module_place cuts it (placement.c): unit i is the
 * modules (*mods)[spans[i].first .. first + count), spans[i].exit the one whose output leaves it.
 * *gpt: m is a GPT (its last unit's output goes to the head tied to the token embedding). Returns
 * the number of units (> 0; malloc'ed arrays: free both), or -1 with TS_ERR_OOM set. */
typedef struct tsi_unit_span {
    int first, count;
    ts_module *exit;
} tsi_unit_span;
int tsi_place_units(ts_module *m, ts_module ***mods, tsi_unit_span **spans, bool *gpt);

/* weight_stream.c: m (a root) is streamed (ts_module_stream); placement refuses it */
bool tsi_module_streamed(const ts_module *m);

#endif /* TS_NN_PLACEMENT_INTERNAL_H */
