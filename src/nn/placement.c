/* placement.c — ts_module_place: a module's units, in execution order, assigned to devices by
 * memory budget (accelerate's device_map="auto"), moved there, and joined by forward hooks that
 * move each unit's output to the next unit's device (ts_to: differentiable, so gradients flow
 * back the same way). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers_internal.h"
#include "nn/module_internal.h"
#include "nn/placement_internal.h"
#include "tessera/placement.h"

#define NEXT_DEFAULT (-2) /* the unit after it in order (or the model's output) */

typedef struct unit {
    int first, count; /* its modules: walk.mods[first .. first + count) */
    ts_module *exit;  /* the module whose output leaves the unit */
    int next;         /* the unit that consumes that output; -1: the model's output */
    char name[128];
    size_t pbytes, abytes;
    int dev; /* budget index */
} unit;

typedef struct walk {
    ts_module **mods;
    int n_mods, cap_mods;
    unit *units;
    int n, cap;
    bool failed;
} walk;

static void *grow(void *p, int *cap, size_t elem) {
    int c = *cap ? 2 * *cap : 16;
    void *q = realloc(p, (size_t)c * elem);
    if (q) *cap = c;
    return q;
}

static void push_unit(walk *w, const char *name, ts_module *const *ms, int k) {
    if (w->failed) return;
    while (w->n_mods + k > w->cap_mods) {
        ts_module **m = grow(w->mods, &w->cap_mods, sizeof *m);
        if (!m) goto oom;
        w->mods = m;
    }
    if (w->n == w->cap) {
        unit *u = grow(w->units, &w->cap, sizeof *u);
        if (!u) goto oom;
        w->units = u;
    }
    unit *u = &w->units[w->n++];
    *u = (unit){.first = w->n_mods, .count = k, .exit = ms[k - 1], .next = NEXT_DEFAULT};
    if (snprintf(u->name, sizeof u->name, "%s", name) >= (int)sizeof u->name)
        strcpy(u->name + sizeof u->name - 4, "...");
    for (int i = 0; i < k; i++) w->mods[w->n_mods++] = ms[i];
    return;
oom:
    w->failed = true;
    tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
}

/* a Sequential's children in order: nested Sequentials flattened, conv + bn + relu runs kept */
static void walk_seq(walk *w, ts_module *seq, const char *prefix) {
    const tsi_named *c = &seq->impl->children;
    ts_module *const *ms = (ts_module *const *)c->items;
    for (int i = 0; i < c->n && !w->failed;) {
        char name[128];
        int len = snprintf(name, sizeof name, "%s%s", prefix, c->names[i]);
        if (tsi_module_is_sequential(ms[i])) {
            if (len < (int)sizeof name - 1) strcat(name, ".");
            walk_seq(w, ms[i], name);
            i++;
            continue;
        }
        ts_module *bn, *act;
        const int span = tsi_conv_bn_span(ms + i, c->n - i, &bn, &act);
        if (span > 1 && len < (int)sizeof name - 32)
            snprintf(name + len, sizeof name - (size_t)len, "..%.24s", c->names[i + span - 1]);
        push_unit(w, name, ms + i, span);
        i += span;
    }
}

/* src/models/gpt.c's layout: the embeddings (added together), the blocks, the final norm whose
 * output goes to the tied head, i.e. back to the embeddings' device */
static bool walk_gpt(walk *w, ts_module *m) {
    ts_module *emb[3] = {ts_module_child(m, "tok_emb"), ts_module_child(m, "pos_emb"),
                         ts_module_child(m, "drop")};
    ts_module *blocks = ts_module_child(m, "blocks"), *ln = ts_module_child(m, "ln_f");
    if (strcmp(m->type_name, "GPT") || !emb[0] || !emb[1] || !emb[2] || !blocks || !ln) {
        ts_error_clear(); /* ts_module_child's "no child" */
        return false;
    }
    push_unit(w, "tok_emb+pos_emb+drop", emb, 3);
    const tsi_named *c = &blocks->impl->children;
    for (int i = 0; i < c->n; i++) {
        char name[128];
        snprintf(name, sizeof name, "blocks.%.100s", c->names[i]);
        push_unit(w, name, (ts_module *const *)&c->items[i], 1);
    }
    push_unit(w, "ln_f", &ln, 1);
    if (!w->failed) w->units[w->n - 1].next = 0;
    return true;
}

