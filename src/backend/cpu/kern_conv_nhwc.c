/* kern_conv_nhwc.c — CPU convolutions on channels_last activations (backend.h's
 * conv2d_channels_last: x, out, gx and gout NHWC views, the weight OIHW as always). float32, and
 * bf16 where the CPU multiplies bf16, run oneDNN's NHWC primitives on the data as it lies, so no
 * activation is reordered (a ResNet step's NCHW <-> nChw16c reorders were ~6% of it,
 * bench/results/resnet.md). f16, and bf16 where the CPU does not multiply it, run the same float32
 * primitives on float32 NHWC copies (widened below). Everything else (no oneDNN, TS_CONV=builtin,
 * float64, a shape oneDNN declines) goes through NCHW copies and the plain entry points, so the
 * results are theirs; without memory for the copies, the allocation-free loops run on the NHWC data
 * itself. */
#include <stdlib.h>

#include "backend/conv_layout.h"
#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/kern_conv.h"
#include "backend/cpu/kern_conv_drivers.h"
#include "backend/cpu/matmul_dnnl.h"

bool tsi_conv_view_nhwc(const ts_kview *v) { return ts_kview_nhwc_only(v); }

bool tsi_cpu_conv2d_channels_last(const ts_backend *be, int index, ts_dtype dt) {
    (void)be, (void)index;
    return dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16;
}

/* conv_select.c gives pass over g (NHWC) to oneDNN */
static bool to_dnnl(const ts_cgeom *g, tsi_conv_pass pass, ts_dtype dt) {
    return tsi_conv_select(g, pass, dt, 0) == TSI_CONV_PATH_DNNL;
}

/* oneDNN's NHWC primitives take this dtype here */
static bool dnnl_takes(const ts_cgeom *g, tsi_conv_pass pass, ts_dtype dt) {
    return (dt == TS_F32 || (dt == TS_BF16 && tsi_dnnl_bf16_native())) && to_dnnl(g, pass, dt);
}

/* f16, and bf16 on a CPU that does not multiply it (or under the ISA caps), where a float32
 * convolution goes to oneDNN: the widened path below. */
static bool widened_takes(const ts_cgeom *g, tsi_conv_pass pass, ts_dtype dt) {
    return (dt == TS_F16 || dt == TS_BF16) && !dnnl_takes(g, pass, dt) && to_dnnl(g, pass, dt);
}

/* One pass in float32 for half operands: a and b (forward: x, w; backward-data: gy, w;
 * backward-weight: gy, x) and the bias widened into one cached scratch block, each in its own
 * layout (activations NHWC, the weight OIHW), oneDNN's float32 NHWC primitive, and its result
 * rounded once into out: exact widening, float32 sums, one rounding, as kern_conv_half.c's
 * widened path, without that path's NCHW copies and oneDNN's reorders of them. No activation
 * (g's is the caller's, on the rounded output). false: out of scratch memory or oneDNN declined;
 * out is then untouched. */
static bool widened(tsi_conv_pass pass, const ts_cgeom *g, const ts_kview *out, const ts_kview *a,
                    const ts_kview *b, const ts_kview *bias) {
    const int64_t na = tsi_conv_numel4(a), nb = tsi_conv_numel4(b), no = tsi_conv_numel4(out);
    const int64_t nbias = bias ? bias->shape[0] : 0;
    const size_t ba = tsi_scratch_float_bytes(na), bb = tsi_scratch_float_bytes(nb),
                 bo = tsi_scratch_float_bytes(no);
    ts_block *block;
    char *s = tsi_host_scratch_get(ba + bb + bo + tsi_scratch_float_bytes(nbias), &block);
    if (!s) return false;
    float *fa = (float *)s, *fb = (float *)(s + ba), *fo = (float *)(s + ba + bb);
    float *fbias = bias ? (float *)(s + ba + bb + bo) : NULL;
    tsi_conv_widen(fa, a->data, a->dtype, na);
    tsi_conv_widen(fb, b->data, b->dtype, nb);
    if (bias) tsi_conv_widen(fbias, bias->data, bias->dtype, nbias);
    bool ok;
    switch (pass) {
    case TSI_CONV_PASS_FORWARD:
        ok = tsi_dnnl_conv_forward_nhwc(false, g, fa, fb, NULL, fbias, fo);
        break;
    case TSI_CONV_PASS_DATA:
        ok = tsi_dnnl_conv_backward_data_nhwc(false, g, fa, fb, fo);
        break;
    default:
        ok = tsi_dnnl_conv_backward_weight_nhwc(false, g, fa, fb, fo);
        break;
    }
    if (ok) tsi_conv_round(out->data, out->dtype, fo, no);
    tsi_host_scratch_put(block);
    return ok;
}

static ts_cgeom geom(const ts_kview *x, const ts_kview *w, const ts_kview *y,
                     const ts_conv2d_params *p) {
    const int64_t nchw[4] = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    const int64_t o_ohw[3] = {w->shape[0], y->shape[2], y->shape[3]};
    const int64_t khw[2] = {w->shape[2], w->shape[3]};
    ts_cgeom g = tsi_cgeom_make(nchw, o_ohw, khw, p);
    g.nhwc = true;
    return g;
}

