/* A compaction's per-section byte work (_hot_gather.c), in _hot's method table. */
#ifndef MAGNETAR_HOT_GATHER_H
#define MAGNETAR_HOT_GATHER_H

#include <Python.h>

void hot_gather_init(void);
PyObject *hot_gather_sections(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *hot_spill_places(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
