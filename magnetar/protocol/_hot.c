/* The broker's per-entry byte work, compiled: splitting a received chunk's
 * SEND frames, reading a SEND command and checking its CRC32C, writing a
 * SEND_RECEIPT frame and an entry's BrokerEntryMetadata prefix.
 *
 * Each function does exactly what its pure-Python twin does (same results,
 * same None for "ask protobuf", same ValueError), and the twins live beside
 * the callers: protocol/fast_send.py (parse_send), protocol/frames.py
 * (send_frame, send_frames), protocol/receipts.py (receipt_frame,
 * build_entry), protocol/receipt_runs.py (receipt_runs: a client's side). The unit tests run both against protobuf.
 * Built by `pip install -e .` (setup.py); when it is missing or
 * MAGNETAR_PURE_PYTHON=1 is set, the Python twins run instead.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32c.h"
#include "_hot_fetch.h"
#include "_hot_gather.h"

/* SendCommandView (a tuple subclass from fast_send.py), set by register_send_view;
   Frame and PayloadBlock (tuple subclasses from frames.py), set by register_frame_types. */
static PyTypeObject *send_view_type = NULL;
static PyTypeObject *frame_type = NULL;
static PyTypeObject *block_type = NULL;

#define SEND_TYPE 6
#define SEND_RECEIPT_TYPE 7

/* Field tags of CommandSend (wire type 0); 1000 and 1001 are two bytes on the wire. */
#define T_PRODUCER_ID 0x08
#define T_SEQUENCE_ID 0x10
#define T_NUM_MESSAGES 0x18
#define T_TXN_LEAST 0x20
#define T_TXN_MOST 0x28
#define T_HIGHEST 0x30
#define T_IS_CHUNK 0x38
#define T_MARKER 0x40
#define T_EXPECTED_OFFSET (1000 << 3)
#define T_OFFSET_EPOCH (1001 << 3)

/* Presence bits, in fast_send._FIELDS order. */
#define B_NUM (1 << 2)
#define B_TXL (1 << 3)
#define B_TXM (1 << 4)
#define B_HIGH (1 << 5)
#define B_CHUNK (1 << 6)
#define B_MARKER (1 << 7)
#define B_EXP (1 << 8)
#define B_EPOCH (1 << 9)

