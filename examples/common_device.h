/* common_device.h — picks the accelerator for the examples: cuda:0 when present, else sim:0 (said).
 */
#ifndef EXAMPLES_COMMON_DEVICE_H
#define EXAMPLES_COMMON_DEVICE_H
#include <stdio.h>
#include <tessera.h>

/* The seed programs say "cuda"; without a GPU they run on a simulated device and say so. */
static inline ts_device example_device(void) {
    if (ts_cuda_is_available()) return ts_cuda(0);
    if (ts_device_count(TS_SIM) == 0) ts_sim_configure(2, 0);
    printf("(no GPU here: running the 'cuda' parts on %s, a host-simulated device)\n",
           ts_device_str(ts_sim(0)));
    return ts_sim(0);
}

#define EXAMPLE_CHECK()                                                                            \
    do {                                                                                           \
        if (ts_error()) {                                                                          \
            fprintf(stderr, "error: %s\n", ts_error_message());                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#endif
