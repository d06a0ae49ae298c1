/* Writes: Arrow columns to batch payloads.
 *
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
#include "_columns.h"

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

PyObject *
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
                    goto nomem;
            }
        }
        if (o[KOFF].present && bit_of(&o[KVALID], r)) {
            int32_t ka = i32_at(&o[KOFF], r), kz = i32_at(&o[KOFF], r + 1);
            if (put_varint(&header, 0x12) < 0 || put_varint(&header, kz - ka) < 0 ||
                buf_put(&header, (const char *)o[KDATA].b.buf + ka, kz - ka) < 0)
                goto nomem;
        }
        int32_t va = i32_at(&o[VOFF], r), vz = i32_at(&o[VOFF], r + 1);
        if (put_varint(&header, 0x18) < 0 || put_varint(&header, (uint64_t)(vz - va)) < 0)
            goto nomem;
        if (o[EMS].present && bit_of(&o[EVALID], r)) {
            int64_t ms = i64_at(&o[EMS], r);
            if (ms && (put_varint(&header, 0x28) < 0 || put_varint(&header, (uint64_t)ms) < 0))
                goto nomem;
        }
        if (o[KB64].present && bit_of(&o[KB64], r) && (put_varint(&header, 0x30) < 0 || put_varint(&header, 1) < 0))
            goto nomem;
        int64_t seq = i64_at(&o[SEQS], r);
        if (put_varint(&header, 0x40) < 0 || put_varint(&header, (uint64_t)seq) < 0)
            goto nomem;
        uint8_t size[4] = {(uint8_t)(header.len >> 24), (uint8_t)(header.len >> 16), (uint8_t)(header.len >> 8),
                           (uint8_t)header.len};
        if (buf_put(&batch, size, 4) < 0 || buf_put(&batch, header.p, header.len) < 0 ||
            buf_put(&batch, vdata + va, vz - va) < 0)
            goto nomem;
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
    buf_free(&batch);
    buf_free(&header);
    return list;
nomem: /* the buffers report failure without an exception */
    PyErr_NoMemory();
fail:
    for (int i = 0; i < NBUF; i++)
        opt_release(&o[i]);
    buf_free(&batch);
    buf_free(&header);
    Py_XDECREF(list);
    return NULL;
}

