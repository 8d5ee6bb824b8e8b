/* vision_color.c — torchvision.transforms.functional's colour and blur kernels on image tensors
 * [..., C, H, W] (float in [0, 1] or integer in [0, max]): rgb_to_grayscale, adjust_brightness /
 * contrast / saturation / hue, gaussian_blur, convert_image_dtype, normalize and the antialiased
 * resize, with torchvision's formulas
 * (transforms/_functional_tensor.py) composed from public ops, so every device and autograd (float
 * images) come with them. */
#include <math.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* torchvision's _max_value: the largest value of an integer dtype, 1 for a float one */
static double max_value(ts_dtype dt) {
    switch (dt) {
    case TS_U8:
        return 255;
    case TS_I8:
        return 127;
    case TS_I16:
        return 32767;
    case TS_I32:
        return 2147483647.0;
    case TS_I64:
        return 9223372036854775807.0;
    default:
        return 1;
    }
}

/* img: a float or integer (not bool) tensor of >= 3 dims whose channel count (dims[-3]) is 1 or
 * 3 (any when any_channels) */
static bool check_image(const char *op, ts_tensor *img, bool any_channels) {
    if (!tsi_check_input(op, img, "img")) return false;
    if (!tsi_is_float(img->dtype) && !tsi_is_int(img->dtype)) {
        tsi_error_set(TS_ERR_DTYPE, "%s: expected a float or integer image, got %s", op,
                      ts_dtype_name(img->dtype));
        return false;
    }
    if (img->shape.ndim < 3) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: expected an image of at least 3 dims [..., C, H, W], got shape %s", op,
                      tsi_shape_str(img->shape));
        return false;
    }
    const int64_t c = img->shape.dims[img->shape.ndim - 3];
    if (!any_channels && c != 1 && c != 3) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: input image tensor permitted channel values are [1, 3], but found %lld",
                      op, (long long)c);
        return false;
    }
    return true;
}

static bool check_factor(const char *op, const char *name, double f) {
    if (f >= 0) return true;
    tsi_error_set(TS_ERR_ARG, "%s: %s (%g) is not non-negative", op, name, f);
    return false;
}

static int64_t channels(ts_tensor *img) { return img->shape.dims[img->shape.ndim - 3]; }

/* 0.2989 R + 0.587 G + 0.114 B in the image's arithmetic dtype, back to its dtype, [..., 1, H,
 * W] (inside a scope) */
static ts_tensor *gray(ts_tensor *img) {
    if (channels(img) != 3) return ts_clone(img);
    const int d = img->shape.ndim - 3;
    ts_tensor *x = tsi_is_float(img->dtype) ? img : ts_to_dtype(img, TS_F32);
    ts_tensor *r = ts_mul_scalar(ts_select(x, d, 0), 0.2989);
    ts_tensor *g = ts_mul_scalar(ts_select(x, d, 1), 0.587);
    ts_tensor *b = ts_mul_scalar(ts_select(x, d, 2), 0.114);
    ts_tensor *l = ts_add(ts_add(r, g), b);
    return l ? ts_unsqueeze(ts_to_dtype(l, img->dtype), d) : NULL;
}

ts_tensor *ts_rgb_to_grayscale(ts_tensor *img, int num_output_channels) {
    const char *op = "rgb_to_grayscale";
    tsi_init();
    if (!check_image(op, img, false)) return NULL;
    if (num_output_channels != 1 && num_output_channels != 3)
        return tsi_error_set(TS_ERR_ARG, "%s: num_output_channels should be either 1 or 3, got %d",
                             op, num_output_channels),
               NULL;
    ts_scope_begin();
    ts_tensor *l = gray(img);
    return finish(l && num_output_channels == 3 ? ts_expand(l, img->shape) : l);
}

/* (ratio img1 + (1 - ratio) img2).clamp(0, max).to(img1's dtype) (inside a scope) */
static ts_tensor *blend(ts_tensor *img1, ts_tensor *img2, double ratio) {
    ts_tensor *a = tsi_is_float(img1->dtype) ? img1 : ts_to_dtype(img1, TS_F32);
    ts_tensor *b = tsi_is_float(img2->dtype) ? img2 : ts_to_dtype(img2, TS_F32);
    ts_tensor *y = a && b ? ts_add(ts_mul_scalar(a, ratio), ts_mul_scalar(b, 1.0 - ratio)) : NULL;
    y = y ? ts_clamp(y, 0, max_value(img1->dtype)) : NULL;
    return y ? ts_to_dtype(y, img1->dtype) : NULL;
}

