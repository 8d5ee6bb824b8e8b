/* test_devices.c — the devices every multi-device test runs on, chosen in one place. */
#include <stdio.h>

#include "ts_test.h"

int ts_test_devices(ts_device *out, int max) {
    int n = 0;
    if (n < max) out[n++] = ts_cpu();
    /* tests run with TS_SIM_DEVICES=4; standalone runs get one sim device all the same */
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
    if (n < max && ts_device_count(TS_SIM) >= 1) out[n++] = ts_sim(0);
    if (n < max && ts_cuda_is_available()) out[n++] = ts_cuda(0);
    ts_error_clear();
    static bool said;
    if (!said) {
        said = true;
        printf("devices:");
        for (int i = 0; i < n; i++) printf(" %s", ts_device_str(out[i]));
        printf("\n");
        if (!ts_cuda_is_available()) ts_test_no_cuda("cuda:0 is not tested here");
    }
    return n;
}
