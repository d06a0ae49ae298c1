/* What the Spark connector's compiled column code shares: growable byte
 * buffers, protobuf varints and fields, and buffers handed to Python without
 * a copy.
 *
 * Nothing here touches a Python object or the error indicator, so the read
 * path can run it with the GIL released: buffers use the raw allocator and
 * report failure as a COL_* code, which the caller turns into an exception
 * (col_raise) once it holds the GIL again.
 */
#ifndef MAGNETAR_COLUMNS_H
#define MAGNETAR_COLUMNS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    COL_OK = 0,
    COL_NOMEM = -1, /* MemoryError */
    COL_TOOBIG = -2, /* a column chunk past Arrow's 32-bit offsets: OverflowError */
    COL_BAD = -3, /* malformed input: ValueError, with a message of the caller's */
};

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

/* Blocks of COL_POOL_MIN bytes or more (powers of two) come from and go back
 * to a pool of freed blocks (_columns_pool.c), any thread, GIL or not. */
#define COL_POOL_MIN ((Py_ssize_t)64 * 1024)
/* A block of `cap` bytes (kept or new), NULL when out of memory. */
void *col_block_get(Py_ssize_t cap);
/* Give back a block of `cap` bytes (kept, or freed when the pool is full or
 * `cap` is not one of its sizes). NULL is ignored. */
void col_block_put(void *p, Py_ssize_t cap);
PyObject *block_pool(PyObject *self, PyObject *unused);

static inline int
buf_reserve(Buf *b, Py_ssize_t extra)
{
    if (b->len + extra <= b->cap)
        return COL_OK;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *p;
    if (cap >= COL_POOL_MIN) {
        /* a pool block: moved by hand, the old one given back */
        p = col_block_get(cap);
        if (p == NULL)
            return COL_NOMEM;
        if (b->len)
            memcpy(p, b->p, b->len);
        col_block_put(b->p, b->cap);
    } else if ((p = PyMem_RawRealloc(b->p, cap)) == NULL)
        return COL_NOMEM;
    b->p = p;
    b->cap = cap;
    return COL_OK;
}

static inline int
buf_put(Buf *b, const void *data, Py_ssize_t n)
{
    if (b->len + n > b->cap && buf_reserve(b, n) < 0)
        return COL_NOMEM;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return COL_OK;
}

static inline int
buf_i32(Buf *b, int64_t v)
{
    if (v > INT32_MAX)
        return COL_TOOBIG;
    int32_t x = (int32_t)v;
    return buf_put(b, &x, 4);
}

static inline int
buf_i64(Buf *b, int64_t v)
{
    return buf_put(b, &v, 8);
}

/* Set bit `row` of a validity bitmap (Arrow's order), growing it with clear bits. */
static inline int
bit_put(Buf *b, Py_ssize_t row, int set)
{
    Py_ssize_t need = row / 8 + 1;
    if (need > b->len) {
        if (buf_reserve(b, need - b->len) < 0)
            return COL_NOMEM;
        memset(b->p + b->len, 0, need - b->len);
        b->len = need;
    }
    if (set)
        b->p[row / 8] |= (char)(1 << (row % 8));
    return COL_OK;
}

static inline void
buf_free(Buf *b)
{
    col_block_put(b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* The exception for a COL_NOMEM or COL_TOOBIG code (GIL held); NULL. */
static inline PyObject *
col_raise(int code)
{
    if (code == COL_TOOBIG)
        PyErr_SetString(PyExc_OverflowError, "a column chunk exceeds 2 GiB");
    else
        PyErr_NoMemory();
    return NULL;
}

/* -- protobuf reading ----------------------------------------------------------------------------- */
typedef struct {
    const uint8_t *p, *end;
} Span;

static inline int
varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* One field: its number, wire type, and value (varint) or span (LEN). -1: malformed, 0: ok. */
static inline int
field(const uint8_t **p, const uint8_t *end, uint64_t *num, int *wt, uint64_t *val, Span *span)
{
    uint64_t tag;
    if (varint(p, end, &tag) < 0)
        return -1;
    *num = tag >> 3;
    *wt = (int)(tag & 7);
    switch (*wt) {
    case 0:
        return varint(p, end, val);
    case 1:
        if (end - *p < 8)
            return -1;
        *p += 8;
        return 0;
    case 5:
        if (end - *p < 4)
            return -1;
        *p += 4;
        return 0;
    case 2: {
        uint64_t n;
        if (varint(p, end, &n) < 0 || n > (uint64_t)(end - *p))
            return -1;
        span->p = *p;
        span->end = *p + n;
        *p += n;
        return 0;
    }
    default:
        return -1;
    }
}

/* -- protobuf writing ------------------------------------------------------------------------------ */
static inline int
put_varint(Buf *b, uint64_t v)
{
    uint8_t tmp[10];
    int n = 0;
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        tmp[n++] = c | (v ? 0x80 : 0);
    } while (v);
    return buf_put(b, tmp, n);
}

static inline Py_ssize_t
varint_len(uint64_t v)
{
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* -- handing buffers to Python ------------------------------------------------------------------- */
/* A read-only Python buffer that owns `b`'s memory from now on (b is left
 * empty): what pyarrow.py_buffer wraps without copying. NULL on failure,
 * with `b` freed. Needs the GIL and col_init_owned() at import. */
PyObject *col_owned(Buf *b);
int col_init_owned(PyObject *module);

PyObject *decode_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *decode_fetch(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
void fetch_init(void);
PyObject *encode_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *key_partitions(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