ts_tensor *ts_adjust_brightness(ts_tensor *img, double factor) {
    const char *op = "adjust_brightness";
    tsi_init();
    if (!check_factor(op, "brightness_factor", factor) || !check_image(op, img, false)) return NULL;
    ts_scope_begin();
    return finish(blend(img, ts_zeros_like(img), factor));
}

ts_tensor *ts_adjust_contrast(ts_tensor *img, double factor) {
    const char *op = "adjust_contrast";
    tsi_init();
    if (!check_factor(op, "contrast_factor", factor) || !check_image(op, img, false)) return NULL;
    const ts_dtype dt = tsi_is_float(img->dtype) ? img->dtype : TS_F32;
    const int n = img->shape.ndim;
    ts_scope_begin();
    ts_tensor *l = channels(img) == 3 ? gray(img) : img;
    ts_tensor *mean =
        l ? ts_mean_dims(ts_to_dtype(l, dt), TS_DIMS(n - 3, n - 2, n - 1), true) : NULL;
    return finish(mean ? blend(img, mean, factor) : NULL);
}

ts_tensor *ts_adjust_saturation(ts_tensor *img, double factor) {
    const char *op = "adjust_saturation";
    tsi_init();
    if (!check_factor(op, "saturation_factor", factor) || !check_image(op, img, false)) return NULL;
    if (channels(img) == 1) return ts_retain(img); /* PIL's behaviour */
    ts_scope_begin();
    ts_tensor *l = gray(img);
    return finish(l ? blend(img, l, factor) : NULL);
}

/* torchvision's _rgb2hsv on float RGB [..., 3, H, W] (inside a scope) */
static ts_tensor *rgb2hsv(ts_tensor *img) {
    const int d = img->shape.ndim - 3;
    ts_tensor *r = ts_select(img, d, 0), *g = ts_select(img, d, 1), *b = ts_select(img, d, 2);
    ts_tensor *maxc = ts_amax_dim(img, d, false), *minc = ts_amin_dim(img, d, false);
    if (!r || !g || !b || !maxc || !minc) return NULL;
    ts_tensor *eqc = ts_eq(maxc, minc), *cr = ts_sub(maxc, minc), *ones = ts_ones_like(maxc);
    ts_tensor *s = ts_div(cr, ts_where(eqc, ones, maxc));
    ts_tensor *crd = ts_where(eqc, ones, cr);
    ts_tensor *rc = ts_div(ts_sub(maxc, r), crd), *gc = ts_div(ts_sub(maxc, g), crd);
    ts_tensor *bc = ts_div(ts_sub(maxc, b), crd);
    ts_tensor *is_r = ts_eq(maxc, r), *not_r = ts_ne(maxc, r);
    const ts_dtype dt = img->dtype;
    ts_tensor *hr = ts_mul(ts_to_dtype(is_r, dt), ts_sub(bc, gc));
    /* torch's (2.0 + rc - bc) is (2 + rc) - bc; the same for 4.0 */
    ts_tensor *hg, *hb;
    hg = ts_mul(ts_to_dtype(ts_logical_and(ts_eq(maxc, g), not_r), dt),
                ts_sub(ts_add_scalar(rc, 2.0), bc));
    hb = ts_mul(ts_to_dtype(ts_logical_and(ts_ne(maxc, g), not_r), dt),
                ts_sub(ts_add_scalar(gc, 4.0), rc));
    ts_tensor *h = ts_add(ts_add(hr, hg), hb);
    h = h ? ts_fmod_scalar(ts_add_scalar(ts_div_scalar(h, 6.0), 1.0), 1.0) : NULL;
    ts_tensor *parts[3] = {h, s, maxc};
    return h && s ? ts_stack(parts, 3, d) : NULL;
}

