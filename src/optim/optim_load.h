/* optim_load.h — an optimizer's state load in two phases, so a checkpoint load can change the
 * model and the optimizer together or not at all. */
#ifndef TS_OPTIM_LOAD_H
#define TS_OPTIM_LOAD_H

#include "core/internal.h"

typedef struct tsi_optim_staged tsi_optim_staged;
/* Checks sd against opt and copies its tensors onto the parameters' devices and dtypes; opt is
 * unchanged. NULL with the error set on failure. */
tsi_optim_staged *tsi_optim_load_stage(const char *op, ts_optim *opt, const ts_tensor_list *sd);
/* Puts the staged state in place (cannot fail) and frees the stage. */
void tsi_optim_load_commit(tsi_optim_staged *g);
void tsi_optim_load_drop(tsi_optim_staged *g); /* NULL-safe */

#endif /* TS_OPTIM_LOAD_H */
