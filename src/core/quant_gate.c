/* quant_gate.c — the one list of the ops that take quantized tensors (qint8, quint8, qint32,
 * quint4x2).
 *
 * A quantized tensor stores integers whose meaning is (q - zero_point) * scale; an op without a
 * quantized path would read those integers as the numbers themselves and return a wrong result
 * without a word. So the core refuses a quantized tensor or dtype at the doors the complex gate
 * uses (tsi_check_input, tsi_new, tsi_cast, shared storage: TSI_DTYPE_GATE in internal.h) unless
 * the op's name is here. Each name here is a function of src/ops/quantize.c or qlinear.c, or a
 * query that reads no element; dropout passes a quantized input through in eval mode (PyTorch's
 * quantized models keep their Dropout modules) and refuses it in training. Views, copies and device
 * moves are not here yet: they must carry the descriptor (and adjust a per-channel axis), which
 * they do not. Each quantized op under src/ops/q*.c is listed only once it reads its quantized
 * inputs through their parameters. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* sorted (strcmp order): bsearch; tests/test_quant.c calls each op, so a name out of order
 * fails there */
static const char *const quant_ops[] = {
    "dequantize",
    "device_of",
    "dropout",
    "dtype_of",
    "dynamic_quantized_linear",
    "element_size",
    "int8_dynamic_activation_linear",
    "int_repr",
    "is_contiguous",
    "make_per_channel_quantized_tensor",
    "make_per_tensor_quantized_tensor",
    "ndim",
    "numel",
    "q_group_size",
    "q_per_channel_axis",
    "q_per_channel_scales",
    "q_per_channel_zero_points",
    "q_scale",
    "q_zero_point",
    "qlinear_conv2d",
    "qscheme",
    "quantize_per_channel",
    "quantize_per_group",
    "quantize_per_tensor",
    "quantized_adaptive_avg_pool2d",
    "quantized_add",
    "quantized_add_relu",
    "quantized_cat",
    "quantized_conv2d",
    "quantized_linear",
    "quantized_linear_acc",
    "quantized_max_pool2d",
    "quantized_reshape",
    "shape_of",
    "size",
    "storage_offset",
    "stride",
    "weight_only_linear",
};

static int cmp_name(const void *key, const void *elem) {
    return strcmp((const char *)key, *(const char *const *)elem);
}

bool tsi_quant_op_ok(const char *op) {
    return bsearch(op, quant_ops, sizeof quant_ops / sizeof quant_ops[0], sizeof quant_ops[0],
                   cmp_name) != NULL;
}

bool tsi_quant_refuse(const char *op, ts_dtype dt, const ts_tensor *t) {
    if (t)
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: quantized tensors are not supported (input: %s); take ts_dequantize "
                      "first",
                      op, tsi_desc(t));
    else
        tsi_error_set(TS_ERR_DTYPE, "%s: cannot make a tensor of quantized dtype %s here", op,
                      ts_dtype_name(dt));
    return false;
}
