/* tessera/optim_offload.h — optimizer offload (DeepSpeed's ZeRO-Offload): an optimizer's float32
 * master weights and state kept on the host, its steps run by the CPU kernels (src/optim/
 * offload.c; docs/MEMORY_PLANNING.md). */
#ifndef TESSERA_OPTIM_OFFLOAD_H
#define TESSERA_OPTIM_OFFLOAD_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Offloads opt in place: every parameter gets a float32 master copy on the host (pinned where
 * CUDA is available), the optimizer's state lives there (float32, moved there at the next step if
 * it exists), each gradient is copied to the host as soon as backward has finished it (a
 * post-accumulate-grad hook; copied again at the step if changed since, as by unscaling or
 * clipping), and each ts_optim_step steps the masters with the CPU kernels (the device step's math,
 * src/backend/optim_math.h) and copies the updated weights back in each parameter's dtype (bf16/f16
 * parameters keep float32 masters: the master is the truth). On a sim device with a modelled link
 * (TS_SIM_LINK) the copies run on the link's engines, overlapping backward and the next forward
 * (the first read of a parameter waits for its own copy); on CUDA they are synchronous. Everything
 * else keeps working on opt: zero_grad, learning rates and schedulers, gradient clipping and the
 * grad scaler (they act on the device gradients), and state dicts (the same keys and shapes; state
 * is saved in float32 on the cpu and loads into an optimizer with or without offload). A parameter
 * changed from outside (a loaded checkpoint, an in-place edit) is re-read into its master before
 * the next step. Steps stay all or nothing. Refused: parameters on the cpu or not contiguous, a
 * captured (capturable) optimizer, steps inside a capture, a step after a parameter took another
 * dtype or shape (ts_tensor_set_data: TS_ERR_DTYPE, TS_ERR_SHAPE). Offloading an offloaded
 * optimizer does nothing. */
TS_API ts_status ts_optim_offload(ts_optim *opt);
/* Whether opt is offloaded. */
TS_API bool ts_optim_is_offloaded(ts_optim *opt);
/* The float32 host master of parameter i (borrowed; NULL, with TS_ERR_ARG, when opt is not
 * offloaded or i is out of range). */
TS_API ts_tensor *ts_optim_offload_master(ts_optim *opt, int i);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_OPTIM_OFFLOAD_H */
