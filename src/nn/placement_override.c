/* placement_override.c — ts_place_opts.overrides, llama.cpp's --override-tensor: "pattern=device"
 * rules (POSIX extended regular expressions searched for in each tensor's full dotted name, the
 * first matching rule wins), the tensors they claim, and the hooks that keep a claimed tensor
 * stored on its device while its unit computes on the unit's device.
 *
 * An op that mixes devices fails in Tessera, so a claimed tensor is not used where it is stored:
 * for each forward of the unit module that holds it, a pre-forward hook puts a copy of it on the
 * unit's device (ts_to: recorded by autograd, so its gradient flows back to the stored tensor) in
 * the module's slot, and a post-forward hook puts the stored tensor back (a buffer the forward
 * changed, as batch norm's running statistics, is copied back first) and drops the copy. The copy
 * is weight streaming for one tensor (src/nn/weight_stream.c does it for whole units). */
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"
#include "nn/placement_internal.h"

static const char *OP = "module_place";

struct tsi_ovr_rule {
    regex_t re;
    char *text; /* the entry, "pattern=device", for errors */
    int dev;    /* budget index */
    int hits;
};

static bool oom(void) { return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false; }

/* ------------------------------------------------------------------ rules */
static bool parse_entry(tsi_ovr *o, const char *entry, const ts_mem_budget *b, int nb) {
    const char *eq = strrchr(entry, '=');
    if (!eq)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: override '%s' has no '=' (expected pattern=device, e.g. "
                             "blocks\\.0\\.=cpu)",
                             OP, entry),
               false;
    if (eq == entry)
        return tsi_error_set(TS_ERR_ARG, "%s: override '%s' has an empty pattern", OP, entry),
               false;
    ts_device d;
    if (ts_device_parse(eq + 1, &d) != TS_OK || !ts_device_is_available(d)) {
        ts_error_clear();
        return tsi_error_set(
                   TS_ERR_ARG,
                   "%s: override '%s': unknown device '%s' (devices here: cpu, sim:0..%d, "
                   "cuda:0..%d)",
                   OP, entry, eq + 1, ts_device_count(TS_SIM) - 1, ts_device_count(TS_CUDA) - 1),
               false;
    }
    int dev = -1;
    for (int i = 0; i < nb && dev < 0; i++)
        if (ts_device_equal(tsi_resolve_device(b[i].device), tsi_resolve_device(d))) dev = i;
    if (dev < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: override '%s': %s has no budget (add %s=SIZE to the budgets: "
                             "the tensors are charged there)",
                             OP, entry, ts_device_str(d), ts_device_str(d)),
               false;
    struct tsi_ovr_rule *r = &o->rules[o->n_rules];
    const size_t plen = (size_t)(eq - entry);
    char *pattern = malloc(plen + 1);
    r->text = tsi_strdup(entry);
    if (!pattern || !r->text) {
        free(pattern);
        free(r->text);
        return oom();
    }
    memcpy(pattern, entry, plen);
    pattern[plen] = '\0';
    const int rc = regcomp(&r->re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char why[128];
        regerror(rc, &r->re, why, sizeof why);
        tsi_error_set(TS_ERR_ARG, "%s: override '%s': bad regular expression '%s': %s", OP, entry,
                      pattern, why);
        free(pattern);
        free(r->text);
        return false;
    }
    free(pattern);
    r->dev = dev;
    r->hits = 0;
    o->n_rules++;
    return true;
}

bool tsi_ovr_parse(const char *spec, const ts_mem_budget *b, int nb, tsi_ovr *o) {
    *o = (tsi_ovr){0};
    if (!spec || !*spec) return true;
    int n = 1;
    for (const char *p = spec; *p; p++) n += *p == ',';
    if (!(o->rules = calloc((size_t)n, sizeof *o->rules))) return oom();
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0) {
            tsi_error_set(TS_ERR_ARG, "%s: empty override in '%s' (expected pattern=device,...)",
                          OP, spec);
            return tsi_ovr_free(o), false;
        }
        char *entry = malloc(len + 1);
        if (!entry) return oom(), tsi_ovr_free(o), false;
        memcpy(entry, p, len);
        entry[len] = '\0';
        const bool ok = parse_entry(o, entry, b, nb);
        free(entry);
        if (!ok) return tsi_ovr_free(o), false;
        if (!comma) break;
        p = comma + 1;
    }
    return true;
}

