/* views.c — views that share storage (view/reshape, permute, transpose, squeeze, narrow,
 * expand...), each recording its backward (view_grad.c). */
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/copy_slices.h"
#include "autograd/trace.h"
#include "ops/view_grad.h"
#include "tessera/quant.h"

/* A view of t, recorded with the backward `fn` and integer parameters ip (may be NULL). */
static ts_tensor *record_view(ts_tensor *t, ts_tensor *out, const char *name, const char *op,
                              tsi_backward_fn fn, const int64_t *ip, int nip) {
    if (!out) return NULL;
    tsi_view_attach(t, out); /* in-place writes through it reach t's history (copy_slices.h) */
    ts_node *n = tsi_record(name, op, fn, &t, 1, out, NULL, 0);
    if (n) n->flags |= TSI_NODE_TWICE; /* view_grad.c: views and copies of the gradient */
    if (n && ip) memcpy(n->ip, ip, sizeof(int64_t) * (size_t)nip);
    return tsi_own(tsi_trace(op, &t, 1, out, ip, ip ? nip : 0, NULL, 0));
}

#define RESHAPED(t, v, name, op) record_view(t, v, name, op, tsi_reshape_backward, NULL, 0)

/* Replace a single -1 by what the element count implies. */
static bool infer_shape(const char *op, ts_shape *s, int64_t numel) {
    if (!(s->ndim >= 0 && s->ndim <= TS_MAX_DIMS)) return tsi_check_shape(op, *s);
    int infer = -1;
    int64_t known = 1;
    bool overflow = false; /* a product past int64 cannot equal any tensor's size */
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] == -1) {
            if (infer >= 0)
                return tsi_error_set(TS_ERR_SHAPE, "%s: only one dimension can be inferred", op),
                       false;
            infer = i;
        } else if (s->dims[i] < 0) {
            return tsi_error_set(TS_ERR_SHAPE, "%s: invalid shape dimension %lld", op,
                                 (long long)s->dims[i]),
                   false;
        } else {
            overflow |= __builtin_mul_overflow(known, s->dims[i], &known);
        }
    }
    if (overflow) {
        return tsi_error_set(TS_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                             tsi_shape_str(*s), (long long)numel),
               false;
    } else if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return tsi_error_set(TS_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld",
                                 op, tsi_shape_str(*s), (long long)numel),
                   false;
        s->dims[infer] = numel / known;
    } else if (known != numel) {
        return tsi_error_set(TS_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                             tsi_shape_str(*s), (long long)numel),
               false;
    }
    return true;
}