static void collect(walk *w, ts_module *m) {
    /* a ResNet (src/models/resnet.c) runs its children in the order they were added: the stem's
     * conv + bn + relu, maxpool, the stages' blocks, avgpool, fc (flattened on the way: a view) */
    if (tsi_module_is_sequential(m) || !strcmp(m->type_name, "ResNet"))
        walk_seq(w, m, "");
    else if (!walk_gpt(w, m))
        push_unit(w, m->type_name, &m, 1);
    for (int i = 0; i < w->n && !w->failed; i++)
        if (w->units[i].next == NEXT_DEFAULT) w->units[i].next = i + 1 < w->n ? i + 1 : -1;
}

int tsi_place_units(ts_module *m, ts_module ***mods, tsi_unit_span **spans, bool *gpt) {
    walk w = {0};
    *mods = NULL;
    *spans = NULL;
    collect(&w, m);
    tsi_unit_span *s = w.failed ? NULL : malloc((size_t)(w.n ? w.n : 1) * sizeof *s);
    if (!s) {
        free(w.mods);
        free(w.units);
        if (!w.failed) tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
        return -1;
    }
    for (int i = 0; i < w.n; i++)
        s[i] = (tsi_unit_span){w.units[i].first, w.units[i].count, w.units[i].exit};
    *gpt = w.n > 0 && w.units[w.n - 1].next == 0 && w.n > 1;
    *mods = w.mods;
    *spans = s;
    const int n = w.n;
    free(w.units);
    return n;
}

/* ------------------------------------------------------------------ sizes */
typedef struct seen {
    ts_tensor **t;
    int n, cap;
} seen;

static bool add_list(seen *s, ts_tensor_list *l, size_t mult, size_t *bytes, const tsi_ovr *o) {
    for (int i = 0; i < l->n; i++) {
        bool dup = tsi_ovr_find(o, l->tensors[i]) >= 0; /* charged on its own device */
        for (int k = 0; k < s->n && !dup; k++) dup = s->t[k] == l->tensors[i];
        if (dup) continue;
        if (s->n == s->cap) {
            ts_tensor **t = grow(s->t, &s->cap, sizeof *t);
            if (!t) return tsi_error_set(TS_ERR_OOM, "module_place: out of host memory"), false;
            s->t = t;
        }
        s->t[s->n++] = l->tensors[i];
        *bytes += ts_nbytes(l->tensors[i]) * mult;
    }
    return true;
}

static bool measure_params(walk *w, bool with_grads, const tsi_ovr *o) {
    seen s = {0};
    bool ok = true;
    for (int i = 0; i < w->n && ok; i++)
        for (int k = 0; k < w->units[i].count && ok; k++) {
            ts_module *m = w->mods[w->units[i].first + k];
            ts_tensor_list ps = ts_module_named_parameters(m), bs = ts_module_named_buffers(m);
            ok = ts_error() == TS_OK &&
                 add_list(&s, &ps, with_grads ? 2 : 1, &w->units[i].pbytes, o) &&
                 add_list(&s, &bs, 1, &w->units[i].pbytes, o);
            ts_tensor_list_free(&ps);
            ts_tensor_list_free(&bs);
        }
    free(s.t);
    return ok;
}

static ts_tensor *measure_hook(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x;
    *(size_t *)ctx += ts_nbytes(y);
    return y;
}

/* the training flags of the tree, in a fixed order (save) or back (restore) */
static int flags(ts_module *m, bool *f, int i, bool restore) {
    if (restore)
        m->training = f[i];
    else if (f)
        f[i] = m->training;
    i++;
    for (int k = 0; k < m->impl->children.n; k++)
        i = flags(m->impl->children.items[k], f, i, restore);
    return i;
}

/* one forward of the example in eval mode (no running statistics updated, no dropout drawing
 * random numbers), under hooks adding each unit's output bytes; the modes restored after */
static bool measure_acts(walk *w, ts_module *root, ts_tensor *example) {
    int *h = calloc((size_t)w->n, sizeof *h);
    if (!h) return tsi_error_set(TS_ERR_OOM, "module_place: out of host memory"), false;
    bool ok = true;
    for (int i = 0; i < w->n && ok; i++)
        ok = (h[i] = ts_module_register_forward_hook(w->units[i].exit, measure_hook,
                                                     &w->units[i].abytes)) > 0;
    bool *mode = ok ? malloc((size_t)flags(root, NULL, 0, false) * sizeof *mode) : NULL;
    if (ok && !mode) ok = false, tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
    if (ok) {
        flags(root, mode, 0, false);
        ts_module_eval(root);
        ts_no_grad_begin();
        ts_scope_begin();
        ok = ts_forward(root, example) != NULL;
        ts_scope_end();
        ts_no_grad_end();
        flags(root, mode, 0, true);
    }
    free(mode);
    for (int i = 0; i < w->n; i++)
        if (h[i] > 0) ts_module_remove_forward_hook(w->units[i].exit, h[i]);
    free(h);
    return ok;
}

