/* A bulk read's per-entry byte work (_hot_fetch.c), in _hot's method table. */
#ifndef MAGNETAR_HOT_FETCH_H
#define MAGNETAR_HOT_FETCH_H

#include <Python.h>

PyObject *hot_fetch_payload(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *hot_bytes_within(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
