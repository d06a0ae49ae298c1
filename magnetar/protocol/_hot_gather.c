/* A sealed ledger's kept sections gathered for its compaction, compiled
 * (part of magnetar.protocol._hot).
 *
 * gather_sections(maps, ats, offsets, lengths, counts) -> bytes | None:
 *   the bytes of every section, back to back in order (one chunk's worth),
 *   each checked; None if any section is not there whole. Section i lies
 *   in segment ats[i] >> 40 (maps[segment]: a buffer, the segment's map)
 *   at (ats[i] & (2**40 - 1)) + offsets[i], lengths[i] bytes holding
 *   counts[i] stored records ([u32 size][u32 CRC32C] then the entry,
 *   big-endian) and nothing else. The four columns are array('q') of one
 *   length. A segment missing from maps, a section past its map's end, a
 *   short record, a bad CRC or bytes left over: None.
 *
 *   The copying and the CRCs run without the GIL (the maps' buffers are
 *   held, so a map cannot be closed under it): called from a worker
 *   thread, the event loop runs meanwhile. In Python, a ledger of 1,000
 *   sections was a loop step, a slice and a parse per section with the GIL
 *   held, ~30 times a second at 10,000 written topics.
 *   Twin: storage/object/spilled_sections.py gather_sections_python.
 *
 * TypeError for columns that are not array('q') or a map that is not a
 * buffer; ValueError for columns of different lengths.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32c.h"
#include "_hot_gather.h"

#define OFFSET_BITS 40
#define OFFSET_MASK ((((int64_t)1) << OFFSET_BITS) - 1)

void
hot_gather_init(void)
{
    crc32c_init();  /* this file's own copy of the tables (_crc32c.h is static) */
}

static uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int
column(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "q") != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "gather_sections: the columns must be array('q')");
        return -1;
    }
    return 0;
}

/* Whether [p, p + length) is exactly `count` stored records, each CRC right. */
static int
whole(const uint8_t *p, int64_t length, int64_t count)
{
    int64_t off = 0;
    for (int64_t r = 0; r < count; r++) {
        if (length - off < 8)
            return 0;
        int64_t n = be32(p + off);
        uint32_t sum = be32(p + off + 4);
        if (length - off - 8 < n || crc32c(0, p + off + 8, (size_t)n) != sum)
            return 0;
        off += 8 + n;
    }
    return off == length;
}

PyObject *
hot_gather_sections(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "gather_sections(maps: dict, ats, offsets, lengths, counts)");
        return NULL;
    }
    PyObject *maps = args[0];
    Py_buffer cols[4];
    int got = 0;
    for (; got < 4; got++)
        if (column(args[1 + got], &cols[got]) < 0)
            break;
    PyObject *result = NULL;
    Py_buffer *views = NULL;   /* the maps' buffers, one per distinct segment met */
    int64_t *segments = NULL;  /* their segment numbers */
    Py_ssize_t *which = NULL;  /* per section: its index in views */
    Py_ssize_t nviews = 0, n = 0;
    if (got < 4)
        goto done;
    n = cols[0].len / 8;
    if (cols[1].len / 8 != n || cols[2].len / 8 != n || cols[3].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "gather_sections: the columns differ in length");
        goto done;
    }
    const int64_t *ats = cols[0].buf, *offsets = cols[1].buf, *lengths = cols[2].buf, *counts = cols[3].buf;
    views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    segments = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    which = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (views == NULL || segments == NULL || which == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* With the GIL: each segment's buffer (sections are mostly in one or
     * two segments: the last one met is tried first), the bounds, the size. */
    int64_t total = 0;
    int bad = 0;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        int64_t segment = ats[i] >> OFFSET_BITS;
        Py_ssize_t v = nviews - 1;
        while (v >= 0 && segments[v] != segment)
            v--;
        if (v < 0) {
            PyObject *key = PyLong_FromLongLong(segment);
            if (key == NULL)
                goto done;
            PyObject *map = PyDict_GetItemWithError(maps, key);  /* borrowed */
            Py_DECREF(key);
            if (map == NULL) {
                if (PyErr_Occurred())
                    goto done;
                bad = 1;  /* not mapped: not kept */
                break;
            }
            if (PyObject_GetBuffer(map, &views[nviews], PyBUF_SIMPLE) < 0)
                goto done;
            segments[nviews] = segment;
            v = nviews++;
        }
        int64_t position = (ats[i] & OFFSET_MASK) + offsets[i];
        if (ats[i] < 0 || offsets[i] < 0 || lengths[i] < 0 || counts[i] < 0
                || position + lengths[i] > (int64_t)views[v].len) {
            bad = 1;
            break;
        }
        which[i] = v;
        total += lengths[i];
    }
    if (bad) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        goto done;
    uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *src = (const uint8_t *)views[which[i]].buf + (ats[i] & OFFSET_MASK) + offsets[i];
        memcpy(dst, src, (size_t)lengths[i]);
        if (!whole(dst, lengths[i], counts[i])) {  /* checked in the copy: the map may be rewritten */
            bad = 1;
            break;
        }
        dst += lengths[i];
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        Py_DECREF(out);
        out = Py_None;
        Py_INCREF(out);
    }
    result = out;
