/* fsdp_checkpoint.c — sharded checkpoints of an FSDP module (each rank writes its shards and their
 * optimizer state; a manifest written last by the group's first rank commits them), loading into a
 * world of any size (consolidation into one file of the model's names: fsdp_full.c).
 *
 * DIR/manifest.safetensors  no tensors; metadata: format tessera-fsdp, generation G, world W
 * DIR/shard.G.R-of-W.safetensors, one per rank R:
 *   flat.<u>                 unit u's shard of its flat parameter buffer, [shard_n] (padding incl.)
 *   optim.state.<u>.<slot>   the optimizer's state of that shard ([shard_n]; step 0-dim)
 *   optim.param_groups.<g>.lr
 *   buffer.<name>            the model's buffers (replicated; every rank writes them)
 *   scaler.<key>, step, epoch_batches, rng.seed, rng.offset
 *   metadata: format tessera-fsdp-shard, generation, world, rank, stage, layout (units, each
 *   parameter's name, offset in its unit's flat buffer and shape) */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amp/grad_scaler_internal.h"
#include "core/strbuf.h"
#include "dist/fsdp_internal.h"
#include "io/atomic_file.h"
#include "nn/module_internal.h"
#include "optim/optim_internal.h"
#include "optim/optim_load.h"

#define MANIFEST "manifest.safetensors"
#define MSG_LEN  480

/* ------------------------------------------------------------------ small helpers */
static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static char *shard_name(uint64_t gen, int rank, int world) {
    char name[96];
    snprintf(name, sizeof name, "shard.%llu.%d-of-%d.safetensors", (unsigned long long)gen, rank,
             world);
    return tsi_strdup(name);
}

/* The units and their parameters as text, one line each: what a checkpoint must match to load.
 * Independent of the world size (offsets are within the unpadded flat buffer). */
static char *layout_of(fsdp_module *f) {
    tsi_strbuf b = {0};
    for (int i = 0; i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        tsi_sb_printf(&b, "unit %d '%s' %lld %s\n", i, u->is_root ? "<root>" : u->name,
                      (long long)u->numel, ts_dtype_name(u->shard->dtype));
        for (int k = 0; k < u->n_params; k++) {
            fsdp_param *pp = &u->params[k];
            tsi_sb_printf(&b, "  %s at %lld [", pp->name, (long long)pp->offset);
            for (int d = 0; d < pp->p->shape.ndim; d++)
                tsi_sb_printf(&b, "%s%lld", d ? ", " : "", (long long)pp->p->shape.dims[d]);
            tsi_sb_printf(&b, "]\n");
        }
    }
    if (b.failed || !b.s) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* The first line where two layouts differ, both sides, into msg. */
static void layout_diff(const char *saved, const char *mine, char *msg, size_t cap) {
    int line = 1;
    const char *a = saved, *b = mine;
    while (*a && *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la)) {
            snprintf(msg, cap, "line %d: the checkpoint has '%.*s', this model '%.*s'", line,
                     (int)(la < 150 ? la : 150), a, (int)(lb < 150 ? lb : 150), b);
            return;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
    snprintf(msg, cap, "line %d: the %s has more parameters or units ('%.150s')", line,
             *a ? "checkpoint" : "model", *a ? a : b);
}

static ts_tensor *i64_scalar(uint64_t bits) {
    int64_t v;
    memcpy(&v, &bits, sizeof v);
    return ts_tensor_i64(TS_SHAPE(), &v, (ts_opts){.device = ts_cpu()});
}

static bool read_i64(const char *op, const char *path, const ts_tensor_list *l, const char *name,
                     uint64_t *out) {
    ts_tensor *t = ts_tensor_list_get(l, name);
    if (!t || t->dtype != TS_I64 || t->shape.ndim != 0)
        return tsi_error_set(TS_ERR_FORMAT, "%s: %s: '%s' is %s (a 0-dim I64 tensor expected)", op,
                             path, name, t ? "of the wrong dtype or shape" : "missing") == TS_OK;
    int64_t v = 0;
    if (ts_copy_to_host(t, &v, sizeof v)) return false;
    memcpy(out, &v, sizeof v);
    return true;
}

static bool add_named(const char *op, ts_tensor_list *dst, const char *prefix, const char *name,
                      ts_tensor *t) {
    size_t n = strlen(prefix) + strlen(name) + 1;
    char *s = malloc(n);
    if (!s) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == TS_OK;
    snprintf(s, n, "%s%s", prefix, name);
    bool ok = ts_tensor_list_add(dst, s, t) == TS_OK;
    free(s);
    return ok;
}

static bool add_all(const char *op, ts_tensor_list *dst, const char *prefix,
                    const ts_tensor_list *src) {
    for (int i = 0; i < src->n; i++)
        if (!add_named(op, dst, prefix, src->names[i], src->tensors[i])) return false;
    return true;
}

/* A metadata value as a number; *ok false when it is missing or not one. Out of memory stays
 * pending (TS_ERR_OOM), and the reads after it fail at once, so that callers report it as such
 * and not as a malformed file. */
static uint64_t meta_u64(const char *path, const char *key, bool *ok) {
    if (ts_error() == TS_ERR_OOM) return *ok = false, 0;
    char *v = ts_safetensors_metadata(path, key);
    char *end = NULL;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || !*v || *end) *ok = false;
    free(v);
    return x;
}