/* torchvision's _hsv2rgb (inside a scope) */
static ts_tensor *hsv2rgb(ts_tensor *img) {
    const int d = img->shape.ndim - 3;
    ts_tensor *h = ts_select(img, d, 0), *s = ts_select(img, d, 1), *v = ts_select(img, d, 2);
    if (!h || !s || !v) return NULL;
    ts_tensor *h6 = ts_mul_scalar(h, 6.0);
    ts_tensor *i = ts_floor(h6);
    ts_tensor *f = ts_sub(h6, i);
    ts_tensor *ii = ts_to_dtype(i, TS_I32);
    ts_tensor *six = ii ? ts_full_like(ii, 6) : NULL;
    ii = six ? ts_remainder(ii, six) : NULL;
    ts_tensor *p = ts_clamp(ts_mul(v, ts_rsub_scalar(s, 1.0)), 0.0, 1.0);
    ts_tensor *q = ts_clamp(ts_mul(v, ts_rsub_scalar(ts_mul(s, f), 1.0)), 0.0, 1.0);
    ts_tensor *t =
        ts_clamp(ts_mul(v, ts_rsub_scalar(ts_mul(s, ts_rsub_scalar(f, 1.0)), 1.0)), 0.0, 1.0);
    if (!ii || !p || !q || !t) return NULL;
    /* channel c is choice[c][i]: an exact sum of one non-zero term (torchvision's einsum) */
    ts_tensor *const choice[3][6] = {{v, q, p, p, t, v}, {t, v, v, q, p, p}, {p, p, t, v, v, q}};
    ts_tensor *out[3];
    for (int c = 0; c < 3; c++) {
        ts_tensor *acc = NULL;
        for (int k = 0; k < 6; k++) {
            ts_tensor *m = ts_to_dtype(ts_eq_scalar(ii, k), img->dtype);
            ts_tensor *term = m ? ts_mul(m, choice[c][k]) : NULL;
            acc = acc && term ? ts_add(acc, term) : term;
            if (!acc) return NULL;
        }
        out[c] = acc;
    }
    return ts_stack(out, 3, d);
}

ts_tensor *ts_adjust_hue(ts_tensor *img, double hue_factor) {
    const char *op = "adjust_hue";
    tsi_init();
    if (!(hue_factor >= -0.5 && hue_factor <= 0.5))
        return tsi_error_set(TS_ERR_ARG, "%s: hue_factor (%g) is not in [-0.5, 0.5]", op,
                             hue_factor),
               NULL;
    if (!check_image(op, img, false)) return NULL;
    if (channels(img) == 1) return ts_retain(img); /* PIL's behaviour */
    const ts_dtype orig = img->dtype;
    ts_scope_begin();
    /* convert_image_dtype to float32: an integer image over its maximum */
    ts_tensor *x = ts_to_dtype(img, TS_F32);
    if (x && !tsi_is_float(orig)) x = ts_div_scalar(x, max_value(orig));
    ts_tensor *hsv = x ? rgb2hsv(x) : NULL;
    if (!hsv) return finish(NULL);
    const int d = hsv->shape.ndim - 3;
    /* (h + hue_factor) % 1.0, Python's remainder */
    ts_tensor *h = ts_add_scalar(ts_select(hsv, d, 0), hue_factor);
    ts_tensor *one = h ? ts_ones_like(h) : NULL;
    h = one ? ts_remainder(h, one) : NULL;
    ts_tensor *parts[3] = {h, ts_select(hsv, d, 1), ts_select(hsv, d, 2)};
    ts_tensor *rgb = h && parts[1] && parts[2] ? hsv2rgb(ts_stack(parts, 3, d)) : NULL;
    /* convert_image_dtype back: x (max + 1 - 1e-3), truncated, for an integer image */
    if (rgb && !tsi_is_float(orig)) rgb = ts_mul_scalar(rgb, max_value(orig) + 1.0 - 1e-3);
    return finish(rgb ? ts_to_dtype(rgb, orig) : NULL);
}

/* torchvision's _get_gaussian_kernel1d (inside a scope) */
static ts_tensor *kernel1d(int64_t k, double sigma, ts_tensor *like, ts_dtype dt) {
    const double half = (double)(k - 1) * 0.5;
    ts_tensor *x = ts_linspace(-half, half, k, opts_on(like, dt));
    ts_tensor *pdf =
        x ? ts_exp(ts_mul_scalar(ts_pow_scalar(ts_div_scalar(x, sigma), 2), -0.5)) : NULL;
    return pdf ? ts_div(pdf, ts_sum(pdf)) : NULL;
}