void tsi_ovr_free(tsi_ovr *o) {
    for (int i = 0; i < o->n_rules; i++) {
        regfree(&o->rules[i].re);
        free(o->rules[i].text);
    }
    free(o->rules);
    for (int i = 0; i < o->n; i++) free(o->t[i].name);
    free(o->t);
    free(o->seen);
    *o = (tsi_ovr){0};
}

/* ------------------------------------------------------------------ claiming */
int tsi_ovr_find(const tsi_ovr *o, const ts_tensor *t) {
    for (int i = 0; i < o->n; i++)
        if (o->t[i].t == t) return i;
    return -1;
}

static bool seen_before(tsi_ovr *o, ts_tensor *t, bool *ok) {
    for (int i = 0; i < o->n_seen; i++)
        if (o->seen[i] == t) return true;
    if (o->n_seen == o->cap_seen) {
        const int c = o->cap_seen ? 2 * o->cap_seen : 64;
        ts_tensor **s = realloc(o->seen, (size_t)c * sizeof *s);
        if (!s) return *ok = oom(), true;
        o->seen = s, o->cap_seen = c;
    }
    o->seen[o->n_seen++] = t;
    return false;
}

typedef struct scan_ctx {
    tsi_ovr *o;
    int unit;
    ts_module *hook;
    bool with_grads;
} scan_ctx;

static bool claim(scan_ctx *c, ts_module *m, int slot, bool param, const char *name) {
    tsi_ovr *o = c->o;
    ts_tensor *t = (param ? m->impl->params.items : m->impl->buffers.items)[slot];
    bool ok = true;
    if (seen_before(o, t, &ok)) return ok;
    for (int r = 0; r < o->n_rules; r++) {
        if (regexec(&o->rules[r].re, name, 0, NULL, 0)) continue;
        if (o->n == o->cap) {
            const int cap = o->cap ? 2 * o->cap : 16;
            tsi_ovr_tensor *n = realloc(o->t, (size_t)cap * sizeof *n);
            if (!n) return oom();
            o->t = n, o->cap = cap;
        }
        char *copy = tsi_strdup(name);
        if (!copy) return oom();
        o->t[o->n++] = (tsi_ovr_tensor){
            .t = t,
            .owner = m,
            .slot = slot,
            .param = param,
            .name = copy,
            .dev = o->rules[r].dev,
            .unit = c->unit,
            .hook = c->hook,
            .bytes = ts_nbytes(t) * (param && c->with_grads ? 2 : 1),
        };
        o->rules[r].hits++;
        break;
    }
    return true;
}

/* prefix + name (+ "." when dot) in a malloc'ed string */
static char *join(const char *prefix, const char *name, bool dot) {
    const size_t a = strlen(prefix), b = strlen(name);
    char *s = malloc(a + b + 2);
    if (!s) return NULL;
    memcpy(s, prefix, a);
    memcpy(s + a, name, b);
    s[a + b] = dot ? '.' : '\0';
    s[a + b + 1] = '\0';
    return s;
}

static bool scan_tree(scan_ctx *c, ts_module *m, const char *prefix) {
    const struct ts_module_impl *im = m->impl;
    for (int kind = 0; kind < 2; kind++) {
        const tsi_named *l = kind ? &im->buffers : &im->params;
        for (int i = 0; i < l->n; i++) {
            char *name = join(prefix, l->names[i], false);
            const bool ok = name && claim(c, m, i, kind == 0, name);
            free(name);
            if (!ok) return name ? false : oom();
        }
    }
    for (int i = 0; i < im->children.n; i++) {
        char *p = join(prefix, im->children.names[i], true);
        const bool ok = p && scan_tree(c, im->children.items[i], p);
        free(p);
        if (!ok) return p ? false : oom();
    }
    return true;
}

static const char *name_in_parent(ts_module *c) {
    const tsi_named *kids = &c->impl->parent->impl->children;
    for (int i = 0; i < kids->n; i++)
        if (kids->items[i] == c) return kids->names[i];
    return "?";
}

