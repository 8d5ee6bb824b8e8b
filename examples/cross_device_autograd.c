/* cross_device_autograd.c — seed 000: autograd follows a tensor across devices; the cpu leaf gets
 * its gradient although the computation ran on the device. Mixing devices without a copy fails. */
#include "common_device.h"

int main(void) {
    ts_device dev = example_device();
    ts_scope_begin();
    ts_tensor *cpu_tensor =
        ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 3}, (ts_opts){.requires_grad = true});
    ts_tensor *gpu_tensor = ts_tensor_f32(TS_SHAPE(3), (float[]){4, 5, 6},
                                          (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *gpu_tensor2 = ts_to(cpu_tensor, dev);
    ts_tensor *result = ts_add(gpu_tensor, gpu_tensor2);
    ts_backward_with(result, ts_ones(TS_SHAPE(3), (ts_opts){.device = dev}));
    EXAMPLE_CHECK();
    printf("cpu_tensor.grad = ");
    ts_print(ts_grad(cpu_tensor)); /* tensor([1., 1., 1.]) — on the cpu, where the leaf lives */

    /* without the explicit copy the op is refused, with a message naming both devices */
    ts_tensor *bad = ts_add(gpu_tensor, cpu_tensor);
    printf("add(%s tensor, cpu tensor): %s\n  %s\n", ts_device_str(dev),
           ts_status_string(ts_error()), ts_error_message());
    int ok = bad == NULL && ts_error() == TS_ERR_DEVICE;
    ts_error_clear();
    ok = ok && ts_device_of(ts_grad(cpu_tensor)).type == TS_CPU &&
         ts_item(ts_sum(ts_grad(cpu_tensor))) == 3.0;
    ts_scope_end();
    return ok ? 0 : 1;
}