/* whether the manifest on disk commits generation gen (errors reading it are left pending) */
static bool names_generation(const char *manifest, uint64_t gen) {
    bool ok = true;
    uint64_t g = meta_u64(manifest, "generation", &ok);
    return ok && g == gen;
}

/* The optimizer must step exactly the module's leaves (ts_fsdp_parameters, in any order and
 * groups): idx[2 * unit + leaf] gets each one's index among the optimizer's parameters. */
static bool check_optim(const char *op, fsdp_module *f, ts_optim *opt, int *idx) {
    if (!opt) return true;
    int n = 0;
    for (int i = 0; i < f->n_units; i++) n += f->units[i].n_leaves;
    if (opt->n_params != n)
        return tsi_error_set(
                   TS_ERR_ARG,
                   "%s: the optimizer holds %d parameters, the module %d shards: build it "
                   "over ts_fsdp_parameters (those tensors)",
                   op, opt->n_params, n) == TS_OK;
    for (int i = 0; i < f->n_units; i++)
        for (int k = 0; k < f->units[i].n_leaves; k++) {
            int j = 0;
            while (j < opt->n_params && opt->params[j].p != f->units[i].leaf[k]) j++;
            if (j == opt->n_params)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: unit %d's shard%s is not among the optimizer's "
                                     "parameters: build it over ts_fsdp_parameters (those "
                                     "tensors)",
                                     op, i, k ? " (its no-decay part)" : "") == TS_OK;
            idx[2 * i + k] = j;
        }
    return true;
}

/* "state.<j>.<slot>": j and the slot; false for other keys */
static bool state_key(const char *key, int *j, const char **slot) {
    int pos = 0;
    if (sscanf(key, "state.%d.%n", j, &pos) != 1 || pos == 0) return false;
    *slot = key + pos;
    return true;
}

/* The optimizer's state dict (keys by its parameter index) as a checkpoint holds it: by unit, a
 * unit's two leaves' per-element states (decay_groups) joined into one [shard_n] state, their
 * step from the first. The format does not depend on decay_groups. */
static bool states_by_unit(const char *op, fsdp_module *f, const int *idx, ts_tensor_list *osd) {
    ts_tensor_list out = {0};
    bool ok = true;
    char key[96];
    ts_scope_begin();
    for (int e = 0; ok && e < osd->n; e++) {
        int j;
        const char *slot;
        ts_tensor *t = osd->tensors[e];
        if (!state_key(osd->names[e], &j, &slot)) {
            ok = ts_tensor_list_add(&out, osd->names[e], t) == TS_OK;
            continue;
        }
        for (int i = 0; ok && i < f->n_units; i++) {
            fsdp_unit *u = &f->units[i];
            if (idx[2 * i] != j) continue; /* a unit's second leaf: with its first */
            snprintf(key, sizeof key, "state.%d.%s", i, slot);
            if (u->n_leaves == 2 && t->shape.ndim > 0) {
                char other[96];
                snprintf(other, sizeof other, "state.%d.%s", idx[2 * i + 1], slot);
                ts_tensor *t1 = ts_tensor_list_get(osd, other);
                ts_tensor *two[2] = {t, t1};
                t = t1 ? ts_cat(two, 2, 0) : NULL;
                if (!t1)
                    ok = tsi_error_set(TS_ERR_STATE,
                                       "%s: the optimizer holds '%s' for unit %d's decaying "
                                       "part but not for the rest",
                                       op, slot, i) == TS_OK;
            }
            ok = ok && t && ts_tensor_list_add(&out, key, t) == TS_OK;
        }
    }
    ts_scope_end();
    ts_tensor_list_free(osd);
    *osd = out;
    return ok;
}

