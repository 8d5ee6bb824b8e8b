/* tessera/dlpack.h — zero-copy tensor exchange with other frameworks via DLPack (via tessera.h). */
#ifndef TESSERA_DLPACK_H
#define TESSERA_DLPACK_H

/* DLPack's managed tensor (DLPack 0.6, <dlpack/dlpack.h>; Debian's libdlpack-dev). Declared here
 * only by its tag, so tessera.h needs no DLPack header: include <dlpack/dlpack.h> to read the
 * fields. */
struct DLManagedTensor;

/* Exports t without copying (PyTorch's torch.utils.dlpack.to_dlpack): dl_tensor.data is the
 * address of t's first element (byte_offset 0, as PyTorch does), shape and strides (in elements,
 * never NULL) are t's, device cpu -> kDLCPU 0, cuda:N -> kDLCUDA N. dtypes: float32/64/16 ->
 * kDLFloat, bfloat16 -> kDLBfloat, int64/32 -> kDLInt, uint8 -> kDLUInt 8, and bool -> kDLUInt 8
 * (DLPack 0.6 has no kDLBool; ts_from_dlpack of a capsule made here gives bool back).
 * The capsule holds a reference on t's memory: it stays valid after t is released, until the
 * consumer calls m->deleter(m), which frees the capsule (any thread; exactly once). The returned
 * capsule belongs to no scope. Work queued on t's device is finished before it returns.
 * Refused (NULL + error naming "to_dlpack" and t): a tensor that requires grad (TS_ERR_STATE,
 * PyTorch's rule: export ts_detach(t)), a sim device (TS_ERR_UNSUPPORTED: DLPack has no device
 * type for it; ts_to(t, ts_cpu()) first), TS_ERR_OOM. */
TS_API struct DLManagedTensor *ts_to_dlpack(ts_tensor *t);

/* Imports m without copying (torch.utils.dlpack.from_dlpack): the tensor's memory is
 * m->dl_tensor.data + byte_offset (storage offset 0), with m's shape and strides (NULL strides:
 * compact row-major). On success the tensor owns m: m->deleter(m) (when not NULL) runs exactly
 * once, when the last Tessera reference to that memory goes (views and tensors sharing it
 * included), after the device's queued work is done. On failure (NULL + error naming
 * "from_dlpack") the caller still owns m: the deleter is not called.
 * Accepted: kDLCPU and kDLCUDAHost (host memory) -> cpu, kDLCUDA N -> cuda:N when CUDA is
 * available (else TS_ERR_DEVICE); lanes 1 with kDLFloat 16/32/64, kDLBfloat 16, kDLInt 32/64,
 * kDLUInt 8 and kDLBool 8 (code 6, DLPack 0.8's, which PyTorch 2 exports). Refused: other dtypes
 * (TS_ERR_DTYPE: int8, int16, unsigned above 8 bits, complex, vectors...), other device types
 * (TS_ERR_UNSUPPORTED), ndim above TS_MAX_DIMS or negative sizes (TS_ERR_SHAPE), NULL data with
 * elements or a NULL shape (TS_ERR_ARG), negative strides and element addresses not aligned to
 * the element size (TS_ERR_UNSUPPORTED), TS_ERR_OOM.
 * DLPack 0.6 has no read-only flag (DLPack 1.0's DLPACK_FLAG_BITMASK_READ_ONLY is absent): the
 * memory is shared both ways, and a write on either side is seen by the other. */
TS_API ts_tensor *ts_from_dlpack(struct DLManagedTensor *m);

#endif /* TESSERA_DLPACK_H */
