/* The read path's row builder, shared by decode_entries (_columns_decode.c:
 * entries handed over one by one) and decode_fetch (_columns_fetch.c: a
 * fetch response's stored entries). Needs _columns.h first.
 */
#ifndef MAGNETAR_COLUMNS_ROWS_H
#define MAGNETAR_COLUMNS_ROWS_H

#include "_columns.h"

typedef struct {
    Span key, value;
} KV;

typedef struct {
    KV *kv;
    Py_ssize_t n, cap;
} KVs;

/* Why decoding stopped with COL_BAD: what, and the entry's first offset. */
typedef struct {
    const char *what;
    long long first;
} Fail;

/* What a message contributes beyond its payload. */
typedef struct {
    int has_key, key_b64;
    Span key;
    uint64_t event_time;
    KVs props;
} Fields;

typedef struct {
    Buf key_valid, key_off, key_data, val_off, val_data, offsets, publish, event_valid, event, map_off,
        pk_off, pk_data, pv_off, pv_data, prod_off, prod_data;
    Py_ssize_t rows, key_nulls, event_nulls, props;
} Out;

int out_reserve(Out *o, Py_ssize_t rows, Py_ssize_t value_bytes);
int out_start(Out *o, Py_ssize_t rows, Py_ssize_t value_bytes);
int out_finish(Out *o);
void out_free(Out *o);
PyObject *out_result(Out *o);
/* The rows of one entry (its metadata and decompressed payload) with offsets in [lo, hi). */
int decode_entry(Out *o, KVs *scratch, Fail *fail, const uint8_t *meta, Py_ssize_t meta_len, const uint8_t *payload,
                 Py_ssize_t payload_len, int64_t first, int64_t lo, int64_t hi);

#endif
