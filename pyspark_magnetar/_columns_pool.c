/* Blocks of column memory kept for the next record batches.
 *
 * A read task decodes about 32,768 rows per record batch into a dozen fresh
 * buffers, a few MiB in all, and frees them once Spark has taken the batch.
 * Blocks that large are mapped and unmapped by the C library each time, and
 * the kernel zeroes and faults in every page again: a third of a task's CPU
 * before this pool. Freed blocks of 64 KiB or more (their sizes are powers
 * of two: buf_reserve doubles) are kept here instead, up to POOL_LIMIT bytes
 * in all, and handed out again by size.
 *
 * A block comes back only when its owner is freed: a ColumnBuffer when the
 * last Arrow buffer over it is gone (the buffer protocol holds a reference),
 * a Buf when its decode call ends. So a batch Spark still holds is never
 * written again. A mutex guards the pool: blocks are taken with the GIL
 * released (a decode call growing its buffers) and given back with it held.
 */
#include "_columns.h"

#include <pthread.h>

#define POOL_MIN_LOG 16 /* COL_POOL_MIN */
#define POOL_MAX_LOG 27 /* 128 MiB: larger blocks go straight back to the allocator */
#define POOL_DEPTH 8 /* blocks kept per size */
#define POOL_LIMIT ((Py_ssize_t)64 << 20) /* bytes kept in all */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[POOL_MAX_LOG + 1][POOL_DEPTH];
static int depth[POOL_MAX_LOG + 1];
static Py_ssize_t kept_bytes;
static unsigned long long hits, misses;

static int
class_of(Py_ssize_t cap)
{
    if (cap < COL_POOL_MIN || (cap & (cap - 1)) != 0)
        return -1;
    int log = 0;
    while (((Py_ssize_t)1 << log) < cap)
        log++;
    return log <= POOL_MAX_LOG ? log : -1;
}

void *
col_block_get(Py_ssize_t cap)
{
    int c = class_of(cap);
    void *p = NULL;
    if (c >= 0) {
        pthread_mutex_lock(&lock);
        if (depth[c] > 0) {
            p = kept[c][--depth[c]];
            kept_bytes -= cap;
            hits++;
        } else
            misses++;
        pthread_mutex_unlock(&lock);
    }
    return p ? p : PyMem_RawMalloc(cap);
}

void
col_block_put(void *p, Py_ssize_t cap)
{
    if (p == NULL)
        return;
    int c = class_of(cap);
    if (c >= 0) {
        pthread_mutex_lock(&lock);
        if (depth[c] < POOL_DEPTH && kept_bytes + cap <= POOL_LIMIT) {
            kept[c][depth[c]++] = p;
            kept_bytes += cap;
            p = NULL;
        }
        pthread_mutex_unlock(&lock);
    }
    PyMem_RawFree(p);
}

PyObject *
block_pool(PyObject *self, PyObject *unused)
{
    pthread_mutex_lock(&lock);
    unsigned long long h = hits, m = misses;
    Py_ssize_t b = kept_bytes;
    pthread_mutex_unlock(&lock);
    return Py_BuildValue("{s:K,s:K,s:n}", "hits", h, "misses", m, "kept_bytes", b);
}
