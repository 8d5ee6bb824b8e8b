/* conformance_run.h — what the backend conformance tests (tests/test_conformance*.c) share: the
 * launchers' context, calls of one or two inputs, the shapes, and the run over every backend. The
 * guarded buffers and the comparison: backend_check.h. */
#ifndef TS_CONFORMANCE_RUN_H
#define TS_CONFORMANCE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend_check.h"

/* What a launcher passes to its kernel entry besides the views. */
typedef struct kctx {
    int op, dim, nred;
    double p0, p1;
    bool log;
    size_t bytes;
} kctx;
#define KC(p) const kctx *k = (const kctx *)(p)

extern const int64_t S57[2], S34[2], SBIG[2]; /* big: OpenMP paths */

/* A call of one output and one input (filled with values of kind, see bc_fill_host). */
bc_call one_in(bc_spec out, bc_spec in, int kind, double hi);
/* A call of one output and two inputs, a filled with values of kind ka, b of kind kb. */
bc_call two_in(bc_spec out, bc_spec a, bc_spec b, int ka, int kb);

/* One conformance program: its kernels against the cpu's on every backend there is. */
typedef struct cf_suite {
    const char *name;                          /* the program, for the "no cuda" line */
    void (*run)(void);                         /* its kernels on bc_state.dev */
    void (*self_check)(const ts_backend *sim); /* optional: planted bugs caught, before sim:0 */
    void (*emulated_reduce)(void);             /* optional: on the CUDA reductions' emulation */
} cf_suite;

/* The per-ISA gate, then run() on sim:0 (bitwise; not in a TS_CPU_ISA run, where sim would run
 * the very kernels of the cpu), on the CUDA kernels emulated on the host (bitwise but for the
 * device's math; as is, then scalar strided 64-bit), emulated_reduce() on the CUDA reductions
 * emulated on the host (PyTorch tolerances), and run() on cuda:0 when present (PyTorch
 * tolerances; without it ts_test_no_cuda). Returns the exit code. */
int cf_main(const cf_suite *s);

#endif /* TS_CONFORMANCE_RUN_H */
