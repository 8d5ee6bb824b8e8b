/* module_repr.c — PyTorch's print(model) text, the summary, and the string helpers behind them. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"

/* ------------------------------------------------------------------ strings */
/* Python's repr(float): the shortest digits that read back to v, in scientific notation when the
 * decimal exponent is below -4 or at least 16, fixed with at least one decimal otherwise. */
void tsi_py_float(double v, char *out, size_t n) {
    if (isnan(v)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v < 0 ? "-inf" : "inf");
        return;
    }
    char sci[40];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
        if (strtod(sci, NULL) == v) break;
    }
    snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
    int exp10 = atoi(strchr(sci, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16) {
        snprintf(out, n, "%s", sci); /* C's "1e-05" / "1e+16" are Python's too */
        return;
    }
    int decimals = prec - 1 - exp10;
    snprintf(out, n, "%.*f", decimals > 0 ? decimals : 0, v);
    if (!strchr(out, '.') && strlen(out) + 3 <= n) strcat(out, ".0");
}

/* ------------------------------------------------------------------ repr */
/* Python's nn.modules.module._addindent: every line but the first gets `spaces` more. */
static void put_indented(tsi_strbuf *b, const char *s, int spaces) {
    for (const char *p = s; *p; p++) {
        char c[2] = {*p, 0};
        tsi_sb_puts(b, c);
        if (*p == '\n')
            for (int i = 0; i < spaces; i++) tsi_sb_puts(b, " ");
    }
}

static char *repr_of(ts_module *m);

/* Module.__repr__: a one-liner when there is one line of extra_repr and no children, else the
 * extra lines and "(name): child" lines, each indented by two. */
static void repr_into(tsi_strbuf *b, ts_module *m) {
    char extra[1024] = "";
    if (m->extra_repr) m->extra_repr(m, extra, sizeof extra);
    const tsi_named *c = &m->impl->children;
    tsi_sb_printf(b, "%s(", m->type_name);
    if (extra[0] && !strchr(extra, '\n') && c->n == 0) {
        tsi_sb_puts(b, extra);
    } else if (extra[0] || c->n) {
        if (extra[0]) {
            tsi_sb_puts(b, "\n  ");
            put_indented(b, extra, 2);
        }
        for (int i = 0; i < c->n; i++) {
            char *child = repr_of(c->items[i]);
            if (!child) {
                b->failed = true;
                return;
            }
            tsi_sb_printf(b, "\n  (%s): ", c->names[i]);
            put_indented(b, child, 2);
            free(child);
        }
        tsi_sb_puts(b, "\n");
    }
    tsi_sb_puts(b, ")");
}

static char *repr_of(ts_module *m) {
    tsi_strbuf b = {0};
    repr_into(&b, m);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *ts_module_repr(ts_module *m) {
    if (!m) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "module_repr: module is NULL");
        return NULL;
    }
    char *s = repr_of(m);
    if (!s) tsi_error_set(TS_ERR_OOM, "module_repr: out of host memory");
    return s;
}

void ts_module_summary(ts_module *m) {
    char *s = ts_module_repr(m);
    if (!s) return;
    ts_tensor_list l = ts_module_named_parameters(m);
    int64_t total = 0, trainable = 0;
    for (int i = 0; i < l.n; i++) {
        int64_t n = tsi_numel(l.tensors[i]->shape);
        total += n;
        if (l.tensors[i]->requires_grad) trainable += n;
    }
    ts_tensor_list_free(&l);
    printf("%s\nTotal parameters: %lld\nTrainable parameters: %lld\n", s, (long long)total,
           (long long)trainable);
    free(s);
}
