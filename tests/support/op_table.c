/* op_table.c — the harness runner: builds each sample on every device and dtype, compares with f64.
 */
#include "op_table.h"
#include "tessera/complex.h"
#include "tessera/logic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ts_test.h"

/* Under AddressSanitizer (make asan, CI's second pass over the suite) the large samples run on the
 * cpu alone: sim runs the same CPU kernels (sim_backend.c installs them), so there they repeat the
 * cpu's kernel paths on the same shapes, while sim's own code (guard bytes, accounting, copies)
 * does not depend on the size and runs on every other sample. They were 45% of the test's time
 * under ASan (141 -> 78 CPU-seconds); the Release suite still runs every sample on every device. */
#if defined(__SANITIZE_ADDRESS__)
#define OT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OT_SANITIZED 1
#endif
#endif
#ifdef OT_SANITIZED
#define OT_LARGE_ON_SIM false
#else
#define OT_LARGE_ON_SIM true
#endif

static const ts_dtype all_dtypes[] = {TS_F32, TS_F64, TS_F16, TS_BF16,
                                      TS_I64, TS_I32, TS_U8,  TS_BOOL};
#define N_DTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* Mixed pairs exercise type promotion in the binary rows (both must be supported by the row). */
static const ts_dtype mixed_pairs[][2] = {
    {TS_I64, TS_F32},  {TS_F32, TS_I64}, {TS_I32, TS_F64},  {TS_U8, TS_I64},
    {TS_BOOL, TS_F32}, {TS_F16, TS_F32}, {TS_BF16, TS_F16}, {TS_U8, TS_I32},
    {TS_BOOL, TS_I32}, {TS_I32, TS_F16}, {TS_BF16, TS_F64}, {TS_I64, TS_BOOL},
};

static bool is_float(ts_dtype d) {
    return d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16;
}

static size_t elsize(ts_dtype d) {
    switch (d) {
    case TS_F64:
    case TS_I64:
        return 8;
    case TS_F32:
    case TS_I32:
        return 4;
    case TS_F16:
    case TS_BF16:
        return 2;
    default:
        return 1;
    }
}

/* ------------------------------------------------------------------ inputs */
static uint64_t rng_state;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }
static void rng_seed(const char *s, uint64_t salt) {
    uint64_t h = 1469598103934665603ull ^ salt;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    rng_state = h;
}

static const double special_values[] = {NAN,  INFINITY, -INFINITY, 0.0,  -0.0, 1.0,
                                        -1.0, 0.5,      2.0,       -2.5, 3.0,  1e-3};

static double gen_value(ot_domain d, ts_dtype dt, bool special, int64_t i) {
    if (dt == TS_BOOL) return (double)(rng_next() & 1);
    bool fl = is_float(dt);
    if (special && fl) return special_values[i % 12];
    double lo = fl ? -3 : -5, hi = fl ? 3 : 5;
    bool flip = false;
    switch (d) {
    case OT_D_ANY:
        break;
    case OT_D_POS:
        lo = fl ? 0.1 : 1, hi = fl ? 3 : 5;
        break;
    case OT_D_NONZERO:
        lo = fl ? 0.25 : 1, hi = fl ? 3 : 5, flip = true;
        break;
    case OT_D_NONNEG:
        lo = 0, hi = fl ? 3 : 5;
        break;
    case OT_D_SMALL:
        lo = fl ? -2 : 0, hi = fl ? 2 : 3;
        break;
    case OT_D_PROD:
        lo = fl ? 0.5 : 1, hi = fl ? 1.5 : 2, flip = !fl;
        break;
    case OT_D_CLASS:
        return floor(5 * rng_uniform());
    case OT_D_UNIT:
        lo = fl ? -0.99 : -1, hi = fl ? 0.99 : 1;
        break;
    case OT_D_GE1:
        lo = 1, hi = fl ? 4 : 5;
        break;
    }
    if (dt == TS_U8) {
        if (lo < 0) hi -= lo, lo = 0;
        flip = false;
    }
    double u = rng_uniform(), v = fl ? lo + (hi - lo) * u : floor(lo + (hi - lo + 1) * u);
    if (flip && (rng_next() & 1)) v = -v;
    return v;
}

