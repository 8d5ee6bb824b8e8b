/* mpi_ops.c — Tessera dtypes and reduce ops as MPI datatypes and MPI_Ops: f16 and bf16 travel as a
 * 2-byte type and reduce through user ops that compute in float with the library's one conversion
 * (backend/kernel_math.h); bool reduces as logical or (sum, max) and logical and (product, min). */
#include <stdio.h>

#include "backend/kernel_math.h"
#include "dist/dist_impl.h"

const char *tsd_reduce_op_name(ts_dist_reduce_op op) {
    switch (op) {
    case TS_DIST_SUM:
        return "sum";
    case TS_DIST_AVG:
        return "avg";
    case TS_DIST_PRODUCT:
        return "product";
    case TS_DIST_MIN:
        return "min";
    case TS_DIST_MAX:
        return "max";
    }
    return "?";
}

const char *tsd_kind_name(tsd_kind k) {
    switch (k) {
    case TSD_ALL_REDUCE:
        return "all_reduce";
    case TSD_BROADCAST:
        return "broadcast";
    case TSD_REDUCE:
        return "reduce";
    case TSD_ALL_GATHER:
        return "all_gather";
    case TSD_REDUCE_SCATTER:
        return "reduce_scatter";
    case TSD_SEND:
        return "send";
    case TSD_RECV:
        return "recv";
    case TSD_BARRIER:
        return "barrier";
    case TSD_GATHER_BYTES:
        return "all_gather_bytes";
    case TSD_NEW_GROUP:
        return "new_group";
    case TSD_KIND_COUNT:
        break;
    }
    return "?";
}

#ifdef TS_HAVE_MPI

static MPI_Datatype half_type = MPI_DATATYPE_NULL;
/* [0] f16, [1] bf16; [sum, product, min, max] */
static MPI_Op half_ops[2][4];
static bool ops_made;

/* a, b: the operands in float; NaN propagates through min and max as in torch.minimum */
#define HALF_OP(NAME, TO, FROM, EXPR)                                                              \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {                          \
        (void)dt;                                                                                  \
        const uint16_t *x = in;                                                                    \
        uint16_t *y = inout;                                                                       \
        for (int i = 0; i < *len; i++) {                                                           \
            float a = TO(x[i]), b = TO(y[i]);                                                      \
            y[i] = FROM(EXPR);                                                                     \
        }                                                                                          \
    }
#define MIN_EXPR (a != a || b != b ? a + b : (a < b ? a : b))
#define MAX_EXPR (a != a || b != b ? a + b : (a > b ? a : b))
HALF_OP(f16_sum, ts_f16_to_f32, ts_f32_to_f16, a + b)
HALF_OP(f16_prod, ts_f16_to_f32, ts_f32_to_f16, a *b)
HALF_OP(f16_min, ts_f16_to_f32, ts_f32_to_f16, MIN_EXPR)
HALF_OP(f16_max, ts_f16_to_f32, ts_f32_to_f16, MAX_EXPR)
HALF_OP(bf16_sum, ts_bf16_to_f32, ts_f32_to_bf16, a + b)
HALF_OP(bf16_prod, ts_bf16_to_f32, ts_f32_to_bf16, a *b)
HALF_OP(bf16_min, ts_bf16_to_f32, ts_f32_to_bf16, MIN_EXPR)
HALF_OP(bf16_max, ts_bf16_to_f32, ts_f32_to_bf16, MAX_EXPR)

bool tsd_mpi_ops_init(void) {
    if (ops_made) return true;
    if (MPI_Type_contiguous(2, MPI_BYTE, &half_type) != MPI_SUCCESS ||
        MPI_Type_commit(&half_type) != MPI_SUCCESS)
        return false;
    MPI_User_function *fns[2][4] = {{f16_sum, f16_prod, f16_min, f16_max},
                                    {bf16_sum, bf16_prod, bf16_min, bf16_max}};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++)
            if (MPI_Op_create(fns[d][k], 1, &half_ops[d][k]) != MPI_SUCCESS) return false;
    ops_made = true;
    return true;
}

void tsd_mpi_ops_free(void) {
    if (!ops_made) return;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++) MPI_Op_free(&half_ops[d][k]);
    MPI_Type_free(&half_type);
    ops_made = false;
}

MPI_Datatype tsd_mpi_type(ts_dtype dt) {
    switch (dt) {
    case TS_F32:
        return MPI_FLOAT;
    case TS_F64:
        return MPI_DOUBLE;
    case TS_F16:
    case TS_BF16:
        return half_type;
    case TS_I64:
        return MPI_INT64_T;
    case TS_I32:
        return MPI_INT32_T;
    case TS_U8:
        return MPI_UINT8_T;
    case TS_I8:
        return MPI_INT8_T;
    case TS_I16:
        return MPI_INT16_T;
    case TS_U16:
        return MPI_UINT16_T;
    case TS_U32:
        return MPI_UINT32_T;
    case TS_U64:
        return MPI_UINT64_T;
    case TS_BOOL:
        return MPI_C_BOOL;
    default:
        return MPI_BYTE;
    }
}

MPI_Op tsd_mpi_op(ts_dist_reduce_op op, ts_dtype dt) {
    int k = op == TS_DIST_SUM || op == TS_DIST_AVG ? 0
            : op == TS_DIST_PRODUCT                ? 1
            : op == TS_DIST_MIN                    ? 2
                                                   : 3;
    if (dt == TS_F16 || dt == TS_BF16) return half_ops[dt == TS_BF16][k];
    if (dt == TS_BOOL) return k == 0 || k == 3 ? MPI_LOR : MPI_LAND; /* as PyTorch and NCCL */
    static const MPI_Op builtin[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    return builtin[k];
}

void tsd_mpi_fail(ts_dist_work *w, const char *call, int rc) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", rc);
    tsd_work_fail(w, TS_ERR_DIST, "%s #%llu on %s: %s failed: %s", tsd_kind_name(w->kind),
                  (unsigned long long)w->seq, w->g->name, call, s);
}

#endif /* TS_HAVE_MPI */
