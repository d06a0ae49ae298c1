/* Reads: stored entries to Arrow column buffers.
 *
 * decode_entries(entries, lo, hi[, rows]) takes a sequence of (metadata,
 * payload, first_offset): an entry's MessageMetadata bytes, its payload
 * already decompressed (a batch: [u32 size][SingleMessageMetadata][payload]...),
 * and the topic offset of its first message. It returns the buffers of the
 * rows whose offset is in [lo, hi) (entry_columns.py holds the pure-Python
 * twin and turns these buffers into a RecordBatch):
 *
 *   (rows, key_validity, key_offsets, key_data, value_offsets, value_data,
 *    offsets, publish_us, event_validity, event_us, map_offsets,
 *    prop_key_offsets, prop_key_data, prop_value_offsets, prop_value_data,
 *    producer_offsets, producer_data, key_nulls, event_nulls)
 *
 * `rows`, when given, is how many rows the caller expects: the buffers are
 * sized for it up front (a wrong figure costs only a regrowth).
 *
 * Offsets buffers are int32 (Arrow binary/string/map), numbers int64, all
 * little-endian (the machine's order: x86-64, aarch64). Validity bitmaps are
 * Arrow's (bit i set = row i present). The buffers are handed over without
 * a copy. The decoding runs with the GIL released: the entries' bytes are
 * held (buffer protocol) for its duration, and a Python thread receiving the
 * next entries runs meanwhile. A malformed entry raises ValueError.
 */
#include "_columns.h"

#include "_columns_rows.h"

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
            return COL_BAD;
        if (wt == 2 && num == 1)
            out->key = sp;
        else if (wt == 2 && num == 2)
            out->value = sp;
    }
    return COL_OK;
}

/* Append a property; a repeated key keeps its first position and takes the
 * last value (what a Python dict built from the list does). */
static int
kv_add(KVs *kvs, Span s)
{
    KV kv;
    if (kv_parse(s, &kv) < 0)
        return COL_BAD;
    Py_ssize_t klen = kv.key.end - kv.key.p;
    for (Py_ssize_t i = 0; i < kvs->n; i++) {
        Span k = kvs->kv[i].key;
        if (k.end - k.p == klen && memcmp(k.p, kv.key.p, klen) == 0) {
            kvs->kv[i].value = kv.value;
            return COL_OK;
        }
    }
    if (kvs->n == kvs->cap) {
        Py_ssize_t cap = kvs->cap ? kvs->cap * 2 : 8;
        KV *p = PyMem_RawRealloc(kvs->kv, cap * sizeof(KV));
        if (p == NULL)
            return COL_NOMEM;
        kvs->kv = p;
        kvs->cap = cap;
    }
    kvs->kv[kvs->n++] = kv;
    return COL_OK;
}

/* Arrow offsets start with 0; the buffers sized for `rows` rows. A COL_* code. */
int
out_start(Out *o, Py_ssize_t rows, Py_ssize_t value_bytes)
{
    int rc;
    if ((rc = out_reserve(o, rows, value_bytes)) < 0 || (rc = buf_i32(&o->key_off, 0)) < 0 ||
        (rc = buf_i32(&o->val_off, 0)) < 0 || (rc = buf_i32(&o->map_off, 0)) < 0 ||
        (rc = buf_i32(&o->pk_off, 0)) < 0 || (rc = buf_i32(&o->pv_off, 0)) < 0 ||
        (rc = buf_i32(&o->prod_off, 0)) < 0)
        return rc;
    return COL_OK;
}

/* A bitmap covers every row even when the last rows' bits are clear. A COL_* code. */
int
out_finish(Out *o)
{
    int rc;
    if (o->rows && ((rc = bit_put(&o->key_valid, o->rows - 1, 0)) < 0 ||
                    (rc = bit_put(&o->event_valid, o->rows - 1, 0)) < 0))
        return rc;
    return COL_OK;
}

/* The buffers tuple (GIL held; NULL with an exception). N: the tuple takes
 * each buffer; one that failed (NULL) fails the call, which drops the rest. */
