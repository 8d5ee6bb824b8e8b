/* complex.c — the views between complex tensors and their float parts, and the complex-only
 * operators (include/tessera/complex.h). Everything else a complex tensor does is composed of
 * real ops over these views (complex_arith.c, fft.c), so one definition serves every device and
 * autograd comes from the real ops: PyTorch's convention (the gradient of z = x + iy is
 * dL/dx + i dL/dy) is exactly the real gradient of the (x, y) pairs. */
#include <math.h>

#include "autograd/autograd.h"
#include "tessera/complex.h"
#include "tessera/logic.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

static void view_as_complex_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    (void)n;
    if (go[0]) gi[0] = ts_view_as_real(go[0]);
}

static void view_as_real_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    (void)n;
    if (go[0]) gi[0] = ts_view_as_complex(ts_contiguous(go[0]));
}

ts_tensor *ts_view_as_real(ts_tensor *t) {
    const char *op = "view_as_real";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!tsi_is_complex(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: view_as_real is only supported for complex tensors (input: %s)",
                             op, tsi_desc(t)),
               NULL;
    const int nd = t->shape.ndim;
    if (nd + 1 > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: at most %d dims (input: %s)", op, TS_MAX_DIMS - 1,
                             tsi_desc(t)),
               NULL;
    ts_shape s = t->shape;
    int64_t st[TS_MAX_DIMS];
    for (int i = 0; i < nd; i++) st[i] = 2 * t->strides[i];
    s.dims[nd] = 2;
    st[nd] = 1;
    s.ndim = nd + 1;
    ts_tensor *v = tsi_view_of(t, s, st, 2 * t->offset);
    if (!v) return NULL;
    v->dtype = tsi_complex_part(t->dtype);
    if (tsi_needs_graph(&t, 1)) {
        ts_node *n =
            tsi_record("ViewAsRealBackward0", op, view_as_real_backward, &t, 1, v, NULL, 0);
        if (n) n->flags |= TSI_NODE_TWICE; /* a view of the gradient: differentiable again */
    }
    return tsi_own(v);
}

ts_tensor *ts_view_as_complex(ts_tensor *t) {
    const char *op = "view_as_complex";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->dtype != TS_F32 && t->dtype != TS_F64)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: is only supported for float32 and float64 tensors, but got a "
                             "tensor of scalar type: %s (input: %s)",
                             op, tsi_torch_scalar_name(t->dtype), tsi_desc(t)),
               NULL;
    const int nd = t->shape.ndim;
    if (nd == 0 || t->shape.dims[nd - 1] != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Tensor must have a last dimension of size 2 (%s)",
                             op, tsi_desc(t)),
               NULL;
    if (t->strides[nd - 1] != 1)
        return tsi_error_set(TS_ERR_ARG, "%s: Tensor must have a last dimension with stride 1 (%s)",
                             op, tsi_desc(t)),
               NULL;
    for (int i = 0; i < nd - 1; i++)
        if (t->strides[i] % 2)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Tensor must have a stride divisible by 2 for all but last "
                                 "dimension (%s)",
                                 op, tsi_desc(t)),
                   NULL;
    if (t->offset % 2)
        return tsi_error_set(TS_ERR_ARG, "%s: Tensor must have a storage_offset divisible by 2",
                             op),
               NULL;
    ts_shape s = t->shape;
    s.ndim = nd - 1;
    s.dims[nd - 1] = 0; /* unused dims are 0 (shapes compare whole) */
    int64_t st[TS_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) st[i] = t->strides[i] / 2;
    ts_tensor *v = tsi_view_of(t, s, st, t->offset / 2);
    if (!v) return NULL;
    v->dtype = tsi_complex_of(t->dtype);
    if (tsi_needs_graph(&t, 1)) {
        ts_node *n =
            tsi_record("ViewAsComplexBackward0", op, view_as_complex_backward, &t, 1, v, NULL, 0);
        if (n) n->flags |= TSI_NODE_TWICE; /* a view of the gradient: differentiable again */
    }
    return tsi_own(v);
}

