/* tessera/autograd.h — gradients: requires_grad, backward, grad mode, anomaly mode, activation
 * checkpointing and the gradient check (via tessera.h). */
#ifndef TESSERA_AUTOGRAD_H
#define TESSERA_AUTOGRAD_H

/* TS_ERR_DTYPE for an integer tensor, TS_ERR_STATE turning it off on a non-leaf (PyTorch's). */
TS_API ts_status ts_set_requires_grad(ts_tensor *t, bool on);
TS_API bool ts_requires_grad(ts_tensor *t);
TS_API ts_tensor *ts_grad(ts_tensor *t); /* borrowed; NULL when none */
TS_API ts_status ts_set_grad(ts_tensor *t,
                             ts_tensor *grad); /* NULL clears (zero_grad set_to_none) */
TS_API bool ts_is_leaf(ts_tensor *t);
TS_API uint64_t ts_version(ts_tensor *t);         /* bumped by every in-place op on the storage */
TS_API const char *ts_grad_fn_name(ts_tensor *t); /* "AddBackward0", or NULL for leaves */
/* Backpropagate from a one-element tensor (gradient 1). The three forms return ts_error() as the
 * pass ends: TS_OK when it succeeded and no error is pending (decision 0025; they were void). */
TS_API ts_status ts_backward(ts_tensor *loss);
/* Backpropagate from t with the given gradient (same shape as t). */
TS_API ts_status ts_backward_with(ts_tensor *t, ts_tensor *grad);
typedef struct ts_backward_opts {
    bool retain_graph; /* keep saved tensors so backward can run through the graph again */
} ts_backward_opts;
TS_API ts_status ts_backward_ex(ts_tensor *t, ts_tensor *grad,
                                ts_backward_opts o); /* grad NULL: ones */
/* PyTorch's torch.autograd.grad and backward(inputs=, create_graph=): one backward pass from
 * outputs[0 .. n_outputs) seeded with grad_outputs[i] (NULL entry or array: ones for a
 * one-element real output). With inputs (n_inputs > 0; leaves or tensors made by recorded ops,
 * each requiring grad) only what leads to them runs: grads[k] (not accumulate) receives input k's
 * gradient, scope-owned, or NULL when the outputs do not depend on it (an error unless
 * allow_unused), and no .grad anywhere changes; with accumulate the gradients are added into the
 * inputs' .grad instead (grads may be NULL). n_inputs 0 with accumulate: every leaf, as
 * ts_backward. create_graph: the pass records the graph of the gradients (grad mode on inside
 * it), so they can be differentiated again; a backward that cannot be (see
 * docs/PYTHON_AUTOGRAD.md, "Higher-order gradients") gives gradients whose own backward fails
 * with TS_ERR_UNSUPPORTED naming it.
 * retain_graph keeps the saved tensors for another pass (create_graph implies it: the gradients'
 * graph reaches back into this one). Returns TS_OK or the error (grads all NULL). */
typedef struct ts_grad_opts {
    bool retain_graph;
    bool create_graph;
    bool allow_unused;
    bool accumulate;
} ts_grad_opts;
TS_API ts_status ts_autograd_grad(ts_tensor *const *outputs, ts_tensor *const *grad_outputs,
                                  int n_outputs, ts_tensor *const *inputs, int n_inputs,
                                  ts_grad_opts o, ts_tensor **grads);
/* Thread-local, nestable: ops record no graph inside. */
TS_API void ts_no_grad_begin(void);
TS_API void ts_no_grad_end(void);
TS_API bool ts_grad_enabled(void);
TS_API ts_tensor *ts_detach(ts_tensor *t); /* shares storage, no graph */
/* Anomaly mode (also TS_DETECT_ANOMALY=1): backward fails with TS_ERR_STATE naming the forward op
 * whose backward produced NaN/Inf. */
TS_API void ts_detect_anomaly(bool on);
/* Activation checkpointing (PyTorch's torch.utils.checkpoint, non-reentrant): runs
 * fn(ctx, inputs, n_inputs, outputs, n_outputs) recording the graph as usual, but whatever its ops
 * save for backward is dropped when it returns (its intermediates are freed) and recomputed by
 * running fn again, on the same inputs with the same random numbers and autocast state, the first
 * time the backward needs it. Gradients reach the inputs and every parameter fn uses. fn fills
 * outputs[0 .. n_outputs) (they land in the caller's scope) and returns TS_OK or an error; it must
 * run the same ops each time (else the backward fails with TS_ERR_STATE), and an input modified in
 * place before the backward is refused. ctx is taken over (also on failure): ctx_free(ctx), if
 * given, runs when nothing can recompute any more (the graph is freed). With grad mode off fn just
 * runs. Returns TS_OK or the error (outputs NULL). */
typedef ts_status (*ts_checkpoint_fn)(void *ctx, ts_tensor *const *inputs, int n_inputs,
                                      ts_tensor **outputs, int n_outputs);
TS_API ts_status ts_checkpoint(ts_checkpoint_fn fn, void *ctx, void (*ctx_free)(void *ctx),
                               ts_tensor *const *inputs, int n_inputs, ts_tensor **outputs,
                               int n_outputs);
/* The two halves of ts_checkpoint, for callers that run the function themselves (a binding):
 * between ts_checkpoint_begin and ts_checkpoint_end the calling thread's ops save placeholders;
 * fn is called only to recompute (given detached copies of the inputs, its outputs released).
 * begin returns NULL with the error on bad arguments (ctx taken over either way); end must close
 * the thread's innermost open frame (else TS_ERR_STATE). */
typedef struct ts_checkpoint_frame ts_checkpoint_frame;
TS_API ts_checkpoint_frame *ts_checkpoint_begin(ts_checkpoint_fn fn, void *ctx,
                                                void (*ctx_free)(void *ctx),
                                                ts_tensor *const *inputs, int n_inputs,
                                                int n_outputs);
TS_API ts_status ts_checkpoint_end(ts_checkpoint_frame *f);
/* Gradient check by f64 central differences: compares the analytical vector-Jacobian product of a
 * random vector with the numerical one for every element of every input that requires grad. */
typedef ts_tensor *(*ts_gradcheck_fn)(ts_tensor *const *inputs, int n, void *ctx);
typedef struct ts_gradcheck_opts {
    double eps;  /* 0 -> 1e-6 */
    double atol; /* 0 -> 1e-5 */
    double rtol; /* 0 -> 1e-3 */
    bool verbose;
} ts_gradcheck_opts;
TS_API bool ts_gradcheck(ts_gradcheck_fn f, void *ctx, ts_tensor *const *inputs, int n,
                         ts_gradcheck_opts o);

#endif /* TESSERA_AUTOGRAD_H */
