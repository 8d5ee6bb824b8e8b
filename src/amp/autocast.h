/* autocast.h — the thread-local autocast state (internal): what op front ends and the data-parallel
 * threads use. The op policy lives in src/amp/autocast_policy.c, the cast cache in
 * src/amp/autocast_cache.c. */
#ifndef TS_AMP_AUTOCAST_H
#define TS_AMP_AUTOCAST_H

#include "core/internal.h"

#define TSI_AC_TYPES 4 /* indexed by ts_device_type (TS_CPU, TS_CUDA, TS_SIM; 0 unused) */

typedef struct tsi_autocast_state {
    bool enabled[TSI_AC_TYPES];
    bool cache_enabled[TSI_AC_TYPES];
    ts_dtype dtype[TSI_AC_TYPES]; /* the lower-precision dtype, resolved (TS_F16 or TS_BF16) */
} tsi_autocast_state;

/* The calling thread's state (to carry it into worker threads), and replacing it wholesale (the
 * worker side; it does not open a region: call ts_autocast_clear_cache before the thread ends). */
tsi_autocast_state tsi_autocast_state_get(void);
void tsi_autocast_state_set(const tsi_autocast_state *s);

/* Nonzero while any device type has autocast on in this thread: one cheap load for every op. The
 * policy also zeroes it while an autocast op runs (PyTorch's ExcludeDispatchKeyGuard), so the ops a
 * front end is composed of do not cast again. */
extern _Thread_local int tsi_autocast_any;

/* Autocast applies to an op on device d: returns true and the lower-precision dtype. */
bool tsi_autocast_active(ts_device d, ts_dtype *lower);
/* Whether casts of parameters may be cached for device d's type. */
bool tsi_autocast_cache_enabled(ts_device d);

/* ------------------------------------------------------------------ the op policy
 * PyTorch's cast policies (aten/src/ATen/autocast_mode.cpp); which op has which is the table in
 * autocast_policy.c, looked up by the op's name. */
typedef enum tsi_ac_policy {
    TSI_AC_NONE = 0, /* not listed: the op runs on its inputs as they are */
    TSI_AC_LOWER,    /* eligible inputs to the region's dtype (f16/bf16) */
    /* LOWER for the products (mm, matmul, bmm, linear), except where the device's matmul widens
     * that dtype to float32 anyway (ts_backend.half_products_native false: bf16 on a CPU without
     * AVX512-BF16, f16 on any CPU): there eligible inputs go to float32, the product runs the
     * float32 kernels on them as they are, and the result is rounded to the region's dtype — the
     * result's dtype and graph that the user sees are LOWER's, without converting the operands
     * (a parameter's cast, its widening in each product, its gradient's rounding and widening
     * back) that made autocast slower than float32 there. */
    TSI_AC_LOWER_PRODUCT,
    TSI_AC_FP32,    /* eligible inputs to float32 */
    TSI_AC_PROMOTE, /* eligible inputs to the widest of them (f32 when any is f32) */
    TSI_AC_KEEP,    /* nothing cast, but autocast off inside the op (its kernels take the lower
                     * dtype with f32 parameters: PyTorch's unlisted native batch_norm) */
} tsi_ac_policy;
tsi_ac_policy tsi_autocast_policy(const char *op);
/* Test hook: names listed twice over the policy table and the families' rows (unary_ops.def,
 * binary_ops.def): 0 when sound. */
int tsi_autocast_policy_duplicates(void);
/* Whether the products on device d multiply the half dtype dt in its own instructions (the
 * backend's half_products_native; absent: they do): LOWER_PRODUCT is LOWER there. */
bool tsi_autocast_products_native(ts_device d, ts_dtype dt);

/* What an autocast op must undo when it returns: the casts it made and the suppression. */
#define TSI_AC_FRAME_SMALL 8
typedef struct tsi_ac_frame {
    bool active;   /* the policy applied: tsi_autocast_exit has work to do */
    int saved_any; /* tsi_autocast_any before the op */
    int n_owned;
    /* LOWER_PRODUCT on float32 operands: the dtype the result is rounded to, in a scope opened for
     * the op (TS_DTYPE_DEFAULT: none) */
    ts_dtype round_to;
    const char *op;
    ts_tensor **owned; /* casts (new references) to release: small or a heap array */
    ts_tensor **list;  /* the list form's heap copy of the argument list, or NULL */
    ts_tensor *small[TSI_AC_FRAME_SMALL];
} tsi_ac_frame;

void tsi_autocast_enter_slow(tsi_ac_frame *f, const char *op, ts_tensor **const *slots, int n);
void tsi_autocast_enter_list_slow(tsi_ac_frame *f, const char *op, ts_tensor *const **list, int n);
ts_tensor *tsi_autocast_exit_slow(tsi_ac_frame *f, ts_tensor *result);

/* Front ends call these around their body:
 *   tsi_ac_frame ac;
 *   TSI_AUTOCAST_ENTER(&ac, "mm", &a, &b);
 *   return tsi_autocast_exit(&ac, mm_body(a, b));
 * slots point at the op's tensor arguments (NULL tensors allowed); under autocast each eligible one
 * (floating, not float64, on the op's device type) is replaced by its differentiable cast, and
 * autocast stays off until tsi_autocast_exit, which releases the casts and passes the result
 * through. With autocast off this is one thread-local load. */
static inline void tsi_autocast_enter(tsi_ac_frame *f, const char *op, ts_tensor **const *slots,
                                      int n) {
    f->active = false;
    if (tsi_autocast_any) tsi_autocast_enter_slow(f, op, slots, n);
}
/* tsi_autocast_enter over the addresses of the op's tensor arguments, counted */
typedef ts_tensor **tsi_ac_slot;
#define TSI_AUTOCAST_ENTER(frame, op, ...)                                                         \
    tsi_autocast_enter((frame), (op), (tsi_ac_slot[]){__VA_ARGS__},                                \
                       (int)(sizeof((tsi_ac_slot[]){__VA_ARGS__}) / sizeof(tsi_ac_slot)))
/* The list form (cat, stack): *list may be replaced by an array of casts the frame owns. */
static inline void tsi_autocast_enter_list(tsi_ac_frame *f, const char *op, ts_tensor *const **list,
                                           int n) {
    f->active = false;
    if (tsi_autocast_any) tsi_autocast_enter_list_slow(f, op, list, n);
}
static inline ts_tensor *tsi_autocast_exit(tsi_ac_frame *f, ts_tensor *result) {
    return f->active ? tsi_autocast_exit_slow(f, result) : result;
}

/* ------------------------------------------------------------------ casts and their cache */
/* t cast to dt under autocast (a new reference, not in a scope; t retained when it already has dt):
 * differentiable (ToCopyBackward0). A float32 leaf that requires grad (a parameter), not a view,
 * cast to the lower dtype of its device type with the cache enabled is cached for the thread until
 * its outermost region ends: later ops get the same tensor. A cached cast always records its graph,
 * even under no_grad, so a later use with grad on still reaches the parameter (PyTorch #165068). */
ts_tensor *tsi_autocast_cast(const char *op, ts_tensor *t, ts_dtype dt);
/* Called when the outermost region of the thread ends (src/amp/autocast_cache.c). */
void tsi_autocast_cache_release(void);
/* Test hooks: casts this thread made under autocast (cache hits not counted), and the number of
 * cached casts it holds. */
extern _Thread_local uint64_t tsi_autocast_cast_count;
int tsi_autocast_cache_size(void);

#endif /* TS_AMP_AUTOCAST_H */
