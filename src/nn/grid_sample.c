/* grid_sample.c — torch.nn.functional.grid_sample and affine_grid (issue 76): PyTorch's
 * GridSampler.h arithmetic (unnormalize, clip / reflect, nearbyint for nearest, the A = -0.75
 * cubic for bicubic) on 4-D and 5-D inputs, composed of differentiable ops (gather, where, floor,
 * arithmetic, matmul), so input, grid and theta get PyTorch's gradients on every device. The ONNX
 * importer's GridSample calls ts_grid_sample too. */
#include <string.h>

#include "core/internal.h"

#define GS_OP "grid_sample"

/* run body between a scope and keep its result (NULL when anything failed) */
static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* PyTorch's grid_sampler_unnormalize: [-1, 1] to pixel coordinates of a size-n dim */
static ts_tensor *unnormalize(ts_tensor *c, int64_t n, bool align) {
    if (align) return ts_mul_scalar(ts_add_scalar(c, 1), ((double)n - 1) / 2);
    return ts_div_scalar(ts_sub_scalar(ts_mul_scalar(ts_add_scalar(c, 1), (double)n), 1), 2);
}

/* PyTorch's reflect_coordinates over [lo2 / 2, hi2 / 2] */
static ts_tensor *reflect(ts_tensor *c, double lo2, double hi2) {
    if (lo2 == hi2) return ts_zeros_like(c);
    double mn = lo2 / 2, span = (hi2 - lo2) / 2;
    ts_tensor *a = ts_abs(ts_sub_scalar(c, mn));
    ts_tensor *flips = ts_floor(ts_div_scalar(a, span));
    ts_tensor *extra = ts_sub(a, ts_mul_scalar(flips, span));
    ts_tensor *odd = ts_gt_scalar(ts_fmod_scalar(flips, 2), 0.5);
    return ts_where(odd, ts_rsub_scalar(ts_sub_scalar(extra, mn), span), ts_add_scalar(extra, mn));
}

/* PyTorch's compute_coordinates: border clips, reflection reflects then clips */
static ts_tensor *pad_coord(ts_tensor *c, int64_t n, ts_grid_padding pad, bool align) {
    if (pad == TS_GRID_BORDER) return ts_clamp(c, 0, (double)n - 1);
    if (pad == TS_GRID_REFLECTION) {
        c = align ? reflect(c, 0, 2 * ((double)n - 1)) : reflect(c, -1, 2 * (double)n - 1);
        return ts_clamp(c, 0, (double)n - 1);
    }
    return c;
}

typedef struct gs_ctx {
    ts_tensor *flat; /* input as [N, C, prod(S)] */
    int nd;
    int64_t size[3]; /* the input's spatial sizes, outermost first */
    int64_t n, ch, p;
} gs_ctx;

/* the input at integer coordinates ints[k] ([N, 1, P], floating; k = 0 the outermost dim), zero
 * where any lies outside */
static ts_tensor *tap(const gs_ctx *g, ts_tensor *const *ints) {
    ts_tensor *valid = NULL, *lin = NULL;
    for (int k = 0; k < g->nd; k++) {
        double last = (double)g->size[k] - 1;
        ts_tensor *ok = ts_logical_and(ts_ge_scalar(ints[k], 0), ts_le_scalar(ints[k], last));
        valid = valid ? ts_logical_and(valid, ok) : ok;
        ts_tensor *ic = ts_clamp(ints[k], 0, last);
        lin = lin ? ts_add(ts_mul_scalar(lin, (double)g->size[k]), ic) : ic;
    }
    ts_tensor *idx = ts_expand(ts_to_dtype(lin, TS_I64), TS_SHAPE(g->n, g->ch, g->p));
    ts_tensor *v = ts_gather(g->flat, 2, idx);
    return ts_where(valid, v, ts_zeros_like(v));
}

/* Keys' cubic convolution weights (A = -0.75): cc1 for |d| <= 1, cc2 for 1 < |d| < 2 */
static ts_tensor *cc1(ts_tensor *x) {
    const double a = -0.75;
    return ts_add_scalar(ts_mul(ts_sub_scalar(ts_mul_scalar(x, a + 2), a + 3), ts_square(x)), 1);
}
static ts_tensor *cc2(ts_tensor *x) {
    const double a = -0.75;
    ts_tensor *t = ts_add_scalar(ts_mul(ts_sub_scalar(ts_mul_scalar(x, a), 5 * a), x), 8 * a);
    return ts_sub_scalar(ts_mul(t, x), 4 * a);
}