ts_tensor *ts_gaussian_blur(ts_tensor *img, int64_t kx, int64_t ky, double sigma_x,
                            double sigma_y) {
    const char *op = "gaussian_blur";
    tsi_init();
    if (kx <= 0 || ky <= 0 || kx % 2 == 0 || ky % 2 == 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: kernel_size should have odd and positive integers, got [%lld, "
                             "%lld]",
                             op, (long long)kx, (long long)ky),
               NULL;
    if (!(sigma_x > 0 && sigma_y > 0))
        return tsi_error_set(TS_ERR_ARG, "%s: sigma should have positive values, got [%g, %g]", op,
                             sigma_x, sigma_y),
               NULL;
    if (!check_image(op, img, true)) return NULL;
    const ts_shape s = img->shape;
    const int64_t c = s.dims[s.ndim - 3], h = s.dims[s.ndim - 2], w = s.dims[s.ndim - 1];
    if (kx / 2 >= w || ky / 2 >= h)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: reflect padding of %lld x %lld needs an image larger than "
                             "that, got shape %s",
                             op, (long long)(ky / 2), (long long)(kx / 2), tsi_shape_str(s)),
               NULL;
    const ts_dtype dt = tsi_is_float(img->dtype) ? img->dtype : TS_F32;
    ts_scope_begin();
    ts_tensor *gx = kernel1d(kx, sigma_x, img, dt), *gy = kernel1d(ky, sigma_y, img, dt);
    /* ky[:, None] x kx[None, :] (torchvision's mm of the two), one per channel */
    ts_tensor *k2 = gx && gy ? ts_mul(ts_unsqueeze(gy, 1), ts_unsqueeze(gx, 0)) : NULL;
    ts_tensor *kern = k2 ? ts_contiguous(ts_expand(ts_reshape(k2, TS_SHAPE(1, 1, ky, kx)),
                                                   TS_SHAPE(c, 1, ky, kx)))
                         : NULL;
    int64_t lead = 1;
    for (int i = 0; i < s.ndim - 3; i++) lead *= s.dims[i];
    ts_tensor *x = kern ? ts_to_dtype(ts_reshape(img, TS_SHAPE(lead, c, h, w)), dt) : NULL;
    const int64_t pad[4] = {kx / 2, kx / 2, ky / 2, ky / 2};
    x = x ? ts_pad(x, pad, 4, TS_PAD_REFLECT, 0) : NULL;
    ts_tensor *y =
        x ? ts_conv2d(x, kern, NULL,
                      (ts_conv2d_opts){.stride = {1, 1}, .dilation = {1, 1}, .groups = (int)c})
          : NULL;
    if (y && !tsi_is_float(img->dtype)) y = ts_to_dtype(ts_round(y), img->dtype);
    return finish(y ? ts_reshape(y, s) : NULL);
}

ts_tensor *ts_convert_image_dtype(ts_tensor *img, ts_dtype dtype) {
    const char *op = "convert_image_dtype";
    tsi_init();
    if (!check_image(op, img, true)) return NULL;
    const ts_dtype src = img->dtype, dst = dtype == TS_DTYPE_DEFAULT ? TS_F32 : dtype;
    if (!tsi_is_float(dst) && !tsi_is_int(dst))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a float or integer dtype, got %s", op,
                             ts_dtype_name(dst)),
               NULL;
    if (max_value(dst) == 1 && !tsi_is_float(dst))
        return tsi_error_set(TS_ERR_DTYPE, "%s: %s images are not supported", op,
                             ts_dtype_name(dst)),
               NULL;
    if (src == dst) return ts_retain(img);
    ts_scope_begin();
    ts_tensor *y;
    if (tsi_is_float(src) && tsi_is_float(dst)) {
        y = ts_to_dtype(img, dst);
    } else if (tsi_is_float(src)) {
        if ((src == TS_F32 && (dst == TS_I32 || dst == TS_I64)) ||
            (src == TS_F64 && dst == TS_I64)) {
            tsi_error_set(TS_ERR_DTYPE, "%s: the cast from %s to %s cannot be performed safely", op,
                          ts_dtype_name(src), ts_dtype_name(dst));
            return finish(NULL);
        }
        y = ts_to_dtype(ts_mul_scalar(img, max_value(dst) + 1.0 - 1e-3), dst);
    } else if (tsi_is_float(dst)) {
        y = ts_div_scalar(ts_to_dtype(img, dst), max_value(src));
    } else {
        /* between integer types: a power-of-two factor, floor division going down */
        const double in = max_value(src), out = max_value(dst);
        if (in > out) {
            ts_tensor *f = ts_full_like(img, floor((in + 1) / (out + 1)));
            y = f ? ts_to_dtype(ts_div_rounding(img, f, TS_ROUNDING_FLOOR), dst) : NULL;
        } else {
            ts_tensor *x = ts_to_dtype(img, dst);
            y = x ? ts_mul(x, ts_full_like(x, floor((out + 1) / (in + 1)))) : NULL;
        }
    }
    return finish(y);
}

