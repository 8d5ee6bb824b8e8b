/* fsdp.c — the sharded data parallel module (PyTorch's FSDP2 / ZeRO stages 1-3): which
 * parameters form which unit (names or a size policy), the checks, the wrapper's forward and the
 * public calls. The per-unit work (gather, reduce, reshard) is in fsdp_unit.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/fsdp_internal.h"
#include "nn/module_internal.h"

static const char *OP = "FullyShardedDataParallel";

/* ------------------------------------------------------------------ unit names */
typedef struct name_list {
    char **v;
    int n, cap;
} name_list;

static bool names_push(name_list *l, const char *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    char *c = tsi_strdup(s);
    if (!c) return false;
    l->v[l->n++] = c;
    return true;
}

static void names_free(name_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    *l = (name_list){0};
}

/* size_based_auto_wrap_policy: bottom up, a submodule whose trainable parameters not already in
 * a unit below it number at least min becomes a unit. Returns the count left for the parent, or
 * -1 on failure. */
static int64_t policy_walk(ts_module *m, const char *path, int64_t min, name_list *out) {
    int64_t c = 0;
    for (int i = 0; i < m->impl->params.n; i++) {
        ts_tensor *t = m->impl->params.items[i];
        if (t->requires_grad) c += tsi_numel(t->shape);
    }
    for (int i = 0; i < m->impl->children.n; i++) {
        char sub[512];
        const char *name = m->impl->children.names[i];
        int w = *path ? snprintf(sub, sizeof sub, "%s.%s", path, name)
                      : snprintf(sub, sizeof sub, "%s", name);
        if (w < 0 || (size_t)w >= sizeof sub) {
            tsi_error_set(TS_ERR_ARG, "%s: submodule path %s.%s is too long", OP, path, name);
            return -1;
        }
        int64_t k = policy_walk(m->impl->children.items[i], sub, min, out);
        if (k < 0) return -1;
        c += k;
    }
    if (*path && c >= min) {
        if (!names_push(out, path))
            return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), -1;
        return 0;
    }
    return c;
}

/* The submodule at a dotted path, or NULL (no error recorded). */
static ts_module *find_child(ts_module *m, const char *path) {
    while (m && *path) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        ts_module *next = NULL;
        for (int i = 0; i < m->impl->children.n; i++)
            if (strlen(m->impl->children.names[i]) == len &&
                !strncmp(m->impl->children.names[i], path, len))
                next = m->impl->children.items[i];
        m = next;
        path += len + (dot != NULL);
        if (dot && !*path) return NULL;
    }
    return m;
}

static bool unit_names(fsdp_module *f, name_list *out) {
    const ts_fsdp_opts *o = &f->o;
    if (o->n_units == 0)
        return o->min_unit_params == 0 || policy_walk(f->module, "", o->min_unit_params, out) >= 0;
    for (int i = 0; i < o->n_units; i++) {
        const char *s = o->units[i];
        if (!s || !*s)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: unit %d is %s: name a submodule (\"blocks.0\"); the whole "
                                 "model is the root unit already",
                                 OP, i, s ? "empty" : "NULL"),
                   false;
        if (!find_child(f->module, s))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: unit %d, '%s': the model (%s) has no submodule "
                                 "of that name",
                                 OP, i, s, f->module->type_name),
                   false;
        for (int k = 0; k < out->n; k++)
            if (!strcmp(out->v[k], s))
                return tsi_error_set(TS_ERR_ARG, "%s: unit '%s' is named twice", OP, s), false;
        if (!names_push(out, s))
            return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    }
    return true;
}

/* ------------------------------------------------------------------ parameters into units */
/* The deepest unit whose path prefixes the parameter's name; 0 (the root) when none. */
static int owner_of(const char *pname, const name_list *units) {
    int best = 0;
    size_t best_len = 0;
    for (int j = 0; j < units->n; j++) {
        size_t len = strlen(units->v[j]);
        if (len > best_len && !strncmp(pname, units->v[j], len) && pname[len] == '.') {
            best = j + 1;
            best_len = len;
        }
    }
    return best;
}

static int index_of(const ts_tensor_list *l, const ts_tensor *t) {
    for (int i = 0; i < l->n; i++)
        if (l->tensors[i] == t) return i;
    return -1;
}

