/* pickle_read.c — the pickle interpreter of the .pt reader (see pickle_read.h): the value arena,
 * the stack and memo, and the loop over the opcodes of protocols 2-5 (the allow-listed globals and
 * the calls on them: pickle_globals.c). Nothing a file
 * names is ever run: REDUCE on an allowed global builds one of the values below, and a global off
 * the list is refused where the GLOBAL opcode names it, as torch.load(weights_only=True) does. */
#define _POSIX_C_SOURCE 200809L
#include "io/pickle_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "io/pickle_internal.h"

ts_status __attribute__((format(printf, 3, 4)))
pki_fail(pk_state *s, ts_status code, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char op[8];
    if (s->op >= 0x20 && s->op < 0x7f)
        snprintf(op, sizeof op, "'%c'", s->op);
    else
        snprintf(op, sizeof op, "0x%02x", s->op);
    return tsi_error_set(code, "%s: data.pkl byte %zu (opcode %s): %s", s->file, s->op_at, op,
                         what);
}

ts_status pki_oom(pk_state *s) { return pki_fail(s, TS_ERR_OOM, "out of memory"); }

/* ------------------------------------------------------------------ values */

pk_value *pki_new_value(pk_state *s, pk_kind kind) {
    pk_doc *d = s->doc;
    if (d->n_objects >= PK_MAX_OBJECTS)
        return pki_fail(s, TS_ERR_FORMAT, "the pickle builds more than %d values", PK_MAX_OBJECTS),
               NULL;
    if (!d->blocks || d->blocks->n == PK_BLOCK) {
        pk_block *b = malloc(sizeof *b);
        if (!b) return pki_oom(s), NULL;
        b->next = d->blocks;
        b->n = 0;
        d->blocks = b;
    }
    pk_value *v = &d->blocks->v[d->blocks->n++];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    d->n_objects++;
    return v;
}

bool pki_add_item(pk_state *s, pk_value *c, pk_value *item) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        pk_value **items = realloc(c->items, cap * sizeof *items);
        if (!items) return pki_oom(s), false;
        c->items = items;
        c->cap = cap;
    }
    c->items[c->n++] = item;
    return true;
}

