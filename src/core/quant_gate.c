/* quant_gate.c — the one list of the ops that take quantized tensors (qint8, quint8, qint32,
 * quint4x2).
 *
 * A quantized tensor stores integers whose meaning is (q - zero_point) * scale; an op without a
 * quantized path would read those integers as the numbers themselves and return a wrong result
 * without a word. So the core refuses a quantized tensor or dtype at the doors the complex gate
 * uses (tsi_check_input, tsi_new, tsi_cast, shared storage: TSI_DTYPE_GATE in internal.h) unless
 * the op's name is here. Each name here is a function of src/ops/quantize.c or qlinear.c, or a
 * query that reads no element; dropout passes a quantized input through in eval mode (PyTorch's
 * quantized models keep their Dropout modules) and refuses it in training. Each quantized op
 * under src/ops/q*.c is listed only once it reads its quantized inputs through their parameters.
 *
 * The view ops (second list) take a tensor quantized per tensor (qint8, quint8, qint32): the
 * result carries the input's descriptor. A view that keeps the input's layout (detach, alias,
 * contiguous of a contiguous tensor) shares its storage; one that changes it (transpose, narrow,
 * select...) is a contiguous copy of those integers (tsi_view_of, core/tensor.c): every quantized
 * kernel reads a dense tensor, and no op writes into a quantized tensor in place, so a copy reads
 * as a view would. Per-channel and per-group tensors (an axis to move, nibbles packed two a byte)
 * take only detach and (not packed int4) contiguous, which keep their layout; the other
 * view ops refuse them by name. ts_to moves a quantized tensor (not packed int4) with its
 * descriptor. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/quant_desc.h"

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
    "quantized_avg_pool2d",
    "quantized_cat",
    "quantized_conv2d",
    "quantized_hardsigmoid",
    "quantized_hardswish",
    "quantized_linear",
    "quantized_linear_acc",
    "quantized_max_pool2d",
    "quantized_mean",
    "quantized_mul",
    "quantized_mul_relu",
    "quantized_reshape",
    "shape_of",
    "size",
    "storage_offset",
    "stride",
    "to",
    "weight_only_linear",
};

/* the view ops that take a per-tensor quantized tensor (sorted as above) */
static const char *const view_ops[] = {
    "chunk", "contiguous", "detach",  "expand", "movedim",   "narrow", "permute",   "select",
    "slice", "split",      "squeeze", "t",      "transpose", "unbind", "unsqueeze", "view",
};

static int cmp_name(const void *key, const void *elem) {
    return strcmp((const char *)key, *(const char *const *)elem);
}

#define IN_LIST(op, list)                                                                          \
    (bsearch(op, list, sizeof list / sizeof list[0], sizeof list[0], cmp_name) != NULL)

bool tsi_quant_op_ok(const char *op) { return IN_LIST(op, quant_ops); }

bool tsi_quant_view_op(const char *op) { return IN_LIST(op, view_ops); }

bool tsi_quant_gate(const char *op, ts_dtype dt, const ts_tensor *t) {
    if (tsi_quant_op_ok(op)) return true;
    if (!tsi_quant_view_op(op)) return tsi_quant_refuse(op, dt, t);
    /* a view op: its own new tensor (t NULL: the copy tsi_view_of makes) or a per-tensor input;
     * detach keeps any tensor's layout, contiguous that of every tensor a user holds */
    if (!t || !strcmp(op, "detach") ||
        (dt != TS_QUINT4X2 && t->quant &&
         (t->quant->scheme == TS_PER_TENSOR_AFFINE || !strcmp(op, "contiguous"))))
        return true;
    tsi_error_set(TS_ERR_DTYPE,
                  "%s: views of quantized tensors take qint8, quint8 or qint32 quantized per "
                  "tensor (input: %s, %s); take ts_dequantize first",
                  op, tsi_desc(t),
                  dt == TS_QUINT4X2                                     ? "packed int4"
                  : t->quant && t->quant->scheme == TS_PER_GROUP_AFFINE ? "per group"
                                                                        : "per channel");
    return false;
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