/* ATen's computeStride: strides for viewing t as shape s without a copy, if any exist. */
static bool view_strides(const ts_tensor *t, const ts_shape *s, int64_t *ns) {
    const ts_shape *os = &t->shape;
    const int64_t *ost = t->strides;
    if (tsi_numel(*os) == 0 || os->ndim == 0) {
        tsi_contiguous_strides(s, ns);
        return true;
    }
    int view_d = s->ndim - 1;
    int64_t chunk_base = ost[os->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int td = os->ndim - 1; td >= 0; td--) {
        tensor_numel *= os->dims[td];
        if (td == 0 || (os->dims[td - 1] != 1 && ost[td - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || s->dims[view_d] == 1)) {
                ns[view_d] = view_numel * chunk_base;
                view_numel *= s->dims[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base = ost[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

/* view and reshape trace the shape as the caller gave it (-1 stays -1: a batch size left free) */
static ts_tensor *trace_shape(const char *op, ts_tensor *t, ts_tensor *out, ts_shape given) {
    return tsi_trace(op, &t, 1, out, given.dims, given.ndim, NULL, 0);
}

ts_tensor *ts_view(ts_tensor *t, ts_shape s) {
    if (!tsi_check_input("view", t, "tensor")) return NULL;
    const ts_shape given = s;
    if (!infer_shape("view", &s, tsi_numel(t->shape)) || !tsi_check_shape("view", s)) return NULL;
    int64_t st[TS_MAX_DIMS];
    if (!view_strides(t, &s, st))
        return tsi_error_set(TS_ERR_SHAPE,
                             "view: view size %s is not compatible with input tensor's size and "
                             "stride (%s; at least one dimension spans across two contiguous "
                             "subspaces). Use ts_reshape instead.",
                             tsi_shape_str(s), tsi_desc(t)),
               NULL;
    ts_tensor *v = RESHAPED(t, tsi_view_of(t, s, st, t->offset), "ViewBackward0", "view");
    return trace_shape("view", t, v, given);
}

/* reshape / flatten of a quantized tensor (torch.flatten after a quantized pool): the same
 * integers and parameters in the new shape, through ts_quantized_reshape (a copy: quantized
 * tensors are never views; per tensor only, its error otherwise) */
static ts_tensor *reshape_quantized(ts_tensor *t, ts_shape s) {
    if (!tsi_check_input("quantized_reshape", t, "input") ||
        !infer_shape("reshape", &s, tsi_numel(t->shape)))
        return NULL;
    return ts_quantized_reshape(t, s);
}

ts_tensor *ts_reshape(ts_tensor *t, ts_shape s) {
    if (t && tsi_is_quantized(t->dtype)) return reshape_quantized(t, s);
    if (!tsi_check_input("reshape", t, "tensor")) return NULL;
    const ts_shape given = s;
    if (!infer_shape("reshape", &s, tsi_numel(t->shape)) || !tsi_check_shape("reshape", s))
        return NULL;
    int64_t st[TS_MAX_DIMS];
    if (view_strides(t, &s, st))
        return trace_shape(
            "reshape", t, RESHAPED(t, tsi_view_of(t, s, st, t->offset), "ViewBackward0", "reshape"),
            given);
    ts_tensor *c = tsi_contiguous("reshape", t);
    if (!c) return NULL;
    tsi_contiguous_strides(&s, st);
    ts_tensor *r = tsi_view_of(c, s, st, 0);
    ts_release(c);
    if (r) r->is_view = false; /* a fresh copy: nobody else sees its storage */
    return trace_shape("reshape", t, RESHAPED(t, r, "UnsafeViewBackward0", "reshape"), given);
}

ts_tensor *ts_flatten(ts_tensor *t, int start_dim, int end_dim) {
    if (!tsi_check_input(t && tsi_is_quantized(t->dtype) ? "quantized_reshape" : "flatten", t,
                         "tensor"))
        return NULL;
    int n = t->shape.ndim;
    if (n == 0) return ts_reshape(t, TS_SHAPE(1));
    int a = tsi_wrap_dim("flatten", start_dim, n), b = tsi_wrap_dim("flatten", end_dim, n);
    if (a < 0 || b < 0) return NULL;
    if (a > b)
        return tsi_error_set(TS_ERR_ARG, "flatten: start_dim %d cannot come after end_dim %d",
                             start_dim, end_dim),
               NULL;
    ts_shape s = {.ndim = n - (b - a)};
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (i <= a || i > b)
            s.dims[k++] = t->shape.dims[i];
        else
            s.dims[k - 1] *= t->shape.dims[i];
    }
    return tsi_trace("flatten", &t, 1, ts_reshape(t, s), (int64_t[]){a, b}, 2, NULL, 0);
}

ts_tensor *ts_permute(ts_tensor *t, ts_dims dims) {
    if (!tsi_check_input("permute", t, "tensor")) return NULL;
    int n = t->shape.ndim;
    if (dims.n != n)
        return tsi_error_set(TS_ERR_ARG,
                             "permute: number of dims don't match in permute (input has %d, %d "
                             "given)",
                             n, dims.n),
               NULL;
    ts_shape s = {.ndim = n};
    int64_t st[TS_MAX_DIMS], ip[TS_MAX_DIMS];
    bool seen[TS_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int d = tsi_wrap_dim("permute", dims.d[i], n);
        if (d < 0) return NULL;
        if (seen[d])
            return tsi_error_set(TS_ERR_ARG, "permute: repeated dim %d in permute", dims.d[i]),
                   NULL;
        seen[d] = true;
        s.dims[i] = t->shape.dims[d];
        st[i] = t->strides[d];
        ip[i] = d;
    }
    return record_view(t, tsi_view_of(t, s, st, t->offset), "PermuteBackward0", "permute",
                       tsi_permute_backward, ip, n);
}

ts_tensor *ts_transpose(ts_tensor *t, int d0, int d1) {
    if (!tsi_check_input("transpose", t, "tensor")) return NULL;
    int n = t->shape.ndim;
    int a = tsi_wrap_dim("transpose", d0, n), b = tsi_wrap_dim("transpose", d1, n);
    if (a < 0 || b < 0) return NULL;
    ts_shape s = t->shape;
    int64_t st[TS_MAX_DIMS];
    memcpy(st, t->strides, sizeof st);
    if (n > 0) {
        s.dims[a] = t->shape.dims[b];
        s.dims[b] = t->shape.dims[a];
        st[a] = t->strides[b];
        st[b] = t->strides[a];
    }
    return record_view(t, tsi_view_of(t, s, st, t->offset), "TransposeBackward0", "transpose",
                       tsi_transpose_backward, (int64_t[]){a, b}, 2);
}

ts_tensor *ts_t(ts_tensor *t) {
    if (!tsi_check_input("t", t, "tensor")) return NULL;
    if (t->shape.ndim > 2)
        return tsi_error_set(TS_ERR_SHAPE, "t: expects a tensor with <= 2 dimensions, but got %s",
                             tsi_desc(t)),
               NULL;
    if (t->shape.ndim < 2)
        return RESHAPED(t, tsi_view_of(t, t->shape, t->strides, t->offset), "TBackward0", "t");
    return ts_transpose(t, 0, 1);
}

static ts_tensor *squeeze_mask(ts_tensor *t, const bool *drop) {
    ts_shape s = {.ndim = 0};
    int64_t st[TS_MAX_DIMS];
    for (int i = 0; i < t->shape.ndim; i++) {
        if (drop[i]) continue;
        st[s.ndim] = t->strides[i];
        s.dims[s.ndim++] = t->shape.dims[i];
    }
    return RESHAPED(t, tsi_view_of(t, s, st, t->offset), "SqueezeBackward0", "squeeze");
}

ts_tensor *ts_squeeze(ts_tensor *t) {
    if (!tsi_check_input("squeeze", t, "tensor")) return NULL;
    bool drop[TS_MAX_DIMS];
    for (int i = 0; i < t->shape.ndim; i++) drop[i] = t->shape.dims[i] == 1;
    return squeeze_mask(t, drop);
}

ts_tensor *ts_squeeze_dim(ts_tensor *t, int dim) {
    if (!tsi_check_input("squeeze", t, "tensor")) return NULL;
    int d = tsi_wrap_dim("squeeze", dim, t->shape.ndim);
    if (d < 0) return NULL;
    bool drop[TS_MAX_DIMS] = {false};
    if (t->shape.ndim > 0) drop[d] = t->shape.dims[d] == 1;
    return squeeze_mask(t, drop);
}

ts_tensor *ts_squeeze_dims(ts_tensor *t, ts_dims dims) {
    if (!tsi_check_input("squeeze", t, "tensor")) return NULL;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "squeeze: %d dims given (at most %d)", dims.n,
                             TS_MAX_DIMS),
               NULL;
    bool drop[TS_MAX_DIMS] = {false}, seen[TS_MAX_DIMS] = {false};
    for (int i = 0; i < dims.n; i++) {
        int d = tsi_wrap_dim("squeeze", dims.d[i], t->shape.ndim);
        if (d < 0) return NULL;
        if (seen[d])
            return tsi_error_set(TS_ERR_ARG,
                                 "squeeze: dim %d appears multiple times in the list of dims", d),
                   NULL;
        seen[d] = true;
        if (t->shape.ndim > 0) drop[d] = t->shape.dims[d] == 1;
    }
    return squeeze_mask(t, drop);
}

ts_tensor *ts_unsqueeze(ts_tensor *t, int dim) {
    if (!tsi_check_input("unsqueeze", t, "tensor")) return NULL;
    int n = t->shape.ndim;
    if (n >= TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "unsqueeze: %s already has the maximum of %d dims",
                             tsi_desc(t), TS_MAX_DIMS),
               NULL;
    int d = tsi_wrap_dim("unsqueeze", dim, n + 1);
    if (d < 0) return NULL;
    ts_shape s = {.ndim = n + 1};
    int64_t st[TS_MAX_DIMS];
    for (int i = 0, j = 0; i <= n; i++) {
        if (i == d) {
            s.dims[i] = 1;
            st[i] = d < n ? t->shape.dims[d] * t->strides[d] : 1;
        } else {
            s.dims[i] = t->shape.dims[j];
            st[i] = t->strides[j++];
        }
    }
    return RESHAPED(t, tsi_view_of(t, s, st, t->offset), "UnsqueezeBackward0", "unsqueeze");
}

ts_tensor *ts_slice(ts_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    if (!tsi_check_input("slice", t, "tensor")) return NULL;
    if (t->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "slice: cannot slice a 0-dim tensor"), NULL;
    int d = tsi_wrap_dim("slice", dim, t->shape.ndim);
    if (d < 0) return NULL;
    if (step <= 0)
        return tsi_error_set(TS_ERR_ARG, "slice: step must be greater than zero, got %lld",
                             (long long)step),
               NULL;
    int64_t size = t->shape.dims[d];
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    ts_shape s = t->shape;
    int64_t st[TS_MAX_DIMS];
    memcpy(st, t->strides, sizeof st);
    s.dims[d] = (end - start + step - 1) / step;
    st[d] = t->strides[d] * step;
    return record_view(t, tsi_view_of(t, s, st, t->offset + start * t->strides[d]),
                       "SliceBackward0", "slice", tsi_slice_backward,
                       (int64_t[]){d, start, step, 0}, 4);
}

ts_tensor *ts_narrow(ts_tensor *t, int dim, int64_t start, int64_t length) {
    if (!tsi_check_input("narrow", t, "tensor")) return NULL;
    if (t->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "narrow: cannot be applied to a 0-dim tensor"), NULL;
    int d = tsi_wrap_dim("narrow", dim, t->shape.ndim);
    if (d < 0) return NULL;
    int64_t size = t->shape.dims[d];
    if (start < -size || start > size)
        return tsi_error_set(TS_ERR_ARG,
                             "narrow: start %lld out of range for dimension %d of size %lld",
                             (long long)start, dim, (long long)size),
               NULL;
    if (start < 0) start += size;
    if (length < 0 || start + length > size)
        return tsi_error_set(TS_ERR_ARG,
                             "narrow: start (%lld) + length (%lld) exceeds dimension size (%lld)",
                             (long long)start, (long long)length, (long long)size),
               NULL;
    ts_shape s = t->shape;
    s.dims[d] = length;
    return record_view(t, tsi_view_of(t, s, t->strides, t->offset + start * t->strides[d]),
                       "SliceBackward0", "narrow", tsi_slice_backward, (int64_t[]){d, start, 1, 0},
                       4);
}

ts_tensor *ts_select(ts_tensor *t, int dim, int64_t index) {
    if (!tsi_check_input("select", t, "tensor")) return NULL;
    if (t->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "select: cannot be applied to a 0-dim tensor"), NULL;
    int d = tsi_wrap_dim("select", dim, t->shape.ndim);
    if (d < 0) return NULL;
    int64_t size = t->shape.dims[d];
    if (index < -size || index >= size)
        return tsi_error_set(
                   TS_ERR_ARG,
                   "select: index %lld out of range for tensor of size %s at dimension %d",
                   (long long)index, tsi_shape_str(t->shape), dim),
               NULL;
    if (index < 0) index += size;
    ts_shape s = {.ndim = t->shape.ndim - 1};
    int64_t st[TS_MAX_DIMS];
    for (int i = 0, j = 0; i < t->shape.ndim; i++) {
        if (i == d) continue;
        s.dims[j] = t->shape.dims[i];
        st[j++] = t->strides[i];
    }
    return record_view(t, tsi_view_of(t, s, st, t->offset + index * t->strides[d]),
                       "SelectBackward0", "select", tsi_slice_backward, (int64_t[]){d, index, 1, 1},
                       4);
}

ts_tensor *ts_expand(ts_tensor *t, ts_shape s) {
    if (!tsi_check_input("expand", t, "tensor")) return NULL;
    if (s.ndim < 0 || s.ndim > TS_MAX_DIMS) return tsi_check_shape("expand", s), NULL;
    int n = t->shape.ndim, lead = s.ndim - n;
    if (lead < 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "expand: the number of sizes provided (%d) must be greater or equal "
                             "to the number of dimensions in the tensor (%d)",
                             s.ndim, n),
               NULL;
    int64_t st[TS_MAX_DIMS];
    for (int i = 0; i < s.ndim; i++) {
        int j = i - lead;
        if (j < 0) {
            if (s.dims[i] < 0)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "expand: the expanded size of the tensor (-1) isn't allowed "
                                     "in a leading, non-existing dimension %d",
                                     i),
                       NULL;
            st[i] = 0;
            continue;
        }
        int64_t have = t->shape.dims[j];
        if (s.dims[i] == -1) s.dims[i] = have;
        if (s.dims[i] == have)
            st[i] = t->strides[j];
        else if (have == 1 && s.dims[i] >= 0)
            st[i] = 0;
        else
            return tsi_error_set(TS_ERR_SHAPE,
                                 "expand: the expanded size of the tensor (%lld) must match the "
                                 "existing size (%lld) at non-singleton dimension %d.  Target "
                                 "sizes: %s.  Tensor sizes: %s",
                                 (long long)s.dims[i], (long long)have, i, tsi_shape_str(s),
                                 tsi_shape_str(t->shape)),
                   NULL;
    }
    if (!tsi_check_shape("expand", s)) return NULL; /* a view too must count its elements */
    return record_view(t, tsi_view_of(t, s, st, t->offset), "ExpandBackward0", "expand",
                       tsi_expand_backward, NULL, 0);
}

ts_tensor *ts_expand_as(ts_tensor *t, ts_tensor *other) {
    if (!tsi_check_input("expand_as", other, "other")) return NULL;
    return ts_expand(t, other->shape);
}

ts_tensor *ts_contiguous(ts_tensor *t) {
    if (!tsi_check_input("contiguous", t, "tensor")) return NULL;
    if (!tsi_is_contiguous(t)) tsi_log_op("contiguous", tsi_device(t)); /* a copy: the profiler's */
    ts_tensor *c = tsi_contiguous("contiguous", t);
    if (c == t) return tsi_own(c);
    return record_view(t, c, "CloneBackward0", "contiguous", tsi_identity_backward, NULL, 0);
}

ts_tensor *ts_contiguous_format(ts_tensor *t, ts_memory_format f) {
    const char *op = "contiguous";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (f == TS_CONTIGUOUS_FORMAT) return ts_contiguous(t);
    if (f != TS_CHANNELS_LAST)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown memory format %d (tensor %s)", op, (int)f,
                             tsi_desc(t)),
               NULL;
    if (t->shape.ndim != 4)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: required rank 4 tensor to use channels_last format (tensor %s)",
                             op, tsi_desc(t)),
               NULL;
    if (tsi_is_quantized(t->dtype)) /* every quantized tensor a user holds is dense NCHW */
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: channels_last quantized tensors are not supported (tensor %s); "
                             "the quantized ops take NCHW",
                             op, tsi_desc(t)),
               NULL;
    tsi_log_op(op, tsi_device(t));
    ts_tensor *c = tsi_channels_last(op, t);
    if (c == t) return tsi_own(c);
    return record_view(t, c, "CloneBackward0", op, tsi_identity_backward, NULL, 0);
}

