/* backend_check.h — guarded-buffer machinery for the backend conformance test (DESIGN §9.2). */
#ifndef TS_BACKEND_CHECK_H
#define TS_BACKEND_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define BC_GUARD 64 /* guard bytes of a known pattern before and after every output buffer */
#define BC_MAXV  4  /* views per call */
#define BC_NDT   8
extern const ts_dtype bc_dtypes[BC_NDT];

/* One view over one raw buffer: shape, strides (elements) and the bytes the view reaches. Inputs
 * carry host data; outputs may carry initial content (scatter_add's destination). */
typedef struct bc_spec {
    ts_dtype dt;
    int nd;
    int64_t shape[TS_MAX_DIMS], strides[TS_MAX_DIMS];
    size_t payload;
    unsigned char *host; /* malloc'ed; freed by bc_check */
} bc_spec;

/* layout 0: contiguous; 1: stored with the last two dims swapped; 2: every other element (the
 * gaps must stay untouched) */
bc_spec bc_mk(ts_dtype dt, int nd, const int64_t *shape, int layout);
#define BC_MK0(dt) bc_mk(dt, 0, NULL, 0)
/* Size-1 dims broadcast to `to` with stride 0 (the payload stays the small one). */
bc_spec bc_expand(bc_spec s, const int64_t *to);
int64_t bc_numel(const bc_spec *s);

/* Value ranges of host data. */
enum {
    BC_ANY,
    BC_POS,
    BC_NONZERO,
    BC_SMALLNN,
    BC_UNIT, /* (-1, 1): asin, acos, atanh */
    BC_GE1,  /* [1, 4]: acosh */
    BC_IDX   /* integers in [0, hi) */
};
void bc_fill_host(bc_spec *s, int kind, double hi);

typedef struct bc_call {
    int nout, nin;
    bc_spec out[BC_MAXV], in[BC_MAXV];
} bc_call;
/* Calls one kernel entry of b (device index 0) on views of raw device memory. */
typedef void (*bc_launch)(const ts_backend *b, const ts_kview *o, const ts_kview *i,
                          const void *ctx);

typedef struct bc_state_t {
    const ts_backend *ref, *dev; /* the cpu backend and the one under test */
    const char *dev_name;
    bool exact; /* bitwise (sim runs the cpu kernels) rather than PyTorch's tolerances */
    /* the device evaluates exp, log, tanh, erf, cos... with math of its own (cuda and its host
     * emulation: libm's scalar functions where the cpu has vectorised ones): cases flagged
     * math_case compare within PyTorch's tolerances even in an exact run */
    bool device_math, math_case;
    bool quiet;        /* self-check: count failures, print and record nothing */
    int cases, failed; /* of the current kernel */
} bc_state_t;
extern bc_state_t bc_state;

/* Runs c on both backends, compares outputs and guard bytes, frees the host data in c. */
void bc_check(const char *what, bc_call *c, bc_launch fn, const void *ctx);
void bc_kernel_begin(void);
void bc_kernel_end(const char *name); /* one line per kernel; one pass/fail in ts_test */
bool bc_present(const char *name, const void *entry);
/* The cpu backend with the CUDA backend's elementwise kernels run on the host
 * (support/cuda_emulation.cu); NULL in a build without CUDA. mode: bit 0 no vector accesses, bit 1
 * no linear kernel, bit 2 64-bit offsets. */
const ts_backend *bc_cuda_emulation(int mode);
/* The cpu backend with the CUDA backend's reductions run on the host (cuda_reduce.cu under host
 * emulation); NULL in a build without CUDA. */
const ts_backend *bc_cuda_emulation_reduce(void);
const char *bc_what(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool bc_is_float(ts_dtype d);
size_t bc_esz(ts_dtype d);

#endif /* TS_BACKEND_CHECK_H */
