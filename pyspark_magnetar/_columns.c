/* The Spark connector's column work, compiled: stored entries to Arrow column
 * buffers (reads) and Arrow columns to batch payloads (writes), without a
 * Python object per message.
 *
 * decode_entries(entries, lo, hi) takes a sequence of (metadata, payload,
 * first_offset): an entry's MessageMetadata bytes, its payload already
 * decompressed (a batch: [u32 size][SingleMessageMetadata][payload]...),
 * and the topic offset of its first message. It returns the buffers of the
 * rows whose offset is in [lo, hi) (see entry_columns.py, which holds the
 * pure-Python twin and turns these buffers into a RecordBatch):
 *
 *   (rows, key_validity, key_offsets, key_data, value_offsets, value_data,
 *    offsets, publish_us, event_validity, event_us, map_offsets,
 *    prop_key_offsets, prop_key_data, prop_value_offsets, prop_value_data,
 *    producer_offsets, producer_data, key_nulls, event_nulls)
 *
 * Offsets buffers are int32 (Arrow binary/string/map), numbers int64, all
 * little-endian (the machine's order: x86-64, aarch64). Validity bitmaps are
 * Arrow's (bit i set = row i present). A malformed entry raises ValueError.
 * Built by setup.py as an optional extension; without it the twin runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int
buf_put(Buf *b, const void *data, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

static inline int
buf_i32(Buf *b, int64_t v)
{
    if (v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column chunk exceeds 2 GiB");
        return -1;
    }
    int32_t x = (int32_t)v;
    return buf_put(b, &x, 4);
}

static inline int
buf_i64(Buf *b, int64_t v)
{
    return buf_put(b, &v, 8);
}

static int
bit_put(Buf *b, Py_ssize_t row, int set)
{
    Py_ssize_t need = row / 8 + 1;
    if (need > b->len) {
        if (buf_reserve(b, need - b->len) < 0)
            return -1;
        memset(b->p + b->len, 0, need - b->len);
        b->len = need;
    }
    if (set)
        b->p[row / 8] |= (char)(1 << (row % 8));
    return 0;
}

/* -- protobuf reading --------------------------------------------------------------------------- */
typedef struct {
    const uint8_t *p, *end;
} Span;

static int
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
static int
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

typedef struct {
    Span key, value;
} KV;

typedef struct {
    KV *kv;
    Py_ssize_t n, cap;
} KVs;

static int
kv_parse(Span s, KV *out)
{
    const uint8_t *p = s.p;
    out->key.p = out->key.end = out->value.p = out->value.end = s.p;
    while (p < s.end) {
        uint64_t num, val;
        int wt;
        Span sp;
        if (field(&p, s.end, &num, &wt, &val, &sp) < 0)
            return -1;
        if (wt == 2 && num == 1)
            out->key = sp;
        else if (wt == 2 && num == 2)
            out->value = sp;
    }
    return 0;
}

/* Append a property; a repeated key keeps its first position and takes the
 * last value (what a Python dict built from the list does). */
static int
kv_add(KVs *kvs, Span s)
{
    KV kv;
    if (kv_parse(s, &kv) < 0)
        return -1;
    Py_ssize_t klen = kv.key.end - kv.key.p;
    for (Py_ssize_t i = 0; i < kvs->n; i++) {
        Span k = kvs->kv[i].key;
        if (k.end - k.p == klen && memcmp(k.p, kv.key.p, klen) == 0) {
            kvs->kv[i].value = kv.value;
            return 0;
        }
    }
    if (kvs->n == kvs->cap) {
        Py_ssize_t cap = kvs->cap ? kvs->cap * 2 : 8;
        KV *p = PyMem_Realloc(kvs->kv, cap * sizeof(KV));
        if (p == NULL) {
            PyErr_NoMemory();
            return -2;
        }
        kvs->kv = p;
        kvs->cap = cap;
    }
    kvs->kv[kvs->n++] = kv;
    return 0;
}

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

/* Append the bytes of base64 text `s` (a key sent with partition_key_b64_encoded,
 * as clients do for binary keys): 0, or 1 (nothing appended) when `s` is not
 * base64, so the caller keeps the text as it is; -1 out of memory. */