static PyObject *
register_send_view(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "register_send_view takes a tuple subclass");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(send_view_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

/* The SEND in b[start:end] as a new SendCommandView, Py_None (a new
   reference) when it is not a plain SEND, NULL with an exception set on
   a memory error. `len` is the whole buffer's length. */
static PyObject *
decode_send(const uint8_t *b, Py_ssize_t len, Py_ssize_t start, Py_ssize_t end)
{
    if (start < 0 || end > len || end - start < 4 || b[start] != 0x08 || b[start + 1] != SEND_TYPE
        || b[start + 2] != 0x32)
        goto none;
    {
        uint8_t size = b[start + 3];
        if (size >= 0x80 || start + 4 + size != end)
            goto none;
    }
    Py_ssize_t pos = start + 4;
    int have_pid = 0, have_seq = 0;
    uint64_t pid = 0, seq = 0, txl = 0, txm = 0, high = 0, expected = 0, epoch = 0;
    int64_t num = 1;
    int chunk = 0, marker = 0;
    long present = 0;
    while (pos < end) {
        /* Reads past `end` (into the payload) are allowed, as in Python;
           past the buffer they mean "truncated": None. */
        if (pos >= len)
            goto none;
        unsigned tag = b[pos];
        if (tag >= 0x80) {
            if (pos + 1 >= len)
                goto none;
            if ((tag != 0xC0 && tag != 0xC8) || b[pos + 1] != 0x3E)
                goto none;
            tag = tag == 0xC0 ? T_EXPECTED_OFFSET : T_OFFSET_EPOCH;
            pos += 1;
        }
        if (pos + 1 >= len)
            goto none;
        uint64_t value = b[pos + 1];
        pos += 2;
        if (value >= 0x80) {
            value &= 0x7F;
            int shift = 7;
            uint8_t c;
            do {
                if (shift > 63 || pos >= len)
                    goto none; /* over 10 bytes, or truncated: protobuf's call */
                c = b[pos++];
                uint64_t bits = c & 0x7F;
                if (shift == 63 && bits > 1)
                    goto none; /* above 2**64 - 1 */
                value |= bits << shift;
                shift += 7;
            } while (c >= 0x80);
        }
        switch (tag) {
        case T_SEQUENCE_ID: seq = value; have_seq = 1; break;
        case T_PRODUCER_ID: pid = value; have_pid = 1; break;
        case T_HIGHEST: high = value; present |= B_HIGH; break;
        case T_NUM_MESSAGES: {
            /* int32 on the wire as a (possibly 10-byte) two's-complement varint. */
            uint32_t low = (uint32_t)(value & 0xFFFFFFFFu);
            num = (low & 0x80000000u) ? (int64_t)low - ((int64_t)1 << 32) : (int64_t)low;
            present |= B_NUM;
            break;
        }
        case T_EXPECTED_OFFSET: expected = value; present |= B_EXP; break;
        case T_OFFSET_EPOCH: epoch = value; present |= B_EPOCH; break;
        case T_TXN_LEAST: txl = value; present |= B_TXL; break;
        case T_TXN_MOST: txm = value; present |= B_TXM; break;
        case T_IS_CHUNK: chunk = value != 0; present |= B_CHUNK; break;
        case T_MARKER: marker = value != 0; present |= B_MARKER; break;
        default: goto none;
        }
    }
    if (pos != end || !have_pid || !have_seq)
        goto none;

    PyObject *out = send_view_type->tp_alloc(send_view_type, 11);
    if (out == NULL)
        return NULL;
    PyObject *items[11] = {
        PyLong_FromUnsignedLongLong(pid), PyLong_FromUnsignedLongLong(seq), PyLong_FromLongLong(num),
        PyLong_FromUnsignedLongLong(txl), PyLong_FromUnsignedLongLong(txm), PyLong_FromUnsignedLongLong(high),
        PyBool_FromLong(chunk), PyBool_FromLong(marker), PyLong_FromUnsignedLongLong(expected),
        PyLong_FromUnsignedLongLong(epoch), PyLong_FromLong(present),
    };
    int failed = 0;
    for (int i = 0; i < 11; i++) {
        if (items[i] == NULL)
            failed = 1;
        PyTuple_SET_ITEM(out, i, items[i]);
    }
    if (failed) {
        Py_DECREF(out);
        return NULL;
    }
    return out;

none:
    Py_RETURN_NONE;
}

static PyObject *
register_frame_types(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "register_frame_types(Frame, PayloadBlock)");
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (!PyType_Check(args[i]) || !PyType_IsSubtype((PyTypeObject *)args[i], &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "register_frame_types takes two tuple subclasses");
            return NULL;
        }
    }
    Py_INCREF(args[0]);
    Py_XSETREF(frame_type, (PyTypeObject *)args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(block_type, (PyTypeObject *)args[1]);
    Py_RETURN_NONE;
}

/* A new tuple-subclass instance of `type` holding `a` and `b` (references stolen,
   also on failure). */
static PyObject *
pair(PyTypeObject *type, PyObject *a, PyObject *b)
{
    PyObject *out = type->tp_alloc(type, 2);
    if (out == NULL) {
        Py_DECREF(a);
        Py_DECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, a);
    PyTuple_SET_ITEM(out, 1, b);
    return out;
}

/* The (buf, start, end) arguments of parse_send and send_frame: 0 with `view`
   to release, or -1 with an exception set (wrong count, not ints, no buffer). */
static int
span_args(PyObject *const *args, Py_ssize_t nargs, const char *usage, Py_buffer *view, Py_ssize_t *start,
          Py_ssize_t *end)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    *start = PyLong_AsSsize_t(args[1]);
    *end = PyLong_AsSsize_t(args[2]);
    if ((*start == -1 || *end == -1) && PyErr_Occurred())
        return -1;
    return PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE);
}

