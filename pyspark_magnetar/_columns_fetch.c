/* Reads: a fetch response's stored entries to Arrow column buffers in one call.
 *
 * decode_fetch(data, pos, lo, hi, expected, decompress) walks the entries of
 * a FETCH_ENTRIES response (data: [u32 count][u32 size]... then the stored
 * entries back to back, big-endian; a stored entry is [0x0e02][u32 size]
 * [BrokerEntryMetadata] then the producer's block [0x0e01][u32 crc32c]
 * [u32 meta size][MessageMetadata][payload]) from entry number `pos`, and
 * decodes the rows of the range [lo, hi)
 * from offset `expected` on, in order, while the entries are plain: in
 * sequence (each one's first offset is `expected`, or it holds `expected`),
 * not chunked, of the same schema version. It returns
 *
 *   (buffers, pos, expected, skipped, stop, schema_version, first_offset)
 *
 * buffers: decode_entries' 19-tuple (see _columns_decode.c) of the rows
 * decoded; pos: the entry where it stopped; expected: the next offset the
 * range needs; skipped: messages read below the range's next offset (an
 * entry's members before it, entries entirely before it); stop: why it
 * returned (STOP_END: every entry taken; STOP_ENTRY: the entry at pos needs
 * the caller: a chunk, a gap in the offsets, no broker entry metadata;
 * STOP_DONE: the range is complete; STOP_VERSION: the entry at pos has
 * another schema version, so it starts the next batch); schema_version: the
 * rows' version bytes (None if they name none); first_offset: the first
 * offset of the first entry seen (-1 if none).
 *
 * Markers (entries with marker_type: replicated subscriptions' snapshots)
 * give no row; their offsets are passed over. A compressed payload is handed
 * to decompress(codec, payload, uncompressed_size) -> bytes (the GIL taken
 * back for that call only). A checksum mismatch or a malformed entry raises
 * ValueError naming the entry's first offset; the pure-Python twin is
 * pyspark_magnetar/fetch_columns.py.
 */
#include "_columns.h"

#include "_columns_rows.h"
/* The stored block's checksum; setup.py puts magnetar/protocol on the include path. */
#include "_crc32c.h"

enum { STOP_END = 0, STOP_ENTRY = 1, STOP_DONE = 2, STOP_VERSION = 3 };

static inline uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* One stored entry's parts and the metadata fields that decide its path. */
typedef struct {
    int has_index;
    uint64_t index;
    const uint8_t *meta, *payload;
    Py_ssize_t meta_len, payload_len;
    int64_t count;
    uint64_t compression, uncompressed_size;
    int marker, chunked;
    Span version;
    int has_version;
} Stored;

/* Split a stored entry. COL_BAD with `*what` set when malformed. */
static int
split_stored(const uint8_t *p, Py_ssize_t n, Stored *s, const char **what)
{
    const uint8_t *end = p + n;
    memset(s, 0, sizeof *s);
    s->count = 1;
    if (n >= 6 && p[0] == 0x0e && p[1] == 0x02) {
        uint32_t size = be32(p + 2);
        if ((uint64_t)(n - 6) < size) {
            *what = "broker entry metadata overruns the entry";
            return COL_BAD;
        }
        const uint8_t *q = p + 6, *qend = p + 6 + size;
        while (q < qend) {
            uint64_t num, val = 0;
            int wt;
            Span sp;
            if (field(&q, qend, &num, &wt, &val, &sp) < 0) {
                *what = "malformed broker entry metadata";
                return COL_BAD;
            }
            if (wt == 0 && num == 2) {
                s->has_index = 1;
                s->index = val;
            }
        }
        p = qend;
    }
    if (end - p >= 2 && p[0] == 0x0e && p[1] == 0x01) {
        if (end - p < 10) {
            *what = "truncated checksum header";
            return COL_BAD;
        }
        uint32_t crc = be32(p + 2);
        if (crc32c(0, p + 6, end - (p + 6)) != crc) {
            *what = "checksum mismatch";
            return COL_BAD;
        }
        p += 6;
    }
    if (end - p < 4) {
        *what = "entry without metadata size";
        return COL_BAD;
    }
    uint32_t meta_size = be32(p);
    p += 4;
    if ((uint64_t)(end - p) < meta_size) {
        *what = "metadata overruns the entry";
        return COL_BAD;
    }
    s->meta = p;
    s->meta_len = meta_size;
    s->payload = p + meta_size;
    s->payload_len = end - s->payload;
    const uint8_t *q = s->meta, *qend = s->meta + meta_size;
    while (q < qend) {
        uint64_t num, val = 0;
        int wt;
        Span sp;
        if (field(&q, qend, &num, &wt, &val, &sp) < 0) {
            *what = "malformed MessageMetadata";
            return COL_BAD;
        }
        if (wt == 0) {
            if (num == 8)
                s->compression = val;
            else if (num == 9)
                s->uncompressed_size = val;
            else if (num == 11)
                s->count = (int64_t)(int32_t)val;
            else if (num == 20)
                s->marker = 1;
            else if (num == 27)
                s->chunked = (int32_t)val > 1;
        } else if (wt == 2 && num == 16) {
            s->version = sp;
            s->has_version = 1;
        }
    }
    return COL_OK;
}

