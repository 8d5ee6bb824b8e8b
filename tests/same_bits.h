/* same_bits.h — whether two tensors hold the same bits: dtype, element count and every byte of
 * their contiguous host copies (NaN payloads and the sign of zero included). */
#ifndef TS_TEST_SAME_BITS_H
#define TS_TEST_SAME_BITS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

static inline bool same_bits(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_dtype_of(a) != ts_dtype_of(b) || ts_numel(a) != ts_numel(b)) return false;
    ts_scope_begin();
    ts_tensor *ha = ts_contiguous(ts_to(a, ts_cpu())), *hb = ts_contiguous(ts_to(b, ts_cpu()));
    size_t n = (size_t)ts_numel(a) * ts_element_size(a);
    unsigned char *pa = malloc(n + 1), *pb = malloc(n + 1);
    bool eq = pa && pb && ts_copy_to_host(ha, pa, n) == TS_OK &&
              ts_copy_to_host(hb, pb, n) == TS_OK && memcmp(pa, pb, n) == 0;
    free(pa), free(pb);
    ts_scope_end();
    return eq;
}

#endif /* TS_TEST_SAME_BITS_H */