/* parse_send(buf: bytes, start: int, end: int) -> SendCommandView | None */
static PyObject *
parse_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (send_view_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "register_send_view was not called");
        return NULL;
    }
    Py_buffer view;
    Py_ssize_t start, end;
    if (span_args(args, nargs, "parse_send(buf, start, end)", &view, &start, &end) < 0)
        return NULL;
    PyObject *out = decode_send((const uint8_t *)view.buf, view.len, start, end);
    PyBuffer_Release(&view);
    return out;
}

/* ---- CRC32C: _crc32c.h (shared with the Spark reader's _columns_fetch.c) ---- */

/* crc32c(data, initial=0) -> int: for the tests (the broker calls it from C). */
static PyObject *
py_crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data, initial=0)");
        return NULL;
    }
    uint32_t initial = 0;
    if (nargs == 2) {
        unsigned long v = PyLong_AsUnsignedLong(args[1]);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        initial = (uint32_t)v;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc32c(initial, (const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static inline uint32_t
get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The plain SEND frame b[start:end] ([total][cmd size][BaseCommand][block])
   of `data` as a new Frame(SendCommandView, PayloadBlock(memoryview of the
   block, checked)); Py_None (a new reference) when it is not a plain SEND
   (see parse_send); NULL with an exception set. `*whole` is a memoryview of
   `data` made on first use and kept for the next frames of the same buffer
   (the caller releases it). `checked` is the block's checksum verdict when
   the block is a SEND's plain [0x0e01][crc][meta size][...]: 1 it matches, 0
   it does not; -1 when the block has another shape
   (PayloadBlock.verify_checksum decides). */
static PyObject *
frame_at(PyObject *data, const uint8_t *b, Py_ssize_t len, PyObject **whole, Py_ssize_t start, Py_ssize_t end)
{
    if (start < 0 || end > len || end - start <= 12 || b[start + 8] != 0x08 || b[start + 9] != SEND_TYPE)
        Py_RETURN_NONE;
    Py_ssize_t cmd_end = start + 8 + (Py_ssize_t)get_u32(b + start + 4);
    if (cmd_end >= end)
        Py_RETURN_NONE;
    PyObject *send = decode_send(b, len, start + 8, cmd_end);
    if (send == NULL || send == Py_None)
        return send;
    long checked = -1;
    const uint8_t *block = b + cmd_end;
    Py_ssize_t block_len = end - cmd_end;
    if (block_len >= 10 && block[0] == 0x0E && block[1] == 0x01) {
        uint32_t crc = get_u32(block + 2);
        uint32_t meta_size = get_u32(block + 6);
        if (10 + (Py_ssize_t)meta_size <= block_len)
            checked = crc32c(0, block + 6, block_len - 6) == crc;
    }
    /* The block: a memoryview of `data` (which it keeps alive), no copy. */
    if (*whole == NULL && (*whole = PyMemoryView_FromObject(data)) == NULL) {
        Py_DECREF(send);
        return NULL;
    }
    PyObject *raw = PySequence_GetSlice(*whole, cmd_end, end);
    if (raw == NULL) {
        Py_DECREF(send);
        return NULL;
    }
    PyObject *verdict = PyLong_FromLong(checked);
    if (verdict == NULL) {
        Py_DECREF(raw);
        Py_DECREF(send);
        return NULL;
    }
    PyObject *block_obj = pair(block_type, raw, verdict);
    if (block_obj == NULL) {
        Py_DECREF(send);
        return NULL;
    }
    return pair(frame_type, send, block_obj);
}

static int
frame_types_registered(void)
{
    if (send_view_type == NULL || frame_type == NULL || block_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "register_send_view / register_frame_types were not called");
        return 0;
    }
    return 1;
}

/* send_frame(data: bytes, start: int, end: int) -> Frame | None

   The whole frame data[start:end] as a Frame if it is a plain SEND, else
   None (see frame_at). */
static PyObject *
send_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!frame_types_registered())
        return NULL;
    Py_buffer view;
    Py_ssize_t start, end;
    if (span_args(args, nargs, "send_frame(data, start, end)", &view, &start, &end) < 0)
        return NULL;
    PyObject *whole = NULL;
    PyObject *out = frame_at(args[0], (const uint8_t *)view.buf, view.len, &whole, start, end);
    Py_XDECREF(whole);
    PyBuffer_Release(&view);
    return out;
}