static ts_tensor *make_input(const ot_in *in, ts_dtype dt, ts_device dev, ot_domain dom,
                             bool special) {
    ts_shape base = ot_base_shape(in);
    int64_t n = ot_numel(base);
    size_t es = elsize(dt);
    char *buf = malloc(es * (size_t)n + 8);
    for (int64_t i = 0; i < n; i++) {
        double v = in->role == OT_INDEX  ? floor(rng_uniform() * (double)in->idx_hi)
                   : in->role == OT_MASK ? (double)(rng_next() & 1)
                                         : gen_value(dom, dt, special, i);
        ot_store(buf + (size_t)i * es, dt, v);
    }
    ts_device d = in->layout == OT_ON_CPU ? ts_cpu() : dev;
    ts_tensor *t = ts_from_data(base, dt, buf, (ts_opts){.dtype = dt, .device = d});
    free(buf);
    int nd = base.ndim;
    if (t && in->layout == OT_TRANSPOSED && nd >= 2) t = ts_transpose(t, nd - 2, nd - 1);
    if (t && in->layout == OT_SLICED && nd >= 1) t = ts_slice(t, nd - 1, 1, base.dims[nd - 1], 2);
    if (t && in->layout == OT_EXPANDED) t = ts_expand(t, in->shape);
    return t;
}

/* Reads any tensor (any device, any strides) as row-major doubles through the storage itself, so
 * the check does not rest on the library's own copy and cast kernels. */
static bool read_tensor(ts_tensor *t, double *out, char *why, size_t len) {
    int64_t n = ot_numel(t->shape);
    if (n == 0) return true;
    int64_t maxoff = t->offset;
    for (int i = 0; i < t->shape.ndim; i++) {
        if (t->strides[i] < 0) {
            snprintf(why, len, "negative stride");
            return false;
        }
        maxoff += (t->shape.dims[i] - 1) * t->strides[i];
    }
    size_t es = elsize(t->dtype), bytes = (size_t)(maxoff + 1) * es;
    ts_storage *st = t->storage;
    if (!st || bytes > st->nbytes) {
        snprintf(why, len, "view reaches byte %zu of a %zu-byte storage", bytes,
                 st ? st->nbytes : 0);
        return false;
    }
    char *host = malloc(bytes);
    st->be->copy_d2h(st->be, st->device.index, host, st->data, bytes);
    int64_t idx[TS_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = t->offset;
        for (int i = 0; i < t->shape.ndim; i++) off += idx[i] * t->strides[i];
        out[k] = ot_load(host + off * (int64_t)es, t->dtype);
        ot_next_index(t->shape, idx);
    }
    free(host);
    return true;
}

/* The whole storage behind t, as bytes (to prove what an op must leave alone was left alone). */
static unsigned char *snapshot(ts_tensor *t) {
    ts_storage *st = t->storage;
    unsigned char *h = malloc(st->nbytes + 1);
    if (st->nbytes) st->be->copy_d2h(st->be, st->device.index, h, st->data, st->nbytes);
    return h;
}

/* Which bytes of t's storage the view t covers. */
static unsigned char *footprint(ts_tensor *t) {
    size_t es = elsize(t->dtype);
    unsigned char *m = calloc(t->storage->nbytes + 1, 1);
    int64_t n = ot_numel(t->shape), idx[TS_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = t->offset;
        for (int i = 0; i < t->shape.ndim; i++) off += idx[i] * t->strides[i];
        if ((size_t)(off + 1) * es <= t->storage->nbytes) memset(m + off * (int64_t)es, 1, es);
        ot_next_index(t->shape, idx);
    }
    return m;
}