/* *pv: an NCHW-contiguous buffer of v's shape and dtype (malloc'ed), holding v's values when
 * fill; false when out of memory. */
static bool plain_of(const ts_backend *be, int index, const ts_kview *v, ts_kview *pv, bool fill) {
    *pv = *v;
    const int64_t n = tsi_conv_numel4(v);
    const size_t es = v->dtype == TS_F64 ? 8 : v->dtype == TS_F32 ? 4 : 2;
    if (!(pv->data = malloc((size_t)n * es + 1))) return false;
    pv->strides[3] = 1;
    pv->strides[2] = v->shape[3];
    pv->strides[1] = v->shape[2] * v->shape[3];
    pv->strides[0] = v->shape[1] * pv->strides[1];
    if (fill) be->copy(be, index, pv, v);
    return true;
}

void tsi_conv2d_nhwc(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                     const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p) {
    const ts_cgeom g = geom(x, w, out, p);
    const ts_dtype dt = out->dtype;
    const char *bd = bias ? bias->data : NULL;
    if (dnnl_takes(&g, TSI_CONV_PASS_FORWARD, dt)) {
        const tsi_conv_weight_id wid = {p->weight_uid, p->weight_version, p->weight_offset};
        const bool bf16 = dt == TS_BF16;
        ts_cgeom gf = g; /* bf16: ReLU in the kernel, the others on the rounded output */
        if (bf16) gf.act = tsi_conv_act_in_bf16_kernel(g.act);
        if (tsi_dnnl_conv_forward_nhwc(bf16, &gf, x->data, w->data, &wid, bd, out->data)) {
            if (gf.act != g.act) tsi_conv_act_output(&g, out);
            return;
        }
    }
    if (widened_takes(&g, TSI_CONV_PASS_FORWARD, dt)) {
        ts_cgeom gf = g;
        gf.act = TS_CONV_ACT_NONE;
        if (widened(TSI_CONV_PASS_FORWARD, &gf, out, x, w, bias)) {
            tsi_conv_act_output(&g, out);
            return;
        }
    }
    ts_kview px, po;
    const bool have_x = plain_of(be, index, x, &px, true);
    if (have_x && plain_of(be, index, out, &po, false)) {
        tsi_cpu_conv2d(be, index, &po, &px, w, bias, p);
        be->copy(be, index, out, &po);
        free(po.data), free(px.data);
        return;
    }
    if (have_x) free(px.data);
    tsi_conv_naive_forward(&g, dt, x->data, w->data, bd, out->data);
    tsi_conv_act_output(&g, out);
}

void tsi_conv2d_backward_data_nhwc(const ts_backend *be, int index, const ts_kview *gx,
                                   const ts_kview *gout, const ts_kview *w,
                                   const ts_conv2d_params *p) {
    const ts_cgeom g = geom(gx, w, gout, p);
    const ts_dtype dt = gx->dtype;
    if (dnnl_takes(&g, TSI_CONV_PASS_DATA, dt) &&
        tsi_dnnl_conv_backward_data_nhwc(dt == TS_BF16, &g, gout->data, w->data, gx->data))
        return;
    if (widened_takes(&g, TSI_CONV_PASS_DATA, dt) &&
        widened(TSI_CONV_PASS_DATA, &g, gx, gout, w, NULL))
        return;
    ts_kview pg, px;
    const bool have_g = plain_of(be, index, gout, &pg, true);
    if (have_g && plain_of(be, index, gx, &px, false)) {
        tsi_cpu_conv2d_backward_data(be, index, &px, &pg, w, p);
        be->copy(be, index, gx, &px);
        free(px.data), free(pg.data);
        return;
    }
    if (have_g) free(pg.data);
    tsi_conv_naive_backward_data(&g, dt, gout->data, w->data, gx->data);
}

void tsi_conv2d_backward_weight_nhwc(const ts_backend *be, int index, const ts_kview *gw,
                                     const ts_kview *gout, const ts_kview *x,
                                     const ts_conv2d_params *p) {
    const ts_cgeom g = geom(x, gw, gout, p);
    const ts_dtype dt = gw->dtype;
    if (dnnl_takes(&g, TSI_CONV_PASS_WEIGHT, dt) &&
        tsi_dnnl_conv_backward_weight_nhwc(dt == TS_BF16, &g, gout->data, x->data, gw->data))
        return;
    if (widened_takes(&g, TSI_CONV_PASS_WEIGHT, dt) &&
        widened(TSI_CONV_PASS_WEIGHT, &g, gw, gout, x, NULL))
        return;
    ts_kview pg, px;
    const bool have_g = plain_of(be, index, gout, &pg, true);
    if (have_g && plain_of(be, index, x, &px, true)) {
        tsi_cpu_conv2d_backward_weight(be, index, gw, &pg, &px, p);
        free(px.data), free(pg.data);
        return;
    }
    if (have_g) free(pg.data);
    tsi_conv_naive_backward_weight(&g, dt, gout->data, x->data, gw->data);
}