static int
put_base64_decoded(Buf *b, Span s)
{
    static int8_t map[256];
    static int ready = 0;
    if (!ready) {
        const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        memset(map, -1, sizeof map);
        for (int i = 0; i < 64; i++)
            map[(uint8_t)abc[i]] = (int8_t)i;
        ready = 1;
    }
    Py_ssize_t n = s.end - s.p;
    while (n > 0 && s.p[n - 1] == '=' && (s.end - s.p) - n < 2)
        n--;
    if ((s.end - s.p) % 4 != 0 || n % 4 == 1)
        return 1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (map[s.p[i]] < 0)
            return 1;
    if (buf_reserve(b, n * 3 / 4 + 3) < 0)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        acc = (acc << 6) | (uint32_t)map[s.p[i]];
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b->p[b->len++] = (char)((acc >> bits) & 0xff);
        }
    }
    return 0;
}

static int
emit(Out *o, const Fields *f, Span value, int64_t offset, uint64_t publish_ms, uint64_t entry_event_ms,
     Span producer)
{
    Py_ssize_t r = o->rows;
    if (bit_put(&o->key_valid, r, f->has_key) < 0)
        return -1;
    if (f->has_key) {
        int rc = f->key_b64 ? put_base64_decoded(&o->key_data, f->key) : 1;
        if (rc < 0 || (rc > 0 && buf_put(&o->key_data, f->key.p, f->key.end - f->key.p) < 0))
            return -1;
    } else {
        o->key_nulls++;
    }
    if (buf_i32(&o->key_off, o->key_data.len) < 0)
        return -1;
    if (buf_put(&o->val_data, value.p, value.end - value.p) < 0 || buf_i32(&o->val_off, o->val_data.len) < 0)
        return -1;
    if (buf_i64(&o->offsets, offset) < 0 || buf_i64(&o->publish, (int64_t)publish_ms * 1000) < 0)
        return -1;
    uint64_t ev = f->event_time ? f->event_time : entry_event_ms;
    if (bit_put(&o->event_valid, r, ev != 0) < 0 || buf_i64(&o->event, ev ? (int64_t)ev * 1000 : 0) < 0)
        return -1;
    if (!ev)
        o->event_nulls++;
    for (Py_ssize_t i = 0; i < f->props.n; i++) {
        KV kv = f->props.kv[i];
        if (buf_put(&o->pk_data, kv.key.p, kv.key.end - kv.key.p) < 0 || buf_i32(&o->pk_off, o->pk_data.len) < 0 ||
            buf_put(&o->pv_data, kv.value.p, kv.value.end - kv.value.p) < 0 ||
            buf_i32(&o->pv_off, o->pv_data.len) < 0)
            return -1;
    }
    o->props += f->props.n;
    if (buf_i32(&o->map_off, o->props) < 0)
        return -1;
    if (buf_put(&o->prod_data, producer.p, producer.end - producer.p) < 0 ||
        buf_i32(&o->prod_off, o->prod_data.len) < 0)
        return -1;
    o->rows++;
    return 0;
}

static int
bad(const char *what, long long first_offset)
{
    PyErr_Format(PyExc_ValueError, "entry at offset %lld: %s", first_offset, what);
    return -1;
}