PyObject *
out_result(Out *o)
{
    return Py_BuildValue("(nNNNNNNNNNNNNNNNNnn)", o->rows, col_owned(&o->key_valid), col_owned(&o->key_off),
                         col_owned(&o->key_data), col_owned(&o->val_off), col_owned(&o->val_data),
                         col_owned(&o->offsets), col_owned(&o->publish), col_owned(&o->event_valid),
                         col_owned(&o->event), col_owned(&o->map_off), col_owned(&o->pk_off),
                         col_owned(&o->pk_data), col_owned(&o->pv_off), col_owned(&o->pv_data),
                         col_owned(&o->prod_off), col_owned(&o->prod_data), o->key_nulls, o->event_nulls);
}

/* Free what col_owned has not taken. */
void
out_free(Out *o)
{
    Buf *bufs[] = {&o->key_valid, &o->key_off, &o->key_data, &o->val_off, &o->val_data, &o->offsets, &o->publish,
                   &o->event_valid, &o->event, &o->map_off, &o->pk_off, &o->pk_data, &o->pv_off, &o->pv_data,
                   &o->prod_off, &o->prod_data};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        buf_free(bufs[i]);
}

/* Size the per-row buffers for `rows` rows and the values for `value_bytes`. */
int
out_reserve(Out *o, Py_ssize_t rows, Py_ssize_t value_bytes)
{
    Py_ssize_t bits = rows / 8 + 1;
    if (buf_reserve(&o->key_valid, bits) < 0 || buf_reserve(&o->event_valid, bits) < 0 ||
        buf_reserve(&o->key_off, 4 * (rows + 1)) < 0 || buf_reserve(&o->val_off, 4 * (rows + 1)) < 0 ||
        buf_reserve(&o->map_off, 4 * (rows + 1)) < 0 || buf_reserve(&o->prod_off, 4 * (rows + 1)) < 0 ||
        buf_reserve(&o->offsets, 8 * rows) < 0 || buf_reserve(&o->publish, 8 * rows) < 0 ||
        buf_reserve(&o->event, 8 * rows) < 0 || buf_reserve(&o->val_data, value_bytes) < 0)
        return COL_NOMEM;
    return COL_OK;
}

/* Append the bytes of base64 text `s` (a key sent with partition_key_b64_encoded,
 * as clients do for binary keys): 0, or 1 (nothing appended) when `s` is not
 * base64, so the caller keeps the text as it is; COL_NOMEM. */
/* base64 digit values (RFC 4648 alphabet), -1 for anything else. */
static const int8_t B64[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
    -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

static int
put_base64_decoded(Buf *b, Span s)
{
    Py_ssize_t n = s.end - s.p;
    while (n > 0 && s.p[n - 1] == '=' && (s.end - s.p) - n < 2)
        n--;
    if ((s.end - s.p) % 4 != 0 || n % 4 == 1)
        return 1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (B64[s.p[i]] < 0)
            return 1;
    if (buf_reserve(b, n * 3 / 4 + 3) < 0)
        return COL_NOMEM;
    uint32_t acc = 0;
    int bits = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        acc = (acc << 6) | (uint32_t)B64[s.p[i]];
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b->p[b->len++] = (char)((acc >> bits) & 0xff);
        }
    }
    return 0;
}

