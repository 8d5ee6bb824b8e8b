/* memo.h — the shape memo (memo.c): the values of the top-level graph that are functions of the
 * graph inputs' shapes alone (Shape / Size outputs and what foldable nodes compute from them and
 * constants) are computed on a run and reused, with their nodes skipped, while the inputs' shapes
 * and dtypes, the device and the autocast state stay the same. */
#ifndef TSO_MEMO_H
#define TSO_MEMO_H

#include "onnx/onnx_internal.h"

/* Per value of g: TSO_SHAPE_FIXED when its shape follows from the graph inputs' shapes alone,
 * TSO_SHAPE_ONLY when its values do too (never a parameter's values: training changes them).
 * malloc'ed (n_values + 1 entries); NULL with TS_ERR_OOM. */
enum { TSO_SHAPE_FIXED = 1, TSO_SHAPE_ONLY = 2 };
unsigned char *tso_shape_values(const tso_graph *g);

/* One run's use of the memo (run.c). */
typedef struct tso_memo_run {
    struct tso_memo *memo; /* NULL: nothing to reuse or keep (a sub-graph, or no such values) */
    bool hit;              /* the memo's values are this run's: skip[k] nodes do not run */
    bool *skip;
    ts_tensor **keep;     /* a miss: the values this run computed, kept at its end */
    struct memo_key *key; /* a miss: this run's inputs, the key of what it keeps */
} tso_memo_run;

/* Before the top-level graph's nodes run (inputs checked): on a hit, vals[v] gets the memo's
 * tensor (a new reference) for every value it holds. Out of memory, the run goes without. */
void tso_memo_begin(tso_graph *g, ts_device dev, ts_tensor *const *inputs, ts_tensor **vals,
                    tso_memo_run *r);
/* node k's outputs are in vals already: it does not run */
static inline bool tso_memo_skips(const tso_memo_run *r, int k) { return r->hit && r->skip[k]; }
/* after node k ran on a miss: keeps the outputs the memo may hold */
void tso_memo_note(tso_memo_run *r, const tso_graph *g, int k, ts_tensor *const *vals);
/* after the run: a successful miss's values become the memo's (for its key); frees r's arrays */
void tso_memo_end(tso_memo_run *r, const tso_graph *g, bool ok);
/* For tests and diagnostics: the runs of g that took the memo's values, and how many nodes those
 * runs skip (0 and 0 when g has no memo yet). */
void tso_memo_stats(tso_graph *g, int64_t *hits, int *skipped_nodes);

#endif /* TSO_MEMO_H */