/* send_frames(data: bytes, start: int, max_frame_size: int) -> (list[Frame], int)

   The plain SEND frames that lie whole in data[start:], one after the
   other, as Frames (see frame_at), and the position after the last one. It
   stops, without consuming it, at the first frame that is incomplete, whose
   size is outside 4..max_frame_size, or that is not a plain SEND: the
   caller's general decoder takes it from there (and raises what it raises).
   One call per received chunk instead of one per frame: an unbatched
   producer's chunk holds dozens of SENDs. */
static PyObject *
send_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!frame_types_registered())
        return NULL;
    Py_buffer view;
    Py_ssize_t start, max_size;
    if (span_args(args, nargs, "send_frames(data, start, max_frame_size)", &view, &start, &max_size) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len;
    PyObject *frames = PyList_New(0);
    PyObject *whole = NULL;
    Py_ssize_t pos = start;
    while (frames != NULL && pos >= 0 && len - pos >= 4) {
        Py_ssize_t total = (Py_ssize_t)get_u32(b + pos);
        if (total < 4 || total > max_size || pos + 4 + total > len)
            break;
        PyObject *frame = frame_at(args[0], b, len, &whole, pos, pos + 4 + total);
        if (frame == NULL) {
            Py_CLEAR(frames);
            break;
        }
        if (frame == Py_None) {
            Py_DECREF(frame);
            break;
        }
        int failed = PyList_Append(frames, frame);
        Py_DECREF(frame);
        if (failed) {
            Py_CLEAR(frames);
            break;
        }
        pos += 4 + total;
    }
    Py_XDECREF(whole);
    PyBuffer_Release(&view);
    if (frames == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", frames, pos);
}

/* An unsigned 64-bit number from a Python int; ValueError (the Python twin's
   error) for a negative or too large one. */
static int
as_u64(PyObject *obj, uint64_t *out)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an int is required, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyObject *repr = PyObject_Repr(obj);
        PyErr_Format(PyExc_ValueError, "%U does not fit a varint (0 .. 2**64 - 1)", repr);
        Py_XDECREF(repr);
        return -1;
    }
    *out = v;
    return 0;
}

static inline Py_ssize_t
put_varint(uint8_t *p, uint64_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static inline void
put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* receipt_frame(producer_id, sequence_id, highest_sequence_id, ledger_id, entry_id, offset) -> bytes:
   the whole SEND_RECEIPT frame, as receipts.ReceiptTemplate.frame writes it. */
static PyObject *
receipt_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "receipt_frame(producer_id, sequence_id, highest_sequence_id, ledger_id, entry_id, offset)");
        return NULL;
    }
    uint64_t v[6];
    for (int i = 0; i < 6; i++)
        if (as_u64(args[i], &v[i]) < 0)
            return NULL;
    uint8_t body[128];
    Py_ssize_t n = 0;
    body[n++] = 0x08; /* CommandSendReceipt.producer_id (1) */
    n += put_varint(body + n, v[0]);
    body[n++] = 0x10; /* .sequence_id (2) */
    n += put_varint(body + n, v[1]);
    body[n++] = 0x1a; /* .message_id (3), length-delimited */
    Py_ssize_t len_at = n++;
    Py_ssize_t mid_start = n;
    body[n++] = 0x08; /* MessageIdData.ledgerId (1) */
    n += put_varint(body + n, v[3]);
    body[n++] = 0x10; /* .entryId (2) */
    n += put_varint(body + n, v[4]);
    body[len_at] = (uint8_t)(n - mid_start);
    body[n++] = 0x20; /* .highest_sequence_id (4) */
    n += put_varint(body + n, v[2]);
    body[n++] = 0xc0; /* .offset (1000) */
    body[n++] = 0x3e;
    n += put_varint(body + n, v[5]);
    /* n <= 70: every size below fits one byte */
    PyObject *out = PyBytes_FromStringAndSize(NULL, n + 12);
    if (out == NULL)
        return NULL;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    put_u32(p, (uint32_t)(n + 8));
    put_u32(p + 4, (uint32_t)(n + 4));
    p[8] = 0x08; /* BaseCommand.type */
    p[9] = SEND_RECEIPT_TYPE;
    p[10] = (7 << 3) | 2; /* .send_receipt (7) */
    p[11] = (uint8_t)n;
    memcpy(p + 12, body, n);
    return out;
}

