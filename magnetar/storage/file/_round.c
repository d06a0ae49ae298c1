/* A group commit's per-ledger system calls, compiled: all of a round's
 * segment writes (and the pool's reopens, and the fence-marker checks) in
 * one call that gives up the GIL once.
 *
 * Why: each os.write / os.open / os.stat from Python gives up the GIL and
 * then waits to get it back from the event loop thread, busy with the same
 * traffic (up to the 5 ms switch interval). A round that wrote 30 ledgers
 * paid that wait per call. Here the waits are one per call of this module.
 *
 * Each function does exactly what its pure-Python twin in
 * storage/file/round_io.py does (same results, errors as errno numbers);
 * the unit tests run both. Built by `pip install -e .` (setup.py); when it
 * is missing or MAGNETAR_PURE_PYTHON=1 is set, the Python twins run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* An int from a Python int (OverflowError past C int). */
static int
as_int(PyObject *obj)
{
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "not a C int");
        return -1;
    }
    return (int)v;
}

/* write_all(fds, bufs) -> list[int]: write each buffer whole to its
 * descriptor (at the file's offset: segment files are O_APPEND), retrying
 * short writes and EINTR; per item 0 or the errno that stopped it. */
static PyObject *
write_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "write_all(fds, bufs)");
        return NULL;
    }
    PyObject *fds = PySequence_Fast(args[0], "fds must be a sequence");
    if (fds == NULL)
        return NULL;
    PyObject *bufs = PySequence_Fast(args[1], "bufs must be a sequence");
    if (bufs == NULL) {
        Py_DECREF(fds);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fds);
    PyObject *out = NULL;
    int *cfds = NULL, *errs = NULL;
    Py_buffer *views = NULL;
    Py_ssize_t held = 0;
    if (PySequence_Fast_GET_SIZE(bufs) != n) {
        PyErr_SetString(PyExc_ValueError, "fds and bufs differ in length");
        goto done;
    }
    cfds = PyMem_Calloc(n ? n : 1, sizeof(int));
    errs = PyMem_Calloc(n ? n : 1, sizeof(int));
    views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    if (cfds == NULL || errs == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int fd = as_int(PySequence_Fast_GET_ITEM(fds, i));
        if (fd == -1 && PyErr_Occurred())
            goto done;
        cfds[i] = fd;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(bufs, i), &views[i], PyBUF_SIMPLE) < 0)
            goto done;
        held++;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *p = views[i].buf;
        size_t left = (size_t)views[i].len;
        while (left > 0) {
            ssize_t w = write(cfds[i], p, left);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                errs[i] = errno;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLong(errs[i]);
        if (v == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, v);
    }
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(errs);
    PyMem_Free(cfds);
    Py_DECREF(bufs);
    Py_DECREF(fds);
    return out;
}

/* Paths (str or bytes) as file-system bytes objects, owned by *held. */
static const char **
fs_paths(PyObject *seq, Py_ssize_t n, PyObject ***held)
{
    const char **paths = PyMem_Calloc(n ? n : 1, sizeof(char *));
    PyObject **objs = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    *held = objs;
    if (paths == NULL || objs == NULL) {
        PyMem_Free(paths);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &objs[i])) {
            PyMem_Free(paths);
            return NULL;
        }
        paths[i] = PyBytes_AS_STRING(objs[i]);
    }
    return paths;
}

static void
free_paths(PyObject **held, Py_ssize_t n)
{
    if (held == NULL)
        return;
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(held[i]);
    PyMem_Free(held);
}

/* reopen(close_fds, paths, flags) -> list[int]: close each of close_fds
 * (errors ignored, as the pool's os.close of a clean descriptor), then
 * open each path with its flags (mode 0644); per path the new descriptor
 * or minus the errno. */
static PyObject *
reopen(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "reopen(close_fds, paths, flags)");
        return NULL;
    }
    PyObject *closes = NULL, *paths = NULL, *flags = NULL, *out = NULL;
    PyObject **held = NULL;
    const char **cpaths = NULL;
    int *cclose = NULL, *cflags = NULL, *results = NULL;
    Py_ssize_t nc = 0, n = 0;
    if ((closes = PySequence_Fast(args[0], "close_fds must be a sequence")) == NULL ||
        (paths = PySequence_Fast(args[1], "paths must be a sequence")) == NULL ||
        (flags = PySequence_Fast(args[2], "flags must be a sequence")) == NULL)
        goto done;
    nc = PySequence_Fast_GET_SIZE(closes);
    n = PySequence_Fast_GET_SIZE(paths);
    if (PySequence_Fast_GET_SIZE(flags) != n) {
        PyErr_SetString(PyExc_ValueError, "paths and flags differ in length");
        goto done;
    }
    cclose = PyMem_Calloc(nc ? nc : 1, sizeof(int));
    cflags = PyMem_Calloc(n ? n : 1, sizeof(int));
    results = PyMem_Calloc(n ? n : 1, sizeof(int));
    if (cclose == NULL || cflags == NULL || results == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        cclose[i] = as_int(PySequence_Fast_GET_ITEM(closes, i));
        if (cclose[i] == -1 && PyErr_Occurred())
            goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cflags[i] = as_int(PySequence_Fast_GET_ITEM(flags, i));
        if (cflags[i] == -1 && PyErr_Occurred())
            goto done;
    }
    if ((cpaths = fs_paths(paths, n, &held)) == NULL)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nc; i++)
        close(cclose[i]);
    for (Py_ssize_t i = 0; i < n; i++) {
        int fd;
        do {
            fd = open(cpaths[i], cflags[i] | O_CLOEXEC, 0644);
        } while (fd < 0 && errno == EINTR);
        results[i] = fd < 0 ? -errno : fd;
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLong(results[i]);
        if (v == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, v);
    }
done:
    free_paths(held, n);
    PyMem_Free((void *)cpaths);
    PyMem_Free(results);
    PyMem_Free(cflags);
    PyMem_Free(cclose);
    Py_XDECREF(flags);
    Py_XDECREF(paths);
    Py_XDECREF(closes);
    return out;
}

/* exist(paths) -> list[bool]: whether each path names something (stat
 * succeeds), as os.path.exists. */
static PyObject *
exist(PyObject *self, PyObject *arg)
{
    PyObject *paths = PySequence_Fast(arg, "paths must be a sequence");
    if (paths == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(paths);
    PyObject **held = NULL, *out = NULL;
    char *found = PyMem_Calloc(n ? n : 1, 1);
    const char **cpaths = NULL;
    if (found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((cpaths = fs_paths(paths, n, &held)) == NULL)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        struct stat st;
        found[i] = stat(cpaths[i], &st) == 0;
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(out, i, PyBool_FromLong(found[i]));
done:
    free_paths(held, n);
    PyMem_Free((void *)cpaths);
    PyMem_Free(found);
    Py_DECREF(paths);
    return out;
}

static PyMethodDef methods[] = {
    {"write_all", (PyCFunction)(void (*)(void))write_all, METH_FASTCALL,
     "Write each buffer whole to its descriptor; per item 0 or an errno (see round_io.py)."},
    {"reopen", (PyCFunction)(void (*)(void))reopen, METH_FASTCALL,
     "Close descriptors, then open paths; per path a descriptor or minus an errno (see round_io.py)."},
    {"exist", (PyCFunction)exist, METH_O, "Whether each path exists (see round_io.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "magnetar.storage.file._round",
    "A group commit's per-ledger system calls, compiled (see _round.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__round(void)
{
    return PyModule_Create(&module);
}