/* One row. A COL_* code. */
static int
emit(Out *o, const Fields *f, Span value, int64_t offset, uint64_t publish_ms, uint64_t entry_event_ms,
     Span producer)
{
    int rc;
    Py_ssize_t r = o->rows;
    if ((rc = bit_put(&o->key_valid, r, f->has_key)) < 0)
        return rc;
    if (f->has_key) {
        int kb = f->key_b64 ? put_base64_decoded(&o->key_data, f->key) : 1;
        if (kb < 0)
            return kb;
        if (kb > 0 && (rc = buf_put(&o->key_data, f->key.p, f->key.end - f->key.p)) < 0)
            return rc;
    } else {
        o->key_nulls++;
    }
    if ((rc = buf_i32(&o->key_off, o->key_data.len)) < 0)
        return rc;
    if ((rc = buf_put(&o->val_data, value.p, value.end - value.p)) < 0 ||
        (rc = buf_i32(&o->val_off, o->val_data.len)) < 0)
        return rc;
    if ((rc = buf_i64(&o->offsets, offset)) < 0 || (rc = buf_i64(&o->publish, (int64_t)publish_ms * 1000)) < 0)
        return rc;
    uint64_t ev = f->event_time ? f->event_time : entry_event_ms;
    if ((rc = bit_put(&o->event_valid, r, ev != 0)) < 0 || (rc = buf_i64(&o->event, ev ? (int64_t)ev * 1000 : 0)) < 0)
        return rc;
    if (!ev)
        o->event_nulls++;
    for (Py_ssize_t i = 0; i < f->props.n; i++) {
        KV kv = f->props.kv[i];
        if ((rc = buf_put(&o->pk_data, kv.key.p, kv.key.end - kv.key.p)) < 0 ||
            (rc = buf_i32(&o->pk_off, o->pk_data.len)) < 0 ||
            (rc = buf_put(&o->pv_data, kv.value.p, kv.value.end - kv.value.p)) < 0 ||
            (rc = buf_i32(&o->pv_off, o->pv_data.len)) < 0)
            return rc;
    }
    o->props += f->props.n;
    if ((rc = buf_i32(&o->map_off, o->props)) < 0)
        return rc;
    if ((rc = buf_put(&o->prod_data, producer.p, producer.end - producer.p)) < 0 ||
        (rc = buf_i32(&o->prod_off, o->prod_data.len)) < 0)
        return rc;
    o->rows++;
    return COL_OK;
}

static int
bad(Fail *fail, const char *what, long long first_offset)
{
    fail->what = what;
    fail->first = first_offset;
    return COL_BAD;
}

/* A property or row failed with `rc`; a COL_BAD from a property is a malformed property. */
static int
failed(Fail *fail, int rc, long long first_offset)
{
    if (rc == COL_BAD)
        return bad(fail, "malformed property", first_offset);
    return rc;
}

/* One entry. A COL_* code; on failure `fail` says why. */
int
decode_entry(Out *o, KVs *scratch, Fail *fail, const uint8_t *meta, Py_ssize_t meta_len, const uint8_t *payload,
             Py_ssize_t payload_len, int64_t first, int64_t lo, int64_t hi)
{
    const uint8_t *p = meta, *end = meta + meta_len;
    Span producer = {meta, meta};
    uint64_t publish = 0, event = 0, count = 1;
    int is_batch = 0, rc;
    Fields entry = {0};
    entry.props = *scratch;
    entry.props.n = 0;
    while (p < end) {
        uint64_t num, val = 0;
        int wt;
        Span sp;
        if (field(&p, end, &num, &wt, &val, &sp) < 0) {
            *scratch = entry.props;
            return bad(fail, "malformed MessageMetadata", first);
        }
        if (wt == 2 && num == 1)
            producer = sp;
        else if (wt == 0 && num == 3)
            publish = val;
        else if (wt == 2 && num == 4) {
            if ((rc = kv_add(&entry.props, sp)) < 0) {
                *scratch = entry.props;
                return failed(fail, rc, first);
            }
        } else if (wt == 2 && num == 6) {
            entry.has_key = 1;
            entry.key = sp;
        } else if (wt == 0 && num == 17)
            entry.key_b64 = val != 0;
        else if (wt == 0 && num == 11) {
            is_batch = 1;
            count = (uint64_t)(int32_t)val;
        } else if (wt == 0 && num == 12)
            event = val;
    }
    *scratch = entry.props;
    if (!is_batch) {
        if (first < lo || first >= hi)
            return COL_OK;
        Span value = {payload, payload + payload_len};
        entry.event_time = 0;
        if ((rc = emit(o, &entry, value, first, publish, event, producer)) < 0)
            return failed(fail, rc, first);
        return COL_OK;
    }
    if ((int64_t)count < 0)
        return bad(fail, "negative num_messages_in_batch", first);
    p = payload;
    end = payload + payload_len;
    for (uint64_t i = 0; i < count; i++) {
        if (end - p < 4)
            return bad(fail, "batch truncated", first);
        uint32_t size = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
        p += 4;
        if ((uint64_t)(end - p) < size)
            return bad(fail, "batch message metadata overruns the payload", first);
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
                return bad(fail, "malformed SingleMessageMetadata", first);
            }
            if (wt == 0 && num == 3)
                payload_size = (int64_t)(int32_t)val;
            else if (!wanted)
                continue;
            else if (wt == 2 && num == 1) {
                if ((rc = kv_add(&f.props, sp)) < 0) {
                    *scratch = f.props;
                    return failed(fail, rc, first);
                }
            } else if (wt == 2 && num == 2) {
                f.has_key = 1;
                f.key = sp;
            } else if (wt == 0 && num == 6)
                f.key_b64 = val != 0;
            else if (wt == 0 && num == 5)
                f.event_time = val;
        }
        *scratch = f.props;
        if (payload_size < 0 || payload_size > end - p)
            return bad(fail, "batch message payload overruns the batch", first);
        Span value = {p, p + payload_size};
        p += payload_size;
        if (wanted && (rc = emit(o, &f, value, offset, publish, event, producer)) < 0)
            return failed(fail, rc, first);
    }
    return COL_OK;
}