/* A tensor shared by two units (a tied weight) would be gathered by one and read by the other
 * while resharded: refused. */
static bool check_shared(fsdp_module *f, const ts_tensor_list *all, const int *owner,
                         const name_list *units) {
    for (int j = 0; j < units->n; j++) {
        ts_tensor_list l = ts_module_named_parameters(find_child(f->module, units->v[j]));
        bool ok = !ts_error();
        for (int i = 0; ok && i < l.n; i++) {
            int k = index_of(all, l.tensors[i]);
            if (k < 0 || !l.tensors[i]->requires_grad) continue;
            int a = owner[k];
            size_t len = strlen(units->v[j]);
            bool nested =
                a > 0 && !strncmp(units->v[a - 1], units->v[j], len) && units->v[a - 1][len] == '.';
            if (a != j + 1 && !nested)
                ok = tsi_error_set(TS_ERR_ARG,
                                   "%s: parameter %s is shared by unit '%s' (as %s.%s) and %s "
                                   "'%s'; a tensor may belong to one unit only (put both users "
                                   "in one unit, or leave it to the root)",
                                   OP, all->names[k], units->v[j], units->v[j], l.names[i],
                                   a ? "unit" : "the root unit", a ? units->v[a - 1] : "") == TS_OK;
        }
        ts_tensor_list_free(&l);
        if (!ok) return false;
    }
    return true;
}

static bool fill_unit(fsdp_module *f, fsdp_unit *u, const ts_tensor_list *all, const int *owner,
                      int which) {
    int n = 0;
    for (int i = 0; i < all->n; i++) n += owner[i] == which && all->tensors[i]->requires_grad;
    u->params = calloc((size_t)(n ? n : 1), sizeof *u->params);
    if (!u->params) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    int64_t off = 0;
    /* decay_groups: the parameters of two or more dimensions first (pass 0), then the rest */
    for (int k = 0; k < (f->o.decay_groups ? 2 : 1); k++) {
        for (int i = 0; i < all->n; i++) {
            ts_tensor *p = all->tensors[i];
            if (owner[i] != which || !p->requires_grad) continue;
            if (f->o.decay_groups && (p->shape.ndim >= 2) != (k == 0)) continue;
            fsdp_param *pp = &u->params[u->n_params++];
            *pp = (fsdp_param){.u = u, .p = p, .name = tsi_strdup(all->names[i]), .offset = off};
            if (!pp->name) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
            ts_tensor *p0 = u->params[0].p;
            if (!tsi_device_eq(tsi_device(p), tsi_device(p0)) || p->dtype != p0->dtype)
                return tsi_error_set(
                           TS_ERR_DEVICE,
                           "%s: unit '%s' holds parameters on different devices or of "
                           "different dtypes, %s %s and %s %s; a unit's parameters are one "
                           "flat buffer (move the model to one device and dtype first)",
                           OP, u->is_root ? "<root>" : u->name, u->params[0].name, tsi_desc(p0),
                           pp->name, tsi_desc(p)),
                       false;
            off += tsi_numel(p->shape);
        }
        if (k == 0) u->decay_n = off;
    }
    u->numel = off;
    u->shard_n = (off + f->world - 1) / f->world;
    u->padded = u->shard_n * f->world;
    return true;
}

/* ------------------------------------------------------------------ construction across ranks */
/* A failure on one rank must end ts_fsdp on every rank, not leave the others waiting in the next
 * collective. Before each collective construction makes (the parameter check, each unit's
 * broadcast, the buffers' broadcasts) every rank says whether it got there (tsi_dist_agree); a
 * rank that failed since the last agreement skips its work up to the next one, where every rank
 * learns of it, and none goes further. `told`: the failure is known everywhere (no agreement
 * follows). */
typedef struct build_state {
    bool ok, told;
} build_state;

/* This rank's error, reworded to name ts_fsdp, the step and this rank: what every rank reports
 * (the agreement spreads it verbatim). In a world of one the error stays as it was. */
