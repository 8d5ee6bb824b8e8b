/* tessera/custom_function.h — custom autograd functions (PyTorch's torch.autograd.Function): the
 * caller computes a forward itself and gives the backward as a callback, which the engine then runs
 * like any other node's; the graph walk behind grad_fn.next_functions; hooks on a tensor's
 * gradient (Tensor.register_hook). */
#ifndef TESSERA_CUSTOM_FUNCTION_H
#define TESSERA_CUSTOM_FUNCTION_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backward of a custom function: from grad_outputs[0 .. n_outputs) (the gradients of the
 * forward's outputs; NULL for one that received none when the function keeps undefined gradients,
 * else zeros) set grad_inputs[j] for the inputs that need one (entries start NULL; NULL = no
 * gradient). It runs with grad mode off inside a scope the engine opens: an op's result may be
 * returned as it is (the engine takes its own reference before the scope closes), on whatever
 * device the forward ran. A gradient must have its input's shape (or one that sums to it, as a
 * broadcast) and device; its dtype is cast to the input's. A gradient for an input that needs none
 * (or was NULL) is ignored. Returns TS_OK, or an error status (set with ts_error_set, else the
 * engine sets one naming the function): the backward pass then fails with it. */
typedef ts_status (*ts_custom_backward_fn)(void *ctx, ts_tensor *const *grad_outputs, int n_outputs,
                                           ts_tensor **grad_inputs, int n_inputs);

/* Per-output flags (ts_custom_function.output_flags). */
enum {
    /* no gradient flows back from this output: it does not require grad (mark_non_differentiable).
     * Outputs of an integer or bool dtype are always so. */
    TS_CUSTOM_OUT_NON_DIFFERENTIABLE = 1,
    /* the output is one of the inputs, modified in place by the forward (mark_dirty): that input
     * itself is the result, its history rebased onto the function's node (as an in-place op's) */
    TS_CUSTOM_OUT_DIRTY = 2,
};

typedef struct ts_custom_function {
    const char *name; /* the node's name (grad_fn name), copied; NULL: "CustomFunctionBackward" */
    ts_custom_backward_fn backward; /* required */
    void *ctx;                      /* the callback's state */
    void (*ctx_free)(void *ctx);    /* optional; run exactly once, see ts_custom_function_apply */
    const unsigned *output_flags;   /* [n_outputs] TS_CUSTOM_OUT_* or NULL (all 0) */
    bool keep_undefined_grads;      /* pass NULL for an output's missing gradient instead of zeros
                                     * (PyTorch's ctx.set_materialize_grads(False)) */
} ts_custom_function;

/* Puts a custom function into the graph. inputs[0 .. n_inputs): the forward's tensor inputs (NULL
 * entries allowed: arguments that are not tensors); outputs[0 .. n_outputs): the tensors the
 * caller computed from them without recording a graph (under ts_no_grad_begin, or from detached
 * inputs; NULL entries allowed). When grad mode is on and an input requires grad, results[i] is a
 * new tensor sharing outputs[i]'s storage whose grad_fn is the function's node (output i; a
 * non-differentiable output's alias does not require grad), or for a dirty output the input
 * itself; backward then calls f->backward(f->ctx, ...) on the node's turn. Otherwise results[i]
 * is outputs[i] (no node, f->ctx freed at once). Results belong to the calling thread's innermost
 * scope, as any public function's. f->ctx is taken over in every case: ctx_free(ctx) runs once,
 * when the graph is freed (after a backward without retain_graph, or when the results are
 * released), at once without a graph, or on failure. Fails with TS_ERR_ARG (no backward, counts,
 * a dirty output that is no input), TS_ERR_STATE (a dirty leaf that requires grad), TS_ERR_OOM;
 * results are then NULL. */
TS_API ts_status ts_custom_function_apply(const ts_custom_function *f, ts_tensor *const *inputs,
                                          int n_inputs, ts_tensor *const *outputs, int n_outputs,
                                          ts_tensor **results);

/* The graph seen from a tensor (PyTorch's grad_fn.next_functions): the node that made t and where
 * its input k's gradient goes. ts_grad_fn_node: t's node (NULL for a leaf), retained: release
 * with ts_node_release. ts_node_name: "AddBackward0". ts_node_num_inputs: the forward's inputs.
 * ts_node_next(n, k, &output_nr, &leaf): the node input k's gradient flows into (retained; its
 * output number in *output_nr), or NULL with *leaf the leaf tensor that accumulates it (borrowed
 * while n lives; PyTorch's AccumulateGrad), or NULL and *leaf NULL when the input needs no
 * gradient. */
typedef struct ts_node ts_node;
TS_API ts_node *ts_grad_fn_node(ts_tensor *t);
TS_API void ts_node_release(ts_node *n);
TS_API const char *ts_node_name(const ts_node *n);
TS_API int ts_node_num_inputs(const ts_node *n);
TS_API ts_node *ts_node_next(ts_node *n, int k, int *output_nr, ts_tensor **leaf);
/* Whether n's backward can be differentiated again (ts_autograd_grad with create_graph). A custom
 * function's node cannot by default: a second backward through its gradients fails with
 * TS_ERR_UNSUPPORTED. Declare it twice-differentiable when its backward computes every gradient
 * with public ops from the incoming gradients and the function's inputs (not from a saved output
 * or a value computed in the forward, which carry no history): under create_graph those ops run
 * with grad mode on and record the gradient's graph. Python's autograd.Function does so unless
 * the backward is @once_differentiable or saves anything but inputs. */
TS_API void ts_node_set_twice_differentiable(ts_node *n, bool twice);

/* Tensor hooks (PyTorch's Tensor.register_hook) on a tensor that requires grad (one that does not:
 * TS_ERR_STATE). On a tensor made by a recorded op, fn(ctx, grad) runs when t's whole gradient is
 * known (every use of t has added to it), before the backward of the op that made t. On a leaf, it
 * runs once per backward pass on the sum of the gradients the pass brings the leaf, before that
 * sum is added into .grad (and before its post-accumulate-grad hooks; ts_autograd_grad: on the
 * gradient it returns), as PyTorch's AccumulateGrad does. Either way it runs inside the engine's
 * scope and grad mode (off, unless the pass records the gradients' graph). It returns the gradient
 * to use instead (t's shape and device; cast to grad's dtype), or NULL to keep grad (with an error
 * set: the pass fails with it, and a leaf's .grad is left as it was). Hooks run in registration
 * order, each on the previous one's result, in every backward through the node (retain_graph) or
 * into the leaf. Returns a handle > 0, or 0 with the error (ctx_free(ctx) then runs at once).
 * ctx_free, if given, runs once: at ts_remove_tensor_hook, or when the graph (for a leaf: the
 * tensor) is freed. ts_remove_tensor_hook: TS_ERR_ARG when t has no such hook (its history was
 * replaced, or the graph was freed). */
typedef ts_tensor *(*ts_tensor_hook_fn)(void *ctx, ts_tensor *grad);
TS_API int ts_register_tensor_hook(ts_tensor *t, ts_tensor_hook_fn fn, void *ctx,
                                   void (*ctx_free)(void *ctx));
TS_API ts_status ts_remove_tensor_hook(ts_tensor *t, int handle);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_CUSTOM_FUNCTION_H */
