/* Routing: the partition each row's key hashes to.
 *
 * key_partitions(n, key_validity, key_offsets, key_data, partitions, scheme) -> bytes
 * n native-endian int32s. Row r with a key gets hash(key) % partitions, where hash is Java's
 * String.hashCode over the key's UTF-16 code units (scheme 2, JavaStringHash) or Murmur3 x86
 * 32-bit of its UTF-8 bytes with seed 0 (scheme 0, Murmur3_32Hash), masked to a non-negative
 * int as Pulsar's clients mask it; a row without a key (its validity bit clear) gets -1.
 * key_validity is None when every row has a key. Keys are valid UTF-8 (the caller checked:
 * binary keys that are not were replaced by their base64 text). Buffers start at row 0. */
#include "_columns.h"

enum { MURMUR3_32 = 0, JAVA_STRING = 2 };

static uint32_t
java_string_hash(const uint8_t *s, Py_ssize_t len)
{
    uint32_t h = 0;
    Py_ssize_t i = 0;
    while (i < len) {
        uint32_t c = s[i];
        int more = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        if (more)
            c &= 0x3F >> more;
        for (int k = 1; k <= more && i + k < len; k++)
            c = (c << 6) | (s[i + k] & 0x3F);
        i += 1 + more;
        if (c >= 0x10000) { /* a surrogate pair in UTF-16 */
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            c = 0xDC00 + (c & 0x3FF);
        }
        h = 31 * h + c;
    }
    return h;
}

static inline uint32_t
rotl(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static uint32_t
murmur3_32(const uint8_t *s, Py_ssize_t len)
{
    const uint32_t c1 = 0xCC9E2D51, c2 = 0x1B873593;
    uint32_t h = 0, k;
    Py_ssize_t body = len - len % 4;
    for (Py_ssize_t i = 0; i < body; i += 4) {
        k = (uint32_t)s[i] | (uint32_t)s[i + 1] << 8 | (uint32_t)s[i + 2] << 16 | (uint32_t)s[i + 3] << 24;
        h ^= rotl(k * c1, 15) * c2;
        h = rotl(h, 13) * 5 + 0xE6546B64;
    }
    k = 0;
    for (Py_ssize_t i = len - 1; i >= body; i--)
        k = (k << 8) | s[i];
    if (len > body)
        h ^= rotl(k * c1, 15) * c2;
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85EBCA6B;
    h ^= h >> 13;
    h *= 0xC2B2AE35;
    h ^= h >> 16;
    return h;
}

PyObject *
key_partitions(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "key_partitions takes 6 arguments");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[0]);
    long partitions = PyLong_AsLong(args[4]);
    long scheme = PyLong_AsLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (n < 0 || partitions < 1 || (scheme != MURMUR3_32 && scheme != JAVA_STRING)) {
        PyErr_SetString(PyExc_ValueError, "key_partitions: bad row count, partition count or scheme");
        return NULL;
    }
    Py_buffer valid = {0}, offsets = {0}, data = {0};
    int has_valid = args[1] != Py_None;
    PyObject *out = NULL;
    if ((has_valid && PyObject_GetBuffer(args[1], &valid, PyBUF_SIMPLE) < 0))
        return NULL;
    if (PyObject_GetBuffer(args[2], &offsets, PyBUF_SIMPLE) < 0)
        goto done;
    if (PyObject_GetBuffer(args[3], &data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&offsets);
        goto done;
    }
    if (offsets.len < 4 * (n + 1) || (has_valid && valid.len * 8 < n)) {
        PyErr_SetString(PyExc_ValueError, "key_partitions: buffers shorter than the rows");
        goto release;
    }
    out = PyBytes_FromStringAndSize(NULL, 4 * n);
    if (out == NULL)
        goto release;
    int32_t *dst = (int32_t *)PyBytes_AS_STRING(out);
    const uint8_t *bits = valid.buf;
    const uint8_t *bytes = data.buf;
    for (Py_ssize_t r = 0; r < n; r++) {
        if (has_valid && !((bits[r >> 3] >> (r & 7)) & 1)) {
            dst[r] = -1;
            continue;
        }
        int32_t a, z;
        memcpy(&a, (const char *)offsets.buf + 4 * r, 4);
        memcpy(&z, (const char *)offsets.buf + 4 * (r + 1), 4);
        if (a < 0 || z < a || z > data.len) {
            PyErr_SetString(PyExc_ValueError, "key_partitions: key offsets outside the data");
            Py_CLEAR(out);
            goto release;
        }
        uint32_t h = scheme == JAVA_STRING ? java_string_hash(bytes + a, z - a) : murmur3_32(bytes + a, z - a);
        dst[r] = (int32_t)((h & 0x7FFFFFFF) % (uint32_t)partitions);
    }
release:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
done:
    if (has_valid)
        PyBuffer_Release(&valid);
    return out;
}