static void failed_at(int world, const char *where, const char *doing) {
    if (world == 1) return;
    ts_status code = ts_error() ? ts_error() : TS_ERR_STATE;
    char msg[320];
    snprintf(msg, sizeof msg, "%s", ts_error() ? ts_error_message() : "unknown error");
    ts_error_clear();
    if (code == TS_ERR_OOM)
        tsi_error_set(code, "ts_fsdp: %s: rank %d ran out of memory %s (%s)", where, ts_dist_rank(),
                      doing, msg);
    else
        tsi_error_set(code, "ts_fsdp: %s: rank %d failed %s: %s", where, ts_dist_rank(), doing,
                      msg);
}

/* An agreement point: every rank's ok, or on every rank the first failed rank's error. */
static void agree(fsdp_module *f, build_state *b) {
    if (b->told) return;
    if (f->world > 1) b->ok = tsi_dist_agree(NULL, b->ok, f->o.group);
    b->told = !b->ok;
}

static void unit_label(const fsdp_unit *u, char *buf, size_t n) {
    snprintf(buf, n, "unit %d (%s)", u->index, u->is_root ? "<root>" : u->name);
}

/* Each unit (the root first: its forward starts before any unit's, then the units in the given
 * order; one without trainable parameters is left out): flattened on this rank, the agreement,
 * then broadcast and sharded. */
static void build_each_unit(fsdp_module *f, const ts_tensor_list *all, const int *owner,
                            const name_list *units, build_state *b) {
    for (int j = 0; !b->told && j <= units->n; j++) {
        char label[300] = "";
        fsdp_unit *u = NULL;
        if (b->ok) {
            u = &f->units[f->n_units];
            *u = (fsdp_unit){.f = f, .index = f->n_units, .is_root = j == 0};
            u->name = tsi_strdup(j ? units->v[j - 1] : "");
            u->m = j ? find_child(f->module, units->v[j - 1]) : f->module;
            if (!u->name) b->ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP) == TS_OK;
            f->n_units++;
            unit_label(u, label, sizeof label);
            b->ok = b->ok && fill_unit(f, u, all, owner, j);
            if (b->ok && u->n_params == 0) {
                tsi_fsdp_unit_free(u);
                f->n_units--;
                continue;
            }
            b->ok = b->ok && tsi_fsdp_unit_flatten(u);
            if (!b->ok) failed_at(f->world, label, "building its shard");
        }
        agree(f, b);
        if (b->ok && !(b->ok = tsi_fsdp_unit_shard(u))) failed_at(f->world, label, "sharding it");
    }
}

static void build_units(fsdp_module *f, build_state *b) {
    ts_tensor_list all = b->ok ? ts_module_named_parameters(f->module) : (ts_tensor_list){0};
    name_list units = {0};
    int *owner = NULL;
    b->ok = b->ok && !ts_error();
    if (!b->ok) failed_at(f->world, "the model", "before the parameter check");
    agree(f, b);
    /* every rank reaches the same verdict (and agrees on its own failures first) */
    const char *const *names = (const char *const *)all.names;
    if (b->ok &&
        !(b->ok = tsi_dist_verify_same_params(OP, "FSDP", all.tensors, names, all.n, f->o.group)))
        b->told = true;
    b->ok = b->ok && unit_names(f, &units);
    if (b->ok && !(owner = calloc((size_t)(all.n ? all.n : 1), sizeof *owner)))
        b->ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP) == TS_OK;
    for (int i = 0; b->ok && i < all.n; i++) owner[i] = owner_of(all.names[i], &units);
    b->ok = b->ok && check_shared(f, &all, owner, &units);
    if (b->ok && !(f->units = calloc((size_t)units.n + 1, sizeof *f->units)))
        b->ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP) == TS_OK;
    if (!b->ok && !b->told) failed_at(f->world, "the model", "dividing it into units");
    build_each_unit(f, &all, owner, &units, b);
    for (int i = 0; b->ok && i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        size_t es = tsi_dtype_size(u->flat->dtype);
        f->stats.shard_bytes += (size_t)u->shard_n * tsi_dtype_size(u->shard->dtype);
        if ((size_t)u->padded * es > f->stats.unit_bytes_max)
            f->stats.unit_bytes_max = (size_t)u->padded * es;
    }
    f->stats.units = f->n_units;
    free(owner);
    names_free(&units);
    ts_tensor_list_free(&all);
}

