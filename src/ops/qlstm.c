/* qlstm.c — torch.ao.nn.quantized.dynamic.LSTM's forward (ts_dynamic_quantized_lstm): each gate
 * projection one ts_dynamic_quantized_linear (the input's over the whole sequence, the hidden
 * state's per step, as aten's quantized_lstm on CPU), the gates and the cell in float32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tessera/quant.h"
#include "tessera/views.h"

#define OP "dynamic_quantized_lstm"

static float sigmoidf_(float v) { return 1.0f / (1.0f + expf(-v)); }

static bool check_weight(ts_tensor *w, int64_t rows, int64_t cols, const char *name, int64_t l,
                         int d) {
    if (!w) {
        tsi_error_set(TS_ERR_ARG, "%s: %s of layer %lld%s is NULL", OP, name, (long long)l,
                      d ? " (reverse)" : "");
        return false;
    }
    ts_shape s = ts_shape_of(w);
    if (ts_dtype_of(w) != TS_QINT8) {
        tsi_error_set(TS_ERR_DTYPE, "%s: %s of layer %lld%s must be qint8 (got %s)", OP, name,
                      (long long)l, d ? " (reverse)" : "", tsi_desc(w));
        return false;
    }
    if (s.ndim != 2 || s.dims[0] != rows || s.dims[1] != cols) {
        tsi_error_set(TS_ERR_SHAPE, "%s: %s of layer %lld%s has shape %s, expected [%lld, %lld]",
                      OP, name, (long long)l, d ? " (reverse)" : "", tsi_shape_str(s),
                      (long long)rows, (long long)cols);
        return false;
    }
    return true;
}

static bool check_bias(ts_tensor *b, int64_t n, const char *name, int64_t l, int d) {
    if (!b) {
        tsi_error_set(TS_ERR_ARG, "%s: %s of layer %lld%s is NULL (bias=true)", OP, name,
                      (long long)l, d ? " (reverse)" : "");
        return false;
    }
    ts_shape s = ts_shape_of(b);
    if (ts_dtype_of(b) != TS_F32 || s.ndim != 1 || s.dims[0] != n) {
        tsi_error_set(TS_ERR_SHAPE, "%s: %s of layer %lld%s must be float32 [%lld] (got %s)", OP,
                      name, (long long)l, d ? " (reverse)" : "", (long long)n, tsi_desc(b));
        return false;
    }
    return true;
}

/* a float32 state h0 / c0: [L*D, B, H] (or [L*D, H] unbatched), copied to host memory st */
static bool load_state(ts_tensor *t, const char *name, int64_t LD, int64_t B, int64_t H,
                       bool unbatched, float *st) {
    if (!t) {
        memset(st, 0, (size_t)(LD * B * H) * sizeof(float));
        return true;
    }
    ts_shape s = ts_shape_of(t);
    bool ok = ts_dtype_of(t) == TS_F32 &&
              (unbatched ? s.ndim == 2 && s.dims[0] == LD && s.dims[1] == H
                         : s.ndim == 3 && s.dims[0] == LD && s.dims[1] == B && s.dims[2] == H);
    if (!ok) {
        if (unbatched)
            tsi_error_set(TS_ERR_SHAPE, "%s: %s must be float32 [%lld, %lld] (got %s)", OP, name,
                          (long long)LD, (long long)H, tsi_desc(t));
        else
            tsi_error_set(TS_ERR_SHAPE, "%s: %s must be float32 [%lld, %lld, %lld] (got %s)", OP,
                          name, (long long)LD, (long long)B, (long long)H, tsi_desc(t));
        return false;
    }
    if (ts_device_of(t).type != TS_CPU) {
        tsi_error_set(TS_ERR_DEVICE, "%s: %s must be on the cpu (got %s)", OP, name, tsi_desc(t));
        return false;
    }
    ts_tensor *c = ts_contiguous(t);
    if (!c) return false;
    memcpy(st, (const void *)ts_data_ptr(c), (size_t)(LD * B * H) * sizeof(float));
    return true;
}

/* one layer-direction: in [T, B, In] -> out columns [dir*H, dir*H + H) of [T, B, D*H];
 * h, c [B, H] updated in place */
