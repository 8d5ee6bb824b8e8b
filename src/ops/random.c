/* random.c — random tensor front ends on the global Philox stream: rand, randint, randperm, ... */
#include <math.h>
#include <stdlib.h>

#include "core/capture.h"
#include "core/internal.h"
#include "core/pinned.h"

/* Fills t from the next numel counters of the global stream. Counters are reserved in blocks of 4
 * so that every tensor starts on a Philox block boundary, whatever the device or thread count. */
static void fill_random(ts_tensor *t, ts_random_kind kind, double p0, double p1) {
    const int64_t n = tsi_numel(t->shape);
    if (n == 0) return;
    uint64_t seed, offset;
    tsi_rng_reserve_on(tsi_device(t), ((uint64_t)n + 3) & ~(uint64_t)3, &seed, &offset);
    ts_kview kv = tsi_kview(t);
    tsi_be(t)->random(tsi_be(t), tsi_dev_index(t), kind, &kv, p0, p1, seed, offset);
}

/* The common head of the random factories: device, flags, allocation (not in a scope). */
static ts_tensor *make(const char *op, ts_shape s, ts_dtype dt, ts_opts o) {
    tsi_init();
    ts_device dev = tsi_resolve_device(o.device);
    if (!tsi_check_device(op, dev)) return NULL;
    if (o.requires_grad && !tsi_is_float(dt)) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: only tensors of floating point dtype can require gradients, got %s", op,
                      ts_dtype_name(dt));
        return NULL;
    }
    if (o.pin_memory && dev.type != TS_CPU) {
        tsi_error_set(TS_ERR_DEVICE, "%s: only cpu tensors can be pinned, not %s", op,
                      ts_device_str(dev));
        return NULL;
    }
    tsi_log_op(op, dev);
    ts_tensor *t = tsi_new(op, s, dt, dev);
    if (!t) return NULL;
    t->requires_grad = o.requires_grad;
    if (o.pin_memory && !tsi_storage_pin(op, t)) return ts_release(t), NULL;
    return t;
}

static bool valid_dtype(const char *op, ts_dtype dt) {
    if ((unsigned)dt < TS_DTYPE_COUNT) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
    return false;
}

static bool need_float(const char *op, ts_dtype dt) {
    if (tsi_is_float(dt)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point dtype, got %s", op,
                  ts_dtype_name(dt));
    return false;
}

/* PyTorch's refusals before an in-place write: autograd's, then a self-overlapping (expanded)
 * destination */
static bool check_inplace(const char *op, ts_tensor *t) {
    return tsi_check_inplace(op, t) && tsi_check_no_self_overlap(op, t);
}

static ts_tensor *float_factory(const char *op, ts_shape s, ts_opts o, ts_random_kind kind) {
    ts_dtype dt = tsi_resolve_dtype(o.dtype);
    if (!valid_dtype(op, dt) || !need_float(op, dt)) return NULL;
    ts_tensor *t = make(op, s, dt, o);
    if (t) fill_random(t, kind, 0.0, 1.0);
    return tsi_own(t);
}

ts_tensor *ts_rand(ts_shape s, ts_opts o) { return float_factory("rand", s, o, TS_RAND_UNIFORM); }
ts_tensor *ts_randn(ts_shape s, ts_opts o) { return float_factory("randn", s, o, TS_RAND_NORMAL); }

static ts_tensor *float_like(const char *op, ts_tensor *t, ts_random_kind kind) {
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !need_float(op, t->dtype)) return NULL;
    return float_factory(op, t->shape, (ts_opts){.dtype = t->dtype, .device = tsi_device(t)}, kind);
}
ts_tensor *ts_rand_like(ts_tensor *t) { return float_like("rand_like", t, TS_RAND_UNIFORM); }
ts_tensor *ts_randn_like(ts_tensor *t) { return float_like("randn_like", t, TS_RAND_NORMAL); }

/* Largest magnitude up to which every integer is exact in dt (its whole range for integers). */
static void dtype_int_range(ts_dtype dt, double *lo, double *hi) {
    double m;
    switch (dt) {
    case TS_BOOL:
        *lo = 0, *hi = 1;
        return;
    case TS_U8:
        *lo = 0, *hi = 255;
        return;
    case TS_I8:
        *lo = -128, *hi = 127;
        return;
    case TS_I16:
        *lo = -32768, *hi = 32767;
        return;
    case TS_U16:
        *lo = 0, *hi = 65535;
        return;
    case TS_U32:
        *lo = 0, *hi = 4294967295.0;
        return;
    case TS_U64:
        *lo = 0, *hi = 18446744073709551615.0;
        return;
    case TS_I32:
        *lo = -2147483648.0, *hi = 2147483647.0;
        return;
    case TS_F16:
        m = 2048.0;
        break; /* 2^11 */
    case TS_BF16:
        m = 256.0;
        break; /* 2^8 */
    case TS_F32:
        m = 16777216.0;
        break; /* 2^24 */
    default:
        m = 9007199254740992.0;
        break; /* 2^53: the kernel takes its bounds as doubles */
    }
    *lo = -m, *hi = m;
}