/* build_entry(block, publish_time_ms, first_offset, num_messages) -> bytes:
   [0x0e02][u32 size][BrokerEntryMetadata] + block, as entry_format.build_entry writes it. */
static PyObject *
build_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "build_entry(block, publish_time_ms, first_offset, num_messages)");
        return NULL;
    }
    uint64_t ts, first, count;
    if (as_u64(args[1], &ts) < 0 || as_u64(args[2], &first) < 0 || as_u64(args[3], &count) < 0)
        return NULL;
    if (count >= ((uint64_t)1 << 32)) {
        PyErr_Format(PyExc_ValueError, "%llu messages do not fit uint32", (unsigned long long)count);
        return NULL;
    }
    uint64_t index = first + count - 1;
    if (count == 0 ? first == 0 : index < first) {
        PyErr_SetString(PyExc_ValueError, "the entry's index does not fit a varint (0 .. 2**64 - 1)");
        return NULL;
    }
    uint8_t bem[40];
    Py_ssize_t n = 0;
    bem[n++] = 0x08; /* broker_timestamp (1) */
    n += put_varint(bem + n, ts);
    bem[n++] = 0x10; /* index (2) */
    n += put_varint(bem + n, index);
    bem[n++] = 0xc0; /* magnetar_num_messages (1000) */
    bem[n++] = 0x3e;
    n += put_varint(bem + n, count);
    Py_buffer block;
    if (PyObject_GetBuffer(args[0], &block, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 6 + n + block.len);
    if (out != NULL) {
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
        p[0] = 0x0e;
        p[1] = 0x02;
        put_u32(p + 2, (uint32_t)n);
        memcpy(p + 6, bem, n);
        memcpy(p + 6 + n, block.buf, block.len);
    }
    PyBuffer_Release(&block);
    return out;
}

/* ---- SEND_RECEIPTs read in runs (protocol/receipt_runs.py is the twin) ---- */

/* The varint at b[*pos] before `end` into *out, *pos moved past it: 0, or -1
   when it is truncated, over 10 bytes or above 2**64 - 1. */
static int
read_varint(const uint8_t *b, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out)
{
    uint64_t value = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    while (p < end) {
        uint8_t c = b[p++];
        if (shift == 63 && c > 1)
            return -1;
        value |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *out = value;
            *pos = p;
            return 0;
        }
        shift += 7;
        if (shift > 63)
            return -1;
    }
    return -1;
}

/* Whether b[pos:end] is a MessageIdData of exactly ledgerId and entryId. */
static int
message_id_is_plain(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end)
{
    int seen = 0;
    uint64_t ignored;
    while (pos < end) {
        uint8_t tag = b[pos];
        if (tag != 0x08 && tag != 0x10)
            return 0;
        pos += 1;
        if (read_varint(b, &pos, end, &ignored) < 0)
            return 0;
        seen |= tag == 0x08 ? 1 : 2;
    }
    return seen == 3;
}

/* The frame b[start:end] (size fields included) as (*pid, *seq) if it is a
   plain receipt: 1, else 0. */