typedef struct {
    long long expected, skipped, first_seen;
    Py_ssize_t pos;
    int stop, has_version;
    Span version;
} Progress;

static int
same_version(const Progress *pr, const Stored *s)
{
    if (pr->has_version != s->has_version)
        return 0;
    Py_ssize_t n = pr->version.end - pr->version.p;
    return !s->has_version || (s->version.end - s->version.p == n && memcmp(s->version.p, pr->version.p, n) == 0);
}

/* The walk, GIL released (`*save` holds the thread state; taken back for a
 * decompress call). A COL_* code, or -4 with a Python exception set. */
static int
walk(Out *o, Fail *fail, Progress *pr, const uint8_t *data, Py_ssize_t len, long long hi, PyObject *decompress,
     Py_ssize_t max_rows, PyThreadState **save)
{
    KVs scratch = {0};
    int rc = COL_OK, decoded = 0;
    if (len < 4 || (uint64_t)(len - 4) / 4 < be32(data)) {
        fail->what = "fetched entries truncated";
        fail->first = pr->expected;
        return COL_BAD;
    }
    Py_ssize_t count = be32(data);
    const uint8_t *sizes = data + 4;
    Py_ssize_t at = 4 + 4 * count; /* the byte where entry pr->pos starts */
    for (Py_ssize_t i = 0; i < pr->pos && i < count; i++)
        at += be32(sizes + 4 * i);
    while (1) {
        if (pr->expected >= hi) {
            pr->stop = STOP_DONE;
            break;
        }
        if (pr->pos >= count || (max_rows > 0 && o->rows >= max_rows)) {
            /* the response's end, or enough rows for one batch: the caller goes on from pr->pos */
            pr->stop = STOP_END;
            break;
        }
        Py_ssize_t size = be32(sizes + 4 * pr->pos);
        if (at > len || len - at < size) {
            fail->what = "fetched entries truncated";
            fail->first = pr->expected;
            rc = COL_BAD;
            break;
        }
        const uint8_t *entry = data + at;
        Stored s;
        const char *what = NULL;
        if (split_stored(entry, size, &s, &what) < 0) {
            fail->what = what;
            fail->first = pr->expected;
            rc = COL_BAD;
            break;
        }
        if (!s.has_index || s.count < 0) {
            pr->stop = STOP_ENTRY;
            break;
        }
        long long first = (long long)s.index - s.count + 1, last = (long long)s.index;
        if (pr->first_seen < 0)
            pr->first_seen = first;
        if (s.chunked || first > pr->expected) {
            pr->stop = STOP_ENTRY;
            break;
        }
        if (last < pr->expected || s.marker) {
            /* before the range's next offset, or a marker: no row */
            if (last >= pr->expected)
                pr->expected = last + 1 < hi ? last + 1 : hi;
            else
                pr->skipped += s.count;
            pr->pos++;
            at += size;
            continue;
        }
        if (decoded && !same_version(pr, &s)) {
            pr->stop = STOP_VERSION;
            break;
        }
        pr->has_version = s.has_version;
        pr->version = s.version;
        const uint8_t *payload = s.payload;
        Py_ssize_t payload_len = s.payload_len;
        PyObject *plain = NULL;
        Py_buffer view;
        if (s.compression != 0) {
            PyEval_RestoreThread(*save);
            PyObject *mv = PyMemoryView_FromMemory((char *)s.payload, s.payload_len, PyBUF_READ);
            if (mv != NULL) {
                plain = PyObject_CallFunction(decompress, "(KOK)", (unsigned long long)s.compression, mv,
                                              (unsigned long long)s.uncompressed_size);
                Py_DECREF(mv);
            }
            if (plain == NULL || PyObject_GetBuffer(plain, &view, PyBUF_SIMPLE) < 0) {
                Py_XDECREF(plain);
                *save = PyEval_SaveThread();
                rc = -4;
                break;
            }
            *save = PyEval_SaveThread();
            payload = view.buf;
            payload_len = view.len;
        }
        rc = decode_entry(o, &scratch, fail, s.meta, s.meta_len, payload, payload_len, first, pr->expected, hi);
        if (plain != NULL) {
            PyEval_RestoreThread(*save);
            PyBuffer_Release(&view);
            Py_DECREF(plain);
            *save = PyEval_SaveThread();
        }
        if (rc < 0)
            break;
        decoded = 1;
        pr->skipped += pr->expected - first;
        pr->expected = last + 1 < hi ? last + 1 : hi;
        pr->pos++;
        at += size;
    }
    PyMem_RawFree(scratch.kv);
    if (rc < 0)
        return rc;
    return out_finish(o);
}

