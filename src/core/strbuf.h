/* strbuf.h — the library's one growable string (reprs, printed tensors, JSON and safetensors
 * headers, long error messages, `tessera info`'s text). Zero-initialise it ({0}); s is always
 * NUL-terminated once anything was put. The first allocation failure sets `failed` and every later
 * call does nothing, so a caller builds the whole text and checks once. Free s with free() or
 * tsi_sb_free. */
#ifndef TS_CORE_STRBUF_H
#define TS_CORE_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tsi_strbuf {
    char *s;
    size_t len, cap;
    bool failed;
} tsi_strbuf;

/* room for `extra` more characters and the NUL; false once failed */
bool tsi_sb_reserve(tsi_strbuf *b, size_t extra);
void tsi_sb_putn(tsi_strbuf *b, const char *s, size_t n);
void tsi_sb_puts(tsi_strbuf *b, const char *s);
void tsi_sb_printf(tsi_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tsi_sb_vprintf(tsi_strbuf *b, const char *fmt, va_list ap);
/* c, n times */
void tsi_sb_repeat(tsi_strbuf *b, char c, int n);
/* frees s and zeroes b */
void tsi_sb_free(tsi_strbuf *b);

#endif /* TS_CORE_STRBUF_H */