static int
plain_receipt(const uint8_t *b, Py_ssize_t start, Py_ssize_t end, uint64_t *pid, uint64_t *seq)
{
    if (end - start < 12 || start + 8 + (Py_ssize_t)get_u32(b + start + 4) != end)
        return 0;
    Py_ssize_t p = start + 8;
    if (b[p] != 0x08 || b[p + 1] != SEND_RECEIPT_TYPE || b[p + 2] != ((7 << 3) | 2))
        return 0;
    uint8_t size = b[p + 3];
    if (size >= 0x80 || p + 4 + size != end)
        return 0;
    Py_ssize_t pos = p + 4;
    int have_pid = 0, have_seq = 0;
    while (pos < end) {
        uint8_t tag = b[pos];
        if (tag == 0x1A) { /* message_id: checked, skipped */
            if (pos + 1 >= end)
                return 0;
            uint8_t n = b[pos + 1];
            if (n >= 0x80 || pos + 2 + n > end || !message_id_is_plain(b, pos + 2, pos + 2 + n))
                return 0;
            pos += 2 + n;
            continue;
        }
        if (tag == 0xC0) { /* offset (1000): two-byte tag */
            if (pos + 1 >= end || b[pos + 1] != 0x3E)
                return 0;
            pos += 1;
        } else if (tag != 0x08 && tag != 0x10 && tag != 0x20) {
            return 0;
        }
        pos += 1;
        uint64_t value;
        if (read_varint(b, &pos, end, &value) < 0)
            return 0;
        if (tag == 0x08) {
            *pid = value;
            have_pid = 1;
        } else if (tag == 0x10) {
            *seq = value;
            have_seq = 1;
        }
    }
    return have_pid && have_seq;
}

/* Append (pid, first, last, count) to `runs`: 0, or -1 with an exception set. */
static int
append_run(PyObject *runs, uint64_t pid, uint64_t first, uint64_t last, uint64_t count)
{
    PyObject *run = Py_BuildValue("(KKKK)", (unsigned long long)pid, (unsigned long long)first,
                                  (unsigned long long)last, (unsigned long long)count);
    if (run == NULL)
        return -1;
    int failed = PyList_Append(runs, run);
    Py_DECREF(run);
    return failed;
}

/* receipt_runs(data: bytes, start: int, max_frame_size: int) -> (list[tuple], int)
   See protocol/receipt_runs.py. */
static PyObject *
receipt_runs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, max_size;
    if (span_args(args, nargs, "receipt_runs(data, start, max_frame_size)", &view, &start, &max_size) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len;
    PyObject *runs = PyList_New(0);
    Py_ssize_t pos = start;
    int open = 0;
    uint64_t run_pid = 0, run_first = 0, run_last = 0, run_count = 0;
    while (runs != NULL && pos >= 0 && len - pos >= 4) {
        Py_ssize_t total = (Py_ssize_t)get_u32(b + pos);
        if (total < 4 || total > max_size || pos + 4 + total > len)
            break;
        uint64_t pid = 0, seq = 0;
        if (!plain_receipt(b, pos, pos + 4 + total, &pid, &seq))
            break;
        if (open && pid == run_pid && run_last != UINT64_MAX && run_last + 1 == seq) {
            run_last = seq;
            run_count += 1;
        } else {
            if (open && append_run(runs, run_pid, run_first, run_last, run_count) < 0)
                Py_CLEAR(runs);
            open = 1;
            run_pid = pid;
            run_first = run_last = seq;
            run_count = 1;
        }
        pos += 4 + total;
    }
    if (runs != NULL && open && append_run(runs, run_pid, run_first, run_last, run_count) < 0)
        Py_CLEAR(runs);
    PyBuffer_Release(&view);
    if (runs == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", runs, pos);
}

/* parse_frames(buf, count) -> list[bytes]: the first `count` stored records
   [u32 length][u32 crc32c(data)][data] of buf, each checked against its CRC;
   ValueError("short section at offset N") / ("bad record at offset N") as
   storage/framing.py's twin says. Readers of segment files and object
   sections call it once per read instead of a Python step per entry. */
static PyObject *
parse_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "parse_frames(buf, count)");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "count must not be negative");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    Py_ssize_t len = view.len, off = 0;
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        if (len - off < 8) {
            PyErr_Format(PyExc_ValueError, "short section at offset %zd", off);
            Py_CLEAR(out);
            break;
        }
        Py_ssize_t n = get_u32(b + off);
        uint32_t sum = get_u32(b + off + 4);
        if (len - off - 8 < n || crc32c(0, b + off + 8, n) != sum) {
            PyErr_Format(PyExc_ValueError, "bad record at offset %zd", off);
            Py_CLEAR(out);
            break;
        }
        PyObject *data = PyBytes_FromStringAndSize((const char *)b + off + 8, n);
        if (data == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, data);
        off += 8 + n;
    }
    PyBuffer_Release(&view);
    return out;
}

