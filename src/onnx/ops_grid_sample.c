/* ops_grid_sample.c — ONNX's GridSample (bilinear, nearest and bicubic sampling with zeros, border
 * or reflection padding) on [N, C, H, W]: the node's attributes read, then ts_grid_sample
 * (src/nn/grid_sample.c, PyTorch's arithmetic, which ONNX's operator follows). */
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ GridSample */
/* the attributes' names in ts_grid_mode's and ts_grid_padding's order */
static int pick(const char *v, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

static const char *const GS_MODES[] = {"bilinear", "nearest", "bicubic"};
static const char *const GS_MODES20[] = {"linear", "nearest", "cubic"}; /* opset 20's names */
static const char *const GS_PADS[] = {"zeros", "border", "reflection"};

static bool gs_options(const tso_node *n, ts_grid_mode *mode, ts_grid_padding *pad) {
    char b1[32], b2[32];
    const bool v20 = n->opset >= 20;
    const char *m = tso_attr_string(n, "mode", v20 ? "linear" : "bilinear", b1, sizeof b1);
    const char *p = tso_attr_string(n, "padding_mode", "zeros", b2, sizeof b2);
    int im = pick(m, v20 ? GS_MODES20 : GS_MODES, 3), ip = pick(p, GS_PADS, 3);
    if (im < 0) return tso_fail(n, TS_ERR_UNSUPPORTED, "mode '%s' at opset %d", m, n->opset);
    if (ip < 0) return tso_fail(n, TS_ERR_UNSUPPORTED, "padding_mode '%s'", p);
    *mode = (ts_grid_mode)im;
    *pad = (ts_grid_padding)ip;
    return true;
}

static bool check_grid_sample(const tso_node *n) {
    ts_grid_mode m;
    ts_grid_padding p;
    return gs_options(n, &m, &p);
}

TSO_RUN(run_grid_sample) {
    (void)c;
    ts_tensor *x = in[0], *grid = in[1];
    ts_grid_mode mode;
    ts_grid_padding pad;
    if (!gs_options(n, &mode, &pad)) return false;
    bool align = tso_attr_int(n, "align_corners", 0) != 0;
    if (ts_ndim(x) != 4)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "GridSample needs X [N, C, H, W], got %s (opset 20's N-d sampling is not "
                        "implemented)",
                        tsi_desc(x));
    ts_dtype xdt = ts_dtype_of(x);
    if (mode != TS_GRID_NEAREST && !ts_dtype_is_floating(xdt))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "interpolating %s (not float)", tsi_desc(x));
    /* ts_grid_sample samples floating tensors with a grid of their dtype: nearest samples of
     * integers are read in float64 (exact to 2^53) and cast back */
    ts_dtype dt = ts_dtype_is_floating(xdt) ? xdt : TS_F64;
    ts_tensor *y = ts_grid_sample(ts_to_dtype(x, dt), ts_to_dtype(grid, dt), mode, pad, align);
    TSO_DONE(y && dt != xdt ? ts_to_dtype(y, xdt) : y);
}

const tso_op_def tso_ops_grid_sample[] = {
    {"GridSample", 16, run_grid_sample, check_grid_sample, false},
    {"GridSample", 20, run_grid_sample, check_grid_sample, false}, /* modes renamed */
    {NULL, 0, NULL, NULL, false},
};
