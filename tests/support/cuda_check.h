/* cuda_check.h — what the CUDA runtime's tests (tests/test_cuda_runtime.c, test_cuda_alloc.c)
 * share: sizes, the pending error's code and message parts, a tensor's floats. */
#ifndef TS_CUDA_CHECK_H
#define TS_CUDA_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

/* The pending error has this code and its message every one of the NULL-terminated parts; the
 * error is cleared either way (printed when not). */
bool err_is(ts_status code, const char *const *parts);
#define ERR_IS(code, ...) err_is(code, (const char *const[]){__VA_ARGS__, NULL})

/* t's n float32 elements, copied to the host, are exactly want's. */
bool floats_equal(ts_tensor *t, const float *want, int64_t n);

#endif /* TS_CUDA_CHECK_H */
