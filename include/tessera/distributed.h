/* tessera/distributed.h — training across processes and machines (via tessera.h):
 * torch.distributed's process groups and collectives on MPI (cpu and sim tensors) and NCCL (cuda
 * tensors), DistributedDataParallel, sharded data parallel (FSDP) and DistributedSampler. See
 * docs/DISTRIBUTED.md. */
#ifndef TESSERA_DISTRIBUTED_H
#define TESSERA_DISTRIBUTED_H

/* ================================================================ process group */
typedef enum ts_dist_backend {
    TS_DIST_AUTO = 0, /* MPI for cpu and sim tensors, NCCL for cuda tensors when built with it */
    TS_DIST_MPI,
    TS_DIST_NCCL,
} ts_dist_backend;

typedef struct ts_dist_opts {
    ts_dist_backend backend;
    /* A collective not finished after this long fails with TS_ERR_DIST naming the ranks that did
     * not join it, and the process group is unusable from then on. 0: TS_DIST_TIMEOUT (seconds)
     * from the environment, else 600 s (PyTorch's default for gloo and NCCL). */
    double timeout_s;
} ts_dist_opts;

/* Joins the world the launcher (mpirun, srun) started. Without a launcher the program is a world
 * of one and everything below works (collectives copy nothing). A library built without MPI
 * answers a world of one too, and TS_ERR_UNSUPPORTED when a launcher asked for more ranks.
 * Calling it twice is TS_ERR_STATE (PyTorch: "trying to initialize the default process group
 * twice!"). */
TS_API ts_status ts_dist_init(ts_dist_opts o);
TS_API bool ts_dist_is_available(void); /* built with MPI */
TS_API bool ts_dist_is_initialized(void);
TS_API int ts_dist_rank(void);       /* 0 before init */
TS_API int ts_dist_world_size(void); /* 1 before init */
TS_API int ts_dist_local_rank(void); /* rank among the processes of this machine */
TS_API int ts_dist_local_world_size(void);
TS_API ts_status ts_dist_barrier(void);
/* Waits for outstanding work, releases the groups and leaves MPI. After a failure (a timed-out
 * or failed collective) it aborts the whole job instead (MPI_Abort), so no rank is left waiting. */
TS_API ts_status ts_dist_finalize(void);
/* Ends every rank of the job now with this exit code (MPI_Abort); a world of one exits. */
TS_API void ts_dist_abort(int code);
/* "world 4, rank 0 (local 0 of 2), backend mpi (Open MPI v4.1.4), host NAME" — for `tessera
 * devices` and logs; thread-local buffer. */
TS_API const char *ts_dist_describe(void);

/* A subgroup (torch.distributed.new_group): every rank of the world calls it with the same list
 * of world ranks, in the same order relative to other group creations. Returns the group, also on
 * ranks outside it (where collectives on it are TS_ERR_ARG). Freed by ts_dist_finalize or
 * ts_dist_group_free. NULL means the world in every function below. */
typedef struct ts_dist_group ts_dist_group;
TS_API ts_dist_group *ts_dist_group_new(const int *ranks,
                                        int n); /* group ranks: sorted world ranks */
TS_API void ts_dist_group_free(ts_dist_group *g);
TS_API int ts_dist_group_rank(ts_dist_group *g); /* this process's rank in g, -1 outside it */
TS_API int ts_dist_group_size(ts_dist_group *g);

/* ================================================================ collectives */
typedef enum ts_dist_reduce_op {
    TS_DIST_SUM = 0,
    TS_DIST_AVG, /* floating dtypes only */
    TS_DIST_PRODUCT,
    TS_DIST_MIN,
    TS_DIST_MAX,
} ts_dist_reduce_op;

/* Every collective takes tensors of any dtype (f16 and bf16 too) on cpu and sim (MPI) or cuda
 * (NCCL), contiguous or not, works in place where PyTorch does, and uses WORLD ranks for src/dst
 * (PyTorch's convention, also in subgroups). Before moving data every rank checks that the others
 * pass the same dtype and shape: a difference is TS_ERR_SHAPE / TS_ERR_DTYPE naming the rank and
 * both shapes. The synchronous form returns when this rank's part is done; the _async form returns
 * a handle to ts_dist_wait (which also frees it). */
typedef struct ts_dist_work ts_dist_work;
/* Waits for the work (at most the timeout), finishes it in this thread and frees the handle: wait
 * for every handle exactly once, before ts_dist_group_free of its group. NULL-safe: returns the
 * pending error. Work runs in the group's communication thread in call order, so every rank must
 * make its calls on a group in the same order (from one thread, or ordered among threads). */