static ts_tensor *grid_sample_body(ts_tensor *input, ts_tensor *grid, ts_grid_mode mode,
                                   ts_grid_padding pad, bool align) {
    gs_ctx g = {.nd = input->shape.ndim - 2, .n = input->shape.dims[0], .ch = input->shape.dims[1]};
    ts_shape out = {.ndim = input->shape.ndim};
    out.dims[0] = g.n, out.dims[1] = g.ch;
    int64_t numel = 1;
    g.p = 1;
    for (int k = 0; k < g.nd; k++) {
        g.size[k] = input->shape.dims[2 + k];
        numel *= g.size[k];
        out.dims[2 + k] = grid->shape.dims[1 + k];
        g.p *= grid->shape.dims[1 + k];
    }
    if (g.n * g.ch * g.p == 0)
        return ts_zeros(out, (ts_opts){.dtype = input->dtype, .device = tsi_device(input)});
    if (numel == 0) /* every tap outside an empty input: zeros, still connected to input */
        return ts_mul_scalar(ts_expand(ts_sum(input), out), 0);
    g.flat = ts_reshape(input, TS_SHAPE(g.n, g.ch, numel));
    ts_tensor *gf = ts_reshape(grid, TS_SHAPE(g.n, 1, g.p, g.nd));
    /* the coordinate of spatial dim k (0: the outermost) is grid[..., nd - 1 - k] */
    ts_tensor *raw[3];
    for (int k = 0; k < g.nd; k++)
        raw[k] = unnormalize(ts_select(gf, 3, g.nd - 1 - k), g.size[k], align);
    ts_tensor *y = NULL;
    if (mode == TS_GRID_NEAREST) {
        ts_tensor *ints[3];
        for (int k = 0; k < g.nd; k++) ints[k] = ts_round(pad_coord(raw[k], g.size[k], pad, align));
        y = tap(&g, ints);
    } else if (mode == TS_GRID_BILINEAR) {
        ts_tensor *lo[3], *w1[3], *w0[3];
        for (int k = 0; k < g.nd; k++) {
            ts_tensor *src = pad_coord(raw[k], g.size[k], pad, align);
            lo[k] = ts_floor(src);
            w1[k] = ts_sub(src, lo[k]);
            w0[k] = ts_rsub_scalar(w1[k], 1);
        }
        for (int corner = 0; corner < (1 << g.nd); corner++) {
            ts_tensor *ints[3], *w = NULL;
            for (int k = 0; k < g.nd; k++) {
                int bit = (corner >> (g.nd - 1 - k)) & 1;
                ints[k] = bit ? ts_add_scalar(lo[k], 1) : lo[k];
                w = w ? ts_mul(w, bit ? w1[k] : w0[k]) : (bit ? w1[k] : w0[k]);
            }
            ts_tensor *term = ts_mul(tap(&g, ints), w);
            y = y ? ts_add(y, term) : term;
        }
    } else { /* bicubic: 4 taps per dim around floor, each padded as a coordinate */
        ts_tensor *lo[3], *ws[3][4];
        for (int k = 0; k < g.nd; k++) {
            lo[k] = ts_floor(raw[k]);
            ts_tensor *t = ts_sub(raw[k], lo[k]);
            ws[k][0] = cc2(ts_add_scalar(t, 1));
            ws[k][1] = cc1(t);
            ws[k][2] = cc1(ts_rsub_scalar(t, 1));
            ws[k][3] = cc2(ts_rsub_scalar(t, 2));
        }
        int taps = 1;
        for (int k = 0; k < g.nd; k++) taps *= 4;
        for (int c = 0; c < taps; c++) {
            ts_tensor *ints[3], *w = NULL;
            int r = c;
            for (int k = g.nd - 1; k >= 0; k--, r /= 4) {
                int t = r % 4;
                ints[k] = pad_coord(ts_add_scalar(lo[k], t - 1), g.size[k], pad, align);
                w = w ? ts_mul(w, ws[k][t]) : ws[k][t];
            }
            ts_tensor *term = ts_mul(tap(&g, ints), w);
            y = y ? ts_add(y, term) : term;
        }
    }
    return ts_reshape(y, out);
}