/* The reverse, for loading: a unit's [shard_n] states cut into its leaves' parts. */
static bool states_by_leaf(fsdp_module *f, const int *idx, ts_tensor_list *osd) {
    ts_tensor_list out = {0};
    bool ok = true;
    char key[96];
    ts_scope_begin();
    for (int e = 0; ok && e < osd->n; e++) {
        int i;
        const char *slot;
        ts_tensor *t = osd->tensors[e];
        if (!state_key(osd->names[e], &i, &slot)) {
            ok = ts_tensor_list_add(&out, osd->names[e], t) == TS_OK;
            continue;
        }
        if (i < 0 || i >= f->n_units) continue; /* the optimizer's loader names what is missing */
        fsdp_unit *u = &f->units[i];
        for (int k = 0; ok && k < u->n_leaves; k++) {
            snprintf(key, sizeof key, "state.%d.%s", idx[2 * i + k], slot);
            ts_tensor *part = t;
            if (u->n_leaves == 2 && t->shape.ndim > 0)
                part = ts_contiguous(
                    ts_narrow(t, 0, k ? u->split : 0, k ? u->shard_n - u->split : u->split));
            ok = part && ts_tensor_list_add(&out, key, part) == TS_OK;
        }
    }
    ts_scope_end();
    ts_tensor_list_free(osd);
    *osd = out;
    return ok;
}

/* After a committed save: shard files of other generations, temporaries a crashed save left, and
 * the files of an uncommitted save that a crash left under the same generation number by another
 * world size (shard.G.R-of-W'.safetensors). */
static void remove_stale(const char *dir, uint64_t gen, int world) {
    DIR *d = opendir(dir);
    if (!d) return;
    char keep[64], tail[32];
    int kn = snprintf(keep, sizeof keep, "shard.%llu.", (unsigned long long)gen);
    int tn = snprintf(tail, sizeof tail, "-of-%d.safetensors", world);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        bool ours = !strncmp(n, keep, (size_t)kn) && len > (size_t)tn &&
                    !strcmp(n + len - (size_t)tn, tail);
        bool old = !strncmp(n, "shard.", 6) && !ours;
        bool tmp = !strncmp(n, ".shard.", 7) || !strncmp(n, "." MANIFEST ".tmp", 22);
        if (!old && !tmp) continue;
        char *p = path_join(dir, n);
        if (p) unlink(p);
        free(p);
    }
    closedir(d);
}

