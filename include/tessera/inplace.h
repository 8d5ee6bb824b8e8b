/* tessera/inplace.h — the checks PyTorch makes before an in-place op, for bindings that build an
 * in-place form from the out-of-place op (computed on a clone, then ts_copy_ into the tensor):
 * Python's Tensor.sin_(), atan2_(), lerp_()... (python/tessera/_inplace_methods.py). */
#ifndef TESSERA_INPLACE_H
#define TESSERA_INPLACE_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* May `op` (its name, for the message) write into t in place, with grad mode as it is now and
 * another operand that requires grad or not? TS_OK; else the error is set and returned:
 * TS_ERR_STATE (PyTorch's messages) for a leaf that requires grad ("a leaf Variable that requires
 * grad is being used in an in-place operation."), a view of one, and a view made under no_grad or
 * by split / chunk whose write would be recorded; a view of a tensor that requires grad, or written
 * with an operand that does, is fine (its base's history takes the write: PyTorch's CopySlices,
 * docs/decisions/0038-inplace-on-views.md). TS_ERR_UNSUPPORTED for such a write to an alias with
 * no known base (detach). With grad mode off everything may. TS_ERR_ARG for a NULL t. */
TS_API ts_status ts_check_inplace(ts_tensor *t, bool operand_requires_grad, const char *op);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_INPLACE_H */