/* m's root-relative path with a trailing '.' ("blocks.0."; "" for the root), malloc'ed */
static char *path_of(ts_module *m) {
    size_t len = 0;
    for (ts_module *c = m; c->impl->parent; c = c->impl->parent)
        len += strlen(name_in_parent(c)) + 1;
    char *s = malloc(len + 1);
    if (!s) return NULL;
    s[len] = '\0';
    for (ts_module *c = m; c->impl->parent; c = c->impl->parent) {
        const char *n = name_in_parent(c);
        const size_t k = strlen(n);
        len -= k + 1;
        memcpy(s + len, n, k);
        s[len + k] = '.';
    }
    return s;
}

bool tsi_ovr_scan(tsi_ovr *o, ts_module *m, int unit, bool with_grads) {
    if (!o->n_rules) return true;
    char *path = path_of(m);
    if (!path) return oom();
    scan_ctx c = {.o = o, .unit = unit, .hook = m, .with_grads = with_grads};
    const bool ok = scan_tree(&c, m, path);
    free(path);
    return ok;
}

bool tsi_ovr_all_used(const tsi_ovr *o) {
    for (int i = 0; i < o->n_rules; i++)
        if (!o->rules[i].hits)
            return tsi_error_set(
                       TS_ERR_ARG,
                       "%s: override '%s' matches none of the model's parameters and "
                       "buffers%s (names as in named_parameters: blocks.0.linear1.weight)",
                       OP, o->rules[i].text, i ? " left by the overrides before it" : ""),
                   false;
    return true;
}

