/* tensor_index.h — what the indexing files share (tensor_index_plan.c: the key parsed and
 * planned; tensor_index.c: reading and writing through the plan, the Tensor's slots). */
#ifndef TSP_TENSOR_INDEX_H
#define TSP_TENSOR_INDEX_H

#include "tsp.h"

#define IX_MAX 32 /* entries in one key: more could not fit TS_MAX_DIMS dims */

typedef enum ix_kind {
    IX_INT,
    IX_SLICE,
    IX_NONE,
    IX_ELLIPSIS,
    IX_BOOL,
    IX_TENSOR,
    IX_MASK
} ix_kind;

typedef struct ix_item {
    ix_kind kind;
    int64_t i;       /* IX_INT: the index; IX_BOOL: 0 or 1 */
    PyObject *slice; /* IX_SLICE: borrowed from the key */
    ts_tensor *t;    /* IX_TENSOR (int64/int32) / IX_MASK (bool/uint8): owned */
} ix_item;

typedef struct ix_key {
    int n;
    ix_item items[IX_MAX];
} ix_key;

/* One advanced index: the values (normalised to [0, size)) that index one dim of the view. */
typedef struct ix_adv {
    int dim;        /* the view's dim */
    ts_shape shape; /* of the index array */
    int64_t *idx;   /* host, numel(shape) values (PyMem) */
} ix_adv;

/* What a key does to a tensor: the view made by its basic part (advanced dims kept whole), then
 * the advanced indices, broadcast to bshape and flattened into one row-major index (lin) over the
 * advanced dims taken together. */
typedef struct ix_plan {
    ts_tensor *view;
    int nadv;
    ix_adv adv[TS_MAX_DIMS];
    ts_shape bshape;
    int64_t nlin; /* numel(bshape) */
    int64_t *lin;
} ix_plan;

/* tessera._C (set by tsp_init_index): its as_tensor (dlpack.c) makes tensors of arrays, lists */
extern PyObject *tspi_module;

/* ------------------------------------------------------------------ small helpers */
/* Releases prev and returns next: `x = tspi_then(x, ts_op(x))` chains ops, NULL on failure. */
ts_tensor *tspi_then(ts_tensor *prev, ts_tensor *next);
int64_t tspi_shape_numel(ts_shape s);
/* "[3, 4]", PyTorch's way of writing a shape in messages */
void tspi_shape_str(ts_shape s, char *buf, size_t size);
/* A contiguous host copy of t's values in dtype dt (PyMem; the caller frees it). */
void *tspi_host_copy(ts_tensor *t, ts_dtype dt);

/* ------------------------------------------------------------------ the key and its plan */
/* key parsed into k (0), or -1 with an exception; tspi_key_free releases what k holds either way */
int tspi_parse_key(PyObject *key, ix_key *k);
void tspi_key_free(ix_key *k);
/* The plan of key k on t (0), or -1 with an exception; tspi_plan_free frees it either way. */
int tspi_plan_build(ts_tensor *t, const ix_key *k, ix_plan *p);
void tspi_plan_free(ix_plan *p);

#endif /* TSP_TENSOR_INDEX_H */
