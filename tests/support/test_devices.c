/* test_devices.c — the devices every multi-device test runs on, chosen in one place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

int ts_test_devices(ts_device *out, int max) {
    int n = 0;
    /* TS_TEST_ONLY_CUDA=1: cuda:0 alone (compute-sanitizer runs, where the cpu and sim parts
     * only cost time) */
    const char *only = getenv("TS_TEST_ONLY_CUDA");
    if (only && *only && strcmp(only, "0") != 0 && max > 0 && ts_cuda_is_available()) {
        out[0] = ts_cuda(0);
        printf("devices: cuda:0 (TS_TEST_ONLY_CUDA)\n");
        return 1;
    }
    if (n < max) out[n++] = ts_cpu();
    /* tests run with TS_SIM_DEVICES=4; standalone runs get one sim device all the same */
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
    /* a run under a TS_CPU_ISA cap (TS_TEST_ISA, tests/CMakeLists.txt) changes the cpu kernels
     * only: sim runs those same kernels and cuda its own, both already tested in the plain run */
    const char *isa_run = getenv("TS_TEST_ISA");
    const bool cpu_only = isa_run && *isa_run;
    if (!cpu_only && n < max && ts_device_count(TS_SIM) >= 1) out[n++] = ts_sim(0);
    if (!cpu_only && n < max && ts_cuda_is_available()) out[n++] = ts_cuda(0);
    ts_error_clear();
    static bool said;
    if (!said) {
        said = true;
        printf("devices:");
        for (int i = 0; i < n; i++) printf(" %s", ts_device_str(out[i]));
        printf("%s\n", cpu_only ? " (a TS_CPU_ISA run: the cpu kernels only)" : "");
        if (!cpu_only && !ts_cuda_is_available()) ts_test_no_cuda("cuda:0 is not tested here");
    }
    return n;
}