/* a complex tensor from parts of one float dtype and shape */
static ts_tensor *from_parts(ts_tensor *re, ts_tensor *im) {
    ts_tensor *y = ts_view_as_complex(ts_stack((ts_tensor *[]){re, im}, 2, -1));
    if (y) y->is_view = false; /* the stacked pairs are its own: a plain result */
    return y;
}

ts_tensor *ts_complex(ts_tensor *re, ts_tensor *im) {
    const char *op = "complex";
    tsi_init();
    if (!tsi_check_input(op, re, "real") || !tsi_check_input(op, im, "imag")) return NULL;
    if ((re->dtype != TS_F32 && re->dtype != TS_F64) || re->dtype != im->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Expected both inputs to be Float or Double tensors of one dtype "
                             "but got %s and %s",
                             op, tsi_desc(re), tsi_desc(im)),
               NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, re->shape, im->shape, &s)) return NULL;
    ts_scope_begin();
    return finish(from_parts(ts_expand(re, s), ts_expand(im, s)));
}

ts_tensor *ts_polar(ts_tensor *abs, ts_tensor *angle) {
    tsi_init();
    if (!tsi_check_input("polar", abs, "abs") || !tsi_check_input("polar", angle, "angle"))
        return NULL;
    if ((abs->dtype != TS_F32 && abs->dtype != TS_F64) || abs->dtype != angle->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "polar: Expected both inputs to be Float or Double tensors of one "
                             "dtype but got %s and %s",
                             tsi_desc(abs), tsi_desc(angle)),
               NULL;
    ts_scope_begin();
    return finish(ts_complex(ts_mul(abs, ts_cos(angle)), ts_mul(abs, ts_sin(angle))));
}

ts_tensor *ts_real(ts_tensor *t) {
    if (!tsi_check_input("real", t, "input")) return NULL;
    if (!tsi_is_complex(t->dtype)) return tsi_own(ts_retain(t));
    ts_scope_begin();
    return finish(ts_select(ts_view_as_real(t), -1, 0));
}

ts_tensor *ts_imag(ts_tensor *t) {
    if (!tsi_check_input("imag", t, "input")) return NULL;
    if (!tsi_is_complex(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "imag: imag is not implemented for tensors with non-complex dtypes "
                             "(input: %s)",
                             tsi_desc(t)),
               NULL;
    ts_scope_begin();
    return finish(ts_select(ts_view_as_real(t), -1, 1));
}

ts_tensor *ts_conj(ts_tensor *t) {
    if (!tsi_check_input("conj", t, "input")) return NULL;
    if (!tsi_is_complex(t->dtype)) return tsi_own(ts_retain(t));
    ts_scope_begin();
    return finish(from_parts(ts_real(t), ts_neg(ts_imag(t))));
}

ts_tensor *ts_angle(ts_tensor *t) {
    if (!tsi_check_input("angle", t, "input")) return NULL;
    ts_scope_begin();
    if (tsi_is_complex(t->dtype)) return finish(ts_atan2(ts_imag(t), ts_real(t)));
    /* real: 0, pi below 0, NaN kept; no gradient (PyTorch's is zero) */
    ts_tensor *x = ts_detach(t);
    if (x && !tsi_is_float(x->dtype)) x = ts_to_dtype(x, TS_F32);
    if (!x) return finish(NULL);
    ts_tensor *pi =
        ts_scalar(3.14159265358979323846, (ts_opts){.dtype = x->dtype, .device = tsi_device(x)});
    ts_tensor *zero = ts_scalar(0.0, (ts_opts){.dtype = x->dtype, .device = tsi_device(x)});
    ts_tensor *y = ts_where(ts_lt_scalar(x, 0.0), pi, zero);
    return finish(ts_where(ts_isnan(x), x, y));
}