static bool grid_sample_check(ts_tensor *input, ts_tensor *grid, ts_grid_mode mode,
                              ts_grid_padding pad) {
    if (!tsi_check_input(GS_OP, input, "input") || !tsi_check_input(GS_OP, grid, "grid"))
        return false;
    if ((unsigned)mode > TS_GRID_BICUBIC)
        return tsi_error_set(TS_ERR_ARG,
                             GS_OP ": expected mode to be bilinear, nearest or bicubic, but got "
                                   "%d",
                             (int)mode),
               false;
    if ((unsigned)pad > TS_GRID_REFLECTION)
        return tsi_error_set(TS_ERR_ARG,
                             GS_OP ": expected padding_mode to be zeros, border or reflection, "
                                   "but got %d",
                             (int)pad),
               false;
    int nd = input->shape.ndim - 2;
    if (nd != 2 && nd != 3)
        return tsi_error_set(TS_ERR_SHAPE, GS_OP ": expected 4-D or 5-D input, got %s",
                             tsi_desc(input)),
               false;
    if (grid->shape.ndim != input->shape.ndim || grid->shape.dims[nd + 1] != nd ||
        grid->shape.dims[0] != input->shape.dims[0])
        return tsi_error_set(TS_ERR_SHAPE,
                             GS_OP ": expected grid of shape (%lld, ..., %d) with %d dims for "
                                   "input %s, got %s",
                             (long long)input->shape.dims[0], nd, input->shape.ndim,
                             tsi_shape_str(input->shape), tsi_shape_str(grid->shape)),
               false;
    ts_tensor *both[2] = {input, grid};
    ts_device dev;
    if (!tsi_same_device(GS_OP, both, 2, false, &dev)) return false;
    if (!ts_dtype_is_floating(input->dtype))
        return tsi_error_set(TS_ERR_DTYPE, GS_OP ": expected a floating input, got %s",
                             tsi_desc(input)),
               false;
    if (grid->dtype != input->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             GS_OP ": expected grid and input to have the same dtype, got %s and "
                                   "%s",
                             ts_dtype_name(grid->dtype), ts_dtype_name(input->dtype)),
               false;
    return true;
}

ts_tensor *ts_grid_sample(ts_tensor *input, ts_tensor *grid, ts_grid_mode mode,
                          ts_grid_padding padding_mode, bool align_corners) {
    tsi_init();
    if (!grid_sample_check(input, grid, mode, padding_mode)) return NULL;
    ts_scope_begin();
    return finish(grid_sample_body(input, grid, mode, padding_mode, align_corners));
}

/* ------------------------------------------------------------------ affine_grid */
/* PyTorch's linspace_from_neg_one: n points over [-1, 1] (pixel centres unless aligned) */
static ts_tensor *base_axis(int64_t n, bool align, ts_opts o) {
    if (n <= 1) return ts_zeros(TS_SHAPE(n), o);
    ts_tensor *r = ts_linspace(-1, 1, n, o);
    return align ? r : ts_mul_scalar(r, ((double)n - 1) / (double)n);
}

ts_tensor *ts_affine_grid(ts_tensor *theta, ts_shape size, bool align_corners) {
    const char *op = "affine_grid";
    tsi_init();
    if (!tsi_check_input(op, theta, "theta")) return NULL;
    if (!ts_dtype_is_floating(theta->dtype))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Expected theta to have floating point type, but got %s", op,
                             ts_dtype_name(theta->dtype)),
               NULL;
    if (size.ndim != 4 && size.ndim != 5)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: affine_grid only supports 4D and 5D sizes, for 2D and 3D affine "
                             "transforms, respectively. Got size %s.",
                             op, tsi_shape_str(size)),
               NULL;
    const int nd = size.ndim - 2;
    if (theta->shape.ndim != 3 || theta->shape.dims[1] != nd || theta->shape.dims[2] != nd + 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Expected a batch of %dD affine matrices of shape Nx%dx%d for "
                             "size %s. Got %s.",
                             op, nd, nd, nd + 1, tsi_shape_str(size), tsi_shape_str(theta->shape)),
               NULL;
    for (int i = 0; i < size.ndim; i++)
        if (size.dims[i] <= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: Expected non-zero, positive output size. Got %s",
                                 op, tsi_shape_str(size)),
                   NULL;
    if (theta->shape.dims[0] != size.dims[0])
        return tsi_error_set(TS_ERR_ARG, "%s: theta has %lld matrices, size a batch of %lld", op,
                             (long long)theta->shape.dims[0], (long long)size.dims[0]),
               NULL;
    ts_scope_begin();
    ts_opts o = {.dtype = theta->dtype, .device = tsi_device(theta)};
    ts_shape sp = {.ndim = nd};
    int64_t p = 1;
    for (int k = 0; k < nd; k++) sp.dims[k] = size.dims[2 + k], p *= sp.dims[k];
    /* the base grid's columns: x (the last dim), y[, z], then 1 */
    ts_tensor *cols[4];
    for (int k = 0; k < nd; k++) {
        int dim = nd - 1 - k;
        ts_shape view = {.ndim = nd};
        for (int j = 0; j < nd; j++) view.dims[j] = 1;
        view.dims[dim] = sp.dims[dim];
        cols[k] = ts_expand(ts_reshape(base_axis(sp.dims[dim], align_corners, o), view), sp);
    }
    cols[nd] = ts_ones(sp, o);
    ts_tensor *base = ts_reshape(ts_stack(cols, nd + 1, -1), TS_SHAPE(1, p, nd + 1));
    ts_tensor *g = ts_matmul(base, ts_transpose(theta, 1, 2));
    ts_shape out = {.ndim = nd + 2};
    out.dims[0] = size.dims[0];
    for (int k = 0; k < nd; k++) out.dims[1 + k] = sp.dims[k];
    out.dims[nd + 1] = nd;
    return finish(ts_reshape(g, out));
}
