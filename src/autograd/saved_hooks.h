/* saved_hooks.h — saved-tensor hooks (saved_hooks.c) as checkpoint.c's saving uses them
 * (internal). */
#ifndef TS_AUTOGRAD_SAVED_HOOKS_H
#define TS_AUTOGRAD_SAVED_HOOKS_H

#include "autograd/autograd.h"

typedef struct tsi_hooked tsi_hooked; /* one saved tensor, packed by hooks */

/* The thread's innermost hooks were pushed while `ckpt` was its innermost checkpoint frame (so no
 * checkpoint opened since takes precedence). */
bool tsi_saved_hooks_take(const tsi_ckpt_frame *ckpt);
/* Packs t with the innermost hooks; NULL (t to be saved as itself) when packing failed. */
tsi_hooked *tsi_saved_hooks_pack(ts_tensor *t);
/* The unpacked tensor, borrowed (kept by h); NULL + error. */
ts_tensor *tsi_hooked_unpack(tsi_hooked *h);
void tsi_hooked_free(tsi_hooked *h);
/* The innermost hooks' pack function and context; false when none. */
bool tsi_saved_hooks_top(void *(**pack)(void *ctx, ts_tensor *t), void **ctx);
/* checkpoint.c: the thread's innermost active checkpoint frame (NULL: none). */
tsi_ckpt_frame *tsi_ckpt_innermost(void);

#endif /* TS_AUTOGRAD_SAVED_HOOKS_H */