/* ------------------------------------------------------------------ save */
static bool write_shard(fsdp_module *f, const char *op, const char *path, uint64_t gen,
                        const ts_fsdp_checkpoint *c, const char *layout, const int *idx) {
    ts_tensor_list all = {0}, osd = {0}, bufs = {0}, ssd = {0};
    ts_status before = ts_error();
    bool ok = !before;
    if (ok && c && c->optim) {
        osd = ts_optim_state_dict(c->optim);
        ok = !ts_error() && states_by_unit(op, f, idx, &osd);
    }
    if (ok && c && c->scaler) ssd = ts_grad_scaler_state_dict(c->scaler);
    if (ok) bufs = ts_module_named_buffers(f->module);
    ok = ok && !ts_error();
    ts_scope_begin();
    char name[64];
    for (int i = 0; ok && i < f->n_units; i++) {
        snprintf(name, sizeof name, "flat.%d", i);
        ok = ts_tensor_list_add(&all, name, f->units[i].shard) == TS_OK;
    }
    ok = ok && add_all(op, &all, "optim.", &osd) && add_all(op, &all, "buffer.", &bufs) &&
         add_all(op, &all, "scaler.", &ssd);
    ts_rng_state rng = ts_rng_get_state();
    ok = ok && ts_tensor_list_add(&all, "step", i64_scalar((uint64_t)(c ? c->step : 0))) == TS_OK;
    ok = ok && ts_tensor_list_add(&all, "epoch_batches",
                                  i64_scalar((uint64_t)(c ? c->epoch_batches : 0))) == TS_OK;
    ok = ok && ts_tensor_list_add(&all, "rng.seed", i64_scalar(rng.seed)) == TS_OK;
    ok = ok && ts_tensor_list_add(&all, "rng.offset", i64_scalar(rng.offset)) == TS_OK;
    ts_scope_end();
    char gs[32], ws[16], rs[16], ss[8];
    snprintf(gs, sizeof gs, "%llu", (unsigned long long)gen);
    snprintf(ws, sizeof ws, "%d", f->world);
    snprintf(rs, sizeof rs, "%d", f->rank);
    snprintf(ss, sizeof ss, "%d", f->o.stage);
    const char *meta[] = {"format",     "tessera-fsdp-shard",
                          "generation", gs,
                          "world",      ws,
                          "rank",       rs,
                          "stage",      ss,
                          "layout",     layout};
    ok = ok && ts_safetensors_save(path, &all, meta, 6) == TS_OK;
    ts_tensor_list_free(&all);
    ts_tensor_list_free(&osd);
    ts_tensor_list_free(&bufs);
    ts_tensor_list_free(&ssd);
    return ok;
}

ts_status ts_fsdp_save_sharded(ts_module *fsdp, const char *dir, const ts_fsdp_checkpoint *c) {
    static const char op[] = "fsdp_save_sharded";
    tsi_init();
    fsdp_module *f = tsi_fsdp_of(op, fsdp);
    if (!f) return ts_error();
    if (!dir || !*dir)
        return tsi_error_set(TS_ERR_ARG, "%s: dir is %s", op, dir ? "empty" : "NULL");
    /* sticky: nothing is written over a failed step; the others learn it in tsi_fsdp_agree() */
    int *idx = calloc(2 * (size_t)f->n_units + 1, sizeof *idx);
    bool ok = !ts_error() && (idx || tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == 0);
    ok = ok && check_optim(op, f, c ? c->optim : NULL, idx);
    /* the group's first rank picks the generation (one more than the committed one) */
    uint64_t gen = 1;
    char *manifest = path_join(dir, MANIFEST);
    if (!manifest) ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == TS_OK;
    if (ok && f->rank == 0) {
        ok = tsi_make_dirs(op, dir) == TS_OK;
        struct stat sb;
        if (ok && stat(manifest, &sb) == 0) {
            bool mok = true;
            gen = meta_u64(manifest, "generation", &mok) + 1;
            /* out of memory reading it fails the save: taken for unreadable, the save would
             * start again at generation 1 and, when that is the committed one, overwrite its
             * shards before the commit */
            if (ts_error() == TS_ERR_OOM) ok = false;
            if (ok && !mok) gen = 1; /* unreadable: the save replaces it */
            if (ok) ts_error_clear();
        }
    }
    ok = tsi_fsdp_agree(f, op, ok);
    ts_tensor *g = ok ? i64_scalar(gen) : NULL;
    if (ok && f->world > 1)
        ok = tsi_dist_broadcast_unchecked(g, tsi_dist_group_world_rank(f->o.group, 0),
                                          f->o.group) == TS_OK &&
             ts_copy_to_host(g, &gen, sizeof gen) == TS_OK;
    ts_release(g);
    char *layout = ok ? layout_of(f) : NULL;
    char *name = ok ? shard_name(gen, f->rank, f->world) : NULL;
    char *path = name ? path_join(dir, name) : NULL;
    if (ok && (!layout || !path)) ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == 0;
    if (ok) ok = write_shard(f, op, path, gen, c, layout, idx);
    ok = tsi_fsdp_agree(f, op, ok);
    /* every shard is on disk: the manifest commits them */
    if (ok && f->rank == 0) {
        char gs[32], ws[16], ss[8];
        snprintf(gs, sizeof gs, "%llu", (unsigned long long)gen);
        snprintf(ws, sizeof ws, "%d", f->world);
        snprintf(ss, sizeof ss, "%d", f->o.stage);
        const char *meta[] = {"format", "tessera-fsdp", "generation", gs, "world", ws, "stage", ss};
        ts_tensor_list none = {0};
        ok = ts_safetensors_save(manifest, &none, meta, 4) == TS_OK;
    }
    ok = tsi_fsdp_agree(f, op, ok);
    if (ok && f->rank == 0) remove_stale(dir, gen, f->world);
    /* not committed: the previous checkpoint stays whole. A manifest naming this generation is in
     * place although its save failed (the folder's sync after the rename): its shards stay, and
     * the older ones too (not removed above), as a crash may still bring the old manifest back */
    if (!ok && path && !names_generation(manifest, gen)) unlink(path);
    free(idx);
    free(layout);
    free(name);
    free(path);
    free(manifest);
    return ok ? TS_OK : ts_error();
}