/* One entry: -1 with an exception set on failure. */
static int
decode_entry(Out *o, KVs *scratch, const uint8_t *meta, Py_ssize_t meta_len, const uint8_t *payload,
             Py_ssize_t payload_len, int64_t first, int64_t lo, int64_t hi)
{
    const uint8_t *p = meta, *end = meta + meta_len;
    Span producer = {meta, meta};
    uint64_t publish = 0, event = 0, count = 1;
    int is_batch = 0;
    Fields entry = {0};
    entry.props = *scratch;
    entry.props.n = 0;
    while (p < end) {
        uint64_t num, val = 0;
        int wt;
        Span sp;
        if (field(&p, end, &num, &wt, &val, &sp) < 0) {
            *scratch = entry.props;
            return bad("malformed MessageMetadata", first);
        }
        if (wt == 2 && num == 1)
            producer = sp;
        else if (wt == 0 && num == 3)
            publish = val;
        else if (wt == 2 && num == 4) {
            int rc = kv_add(&entry.props, sp);
            if (rc < 0) {
                *scratch = entry.props;
                return rc == -1 ? bad("malformed property", first) : -1;
            }
        } else if (wt == 2 && num == 6) {
            entry.has_key = 1;
            entry.key = sp;
        } else if (wt == 0 && num == 17)
            entry.key_b64 = val != 0; else if (wt == 0 && num == 11) {
            is_batch = 1;
            count = (uint64_t)(int32_t)val;
        } else if (wt == 0 && num == 12)
            event = val;
    }
    *scratch = entry.props;
    if (!is_batch) {
        if (first < lo || first >= hi)
            return 0;
        Span value = {payload, payload + payload_len};
        entry.event_time = 0;
        return emit(o, &entry, value, first, publish, event, producer);
    }
    if ((int64_t)count < 0)
        return bad("negative num_messages_in_batch", first);
    p = payload;
    end = payload + payload_len;
    for (uint64_t i = 0; i < count; i++) {
        if (end - p < 4)
            return bad("batch truncated", first);
        uint32_t size = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
        p += 4;
        if ((uint64_t)(end - p) < size)
            return bad("batch message metadata overruns the payload", first);
        const uint8_t *q = p, *qend = p + size;
        p = qend;
        int64_t offset = first + (int64_t)i;
        int wanted = offset >= lo && offset < hi;
        Fields f = {0};
        f.props = *scratch;
        f.props.n = 0;
        int64_t payload_size = -1;
        while (q < qend) {
            uint64_t num, val = 0;
            int wt;
            Span sp;
            if (field(&q, qend, &num, &wt, &val, &sp) < 0) {
                *scratch = f.props;
                return bad("malformed SingleMessageMetadata", first);
            }
            if (wt == 0 && num == 3)
                payload_size = (int64_t)(int32_t)val;
            else if (!wanted)
                continue;
            else if (wt == 2 && num == 1) {
                int rc = kv_add(&f.props, sp);
                if (rc < 0) {
                    *scratch = f.props;
                    return rc == -1 ? bad("malformed property", first) : -1;
                }
            } else if (wt == 2 && num == 2) {
                f.has_key = 1;
                f.key = sp;
            } else if (wt == 0 && num == 6)
                f.key_b64 = val != 0; else if (wt == 0 && num == 5)
                f.event_time = val;
        }
        *scratch = f.props;
        if (payload_size < 0 || payload_size > end - p)
            return bad("batch message payload overruns the batch", first);
        Span value = {p, p + payload_size};
        p += payload_size;
        if (wanted && emit(o, &f, value, offset, publish, event, producer) < 0)
            return -1;
    }
    return 0;
}

static void
out_free(Out *o)
{
    Buf *bufs[] = {&o->key_valid, &o->key_off, &o->key_data, &o->val_off, &o->val_data, &o->offsets, &o->publish,
                   &o->event_valid, &o->event, &o->map_off, &o->pk_off, &o->pk_data, &o->pv_off, &o->pv_data,
                   &o->prod_off, &o->prod_data};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        PyMem_Free(bufs[i]->p);
}

static PyObject *
bytes_of(Buf *b)
{
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

static PyObject *
decode_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_entries(entries, lo, hi)");
        return NULL;
    }
    long long lo = PyLong_AsLongLong(args[1]);
    long long hi = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "entries must be a sequence");
    if (seq == NULL)
        return NULL;
    Out o;
    memset(&o, 0, sizeof o);
    KVs scratch = {0};
    PyObject *result = NULL;
    /* Arrow offsets start with 0. */
    if (buf_i32(&o.key_off, 0) < 0 || buf_i32(&o.val_off, 0) < 0 || buf_i32(&o.map_off, 0) < 0 ||
        buf_i32(&o.pk_off, 0) < 0 || buf_i32(&o.pv_off, 0) < 0 || buf_i32(&o.prod_off, 0) < 0)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "each entry is a (metadata, payload, first_offset) tuple");
            goto done;
        }
        long long first = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        if (first == -1 && PyErr_Occurred())
            goto done;
        Py_buffer meta, payload;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 0), &meta, PyBUF_SIMPLE) < 0)
            goto done;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &payload, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&meta);
            goto done;
        }
        int rc = decode_entry(&o, &scratch, meta.buf, meta.len, payload.buf, payload.len, first, lo, hi);
        PyBuffer_Release(&meta);
        PyBuffer_Release(&payload);
        if (rc < 0)
            goto done;
    }
    /* A bitmap covers every row even when the last rows' bits are clear. */
    if (o.rows && (bit_put(&o.key_valid, o.rows - 1, 0) < 0 || bit_put(&o.event_valid, o.rows - 1, 0) < 0))
        goto done;
    result = Py_BuildValue("(nNNNNNNNNNNNNNNNNnn)", o.rows, bytes_of(&o.key_valid), bytes_of(&o.key_off),
                           bytes_of(&o.key_data), bytes_of(&o.val_off), bytes_of(&o.val_data), bytes_of(&o.offsets),
                           bytes_of(&o.publish), bytes_of(&o.event_valid), bytes_of(&o.event), bytes_of(&o.map_off),
                           bytes_of(&o.pk_off), bytes_of(&o.pk_data), bytes_of(&o.pv_off), bytes_of(&o.pv_data),
                           bytes_of(&o.prod_off), bytes_of(&o.prod_data), o.key_nulls, o.event_nulls);