/* Inputs stay untouched; an in-place op writes only inside its view. */
static bool inputs_intact(const ot_row *row, ts_tensor **in, int n, unsigned char **before,
                          char *why, size_t len) {
    for (int i = 0; i < n; i++) {
        size_t nb = in[i]->storage->nbytes;
        unsigned char *after = snapshot(in[i]);
        unsigned char *mask = row->inplace && i == 0 ? footprint(in[i]) : NULL;
        size_t bad = nb;
        for (size_t k = 0; k < nb && bad == nb; k++)
            if (after[k] != before[i][k] && !(mask && mask[k])) bad = k;
        free(after);
        free(mask);
        if (bad != nb) {
            snprintf(why, len, "%s byte %zu of input %d's storage",
                     mask ? "wrote outside its view at" : "modified", bad, i);
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ expectations */
static ts_dtype expected_dtype(const ot_row *row, const ot_sample *s, const ts_dtype *dts) {
    ts_dtype d0 = dts[0];
    switch (row->out) {
    case OT_OUT_SAME:
        return d0;
    case OT_OUT_FLOAT:
        return is_float(d0) ? d0 : TS_F32;
    case OT_OUT_BOOL:
        return TS_BOOL;
    case OT_OUT_I64:
        return TS_I64;
    case OT_OUT_SUM:
        return is_float(d0) ? d0 : TS_I64;
    case OT_OUT_PROMOTE:
    case OT_OUT_PROMOTE_FLOAT: {
        ts_dtype ds[OT_MAX_IN];
        int nds[OT_MAX_IN], n = 0;
        for (int i = 0; i < s->n_in; i++)
            if (s->in[i].role == OT_ROW) ds[n] = dts[i], nds[n++] = s->in[i].shape.ndim;
        ts_dtype r = ot_result_type(n, ds, nds, row->samples == OT_S_SCALAR, s->args.s);
        return row->out == OT_OUT_PROMOTE_FLOAT && !is_float(r) ? TS_F32 : r;
    }
    }
    return d0;
}

static void tolerance(ts_dtype dt, double *rtol, double *atol) {
    switch (dt) {
    case TS_F32:
        *rtol = 1.3e-6, *atol = 1e-5;
        break;
    case TS_F64:
        *rtol = 1e-7, *atol = 1e-7;
        break;
    case TS_F16:
        *rtol = 1e-3, *atol = 1e-5;
        break;
    case TS_BF16:
        *rtol = 1.6e-2, *atol = 1e-5;
        break;
    default:
        *rtol = 0, *atol = 0;
        break;
    }
}

static bool close_enough(double got, double want, double rtol, double atol) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

static bool shape_eq(ts_shape a, ts_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dims[i] != b.dims[i]) return false;
    return true;
}

static const char *shape_str(ts_shape s, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s.ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ", %lld" : "%lld", (long long)s.dims[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

static void describe(const ot_sample *s, const ts_dtype *dts, char *buf, size_t len) {
    static const char *lay[] = {"", " transposed", " sliced", " expanded", " on cpu"};
    size_t k = (size_t)snprintf(buf, len, "%s:", s->label);
    for (int i = 0; i < s->n_in && k < len; i++) {
        char sb[64];
        k += (size_t)snprintf(buf + k, len - k, " %s%s %s", i ? "," : "",
                              shape_str(s->in[i].shape, sb, sizeof sb), ts_dtype_name(dts[i]));
        if (k < len) k += (size_t)snprintf(buf + k, len - k, "%s", lay[s->in[i].layout]);
    }
}

/* ------------------------------------------------------------------ one sample */
enum { SAMPLE_FAIL, SAMPLE_PASS, SAMPLE_SKIP };

static int run_sample(const ot_row *row, const ot_sample *s, ts_device dev, const ts_dtype *pair,
                      bool expect_reject, char *msg, size_t len) {
    ts_tensor *in[OT_MAX_IN] = {0};
    double *vals[OT_MAX_IN] = {0};
    unsigned char *before[OT_MAX_IN] = {0};
    ts_dtype dts[OT_MAX_IN];
    ot_ref_in ri = {.n = s->n_in};
    ot_ref_out ro = {0}, alt = {0}; /* alt: the reference with uncast operands */
    bool valid_alt = false;
    int res = SAMPLE_FAIL, nrow = 0;
    int64_t cap = 65536;
    char why[256] = "", desc[512];
    msg[0] = 0;
    ts_scope_begin();
    ts_error_clear();
    for (int i = 0; i < s->n_in; i++) {
        const ot_in *pi = &s->in[i];
        dts[i] = pi->role == OT_INDEX ? TS_I64 : pi->role == OT_MASK ? TS_BOOL : pair[nrow++ % 2];
    }
    describe(s, dts, desc, sizeof desc);
    for (int i = 0; i < s->n_in; i++) {
        in[i] = make_input(&s->in[i], dts[i], dev, row->domain[i], s->specials);
        if (!in[i] || !shape_eq(ts_shape_of(in[i]), s->in[i].shape)) {
            snprintf(msg, len, "%s: building input %d failed%s", desc, i, ts_test_error_str());
            goto done;
        }
        int64_t n = ot_numel(s->in[i].shape);
        vals[i] = malloc(sizeof(double) * (size_t)(n + 1));
        if (!read_tensor(in[i], vals[i], why, sizeof why)) {
            snprintf(msg, len, "%s: reading input %d: %s", desc, i, why);
            goto done;
        }
        ri.shape[i] = s->in[i].shape, ri.v[i] = vals[i], ri.dtype[i] = dts[i];
        cap += 4 * n;
    }
    ro.v = malloc(sizeof(double) * (size_t)cap);
    ro.tol = calloc((size_t)cap, sizeof(double));
    ro.cap = cap;
    ro.dtype = expected_dtype(row, s, dts);
    if (row->out == OT_OUT_PROMOTE || row->out == OT_OUT_PROMOTE_FLOAT) {
        /* PyTorch casts the operands to the common dtype before computing (a 0-dim int32 joining
         * a uint8 tensor wraps to uint8 first). A float 0-dim operand may instead enter the f32
         * "opmath" unrounded (PyTorch's cpu-scalar path), so for float results both count. */
        for (int i = 0; i < s->n_in; i++)
            if (s->in[i].role == OT_ROW && dts[i] != ro.dtype) {
                if (is_float(ro.dtype) && !valid_alt) {
                    alt.v = malloc(sizeof(double) * (size_t)cap);
                    alt.cap = cap, alt.dtype = ro.dtype;
                    valid_alt = !expect_reject && row->ref(row, &ri, &s->args, &alt);
                }
                for (int64_t k = 0; k < ot_numel(s->in[i].shape); k++)
                    vals[i][k] = ot_cast(vals[i][k], ro.dtype);
            }
    }
    bool valid = expect_reject ? false : row->ref(row, &ri, &s->args, &ro);
    if (valid && ot_numel(ro.shape) > cap) abort(); /* harness bug: grow cap */
    if (valid && row->inplace && !shape_eq(ro.shape, s->in[0].shape)) {
        res = SAMPLE_SKIP;
        goto done;
    }
    for (int i = 0; i < s->n_in; i++) before[i] = snapshot(in[i]);
    ts_error_clear();
    ts_tensor *out = row->apply(in, &s->args);
    if (!inputs_intact(row, in, s->n_in, before, why, sizeof why)) {
        snprintf(msg, len, "%s: %s", desc, why);
        goto done;
    }
    if (!valid) {
        if (out == NULL && ts_error() != TS_OK)
            res = SAMPLE_PASS;
        else
            snprintf(msg, len, "%s: expected an error (PyTorch rejects this), got %s", desc,
                     out ? "a result" : "NULL with no error recorded");
        goto done;
    }
    if (!out) {
        snprintf(msg, len, "%s: returned NULL%s", desc, ts_test_error_str());
        goto done;
    }
    if (ts_error() != TS_OK) {
        snprintf(msg, len, "%s: returned a tensor but recorded an error%s", desc,
                 ts_test_error_str());
        goto done;
    }
    if (row->inplace && out != in[0]) {
        snprintf(msg, len, "%s: in-place op did not return its input", desc);
        goto done;
    }
    for (int i = 0; i < s->n_in && !row->inplace; i++)
        if (ts_shares_storage(out, in[i]) && ot_numel(ro.shape) > 0) {
            snprintf(msg, len,
                     "%s: result shares storage with input %d (PyTorch returns a new tensor)", desc,
                     i);
            goto done;
        }
    if (!ts_device_equal(ts_device_of(out), dev)) {
        snprintf(msg, len, "%s: result on %s, expected %s", desc, ts_device_str(ts_device_of(out)),
                 ts_device_str(dev));
        goto done;
    }
    if (ts_dtype_of(out) != ro.dtype) {
        snprintf(msg, len, "%s: result dtype %s, PyTorch gives %s", desc,
                 ts_dtype_name(ts_dtype_of(out)), ts_dtype_name(ro.dtype));
        goto done;
    }
    if (!shape_eq(ts_shape_of(out), ro.shape)) {
        char a[64], b[64];
        snprintf(msg, len, "%s: result shape %s, expected %s", desc,
                 shape_str(ts_shape_of(out), a, sizeof a), shape_str(ro.shape, b, sizeof b));
        goto done;
    }
    int64_t n = ot_numel(ro.shape);
    double *got = malloc(sizeof(double) * (size_t)(n + 1));
    if (!read_tensor(out, got, why, sizeof why)) {
        snprintf(msg, len, "%s: reading the result: %s", desc, why);
        free(got);
        goto done;
    }
    double rtol, atol;
    tolerance(ro.dtype, &rtol, &atol);
    int64_t bad = 0, first = -1;
    for (int64_t k = 0; k < n; k++) {
        double want = ro.v[k], cast = ot_cast(want, ro.dtype);
        if (!is_float(ro.dtype) || (isinf(cast) && !isinf(want))) want = cast; /* overflow */
        ro.v[k] = want;
        const double atol_k = atol + (ro.tol ? ro.tol[k] : 0);
        if (close_enough(got[k], want, rtol, atol_k)) continue;
        if (valid_alt && close_enough(got[k], alt.v[k], rtol, atol_k)) continue;
        if (bad++ == 0) first = k;
    }
    if (bad) {
        snprintf(msg, len,
                 "%s: %lld of %lld elements differ; first at flat index %lld: got %.9g, "
                 "expected %.9g",
                 desc, (long long)bad, (long long)n, (long long)first, got[first], ro.v[first]);
    } else {
        res = SAMPLE_PASS;
    }
    free(got);
done:
    for (int i = 0; i < OT_MAX_IN; i++) free(vals[i]), free(before[i]);
    free(ro.v);
    free(ro.tol);
    free(alt.v);
    ts_scope_end();
    ts_error_clear();
    return res;
}

/* ------------------------------------------------------------------ groups */
/* TS_OT_FILTER=a,b,...: only the rows whose name contains one of the parts (debugging, and
 * tools/mutate.sh, which runs the rows of the ops a mutant can touch) */
static bool name_selected(const char *name) {
    const char *f = getenv("TS_OT_FILTER");
    if (!f || !*f) return true;
    for (const char *p = f; *p;) {
        size_t n = strcspn(p, ",");
        for (const char *q = name; n && strlen(q) >= n; q++)
            if (!strncmp(q, p, n)) return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static void run_group(const ot_row *row, ts_device dev, ts_dtype d0, ts_dtype d1, bool reject,
                      const ot_sample *samples, int ns) {
    ts_dtype pair[2] = {d0, d1};
    char name[48], msg[1024];
    if (d0 == d1)
        snprintf(name, sizeof name, "%s", ts_dtype_name(d0));
    else
        snprintf(name, sizeof name, "%s+%s", ts_dtype_name(d0), ts_dtype_name(d1));
    rng_seed(row->name, (uint64_t)d0 * 31 + (uint64_t)d1);
    int run = 0, failed = 0;
    for (int i = 0; i < ns; i++) {
        const ot_sample *s = &samples[i];
        if (s->specials && !is_float(d0)) continue;
        if (row->inplace && s->in[0].layout == OT_EXPANDED) continue;
        if (reject && (s->specials || s->large)) continue;
        if (s->large && dev.type == TS_SIM && !OT_LARGE_ON_SIM) continue;
        int r = run_sample(row, s, dev, pair, reject, msg, sizeof msg);
        if (r == SAMPLE_SKIP) continue;
        run++;
        if (r == SAMPLE_FAIL && failed++ < 3)
            printf("     %s %s %s: %s\n", row->name, ts_device_str(dev), name, msg);
        if (reject) break; /* one refused call is enough */
    }
    ts_test_record(failed == 0);
    printf("%-4s %-22s %-7s %-17s %d sample%s%s\n", failed ? "FAIL" : "ok", row->name,
           ts_device_str(dev), name, run, run == 1 ? "" : "s", reject ? " (must be rejected)" : "");
    if (failed) printf("     ^ %d of %d samples failed\n", failed, run);
    fflush(stdout);
}

/* ------------------------------------------------------------------ complex inputs */
/* Every row's op with its first plain sample's row inputs made complex (float32 values, imaginary
 * parts 0): the op must refuse with TS_ERR_DTYPE, or, if it has a complex path, give what it gives
 * for the float32 inputs (as the real parts of a complex result, imaginary parts 0). Nothing may
 * read the pairs as something else (src/core/complex_gate.c). */
static bool same_values(ts_tensor *got, ts_tensor *want, char *why, size_t len) {
    ts_tensor *g = got, *w = want;
    if (ts_dtype_is_complex(ts_dtype_of(g))) {
        ts_tensor *im = ts_imag(g);
        double a = im ? ts_item(ts_sum(ts_abs(ts_to_dtype(im, TS_F64)))) : NAN;
        if (!(a == 0)) return snprintf(why, len, "imaginary parts not 0 (sum |im| %g)", a), false;
        g = ts_real(g);
    }
    if (!g || !w || !shape_eq(ts_shape_of(g), ts_shape_of(w)))
        return snprintf(why, len, "shape differs from the float32 result"), false;
    ts_tensor *d = ts_sub(ts_to_dtype(g, TS_F64), ts_to_dtype(w, TS_F64));
    ts_tensor *m =
        d ? ts_logical_and(ts_ne(d, d), ts_eq(ts_to_dtype(w, TS_F64), ts_to_dtype(w, TS_F64)))
          : NULL;
    double worst = d && ts_numel(d) ? ts_item(ts_max(ts_abs(ts_nan_to_num(d, 0, 0, 0)))) : 0;
    double scale = d && ts_numel(d)
                       ? ts_item(ts_max(ts_abs(ts_nan_to_num(ts_to_dtype(w, TS_F64), 0, 0, 0))))
                       : 0;
    bool nan_new = m && ts_numel(m) && ts_item(ts_sum(ts_to_dtype(m, TS_F64))) > 0;
    if (!d || nan_new || !(worst <= 1e-6 * (1 + scale)))
        return snprintf(why, len, "differs from the float32 result by %g%s", worst,
                        nan_new ? " (new NaNs)" : ""),
               false;
    return true;
}

static void run_complex(const ot_row *row, ts_device dev, const ot_sample *samples, int ns) {
    const ot_sample *s = NULL;
    for (int i = 0; i < ns && !s; i++)
        if (!samples[i].specials && !samples[i].large && samples[i].in[0].layout == OT_CONTIG)
            s = &samples[i];
    if (!s) return;
    char why[256] = "";
    bool ok = false, refused = false;
    ts_scope_begin();
    rng_seed(row->name, 7);
    ts_tensor *real_in[OT_MAX_IN] = {0}, *cx_in[OT_MAX_IN] = {0};
    for (int i = 0; i < s->n_in; i++) {
        const ot_in *pi = &s->in[i];
        ts_dtype dt = pi->role == OT_INDEX ? TS_I64 : pi->role == OT_MASK ? TS_BOOL : TS_F32;
        real_in[i] = make_input(pi, dt, dev, row->domain[i], false);
        cx_in[i] = pi->role == OT_ROW ? ts_to_dtype(ts_clone(real_in[i]), TS_C64) : real_in[i];
    }
    ts_error_clear();
    ts_tensor *got = row->apply(cx_in, &s->args);
    if (!got) {
        refused = ts_error() == TS_ERR_DTYPE;
        ok = refused;
        if (!ok) snprintf(why, sizeof why, "refused with %s", ts_test_error_str());
    } else if (ts_error() != TS_OK) {
        snprintf(why, sizeof why, "a result and an error%s", ts_test_error_str());
    } else {
        /* in place too (fill_, zero_): the float32 inputs are apart from the complex ones */
        ok = same_values(got, row->apply(real_in, &s->args), why, sizeof why);
    }
    ts_error_clear();
    ts_scope_end();
    ts_test_record(ok);
    printf("%-4s %-22s %-7s %-17s %s%s%s\n", ok ? "ok" : "FAIL", row->name, ts_device_str(dev),
           "complex64", refused ? "refused" : "taken", ok ? "" : ": ", ok ? "" : why);
    fflush(stdout);
}

int ot_run_table(const ot_row *rows, int n) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ot_sample *samples = malloc(sizeof(ot_sample) * OT_MAX_SAMPLES);
    for (int r = 0; r < n; r++) {
        const ot_row *row = &rows[r];
        if (!name_selected(row->name)) continue;
        int ns = ot_make_samples(row, samples, OT_MAX_SAMPLES);
        for (int d = 0; d < nd; d++) {
            for (int k = 0; k < N_DTYPES; k++) {
                ts_dtype dt = all_dtypes[k];
                if (row->dtypes & OT_BIT(dt))
                    run_group(row, devs[d], dt, dt, false, samples, ns);
                else if (row->rejects & OT_BIT(dt))
                    run_group(row, devs[d], dt, dt, true, samples, ns);
            }
            run_complex(row, devs[d], samples, ns);
            bool promotes = row->out == OT_OUT_PROMOTE || row->out == OT_OUT_PROMOTE_FLOAT;
            if (!promotes || row->samples != OT_S_BINARY || row->inplace) continue;
            for (size_t k = 0; k < sizeof mixed_pairs / sizeof mixed_pairs[0]; k++) {
                ts_dtype a = mixed_pairs[k][0], b = mixed_pairs[k][1];
                if ((row->dtypes & OT_BIT(a)) && (row->dtypes & OT_BIT(b)))
                    run_group(row, devs[d], a, b, false, samples, ns);
            }
        }
    }
    free(samples);
    return ts_test_finish();
}
