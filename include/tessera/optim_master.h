/* tessera/optim_master.h — float32 master weights for an optimizer's f16/bf16 parameters (Apex's,
 * DeepSpeed's, llm.c's): src/optim/optim_master.c; docs/USAGE.md "Training in bf16". */
#ifndef TESSERA_OPTIM_MASTER_H
#define TESSERA_OPTIM_MASTER_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Float32 master weights (Apex's, llm.c's) for the f16 and bf16 parameters: with `on`, the
 * optimizer keeps a float32 copy of each such parameter on its device, made from it now (a
 * parameter added later, or written by something other than the optimizer, e.g. a loaded
 * checkpoint, a move, an in-place edit or p.data = another view, gets it anew at the next step),
 * and keeps the parameter's state in float32 too. Each step updates the master with the float32
 * math and writes the parameter as the master rounded once (to nearest even), so updates smaller
 * than the parameter's rounding step accumulate instead of vanishing: the master follows exactly
 * the steps of a float32 parameter. Costs 4 bytes a parameter, and 2 more a state buffer. f32 and
 * f64 parameters are unaffected. Off drops the masters (the state goes back to the parameter's
 * dtype at the next step). The state dict saves the masters as "state.<i>.master_weight"; a dict
 * without them loads, and the next step makes them from the parameters (load the model before the
 * optimizer: a model load remakes them). Captured steps keep them. Errors: NULL opt (TS_ERR_ARG);
 * an offloaded optimizer (TS_ERR_UNSUPPORTED: ts_optim_offload already keeps float32 masters on the
 * host); while capturing on the parameters' device (TS_ERR_STATE). */
TS_API ts_status ts_optim_set_master_weights(ts_optim *opt, bool on);
/* Whether ts_optim_set_master_weights(opt, true) is in force (false for NULL). */
TS_API bool ts_optim_master_weights(const ts_optim *opt);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_OPTIM_MASTER_H */
