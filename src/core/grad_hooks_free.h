/* grad_hooks_free.h — how a dying tensor frees its autograd hooks (ts_tensor.hooks): the struct
 * and the hooks' ctx_free belong to the autograd layer (autograd/leaf_hooks.c), which sets this
 * pointer before it gives any tensor hooks, so core/tensor.c frees them without seeing the struct.
 */
#ifndef TS_CORE_GRAD_HOOKS_FREE_H
#define TS_CORE_GRAD_HOOKS_FREE_H

struct tsi_grad_hooks;
extern void (*tsi_grad_hooks_free)(struct tsi_grad_hooks *h);

#endif /* TS_CORE_GRAD_HOOKS_FREE_H */
