/* fuzz_csv_num.c — libFuzzer target: the CSV reader's numbers. The input is one cell, read as a
 * feature, as a regression target and as a class, and checked against a reference parser written
 * here (C's strtod grammar in the C locale, white space allowed around the number; the value from
 * the digits in long double): accepted exactly when the reference accepts, with the reference's
 * value as a float, and refused with a message naming the line and column otherwise. The ctest
 * fuzz_csv_num_corpus replays tests/fuzz/corpus/csv_num (tests/fuzz/replay.c). */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CELL 511 /* the reader's limit on a cell's text */

static bool space(int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
static bool word(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    if (n < k) return false;
    for (size_t i = 0; i < k; i++)
        if (lower((unsigned char)s[i]) != w[i]) return false;
    return true;
}
static int hexval(int c) {
    c = lower(c);
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Digits [.digits] with a mantissa of the first 19 significant digits (base 10 or 16) and the
 * count of digits that scale it; returns the length read (0: no digit). */
static size_t digits(const char *s, size_t n, int base, long double *m, long *scale) {
    size_t i = 0;
    int sig = 0, any = 0;
    bool dot = false;
    *m = 0, *scale = 0;
    for (; i < n; i++) {
        if (s[i] == '.' && !dot) {
            dot = true;
            continue;
        }
        int v = base == 16                     ? hexval((unsigned char)s[i])
                : isdigit((unsigned char)s[i]) ? s[i] - '0'
                                               : -1;
        if (v < 0) break;
        any = 1;
        if (sig < 19 && (sig > 0 || v != 0)) {
            *m = *m * base + v, sig++;
            if (dot) (*scale)--;
        } else if (sig >= 19 && !dot) {
            (*scale)++; /* a digit past the precision still counts in the magnitude */
        } else if (sig == 0 && dot) {
            (*scale)--; /* a leading zero after the point */
        }
    }
    return any ? i : 0;
}

/* An optionally signed decimal exponent; its value saturates. Returns the length (0: none). */
static size_t exponent(const char *s, size_t n, long *e) {
    size_t i = 0;
    int sign = 1;
    if (i < n && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
    if (i >= n || !isdigit((unsigned char)s[i])) return 0;
    long v = 0;
    for (; i < n && isdigit((unsigned char)s[i]); i++)
        v = v < 100000000 ? v * 10 + (s[i] - '0') : v;
    *e = sign * v;
    return i;
}

/* The reference: true and *v when the whole text is one number. */
static bool reference(const char *s, size_t n, long double *v) {
    while (n && space((unsigned char)*s)) s++, n--;
    while (n && space((unsigned char)s[n - 1])) n--;
    if (!n) return false;
    int sign = 1;
    if (*s == '+' || *s == '-') sign = *s == '-' ? -1 : 1, s++, n--;
    if (word(s, n, "infinity") && n == 8) return *v = sign * INFINITY, true;
    if (word(s, n, "inf") && n == 3) return *v = sign * INFINITY, true;
    if (word(s, n, "nan")) {
        if (n == 3) return *v = NAN, true;
        if (s[3] != '(' || s[n - 1] != ')') return false;
        for (size_t i = 4; i + 1 < n; i++)
            if (!isalnum((unsigned char)s[i]) && s[i] != '_') return false;
        return *v = NAN, true;
    }
    long double m;
    long scale, e = 0;
    size_t i;
    if (n > 2 && s[0] == '0' && lower((unsigned char)s[1]) == 'x' &&
        (i = digits(s + 2, n - 2, 16, &m, &scale)) > 0 && !(i == 1 && s[2] == '.')) {
        i += 2;
        if (i < n && lower((unsigned char)s[i]) == 'p') {
            size_t k = exponent(s + i + 1, n - i - 1, &e);
            if (k) i += 1 + k;
        }
        if (i != n) return false;
        *v = sign * ldexpl(m, (int)(4 * scale + e));
        return true;
    }
    i = digits(s, n, 10, &m, &scale);
    if (!i || (i == 1 && s[0] == '.')) return false;
    if (i < n && lower((unsigned char)s[i]) == 'e') {
        size_t k = exponent(s + i + 1, n - i - 1, &e);
        if (k) i += 1 + k;
    }
    if (i != n) return false;
    long p = scale + e;
    *v = m == 0 ? 0 : p > 6000 ? INFINITY : p < -6000 ? 0 : m * powl(10.0L, (long double)p);
    *v *= sign;
    return true;
}

/* The reader goes through double, the reference through long double: near a rounding boundary
 * the two may round apart, so a neighbour of the expected value is accepted too. */
static bool same_float(float got, long double ref) {
    if (isnan(ref)) return isnan(got);
    float want = (float)ref;
    return got == want || got == nextafterf(want, INFINITY) || got == nextafterf(want, -INFINITY);
}
static bool class_ok(double d) { return d >= 0 && d == floor(d) && d <= 16777215.0; }

/* Reads text as a CSV and returns the status; on TS_OK *c holds it. */
static ts_status read_csv(const char *text, size_t n, ts_csv_opts o, tsi_csv *c) {
    ts_status st = tsi_csv_parse(text, n, "<cell>", &o, c);
    if (st && (ts_error() != st || !strstr(ts_error_message(), "<cell>:"))) abort();
    ts_error_clear();
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    /* the cell, quoted so that any byte but a line end is part of it ("" for a quote) */
    char cell[4096], text[2 * 4096 + 64];
    size_t n = 0;
    for (size_t i = 0; i < size; i++) cell[n++] = data[i] == '\n' ? ' ' : (char)data[i];
    size_t q = 0;
    char quoted[2 * 4096 + 2];
    quoted[q++] = '"';
    for (size_t i = 0; i < n; i++) {
        quoted[q++] = cell[i];
        if (cell[i] == '"') quoted[q++] = '"';
    }
    quoted[q++] = '"';
    long double ref = 0;
    const bool ok = n <= MAX_CELL && reference(cell, n, &ref);

    /* as a feature, beside a class 1 */
    int len = snprintf(text, sizeof text, "%.*s,1\n", (int)q, quoted);
    tsi_csv c;
    ts_status st =
        read_csv(text, (size_t)len, (ts_csv_opts){.target_column = -1, .no_header = true}, &c);
    if ((st == TS_OK) != ok) abort();
    if (ok && (c.rows != 1 || c.features != 1 || !same_float(c.x[0], ref))) abort();
    if (ok) tsi_csv_release(&c);
    /* as a regression target */
    st = read_csv(text, (size_t)len,
                  (ts_csv_opts){.target_column = 0, .no_header = true, .regression = true}, &c);
    if ((st == TS_OK) != ok) abort();
    if (ok && !same_float(c.reg[0], ref)) abort();
    if (ok) tsi_csv_release(&c);
    /* as a class: a non-negative integer below 2^24, exactly (decided on the double the reader
     * sees, give or take one rounding) */
    st = read_csv(text, (size_t)len, (ts_csv_opts){.target_column = 0, .no_header = true}, &c);
    const double d = ok ? (double)ref : NAN;
    if (ok ? (st == TS_OK) != class_ok(d) && (st == TS_OK) != class_ok(nextafter(d, INFINITY)) &&
                 (st == TS_OK) != class_ok(nextafter(d, -INFINITY))
           : st == TS_OK)
        abort();
    if (st == TS_OK) {
        if (c.cls[0] != (int64_t)llroundl(ref)) abort();
        tsi_csv_release(&c);
    }
    return 0;
}
