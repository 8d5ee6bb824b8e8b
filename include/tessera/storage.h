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
 * a device address), 0 when its storage holds no memory (an empty tensor's, a meta tensor's). */
TS_API uintptr_t ts_data_ptr(ts_tensor *t);
/* is_set_to: the same storage, offset, shape and strides (PyTorch's Tensor.is_set_to). */
TS_API bool ts_is_set_to(ts_tensor *t, ts_tensor *other);

/* ---- shared memory (PyTorch's Tensor.share_memory_, torch.multiprocessing's "file_descriptor"
 * strategy; src/core/shared_storage.c). Linux only (memfd_create). */
/* Moves t's storage (cpu) into shared memory in place: an anonymous memfd, sealed against
 * shrinking, mapped MAP_SHARED, holding a copy of the bytes; every tensor and view of the storage
 * sees it from then on, and a process given the fd maps the same pages. Returns t (a no-op when
 * already shared, and for cuda tensors, as PyTorch documents); TS_ERR_DEVICE for a sim tensor
 * (sim devices live inside one process). The mapping and fd go with the storage's last reference.
 */
TS_API ts_tensor *ts_share_memory_(ts_tensor *t);
/* Whether t's storage is in shared memory (true for cuda tensors, PyTorch's answer). */
TS_API bool ts_is_shared(ts_tensor *t);
/* The fd of t's shared storage (owned by the storage: dup it to keep it), the storage's size in
 * bytes and t's offset into it in bytes. TS_ERR_STATE when t is not shared, TS_ERR_DEVICE off the
 * cpu. */
TS_API ts_status ts_shared_fd(ts_tensor *t, int *fd, size_t *storage_nbytes, size_t *byte_offset);
/* A cpu tensor over the shared memory of fd (which the call dups; the caller keeps fd): a storage
 * of storage_nbytes bytes, read with dtype, shape, strides (NULL: contiguous; in elements, >= 0)
 * from storage_offset elements. TS_ERR_ARG when the geometry needs more than storage_nbytes, when
 * the file holds fewer bytes than storage_nbytes (a lying size), or when fd is not shared memory
 * sealed against shrinking; nothing is mapped then. */
TS_API ts_tensor *ts_from_shared_fd(int fd, size_t storage_nbytes, ts_dtype dtype, ts_shape shape,
                                    const int64_t *strides, int64_t storage_offset);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_STORAGE_H */