/* ------------------------------------------------------------------ assignment */
/* the overridden tensors first, each on its device */
static bool charge_overrides(const tsi_ovr *o, const ts_mem_budget *b, int nb, size_t *used) {
    for (int i = 0; i < o->n; i++) used[o->t[i].dev] += o->t[i].bytes;
    for (int k = 0; k < nb; k++)
        if (used[k] > b[k].bytes) {
            char x[32], y[32];
            tsi_fmt_bytes(used[k], x, sizeof x);
            tsi_fmt_bytes(b[k].bytes, y, sizeof y);
            return tsi_error_set(TS_ERR_OOM,
                                 "module_place: the budgets cannot hold the model: the tensors "
                                 "overridden to %s need %s, its budget is %s",
                                 ts_device_str(b[k].device), x, y),
                   false;
        }
    return true;
}

static bool assign(walk *w, const ts_mem_budget *b, int nb, size_t *used, const tsi_ovr *o) {
    if (!charge_overrides(o, b, nb, used)) return false;
    int d = 0;
    for (int i = 0; i < w->n; i++) {
        unit *u = &w->units[i];
        const size_t need = u->pbytes + u->abytes;
        while (d < nb && (need > b[d].bytes || used[d] > b[d].bytes - need)) d++;
        if (d == nb) {
            size_t total = 0, acts = 0;
            for (int k = 0; k < w->n; k++) total += w->units[k].pbytes, acts += w->units[k].abytes;
            for (int k = 0; k < o->n; k++) total += o->t[k].bytes;
            char t[32], a[32], nd[32];
            tsi_fmt_bytes(total + acts, t, sizeof t);
            tsi_fmt_bytes(acts, a, sizeof a);
            tsi_fmt_bytes(need, nd, sizeof nd);
            tsi_strbuf s = {0};
            tsi_sb_printf(&s, "the model needs %s (activations %s); unit '%s' (%s) fits on none of",
                          t, a, u->name, nd);
            for (int k = 0; k < nb; k++) {
                char x[32], y[32];
                tsi_fmt_bytes(b[k].bytes, x, sizeof x);
                tsi_fmt_bytes(used[k], y, sizeof y);
                tsi_sb_printf(&s, "%s %s=%s (%s planned)", k ? "," : "", ts_device_str(b[k].device),
                              x, y);
            }
            tsi_error_set(TS_ERR_OOM, "module_place: the budgets cannot hold the model: %s",
                          s.s ? s.s : "(out of host memory)");
            free(s.s);
            return false;
        }
        used[d] += need;
        u->dev = d;
    }
    return true;
}

/* ------------------------------------------------------------------ installing */
/* a device as a hook's ctx (no allocation to free): type and index (0xffff: -1, cuda's current) */
static void *dev_ctx(ts_device d) {
    return (void *)(uintptr_t)((((uintptr_t)d.type << 16) | ((unsigned)d.index & 0xffffu)) + 1);
}
static ts_device ctx_dev(void *ctx) {
    uintptr_t v = (uintptr_t)ctx - 1;
    int i = (int)(v & 0xffffu);
    return (ts_device){.type = (ts_device_type)(v >> 16), .index = i == 0xffff ? -1 : i};
}

static ts_tensor *move_hook(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x;
    const ts_device d = ctx_dev(ctx);
    return ts_device_equal(ts_device_of(y), d) ? y : ts_to(y, d);
}

/* takes an earlier placement's hooks out of the whole tree */
static void unplace(ts_module *m) {
    if (!m->impl->parent) tsi_ovr_unplace(m);
    if (m->impl->place_hook) ts_module_remove_forward_hook(m, m->impl->place_hook);
    m->impl->place_hook = 0;
    m->impl->place_input = false;
    const tsi_named *c = &m->impl->children;
    for (int i = 0; i < c->n; i++) unplace(c->items[i]);
}

/* the device of a module's first parameter or buffer not overridden (its children's when it has
 * none) */