/* ------------------------------------------------------------------ load */
typedef struct staged_unit {
    int64_t start, n; /* this rank's elements of the unit's unpadded buffer: [start, start + n) */
    ts_tensor *flat;  /* [shard_n] cpu, then staged on the shard's device */
    ts_tensor_list slots; /* "state.<u>.<slot>" -> [shard_n] cpu */
} staged_unit;

/* src on dst's device and in its dtype (src itself, retained, when it already is): what the commit
 * copies from without allocating */
static ts_tensor *staged_for(const char *op, ts_tensor *src, const ts_tensor *dst) {
    ts_tensor *a = tsi_to_device(op, src, tsi_device(dst));
    ts_tensor *b = a ? tsi_cast(op, a, dst->dtype) : NULL;
    ts_release(a);
    return b;
}

/* The commit's copy (one device, dtype and shape): it allocates nothing, so it cannot fail half-way
 * through the tensors a load changes. */
static void commit_copy(ts_tensor *dst, const ts_tensor *src) {
    if (tsi_numel(dst->shape) > 0) {
        ts_kview d = tsi_kview(dst), s = tsi_kview(src);
        tsi_be(dst)->copy(tsi_be(dst), tsi_dev_index(dst), &d, &s);
    }
    tsi_bump_version(dst);
}

/* Copies the part of old rank q's block (q*osn .. +osn) that overlaps this rank's new range. */
static bool copy_overlap(staged_unit *s, ts_tensor *dst, ts_tensor *src, int q, int64_t osn) {
    int64_t lo = (int64_t)q * osn, hi = lo + osn;
    int64_t a = lo > s->start ? lo : s->start, b = hi < s->start + s->n ? hi : s->start + s->n;
    if (a >= b) return true;
    ts_scope_begin();
    bool ok =
        ts_copy_(ts_narrow(dst, 0, a - s->start, b - a), ts_narrow(src, 0, a - lo, b - a)) != NULL;
    ts_scope_end();
    return ok;
}

typedef struct load_ctx {
    fsdp_module *f;
    const char *op;
    const char *dir;
    uint64_t gen;
    int old_world;
    const char *layout;
    staged_unit *su;
    ts_tensor_list first; /* old rank 0's file: scalars, buffers, scaler, lrs */
    char *first_path;
} load_ctx;