PyObject *
decode_fetch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "decode_fetch(data, pos, lo, hi, expected, decompress[, max_rows])");
        return NULL;
    }
    Py_ssize_t max_rows = nargs == 7 ? PyLong_AsSsize_t(args[6]) : 0;
    Progress pr = {0};
    pr.pos = PyLong_AsSsize_t(args[1]);
    (void)PyLong_AsLongLong(args[2]); /* lo: rows below `expected` are never emitted, and expected >= lo */
    long long hi = PyLong_AsLongLong(args[3]);
    pr.expected = PyLong_AsLongLong(args[4]);
    pr.first_seen = -1;
    if (PyErr_Occurred())
        return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pr.pos < 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "pos must not be negative");
        return NULL;
    }
    Out o;
    memset(&o, 0, sizeof o);
    Fail fail = {NULL, 0};
    int rc = out_start(&o, 0, data.len);
    if (rc == COL_OK) {
        PyThreadState *save = PyEval_SaveThread();
        rc = walk(&o, &fail, &pr, data.buf, data.len, hi, args[5], max_rows, &save);
        PyEval_RestoreThread(save);
    }
    PyObject *result = NULL;
    if (rc == COL_BAD)
        PyErr_Format(PyExc_ValueError, "entry at offset %lld: %s", fail.first, fail.what);
    else if (rc == -4)
        ; /* the decompress call's exception */
    else if (rc < 0)
        col_raise(rc);
    else {
        PyObject *buffers = out_result(&o);
        PyObject *version = pr.has_version
            ? PyBytes_FromStringAndSize((const char *)pr.version.p, pr.version.end - pr.version.p)
            : Py_NewRef(Py_None);
        if (buffers != NULL && version != NULL)
            result = Py_BuildValue("(NnLLiNL)", buffers, pr.pos, pr.expected, pr.skipped, pr.stop, version,
                                   pr.first_seen);
        else {
            Py_XDECREF(buffers);
            Py_XDECREF(version);
        }
    }
    PyBuffer_Release(&data);
    out_free(&o);
    return result;
}

void
fetch_init(void)
{
    crc32c_init();
}