static bool first_tensor_device(ts_module *m, ts_device *d, const tsi_ovr *o) {
    const struct ts_module_impl *im = m->impl;
    for (int kind = 0; kind < 2; kind++) {
        const tsi_named *l = kind ? &im->buffers : &im->params;
        for (int i = 0; i < l->n; i++)
            if (tsi_ovr_find(o, l->items[i]) < 0) {
                *d = ts_device_of(l->items[i]);
                return true;
            }
    }
    for (int i = 0; i < im->children.n; i++)
        if (first_tensor_device(im->children.items[i], d, o)) return true;
    return false;
}

static bool unit_has_override(const tsi_ovr *o, int ui) {
    for (int i = 0; i < o->n; i++)
        if (o->t[i].unit == ui) return true;
    return false;
}

/* m and its children moved to d, but for the overridden tensors (ts_module_to without them) */
static bool move_except(ts_module *m, ts_device d, const tsi_ovr *o) {
    if (!o->n) {
        const ts_status before = ts_error();
        ts_module_to(m, d);
        return ts_error() == before;
    }
    const struct ts_module_impl *im = m->impl;
    for (int kind = 0; kind < 2; kind++) {
        const tsi_named *l = kind ? &im->buffers : &im->params;
        for (int i = 0; i < l->n; i++) {
            ts_tensor *t = l->items[i];
            if (tsi_ovr_find(o, t) >= 0) continue;
            if (tsi_tensor_move_storage(t, tsi_resolve_device(d)) != TS_OK ||
                (t->grad && tsi_tensor_move_storage(t->grad, tsi_resolve_device(d)) != TS_OK))
                return false;
        }
    }
    for (int i = 0; i < im->children.n; i++)
        if (!move_except(im->children.items[i], d, o)) return false;
    return true;
}

/* Joins the units where they are now: each unit's output moves to the next unit's device, the
 * root's input to the first's (a unit without tensors runs where its input is). Run after the
 * moves whether they all succeeded or not, so that the model always runs. */
static bool link(walk *w, ts_module *root, ts_device *dev, ts_device out, const ts_mem_budget *b,
                 const tsi_ovr *o) {
    int known = -1;
    for (int i = 0; i < w->n; i++) {
        bool has = false;
        for (int k = 0; k < w->units[i].count && !has; k++)
            has = first_tensor_device(w->mods[w->units[i].first + k], &dev[i], o);
        /* all its tensors overridden: it runs where planned, their copies brought there */
        if (!has && unit_has_override(o, i))
            has = true, dev[i] = tsi_resolve_device(b[w->units[i].dev].device);
        if (has && known < 0) {
            known = i;
            for (int k = 0; k < i; k++) dev[k] = dev[i];
        } else if (!has && known >= 0) {
            dev[i] = dev[i - 1];
        }
    }
    if (known < 0) return true; /* no tensors anywhere: nothing to move */
    for (int i = 0; i < w->n; i++) {
        const unit *u = &w->units[i];
        if (u->next < 0 || ts_device_equal(dev[u->next], dev[i])) continue;
        int h = ts_module_register_forward_hook(u->exit, move_hook, dev_ctx(dev[u->next]));
        if (h <= 0) return false;
        u->exit->impl->place_hook = h;
    }
    root->impl->place_input = true;
    root->impl->place_dev = dev[0];
    if (out.type != TS_DEVICE_DEFAULT && !root->impl->place_hook) {
        int h = ts_module_register_forward_hook(root, move_hook, dev_ctx(out));
        if (h <= 0) return false;
        root->impl->place_hook = h;
    }
    return true;
}

static bool install(walk *w, ts_module *root, const ts_mem_budget *b, ts_device out,
                    const tsi_ovr *o) {
    ts_device *dev = calloc((size_t)w->n, sizeof *dev);
    if (!dev) return tsi_error_set(TS_ERR_OOM, "module_place: out of host memory"), false;
    /* the overridden tensors first (a tensor stays usable wherever it is: the hooks copy it to
     * its unit's device), so a unit's device never holds them on the way */
    bool moved = tsi_ovr_move(o, b);
    for (int i = 0; i < w->n && moved; i++)
        for (int k = 0; k < w->units[i].count && moved; k++) {
            ts_module *m = w->mods[w->units[i].first + k];
            ts_device was;
            const bool had = first_tensor_device(m, &was, o);
            moved = move_except(m, b[w->units[i].dev].device, o);
            /* a module half moved cannot run: back where it was (the first error stays) */
            if (!moved && had) move_except(m, was, o);
        }
    bool linked = link(w, root, dev, out, b, o);
    linked = linked && tsi_ovr_install(o, root, dev, w->n > 1 && w->units[w->n - 1].next == 0);
    free(dev);
    return moved && linked;
}