TS_API ts_status ts_dist_wait(ts_dist_work *w);
TS_API bool ts_dist_test(ts_dist_work *w); /* finished (successfully or not); never blocks */

TS_API ts_status ts_dist_all_reduce(ts_tensor *t, ts_dist_reduce_op op, ts_dist_group *g);
TS_API ts_dist_work *ts_dist_all_reduce_async(ts_tensor *t, ts_dist_reduce_op op, ts_dist_group *g);
TS_API ts_status ts_dist_broadcast(ts_tensor *t, int src, ts_dist_group *g);
TS_API ts_dist_work *ts_dist_broadcast_async(ts_tensor *t, int src, ts_dist_group *g);
/* the result lands in t on dst only; other ranks' t is left as it was */
TS_API ts_status ts_dist_reduce(ts_tensor *t, int dst, ts_dist_reduce_op op, ts_dist_group *g);
TS_API ts_dist_work *ts_dist_reduce_async(ts_tensor *t, int dst, ts_dist_reduce_op op,
                                          ts_dist_group *g);
/* all_gather_into_tensor: out holds group-size times in's elements, rank r's in at block r
 * (out shaped [W * d0, ...] or [W, d0, ...]) */
TS_API ts_status ts_dist_all_gather(ts_tensor *out, ts_tensor *in, ts_dist_group *g);
TS_API ts_dist_work *ts_dist_all_gather_async(ts_tensor *out, ts_tensor *in, ts_dist_group *g);
/* reduce_scatter_tensor: in holds group-size times out's elements; rank r gets block r reduced */
TS_API ts_status ts_dist_reduce_scatter(ts_tensor *out, ts_tensor *in, ts_dist_reduce_op op,
                                        ts_dist_group *g);
TS_API ts_dist_work *ts_dist_reduce_scatter_async(ts_tensor *out, ts_tensor *in,
                                                  ts_dist_reduce_op op, ts_dist_group *g);
/* point to point; tag >= 0. Posted without blocking the group's thread (a ring of isend/irecv
 * cannot deadlock); cuda tensors (NCCL) block it instead: order sends and receives to match. */
TS_API ts_status ts_dist_send(ts_tensor *t, int dst, int tag, ts_dist_group *g);
TS_API ts_status ts_dist_recv(ts_tensor *t, int src, int tag, ts_dist_group *g);
TS_API ts_dist_work *ts_dist_isend(ts_tensor *t, int dst, int tag, ts_dist_group *g);
TS_API ts_dist_work *ts_dist_irecv(ts_tensor *t, int src, int tag, ts_dist_group *g);

/* ================================================================ SyncBatchNorm */
/* torch.nn.SyncBatchNorm in training mode: ts_batch_norm (training) over x [N, C, *] (2 or more
 * dims) whose per-channel statistics span every rank of g (NULL: the world; before ts_dist_init a
 * world of one). Each rank's mean, biased variance and row count are all-gathered and combined
 * (Chan's parallel variance, in float64); the ranks may hold different N, also 0 (an empty output;
 * the rank still takes part). running_mean / running_var (may be NULL) become (1 - momentum)
 * running + momentum x (the global mean; the global unbiased variance). Differentiable: the weight
 * and bias gradients are this rank's share (DDP averages them, as PyTorch's), the input's is that
 * of the global batch's loss (the sum of every rank's): its backward all-reduces sum(dy) and
 * sum(dy (x - mean)) per channel. Collective, forward and backward: every rank of g calls it in
 * the same order and needs the same gradients (x, w, b); a rank's failure (a bad argument, out of
 * memory) fails it on every rank. Double backward is TS_ERR_UNSUPPORTED. f16 / bf16 inputs compute
 * in float32. eps 0 -> 1e-5; momentum in [0, 1]. Errors as ts_batch_norm's, plus the collectives'
 * (TS_ERR_SHAPE naming the rank whose C differs). Evaluation needs no collective: ts_batch_norm. */
TS_API ts_tensor *ts_sync_batch_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                                     ts_tensor *w, ts_tensor *b, double momentum, double eps,
                                     ts_dist_group *g);