/* view(dtype): the same bytes read as another dtype. Elements of one size keep the shape; of
 * another the last dim (unit stride) scales by the ratio, as PyTorch's view.dtype. No gradient
 * flows through a change of dtype (PyTorch's output_differentiability: False). */
ts_tensor *ts_view_dtype(ts_tensor *t, ts_dtype dtype) {
    const char *op = "view";
    if (!tsi_check_input(op, t, "input")) return NULL;
    if ((unsigned)dtype >= TS_DTYPE_COUNT || tsi_dtype_size(dtype) == 0)
        return tsi_error_set(TS_ERR_DTYPE, "view: not a dtype (%d)", (int)dtype), NULL;
    if (dtype == t->dtype)
        return record_view(t, tsi_view_of(t, t->shape, t->strides, t->offset), "AliasBackward0", op,
                           tsi_identity_backward, NULL, 0);
    if (tsi_is_quantized(t->dtype) || tsi_is_quantized(dtype)) /* integers without parameters */
        return tsi_error_set(TS_ERR_DTYPE,
                             "view: cannot view %s as %s: a quantized tensor's integers carry a "
                             "scale and zero point (ts_int_repr / ts_make_per_tensor_quantized_"
                             "tensor convert)",
                             tsi_desc(t), ts_dtype_name(dtype)),
               NULL;
    const int64_t so = (int64_t)tsi_dtype_size(t->dtype), sn = (int64_t)tsi_dtype_size(dtype);
    const char *from = ts_dtype_name(t->dtype), *to = ts_dtype_name(dtype);
    ts_shape s = t->shape;
    int64_t st[TS_MAX_DIMS];
    memcpy(st, t->strides, sizeof st);
    int64_t off = t->offset;
    const int last = s.ndim - 1;
    if (so != sn) {
        if (s.ndim == 0)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "view: self.dim() cannot be 0 to view %s as %s (different element "
                                 "sizes)",
                                 from, to),
                   NULL;
        if (st[last] != 1 && s.dims[last] != 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "view: self.stride(-1) must be 1 to view %s as %s (different "
                                 "element sizes), but got %lld",
                                 from, to, (long long)st[last]),
                   NULL;
        if (so > sn) { /* each element becomes r smaller ones */
            const int64_t r = so / sn;
            for (int d = 0; d < last; d++) st[d] *= r;
            s.dims[last] *= r, st[last] = 1, off *= r;
        } else { /* r elements become one */
            const int64_t r = sn / so;
            if (s.dims[last] % r)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "view: self.size(-1) must be divisible by %lld to view %s as "
                                     "%s (different element sizes), but got %lld",
                                     (long long)r, from, to, (long long)s.dims[last]),
                       NULL;
            if (off % r)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "view: self.storage_offset() must be divisible by %lld to "
                                     "view %s as %s (different element sizes), but got %lld",
                                     (long long)r, from, to, (long long)off),
                       NULL;
            for (int d = 0; d < last; d++) {
                if (st[d] % r && s.dims[d] > 1)
                    return tsi_error_set(TS_ERR_SHAPE,
                                         "view: self.stride(%d) must be divisible by %lld to view "
                                         "%s as %s (different element sizes), but got %lld",
                                         d, (long long)r, from, to, (long long)st[d]),
                           NULL;
                st[d] /= r;
            }
            s.dims[last] /= r, st[last] = 1, off /= r;
        }
    }
    ts_tensor *v = tsi_view_of(t, s, st, off);
    if (!v) return NULL;
    v->dtype = dtype;
    return tsi_own(v);
}