done:
    PyMem_Free(scratch.kv);
    out_free(&o);
    Py_DECREF(seq);
    return result;
}

/* -- writes: Arrow columns to batch payloads ------------------------------------------------------
 * encode_batches(n, seqs, value_offsets, value_data, key_validity, key_offsets, key_data,
 *                map_validity, map_offsets, prop_key_offsets, prop_key_data, prop_value_offsets,
 *                prop_value_data, event_validity, event_ms, key_b64, max_messages, max_bytes)
 * -> [(payload, count, first_sequence_id, highest_sequence_id), ...]
 * Rows 0..n-1 in order, each a batch member [u32 size][SingleMessageMetadata][value] with
 * properties (1), partition_key (2, a present key), payload_size (3), event_time (5, when not
 * 0), partition_key_b64_encoded (6, rows whose bit is set in the key_b64 bitmap: the key is
 * base64 text of a binary key) and sequence_id (8): the bytes BatchBuilder.add writes. A batch closes at max_messages
 * members or once it holds max_bytes. Optional columns are None (absent); a validity bitmap
 * is None when the column has no nulls. Buffers start at row 0 (no Arrow slice offset). */
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

typedef struct {
    Py_buffer b;
    int present;
} Opt;

static int
opt_get(PyObject *o, Opt *out)
{
    out->present = 0;
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, &out->b, PyBUF_SIMPLE) < 0)
        return -1;
    out->present = 1;
    return 0;
}

static void
opt_release(Opt *o)
{
    if (o->present)
        PyBuffer_Release(&o->b);
}

static inline int
bit_of(const Opt *bitmap, Py_ssize_t i)
{
    return !bitmap->present || (((const uint8_t *)bitmap->b.buf)[i >> 3] >> (i & 7)) & 1;
}

static inline int32_t
i32_at(const Opt *o, Py_ssize_t i)
{
    int32_t v;
    memcpy(&v, (const char *)o->b.buf + 4 * i, 4);
    return v;
}

static inline int64_t
i64_at(const Opt *o, Py_ssize_t i)
{
    int64_t v;
    memcpy(&v, (const char *)o->b.buf + 8 * i, 8);
    return v;
}

enum { SEQS, VOFF, VDATA, KVALID, KOFF, KDATA, MVALID, MOFF, PKOFF, PKDATA, PVOFF, PVDATA, EVALID, EMS, KB64, NBUF };

static int
seal(PyObject *list, Buf *batch, Py_ssize_t count, int64_t first, int64_t highest)
{
    PyObject *item = Py_BuildValue("(y#nLL)", batch->p ? batch->p : "", batch->len, count, (long long)first,
                                   (long long)highest);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    batch->len = 0;
    return rc;
}

