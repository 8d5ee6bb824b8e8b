/* ops_nn_einsum.c — ONNX's Einsum: the node's equation and inputs handed to ts_einsum
 * (src/ops/einsum.c, torch.einsum's semantics: NumPy's for every equation ONNX allows). */
#include "onnx/ops_nn.h"

static const char *equation(const tso_node *n, char *buf, size_t size) {
    const char *s = tso_attr_string(n, "equation", NULL, buf, size);
    if (!s) tso_fail(n, TS_ERR_FORMAT, "needs the equation attribute");
    return s;
}

TSO_NN_CHECK(tso_nn_check_einsum) {
    char buf[512];
    return equation(n, buf, sizeof buf) != NULL;
}

TSO_NN_RUN(tso_nn_run_einsum) {
    (void)c;
    char buf[512];
    const char *eq = equation(n, buf, sizeof buf);
    if (!eq) return false;
    return (out[0] = ts_einsum(eq, in, n->n_in)) != NULL || tso_fail_pending(n);
}