static bool run_direction(const float *in, int64_t T, int64_t B, int64_t In, int64_t H, int dir,
                          int64_t D, ts_tensor *w_ih, ts_tensor *w_hh, ts_tensor *b_ih,
                          ts_tensor *b_hh, bool rr, float *h, float *c, float *out) {
    const ts_opts f32 = {.dtype = TS_F32, .device = {TS_CPU, 0}};
    bool ok = false;
    ts_scope_begin();
    ts_tensor *x = ts_from_data((ts_shape){2, {T * B, In}}, TS_F32, in, f32);
    ts_tensor *gi = x ? ts_dynamic_quantized_linear(x, w_ih, b_ih, rr) : NULL;
    if (!gi) goto done;
    const float *G = (const float *)ts_data_ptr(gi);
    for (int64_t s = 0; s < T; s++) {
        const int64_t t = dir ? T - 1 - s : s;
        ts_scope_begin();
        ts_tensor *ht = ts_from_data((ts_shape){2, {B, H}}, TS_F32, h, f32);
        ts_tensor *gh = ht ? ts_dynamic_quantized_linear(ht, w_hh, b_hh, rr) : NULL;
        if (!gh) {
            ts_scope_end();
            goto done;
        }
        const float *R = (const float *)ts_data_ptr(gh);
        for (int64_t b = 0; b < B; b++) {
            const float *gx = G + (t * B + b) * 4 * H, *gr = R + b * 4 * H;
            float *hb = h + b * H, *cb = c + b * H;
            float *ob = out + (t * B + b) * D * H + dir * H;
            for (int64_t j = 0; j < H; j++) {
                const float ig = sigmoidf_(gr[j] + gx[j]);
                const float fg = sigmoidf_(gr[H + j] + gx[H + j]);
                const float cg = tanhf(gr[2 * H + j] + gx[2 * H + j]);
                const float og = sigmoidf_(gr[3 * H + j] + gx[3 * H + j]);
                const float cn = fg * cb[j] + ig * cg;
                cb[j] = cn;
                hb[j] = og * tanhf(cn);
                ob[j] = hb[j];
            }
        }
        ts_scope_end();
    }
    ok = true;
done:
    ts_scope_end();
    return ok;
}

