/* logger.c — the training logger: metrics.jsonl lines and a TensorBoard event file per run. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/internal.h"
#include "core/strbuf.h"
#include "io/atomic_file.h"
#include "io/tfevents.h"

struct ts_logger {
    tsi_wfile jsonl, events;
};

static double wall_clock(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ JSON text */
/* A JSON string: quotes, backslashes and control characters escaped; the caller checked UTF-8. */
static void jb_string(tsi_strbuf *b, const char *s) {
    tsi_sb_putn(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        tsi_sb_putn(b, run, (size_t)(s - run));
        char esc[8];
        switch (c) {
        case '"':
            tsi_sb_puts(b, "\\\"");
            break;
        case '\\':
            tsi_sb_puts(b, "\\\\");
            break;
        case '\n':
            tsi_sb_puts(b, "\\n");
            break;
        case '\t':
            tsi_sb_puts(b, "\\t");
            break;
        case '\r':
            tsi_sb_puts(b, "\\r");
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", c);
            tsi_sb_puts(b, esc);
        }
        run = s + 1;
    }
    tsi_sb_putn(b, run, (size_t)(s - run));
    tsi_sb_putn(b, "\"", 1);
}

/* The shortest of %.15g, %.16g, %.17g that reads back as v, so 0.53 stays "0.53" and every value
 * round-trips exactly; NaN and infinities, which JSON lacks, become null. */
static void jb_number(tsi_strbuf *b, double v) {
    if (!isfinite(v)) {
        tsi_sb_puts(b, "null");
        return;
    }
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    /* a locale with a decimal comma changes both printf and strtod; JSON wants a point */
    for (char *c = s; *c; c++)
        if (!(*c >= '0' && *c <= '9') && *c != '-' && *c != '+' && *c != 'e') *c = '.';
    tsi_sb_puts(b, s);
}

static void jb_int(tsi_strbuf *b, int64_t v) {
    char s[24];
    snprintf(s, sizeof s, "%lld", (long long)v);
    tsi_sb_puts(b, s);
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): TensorBoard's
 * protobuf parser rejects a string field that is not, and JSON readers may too. */
static bool valid_utf8(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        int extra;
        unsigned min;
        if (c < 0x80) {
            s++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1, min = 0x80, c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2, min = 0x800, c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3, min = 0x10000, c &= 0x07;
        } else {
            return false;
        }
        for (int i = 1; i <= extra; i++) {
            if ((s[i] & 0xC0) != 0x80) return false; /* also stops at the terminator */
            c = c << 6 | (s[i] & 0x3Fu);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
        s += extra + 1;
    }
    return true;
}

static ts_status put_line(ts_logger *lg, const char *op, tsi_strbuf *b) {
    tsi_sb_putn(b, "}\n", 2);
    ts_status st = b->failed ? tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op)
                             : tsi_wfile_put(&lg->jsonl, op, b->s, b->len);
    free(b->s);
    return st;
}

/* ------------------------------------------------------------------ public */
ts_logger *ts_logger_open(const char *dir) {
    const char *op = "logger_open";
    if (!dir || !*dir) {
        tsi_error_set(TS_ERR_ARG, "%s: the folder name is %s", op, dir ? "empty" : "NULL");
        return NULL;
    }
    if (tsi_make_dirs(op, dir) != TS_OK) return NULL;
    ts_logger *lg = calloc(1, sizeof *lg);
    char *path = malloc(strlen(dir) + sizeof "/metrics.jsonl");
    if (!lg || !path) {
        free(lg);
        free(path);
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    sprintf(path, "%s/metrics.jsonl", dir);
    /* appending lets a resumed run continue the same metrics file */
    int err = tsi_wfile_open(&lg->jsonl, path, false);
    if (err) {
        tsi_error_set(TS_ERR_IO, "%s: cannot open '%s': %s", op, path, strerror(err));
        free(path);
        free(lg);
        return NULL;
    }
    free(path);
    if (tsi_tfevents_open(&lg->events, op, dir, wall_clock()) != TS_OK) {
        tsi_wfile_close(&lg->jsonl, op);
        free(lg);
        return NULL;
    }
    return lg;
}

ts_status ts_logger_scalar(ts_logger *lg, const char *tag, int64_t step, double value) {
    const char *op = "logger_scalar";
    if (!lg || !tag) return tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, lg ? "tag" : "logger");
    if (!*tag) return tsi_error_set(TS_ERR_ARG, "%s: the tag is empty", op);
    if (!valid_utf8(tag))
        return tsi_error_set(TS_ERR_ARG, "%s: tag '%.200s' is not valid UTF-8", op, tag);
    double now = wall_clock();
    tsi_strbuf b = {0};
    tsi_sb_puts(&b, "{\"step\": ");
    jb_int(&b, step);
    tsi_sb_puts(&b, ", \"tag\": ");
    jb_string(&b, tag);
    tsi_sb_puts(&b, ", \"value\": ");
    jb_number(&b, value);
    tsi_sb_puts(&b, ", \"wall_time\": ");
    jb_number(&b, now);
    ts_status st = put_line(lg, op, &b);
    /* the event file is written even when the JSON file failed: each is useful without the other */
    /* simple_value is a float; past its range the value is an infinity, stated so the conversion
     * is defined without relying on IEEE annex F */
    float v32 = value > FLT_MAX ? INFINITY : value < -FLT_MAX ? -INFINITY : (float)value;
    ts_status st2 = tsi_tfevents_scalar(&lg->events, op, now, step, tag, v32);
    return st != TS_OK ? st : st2;
}

ts_status ts_logger_record(ts_logger *lg, int64_t step, int n, const char *const *keys,
                           const double *values) {
    const char *op = "logger_record";
    if (!lg) return tsi_error_set(TS_ERR_ARG, "%s: logger is NULL", op);
    if (n < 0) return tsi_error_set(TS_ERR_ARG, "%s: negative field count %d", op, n);
    if (n > 0 && (!keys || !values))
        return tsi_error_set(TS_ERR_ARG, "%s: %d fields but %s is NULL", op, n,
                             keys ? "values" : "keys");
    for (int i = 0; i < n; i++) {
        if (!keys[i]) return tsi_error_set(TS_ERR_ARG, "%s: key %d is NULL", op, i);
        if (!valid_utf8(keys[i]))
            return tsi_error_set(TS_ERR_ARG, "%s: key %d '%.200s' is not valid UTF-8", op, i,
                                 keys[i]);
    }
    tsi_strbuf b = {0};
    tsi_sb_puts(&b, "{\"step\": ");
    jb_int(&b, step);
    for (int i = 0; i < n; i++) {
        tsi_sb_puts(&b, ", ");
        jb_string(&b, keys[i]);
        tsi_sb_puts(&b, ": ");
        jb_number(&b, values[i]);
    }
    return put_line(lg, op, &b);
}

ts_status ts_logger_flush(ts_logger *lg) {
    const char *op = "logger_flush";
    if (!lg) return tsi_error_set(TS_ERR_ARG, "%s: logger is NULL", op);
    ts_status st = tsi_wfile_flush(&lg->jsonl, op);
    ts_status st2 = tsi_wfile_flush(&lg->events, op);
    return st != TS_OK ? st : st2;
}

ts_status ts_logger_close(ts_logger *lg) {
    if (!lg) return TS_OK;
    const ts_status a = tsi_wfile_close(&lg->jsonl, "logger_close");
    const ts_status b = tsi_wfile_close(&lg->events, "logger_close");
    free(lg);
    return a != TS_OK ? a : b;
}
