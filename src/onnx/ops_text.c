/* ops_text.c — ONNX's TfIdfVectorizer on integer tokens (Tessera has no strings): each n-gram of
 * the pool is compared with every window of the input on the device (windows of its length at
 * each skip distance), the matches counted per row, weighted by the mode (TF, IDF, TFIDF) and
 * scattered into the n-gram's output column. A pool holding an n-gram twice is refused. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static const char *const tfidf_modes[] = {"TF", "IDF", "TFIDF"};

/* output columns at most: far past a real vocabulary, and a hostile index cannot ask for 2^31 */
#define TFIDF_MAX_WIDTH (1 << 24)

/* One n-gram of the pool: its length and its first token in pool_int64s. */
typedef struct ngram {
    int len;
    int64_t start;
} ngram;

/* The pool read from the attributes. */
typedef struct pool {
    const int64_t *tokens, *counts, *indexes;
    int n_tokens, n_levels, n_grams;
    int64_t min_len, max_len, max_skip, width; /* width: the output's columns */
} pool;

static bool read_pool(const tso_node *n, pool *p) {
    p->n_tokens = tso_attr_ints(n, "pool_int64s", &p->tokens);
    p->n_levels = tso_attr_ints(n, "ngram_counts", &p->counts);
    int n_idx = tso_attr_ints(n, "ngram_indexes", &p->indexes);
    p->min_len = tso_attr_int(n, "min_gram_length", 0);
    p->max_len = tso_attr_int(n, "max_gram_length", 0);
    p->max_skip = tso_attr_int(n, "max_skip_count", -1);
    if (tso_attr(n, "pool_strings"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "pool_strings: Tessera has no string tensors");
    if (p->n_tokens < 0 || p->n_levels < 1 || n_idx < 0)
        return tso_fail(n, TS_ERR_FORMAT,
                        "pool_int64s, ngram_counts and ngram_indexes are required");
    if (p->min_len < 1 || p->max_len < p->min_len || p->max_skip < 0)
        return tso_fail(n, TS_ERR_FORMAT,
                        "needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, "
                        "got %lld, %lld and %lld",
                        (long long)p->min_len, (long long)p->max_len, (long long)p->max_skip);
    p->n_grams = 0;
    for (int i = 0; i < p->n_levels; i++) {
        int64_t end = i + 1 < p->n_levels ? p->counts[i + 1] : p->n_tokens;
        if (p->counts[i] < 0 || end < p->counts[i] || end > p->n_tokens ||
            (end - p->counts[i]) % (i + 1))
            return tso_fail(n, TS_ERR_FORMAT,
                            "ngram_counts[%d] = %lld does not start a run of %d-grams in the "
                            "pool of %d tokens",
                            i, (long long)p->counts[i], i + 1, p->n_tokens);
        p->n_grams += (int)((end - p->counts[i]) / (i + 1));
    }
    if (n_idx != p->n_grams)
        return tso_fail(n, TS_ERR_FORMAT, "ngram_indexes has %d values for %d n-grams", n_idx,
                        p->n_grams);
    p->width = 0;
    for (int i = 0; i < n_idx; i++) {
        if (p->indexes[i] < 0 || p->indexes[i] >= TFIDF_MAX_WIDTH)
            return tso_fail(n, TS_ERR_FORMAT, "ngram_indexes[%d] = %lld is out of [0, %d)", i,
                            (long long)p->indexes[i], TFIDF_MAX_WIDTH);
        if (p->indexes[i] + 1 > p->width) p->width = p->indexes[i] + 1;
    }
    return true;
}

/* Each n-gram its own output column: two sharing one would leave its weight undefined. */
static bool check_columns(const tso_node *n, const pool *p) {
    uint8_t *used = calloc((size_t)p->width + 1, 1);
    if (!used) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    int twice = -1;
    for (int i = 0; i < p->n_grams && twice < 0; i++)
        if (used[p->indexes[i]]++) twice = i;
    free(used);
    return twice < 0 || tso_fail(n, TS_ERR_FORMAT,
                                 "ngram_indexes[%d] = %lld: two n-grams share an output column",
                                 twice, (long long)p->indexes[twice]);
}

/* ------------------------------------------------------------------ repeated n-grams */
/* a before b: by length, then tokens */
static bool gram_before(const int64_t *tokens, const ngram *a, const ngram *b) {
    if (a->len != b->len) return a->len < b->len;
    for (int j = 0; j < a->len; j++)
        if (tokens[a->start + j] != tokens[b->start + j])
            return tokens[a->start + j] < tokens[b->start + j];
    return false;
}

/* bottom-up merge sort of g[0..count-1] (tmp: as many); qsort has no context argument */
static void sort_grams(const int64_t *tokens, ngram *g, ngram *tmp, int count) {
    for (int w = 1; w < count; w *= 2) {
        for (int lo = 0; lo < count; lo += 2 * w) {
            int mid = lo + w < count ? lo + w : count, hi = lo + 2 * w < count ? lo + 2 * w : count;
            int i = lo, j = mid, k = lo;
            while (i < mid || j < hi)
                tmp[k++] =
                    j >= hi || (i < mid && !gram_before(tokens, &g[j], &g[i])) ? g[i++] : g[j++];
        }
        memcpy(g, tmp, (size_t)count * sizeof *g);
    }
}

/* An n-gram the pool holds twice has no single output column (ONNX leaves it undefined; its
 * reference keeps the last, onnxruntime refuses the model): refused. Only the lengths
 * min_gram_length..max_gram_length count, the ones the operator looks for. */
static bool check_unique(const tso_node *n, const pool *p) {
    ngram *g = malloc(((size_t)p->n_grams + 1) * 2 * sizeof *g);
    if (!g) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    int k = 0;
    for (int i = 0; i < p->n_levels; i++) {
        int64_t end = i + 1 < p->n_levels ? p->counts[i + 1] : p->n_tokens;
        for (int64_t s = p->counts[i]; s < end && i + 1 >= p->min_len && i + 1 <= p->max_len;
             s += i + 1)
            g[k++] = (ngram){.len = i + 1, .start = s};
    }
    sort_grams(p->tokens, g, g + p->n_grams + 1, k);
    int dup = -1;
    for (int j = 0; j + 1 < k && dup < 0; j++)
        if (!gram_before(p->tokens, &g[j], &g[j + 1])) dup = j;
    bool ok = dup < 0 ||
              tso_fail(n, TS_ERR_FORMAT,
                       "the pool holds a %d-gram twice (starting at pool_int64s[%lld] "
                       "= %lld): it would have two output columns",
                       g[dup].len, (long long)g[dup].start, (long long)p->tokens[g[dup].start]);
    free(g);
    return ok;
}

static bool check_tfidf(const tso_node *n) {
    pool p;
    if (!read_pool(n, &p) || tso_attr_choice(n, "mode", "", tfidf_modes, 3) < 0 ||
        !check_columns(n, &p) || !check_unique(n, &p))
        return false;
    const float *w;
    int nw = tso_attr_floats(n, "weights", &w);
    if (nw >= 0 && nw != p.n_grams)
        return tso_fail(n, TS_ERR_FORMAT, "weights has %d values for %d n-grams", nw, p.n_grams);
    return true;
}

/* ------------------------------------------------------------------ counting */
/* how often each of the n-grams grams [m, len] occurs in the rows of x [B, N] with its tokens
 * skip apart: [B, m] float32 */
static ts_tensor *match_counts(ts_tensor *x, ts_tensor *grams, int len, int64_t skip) {
    int64_t windows = ts_size(x, 1) - (int64_t)(len - 1) * skip, m = ts_size(grams, 0);
    if (windows <= 0) return ts_zeros(TS_SHAPE(ts_size(x, 0), m), tso_opts_of(x, TS_F32));
    ts_opts i64 = tso_opts_of(x, TS_I64);
    ts_tensor *idx = ts_add(
        ts_reshape(ts_arange(0, (double)windows, 1, i64), TS_SHAPE(windows, 1)),
        ts_reshape(ts_arange(0, (double)len * (double)skip, (double)skip, i64), TS_SHAPE(1, len)));
    ts_tensor *w = ts_index_select(x, 1, ts_reshape(idx, TS_SHAPE(windows * len)));
    w = ts_reshape(w, TS_SHAPE(ts_size(x, 0), windows, 1, len));
    ts_tensor *eq = ts_eq(w, ts_reshape(grams, TS_SHAPE(1, 1, m, len)));
    /* 1 where every token of the window matches */
    ts_tensor *all = ts_prod_dim(ts_to_dtype(eq, TS_F32), 3, false);
    return ts_sum_dim(all, 1, false);
}

/* TF: the counts; IDF: the n-gram's weight (or 1) where it occurs; TFIDF: weight * count. counts
 * [B, m] of the n-grams id0 ..; weights are per n-gram, in pool order (ONNX's definition). */
static ts_tensor *weigh(const tso_node *n, ts_tensor *counts, int id0) {
    int mode = tso_attr_choice(n, "mode", "", tfidf_modes, 3);
    const float *w;
    int nw = tso_attr_floats(n, "weights", &w);
    if (mode == 0 || !counts) return counts;
    if (mode == 1) counts = ts_to_dtype(ts_gt_scalar(counts, 0), TS_F32);
    if (nw <= 0) return counts;
    int64_t m = ts_size(counts, 1);
    return ts_mul(counts, ts_tensor_f32(TS_SHAPE(m), w + id0, tso_opts_of(counts, TS_F32)));
}

/* Adds the weighed counts of the m n-grams of length len starting at pool_int64s[start] (n-grams
 * id0 .., output columns ngram_indexes[id0 ..]) into y [B, width]. */
static ts_tensor *count_level(const tso_node *n, ts_tensor *y, ts_tensor *x, const pool *p, int len,
                              int64_t start, int m, int id0) {
    ts_opts i64 = tso_opts_of(x, TS_I64);
    ts_tensor *grams = ts_from_data(TS_SHAPE(m, len), TS_I64, p->tokens + start, i64);
    ts_tensor *cols = ts_from_data(TS_SHAPE(1, m), TS_I64, p->indexes + id0, i64);
    cols = ts_contiguous(ts_expand(cols, TS_SHAPE(ts_size(x, 0), m)));
    /* unigrams once; longer n-grams at every skip distance 1 .. max_skip_count + 1 */
    int64_t skips = len == 1 ? 1 : p->max_skip + 1;
    ts_tensor *counts = match_counts(x, grams, len, 1);
    for (int64_t s = 2; counts && s <= skips; s++)
        counts = ts_add(counts, match_counts(x, grams, len, s));
    return ts_scatter_add(y, 1, cols, weigh(n, counts, id0));
}

/* the weighed counts of the pool's n-grams of lengths min_gram_length..max_gram_length in each row
 * of x [B, N]: [B, width] float32 (0 in the columns of no such n-gram) */
static ts_tensor *count_all(const tso_node *n, ts_tensor *x, const pool *p) {
    ts_tensor *y = ts_zeros(TS_SHAPE(ts_size(x, 0), p->width), tso_opts_of(x, TS_F32));
    for (int i = 0, id = 0; y && i < p->n_levels; i++) {
        int64_t end = i + 1 < p->n_levels ? p->counts[i + 1] : p->n_tokens;
        int m = (int)((end - p->counts[i]) / (i + 1));
        if (m && i + 1 >= p->min_len && i + 1 <= p->max_len)
            y = count_level(n, y, x, p, i + 1, p->counts[i], m, id);
        id += m;
    }
    return y;
}

TSO_RUN(run_tfidf) {
    (void)c;
    ts_tensor *x = in[0];
    ts_dtype dt = ts_dtype_of(x);
    if (dt != TS_I64 && dt != TS_I32)
        return tso_fail(n, TS_ERR_DTYPE, "X must be int32 or int64 tokens, got %s", tsi_desc(x));
    if (ts_ndim(x) != 1 && ts_ndim(x) != 2)
        return tso_fail(n, TS_ERR_SHAPE, "X must be [N] or [B, N], got %s", tsi_desc(x));
    pool p;
    if (!read_pool(n, &p)) return false;
    ts_tensor *rows = ts_to_dtype(ts_ndim(x) == 1 ? ts_unsqueeze(x, 0) : x, TS_I64);
    ts_tensor *y = rows ? count_all(n, rows, &p) : NULL;
    out[0] = y && ts_ndim(x) == 1 ? ts_squeeze_dim(y, 0) : y;
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ the table */
const tso_op_def tso_ops_text[] = {
    {"TfIdfVectorizer", 9, run_tfidf, check_tfidf, false},
    {NULL, 0, NULL, NULL, false},
};
