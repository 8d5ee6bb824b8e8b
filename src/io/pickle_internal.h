/* pickle_internal.h — what the two halves of the pickle interpreter share (internal): the
 * state, the value arena, the stack and the errors (pickle_read.c: the stream, the memo and the
 * opcode loop) and the allow-listed globals with the calls they build (pickle_globals.c). */
#ifndef TESSERA_PICKLE_INTERNAL_H
#define TESSERA_PICKLE_INTERNAL_H

#include "core/internal.h"
#include "io/pickle_read.h"

#define PK_BLOCK 1024
struct pk_block {
    pk_block *next;
    size_t n;
    pk_value v[PK_BLOCK];
};

typedef struct pk_state {
    const char *file;
    const unsigned char *start, *p, *end;
    size_t op_at;
    unsigned char op;
    pk_doc *doc;
    pk_value **stack;
    size_t sp, scap;
    size_t marks[PK_MAX_MARKS];
    int nm;
    pk_value **memo;
    size_t memo_cap, memo_limit, memo_len;
} pk_state;

/* pickle_read.c: a failure at the current opcode (the message names the file and offset), out of
 * memory, a new value of the arena, an item appended to a container, a string copied into the
 * arena, the stack */
ts_status __attribute__((format(printf, 3, 4)))
pki_fail(pk_state *s, ts_status code, const char *fmt, ...);
ts_status pki_oom(pk_state *s);
pk_value *pki_new_value(pk_state *s, pk_kind kind);
bool pki_add_item(pk_state *s, pk_value *c, pk_value *item);
char *pki_copy_str(pk_state *s, const void *p, size_t n);
bool pki_push(pk_state *s, pk_value *v);
pk_value *pki_pop(pk_state *s);

/* pickle_globals.c: GLOBAL / STACK_GLOBAL against the allow-list, REDUCE / BUILD / NEWOBJ of an
 * allowed global (depth: nesting of the calls), BINPERSID (a storage), a kind's name */
bool pki_op_global(pk_state *s);
bool pki_op_stack_global(pk_state *s);
pk_value *pki_call(pk_state *s, pk_value *f, pk_value *args, int depth);
bool pki_op_persid(pk_state *s);
const char *pki_kind_name(pk_kind k);

#endif /* TESSERA_PICKLE_INTERNAL_H */