ts_tensor *ts_dynamic_quantized_lstm(ts_tensor *input, ts_tensor *h0, ts_tensor *c0,
                                     ts_tensor *const *params, int64_t n_params, ts_dqlstm_opts o,
                                     ts_tensor **h_n, ts_tensor **c_n) {
    tsi_init();
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (!input) {
        tsi_error_set(TS_ERR_ARG, "%s: input is NULL", OP);
        return NULL;
    }
    const int64_t L = o.num_layers ? o.num_layers : 1, D = o.bidirectional ? 2 : 1;
    const int64_t per = o.bias ? 4 : 2;
    if (L < 0) {
        tsi_error_set(TS_ERR_ARG, "%s: num_layers must be positive (got %lld)", OP, (long long)L);
        return NULL;
    }
    if (!params || n_params != L * D * per) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: %lld params given, expected %lld (%lld layers x %lld "
                      "directions x %lld: w_ih, w_hh%s)",
                      OP, (long long)n_params, (long long)(L * D * per), (long long)L, (long long)D,
                      (long long)per, o.bias ? ", b_ih, b_hh" : "");
        return NULL;
    }
    ts_shape xs = ts_shape_of(input);
    if (ts_dtype_of(input) != TS_F32 || (xs.ndim != 2 && xs.ndim != 3)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: input must be float32 [T, B, I], [B, T, I] or [T, I] "
                      "(got %s)",
                      OP, tsi_desc(input));
        return NULL;
    }
    if (ts_device_of(input).type != TS_CPU) {
        tsi_error_set(TS_ERR_DEVICE, "%s: input must be on the cpu (got %s)", OP, tsi_desc(input));
        return NULL;
    }
    const bool unbatched = xs.ndim == 2, bf = o.batch_first && !unbatched;
    const int64_t T = bf ? xs.dims[1] : xs.dims[0],
                  B = unbatched ? 1 : (bf ? xs.dims[0] : xs.dims[1]);
    const int64_t I = xs.dims[xs.ndim - 1];
    if (!params[1]) {
        tsi_error_set(TS_ERR_ARG, "%s: w_hh of layer 0 is NULL", OP);
        return NULL;
    }
    ts_shape hs = ts_shape_of(params[1]);
    if (hs.ndim != 2 || hs.dims[0] % 4 || hs.dims[1] * 4 != hs.dims[0]) {
        tsi_error_set(TS_ERR_SHAPE, "%s: w_hh of layer 0 must be [4H, H] (got %s)", OP,
                      tsi_desc(params[1]));
        return NULL;
    }
    const int64_t H = hs.dims[1];
    for (int64_t l = 0; l < L; l++)
        for (int d = 0; d < D; d++) {
            ts_tensor *const *p = params + (l * D + d) * per;
            if (!check_weight(p[0], 4 * H, l ? D * H : I, "w_ih", l, d) ||
                !check_weight(p[1], 4 * H, H, "w_hh", l, d))
                return NULL;
            if (o.bias &&
                (!check_bias(p[2], 4 * H, "b_ih", l, d) || !check_bias(p[3], 4 * H, "b_hh", l, d)))
                return NULL;
        }

    ts_tensor *out = NULL, *hn = NULL, *cn = NULL;
    const size_t seq = (size_t)(T * B), st = (size_t)(L * D * B * H);
    float *hbuf = malloc(st * sizeof(float) + 1), *cbuf = malloc(st * sizeof(float) + 1);
    float *a = malloc(seq * (size_t)(I > D * H ? I : D * H) * sizeof(float) + 1);
    float *b = malloc(seq * (size_t)(D * H) * sizeof(float) + 1);
    if (!hbuf || !cbuf || !a || !b) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
        goto end;
    }
    ts_scope_begin();
    bool ok = load_state(h0, "h0", L * D, B, H, unbatched, hbuf) &&
              load_state(c0, "c0", L * D, B, H, unbatched, cbuf);
    if (ok) { /* the input as [T, B, I] in a */
        ts_tensor *xc = ts_contiguous(input);
        ok = xc != NULL;
        if (ok) {
            const float *src = (const float *)ts_data_ptr(xc);
            if (bf)
                for (int64_t bb = 0; bb < B; bb++)
                    for (int64_t t = 0; t < T; t++)
                        memcpy(a + (t * B + bb) * I, src + (bb * T + t) * I,
                               (size_t)I * sizeof(float));
            else
                memcpy(a, src, seq * (size_t)I * sizeof(float));
        }
    }
    int64_t in = I;
    for (int64_t l = 0; ok && l < L; l++) {
        for (int d = 0; ok && d < D; d++) {
            ts_tensor *const *p = params + (l * D + d) * per;
            const int64_t k = l * D + d;
            ok = T * B == 0 || run_direction(a, T, B, in, H, d, D, p[0], p[1], o.bias ? p[2] : NULL,
                                             o.bias ? p[3] : NULL, o.reduce_range, hbuf + k * B * H,
                                             cbuf + k * B * H, b);
        }
        float *tmp = a; /* this layer's output is the next one's input */
        a = b;
        b = tmp;
        in = D * H;
    }
    ts_scope_end();
    if (!ok) goto end;
    /* a holds the last layer's output [T, B, D*H] */
    const ts_opts f32 = {.dtype = TS_F32, .device = {TS_CPU, 0}};
    const int64_t DH = D * H;
    /* the results made in a scope of their own and kept into the caller's together: a failure
     * on the last one releases the others */
    ts_scope_begin();
    ts_tensor *y;
    if (bf) { /* back to [B, T, D*H] in b */
        for (int64_t bb = 0; bb < B; bb++)
            for (int64_t t = 0; t < T; t++)
                memcpy(b + (bb * T + t) * DH, a + (t * B + bb) * DH, (size_t)DH * sizeof(float));
        y = ts_from_data((ts_shape){3, {B, T, DH}}, TS_F32, b, f32);
    } else if (unbatched)
        y = ts_from_data((ts_shape){2, {T, DH}}, TS_F32, a, f32);
    else
        y = ts_from_data((ts_shape){3, {T, B, DH}}, TS_F32, a, f32);
    ts_shape ss = unbatched ? (ts_shape){2, {L * D, H}} : (ts_shape){3, {L * D, B, H}};
    if (y && h_n) hn = ts_from_data(ss, TS_F32, hbuf, f32);
    if (y && c_n) cn = ts_from_data(ss, TS_F32, cbuf, f32);
    if (y && (!h_n || hn) && (!c_n || cn)) {
        out = ts_keep(y);
        if (h_n) *h_n = ts_keep(hn);
        if (c_n) *c_n = ts_keep(cn);
    }
    ts_scope_end();
end:
    free(hbuf);
    free(cbuf);
    free(a);
    free(b);
    return out;
}