char *pki_copy_str(pk_state *s, const void *p, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return pki_oom(s), NULL;
    memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

/* ------------------------------------------------------------------ stack, marks, memo */

static size_t base(const pk_state *s) { return s->nm ? s->marks[s->nm - 1] : 0; }

bool pki_push(pk_state *s, pk_value *v) {
    if (!v) return false;
    if (s->sp == s->scap) {
        if (s->scap >= PK_MAX_STACK)
            return pki_fail(s, TS_ERR_FORMAT, "the stack holds more than %d values", PK_MAX_STACK),
                   false;
        size_t cap = s->scap ? s->scap * 2 : 64;
        pk_value **st = realloc(s->stack, cap * sizeof *st);
        if (!st) return pki_oom(s), false;
        s->stack = st;
        s->scap = cap;
    }
    s->stack[s->sp++] = v;
    return true;
}

pk_value *pki_pop(pk_state *s) {
    if (s->sp <= base(s)) return pki_fail(s, TS_ERR_FORMAT, "stack underflow"), NULL;
    return s->stack[--s->sp];
}

static pk_value *top(pk_state *s) {
    if (s->sp <= base(s)) return pki_fail(s, TS_ERR_FORMAT, "stack underflow"), NULL;
    return s->stack[s->sp - 1];
}

/* The values since the last MARK (first at *items, n of them); the MARK is gone. */
static bool pop_mark(pk_state *s, pk_value ***items, size_t *n) {
    if (!s->nm) return pki_fail(s, TS_ERR_FORMAT, "no MARK to pop to"), false;
    size_t at = s->marks[--s->nm];
    *items = s->stack ? s->stack + at : NULL; /* "(l" before any push: an empty stack */
    *n = s->sp - at;
    s->sp = at;
    return true;
}

static bool memo_put(pk_state *s, uint64_t idx) {
    pk_value *v = top(s);
    if (!v) return false;
    if (idx >= s->memo_limit)
        return pki_fail(s, TS_ERR_FORMAT, "memo index %llu is over the limit of %zu",
                        (unsigned long long)idx, s->memo_limit),
               false;
    if (idx >= s->memo_cap) {
        size_t cap = s->memo_cap ? s->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        if (cap > s->memo_limit) cap = s->memo_limit;
        pk_value **m = realloc(s->memo, cap * sizeof *m);
        if (!m) return pki_oom(s), false;
        memset(m + s->memo_cap, 0, (cap - s->memo_cap) * sizeof *m);
        s->memo = m;
        s->memo_cap = cap;
    }
    if (!s->memo[idx]) s->memo_len++;
    s->memo[idx] = v;
    return true;
}

static bool memo_get(pk_state *s, uint64_t idx) {
    if (idx >= s->memo_cap || !s->memo[idx])
        return pki_fail(s, TS_ERR_FORMAT, "memo index %llu was never stored",
                        (unsigned long long)idx),
               false;
    return pki_push(s, s->memo[idx]);
}

/* ------------------------------------------------------------------ reading the stream */

static const unsigned char *take(pk_state *s, uint64_t n) {
    if (n > (uint64_t)(s->end - s->p))
        return pki_fail(s, TS_ERR_FORMAT, "%llu bytes of argument pass the end of the pickle",
                        (unsigned long long)n),
               NULL;
    const unsigned char *at = s->p;
    s->p += n;
    return at;
}

static bool read_uint(pk_state *s, int n, uint64_t *out) {
    const unsigned char *b = take(s, (uint64_t)n);
    if (!b) return false;
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    *out = v;
    return true;
}

static bool push_int(pk_state *s, int64_t i) {
    pk_value *v = pki_new_value(s, PK_INT);
    if (v) v->i = i;
    return pki_push(s, v);
}

/* LONG1 / LONG4: n bytes of little-endian two's complement */
static bool push_long(pk_state *s, uint64_t n) {
    const unsigned char *b = take(s, n);
    if (!b) return false;
    if (n > 8) return pki_push(s, pki_new_value(s, PK_BIGINT));
    uint64_t u = 0;
    for (uint64_t i = n; i-- > 0;) u = u << 8 | b[i];
    if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return push_int(s, i);
}

static bool push_string(pk_state *s, pk_kind kind, uint64_t n) {
    if (n > PK_MAX_STRING)
        return pki_fail(s, TS_ERR_FORMAT, "a %llu-byte string is over the limit of %zu bytes",
                        (unsigned long long)n, PK_MAX_STRING),
               false;
    const unsigned char *b = take(s, n);
    if (!b) return false;
    pk_value *v = pki_new_value(s, kind);
    if (!v) return false;
    if (!(v->s = pki_copy_str(s, b, (size_t)n))) return false;
    v->len = (size_t)n;
    return pki_push(s, v);
}

/* ------------------------------------------------------------------ the loop */

static bool collect(pk_state *s, pk_kind kind) {
    pk_value **items;
    size_t n;
    if (!pop_mark(s, &items, &n)) return false;
    pk_value *v = pki_new_value(s, kind);
    if (!v) return false;
    if (kind == PK_DICT && n % 2)
        return pki_fail(s, TS_ERR_FORMAT, "DICT with an odd number of values"), false;
    for (size_t i = 0; i < n; i++)
        if (!pki_add_item(s, v, items[i])) return false;
    return pki_push(s, v);
}

static bool tuple_n(pk_state *s, size_t n) {
    if (s->sp - base(s) < n) return pki_fail(s, TS_ERR_FORMAT, "stack underflow"), false;
    pk_value *v = pki_new_value(s, PK_TUPLE);
    if (!v) return false;
    for (size_t i = s->sp - n; i < s->sp; i++)
        if (!pki_add_item(s, v, s->stack[i])) return false;
    s->sp -= n;
    return pki_push(s, v);
}

/* APPENDS / SETITEMS / ADDITEMS: the values since the MARK go into the container below it */
static bool extend(pk_state *s, pk_kind kind) {
    pk_value **items;
    size_t n;
    if (!pop_mark(s, &items, &n)) return false;
    pk_value *c = top(s);
    if (!c) return false;
    if (c->kind != kind)
        return pki_fail(s, TS_ERR_FORMAT, "adding items to a %s, not a %s", pki_kind_name(c->kind),
                        pki_kind_name(kind)),
               false;
    if (kind == PK_DICT && n % 2)
        return pki_fail(s, TS_ERR_FORMAT, "SETITEMS with an odd number of values"), false;
    for (size_t i = 0; i < n; i++)
        if (!pki_add_item(s, c, items[i])) return false;
    return true;
}

static bool step(pk_state *s, bool *done) {
    uint64_t u;
    pk_value *v, *w, *c;
    switch (s->op) {
    case 0x80: /* PROTO */
        if (!read_uint(s, 1, &u)) return false;
        if (u > 5)
            return pki_fail(s, TS_ERR_FORMAT, "pickle protocol %llu", (unsigned long long)u), false;
        return true;
    case 0x95: /* FRAME: a length only */
        return read_uint(s, 8, &u);
    case '.': /* STOP */
        if (!(v = pki_pop(s))) return false;
        s->doc->root = v;
        *done = true;
        return true;
    case '(': /* MARK */
        if (s->nm >= PK_MAX_MARKS)
            return pki_fail(s, TS_ERR_FORMAT, "more than %d nested MARKs", PK_MAX_MARKS), false;
        s->marks[s->nm++] = s->sp;
        return true;
    case '0': /* POP */
        if (s->sp > base(s)) return s->sp--, true;
        return pop_mark(s, &(pk_value **){NULL}, &(size_t){0});
    case '1': /* POP_MARK */
        return pop_mark(s, &(pk_value **){NULL}, &(size_t){0});
    case '2': /* DUP */
        return (v = top(s)) && pki_push(s, v);
    case 'N':
        return pki_push(s, pki_new_value(s, PK_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        if (!(v = pki_new_value(s, PK_BOOL))) return false;
        v->i = s->op == 0x88;
        return pki_push(s, v);
    case 'J': /* BININT */
        if (!read_uint(s, 4, &u)) return false;
        return push_int(s, (int32_t)(uint32_t)u);
    case 'K': /* BININT1 */
        return read_uint(s, 1, &u) && push_int(s, (int64_t)u);
    case 'M': /* BININT2 */
        return read_uint(s, 2, &u) && push_int(s, (int64_t)u);
    case 0x8a: /* LONG1 */
        return read_uint(s, 1, &u) && push_long(s, u);
    case 0x8b: /* LONG4 */
        if (!read_uint(s, 4, &u)) return false;
        if ((int32_t)(uint32_t)u < 0)
            return pki_fail(s, TS_ERR_FORMAT, "negative LONG4 size"), false;
        return push_long(s, u);
    case 'G': { /* BINFLOAT: big-endian */
        const unsigned char *b = take(s, 8);
        if (!b || !(v = pki_new_value(s, PK_FLOAT))) return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
        memcpy(&v->f, &bits, sizeof v->f);
        return pki_push(s, v);
    }
    case 'X':
        return read_uint(s, 4, &u) && push_string(s, PK_STR, u); /* BINUNICODE */
    case 0x8c:
        return read_uint(s, 1, &u) && push_string(s, PK_STR, u); /* SHORT_BINUNICODE */
    case 0x8d:
        return read_uint(s, 8, &u) && push_string(s, PK_STR, u); /* BINUNICODE8 */
    case 'T': /* BINSTRING (Python 2 str): signed length */
        if (!read_uint(s, 4, &u)) return false;
        if ((int32_t)(uint32_t)u < 0)
            return pki_fail(s, TS_ERR_FORMAT, "negative BINSTRING size"), false;
        return push_string(s, PK_STR, u);
    case 'U':
        return read_uint(s, 1, &u) && push_string(s, PK_STR, u); /* SHORT_BINSTRING */
    case 'B':
        return read_uint(s, 4, &u) && push_string(s, PK_BYTES, u); /* BINBYTES */
    case 'C':
        return read_uint(s, 1, &u) && push_string(s, PK_BYTES, u); /* SHORT_BINBYTES */
    case 0x8e:
        return read_uint(s, 8, &u) && push_string(s, PK_BYTES, u); /* BINBYTES8 */
    case 0x96:
        return read_uint(s, 8, &u) && push_string(s, PK_BYTES, u); /* BYTEARRAY8 */
    case '}':
        return pki_push(s, pki_new_value(s, PK_DICT)); /* EMPTY_DICT */
    case ']':
        return pki_push(s, pki_new_value(s, PK_LIST)); /* EMPTY_LIST */
    case ')':
        return pki_push(s, pki_new_value(s, PK_TUPLE)); /* EMPTY_TUPLE */
    case 0x8f:
        return pki_push(s, pki_new_value(s, PK_SET)); /* EMPTY_SET */
    case 't':
        return collect(s, PK_TUPLE); /* TUPLE */
    case 'l':
        return collect(s, PK_LIST); /* LIST */
    case 'd':
        return collect(s, PK_DICT); /* DICT */
    case 0x91:
        return collect(s, PK_SET); /* FROZENSET */
    case 0x85:
        return tuple_n(s, 1);
    case 0x86:
        return tuple_n(s, 2);
    case 0x87:
        return tuple_n(s, 3);
    case 'a': /* APPEND */
        if (!(v = pki_pop(s)) || !(c = top(s))) return false;
        if (c->kind != PK_LIST)
            return pki_fail(s, TS_ERR_FORMAT, "APPEND to a %s", pki_kind_name(c->kind)), false;
        return pki_add_item(s, c, v);
    case 'e':
        return extend(s, PK_LIST); /* APPENDS */
    case 'u':
        return extend(s, PK_DICT); /* SETITEMS */
    case 0x90:
        return extend(s, PK_SET); /* ADDITEMS */
    case 's':                     /* SETITEM */
        if (!(v = pki_pop(s)) || !(w = pki_pop(s)) || !(c = top(s))) return false;
        if (c->kind != PK_DICT)
            return pki_fail(s, TS_ERR_FORMAT, "SETITEM on a %s", pki_kind_name(c->kind)), false;
        return pki_add_item(s, c, w) && pki_add_item(s, c, v);
    case 'q':
        return read_uint(s, 1, &u) && memo_put(s, u); /* BINPUT */
    case 'r':
        return read_uint(s, 4, &u) && memo_put(s, u); /* LONG_BINPUT */
    case 0x94:
        return memo_put(s, s->memo_len); /* MEMOIZE */
    case 'h':
        return read_uint(s, 1, &u) && memo_get(s, u); /* BINGET */
    case 'j':
        return read_uint(s, 4, &u) && memo_get(s, u); /* LONG_BINGET */
    case 'c':
        return pki_op_global(s); /* GLOBAL */
    case 0x93:
        return pki_op_stack_global(s); /* STACK_GLOBAL */
    case 'Q':
        return pki_op_persid(s); /* BINPERSID */
    case 'R':                    /* REDUCE */
    case 0x81:                   /* NEWOBJ */
        if (!(w = pki_pop(s)) || !(v = pki_pop(s))) return false;
        return pki_push(s, pki_call(s, v, w, 0));
    case 0x92: /* NEWOBJ_EX: cls, args, kwargs (no keyword arguments) */
        if (!(c = pki_pop(s)) || !(w = pki_pop(s)) || !(v = pki_pop(s))) return false;
        if (c->kind != PK_DICT || c->n)
            return pki_fail(s, TS_ERR_FORMAT, "NEWOBJ_EX with keyword arguments"), false;
        return pki_push(s, pki_call(s, v, w, 0));
    case 'b': /* BUILD: the state is not applied (no allowed type needs it for its tensors) */
        return (v = pki_pop(s)) && top(s);
    default:
        break;
    }
    static const char legacy[] = "IFLSVPgpoi\x82\x83\x84\x97\x98";
    if (s->op && strchr(legacy, s->op))
        return pki_fail(s, TS_ERR_UNSUPPORTED,
                        "this opcode (protocol 0/1 text, extension registry or out-of-band "
                        "buffer) is not supported by ts_load_pt; torch.save writes protocol 2"),
               false;
    return pki_fail(s, TS_ERR_FORMAT, "unknown opcode"), false;
}

void pk_free(pk_doc *doc) {
    if (!doc) return;
    for (pk_block *b = doc->blocks, *next; b; b = next) {
        next = b->next;
        for (size_t i = 0; i < b->n; i++) {
            free(b->v[i].items);
            free(b->v[i].s);
            free(b->v[i].t);
        }
        free(b);
    }
    free(doc->tensors);
    memset(doc, 0, sizeof *doc);
}

ts_status pk_parse(const char *file, const unsigned char *data, size_t size, pk_doc *doc) {
    memset(doc, 0, sizeof *doc);
    pk_state s = {.file = file, .start = data, .p = data, .end = data + size, .doc = doc};
    s.memo_limit = size < PK_MAX_MEMO ? size : PK_MAX_MEMO;
    ts_status st = TS_OK;
    if (size > PK_MAX_PICKLE)
        st = tsi_error_set(TS_ERR_FORMAT, "%s: data.pkl holds %zu bytes, over the limit of %zu",
                           file, size, PK_MAX_PICKLE);
    bool done = false;
    while (!st && !done) {
        if (s.p >= s.end) {
            s.op_at = size;
            s.op = 0;
            st = tsi_error_set(TS_ERR_FORMAT, "%s: data.pkl ends without STOP (byte %zu)", file,
                               size);
            break;
        }
        s.op_at = (size_t)(s.p - s.start);
        s.op = *s.p++;
        if (!step(&s, &done)) st = ts_error() ? ts_error() : TS_ERR_FORMAT;
    }
    free(s.stack);
    free(s.memo);
    if (st) pk_free(doc);
    return st;
}