ts_tensor *ts_randint(int64_t low, int64_t high, ts_shape s, ts_opts o) {
    const char *op = "randint";
    tsi_init();
    ts_dtype dt = o.dtype == TS_DTYPE_DEFAULT ? TS_I64 : o.dtype;
    if (!valid_dtype(op, dt)) return NULL;
    if (low >= high) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: random_ expects 'from' to be less than 'to', but got from=%lld >= "
                      "to=%lld",
                      op, (long long)low, (long long)high);
        return NULL;
    }
    double lo, hi;
    dtype_int_range(dt, &lo, &hi);
    if ((double)low < lo || (double)(high - 1) > hi) {
        tsi_error_set(TS_ERR_ARG, "%s: the range [%lld, %lld) does not fit in %s (%.0f to %.0f)",
                      op, (long long)low, (long long)high, ts_dtype_name(dt), lo, hi);
        return NULL;
    }
    ts_tensor *t = make(op, s, dt, o);
    if (t) fill_random(t, TS_RAND_RANDINT, (double)low, (double)high);
    return tsi_own(t);
}

ts_tensor *ts_randperm(int64_t n, ts_opts o) {
    const char *op = "randperm";
    tsi_init();
    ts_dtype dt = o.dtype == TS_DTYPE_DEFAULT ? TS_I64 : o.dtype;
    if (!valid_dtype(op, dt)) return NULL;
    if (n < 0) {
        tsi_error_set(TS_ERR_ARG, "%s: n must be non-negative, got %lld", op, (long long)n);
        return NULL;
    }
    double lo, hi;
    dtype_int_range(dt, &lo, &hi);
    if (dt == TS_BOOL || (n > 0 && (double)(n - 1) > hi)) {
        tsi_error_set(TS_ERR_ARG, "%s: n is too large for result tensor type: '%s' (n = %lld)", op,
                      ts_dtype_name(dt), (long long)n);
        return NULL;
    }
    ts_device dev = tsi_resolve_device(o.device);
    if (!tsi_check_device(op, dev)) return NULL;
    if (tsi_capturing_on(dev)) { /* drawn on the host: a replay would repeat this permutation */
        tsi_capture_refuse(op, "a random permutation (drawn on the host)");
        return NULL;
    }
    int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!perm) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld elements", op, (long long)n);
        return NULL;
    }
    if (n > 0) {
        /* Keys from the Philox stream (the CPU kernel writing host memory), then an inside-out
         * Fisher-Yates shuffle that overwrites each key once it has been used. */
        const ts_backend *cpu = tsi_backend_for(TS_CPU);
        uint64_t seed, offset;
        tsi_rng_reserve(((uint64_t)n + 3) & ~(uint64_t)3, &seed, &offset);
        ts_kview kv = {.data = (char *)perm, .dtype = TS_I64, .ndim = 1};
        kv.shape[0] = n;
        kv.strides[0] = 1;
        cpu->random(cpu, 0, TS_RAND_RANDINT, &kv, 0.0, 4611686018427387904.0 /* 2^62 */, seed,
                    offset);
        for (int64_t i = 0; i < n; i++) {
            int64_t j = (int64_t)((uint64_t)perm[i] % (uint64_t)(i + 1));
            perm[i] = perm[j];
            perm[j] = i;
        }
    }
    tsi_log_op(op, dev);
    ts_opts to = o;
    to.dtype = dt;
    to.device = dev;
    ts_tensor *t = ts_from_data(TS_SHAPE(n), TS_I64, perm, to);
    free(perm);
    return t; /* ts_from_data already handed it to the scope */
}