/* ================================================================ DistributedDataParallel */
typedef struct ts_ddp_opts {
    ts_dist_group *group;         /* NULL: the world */
    double bucket_cap_mb;         /* 0 -> 25 (MiB) */
    double first_bucket_mb;       /* 0 -> 1 (MiB): the first bucket to be reduced, as PyTorch */
    bool find_unused_parameters;  /* walk the forward graph each step; unused ones count as ready */
    bool no_broadcast_buffers;    /* PyTorch's broadcast_buffers=False */
    bool gradient_as_bucket_view; /* .grad tensors are views of the buckets (saves one copy) */
    /* Whether buckets are reduced while backward still computes. AUTO (0): yes when this machine
     * has a core to spare for the communication thread (cores > local ranks x compute threads),
     * else every bucket at the end of backward — an MPI collective waiting for a slower rank
     * spins, and on a core that backward needs that costs more than the overlap saves. Also
     * TS_DDP_OVERLAP=0|1 in the environment. */
    enum { TS_DDP_OVERLAP_AUTO = 0, TS_DDP_OVERLAP_ON, TS_DDP_OVERLAP_OFF } overlap;
} ts_ddp_opts;

/* Wraps module (which it then owns) as the root "DistributedDataParallel" with child "module"
 * (state-dict names "module.fc1.weight", as PyTorch). Checks every rank has the same parameter
 * shapes (error naming the rank and both shapes), then broadcasts parameters and buffers from the
 * group's first rank. During backward each bucket of gradients (reverse registration order) is
 * all-reduced and averaged as soon as all its gradients are ready, while the rest of backward runs.
 * On failure the module is freed and NULL returned, unless it already belongs to another module
 * (TS_ERR_ARG, "already belongs"): that one keeps it. */
TS_API ts_module *ts_ddp_new(ts_module *module, ts_ddp_opts o);
TS_API ts_module *ts_ddp_module(ts_module *ddp); /* the wrapped module (borrowed): save this one */
/* Gradient accumulation: forwards inside no_sync reduce nothing in their backward; the first
 * backward after it reduces the accumulated gradients (torch's `with ddp.no_sync():`). */
TS_API void ts_ddp_no_sync_begin(ts_module *ddp);
TS_API void ts_ddp_no_sync_end(ts_module *ddp);
/* statistics of the last synchronised backward, for benchmarks and logs */
typedef struct ts_ddp_stats {
    int buckets;
    size_t bucket_bytes_max;
    double comm_s; /* time the communication thread spent reducing buckets */
    double wait_s; /* time backward waited for reductions still running at its end */
    bool overlap;  /* buckets were launched during backward (see ts_ddp_opts.overlap) */
} ts_ddp_stats;
TS_API ts_status ts_ddp_get_stats(ts_module *ddp, ts_ddp_stats *out);

/* ================================================================ sharded data parallel (FSDP) */
typedef struct ts_fsdp_opts {
    ts_dist_group *group; /* NULL: the world */
    /* 0 -> 3. 1 (ZeRO-1): optimizer state sharded; full parameters and gradients on every rank
     * (gradients all-reduced). 2 (ZeRO-2): + gradients (reduce-scattered; a rank keeps only its
     * shard's). 3 (ZeRO-3, FSDP's full shard): + parameters, gathered per unit around its forward
     * and its backward. */
    int stage;
    /* The units, in forward order: paths of submodules ("blocks.0", "layer1"); each unit's
     * parameters are gathered and reduced together, and every parameter outside them belongs to
     * the root unit (the whole model). Nested units are allowed (a parameter goes to the deepest).
     * With n_units 0: every submodule whose parameters not already in a smaller unit number at
     * least min_unit_params becomes one (size_based_auto_wrap_policy); with that 0 too, the
     * whole model is one unit. */
    const char *const *units;
    int n_units;
    int64_t min_unit_params;
    /* Stage 3: keep a unit's parameters gathered from its forward to its backward
     * (reshard_after_forward=False: one all-gather a step instead of two, more memory). */
    bool no_reshard_after_forward;
    bool no_prefetch; /* do not start the next unit's all-gather while this one computes */
    /* Mixed precision (FSDP2's MixedPrecisionPolicy). param_dtype (TS_BF16, TS_F16, TS_F32,
     * TS_F64; TS_DTYPE_DEFAULT: none): the shards (what the optimizer steps) keep the model's
     * dtype; each gather sends this rank's shard rounded to param_dtype, the module's parameters
     * become param_dtype tensors (views of the gathered buffer) from ts_fsdp on, and forward and
     * backward compute with them; the wrapper's forward casts a floating input to param_dtype
     * (cast_forward_inputs). Their gradients (param_dtype) are converted to reduce_dtype
     * (TS_F32, TS_BF16, TS_F16, TS_F64; TS_DTYPE_DEFAULT: param_dtype), divided by the group size
     * and summed in it (reduce-scatter; stage 1 all-reduce), and land converted to the shard's
     * dtype in the shard's .grad. Under no_sync a unit's gradient accumulates in reduce_dtype.
     * ts_fsdp_full_state_dict, ts_fsdp_save_full and the sharded checkpoints read the shards
     * (full precision); ts_fsdp_unshard gathers param_dtype parameters. Any other dtype is
     * TS_ERR_DTYPE from ts_fsdp. */
    ts_dtype param_dtype, reduce_dtype;
    /* AdamW's weight-decay groups (ts_adamw_decay_groups' rule): each unit's flat buffer holds its
     * parameters of two or more dimensions (matrices, embeddings, kernels) first and the others
     * (biases, norms) after, and this rank's shard reaches the optimizer as two leaves, the part
     * of each (either may be empty); ts_fsdp_decay_groups lists them apart. */
    bool decay_groups;
    /* FSDP's CPUOffload(offload_params=True), stages 2 and 3 (TS_ERR_ARG with stage 1, whose
     * gradients are full on every rank): each unit's shard, what the optimizer steps, lives in
     * page-locked host memory, and so do its gradient and (made by the optimizer on the shard's
     * device) the optimizer's state; an optimizer over ts_fsdp_parameters then steps on the CPU.
     * Each gather copies the shard to the parameters' device first, each reduced gradient comes
     * back to the host. The device holds only the gathered parameters and the gradients of the
     * units being computed. The results are those without offload: the same sums and kernels. */
    bool cpu_offload;
} ts_fsdp_opts;

