/* placement_internal.h — what placement.c and placement_budget.c share. Not public. */
#ifndef TS_NN_PLACEMENT_INTERNAL_H
#define TS_NN_PLACEMENT_INTERNAL_H

#include <stddef.h>

/* "512 B", "1.50 KiB", "2.00 MiB", "3.00 GiB" */
void tsi_fmt_bytes(size_t b, char *buf, size_t n);

#endif /* TS_NN_PLACEMENT_INTERNAL_H */
