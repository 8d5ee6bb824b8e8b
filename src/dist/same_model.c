/* same_model.c — what DDP and FSDP check when they wrap a model: the group they run on, and that
 * every rank wraps the same model (parameter count, dtypes and shapes in order: PyTorch's
 * _verify_param_shape_across_processes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

/* One parameter as every rank describes it to the others. */
typedef struct param_desc {
    int32_t dtype, ndim;
    int64_t dims[TS_MAX_DIMS];
} param_desc;

static const char *desc_str(const param_desc *p) {
    ts_shape s = {.ndim = p->ndim};
    for (int i = 0; i < p->ndim && i < TS_MAX_DIMS; i++) s.dims[i] = p->dims[i];
    char *buf = tsi_fmt_buf();
    snprintf(buf, TSI_FMT_BUF_LEN, "%s %s", ts_dtype_name((ts_dtype)p->dtype), tsi_shape_str(s));
    return buf;
}

bool tsi_dist_verify_same_params(const char *op, const char *who, ts_tensor *const *params,
                                 const char *const *names, int n, ts_dist_group *g) {
    int w = ts_dist_group_size(g);
    int64_t *counts = malloc((size_t)w * sizeof *counts);
    int64_t mine = n;
    /* every buffer first, then the ranks' agreement: a rank that cannot take part says so instead
     * of leaving the others in the exchange (one with n parameters allocates for n everywhere;
     * another count is caught by the first exchange) */
    param_desc *all = calloc((size_t)w * (size_t)(n ? n : 1), sizeof *all);
    param_desc *own = calloc((size_t)(n ? n : 1), sizeof *own);
    bool ok = counts && all && own;
    if (!ok)
        tsi_error_set(TS_ERR_OOM,
                      "%s: rank %d ran out of host memory checking that every rank holds the "
                      "same model",
                      op, ts_dist_rank());
    if (!tsi_dist_agree(NULL, ok, g) ||
        tsi_dist_all_gather_bytes(&mine, sizeof mine, counts, g) != TS_OK) {
        free(counts);
        free(all);
        free(own);
        return false;
    }
    for (int r = 1; ok && r < w; r++)
        if (counts[r] != counts[0])
            ok = tsi_error_set(TS_ERR_DIST,
                               "%s: %s expects same model across all ranks, but rank %d has %lld "
                               "params, while rank %d has inconsistent %lld params",
                               op, who, tsi_dist_group_world_rank(g, r), (long long)counts[r],
                               tsi_dist_group_world_rank(g, 0), (long long)counts[0]) == TS_OK;
    free(counts);
    if (!ok || n == 0) {
        free(all);
        free(own);
        return ok;
    }
    for (int i = 0; ok && i < n; i++) {
        ts_tensor *p = params[i];
        own[i].dtype = (int32_t)p->dtype;
        own[i].ndim = p->shape.ndim;
        memcpy(own[i].dims, p->shape.dims, sizeof own[i].dims);
    }
    ok = ok && tsi_dist_all_gather_bytes(own, (size_t)n * sizeof *own, all, g) == TS_OK;
    for (int r = 1; ok && r < w; r++)
        for (int i = 0; ok && i < n; i++) {
            const param_desc *a = &all[(size_t)r * (size_t)n + (size_t)i], *b = &all[i];
            if (memcmp(a, b, sizeof *a) == 0) continue;
            ok = false;
            tsi_error_set(TS_ERR_DIST,
                          "%s: %s expects same model across all ranks, but parameter %d (%s) is "
                          "%s on rank %d and %s on rank %d",
                          op, who, i, names[i], desc_str(a), tsi_dist_group_world_rank(g, r),
                          desc_str(b), tsi_dist_group_world_rank(g, 0));
        }
    free(all);
    free(own);
    return ok;
}

int tsi_dist_wrap_group(const char *op, ts_dist_group *g) {
    const int world = ts_dist_group_size(g);
    if (ts_error()) return 0;
    if (world < 1 || ts_dist_group_rank(g) < 0) {
        tsi_error_set(TS_ERR_ARG, "%s: this process (rank %d) is not a member of the group", op,
                      ts_dist_rank());
        return 0;
    }
    return world;
}

ts_module *tsi_dist_wrapper_of(const char *op, ts_module *m, ts_forward_fn forward,
                               const char *what) {
    if (!m) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
        return NULL;
    }
    if (m->forward != forward)
        return tsi_error_set(TS_ERR_ARG, "%s: %s is not a %s", op, m->type_name, what), NULL;
    return m;
}