/* Wraps module (which it then owns) as the root "FullyShardedDataParallel" with child "module".
 * Checks every rank has the same parameters (as ts_ddp), takes the group's first rank's values,
 * then gives each unit one flat buffer of its parameters (padded to a multiple of the group size)
 * whose storage the module's parameter tensors become slices of (their handles stay), and this
 * rank a 1/N shard of it. On failure (a unit that does not exist, a stage out of range, a unit's
 * parameters on different devices or dtypes, a model that differs across ranks) the module is
 * freed (unless it already belongs to another module, which keeps it), NULL returned and the
 * error names the op and what was wrong. Parameters must be used
 * only inside their unit's forward (the root's: anywhere in the model's forward). */
TS_API ts_module *ts_fsdp_new(ts_module *module, ts_fsdp_opts o);
TS_API ts_module *ts_fsdp_module(ts_module *fsdp); /* the wrapped module (borrowed) */
/* The tensors the optimizer steps: each unit's shard (with decay_groups its two parts, decaying
 * first), a leaf that requires grad, whose .grad backward fills with this rank's part of the
 * averaged gradient (accumulating like any leaf).
 * Give them to any optimizer: ts_adamw_params(l.tensors, l.n, ...). The list retains them; free
 * it with ts_tensor_list_free (the optimizer keeps its own references). */
TS_API ts_tensor_list ts_fsdp_parameters(ts_module *fsdp);
/* With decay_groups: this rank's decaying shard parts ("<u>.flat_param"; the parameters of two or
 * more dimensions) and the others ("<u>.flat_param_no_decay"), one each a unit, as lists like
 * ts_fsdp_parameters' (whose tensors they are), for ts_adamw_params(decay) +
 * ts_optim_add_param_group_wd(no_decay, lr, 0). TS_ERR_STATE without decay_groups. */
TS_API ts_status ts_fsdp_decay_groups(ts_module *fsdp, ts_tensor_list *decay,
                                      ts_tensor_list *no_decay);
/* Gradient accumulation: backwards of forwards inside no_sync reduce nothing (each rank keeps
 * its units' full gradients); the first backward after it reduces the sum. */
TS_API void ts_fsdp_no_sync_begin(ts_module *fsdp);
TS_API void ts_fsdp_no_sync_end(ts_module *fsdp);
/* Gathers every unit's full parameters now (FSDP2's unshard()), e.g. to read or save the model;
 * under stage 3 they stay gathered until a forward or backward reshards them. Collective: every
 * rank calls it. */
TS_API ts_status ts_fsdp_unshard(ts_module *fsdp);
/* torch.nn.utils.clip_grad_norm_ over the shards' gradients: the total norm of the whole model's
 * gradient (each rank's partial sum, all-reduced), every shard's .grad scaled by max_norm / (norm +
 * 1e-6) when that is below 1. Returns the norm before clipping (NAN on error). norm_type 0 -> 2;
 * INFINITY for the max norm. Collective: every rank calls it, after backward, before the step. */
