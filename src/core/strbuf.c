/* strbuf.c — the growable string of strbuf.h. */
#include "core/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tsi_sb_reserve(tsi_strbuf *b, size_t extra) {
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void tsi_sb_putn(tsi_strbuf *b, const char *s, size_t n) {
    if (!tsi_sb_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void tsi_sb_puts(tsi_strbuf *b, const char *s) { tsi_sb_putn(b, s, strlen(s)); }

void tsi_sb_vprintf(tsi_strbuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    const int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->failed = true; /* an encoding error: nothing sensible to append */
        return;
    }
    if (!tsi_sb_reserve(b, (size_t)n)) return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void tsi_sb_printf(tsi_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tsi_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void tsi_sb_repeat(tsi_strbuf *b, char c, int n) {
    if (n <= 0 || !tsi_sb_reserve(b, (size_t)n)) return;
    memset(b->s + b->len, c, (size_t)n);
    b->len += (size_t)n;
    b->s[b->len] = '\0';
}

void tsi_sb_free(tsi_strbuf *b) {
    free(b->s);
    *b = (tsi_strbuf){0};
}