static PyObject *
encode_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 + NBUF) {
        PyErr_SetString(PyExc_TypeError, "encode_batches takes 18 arguments");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[0]);
    Py_ssize_t max_messages = PyLong_AsSsize_t(args[1 + NBUF]);
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[2 + NBUF]);
    if (PyErr_Occurred())
        return NULL;
    Opt o[NBUF];
    memset(o, 0, sizeof o);
    PyObject *list = NULL;
    Buf batch = {0}, header = {0};
    for (int i = 0; i < NBUF; i++)
        if (opt_get(args[1 + i], &o[i]) < 0)
            goto fail;
    if (!o[SEQS].present || !o[VOFF].present || !o[VDATA].present || o[SEQS].b.len < 8 * n ||
        o[VOFF].b.len < 4 * (n + 1) || (o[KOFF].present && o[KOFF].b.len < 4 * (n + 1)) ||
        (o[MOFF].present && o[MOFF].b.len < 4 * (n + 1)) || (o[EMS].present && o[EMS].b.len < 8 * n)) {
        PyErr_SetString(PyExc_ValueError, "encode_batches: buffers shorter than the rows");
        goto fail;
    }
    list = PyList_New(0);
    if (list == NULL)
        goto fail;
    Py_ssize_t count = 0;
    int64_t first = 0, highest = 0;
    const char *vdata = o[VDATA].b.buf;
    for (Py_ssize_t r = 0; r < n; r++) {
        header.len = 0;
        if (o[MOFF].present && bit_of(&o[MVALID], r)) {
            int32_t a = i32_at(&o[MOFF], r), z = i32_at(&o[MOFF], r + 1);
            for (int32_t j = a; j < z; j++) {
                int32_t ka = i32_at(&o[PKOFF], j), kz = i32_at(&o[PKOFF], j + 1);
                int32_t va = i32_at(&o[PVOFF], j), vz = i32_at(&o[PVOFF], j + 1);
                Py_ssize_t kl = kz - ka, vl = vz - va;
                Py_ssize_t inner = 1 + varint_len(kl) + kl + 1 + varint_len(vl) + vl;
                if (put_varint(&header, 0x0a) < 0 || put_varint(&header, inner) < 0 ||
                    put_varint(&header, 0x0a) < 0 || put_varint(&header, kl) < 0 ||
                    buf_put(&header, (const char *)o[PKDATA].b.buf + ka, kl) < 0 ||
                    put_varint(&header, 0x12) < 0 || put_varint(&header, vl) < 0 ||
                    buf_put(&header, (const char *)o[PVDATA].b.buf + va, vl) < 0)
                    goto fail;
            }
        }
        if (o[KOFF].present && bit_of(&o[KVALID], r)) {
            int32_t ka = i32_at(&o[KOFF], r), kz = i32_at(&o[KOFF], r + 1);
            if (put_varint(&header, 0x12) < 0 || put_varint(&header, kz - ka) < 0 ||
                buf_put(&header, (const char *)o[KDATA].b.buf + ka, kz - ka) < 0)
                goto fail;
        }
        int32_t va = i32_at(&o[VOFF], r), vz = i32_at(&o[VOFF], r + 1);
        if (put_varint(&header, 0x18) < 0 || put_varint(&header, (uint64_t)(vz - va)) < 0)
            goto fail;
        if (o[EMS].present && bit_of(&o[EVALID], r)) {
            int64_t ms = i64_at(&o[EMS], r);
            if (ms && (put_varint(&header, 0x28) < 0 || put_varint(&header, (uint64_t)ms) < 0))
                goto fail;
        }
        if (o[KB64].present && bit_of(&o[KB64], r) && (put_varint(&header, 0x30) < 0 || put_varint(&header, 1) < 0))
            goto fail;
        int64_t seq = i64_at(&o[SEQS], r);
        if (put_varint(&header, 0x40) < 0 || put_varint(&header, (uint64_t)seq) < 0)
            goto fail;
        uint8_t size[4] = {(uint8_t)(header.len >> 24), (uint8_t)(header.len >> 16), (uint8_t)(header.len >> 8),
                           (uint8_t)header.len};
        if (buf_put(&batch, size, 4) < 0 || buf_put(&batch, header.p, header.len) < 0 ||
            buf_put(&batch, vdata + va, vz - va) < 0)
            goto fail;
        if (count == 0) {
            first = seq;
            highest = seq;
        }
        if (seq > highest)
            highest = seq;
        count++;
        if (count >= max_messages || batch.len >= max_bytes) {
            if (seal(list, &batch, count, first, highest) < 0)
                goto fail;
            count = 0;
        }
    }
    if (count && seal(list, &batch, count, first, highest) < 0)
        goto fail;
    for (int i = 0; i < NBUF; i++)
        opt_release(&o[i]);
    PyMem_Free(batch.p);
    PyMem_Free(header.p);
    return list;
fail:
    for (int i = 0; i < NBUF; i++)
        opt_release(&o[i]);
    PyMem_Free(batch.p);
    PyMem_Free(header.p);
    Py_XDECREF(list);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode_entries", (PyCFunction)(void (*)(void))decode_entries, METH_FASTCALL,
     "See pyspark_magnetar.entry_columns.decode_entries_python."},
    {"encode_batches", (PyCFunction)(void (*)(void))encode_batches, METH_FASTCALL,
     "See pyspark_magnetar.row_batches.encode_batches_python."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyspark_magnetar._columns", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModule_Create(&module);
}