TS_API double ts_fsdp_clip_grad_norm(ts_module *fsdp, double max_norm, double norm_type);
typedef struct ts_fsdp_stats {
    int units;
    size_t shard_bytes;    /* this rank's shards (what the optimizer steps) */
    size_t unit_bytes_max; /* the largest unit's gathered parameters */
    int all_gathers, reduce_scatters, all_reduces; /* issued since construction */
    /* bytes this rank sent into them: its shard (in param_dtype) a gather, its unit's full
     * gradient (in reduce_dtype) a reduction */
    size_t gather_bytes, reduce_bytes;
} ts_fsdp_stats;
TS_API ts_status ts_fsdp_get_stats(ts_module *fsdp, ts_fsdp_stats *out);

/* Sharded checkpoints (docs/FSDP.md, "Sharded checkpoints"). optim must be built over
 * ts_fsdp_parameters (those tensors, in that order); optim and scaler may be NULL. */
typedef struct ts_optim ts_optim;
typedef struct ts_grad_scaler ts_grad_scaler;
typedef struct ts_fsdp_checkpoint {
    ts_optim *optim;
    ts_grad_scaler *scaler;
    int64_t step;          /* saved; set by a successful load */
    int64_t epoch_batches; /* saved; set by a successful load (0: not known) */
} ts_fsdp_checkpoint;
/* Every rank writes DIR/shard.<G>.<rank>-of-<W>.safetensors (its units' shards, their optimizer
 * state, buffers, scaler, step, RNG, and the layout: units, parameter names, offsets, shapes), all
 * wait for all, then the group's first rank writes DIR/manifest.safetensors (generation G, world
 * W) atomically, which commits the save, and removes older generations. A rank that fails or dies
 * before that leaves the previous checkpoint whole. Collective; c may be NULL. */
TS_API ts_status ts_fsdp_save_sharded(ts_module *fsdp, const char *dir,
                                      const ts_fsdp_checkpoint *c);
/* Loads what DIR's manifest commits into an FSDP module of the same model and units in a group of
 * any size: each rank reads the files whose blocks overlap its shards and rebuilds its shards
 * (padded for this world) and its optimizer state. Everything is read and checked on every rank
 * before anything changes; then all ranks change or none (the error names the rank and file: a
 * missing or truncated shard, a different model). Collective. */
TS_API ts_status ts_fsdp_load_sharded(ts_module *fsdp, const char *dir, ts_fsdp_checkpoint *c);
/* The whole model's state dict (ts_module_state_dict's names) with every parameter gathered from
 * the shards in their dtype (full precision under mixed precision, where the module's own
 * parameters are param_dtype) on every rank; buffers as they are. PyTorch's
 * get_model_state_dict(full_state_dict=True). Collective; free with ts_tensor_list_free. */
TS_API ts_tensor_list ts_fsdp_full_state_dict(ts_module *fsdp);
/* Consolidation: ts_fsdp_full_state_dict (ordinary names, as ts_module_save of the unwrapped
 * model: readable by ts_module_load, PyTorch's load_state_dict, `tessera generate`) written by the
 * group's first rank. Collective; every rank returns the same status. */
TS_API ts_status ts_fsdp_save_full(ts_module *fsdp, const char *path);

/* ================================================================ hooks used by DDP and FSDP */
/* PyTorch's Tensor.register_post_accumulate_grad_hook: fn runs after backward has accumulated
 * the last gradient this pass brings into the leaf's .grad. When the pass fails first (an error is
 * pending at its end), the hooks of leaves still waiting for it run then, with the error pending:
 * a hook that keeps state per pass resets it (DDP abandons the iteration); others should return
 * when ts_error() is set. Returns a handle > 0, or 0 on error. */
typedef void (*ts_grad_hook_fn)(ts_tensor *leaf, void *ctx);
TS_API int ts_register_post_accumulate_grad_hook(ts_tensor *leaf, ts_grad_hook_fn fn, void *ctx);
TS_API ts_status ts_remove_grad_hook(ts_tensor *leaf, int handle);

/* The 0.1 names of the constructors above, kept as aliases for the 0.x series and removed at
 * 1.0 (decision 0025: a constructor is ts_<type>_new). Each does what its new name does. */
TS_API ts_module *ts_ddp(ts_module *module, ts_ddp_opts o);
TS_API ts_module *ts_fsdp(ts_module *module, ts_fsdp_opts o);
TS_API ts_dist_group *ts_dist_new_group(const int *ranks, int n);

#endif /* TESSERA_DISTRIBUTED_H */