bool tsi_ovr_move(const tsi_ovr *o, const ts_mem_budget *b) {
    for (int i = 0; i < o->n; i++) {
        ts_tensor *t = o->t[i].t;
        const ts_device d = tsi_resolve_device(b[o->t[i].dev].device);
        if (tsi_tensor_move_storage(t, d) != TS_OK) return false;
        if (t->grad && tsi_tensor_move_storage(t->grad, d) != TS_OK) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ the hooks */
typedef struct live {
    ts_module *owner;
    int slot;
    bool param;
    bool until_root; /* a GPT's token embedding: the tied head uses it after the unit */
    ts_device use;   /* its unit's device */
    ts_module *hook;
    ts_tensor *host; /* the stored tensor: in the slot while not swapped */
    ts_tensor *copy; /* while swapped: in the slot, one reference of ours */
    uint64_t ver;    /* the copy's version when made */
} live;

typedef struct state {
    ts_module *root;
    live *e;
    int n;
    ts_module **hm; /* the hooked modules, their pre and post hooks */
    int *pre, *post;
    int n_hm;
    int root_post;
    void (*destroy)(ts_module *);
    struct state *next;
} state;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static state *reg_head;

/* the root's state, taken out of the registry */
static state *take(ts_module *root) {
    pthread_mutex_lock(&reg_mu);
    state **p = &reg_head;
    while (*p && (*p)->root != root) p = &(*p)->next;
    state *s = *p;
    if (s) *p = s->next;
    pthread_mutex_unlock(&reg_mu);
    return s;
}

static void **slot_of(live *e) {
    return &(e->param ? &e->owner->impl->params : &e->owner->impl->buffers)->items[e->slot];
}

/* the stored tensor back in its slot (a changed buffer copied back first); the copy dropped */
static bool swap_out(live *e) {
    if (!e->copy) return true;
    *slot_of(e) = e->host;
    bool ok = true;
    if (!e->param && ts_version(e->copy) != e->ver) {
        ok = tsi_scope_open();
        if (ok) {
            ts_no_grad_begin();
            ok = ts_copy_(e->host, e->copy) != NULL;
            ts_no_grad_end();
            ts_scope_end();
        }
    }
    ts_release(e->copy);
    e->copy = NULL;
    return ok;
}

static bool swap_in(live *e) {
    if (!swap_out(e)) return false; /* a forward that failed before its post hook */
    ts_tensor *h = *slot_of(e);
    e->host = h;
    if (ts_device_equal(ts_device_of(h), e->use)) return true;
    ts_tensor *c = NULL;
    if (tsi_scope_open()) { /* the copy lives until swap_out, not with this scope */
        c = ts_retain(ts_to(h, e->use));
        ts_scope_end();
    }
    if (!c) return false;
    e->copy = c;
    e->ver = ts_version(c);
    *slot_of(e) = c;
    return true;
}

static ts_status pre_hook(ts_module *m, ts_tensor *x, void *ctx) {
    (void)x;
    state *s = ctx;
    for (int i = 0; i < s->n; i++)
        if (s->e[i].hook == m && !swap_in(&s->e[i])) return ts_error();
    return TS_OK;
}

static ts_tensor *post_hook(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)x;
    state *s = ctx;
    bool ok = true;
    for (int i = 0; i < s->n; i++)
        if (s->e[i].hook == m && !s->e[i].until_root) ok = swap_out(&s->e[i]) && ok;
    return ok ? y : NULL;
}

static ts_tensor *root_post_hook(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x;
    state *s = ctx;
    bool ok = true;
    for (int i = 0; i < s->n; i++) ok = swap_out(&s->e[i]) && ok;
    return ok ? y : NULL;
}

static void state_free(state *s) {
    for (int i = 0; i < s->n; i++) swap_out(&s->e[i]);
    free(s->e);
    free(s->hm);
    free(s->pre);
    free(s->post);
    free(s);
}

static void remove_hooks(state *s) {
    for (int i = 0; i < s->n_hm; i++) {
        if (s->pre[i] > 0) ts_module_remove_forward_hook(s->hm[i], s->pre[i]);
        if (s->post[i] > 0) ts_module_remove_forward_hook(s->hm[i], s->post[i]);
    }
    if (s->root_post > 0) ts_module_remove_forward_hook(s->root, s->root_post);
}

/* the root freed: its slots hold the stored tensors again, then its own destroy runs */
static void ovr_destroy(ts_module *root) {
    state *s = take(root);
    if (!s) return;
    root->destroy = s->destroy;
    const ts_status before = ts_error();
    state_free(s);
    if (ts_error() != before && before == TS_OK) ts_error_clear();
    if (root->destroy) root->destroy(root);
}

void tsi_ovr_restore(ts_module *root) {
    pthread_mutex_lock(&reg_mu);
    state *s = reg_head;
    while (s && s->root != root) s = s->next;
    pthread_mutex_unlock(&reg_mu);
    for (int i = 0; s && i < s->n; i++) swap_out(&s->e[i]);
}

void tsi_ovr_unplace(ts_module *root) {
    state *s = take(root);
    if (!s) return;
    remove_hooks(s);
    root->destroy = s->destroy;
    state_free(s);
}

bool tsi_ovr_install(const tsi_ovr *o, ts_module *root, const ts_device *unit_dev, bool gpt) {
    if (!o->n) return true;
    state *s = calloc(1, sizeof *s);
    if (!s) return oom();
    s->root = root;
    s->e = calloc((size_t)o->n, sizeof *s->e);
    s->hm = calloc((size_t)o->n, sizeof *s->hm);
    s->pre = calloc((size_t)o->n, sizeof *s->pre);
    s->post = calloc((size_t)o->n, sizeof *s->post);
    if (!s->e || !s->hm || !s->pre || !s->post) return state_free(s), oom();
    const int emb = gpt ? tsi_named_find(&root->impl->children, "tok_emb") : -1;
    ts_module *tok_emb = emb >= 0 ? root->impl->children.items[emb] : NULL;
    bool need_root = false;
    for (int i = 0; i < o->n; i++) {
        const tsi_ovr_tensor *t = &o->t[i];
        live *e = &s->e[s->n++];
        *e = (live){.owner = t->owner,
                    .slot = t->slot,
                    .param = t->param,
                    .until_root = t->hook == tok_emb,
                    .use = tsi_resolve_device(unit_dev[t->unit]),
                    .hook = t->hook,
                    .host = t->t};
        need_root = need_root || e->until_root;
        int k = 0;
        while (k < s->n_hm && s->hm[k] != t->hook) k++;
        if (k == s->n_hm) s->hm[s->n_hm++] = t->hook;
    }
    bool ok = true;
    for (int k = 0; k < s->n_hm && ok; k++) {
        ok = (s->pre[k] = ts_module_register_forward_pre_hook(s->hm[k], pre_hook, s)) > 0;
        ok = ok && (s->post[k] = ts_module_register_forward_hook(s->hm[k], post_hook, s)) > 0;
    }
    if (ok && need_root)
        ok = (s->root_post = ts_module_register_forward_hook(root, root_post_hook, s)) > 0;
    if (!ok) {
        remove_hooks(s);
        state_free(s);
        return false;
    }
    s->destroy = root->destroy;
    root->destroy = ovr_destroy;
    pthread_mutex_lock(&reg_mu);
    s->next = reg_head;
    reg_head = s;
    pthread_mutex_unlock(&reg_mu);
    return true;
}
