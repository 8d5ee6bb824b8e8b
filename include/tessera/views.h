/* tessera/views.h — views (they share storage with their input: writes through one reach the
 * other), memory formats, and the in-place changes of a tensor's shape (resize_). Included by
 * tessera.h; tessera/storage.h has set_ and as_strided_. */
#ifndef TESSERA_VIEWS_H
#define TESSERA_VIEWS_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* views (share storage with their input) */
TS_API ts_tensor *ts_view(ts_tensor *t,
                          ts_shape s); /* one dim may be -1; needs compatible strides */
/* view when possible, else a copy; a per-tensor quantized t: ts_quantized_reshape's copy (also
 * for ts_flatten) */
TS_API ts_tensor *ts_reshape(ts_tensor *t, ts_shape s);
/* Tensor.view(dtype): t's bytes as dtype; another element size scales the last dim (which needs
 * unit stride) by the ratio. No gradient through a change of dtype (as PyTorch). */
TS_API ts_tensor *ts_view_dtype(ts_tensor *t, ts_dtype dtype);
/* Tensor.resize_: t takes shape size, contiguous from its storage offset, in place (a larger
 * storage, holding the old bytes first, when needed; new elements uninitialised); returns t, or
 * NULL (TS_ERR_STATE) when t requires grad. resize_as_: other's shape. */
TS_API ts_tensor *ts_resize_(ts_tensor *t, ts_shape size);
TS_API ts_tensor *ts_resize_as_(ts_tensor *t, ts_tensor *other);
TS_API ts_tensor *ts_flatten(ts_tensor *t, int start_dim, int end_dim);
TS_API ts_tensor *ts_permute(ts_tensor *t, ts_dims dims);
TS_API ts_tensor *ts_transpose(ts_tensor *t, int d0, int d1);
TS_API ts_tensor *ts_t(ts_tensor *t);       /* 2-D transpose (0- and 1-D returned as they are) */
TS_API ts_tensor *ts_squeeze(ts_tensor *t); /* all size-1 dims */
TS_API ts_tensor *ts_squeeze_dim(ts_tensor *t, int dim);
/* squeeze(dim=(d0, d1, ...)): those of the dims whose size is 1 (a dim given twice: an error) */
TS_API ts_tensor *ts_squeeze_dims(ts_tensor *t, ts_dims dims);
TS_API ts_tensor *ts_unsqueeze(ts_tensor *t, int dim);
TS_API ts_tensor *ts_narrow(ts_tensor *t, int dim, int64_t start, int64_t length);
/* torch.as_strided: a view of t's storage with size, stride (size.ndim entries, >= 0) and
 * storage_offset (< 0: t's own); it must fit in the storage. Gradient: PyTorch's (elements read
 * twice get both reads' gradients; an input that overlaps itself shares them). */
TS_API ts_tensor *ts_as_strided(ts_tensor *t, ts_shape size, const int64_t *stride,
                                int64_t storage_offset);
/* t[start:end:step] along dim, Python's rules: negative start/end count from the end, clamped */
TS_API ts_tensor *ts_slice(ts_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
TS_API ts_tensor *ts_select(ts_tensor *t, int dim, int64_t index); /* removes dim */
TS_API ts_tensor *ts_expand(ts_tensor *t, ts_shape s);             /* -1 keeps a dim */
TS_API ts_tensor *ts_expand_as(ts_tensor *t, ts_tensor *other);
TS_API ts_tensor *ts_contiguous(ts_tensor *t); /* t itself (retained) when already contiguous */
/* Memory formats (PyTorch's torch.memory_format): TS_CHANNELS_LAST stores a 4-D [N, C, H, W]
 * tensor in N, H, W, C order (strides H*W*C, 1, W*C, C); shape and values are unchanged, so every
 * op takes it, and elementwise ops, casts, clones, conv2d and batch_norm keep it (their NHWC
 * kernels on the CPU: no reorders between convolutions). ts_contiguous_format copies t into the
 * format (t itself, retained, when it already is; differentiable); ts_is_contiguous_format asks.
 * TS_CHANNELS_LAST needs a 4-D tensor (TS_ERR_SHAPE otherwise, as PyTorch). */
typedef enum ts_memory_format { TS_CONTIGUOUS_FORMAT = 0, TS_CHANNELS_LAST = 1 } ts_memory_format;
TS_API ts_tensor *ts_contiguous_format(ts_tensor *t, ts_memory_format f);
TS_API bool ts_is_contiguous_format(ts_tensor *t, ts_memory_format f);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_VIEWS_H */