static bool check_file(load_ctx *L, const char *path, int q) {
    bool mok = true;
    uint64_t gen = meta_u64(path, "generation", &mok);
    uint64_t w = meta_u64(path, "world", &mok);
    uint64_t r = meta_u64(path, "rank", &mok);
    if (ts_error() == TS_ERR_OOM) return false; /* not a malformed file */
    ts_error_clear();
    if (!mok || gen != L->gen || w != (uint64_t)L->old_world || r != (uint64_t)q)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: %s: not rank %d's shard of generation %llu of a world of %d "
                             "(its metadata says generation %llu, world %llu, rank %llu)",
                             L->op, path, q, (unsigned long long)L->gen, L->old_world,
                             (unsigned long long)gen, (unsigned long long)w,
                             (unsigned long long)r) == TS_OK;
    char *layout = ts_safetensors_metadata(path, "layout");
    if (!layout && ts_error() == TS_ERR_OOM) return false;
    ts_error_clear();
    bool same = layout && !strcmp(layout, L->layout);
    if (!same) {
        char msg[400];
        if (layout)
            layout_diff(layout, L->layout, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "it holds no layout");
        tsi_error_set(TS_ERR_ARG, "%s: %s was saved from a different model or units: %s", L->op,
                      path, msg);
    }
    free(layout);
    return same;
}

/* Reads old rank q's file and copies what this rank needs of it. */
static bool read_old(load_ctx *L, int q) {
    fsdp_module *f = L->f;
    char *name = shard_name(L->gen, q, L->old_world);
    char *path = name ? path_join(L->dir, name) : NULL;
    free(name);
    if (!path) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", L->op) == TS_OK;
    struct stat sb;
    bool ok = true;
    if (stat(path, &sb) != 0)
        ok = tsi_error_set(TS_ERR_IO,
                           "%s: %s (rank %d's shard of the world of %d that saved the checkpoint) "
                           "is missing: %s",
                           L->op, path, q, L->old_world, strerror(errno)) == TS_OK;
    ok = ok && check_file(L, path, q);
    ts_tensor_list l = {0};
    if (ok && ts_safetensors_load(path, ts_cpu(), &l)) {
        /* keep the loader's message, naming the shard it belongs to */
        char msg[MSG_LEN];
        snprintf(msg, sizeof msg, "%s", ts_error_message());
        ts_status code = ts_error();
        ts_error_clear();
        ok = tsi_error_set(code, "%s: rank %d's shard: %s", L->op, q, msg) == TS_OK;
    }
    char key[96];
    for (int i = 0; ok && i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        staged_unit *s = &L->su[i];
        int64_t osn = (u->numel + L->old_world - 1) / L->old_world;
        snprintf(key, sizeof key, "flat.%d", i);
        ts_tensor *src = ts_tensor_list_get(&l, key);
        if (!src || src->shape.ndim != 1 || src->shape.dims[0] != osn ||
            src->dtype != u->shard->dtype) {
            ok = tsi_error_set(TS_ERR_FORMAT,
                               "%s: %s: '%s' is %s (a [%lld] %s shard of unit %d expected)", L->op,
                               path, key, src ? "of the wrong shape or dtype" : "missing",
                               (long long)osn, ts_dtype_name(u->shard->dtype), i) == TS_OK;
            break;
        }
        ok = copy_overlap(s, s->flat, src, q, osn);
        /* the optimizer's per-element state of this unit: optim.state.<i>.<slot> of [osn] */
        snprintf(key, sizeof key, "optim.state.%d.", i);
        size_t kl = strlen(key);
        for (int k = 0; ok && k < l.n; k++) {
            ts_tensor *t = l.tensors[k];
            if (strncmp(l.names[k], key, kl) || t->shape.ndim == 0) continue;
            if (t->shape.ndim != 1 || t->shape.dims[0] != osn) {
                ok = tsi_error_set(TS_ERR_FORMAT, "%s: %s: '%s' is not a [%lld] shard state", L->op,
                                   path, l.names[k], (long long)osn) == TS_OK;
                break;
            }
            const char *slot = l.names[k] + 6; /* "state.<i>.<slot>" */
            ts_tensor *dst = ts_tensor_list_get(&s->slots, slot);
            if (!dst) {
                ts_tensor *z = ts_zeros(TS_SHAPE(u->shard_n),
                                        (ts_opts){.dtype = t->dtype, .device = ts_cpu()});
                ok = z && ts_tensor_list_add(&s->slots, slot, z) == TS_OK;
                ts_release(z);
                dst = ok ? z : NULL;
            }
            ok = ok && copy_overlap(s, dst, t, q, osn);
        }
    }
    if (ok && q == 0) {
        L->first = l;
        L->first_path = path;
        return true;
    }
    ts_tensor_list_free(&l);
    free(path);
    return ok;
}

