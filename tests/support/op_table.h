/* op_table.h — the table-driven op harness (DESIGN §9.1): rows, sample layouts, f64 references. */
#ifndef TS_OP_TABLE_H
#define TS_OP_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "tessera.h"

#define OT_MAX_IN  4
#define OT_BIT(dt) (1u << (unsigned)(dt))
#define OT_FLOATS  (OT_BIT(TS_F32) | OT_BIT(TS_F64) | OT_BIT(TS_F16) | OT_BIT(TS_BF16))
#define OT_INTS    (OT_BIT(TS_I64) | OT_BIT(TS_I32) | OT_BIT(TS_U8))
#define OT_NUMERIC (OT_FLOATS | OT_INTS)
#define OT_ALL     (OT_NUMERIC | OT_BIT(TS_BOOL))

/* How an input tensor is laid out in memory; every layout has the same logical shape. */
typedef enum ot_layout {
    OT_CONTIG,
    OT_TRANSPOSED, /* made with the last two dims swapped, then transposed back */
    OT_SLICED,     /* last dim taken with step 2 from offset 1 of a bigger tensor */
    OT_EXPANDED,   /* dim 0 of size 1 expanded (stride 0) */
    OT_ON_CPU,     /* lives on the cpu whatever the group's device (PyTorch's cpu 0-dim rule) */
} ot_layout;

/* Which dtype an input gets in a group. */
typedef enum ot_role {
    OT_ROW,   /* the group's dtype (the 2nd OT_ROW input takes the 2nd dtype of a mixed pair) */
    OT_INDEX, /* int64 in [0, idx_hi) */
    OT_MASK,  /* bool */
} ot_role;

/* Value ranges (floats | integers; unsigned ranges are shifted to start at 0). */
typedef enum ot_domain {
    OT_D_ANY,     /* [-3, 3] | [-5, 5] */
    OT_D_POS,     /* [0.1, 3] | [1, 5] */
    OT_D_NONZERO, /* +-[0.25, 3] | +-[1, 5] */
    OT_D_NONNEG,  /* [0, 3] | [0, 5] */
    OT_D_SMALL,   /* [-2, 2] | [0, 3]: exponents */
    OT_D_PROD,    /* [0.5, 1.5] | +-[1, 2]: products that stay finite and exact */
    OT_D_CLASS,   /* [0, 4] integral: class labels */
    OT_D_UNIT,    /* [-0.99, 0.99] | [-1, 1]: asin, acos, atanh */
    OT_D_GE1,     /* [1, 4] | [1, 5]: acosh */
} ot_domain;

typedef struct ot_in {
    ts_shape shape;
    ot_layout layout;
    ot_role role;
    int64_t idx_hi;
} ot_in;

/* Op parameters a sample supplies; the row's apply and ref read the ones they need. */
typedef struct ot_args {
    int n_in;
    int dim;
    ts_dims dims; /* reductions: the reduced dims (n == 0: all), always filled for the ref */
    bool keepdim;
    double s, s2; /* scalar operand, clamp bounds (NAN = none), fill value, correction */
    int64_t n;    /* one_hot: num_classes */
} ot_args;

typedef struct ot_sample {
    const char *label;
    int n_in;
    ot_in in[OT_MAX_IN];
    ot_args args;
    bool specials; /* inputs hold NaN, +-inf, +-0 (float groups of rows that opt in) */
    bool large;    /* big enough for the kernels' parallel paths */
} ot_sample;

/* Which set of samples a row runs. */
typedef enum ot_samples {
    OT_S_UNARY,
    OT_S_BINARY,
    OT_S_SCALAR, /* unary layouts x the row's scalars */
    OT_S_CLAMP,
    OT_S_WHERE,
    OT_S_MASKED_FILL,
    OT_S_REDUCE_ALL,
    OT_S_REDUCE_DIM,
    OT_S_REDUCE_DIMS,
    OT_S_MM,
    OT_S_BMM,
    OT_S_MATMUL,
    OT_S_CAT,
    OT_S_STACK,
    OT_S_INDEX_SELECT,
    OT_S_GATHER,
    OT_S_SCATTER_ADD,
    OT_S_SOFTMAX,
    OT_S_ONE_HOT,
} ot_samples;

/* The result dtype PyTorch gives. */
typedef enum ot_out_rule {
    OT_OUT_SAME,          /* the first input's dtype */
    OT_OUT_FLOAT,         /* float inputs keep theirs; integer and bool give float32 */
    OT_OUT_BOOL,          /* bool */
    OT_OUT_I64,           /* int64 */
    OT_OUT_SUM,           /* sum/prod: float keeps, integer and bool give int64 */
    OT_OUT_PROMOTE,       /* torch.result_type of the OT_ROW inputs and the weak scalar args.s */
    OT_OUT_PROMOTE_FLOAT, /* the same, then integer/bool -> float32 (true division) */
} ot_out_rule;