/* min and max of a floating tensor, computed on its device so only two numbers cross to the host */
static bool minmax_host(const char *op, ts_tensor *p, double *mn, double *mx) {
    ts_tensor *mm = tsi_new(op, TS_SHAPE(2), p->dtype, tsi_device(p));
    if (!mm) return false;
    ts_kview in = tsi_kview(p), o0 = tsi_kview(mm), o1;
    o0.ndim = 0;
    o1 = o0;
    o1.data += tsi_dtype_size(p->dtype);
    int nred = in.ndim;
    if (nred == 0) {
        in.ndim = nred = 1;
        in.shape[0] = 1;
        in.strides[0] = 1;
    }
    const ts_backend *be = tsi_be(p);
    be->reduce(be, tsi_dev_index(p), TS_R_MIN, &o0, &in, nred, 0);
    be->reduce(be, tsi_dev_index(p), TS_R_MAX, &o1, &in, nred, 0);
    ts_tensor *m64 = tsi_cast(op, mm, TS_F64);
    ts_release(mm);
    if (!m64) return false;
    double v[2];
    ts_status st = ts_copy_to_host(m64, v, sizeof v);
    ts_release(m64);
    *mn = v[0];
    *mx = v[1];
    return st == TS_OK;
}

ts_tensor *ts_bernoulli(ts_tensor *p) {
    const char *op = "bernoulli";
    tsi_init();
    if (!tsi_check_input(op, p, "p")) return NULL;
    if (!tsi_is_float(p->dtype)) {
        tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point tensor for p, got %s", op,
                      ts_dtype_name(p->dtype));
        return NULL;
    }
    const ts_device dev = tsi_device(p);
    if (tsi_numel(p->shape) > 0) {
        double mn, mx;
        if (!minmax_host(op, p, &mn, &mx)) return NULL;
        if (!(mn >= 0 && mx <= 1)) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: Expected p_in >= 0 && p_in <= 1 to be true, but got false (p has "
                          "values in [%g, %g])",
                          op, mn, mx);
            return NULL;
        }
    }
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, p->shape, p->dtype, dev);
    if (!out || tsi_numel(p->shape) == 0) return tsi_own(out);
    /* out = (u < p) with u ~ U[0, 1) drawn in f32 (f64 for f64 p): a half-precision u could round
     * up to 1 and miss p = 1 */
    ts_dtype cdt = p->dtype == TS_F64 ? TS_F64 : TS_F32;
    ts_tensor *u = tsi_new(op, p->shape, cdt, dev);
    ts_tensor *pc = u ? tsi_cast(op, p, cdt) : NULL;
    ts_tensor *lt = pc ? tsi_new(op, p->shape, TS_BOOL, dev) : NULL;
    if (lt) {
        fill_random(u, TS_RAND_UNIFORM, 0.0, 1.0);
        const ts_backend *be = tsi_be(p);
        ts_kview ku = tsi_kview(u), kp = tsi_kview(pc), kl = tsi_kview(lt), ko = tsi_kview(out);
        be->binary(be, tsi_dev_index(p), TS_B_LT, &kl, &ku, &kp);
        be->copy(be, tsi_dev_index(p), &ko, &kl);
    } else {
        ts_release(out);
        out = NULL;
    }
    ts_release(u);
    ts_release(pc);
    ts_release(lt);
    return tsi_own(out);
}

ts_tensor *ts_bernoulli_p(ts_tensor *t, double p) {
    const char *op = "bernoulli";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!(p >= 0 && p <= 1)) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: Expected p_in >= 0 && p_in <= 1 to be true, but got false (p = %g)", op,
                      p);
        return NULL;
    }
    ts_tensor *out = make(op, t->shape, t->dtype, (ts_opts){.device = tsi_device(t)});
    if (out) fill_random(out, TS_RAND_BERNOULLI, p, 0.0);
    return tsi_own(out);
}

ts_tensor *ts_normal_(ts_tensor *t, double mean, double std) {
    const char *op = "normal_";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !need_float(op, t->dtype)) return NULL;
    if (!(std >= 0)) {
        tsi_error_set(TS_ERR_ARG, "%s: normal expects std >= 0.0, but found std %g", op, std);
        return NULL;
    }
    if (!check_inplace(op, t)) return NULL;
    tsi_log_op(op, tsi_device(t));
    fill_random(t, TS_RAND_NORMAL, mean, std);
    tsi_bump_version(t);
    return tsi_own(ts_retain(t));
}

ts_tensor *ts_uniform_(ts_tensor *t, double low, double high) {
    const char *op = "uniform_";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !need_float(op, t->dtype)) return NULL;
    if (!(low <= high)) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: uniform_ expects to return a [from, to) range, but found from=%g > "
                      "to=%g",
                      op, low, high);
        return NULL;
    }
    if (!check_inplace(op, t)) return NULL;
    tsi_log_op(op, tsi_device(t));
    fill_random(t, TS_RAND_UNIFORM, low, high);
    tsi_bump_version(t);
    return tsi_own(ts_retain(t));
}