ts_status ts_fsdp_load_sharded(ts_module *fsdp, const char *dir, ts_fsdp_checkpoint *c) {
    static const char op[] = "fsdp_load_sharded";
    tsi_init();
    fsdp_module *f = tsi_fsdp_of(op, fsdp);
    if (!f) return ts_error();
    if (!dir || !*dir)
        return tsi_error_set(TS_ERR_ARG, "%s: dir is %s", op, dir ? "empty" : "NULL");
    ts_optim *opt = c ? c->optim : NULL;
    ts_grad_scaler *scaler = c ? c->scaler : NULL;
    load_ctx L = {.f = f, .op = op, .dir = dir};
    int *idx = calloc(2 * (size_t)f->n_units + 1, sizeof *idx);
    bool ok = !ts_error() && (idx || tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == 0);
    ok = ok && check_optim(op, f, opt, idx); /* a pending error: every rank fails */
    char *manifest = path_join(dir, MANIFEST);
    char *layout = layout_of(f);
    L.layout = layout;
    L.su = calloc((size_t)f->n_units, sizeof *L.su);
    if (ok && (!manifest || !layout || !L.su))
        ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == TS_OK;
    struct stat sb;
    if (ok && stat(manifest, &sb) != 0)
        ok = tsi_error_set(TS_ERR_IO,
                           "%s: %s: %s (no sharded checkpoint was committed in %s; "
                           "ts_fsdp_save_sharded writes it last)",
                           op, manifest, strerror(errno), dir) == TS_OK;
    if (ok) {
        char *fmt = ts_safetensors_metadata(manifest, "format");
        bool mok = fmt && !strcmp(fmt, "tessera-fsdp");
        free(fmt);
        L.gen = meta_u64(manifest, "generation", &mok);
        L.old_world = (int)meta_u64(manifest, "world", &mok);
        if (ts_error() == TS_ERR_OOM) /* not a malformed manifest */
            ok = false;
        else if (!mok || L.old_world < 1) {
            char msg[MSG_LEN];
            snprintf(msg, sizeof msg, "%s", ts_error() ? ts_error_message() : "");
            ts_error_clear();
            ok = tsi_error_set(TS_ERR_FORMAT,
                               "%s: %s is not a sharded checkpoint's manifest (format "
                               "tessera-fsdp, generation, world) %s",
                               op, manifest, msg) == TS_OK;
        }
    }
    /* this rank's range of each unit, and the old ranks whose blocks overlap it */
    bool *need = ok ? calloc((size_t)L.old_world, sizeof *need) : NULL;
    if (ok && !need) ok = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op) == TS_OK;
    if (need) need[0] = true; /* scalars, buffers, scaler: from the first rank's file */
    for (int i = 0; ok && i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        staged_unit *s = &L.su[i];
        s->start = (int64_t)f->rank * u->shard_n;
        s->n = u->numel - s->start;
        if (s->n > u->shard_n) s->n = u->shard_n;
        if (s->n < 0) s->n = 0;
        s->flat =
            ts_zeros(TS_SHAPE(u->shard_n), (ts_opts){.dtype = u->shard->dtype, .device = ts_cpu()});
        if (!s->flat) ok = false;
        int64_t osn = (u->numel + L.old_world - 1) / L.old_world;
        for (int64_t q = ok && s->n > 0 ? s->start / osn : 1,
                     q1 = s->n > 0 ? (s->start + s->n - 1) / osn : 0;
             q <= q1; q++)
            need[q] = true;
    }
    for (int q = 0; ok && q < L.old_world; q++)
        if (need[q]) ok = read_old(&L, q);
    free(need);
    /* the rest from the first rank's file, then everything staged before anything changes */
    uint64_t stp = 0, eb = 0;
    ts_rng_state rng = {0};
    ok = ok && read_i64(op, L.first_path, &L.first, "step", &stp) &&
         read_i64(op, L.first_path, &L.first, "epoch_batches", &eb) &&
         read_i64(op, L.first_path, &L.first, "rng.seed", &rng.seed) &&
         read_i64(op, L.first_path, &L.first, "rng.offset", &rng.offset);
    ts_tensor_list osd = {0}, ssd = {0}, bufs = {0}, bsrc = {0};
    for (int k = 0; ok && k < L.first.n; k++) {
        const char *n = L.first.names[k];
        ts_tensor *t = L.first.tensors[k];
        if (!strncmp(n, "optim.", 6) && t->shape.ndim == 0)
            ok = ts_tensor_list_add(&osd, n + 6, t) == TS_OK;
        else if (!strncmp(n, "scaler.", 7))
            ok = ts_tensor_list_add(&ssd, n + 7, t) == TS_OK;
    }
    for (int i = 0; ok && i < f->n_units; i++)
        for (int k = 0; ok && k < L.su[i].slots.n; k++)
            ok =
                ts_tensor_list_add(&osd, L.su[i].slots.names[k], L.su[i].slots.tensors[k]) == TS_OK;
    if (ok && opt && osd.n == 0)
        ok = tsi_error_set(TS_ERR_FORMAT,
                           "%s: %s holds no optimizer state (it was saved without an optimizer)",
                           op, L.first_path) == TS_OK;
    tsi_optim_staged *go = NULL;
    ok = ok && (!opt || states_by_leaf(f, idx, &osd));
    if (ok && opt && !(go = tsi_optim_load_stage("optim_load_state_dict", opt, &osd))) ok = false;
    if (ok) bufs = ts_module_named_buffers(f->module);
    for (int i = 0; ok && i < bufs.n; i++) {
        char key[512];
        snprintf(key, sizeof key, "buffer.%s", bufs.names[i]);
        ts_tensor *t = ts_tensor_list_get(&L.first, key);
        if (!t || !tsi_shape_equal(t->shape, bufs.tensors[i]->shape))
            ok = tsi_error_set(TS_ERR_ARG, "%s: %s: buffer '%s' is %s", op, L.first_path,
                               bufs.names[i], t ? "of another shape" : "missing") == TS_OK;
        else {
            ts_tensor *b = staged_for(op, t, bufs.tensors[i]);
            ok = b && ts_tensor_list_add(&bsrc, bufs.names[i], b) == TS_OK;
            ts_release(b);
        }
    }
    for (int i = 0; ok && i < f->n_units; i++) { /* the shards' values where the shards live */
        ts_tensor *t = staged_for(op, L.su[i].flat, f->units[i].shard);
        ts_release(L.su[i].flat);
        L.su[i].flat = t;
        ok = t != NULL;
    }
    /* the scaler's state read and checked now, applied in the commit (which cannot fail) */
    tsi_gs_staged gs = {0};
    if (ok && scaler && ssd.n > 0)
        ok = tsi_gs_load_stage("grad_scaler_load_state_dict", scaler, &ssd, &gs);
    /* every rank has staged its part (or failed): all change, or none */
    ok = tsi_fsdp_agree(f, op, ok);
    if (ok) {
        for (int i = 0; i < f->n_units; i++) commit_copy(f->units[i].shard, L.su[i].flat);
        for (int i = 0; i < bufs.n; i++) commit_copy(bufs.tensors[i], bsrc.tensors[i]);
        if (scaler) tsi_gs_load_commit(scaler, &gs);
        if (go) {
            tsi_optim_load_commit(go);
            go = NULL;
        }
        ts_rng_set_state(rng);
        if (c) {
            c->step = (int64_t)stp;
            c->epoch_batches = (int64_t)eb;
        }
    }
    tsi_optim_load_drop(go);
    ts_tensor_list_free(&osd);
    ts_tensor_list_free(&ssd);
    ts_tensor_list_free(&bufs);
    ts_tensor_list_free(&bsrc);
    for (int i = 0; L.su && i < f->n_units; i++) {
        ts_release(L.su[i].flat);
        ts_tensor_list_free(&L.su[i].slots);
    }
    free(L.su);
    ts_tensor_list_free(&L.first);
    free(L.first_path);
    free(idx);
    free(layout);
    free(manifest);
    return ok ? TS_OK : ts_error() ? ts_error() : TS_ERR_STATE;
}
