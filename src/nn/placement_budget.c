/* placement_budget.c — memory budgets ("sim:0=2MiB,cpu=64GiB") and the placement plan's text
 * (tessera/placement.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"
#include "nn/placement_internal.h"
#include "tessera/placement.h"

static const struct {
    const char *suffix;
    double mult;
} k_units[] = {
    {"", 1.0},
    {"B", 1.0},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
};

/* "2MiB" -> bytes; false for anything else */
static bool parse_size(const char *s, size_t *out) {
    if (!(*s >= '0' && *s <= '9') && *s != '.') return false;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) return false;
    for (size_t i = 0; i < sizeof k_units / sizeof k_units[0]; i++)
        if (!strcmp(end, k_units[i].suffix)) {
            double b = floor(v * k_units[i].mult);
            if (b >= 18446744073709551615.0 || b > (double)SIZE_MAX) return false;
            *out = (size_t)b;
            return true;
        }
    return false;
}

ts_status ts_mem_budget_parse(const char *s, ts_mem_budget *out, int cap, int *n) {
    const char *op = "mem_budget_parse";
    tsi_init();
    if (n) *n = 0;
    if (!s || !n || (!out && cap > 0) || cap < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: the budget string, out or n is NULL", op);
    if (!*s)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: empty budget list (expected device=size,..., e.g. "
                             "sim:0=2MiB,cpu=64GiB)",
                             op);
    int count = 0;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char entry[128];
        if (len == 0)
            return tsi_error_set(TS_ERR_ARG, "%s: empty entry in '%s' (expected device=size)", op,
                                 s);
        if (len >= sizeof entry)
            return tsi_error_set(TS_ERR_ARG, "%s: entry '%.40s...' is too long", op, p);
        memcpy(entry, p, len);
        entry[len] = '\0';
        char *eq = strchr(entry, '=');
        if (!eq)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: entry '%s' has no '=' (expected device=size, e.g. "
                                 "sim:0=2MiB)",
                                 op, entry);
        *eq = '\0';
        ts_device d;
        if (ts_device_parse(entry, &d) != TS_OK || !ts_device_is_available(d)) {
            ts_error_clear();
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: unknown device '%s' in '%s=%s' (devices here: cpu, "
                                 "sim:0..%d, cuda:0..%d)",
                                 op, entry, entry, eq + 1, ts_device_count(TS_SIM) - 1,
                                 ts_device_count(TS_CUDA) - 1);
        }
        size_t bytes;
        if (!parse_size(eq + 1, &bytes))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: bad size '%s' for %s (a number with an optional suffix "
                                 "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
                                 op, eq + 1, entry);
        for (int i = 0; i < count; i++)
            if (ts_device_equal(out[i].device, d))
                return tsi_error_set(TS_ERR_ARG, "%s: device %s is given twice in '%s'", op,
                                     ts_device_str(d), s);
        if (count == cap)
            return tsi_error_set(TS_ERR_ARG, "%s: more than %d budgets in '%s'", op, cap, s);
        out[count++] = (ts_mem_budget){.device = d, .bytes = bytes};
        if (!comma) break;
        p = comma + 1;
    }
    *n = count;
    return TS_OK;
}

void tsi_fmt_bytes(size_t b, char *buf, size_t n) {
    if (b < 1024)
        snprintf(buf, n, "%zu B", b);
    else if (b < (size_t)1 << 20)
        snprintf(buf, n, "%.2f KiB", (double)b / 1024.0);
    else if (b < (size_t)1 << 30)
        snprintf(buf, n, "%.2f MiB", (double)b / 1048576.0);
    else
        snprintf(buf, n, "%.2f GiB", (double)b / 1073741824.0);
}

char *ts_place_plan_str(const ts_place_plan *p) {
    if (!p) return tsi_error_set(TS_ERR_ARG, "place_plan_str: plan is NULL"), NULL;
    tsi_strbuf b = {0};
    char x[32], y[32];
    for (int i = 0; i < p->n_units; i++) {
        const ts_place_unit *u = &p->units[i];
        tsi_fmt_bytes(u->param_bytes, x, sizeof x);
        tsi_sb_printf(&b, "%-24s -> %-8s %s", u->name, ts_device_str(u->device), x);
        if (u->act_bytes) {
            tsi_fmt_bytes(u->act_bytes, y, sizeof y);
            tsi_sb_printf(&b, " + %s activations", y);
        }
        tsi_sb_puts(&b, "\n");
    }
    for (int i = 0; i < p->n_overrides; i++) {
        const ts_place_override *o = &p->overrides[i];
        tsi_fmt_bytes(o->bytes, x, sizeof x);
        tsi_sb_printf(&b, "%-24s -> %-8s %s (override, used on %s)\n", o->name,
                      ts_device_str(o->device), x, ts_device_str(o->used_on));
    }
    for (int i = 0; i < p->n_devices; i++) {
        tsi_fmt_bytes(p->used[i].bytes, x, sizeof x);
        tsi_fmt_bytes(p->budgets ? p->budgets[i].bytes : 0, y, sizeof y);
        tsi_sb_printf(&b, "%s: %s of %s\n", ts_device_str(p->used[i].device), x, y);
    }
    if (b.failed || !b.s) {
        free(b.s);
        return tsi_error_set(TS_ERR_OOM, "place_plan_str: out of host memory"), NULL;
    }
    return b.s;
}

void ts_place_plan_free(ts_place_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_units && p->units; i++) free(p->units[i].name);
    for (int i = 0; i < p->n_overrides && p->overrides; i++) free(p->overrides[i].name);
    free(p->overrides);
    free(p->units);
    free(p->used);
    free(p->budgets);
    *p = (ts_place_plan){0};
}
