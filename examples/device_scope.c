/* device_scope.c — seed 004: TensorFlow's `with tf.device(...)` + tf.constant + tf.identity in
 * Tessera: a device scope decides where factories put tensors; an explicit copy moves data back. */
#include "common_device.h"

int main(void) {
    ts_device dev = example_device();
    ts_log_placement(true); /* like tf.debugging.set_log_device_placement(True) */
    ts_scope_begin();
    ts_device_push(dev); /* with tf.device('/GPU:0'): */
    ts_tensor *a = ts_tensor_f32(TS_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6}, (ts_opts){0});
    ts_tensor *b = ts_tensor_f32(TS_SHAPE(3, 2), (float[]){1, 2, 3, 4, 5, 6}, (ts_opts){0});
    ts_tensor *c = ts_matmul(a, b);
    ts_device_pop();
    ts_device_push(ts_cpu()); /* with tf.device('/CPU:0'): c_cpu = tf.identity(c) */
    ts_tensor *c_cpu = ts_to(c, ts_default_device());
    ts_device_pop();
    ts_log_placement(false);
    printf("a lives on %s, c on %s, its copy on %s\n", ts_device_str(ts_device_of(a)),
           ts_device_str(ts_device_of(c)), ts_device_str(ts_device_of(c_cpu)));
    ts_print(c_cpu); /* tensor([[22., 28.], [49., 64.]]) */
    /* tf.cast analogue: a dtype conversion is also an explicit copy */
    ts_print(ts_to_dtype(c_cpu, TS_I32));
    EXAMPLE_CHECK();
    int ok = ts_device_equal(ts_device_of(c), dev) && ts_device_of(c_cpu).type == TS_CPU &&
             ts_item(ts_sum(c_cpu)) == 163.0;
    ts_scope_end();
    return ok ? 0 : 1;
}