static bool fill_plan(const walk *w, const ts_mem_budget *b, int nb, const size_t *used,
                      const tsi_ovr *o, ts_place_plan *p) {
    *p = (ts_place_plan){.n_devices = nb};
    p->units = calloc((size_t)w->n, sizeof *p->units);
    p->used = calloc((size_t)nb, sizeof *p->used);
    p->budgets = malloc((size_t)nb * sizeof *p->budgets);
    p->overrides = o->n ? calloc((size_t)o->n, sizeof *p->overrides) : NULL;
    bool ok = p->units && p->used && p->budgets && (p->overrides || !o->n);
    for (int i = 0; ok && i < o->n; i++) {
        const tsi_ovr_tensor *t = &o->t[i];
        p->overrides[i] = (ts_place_override){.name = tsi_strdup(t->name),
                                              .device = b[t->dev].device,
                                              .used_on = b[w->units[t->unit].dev].device,
                                              .bytes = t->bytes};
        p->n_overrides = i + 1;
        ok = p->overrides[i].name != NULL;
    }
    for (int i = 0; ok && i < w->n; i++) {
        const unit *u = &w->units[i];
        p->units[i] = (ts_place_unit){.name = tsi_strdup(u->name),
                                      .device = b[u->dev].device,
                                      .param_bytes = u->pbytes,
                                      .act_bytes = u->abytes};
        p->n_units = i + 1;
        ok = p->units[i].name != NULL;
    }
    for (int i = 0; ok && i < nb; i++) {
        p->used[i] = (ts_mem_budget){.device = b[i].device, .bytes = used[i]};
        p->budgets[i] = b[i];
    }
    if (!ok) {
        ts_place_plan_free(p);
        tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
    }
    return ok;
}

/* ------------------------------------------------------------------ self-placing types */
static const tsi_place_self *_Atomic self_ops; /* placement_internal.h: an imported ONNX graph */

void tsi_place_register_self(const tsi_place_self *ops) { atomic_store(&self_ops, ops); }

/* consecutive units on one device become one unit of the plan, named by the type */
static void merge_runs(walk *w, const tsi_place_self *ops, void *state) {
    int n = 0;
    for (int i = 0; i < w->n;) {
        int j = i;
        unit u = w->units[i];
        for (; j + 1 < w->n && w->units[j + 1].dev == u.dev; j++)
            u.pbytes += w->units[j + 1].pbytes, u.abytes += w->units[j + 1].abytes;
        ops->run_name(state, i, j, u.name, sizeof u.name);
        w->units[n++] = u;
        i = j + 1;
    }
    w->n = n;
}

/* ts_module_place for a type with units of its own: the same assignment, its own install */
/* The plan of a finished placement: printed with verbose, handed to *plan when asked (else
 * freed). */
static bool report_plan(const walk *w, const ts_mem_budget *b, int nb, const size_t *used,
                        const tsi_ovr *ov, bool verbose, ts_place_plan *plan) {
    ts_place_plan p;
    if (!fill_plan(w, b, nb, used, ov, &p)) return false;
    if (verbose) {
        char *s = ts_place_plan_str(&p);
        if (s) fprintf(stderr, "module_place: plan\n%s", s);
        free(s);
    }
    if (plan)
        *plan = p;
    else
        ts_place_plan_free(&p);
    return true;
}

