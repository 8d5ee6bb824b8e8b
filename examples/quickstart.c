/* quickstart.c — Tessera's first steps: tensors on the cpu and on a simulated device, a transfer,
 * a device mismatch caught as an error, scopes and memory statistics. */
#include <stdio.h>
#include <tessera.h>

#define CHECK_OK()                                                                                 \
    do {                                                                                           \
        if (ts_error()) {                                                                          \
            fprintf(stderr, "error: %s\n", ts_error_message());                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void) {
    if (ts_device_count(TS_SIM) == 0) ts_sim_configure(2, 0);
    ts_device dev = ts_cuda_is_available() ? ts_cuda(0) : ts_sim(0);
    printf("Tessera %d.%d.%d — computing on %s%s\n", TS_VERSION_MAJOR, TS_VERSION_MINOR,
           TS_VERSION_PATCH, ts_device_str(dev),
           dev.type == TS_SIM ? " (a host-simulated device: no GPU here)" : "");

    ts_scope_begin();
    ts_tensor *a = ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 3}, (ts_opts){0});
    ts_tensor *b = ts_to(ts_mul_scalar(a, 2), dev); /* explicit copy to the device */
    printf("a on the cpu:      ");
    ts_print(a);
    printf("2a on the device:  ");
    ts_print(b);
    ts_tensor *c = ts_add(b, ts_to(a, dev));
    printf("2a + a:            ");
    ts_print(c);
    CHECK_OK();

    /* mixing devices is an error, never a silent copy */
    ts_tensor *bad = ts_add(b, a);
    printf("add(%s, cpu) -> %s, %s: %s\n", ts_device_str(dev), bad ? "a tensor" : "NULL",
           ts_status_string(ts_error()), ts_error_message());
    ts_error_clear();

    ts_tensor *m = ts_matmul(ts_randn(TS_SHAPE(4, 8), (ts_opts){.device = dev}),
                             ts_randn(TS_SHAPE(8, 2), (ts_opts){.device = dev}));
    printf("a [4, 8] @ [8, 2] matmul on %s has shape [%lld, %lld]; its mean is %.4f\n",
           ts_device_str(ts_device_of(m)), (long long)ts_size(m, 0), (long long)ts_size(m, 1),
           ts_item(ts_mean(m)));
    CHECK_OK();

    ts_mem_stats st;
    ts_memory_stats(dev, &st);
    printf("%s inside the scope: %zu bytes allocated, %lld live tensors\n", ts_device_str(dev),
           st.allocated, (long long)st.live_tensors);
    ts_scope_end();
    ts_memory_stats(dev, &st);
    printf("%s after the scope:  %zu bytes allocated, %lld live tensors\n", ts_device_str(dev),
           st.allocated, (long long)st.live_tensors);
    CHECK_OK();
    return st.live_tensors == 0 ? 0 : 1;
}