/* untrack_atoms(t): t itself, after taking it out of the cyclic collector's
 * lists when it is a tuple (or a tuple subclass without a __dict__, such as a
 * named tuple) whose items are all ints, floats, strs, bytes or None. Such a
 * tuple can never be part of a cycle. CPython untracks exact tuples like it
 * by itself, on their first collection; it never untracks a named tuple, so
 * the object store's Sections (one per ledger per commit, alive until the
 * ledger rolls over) were walked by every collection: 143,000 of the 434,000
 * objects a 150 ms middle-generation pass walked at 10,000 written topics.
 * Anything else is returned untouched. */
static PyObject *
untrack_atoms(PyObject *self, PyObject *t)
{
    if (PyTuple_Check(t) && Py_TYPE(t)->tp_dictoffset == 0 && PyObject_GC_IsTracked(t)) {
        Py_ssize_t n = PyTuple_GET_SIZE(t);
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            PyObject *item = PyTuple_GET_ITEM(t, i);
            if (!(PyLong_CheckExact(item) || PyUnicode_CheckExact(item) || PyBytes_CheckExact(item)
                  || PyFloat_CheckExact(item) || item == Py_None))
                break;
        }
        if (i == n)
            PyObject_GC_UnTrack(t);
    }
    Py_INCREF(t);
    return t;
}

static PyMethodDef methods[] = {
    {"register_send_view", (PyCFunction)register_send_view, METH_O, "Set the class parse_send returns."},
    {"parse_send", (PyCFunction)(void (*)(void))parse_send, METH_FASTCALL, "See fast_send.parse_send."},
    {"send_frame", (PyCFunction)(void (*)(void))send_frame, METH_FASTCALL,
     "A whole SEND frame: its command, where its block starts, its checksum verdict (see _hot.c)."},
    {"send_frames", (PyCFunction)(void (*)(void))send_frames, METH_FASTCALL,
     "The whole plain SEND frames at the head of a buffer, and where they end (see _hot.c)."},
    {"crc32c", (PyCFunction)(void (*)(void))py_crc32c, METH_FASTCALL, "CRC32C of a buffer (for the tests)."},
    {"parse_frames", (PyCFunction)(void (*)(void))parse_frames, METH_FASTCALL,
     "The first count stored records of a buffer, checked (see storage/framing.py)."},
    {"register_frame_types", (PyCFunction)(void (*)(void))register_frame_types, METH_FASTCALL,
     "Set the Frame and PayloadBlock classes send_frame builds."},
    {"receipt_frame", (PyCFunction)(void (*)(void))receipt_frame, METH_FASTCALL,
     "See receipts.ReceiptTemplate.frame."},
    {"build_entry", (PyCFunction)(void (*)(void))build_entry, METH_FASTCALL, "See entry_format.build_entry."},
    {"receipt_runs", (PyCFunction)(void (*)(void))receipt_runs, METH_FASTCALL, "See receipt_runs.receipt_runs."},
    {"fetch_payload", (PyCFunction)(void (*)(void))hot_fetch_payload, METH_FASTCALL,
     "A FETCH_ENTRIES_RESPONSE's body from read runs (see _hot_fetch.c)."},
    {"bytes_within", (PyCFunction)(void (*)(void))hot_bytes_within, METH_FASTCALL,
     "How many entries a byte-bounded read keeps (see _hot_fetch.c)."},
    {"gather_sections", (PyCFunction)(void (*)(void))hot_gather_sections, METH_FASTCALL,
     "A sealed ledger's kept sections, back to back and checked (see _hot_gather.c)."},
    {"spill_places", (PyCFunction)(void (*)(void))hot_spill_places, METH_FASTCALL,
     "Where each section's commit object begins in the spill (see _hot_gather.c)."},
    {"untrack_atoms", (PyCFunction)untrack_atoms, METH_O,
     "The tuple itself, out of the cyclic collector's sight when it holds only atoms (see _hot.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "magnetar.protocol._hot",
    "The broker's per-entry byte work, compiled (see _hot.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__hot(void)
{
    crc32c_init();
    hot_gather_init();
    return PyModule_Create(&module);
}
