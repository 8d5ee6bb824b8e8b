/* device_arithmetic.c — seed 000: a tensor made on the cpu, moved to the device, computed there
 * (once, then a sequence of ops with a single transfer each way), and brought back. */
#include "common_device.h"

int main(void) {
    ts_device dev = example_device();
    ts_scope_begin();
    ts_tensor *cpu_tensor = ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 3}, (ts_opts){0});
    ts_tensor *gpu_tensor = ts_to(cpu_tensor, dev);
    ts_tensor *gpu_result = ts_mul_scalar(gpu_tensor, 2);
    ts_tensor *cpu_result = ts_to(gpu_result, ts_cpu());
    ts_print(cpu_result); /* tensor([2., 4., 6.]) */

    /* minimising transfers: one copy in, several ops on the device, one copy out */
    ts_tensor *t = ts_to(cpu_tensor, dev);
    t = ts_mul_scalar(t, 2);
    t = ts_add_scalar(t, 1);
    t = ts_sqrt(t);
    ts_print(ts_to(t, ts_cpu())); /* tensor([1.7321, 2.2361, 2.6458]) */

    /* seed 002: in-place ops carry a trailing underscore; t + t runs where t lives */
    ts_tensor *a = ts_tensor_i64(TS_SHAPE(3), (int64_t[]){1, 2, 3}, (ts_opts){0});
    ts_add_scalar_(a, 5);
    ts_print(a); /* tensor([6, 7, 8]) */
    ts_tensor *d = ts_tensor_i64(TS_SHAPE(3), (int64_t[]){1, 2, 3}, (ts_opts){.device = dev});
    ts_print(ts_add(d, d));
    EXAMPLE_CHECK();
    double check = ts_item(ts_sum(cpu_result));
    ts_scope_end();
    return check == 12.0 ? 0 : 1;
}
