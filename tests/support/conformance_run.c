/* conformance_run.c — what the backend conformance tests share (conformance_run.h). */
#include "conformance_run.h"

#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

const int64_t S57[2] = {5, 7}, S34[2] = {3, 4}, SBIG[2] = {130, 260};

bc_call one_in(bc_spec out, bc_spec in, int kind, double hi) {
    bc_call c = {.nout = 1, .nin = 1, .out = {out}, .in = {in}};
    bc_fill_host(&c.in[0], kind, hi);
    return c;
}

bc_call two_in(bc_spec out, bc_spec a, bc_spec b, int ka, int kb) {
    bc_call c = {.nout = 1, .nin = 2, .out = {out}, .in = {a, b}};
    bc_fill_host(&c.in[0], ka, 0);
    bc_fill_host(&c.in[1], kb, 0);
    return c;
}

static void run_backend(const cf_suite *s, const ts_backend *be, const char *name, bool bitwise,
                        bool device_math) {
    bc_state.dev = be, bc_state.dev_name = name, bc_state.exact = bitwise;
    bc_state.device_math = device_math;
    printf("== %s backend against cpu (%s)\n", be->name,
           !bitwise      ? "PyTorch tolerances"
           : device_math ? "bitwise; ops over exp, log, tanh, erf, cos within PyTorch tolerances"
                         : "bitwise");
    s->run();
}

int cf_main(const cf_suite *s) {
    if (ts_test_isa_gate()) return 77;
    int nsim = ts_device_count(TS_SIM); /* also starts the library and registers the backends */
    if (nsim < 1 && ts_sim_configure(1, 0) == TS_OK) nsim = 1;
    bc_state.ref = tsi_backend_for(TS_CPU);
    if (!bc_state.ref) {
        printf("no cpu backend registered\n");
        return 1;
    }
    const ts_backend *sim = tsi_backend_for(TS_SIM);
    CHECK(sim != NULL && nsim >= 1);
    /* under a TS_CPU_ISA cap (tests/CMakeLists.txt) sim would run the very kernels of the cpu it
     * is compared with: the CUDA emulation, an independent implementation, checks the variant */
    const char *isa_run = getenv("TS_TEST_ISA");
    if (isa_run && *isa_run)
        printf("a TS_CPU_ISA=%s run: sim skipped (the same kernels as cpu)\n", isa_run);
    else if (sim && nsim >= 1) {
        if (s->self_check) s->self_check(sim);
        run_backend(s, sim, "sim:0", true, false);
    }
    /* the CUDA kernels' logic, run on the host: bit for bit the cpu's (vector, scalar, strided,
     * 64-bit paths), except where the cpu's vectorised math and libm's scalar math differ in the
     * last bits */
    for (int mode = 0; mode < 8; mode += 7) {
        const ts_backend *emu = bc_cuda_emulation(mode);
        if (emu)
            run_backend(s, emu,
                        mode ? "cuda-emulation:0 (scalar, strided 64-bit)" : "cuda-emulation:0",
                        true, true);
    }
    /* the CUDA reductions run on the host: their accumulation rule and plans against the cpu,
     * within tolerances (the GPU's summation order is not the cpu's) */
    const ts_backend *emu_reduce = s->emulated_reduce ? bc_cuda_emulation_reduce() : NULL;
    if (emu_reduce) {
        bc_state.dev = emu_reduce, bc_state.dev_name = "cuda-emulation:0", bc_state.exact = false;
        printf("== %s against cpu (PyTorch tolerances)\n", emu_reduce->name);
        s->emulated_reduce();
    }
    const ts_backend *cuda = ts_cuda_is_available() ? tsi_backend_for(TS_CUDA) : NULL;
    if (cuda)
        run_backend(s, cuda, "cuda:0", false, true);
    else {
        char what[200];
        snprintf(what, sizeof what, "%s: the cuda backend's conformance is not checked", s->name);
        ts_test_no_cuda(what);
    }
    return ts_test_finish();
}