/* What a reference sees: every input as a contiguous row-major f64 array (after rounding to the
 * group's dtype, read back from the tensor the op gets). */
typedef struct ot_ref_in {
    int n;
    ts_shape shape[OT_MAX_IN];
    const double *v[OT_MAX_IN];
    ts_dtype dtype[OT_MAX_IN];
} ot_ref_in;

typedef struct ot_ref_out {
    ts_shape shape;
    double *v; /* room for cap elements */
    int64_t cap;
    ts_dtype dtype; /* the expected output dtype (set by the harness before the call) */
    /* Extra absolute tolerance per element, for results whose rounding depends on an order the
     * op leaves free (scatter_add's atomic adds on CUDA); zeroed room for cap elements or NULL. */
    double *tol;
} ot_ref_out;

typedef struct ot_row ot_row;
struct ot_row {
    const char *name;
    int arity; /* tensor inputs; -1 = given by the sample (cat, stack) */
    ts_tensor *(*apply)(ts_tensor **in, const ot_args *a);
    /* Fills out->shape and out->v; returns false when PyTorch rejects this input (the op must
     * then return NULL with an error), e.g. max over an empty dim. */
    bool (*ref)(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
    int op;           /* selects the math inside the shared references (ts_unary_op, ...) */
    unsigned dtypes;  /* OT_BIT()s of the dtypes the op supports */
    unsigned rejects; /* dtypes PyTorch refuses: the op must return NULL with an error */
    ot_out_rule out;
    ot_samples samples;
    ot_domain domain[OT_MAX_IN];
    double scalars[3]; /* OT_S_SCALAR: the scalars tried (nscalars of them) */
    int nscalars;
    bool specials; /* also run NaN / inf / signed-zero inputs */
    /* In place: the op must return in[0] itself holding the result; samples where in[0] is an
     * expanded view or would change shape are skipped. */
    bool inplace;
    /* ---- gradcheck (DESIGN §9.1: f64, eps 1e-6, atol 1e-5, rtol 1e-3): RESERVED for the
     * autograd issue. The harness does not run it yet; it will differentiate the inputs set in
     * this mask with ts_gradcheck once the engine lands. */
    unsigned grad_inputs;
};

/* Runs every row on every available device (cpu, sim:0, cuda:0) and dtype; prints one line per
 * (op, device, dtype) group and "N passed, N failed". Returns the exit code. */
int ot_run_table(const ot_row *rows, int n);

/* ---- the sample sets (op_samples.c): fills out with up to max samples, returns the count */
#define OT_MAX_SAMPLES 48
int ot_make_samples(const ot_row *row, ot_sample *out, int max);
/* The bigger shape whose view gives in's layout. */
ts_shape ot_base_shape(const ot_in *in);

/* ---- f64 references (op_ref.c), shared by the rows */
bool ot_ref_unary(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_binary(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_binary_scalar(const ot_row *row, const ot_ref_in *in, const ot_args *a,
                          ot_ref_out *out);
/* alpha = row->scalars[0] */
bool ot_ref_add_alpha(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_clamp(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_where(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_masked_fill(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
/* op: ts_reduce_op; OT_REF_MAX_IDX / OT_REF_MIN_IDX select torch.max/min(dim)'s indices */
#define OT_REF_MAX_IDX 100
#define OT_REF_MIN_IDX 101
bool ot_ref_reduce(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_matmul(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_cat(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_stack(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_index_select(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_gather(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_scatter_add(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_softmax(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);
bool ot_ref_one_hot(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out);

/* ---- helpers shared by the harness and the references */
int64_t ot_numel(ts_shape s);
/* numpy broadcasting; false when the shapes do not broadcast */
bool ot_broadcast(ts_shape a, ts_shape b, ts_shape *out);
/* Offset into a contiguous array of shape `s` for an index of the broadcast shape `to`. */
int64_t ot_bcast_offset(ts_shape s, ts_shape to, const int64_t *idx);
/* Advances a row-major multi-index over shape s; false after the last one. */
bool ot_next_index(ts_shape s, int64_t *idx);
/* The value a double becomes when stored in dt (integers wrap like C casts through int64). */
double ot_cast(double v, ts_dtype dt);
/* torch.result_type: tensors (dtype, ndim) plus optionally one weak Python scalar. */
ts_dtype ot_result_type(int n, const ts_dtype *dts, const int *ndims, bool has_scalar,
                        double scalar);
ts_dtype ot_promote(ts_dtype a, ts_dtype b); /* torch.promote_types, written independently */
/* f16 / bf16 bit conversions (round to nearest even), independent of the library's */
uint16_t ot_f16_from(double v);
double ot_f16_to(uint16_t h);
uint16_t ot_bf16_from(double v);
double ot_bf16_to(uint16_t h);
/* Raw element <-> double for every dtype. */
void ot_store(void *p, ts_dtype dt, double v);
double ot_load(const void *p, ts_dtype dt);

#endif /* TS_OP_TABLE_H */
