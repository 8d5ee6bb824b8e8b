/* tessera/torch_forms.h — small torch operators in C that the Python package once composed
 * (issue 76; via tessera.h): copying forms of views, fills, torch.range, rsub and the in-place
 * samplers of distributions. Errors name the op and the argument. */
#ifndef TESSERA_TORCH_FORMS_H
#define TESSERA_TORCH_FORMS_H

#include <stdbool.h>
#include <stdint.h>

/* ---------------------------------------------------------------- copies (src/ops/copy_forms.c)
 * Each result is a fresh contiguous tensor (never t's storage), differentiable as the view. */
TS_API ts_tensor *ts_expand_copy(ts_tensor *t, ts_shape size);        /* -1 keeps a dim */
TS_API ts_tensor *ts_squeeze_copy(ts_tensor *t, const ts_dims *dims); /* NULL: every size-1 dim */
TS_API ts_tensor *ts_view_copy(ts_tensor *t, ts_shape size);          /* reshape's rules */
TS_API ts_tensor *ts_view_copy_dtype(ts_tensor *t, ts_dtype dtype);   /* the bits as dtype */
/* torch.fill: a copy of t with every element value (0-dim, cast; on any device), the gradient
 * to value the sum of the incoming one */
TS_API ts_tensor *ts_fill(ts_tensor *t, ts_tensor *value);
/* torch.nonzero_static: nonzero's int64 rows [size, t.ndim], cut to size or padded with
 * fill_value; size < 0: TS_ERR_ARG */
TS_API ts_tensor *ts_nonzero_static(ts_tensor *t, int64_t size, int64_t fill_value);

/* torch.as_strided_copy: the elements of as_strided(t, size, stride, storage_offset) as a new
 * tensor; torch.as_strided_scatter: a copy of t with that view's elements replaced by src (of
 * shape size, t's dtype and device). storage_offset < 0: t's own. The view may read only t's own
 * storage elements (else TS_ERR_ARG naming the element); differentiable in t and src
 * (src/ops/as_strided_copy.c). */
TS_API ts_tensor *ts_as_strided_copy(ts_tensor *t, ts_shape size, const int64_t *stride,
                                     int64_t storage_offset);
TS_API ts_tensor *ts_as_strided_scatter(ts_tensor *t, ts_tensor *src, ts_shape size,
                                        const int64_t *stride, int64_t storage_offset);

/* torch.hash_tensor (mode 0; other modes TS_ERR_ARG): the xor of the elements' 64-bit patterns
 * (floats as float64, integers and bool as int64) over dims (NULL or none: all; a 0-dim t takes 0
 * and -1), uint64, no gradient (src/ops/hash_tensor.c) */
TS_API ts_tensor *ts_hash_tensor(ts_tensor *t, const ts_dims *dims, bool keepdim, int64_t mode);

/* ---------------------------------------------------------------- (src/ops/range_rsub.c) */
/* torch.range (deprecated): floor((end - start) / step) + 1 values start + i * step, end
 * included, computed in double (floating o.dtype) or int64 (integral: start, end, step
 * truncated), cast once; step 0 or of the wrong sign: TS_ERR_ARG */
TS_API ts_tensor *ts_range(double start, double end, double step, ts_opts o);
/* torch.rsub: other - alpha * input (broadcast, differentiable) */
TS_API ts_tensor *ts_rsub(ts_tensor *input, ts_tensor *other, double alpha);

/* ------------------------------------------- samplers in place (src/ops/random_samplers.c)
 * PyTorch's formulas over the seeded generator's uniform u / normal z draws, no gradient:
 * cauchy_: median + sigma tan(pi (u - 1/2)) (sigma > 0; float t); geometric_: ceil(log(1 - u) /
 * log(1 - p)) >= 1 (0 < p < 1; any real dtype, drawn in float64 for integers); log_normal_:
 * exp(mean + std z) (std > 0; float t). Return t (retained). */
TS_API ts_tensor *ts_cauchy_(ts_tensor *t, double median, double sigma);
TS_API ts_tensor *ts_geometric_(ts_tensor *t, double p);
TS_API ts_tensor *ts_log_normal_(ts_tensor *t, double mean, double std);

#endif /* TESSERA_TORCH_FORMS_H */
