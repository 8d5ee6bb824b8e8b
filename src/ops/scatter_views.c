/* scatter_views.c — the scatters into a view (issue 76): select_scatter, slice_scatter,
 * diagonal_scatter. Each is a copy of the input whose view (select, slice, diagonal) takes src's
 * values: ts_clone, the view, ts_copy_ into it. copy_ through a view records CopySlices on the
 * clone, so the input's gradient is the output's with the view's positions zeroed and src's is the
 * view of the output's gradient, on every device, as PyTorch's. src is cast to the input's dtype
 * (copy_'s rule, as PyTorch's). */
#include <stdint.h>
#include <stdio.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* the input and src checked (same device); false with the error set */
static bool scatter_args(const char *op, ts_tensor *t, ts_tensor *src) {
    tsi_init();
    return check_two(op, t, "input", src, "src");
}

/* src's shape equal to the view's, else TS_ERR_SHAPE naming op and what the view is */
static bool same_as_view(const char *op, ts_tensor *src, ts_tensor *view, const char *what) {
    if (tsi_shape_equal(src->shape, view->shape)) return true;
    char want[128];
    snprintf(want, sizeof want, "%s", tsi_shape_str(view->shape));
    tsi_error_set(TS_ERR_SHAPE,
                  "%s: expected src to have a size equal to the %s of self. src size = %s, %s "
                  "size = %s",
                  op, what, tsi_shape_str(src->shape), what, want);
    return false;
}

/* the copy of t whose view (made by the caller from y) takes src: finishes the scope */
static ts_tensor *fill_view(const char *op, ts_tensor *y, ts_tensor *view, ts_tensor *src,
                            const char *what) {
    if (!view || !same_as_view(op, src, view, what)) return finish(NULL);
    return finish(ts_copy_(view, src) ? y : NULL);
}

ts_tensor *ts_select_scatter(ts_tensor *t, ts_tensor *src, int dim, int64_t index) {
    const char *op = "select_scatter";
    if (!scatter_args(op, t, src)) return NULL;
    if (t->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: select() cannot be applied to a 0-dim tensor", op),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    const int64_t n = t->shape.dims[d];
    if (index < -n || index >= n)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: index %lld out of range for tensor of size %s at dimension %d",
                             op, (long long)index, tsi_shape_str(t->shape), dim),
               NULL;
    ts_scope_begin();
    ts_tensor *y = ts_clone(t);
    return fill_view(op, y, y ? ts_select(y, d, index < 0 ? index + n : index) : NULL, src,
                     "slice");
}

ts_tensor *ts_slice_scatter(ts_tensor *t, ts_tensor *src, int dim, int64_t start, int64_t end,
                            int64_t step) {
    const char *op = "slice_scatter";
    if (!scatter_args(op, t, src)) return NULL;
    if (t->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: slice() cannot be applied to a 0-dim tensor", op),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    if (step <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: slice step must be positive, got %lld", op,
                             (long long)step),
               NULL;
    ts_scope_begin();
    ts_tensor *y = ts_clone(t);
    return fill_view(op, y, y ? ts_slice(y, d, start, end, step) : NULL, src, "slice");
}

ts_tensor *ts_diagonal_scatter(ts_tensor *t, ts_tensor *src, int64_t offset, int dim1, int dim2) {
    const char *op = "diagonal_scatter";
    if (!scatter_args(op, t, src)) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected a tensor of at least 2 dims, got %s", op,
                             tsi_desc(t)),
               NULL;
    const int a = tsi_wrap_dim(op, dim1, t->shape.ndim), b = tsi_wrap_dim(op, dim2, t->shape.ndim);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return tsi_error_set(TS_ERR_ARG, "%s: diagonal dimensions cannot be identical %d, %d", op,
                             dim1, dim2),
               NULL;
    ts_scope_begin();
    ts_tensor *y = ts_clone(t);
    return fill_view(op, y, y ? ts_diagonal(y, offset, dim1, dim2) : NULL, src, "diagonal");
}