/* The entries' bytes, held for the decoding. */
typedef struct {
    Py_buffer meta, payload;
    long long first;
} Held;

static void
release(Held *held, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyBuffer_Release(&held[i].meta);
        PyBuffer_Release(&held[i].payload);
    }
    PyMem_RawFree(held);
}

/* Take the entries' bytes (GIL held): the count held, or -1 with an exception set. */
static Py_ssize_t
hold(PyObject *seq, Held *held, Py_ssize_t *payload_bytes)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    *payload_bytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "each entry is a (metadata, payload, first_offset) tuple");
            return -(i + 1);
        }
        held[i].first = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        if (held[i].first == -1 && PyErr_Occurred())
            return -(i + 1);
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 0), &held[i].meta, PyBUF_SIMPLE) < 0)
            return -(i + 1);
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &held[i].payload, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&held[i].meta);
            return -(i + 1);
        }
        *payload_bytes += held[i].payload.len;
    }
    return n;
}

/* Decode every held entry (no GIL needed). A COL_* code. */
static int
decode_all(Out *o, Fail *fail, Held *held, Py_ssize_t n, long long lo, long long hi, Py_ssize_t rows,
           Py_ssize_t payload_bytes)
{
    int rc;
    KVs scratch = {0};
    if ((rc = out_start(o, rows, payload_bytes)) < 0)
        return rc;
    for (Py_ssize_t i = 0; i < n; i++) {
        rc = decode_entry(o, &scratch, fail, held[i].meta.buf, held[i].meta.len, held[i].payload.buf,
                          held[i].payload.len, held[i].first, lo, hi);
        if (rc < 0)
            break;
    }
    PyMem_RawFree(scratch.kv);
    if (rc < 0)
        return rc;
    return out_finish(o);
}

PyObject *
decode_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_entries(entries, lo, hi[, rows])");
        return NULL;
    }
    long long lo = PyLong_AsLongLong(args[1]);
    long long hi = PyLong_AsLongLong(args[2]);
    Py_ssize_t rows = nargs == 4 ? PyLong_AsSsize_t(args[3]) : 0;
    if (PyErr_Occurred())
        return NULL;
    if (rows < 0 || rows > (1 << 26))
        rows = 0; /* a hint only: a nonsense figure is ignored, not trusted */
    PyObject *seq = PySequence_Fast(args[0], "entries must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Held *held = PyMem_RawCalloc(n ? n : 1, sizeof(Held));
    if (held == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    Py_ssize_t payload_bytes;
    Py_ssize_t got = hold(seq, held, &payload_bytes);
    if (got < 0) {
        release(held, -got - 1);
        Py_DECREF(seq);
        return NULL;
    }
    Out o;
    memset(&o, 0, sizeof o);
    Fail fail = {NULL, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_all(&o, &fail, held, n, lo, hi, rows, payload_bytes);
    Py_END_ALLOW_THREADS
    release(held, n);
    Py_DECREF(seq);
    PyObject *result = NULL;
    if (rc == COL_BAD)
        PyErr_Format(PyExc_ValueError, "entry at offset %lld: %s", fail.first, fail.what);
    else if (rc < 0)
        col_raise(rc);
    else
        result = out_result(&o);
    out_free(&o);
    return result;
}
