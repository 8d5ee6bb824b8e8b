/* tensor_memory.c — seed 003: a tensor's memory use (element_size x numel) and the device it lives
 * on, plus what the device's allocator reports. */
#include "common_device.h"

int main(void) {
    ts_device dev = example_device();
    ts_scope_begin();
    ts_tensor *tensor = ts_to(ts_randn(TS_SHAPE(1000, 1000), (ts_opts){0}), dev);
    double mb = (double)ts_element_size(tensor) * (double)ts_numel(tensor) / 1024 / 1024;
    printf("%.4f MB\n", mb); /* 3.8147 MB */
    printf("device: %s\n", ts_device_str(ts_device_of(tensor)));
    ts_tensor *small = ts_tensor_i64(TS_SHAPE(3), (int64_t[]){1, 2, 3}, (ts_opts){0});
    printf("device: %s\n", ts_device_str(ts_device_of(small))); /* cpu */
    ts_mem_stats st;
    ts_memory_stats(dev, &st);
    printf("%s allocator: %zu bytes allocated, %zu reserved, %lld live tensors\n",
           ts_device_str(dev), st.allocated, st.reserved, (long long)st.live_tensors);
    EXAMPLE_CHECK();
    int ok = ts_nbytes(tensor) == 4000000 && st.allocated >= 4000000;
    ts_scope_end();
    ts_memory_stats(dev, &st);
    printf("after the scope: %zu bytes allocated\n", st.allocated);
    return ok && st.allocated == 0 ? 0 : 1;
}