ts_tensor *ts_image_normalize(ts_tensor *img, const double *mean, int n_mean, const double *std,
                              int n_std, bool inplace) {
    const char *op = "normalize";
    tsi_init();
    if (!check_image(op, img, true)) return NULL;
    if (!tsi_is_float(img->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: input tensor should be a float tensor, got %s", op,
                             ts_dtype_name(img->dtype)),
               NULL;
    if (n_mean <= 0 || n_std <= 0 || !mean || !std)
        return tsi_error_set(TS_ERR_ARG, "%s: mean and std need at least one value each", op), NULL;
    ts_scope_begin();
    /* as torchvision: the values in the image's dtype, [n, 1, 1] */
    ts_tensor *m = ts_tensor_f64(TS_SHAPE(n_mean, 1, 1), mean, opts_on(img, TS_F64));
    ts_tensor *s = ts_tensor_f64(TS_SHAPE(n_std, 1, 1), std, opts_on(img, TS_F64));
    m = m ? ts_to_dtype(m, img->dtype) : NULL;
    s = s ? ts_to_dtype(s, img->dtype) : NULL;
    ts_tensor *zero = s ? ts_any(ts_eq_scalar(s, 0), (ts_dims){0}, false) : NULL;
    const double any = zero ? ts_item(zero) : 0;
    if (any != 0 && ts_error() == TS_OK) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: std evaluated to zero after conversion to %s, leading to division by "
                      "zero",
                      op, ts_dtype_name(img->dtype));
        return finish(NULL);
    }
    ts_tensor *y = m && s ? ts_div(ts_sub(img, m), s) : NULL;
    if (!inplace || !y) return finish(y);
    /* img itself, written (its own reference, outside the scope) */
    const bool ok = ts_copy_(img, y) != NULL;
    ts_scope_end();
    return ok ? ts_retain(img) : NULL;
}

/* PyTorch's antialiased bilinear weights along one axis ([n_out, n_in], float64,
 * upsample_bilinear2d_aa's _compute_weights_aa): a triangle filter widened by the downscale
 * factor, renormalised at the edges */
static double *aa_weights(int64_t n_in, int64_t n_out) {
    double *w = calloc((size_t)(n_in * n_out), sizeof *w);
    if (!w) return NULL;
    const double scale = (double)n_in / (double)n_out;
    const double support = scale >= 1.0 ? scale : 1.0, invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    for (int64_t i = 0; i < n_out; i++) {
        const double center = scale * ((double)i + 0.5);
        int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo, hi = hi > n_in ? n_in : hi;
        double total = 0;
        for (int64_t j = lo; j < hi; j++) {
            const double f = 1.0 - fabs(((double)j - center + 0.5) * invscale);
            total += w[i * n_in + j] = f > 0 ? f : 0;
        }
        if (total > 0)
            for (int64_t j = lo; j < hi; j++) w[i * n_in + j] /= total;
    }
    return w;
}

ts_tensor *ts_resize_antialias(ts_tensor *x, int64_t oh, int64_t ow) {
    const char *op = "resize_antialias";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (!tsi_is_float(x->dtype) || x->shape.ndim < 2)
        return tsi_error_set(TS_ERR_ARG, "%s: expected a floating-point tensor [..., H, W], got %s",
                             op, tsi_desc(x)),
               NULL;
    const int64_t h = x->shape.dims[x->shape.ndim - 2], w = x->shape.dims[x->shape.ndim - 1];
    if (oh <= 0 || ow <= 0 || h <= 0 || w <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: expected positive sizes, got %lld x %lld from %s", op,
                             (long long)oh, (long long)ow, tsi_shape_str(x->shape)),
               NULL;
    double *wy = aa_weights(h, oh), *wx = aa_weights(w, ow);
    if (!wy || !wx) {
        free(wy), free(wx);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    ts_scope_begin();
    ts_tensor *ty = ts_to_dtype(ts_tensor_f64(TS_SHAPE(oh, h), wy, opts_on(x, TS_F64)), x->dtype);
    ts_tensor *tx = ts_to_dtype(ts_tensor_f64(TS_SHAPE(ow, w), wx, opts_on(x, TS_F64)), x->dtype);
    free(wy), free(wx);
    /* wy @ (x @ wx^T) */
    ts_tensor *y = ty && tx ? ts_matmul(ty, ts_matmul(x, ts_transpose(tx, 0, 1))) : NULL;
    return finish(y);
}
