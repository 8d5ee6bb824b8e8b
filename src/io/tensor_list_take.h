/* tensor_list_take.h — how the file readers (safetensors_read.c, pt_read.c) hand what they read
 * to the caller's list. Internal. */
#ifndef TS_IO_TENSOR_LIST_TAKE_H
#define TS_IO_TENSOR_LIST_TAKE_H

#include "tessera.h"

/* got's tensors appended to out (moved whole when out is still empty) and got freed; on a failed
 * read (st) got is freed and out left as it was. Returns st, or the first append's failure. */
static inline ts_status tsi_tensor_list_take(ts_tensor_list *out, ts_tensor_list *got,
                                             ts_status st) {
    if (st) {
        ts_tensor_list_free(got);
        return st;
    }
    if (out->n == 0 && out->cap == 0) {
        *out = *got;
        return TS_OK;
    }
    for (int i = 0; i < got->n && !st; i++)
        st = ts_tensor_list_add(out, got->names[i], got->tensors[i]);
    ts_tensor_list_free(got);
    return st;
}

#endif /* TS_IO_TENSOR_LIST_TAKE_H */
