/* checkpoint_slot.h — releasing and unpacking one placeholder of a checkpoint frame (checkpoint.c),
 * which node.c calls for each saved slot it frees or hands out (internal). */
#ifndef TS_AUTOGRAD_CHECKPOINT_SLOT_H
#define TS_AUTOGRAD_CHECKPOINT_SLOT_H

#include "autograd/autograd.h"

/* Drops the placeholder `index` of f: the recomputed tensor it stands for (if recomputed; nothing
 * else refers to that index) and the placeholder's reference to f. NULL-safe. A backward that
 * frees each node's saved tensors after running it (no retain_graph) thus frees each recomputed
 * intermediate once its last user has run, not when the whole checkpointed function's backward
 * has. */
void tsi_ckpt_release_slot(tsi_ckpt_frame *f, int index);

/* The tensor of n's placeholder s (recomputed, or unpacked by saved-tensor hooks, the first
 * time). Under create_graph it carries the saved tensor's history (s->hist, s->hist_nr, or the leaf
 * in s->t: a hook's data reaches the leaf through a SavedLeafBackward node); where there is none to
 * give (an output of unknown number) n is marked TSI_NODE_ONCE. Borrowed or scope-owned; NULL +
 * error. */
ts_tensor *tsi_ckpt_unpack_saved(ts_node *n, tsi_saved *s);

#endif /* TS_AUTOGRAD_CHECKPOINT_SLOT_H */
