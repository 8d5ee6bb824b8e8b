/* placement_internal.h — what placement.c and placement_budget.c share. Not public. */
#ifndef TS_NN_PLACEMENT_INTERNAL_H
#define TS_NN_PLACEMENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/placement.h"

typedef struct ts_module ts_module;

/* "512 B", "1.50 KiB", "2.00 MiB", "3.00 GiB" */
void tsi_fmt_bytes(size_t b, char *buf, size_t n);

/* A module's units in execution order, as ts_module_place cuts it (placement.c): unit i is the
 * modules (*mods)[spans[i].first .. first + count), spans[i].exit the one whose output leaves it.
 * *gpt: m is a GPT (its last unit's output goes to the head tied to the token embedding). Returns
 * the number of units (> 0; malloc'ed arrays: free both), or -1 with TS_ERR_OOM set. */
typedef struct tsi_unit_span {
    int first, count;
    ts_module *exit;
} tsi_unit_span;
int tsi_place_units(ts_module *m, ts_module ***mods, tsi_unit_span **spans, bool *gpt);

/* placement_override.c: ts_place_opts.overrides (llama.cpp's --override-tensor). The rules are
 * parsed against the budgets, then every tensor of the units is scanned in execution order (a
 * shared tensor belongs to the first unit that holds it) and the first matching rule claims it. */
typedef struct tsi_ovr_tensor {
    ts_tensor *t;
    ts_module *owner; /* the module whose parameter (param) or buffer slot holds it */
    int slot;
    bool param;
    char *name;      /* its full dotted name */
    int dev;         /* budget index of the device it is stored on */
    int unit;        /* the unit that uses it */
    ts_module *hook; /* the unit's module whose forward uses it (its hooks copy it in) */
    size_t bytes;    /* charged to dev */
} tsi_ovr_tensor;

typedef struct tsi_ovr_rule tsi_ovr_rule;

typedef struct tsi_ovr {
    tsi_ovr_rule *rules;
    int n_rules;
    tsi_ovr_tensor *t; /* the claimed tensors */
    int n, cap;
    ts_tensor **seen; /* every tensor scanned */
    int n_seen, cap_seen;
} tsi_ovr;

/* *o zeroed, then spec parsed (NULL or "": no rules). false with TS_ERR_ARG naming the entry. */
bool tsi_ovr_parse(const char *spec, const ts_mem_budget *b, int nb, tsi_ovr *o);
/* Claims what the rules match among the tensors under m, a module of unit `unit` (names from the
 * root); false on OOM. */
bool tsi_ovr_scan(tsi_ovr *o, ts_module *m, int unit, bool with_grads);
/* false with TS_ERR_ARG when a rule claimed nothing */
bool tsi_ovr_all_used(const tsi_ovr *o);
int tsi_ovr_find(const tsi_ovr *o, const ts_tensor *t); /* index in o->t, or -1 */
void tsi_ovr_free(tsi_ovr *o);
/* Moves every claimed tensor to its device (with its gradient); false at the first failure. */
bool tsi_ovr_move(const tsi_ovr *o, const ts_mem_budget *b);
/* Hooks on the units' modules copying each claimed tensor to unit_dev[its unit] for the forward
 * (gpt: the token embedding's weight stays swapped in until the root's forward ends, for the tied
 * head); root->destroy wrapped to take them out. Replaces nothing: call tsi_ovr_unplace first. */
bool tsi_ovr_install(const tsi_ovr *o, ts_module *root, const ts_device *unit_dev, bool gpt);
/* The stored tensors back in their slots, where a failed forward (no post hook) left copies. */
void tsi_ovr_restore(ts_module *root);
/* Takes an earlier placement's override hooks out of root (none: nothing to do). */
void tsi_ovr_unplace(ts_module *root);

/* A module type that places itself with units of its own (an imported ONNX graph, whose units are
 * its nodes: src/onnx/place.c). ts_module_place checks the call as for any module, asks for the
 * units and their charges, assigns them by the same rule, has the type install the assignment,
 * and reports consecutive units on one device as one unit of the plan. Registered by the layer
 * that makes such modules (ts_onnx_load) before one exists; NULL until then. */
typedef struct tsi_place_item {
    char name[128];
    size_t pbytes, abytes;
} tsi_place_item;

typedef struct tsi_place_self {
    bool (*claims)(ts_module *m);
    /* m's units in order, charged (*items malloc'ed); their count, or -1 with the error set.
     * *state (may be NULL) goes to install, run_name and free_state. */
    int (*units)(ts_module *m, const ts_place_opts *opts, tsi_place_item **items, void **state);
    /* dev[i]: the budget index of unit i. Moves what must move and makes the runs follow the
     * assignment; false with the error set (the model still runs). */
    bool (*install)(ts_module *m, void *state, const int *dev, const ts_mem_budget *b, int nb,
                    ts_device output_device);
    /* the plan's name for units first..last (one device) */
    void (*run_name)(void *state, int first, int last, char *buf, size_t n);
    void (*free_state)(void *state);
} tsi_place_self;
void tsi_place_register_self(const tsi_place_self *ops);

/* weight_stream.c: m (a root) is streamed (ts_module_stream); placement refuses it */
bool tsi_module_streamed(const ts_module *m);

#endif /* TS_NN_PLACEMENT_INTERNAL_H */
