/* state_snapshot.c — host copies of model, optimizer and scaler state (state_snapshot.h). */
#include "state_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static char *dup_name(const char *prefix, const char *name) {
    size_t a = strlen(prefix), b = strlen(name);
    char *s = malloc(a + b + 1);
    if (s) {
        memcpy(s, prefix, a);
        memcpy(s + a, name, b + 1);
    }
    return s;
}

void ts_snapshot_add(ts_snapshot *s, const char *prefix, const ts_tensor_list *l) {
    if (ts_error()) s->failed = true;
    int64_t total = s->n ? s->offset[s->n] : 0, extra = 0;
    for (int i = 0; i < l->n; i++) extra += ts_numel(l->tensors[i]);
    char **names = realloc(s->names, (size_t)(s->n + l->n) * sizeof *names);
    if (names) s->names = names;
    int64_t *off = realloc(s->offset, (size_t)(s->n + l->n + 1) * sizeof *off);
    if (off) s->offset = off;
    double *vals = realloc(s->vals, (size_t)(total + extra + 1) * sizeof *vals);
    if (vals) s->vals = vals;
    if (!names || !off || !vals) {
        s->failed = true;
        return;
    }
    if (s->n == 0) s->offset[0] = 0;
    for (int i = 0; i < l->n; i++) {
        ts_tensor *t = l->tensors[i];
        int64_t k = ts_numel(t);
        ts_scope_begin();
        ts_tensor *h = ts_to_dtype(ts_to(t, ts_cpu()), TS_F64);
        if (ts_copy_to_host(h, s->vals + total, (size_t)k * sizeof(double)) != TS_OK)
            s->failed = true;
        ts_scope_end();
        s->names[s->n] = dup_name(prefix, l->names[i]);
        total += k;
        s->offset[++s->n] = total;
    }
    if (ts_error()) s->failed = true;
}

ts_snapshot ts_snapshot_take(ts_module *m, ts_optim *o, ts_grad_scaler *g) {
    ts_snapshot s = {0};
    if (m) {
        ts_tensor_list l = ts_module_state_dict(m);
        ts_snapshot_add(&s, "model.", &l);
        ts_tensor_list_free(&l);
    }
    if (o) {
        ts_tensor_list l = ts_optim_state_dict(o);
        ts_snapshot_add(&s, "optim.", &l);
        ts_tensor_list_free(&l);
    }
    if (g) {
        ts_tensor_list l = ts_grad_scaler_state_dict(g);
        ts_snapshot_add(&s, "scaler.", &l);
        ts_tensor_list_free(&l);
    }
    return s;
}

static bool same_value(double a, double b) { return a == b || (a != a && b != b); }

static int find_name(const ts_snapshot *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (s->names[i] && strcmp(s->names[i], name) == 0) return i;
    return -1;
}

/* Entries are matched by name (a file's order is its own). */
const char *ts_snapshot_diff(const ts_snapshot *a, const ts_snapshot *b) {
    static char buf[256];
    if (a->failed || b->failed) return "a snapshot failed";
    if (a->n != b->n) {
        snprintf(buf, sizeof buf, "%d tensors against %d", a->n, b->n);
        return buf;
    }
    for (int i = 0; i < a->n; i++) {
        int j = a->names[i] ? find_name(b, a->names[i]) : -1;
        if (j < 0) {
            snprintf(buf, sizeof buf, "%s is missing from the second",
                     a->names[i] ? a->names[i] : "?");
            return buf;
        }
        int64_t na = a->offset[i + 1] - a->offset[i], nb = b->offset[j + 1] - b->offset[j];
        if (na != nb) {
            snprintf(buf, sizeof buf, "%s: %lld values against %lld", a->names[i], (long long)na,
                     (long long)nb);
            return buf;
        }
        for (int64_t k = 0; k < na; k++) {
            double x = a->vals[a->offset[i] + k], y = b->vals[b->offset[j] + k];
            if (!same_value(x, y)) {
                snprintf(buf, sizeof buf, "%s[%lld]: %.17g against %.17g", a->names[i],
                         (long long)k, x, y);
                return buf;
            }
        }
    }
    return "";
}

bool ts_snapshot_equal(const ts_snapshot *a, const ts_snapshot *b) {
    return ts_snapshot_diff(a, b)[0] == '\0';
}

void ts_snapshot_free(ts_snapshot *s) {
    for (int i = 0; i < s->n; i++) free(s->names[i]);
    free(s->names);
    free(s->offset);
    free(s->vals);
    *s = (ts_snapshot){0};
}

void ts_snapshot_check(const char *what, const ts_snapshot *got, const ts_snapshot *want) {
    const char *d = ts_snapshot_diff(got, want);
    if (d[0]) fprintf(stderr, "  %s: %s\n", what, d);
    CHECK(d[0] == '\0');
}

ts_snapshot ts_snapshot_with_grads(ts_module *m) {
    ts_tensor_list grads = {0};
    ts_tensor_list ps = ts_module_named_parameters(m);
    for (int i = 0; i < ps.n; i++) ts_tensor_list_add(&grads, ps.names[i], ts_grad(ps.tensors[i]));
    ts_snapshot s = ts_snapshot_take(m, NULL, NULL);
    ts_snapshot_add(&s, "grad.", &grads);
    ts_tensor_list_free(&ps), ts_tensor_list_free(&grads);
    return s;
}
