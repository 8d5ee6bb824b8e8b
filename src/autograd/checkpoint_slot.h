/* checkpoint_slot.h — releasing one placeholder of a checkpoint frame (checkpoint.c), which node.c
 * calls for each saved slot it frees (internal). */
#ifndef TS_AUTOGRAD_CHECKPOINT_SLOT_H
#define TS_AUTOGRAD_CHECKPOINT_SLOT_H

#include "autograd/autograd.h"

/* Drops the placeholder `index` of f: the recomputed tensor it stands for (if recomputed; nothing
 * else refers to that index) and the placeholder's reference to f. NULL-safe. A backward that
 * frees each node's saved tensors after running it (no retain_graph) thus frees each recomputed
 * intermediate once its last user has run, not when the whole checkpointed function's backward
 * has. */
void tsi_ckpt_release_slot(tsi_ckpt_frame *f, int index);

#endif /* TS_AUTOGRAD_CHECKPOINT_SLOT_H */
