/* optimize.c — the inference rewrites of ts_onnx_opts.optimize (BatchNormalization folded into the
 * Conv before it, Conv + Relu fused): none yet beyond constant folding (fold.c). */
#include "onnx/onnx_internal.h"

bool tso_optimize(tso_model *m) {
    (void)m;
    return true;
}
