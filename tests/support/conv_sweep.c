/* conv_sweep.c — conv2d's allocation-failure sweep scaffolding (conv_sweep.h). */
#include "conv_sweep.h"

#include <stdlib.h>

/* t detached and retained: it outlives the scope */
static ts_tensor *kept(ts_tensor *t) {
    ts_tensor *d = t ? ts_detach(t) : NULL;
    ts_retain(d);
    return d;
}

ts_tensor *ts_test_f64_leaf(ts_tensor *t, bool absolute, bool grad) {
    ts_tensor *d = ts_to_dtype(ts_to(ts_detach(t), ts_cpu()), TS_F64);
    if (absolute) d = ts_abs(d);
    d = ts_contiguous(d);
    if (grad) ts_set_requires_grad(d, true);
    return d;
}

void ts_test_conv_f64(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_tensor *gy, ts_conv2d_opts o,
                      ts_conv_f64 *exact, ts_conv_f64 *mag) {
    ts_conv_f64 *out[] = {exact, mag};
    for (int k = 0; k < 2; k++) {
        ts_tensor *x64 = ts_test_f64_leaf(x, k, true), *w64 = ts_test_f64_leaf(w, k, true);
        ts_tensor *b64 = b ? ts_test_f64_leaf(b, k, true) : NULL;
        ts_tensor *y64 = ts_conv2d(x64, w64, b64, o);
        ts_backward_with(y64, ts_test_f64_leaf(gy, k, false));
        *out[k] = (ts_conv_f64){y64, ts_grad(x64), ts_grad(w64), b64 ? ts_grad(b64) : NULL};
    }
}

/* a random tensor of shape s, channels_last when asked, kept */
static ts_tensor *kept_random(const ts_conv_sweep_spec *sp, ts_shape s, bool channels_last) {
    ts_tensor *t = sp->random(s);
    return kept(channels_last ? ts_contiguous_format(t, TS_CHANNELS_LAST) : t);
}

void *ts_conv_sweep_setup(const ts_conv_sweep_spec *sp) {
    ts_conv_sweep *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->spec = sp;
    ts_scope_begin();
    s->x = kept_random(sp, TS_SHAPE(sp->n, sp->c, sp->h, sp->w), sp->channels_last);
    ts_set_requires_grad(s->x, true);
    s->w = kept_random(sp, TS_SHAPE(sp->o, sp->c, sp->kh, sp->kw), false);
    ts_set_requires_grad(s->w, true);
    s->b = kept_random(sp, TS_SHAPE(sp->o), false);
    const ts_shape ys = ts_shape_of(ts_conv2d(ts_detach(s->x), ts_detach(s->w), NULL, sp->opts));
    s->gy = kept_random(sp, ys, sp->channels_last);
    ts_conv_f64 e, m;
    ts_test_conv_f64(s->x, s->w, s->b, s->gy, sp->opts, &e, &m);
    s->y64 = kept(e.y), s->ya = kept(m.y);
    s->gx64 = kept(e.gx), s->gxa = kept(m.gx);
    s->gw64 = kept(e.gw), s->gwa = kept(m.gw);
    ts_scope_end();
    return s;
}

static void release_results(ts_conv_sweep *s) {
    ts_release(s->y), ts_release(s->gx), ts_release(s->gw);
    s->y = s->gx = s->gw = NULL;
}

bool ts_conv_sweep_run(void *p) {
    ts_conv_sweep *s = p;
    release_results(s);
    ts_set_grad(s->x, NULL), ts_set_grad(s->w, NULL);
    ts_scope_begin();
    ts_tensor *y = ts_conv2d(s->x, s->w, s->b, s->spec->opts);
    ts_backward_with(y, s->gy);
    s->y = kept(y), s->gx = kept(ts_grad(s->x)), s->gw = kept(ts_grad(s->w));
    ts_scope_end();
    return s->y && s->gx && s->gw && !ts_error();
}

void ts_conv_sweep_teardown(void *p) {
    ts_conv_sweep *s = p;
    release_results(s);
    ts_tensor *all[] = {s->x, s->w, s->b, s->gy, s->y64, s->ya, s->gx64, s->gxa, s->gw64, s->gwa};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ts_release(all[i]);
    free(s);
}
