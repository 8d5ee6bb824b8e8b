/* tessera/storage.h — a tensor's storage itself: its bytes as a tensor (PyTorch's
 * untyped_storage()), and the in-place ops that give a tensor another storage or geometry:
 * Tensor.set_ in its three forms and as_strided_. Each refuses a tensor that requires grad
 * (TS_ERR_STATE for a leaf while grad mode is on, with PyTorch's message; TS_ERR_UNSUPPORTED for
 * one with history) and returns t, its storage's version bumped, or NULL with the error set. */
#ifndef TESSERA_STORAGE_H
#define TESSERA_STORAGE_H

#include <stdint.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole storage of t as a 1-D tensor of dtype (TS_U8: the bytes, PyTorch's untyped storage;
 * t's dtype: its typed storage), from byte 0, as many whole elements as the storage holds; it
 * shares the memory (writes reach t) and carries no gradient. */
TS_API ts_tensor *ts_storage_view(ts_tensor *t, ts_dtype dtype);

/* set_(source): t shares source's storage, shape, strides and offset. Same dtype and device. */
TS_API ts_tensor *ts_set_(ts_tensor *t, ts_tensor *source);
/* set_(source, storage_offset, size, stride): t reads source's storage (its bytes, whatever
 * source's dtype) as t's dtype with this geometry; stride NULL: contiguous. The extent is checked
 * against the storage's size (TS_ERR_ARG, PyTorch's setStorage message). Same device. */
TS_API ts_tensor *ts_set_storage_(ts_tensor *t, ts_tensor *source, int64_t storage_offset,
                                  ts_shape size, const int64_t *stride);
/* set_(): t takes a new empty storage and shape [0]. */
TS_API ts_tensor *ts_set_empty_(ts_tensor *t);
/* as_strided_: t's own storage with a new geometry; storage_offset < 0 keeps t's. */
TS_API ts_tensor *ts_as_strided_(ts_tensor *t, ts_shape size, const int64_t *stride,
                                 int64_t storage_offset);
/* The address of t's first element in its device's memory (Tensor.data_ptr(); a cuda tensor's is
 * a device address), 0 when its storage holds no memory (an empty tensor's). */
TS_API uintptr_t ts_data_ptr(ts_tensor *t);
/* is_set_to: the same storage, offset, shape and strides (PyTorch's Tensor.is_set_to). */
TS_API bool ts_is_set_to(ts_tensor *t, ts_tensor *other);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_STORAGE_H */