static ts_status place_self(const tsi_place_self *ops, ts_module *m, const ts_mem_budget *b, int nb,
                            ts_place_opts opts, ts_place_plan *plan) {
    if (opts.overrides && *opts.overrides)
        return tsi_error_set(TS_ERR_ARG,
                             "module_place: overrides: not for %s (its units are graph nodes, "
                             "not modules)",
                             m->type_name);
    void *state = NULL;
    tsi_place_item *items = NULL;
    walk w = {0};
    int *dev = NULL;
    size_t *used = calloc((size_t)nb, sizeof *used);
    const int n = used ? ops->units(m, &opts, &items, &state) : -1;
    bool ok = n >= 0;
    if (ok) {
        w.units = calloc((size_t)(n ? n : 1), sizeof *w.units);
        dev = malloc((size_t)(n ? n : 1) * sizeof *dev);
        ok = w.units && dev;
    }
    if (!used || (n >= 0 && !ok)) tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
    for (int i = 0; ok && i < n; i++) {
        w.units[i] = (unit){.next = -1, .pbytes = items[i].pbytes, .abytes = items[i].abytes};
        memcpy(w.units[i].name, items[i].name, sizeof w.units[i].name);
        w.units[i].name[sizeof w.units[i].name - 1] = '\0';
        w.n = w.cap = i + 1;
    }
    const tsi_ovr none = {0}; /* refused above */
    if (ok) ok = assign(&w, b, nb, used, &none);
    for (int i = 0; ok && i < w.n; i++) dev[i] = w.units[i].dev;
    if (ok && !opts.dry_run) ok = ops->install(m, state, dev, b, nb, opts.output_device);
    if (ok && (plan || opts.verbose)) {
        merge_runs(&w, ops, state);
        ok = report_plan(&w, b, nb, used, &none, opts.verbose, plan);
    }
    if (ops->free_state) ops->free_state(state);
    free(items);
    free(w.units);
    free(dev);
    free(used);
    if (ok) return TS_OK;
    ts_status st = ts_error();
    return st != TS_OK ? st : tsi_error_set(TS_ERR_STATE, "module_place: failed");
}

ts_status ts_module_place(ts_module *m, const ts_mem_budget *budgets, int n_budgets,
                          ts_place_opts opts, ts_place_plan *plan) {
    const char *op = "module_place";
    tsi_init();
    if (plan) *plan = (ts_place_plan){0};
    if (!m) return tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
    if (m->impl->parent)
        return tsi_error_set(TS_ERR_ARG, "%s: %s is a child module; place its root", op,
                             m->type_name);
    if (tsi_module_streamed(m))
        return tsi_error_set(TS_ERR_STATE,
                             "%s: %s is streamed (ts_module_stream); ts_module_unstream it first",
                             op, m->type_name);
    if (!budgets || n_budgets <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: no budgets (n_budgets %d)", op, n_budgets);
    if (opts.output_device.type != TS_DEVICE_DEFAULT && !ts_device_is_available(opts.output_device))
        return tsi_error_set(TS_ERR_DEVICE, "%s: output_device %s is not available", op,
                             ts_device_str(opts.output_device));
    for (int i = 0; i < n_budgets; i++)
        if (!ts_device_is_available(budgets[i].device))
            return tsi_error_set(TS_ERR_DEVICE, "%s: budget %d names %s, which is not available",
                                 op, i, ts_device_str(budgets[i].device));
    const tsi_place_self *self = atomic_load(&self_ops);
    if (self && self->claims(m)) return place_self(self, m, budgets, n_budgets, opts, plan);
    tsi_ovr_restore(m); /* the walk below must see the stored tensors */
    walk w = {0};
    tsi_ovr ov;
    if (!tsi_ovr_parse(opts.overrides, budgets, n_budgets, &ov)) return ts_error();
    size_t *used = calloc((size_t)n_budgets, sizeof *used);
    bool ok = used != NULL;
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    if (ok) collect(&w, m), ok = !w.failed && w.n > 0;
    for (int i = 0; ok && i < w.n; i++)
        for (int k = 0; ok && k < w.units[i].count; k++)
            ok = tsi_ovr_scan(&ov, w.mods[w.units[i].first + k], i, opts.with_grads);
    if (ok) ok = tsi_ovr_all_used(&ov);
    if (ok) ok = measure_params(&w, opts.with_grads, &ov);
    if (ok && opts.example_input) ok = measure_acts(&w, m, opts.example_input);
    if (ok) ok = assign(&w, budgets, n_budgets, used, &ov);
    if (ok && !opts.dry_run) {
        unplace(m);
        ok = install(&w, m, budgets, opts.output_device, &ov);
    }
    if (ok && (plan || opts.verbose))
        ok = report_plan(&w, budgets, n_budgets, used, &ov, opts.verbose, plan);
    free(used);
    free(w.mods);
    free(w.units);
    tsi_ovr_free(&ov);
    if (ok) return TS_OK;
    ts_status st = ts_error();
    return st != TS_OK ? st : tsi_error_set(TS_ERR_STATE, "%s: failed", op);
}

ts_status ts_module_place_str(ts_module *m, const char *budgets, ts_place_opts opts,
                              ts_place_plan *plan) {
    if (plan) *plan = (ts_place_plan){0};
    ts_mem_budget b[16];
    int n = 0;
    ts_status st = ts_mem_budget_parse(budgets, b, 16, &n);
    return st != TS_OK ? st : ts_module_place(m, b, n, opts, plan);
}
