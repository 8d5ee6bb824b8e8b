/* meta_backend.h — the "meta" device: shapes and dtypes without data (meta_backend.c). */
#ifndef TS_META_BACKEND_H
#define TS_META_BACKEND_H

/* Registers the meta backend; idempotent. */
void tsi_meta_backend_init(void);

#endif /* TS_META_BACKEND_H */
