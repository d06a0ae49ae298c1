/* The Spark connector's column work, compiled: stored entries to Arrow column
 * buffers (reads, _columns_decode.c) and Arrow columns to batch payloads
 * (writes, _columns_encode.c), and the partition of each row's key (writes to
 * partitioned topics, _columns_keys.c), without a Python object per message. Each has
 * a pure-Python twin that the tests compare it with (entry_columns.py,
 * row_batches.py, partition_rows.py). This file is the module and the buffer object that hands
 * decoded columns to pyarrow without a copy.
 *
 * Built by setup.py as an optional extension; without it the twins run.
 */
#include "_columns.h"

/* A read-only buffer owning memory from the raw allocator. */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len, cap; /* cap: the block's size, for the pool */
} Owned;

static int
owned_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    Owned *o = (Owned *)self;
    static char empty[1];
    /* The view holds a reference to self, so the memory outlives every view. */
    return PyBuffer_FillInfo(view, self, o->p ? o->p : empty, o->len, 1, flags);
}

static void
owned_dealloc(PyObject *self)
{
    col_block_put(((Owned *)self)->p, ((Owned *)self)->cap);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t
owned_length(PyObject *self)
{
    return ((Owned *)self)->len;
}

static PyBufferProcs owned_as_buffer = {owned_getbuffer, NULL};
static PySequenceMethods owned_as_sequence = {.sq_length = owned_length};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyspark_magnetar._columns.ColumnBuffer",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &owned_as_buffer,
    .tp_as_sequence = &owned_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes of one decoded column buffer: read-only, buffer protocol and len().",
};

PyObject *
col_owned(Buf *b)
{
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (o == NULL) {
        buf_free(b);
        return NULL;
    }
    /* Give back the slack of a small buffer sized for more rows than came;
     * a pool block keeps its size, to be handed out again whole. */
    if (b->p && b->cap < COL_POOL_MIN && b->cap > b->len + 4096) {
        char *p = PyMem_RawRealloc(b->p, b->len ? b->len : 1);
        if (p != NULL) {
            b->p = p;
            b->cap = b->len ? b->len : 1;
        }
    }
    o->p = b->p;
    o->len = b->len;
    o->cap = b->cap;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

int
col_init_owned(PyObject *module)
{
    if (PyType_Ready(&OwnedType) < 0)
        return -1;
    fetch_init();
    return 0;
}

static PyMethodDef methods[] = {
    {"decode_entries", (PyCFunction)(void (*)(void))decode_entries, METH_FASTCALL,
     "See pyspark_magnetar.entry_columns.decode_entries_python."},
    {"decode_fetch", (PyCFunction)(void (*)(void))decode_fetch, METH_FASTCALL,
     "See pyspark_magnetar.fetch_columns.decode_fetch_python."},
    {"encode_batches", (PyCFunction)(void (*)(void))encode_batches, METH_FASTCALL,
     "See pyspark_magnetar.row_batches.encode_batches_python."},
    {"key_partitions", (PyCFunction)(void (*)(void))key_partitions, METH_FASTCALL,
     "See pyspark_magnetar.partition_rows.key_partitions_python."},
    {"block_pool", block_pool, METH_NOARGS,
     "The column block pool's counters: hits, misses, kept_bytes (see _columns_pool.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyspark_magnetar._columns", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__columns(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && col_init_owned(m) < 0)
        Py_CLEAR(m);
    return m;
}
