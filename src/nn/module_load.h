/* module_load.h — loading a module's state in two phases, so a checkpoint load can change the
 * model and the optimizer together or not at all. */
#ifndef TS_MODULE_LOAD_H
#define TS_MODULE_LOAD_H

#include "core/internal.h"

typedef struct tsi_module_staged tsi_module_staged;
/* Checks sd against m (keys when strict, shapes always) and stages every value on its tensor's
 * device and dtype; m is unchanged. NULL with the error set on failure. */
tsi_module_staged *tsi_module_load_stage(const char *op, ts_module *m, const ts_tensor_list *sd,
                                         bool strict);
/* Copies the staged values into the module (cannot fail) and frees the stage. */
void tsi_module_load_commit(tsi_module_staged *g);
void tsi_module_load_drop(tsi_module_staged *g); /* NULL-safe */

#endif /* TS_MODULE_LOAD_H */