/* buffers (running statistics) from the group's first rank, once; the last agreement point */
static bool sync_buffers(fsdp_module *f, build_state *b) {
    ts_tensor_list l = {0};
    if (b->ok && f->world > 1) {
        l = ts_module_named_buffers(f->module);
        if (!(b->ok = !ts_error())) failed_at(f->world, "the buffers", "before broadcasting them");
    }
    agree(f, b);
    int root = tsi_dist_group_world_rank(f->o.group, 0);
    for (int i = 0; b->ok && f->world > 1 && i < l.n; i++)
        b->ok = tsi_dist_broadcast_unchecked(l.tensors[i], root, f->o.group) == TS_OK;
    ts_tensor_list_free(&l);
    return b->ok;
}

/* ------------------------------------------------------------------ the module */
static ts_tensor *fsdp_forward(ts_module *self, ts_tensor *x) {
    fsdp_module *f = (fsdp_module *)self;
    if (!tsi_fsdp_check_prior(f)) return NULL;
    fsdp_unit *root = f->n_units && f->units[0].is_root ? &f->units[0] : NULL;
    if (root && !tsi_fsdp_unit_pre_forward(root)) return NULL;
    /* mixed precision: a floating input in the parameters' dtype (FSDP2's cast_forward_inputs) */
    if (x && f->o.param_dtype && tsi_is_float(x->dtype) && x->dtype != f->o.param_dtype &&
        !(x = ts_to_dtype(x, f->o.param_dtype)))
        return NULL;
    ts_tensor *y = ts_forward(f->module, x);
    tsi_fsdp_wait_all(f); /* a prefetch no unit used */
    if (y && root) y = tsi_fsdp_unit_post_forward(root, y);
    return y;
}

static void fsdp_destroy(ts_module *self) {
    fsdp_module *f = (fsdp_module *)self;
    for (int i = 0; i < f->n_units; i++) tsi_fsdp_unit_free(&f->units[i]);
    free(f->units);
    f->units = NULL;
    f->n_units = 0;
}

ts_module *ts_fsdp(ts_module *module, ts_fsdp_opts o) {
    tsi_init();
    if (!module) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", OP);
        return NULL;
    }
    if (module->impl->parent)
        return tsi_error_set(TS_ERR_ARG, "%s: %s already belongs to %s", OP, module->type_name,
                             module->impl->parent->type_name),
               NULL;
    const char *bad = NULL;
    if (o.stage < 0 || o.stage > 3)
        bad = "stage must be 1, 2 or 3 (0: 3)";
    else if (o.n_units < 0 || (o.n_units > 0 && !o.units))
        bad = "units must list n_units names";
    else if (o.min_unit_params < 0)
        bad = "min_unit_params must not be negative";
    else if (o.cpu_offload && o.stage == 1)
        bad = "cpu_offload needs stage 2 or 3 (stage 1 keeps full gradients on every rank)";
    if (!bad && ((o.param_dtype && !tsi_is_float(o.param_dtype)) ||
                 (o.reduce_dtype && !tsi_is_float(o.reduce_dtype)))) {
        ts_dtype d = o.param_dtype && !tsi_is_float(o.param_dtype) ? o.param_dtype : o.reduce_dtype;
        ts_module_free(module);
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: %s is %s: mixed precision gathers parameters and reduces "
                             "gradients in a floating dtype (bf16, f16, f32 or f64; "
                             "TS_DTYPE_DEFAULT: none)",
                             OP, d == o.param_dtype ? "param_dtype" : "reduce_dtype",
                             ts_dtype_name(d)),
               NULL;
    }
    if (bad) {
        ts_module_free(module);
        return tsi_error_set(TS_ERR_ARG, "%s: %s (stage %d, n_units %d, min_unit_params %lld)", OP,
                             bad, o.stage, o.n_units, (long long)o.min_unit_params),
               NULL;
    }
    const int world = tsi_dist_wrap_group(OP, o.group);
    if (!world) {
        ts_module_free(module);
        return NULL;
    }
    fsdp_module *f = ts_module_alloc(sizeof *f, OP, fsdp_forward);
    if (!f) {
        ts_module_free(module);
        failed_at(world, "the model", "before the parameter check");
        if (world > 1) tsi_dist_agree(NULL, false, o.group); /* the others' first agreement */
        return NULL;
    }
    f->base.destroy = fsdp_destroy;
    f->o = o;
    if (f->o.stage == 0) f->o.stage = 3;
    f->world = world;
    f->rank = ts_dist_group_rank(o.group);
    f->module = ts_module_add(&f->base, "module", module); /* frees module on failure */
    build_state b = {.ok = f->module != NULL};
    build_units(f, &b);
    bool ok = sync_buffers(f, &b);
    f->o.units = NULL; /* the caller's array is read during construction only */
    f->o.n_units = 0;
    if (!ok) {
        ts_module_free(&f->base);
        return NULL;
    }
    /* each rank holds only its shards' gradients: the grad scaler's found-inf is agreed across
     * the group (as PyTorch's ShardedGradScaler), so every rank skips a step or none does */
    return &f->base;
}

