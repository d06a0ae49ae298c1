/* A bulk read's per-entry byte work, compiled (part of magnetar.protocol._hot).
 *
 * fetch_payload(runs) -> bytes: the body of a FETCH_ENTRIES_RESPONSE,
 *   [u32 count][u32 size]... then the entries back to back (big-endian),
 *   from runs as ManagedLedger.read_runs gives them: (ledger id, first
 *   entry id, [entry bytes, ...]) tuples. One pass to size, one to write:
 *   no Python step per entry (a response of one message per entry holds
 *   ~25,000). Twin: protocol/fetch_payload.py fetch_payload_python.
 *
 * bytes_within(datas, start, limit) -> (keep, total): how many of `datas`
 *   a byte-bounded read keeps: the fewest (at least 1) whose sizes, added to
 *   `start`, reach `limit`, and that sum; (len(datas) + 1, start + all their
 *   sizes) when they never do. Twin: storage/read_budget.py.
 *
 * TypeError for an entry that is not bytes-like, ValueError for a response
 * past 4 GiB (the u32 sizes cannot say it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_hot_fetch.h"

static void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The size of one entry; -1 with TypeError when it is not bytes or a buffer. */
static Py_ssize_t
entry_size(PyObject *data)
{
    if (PyBytes_CheckExact(data))
        return PyBytes_GET_SIZE(data);
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return -1;
    Py_ssize_t n = view.len;
    PyBuffer_Release(&view);
    return n;
}

/* The entries list of one run (its third item); NULL with TypeError otherwise. */
static PyObject *
run_entries(PyObject *run)
{
    if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 3 || !PyList_Check(PyTuple_GET_ITEM(run, 2))) {
        PyErr_SetString(PyExc_TypeError, "a run is (ledger id, first entry id, [entries])");
        return NULL;
    }
    return PyTuple_GET_ITEM(run, 2);
}

PyObject *
hot_fetch_payload(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "fetch_payload(runs: list)");
        return NULL;
    }
    PyObject *runs = args[0];
    Py_ssize_t nruns = PyList_GET_SIZE(runs), count = 0, body = 0;
    for (Py_ssize_t r = 0; r < nruns; r++) {
        PyObject *datas = run_entries(PyList_GET_ITEM(runs, r));
        if (datas == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(datas); i++) {
            Py_ssize_t n = entry_size(PyList_GET_ITEM(datas, i));
            if (n < 0)
                return NULL;
            if (n > (Py_ssize_t)UINT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "an entry past 4 GiB");
                return NULL;
            }
            body += n;
        }
        count += PyList_GET_SIZE(datas);
    }
    if (count > (Py_ssize_t)UINT32_MAX || body > PY_SSIZE_T_MAX - 4 - 4 * count) {
        PyErr_SetString(PyExc_ValueError, "a fetch response past 4 GiB");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, 4 + 4 * count + body);
    if (out == NULL)
        return NULL;
    uint8_t *sizes = (uint8_t *)PyBytes_AS_STRING(out), *at = sizes + 4 + 4 * count;
    put_be32(sizes, (uint32_t)count);
    sizes += 4;
    for (Py_ssize_t r = 0; r < nruns; r++) {
        PyObject *datas = PyTuple_GET_ITEM(PyList_GET_ITEM(runs, r), 2);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(datas); i++) {
            PyObject *data = PyList_GET_ITEM(datas, i);
            if (PyBytes_CheckExact(data)) {
                Py_ssize_t n = PyBytes_GET_SIZE(data);
                memcpy(at, PyBytes_AS_STRING(data), n);
                put_be32(sizes, (uint32_t)n);
                at += n;
            } else {
                Py_buffer view;
                if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
                    Py_DECREF(out);
                    return NULL;
                }
                memcpy(at, view.buf, view.len);
                put_be32(sizes, (uint32_t)view.len);
                at += view.len;
                PyBuffer_Release(&view);
            }
            sizes += 4;
        }
    }
    return out;
}

PyObject *
hot_bytes_within(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "bytes_within(datas: list, start, limit)");
        return NULL;
    }
    long long total = PyLong_AsLongLong(args[1]), limit = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *datas = args[0];
    Py_ssize_t count = PyList_GET_SIZE(datas);
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t n = entry_size(PyList_GET_ITEM(datas, k));
        if (n < 0)
            return NULL;
        total += n;
        if (total >= limit)
            return Py_BuildValue("(nL)", k + 1, total);
    }
    return Py_BuildValue("(nL)", count + 1, total);
}