done:
    for (Py_ssize_t v = 0; v < nviews; v++)
        PyBuffer_Release(&views[v]);
    PyMem_Free(views);
    PyMem_Free(segments);
    PyMem_Free(which);
    for (int c = 0; c < got; c++)
        PyBuffer_Release(&cols[c]);
    return result;
}

/* spill_places(keys, prefix, pos, base) -> bytes | None: where each
 * section's commit object begins in the spill, as native int64s (an
 * array('q')'s bytes): for key i, "<prefix>/<name>-<seq>" (no '/' in the
 * name, seq all ASCII digits), pos[seq - base]. None if a key is not of
 * that form or not under `prefix`, its seq is outside pos, or its place
 * is negative (not spilled). keys: a list of str; pos: array('q').
 * Twin: storage/object/spilled_sections.py spill_places_python. */
static int
key_seq(PyObject *key, const char *prefix, Py_ssize_t plen, int64_t *seq)
{
    if (!PyUnicode_Check(key) || !PyUnicode_IS_COMPACT_ASCII(key))
        return 0;
    const char *k = (const char *)PyUnicode_1BYTE_DATA(key);
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    if (n <= plen + 1 || k[plen] != '/' || memcmp(k, prefix, (size_t)plen) != 0)
        return 0;
    Py_ssize_t dash = -1;
    for (Py_ssize_t j = plen + 1; j < n; j++) {
        if (k[j] == '/')
            return 0;  /* the prefix is all before the last '/' */
        if (k[j] == '-')
            dash = j;
    }
    if (dash < 0 || n - dash - 1 < 1 || n - dash - 1 > 18)
        return 0;
    int64_t v = 0;
    for (Py_ssize_t j = dash + 1; j < n; j++) {
        if (k[j] < '0' || k[j] > '9')
            return 0;
        v = v * 10 + (k[j] - '0');
    }
    *seq = v;
    return 1;
}

PyObject *
hot_spill_places(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "spill_places(keys: list, prefix: str, pos: array('q'), base: int)");
        return NULL;
    }
    int64_t base = PyLong_AsLongLong(args[3]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer pos;
    if (column(args[2], &pos) < 0)
        return NULL;
    PyObject *keys = args[0], *result = NULL;
    Py_ssize_t plen;
    const char *prefix = PyUnicode_AsUTF8AndSize(args[1], &plen);
    Py_ssize_t n = PyList_GET_SIZE(keys), npos = pos.len / 8;
    const int64_t *at = pos.buf;
    if (prefix == NULL)
        goto done;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL)
        goto done;
    int64_t *places = (int64_t *)PyBytes_AS_STRING(out);
    PyObject *last = NULL;  /* a ledger's sections may share a commit object (not at many topics) */
    int64_t place = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (key != last) {
            int64_t seq;
            last = key;
            if (!key_seq(key, prefix, plen, &seq) || seq < base || seq - base >= npos
                    || (place = at[seq - base]) < 0) {
                Py_DECREF(out);
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
        }
        places[i] = place;
    }
    result = out;
done:
    PyBuffer_Release(&pos);
    return result;
}
