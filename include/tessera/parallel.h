/* tessera/parallel.h — several devices at once: data parallel and its building blocks (via
 * tessera.h). Model parallel needs nothing extra: put layers on devices and ts_to between them. */
#ifndef TESSERA_PARALLEL_H
#define TESSERA_PARALLEL_H

/* PyTorch's nn.DataParallel. Returns a new root module "DataParallel" that owns `module` as its
 * child "module" (state-dict names "module.fc1.weight", as in PyTorch). Each forward scatters the
 * input along dim 0 over `devices` (torch.chunk sizes), replicates the parameters onto them with a
 * differentiable broadcast, runs the replicas in threads (grad mode, autocast and the default
 * device carried into them), and gathers the outputs on output_device ((ts_device){0}:
 * devices[0]). Backward sums the gradients into the original parameters on devices[0]. The module's
 * parameters and buffers must be on devices[0] (PyTorch's error otherwise). n == 1 runs the module
 * directly. devices NULL with n == 0 means every CUDA device, else every sim device; with none of
 * either the forward runs the module as it is (PyTorch without GPUs). Devices must be distinct.
 * Replicas on devices[1..] are copies of the module structs: see docs/PARALLEL.md for the rule this
 * puts on a module's own fields. On failure the module is freed (unless it already belongs to
 * another module) and NULL returned. */
TS_API ts_module *ts_data_parallel_new(ts_module *module, const ts_device *devices, int n,
                                       ts_device output_device);
TS_API ts_module *ts_data_parallel_module(ts_module *dp); /* the wrapped module (borrowed) */

/* The building blocks (torch.nn.parallel.scatter / gather), both differentiable. */
/* Splits x along dim 0 in torch.chunk pieces and copies piece i to devices[i]. Writes the pieces
 * to out (room for n) and returns how many there are, which is fewer than n when the batch is
 * small (5 rows over 4 devices: 2, 2, 1), or -1 on error. */
TS_API int ts_parallel_scatter(ts_tensor *x, const ts_device *devices, int n, ts_tensor **out);
/* Copies the tensors to `device` and concatenates them along dim 0. When all are 0-dim (a loss per
 * replica) they are stacked into a vector, with PyTorch's warning on stderr (once). */
TS_API ts_tensor *ts_parallel_gather(ts_tensor *const *ts, int n, ts_device device);

/* The 0.1 names of the constructors above, kept as aliases for the 0.x series and removed at
 * 1.0 (decision 0025: a constructor is ts_<type>_new). Each does what its new name does. */
TS_API ts_module *ts_data_parallel(ts_module *module, const ts_device *devices, int n,
                                   ts_device output_device);

#endif /* TESSERA_PARALLEL_H */
