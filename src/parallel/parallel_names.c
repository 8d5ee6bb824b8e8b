/* parallel_names.c — the conventional names (ts_..._new, decision 0025) of the constructors of
 * DataParallel; the 0.1 names they forward to stay exported until 1.0. */
#include "tessera.h"

ts_module *ts_data_parallel_new(ts_module *module, const ts_device *devices, int n,
                                ts_device output_device) {
    return ts_data_parallel(module, devices, n, output_device);
}
