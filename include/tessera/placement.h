/* tessera/placement.h — placing a module across devices by memory budget (issue 55, part 3;
 * Hugging Face accelerate's device_map="auto" with max_memory). Include it directly (after
 * tessera.h). docs/MEMORY_PLANNING.md has the rules. */
#ifndef TESSERA_PLACEMENT_H
#define TESSERA_PLACEMENT_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device's budget: at most `bytes` of the model's memory on it. */
typedef struct ts_mem_budget {
    ts_device device;
    size_t bytes;
} ts_mem_budget;

/* Parses "sim:0=2MiB,cpu=64GiB" (comma-separated device=size, in the order devices are filled)
 * into out[0..cap), the count in *n. Sizes: a non-negative number (decimals allowed) with an
 * optional suffix B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024),
 * case-sensitive as accelerate's and llama.cpp's; no suffix means bytes. Errors (TS_ERR_ARG,
 * naming the entry): an empty list or entry, a missing '=', an unknown device or one this process
 * does not have, a device named twice, a bad size, more than cap entries. */
TS_API ts_status ts_mem_budget_parse(const char *s, ts_mem_budget *out, int cap, int *n);

typedef struct ts_place_opts {
    /* NULL: budgets hold parameters and buffers only. Otherwise the model runs once on it (grad
     * mode off, eval mode, where the model is now) and each unit is also charged its output's
     * bytes. */
    ts_tensor *example_input;
    bool with_grads;         /* charge each parameter twice (weights + gradients: training) */
    bool dry_run;            /* plan only: move nothing, install nothing */
    bool verbose;            /* print the plan to stderr */
    ts_device output_device; /* type TS_DEVICE_DEFAULT (zero): the output stays where the last
                                unit leaves it; else a hook on the root moves it there */
    /* NULL, or per-tensor overrides as llama.cpp's --override-tensor: "pattern=device,..." where
     * each pattern is a POSIX extended regular expression searched for in every parameter's and
     * buffer's full dotted name ("blocks.0.linear1.weight"); the first pattern that matches wins
     * (split at ',' and at each entry's last '='). A matched tensor is stored on that device
     * (which needs a budget: it is charged there, before the units are assigned) and copied to
     * its unit's device for each forward of the unit (differentiable: its gradient reaches the
     * stored tensor). Errors (TS_ERR_ARG naming the entry): no '=', an empty pattern, a bad
     * regular expression, an unknown device or one without a budget, a pattern matching none of
     * the tensors left. */
    const char *overrides;
} ts_place_opts;

/* One unit of the plan: a run of modules that stays on one device, named by its first module's
 * path ("0", "blocks.3", "tok_emb+pos_emb+drop"). */
typedef struct ts_place_unit {
    char *name;
    ts_device device;
    size_t param_bytes; /* parameters and buffers (a tensor shared by two units counts in the
                           first; an overridden one counts on its own device), doubled with
                           with_grads */
    size_t act_bytes;   /* its output's bytes for the example input (0 without one) */
} ts_place_unit;

/* One tensor placed by opts.overrides. */
typedef struct ts_place_override {
    char *name;        /* its full dotted name */
    ts_device device;  /* where it is stored (and charged) */
    ts_device used_on; /* its unit's device, where a copy of it is used during the unit's forward */
    size_t bytes;      /* charged to device, doubled for a parameter with with_grads */
} ts_place_override;

typedef struct ts_place_plan {
    int n_units, n_devices;
    ts_place_unit *units;   /* in execution order */
    ts_mem_budget *used;    /* per budgeted device, in budget order: the bytes planned on it */
    ts_mem_budget *budgets; /* the budgets, in order */
    int n_overrides;        /* the tensors opts.overrides placed, in the order of the walk */
    ts_place_override *overrides;
} ts_place_plan;

/* Places m (a root module) across the budgeted devices: its units, in execution order (a
 * Sequential's children, nested Sequentials flattened and a Conv2d + BatchNorm2d + ReLU run kept
 * together; a GPT's embeddings, each block, the final norm; a ResNet's children as a Sequential's;
 * a model from ts_onnx_load: its graph's nodes, each node's initializers moved to its device and
 * its inputs moved there as it runs, docs/MEMORY_PLANNING.md; any other module is one unit), are
 * assigned in order to the first device with room left, then the next (a device once left is
 * not used again, so transfers stay few). Units are moved there
 * (ts_module_to) and each unit whose successor lives elsewhere gets a forward hook moving its
 * output there (differentiable: the gradients flow back); the root moves its input to the first
 * unit's device. Placing again replaces the earlier placement. plan (may be NULL) receives the
 * plan: free it with ts_place_plan_free. Errors: TS_ERR_ARG (NULL module, a child module, no
 * budgets), TS_ERR_OOM "module_place: the budgets cannot hold the model" naming each device, its
 * budget and what it would need, when no plan fits (nothing moved then), TS_ERR_DEVICE (a budget or
 * output_device not available); a failed move reports its own error, puts the half-moved module
 * back and joins the units where they are (the model still runs). */
TS_API ts_status ts_module_place(ts_module *m, const ts_mem_budget *budgets, int n_budgets,
                                 ts_place_opts opts, ts_place_plan *plan);
/* ts_module_place from a budget string ("sim:0=2MiB,cpu=64GiB"). */
TS_API ts_status ts_module_place_str(ts_module *m, const char *budgets, ts_place_opts opts,
                                     ts_place_plan *plan);
/* The plan as text (malloc'ed; free()): one line per unit "blocks.0 -> sim:0  1.50 MiB", one per
 * overridden tensor "blocks.0.linear1.weight -> cpu  4.00 KiB (override, used on sim:0)" and one
 * per device "sim:0: 3.00 MiB of 4.00 MiB". NULL with TS_ERR_OOM. */
TS_API char *ts_place_plan_str(const ts_place_plan *p);
TS_API void ts_place_plan_free(ts_place_plan *p); /* NULL-safe; empties it */

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLACEMENT_H */