fsdp_module *tsi_fsdp_of(const char *op, ts_module *m) {
    return (fsdp_module *)tsi_dist_wrapper_of(op, m, fsdp_forward, "FullyShardedDataParallel");
}

ts_module *ts_fsdp_module(ts_module *fsdp) {
    fsdp_module *f = tsi_fsdp_of("fsdp_module", fsdp);
    return f ? f->module : NULL;
}

/* unit u's leaf k into l: "<u>.flat_param", with decay_groups "<u>.flat_param_no_decay" second */
static bool add_leaf(ts_tensor_list *l, fsdp_unit *u, int k) {
    char name[512];
    snprintf(name, sizeof name, "%s%sflat_param%s", u->name, u->is_root ? "" : ".",
             k ? "_no_decay" : "");
    return ts_tensor_list_add(l, name, u->leaf[k]) == TS_OK;
}

ts_tensor_list ts_fsdp_parameters(ts_module *fsdp) {
    ts_tensor_list l = {0};
    fsdp_module *f = tsi_fsdp_of("fsdp_parameters", fsdp);
    for (int i = 0; f && i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        for (int k = 0; k < u->n_leaves; k++)
            if (!add_leaf(&l, u, k)) {
                ts_tensor_list_free(&l);
                return l;
            }
    }
    return l;
}

ts_status ts_fsdp_decay_groups(ts_module *fsdp, ts_tensor_list *decay, ts_tensor_list *no_decay) {
    static const char op[] = "fsdp_decay_groups";
    fsdp_module *f = tsi_fsdp_of(op, fsdp);
    if (!f) return ts_error();
    if (!decay || !no_decay) return tsi_error_set(TS_ERR_ARG, "%s: a list is NULL", op);
    *decay = *no_decay = (ts_tensor_list){0};
    if (!f->o.decay_groups)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: the module was wrapped without decay_groups (each unit's shard "
                             "mixes decaying and non-decaying parameters)",
                             op);
    for (int i = 0; i < f->n_units; i++)
        if (!add_leaf(decay, &f->units[i], 0) || !add_leaf(no_decay, &f->units[i], 1)) {
            ts_tensor_list_free(decay);
            ts_tensor_list_free(no_decay);
            return ts_error() ? ts_error() : TS_ERR_OOM;
        }
    return TS_OK;
}

void ts_fsdp_no_sync_begin(ts_module *fsdp) {
    fsdp_module *f = tsi_fsdp_of("fsdp_no_sync_begin", fsdp);
    if (f) f->no_sync = true;
}

void ts_fsdp_no_sync_end(ts_module *fsdp) {
    fsdp_module *f = tsi_fsdp_of("fsdp_no_sync_end", fsdp);
    if (f) f->no_sync = false;
}

ts_status ts_fsdp_unshard(ts_module *fsdp) {
    fsdp_module *f = tsi_fsdp_of("fsdp_unshard", fsdp);
    if (!f) return ts_error();
    for (int i = 0; i < f->n_units; i++)
        if (!tsi_fsdp_unit_ensure_gathered(&f->units[i])) return ts_error();
    return TS_OK;
}

ts_status ts_fsdp_get_stats(ts_module *fsdp, ts_fsdp_stats *out) {
    fsdp_module *f = tsi_fsdp_of("fsdp_get_stats", fsdp);
    if (!f) return ts_error();
    if (!out) return tsi_error_set(TS_ERR_ARG, "fsdp_get_stats: out is NULL");
    *out = f->stats;
    return TS_OK;
}
