/*
 * odradek.storage._recordwalk: the record walker of the append path, in C.
 *
 * A RecordWalker checks the records section of one magic-2 batch (the bytes after its 61-byte
 * header, decompressed) against the rules of Kafka's DefaultRecord reader: exactly `count`
 * records, each record's length varint covering exactly its fields, no bytes after the last
 * record, and offset deltas either exactly 0..count-1 (a producer's batch) or strictly increasing
 * and at most last_offset_delta (a batch the cleaner has compacted). It records the first error
 * (a code, the record index, the byte position, a value) and the facts the validator's rules
 * need: the first record with a null key and the smallest and largest record timestamps.
 *
 * The specification is the pure-Python reference in walker_reference.py; tests prove that this
 * walker, fed the same bytes cut at any points, reaches the same outcome.
 *
 * Streaming: feed(data, final) walks as far as the bytes allow. Key, value and header bytes are
 * skipped, not kept, so a record may span any number of feeds; only a varint cut by the end of
 * `data` is left unconsumed (at most 10 bytes), and feed returns how many bytes it consumed.
 * The caller passes the unconsumed bytes again, followed by more data. With final=True the end
 * of `data` is the end of the records section.
 *
 * Safety: every read is checked against the end of the buffer given and the end of the record
 * its length declares; nothing is ever read past either. Lengths are checked before they are
 * added to positions, and positions are 64-bit. Input is hostile.
 *
 * Threads: feed holds the buffer export (the buffer cannot be resized) and releases the GIL while
 * it walks a buffer of WALK_RELEASE_GIL_MIN_BYTES or more; below that, giving the GIL away costs
 * more than the walk and lets another thread keep the GIL for a whole switch interval. One
 * walker is used by one thread at a time; a second concurrent feed raises RuntimeError.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

/* Bumped whenever the interface changes, so that a stale build fails loudly at import. */
#define WALKER_ABI 1

#define WALK_RELEASE_GIL_MIN_BYTES (64 * 1024)
#define NO_TIMESTAMP (-1)

/* Error codes: the same numbers as odradek.storage.walker_reference.WalkError. */
enum {
    E_NONE = 0,
    E_VARINT_TOO_LONG = 1,
    E_RECORD_LENGTH_NEGATIVE = 2,
    E_RECORD_TRUNCATED = 3,
    E_FIELD_OVERRUN = 4,
    E_KEY_LENGTH = 5,
    E_VALUE_LENGTH = 6,
    E_HEADER_COUNT = 7,
    E_HEADER_KEY_NULL = 8,
    E_HEADER_VALUE_LENGTH = 9,
    E_RECORD_LENGTH_MISMATCH = 10,
    E_OFFSET_DELTA = 11,
    E_TRAILING_BYTES = 12,
    E_TOO_FEW_RECORDS = 13,
};

/* Where the walker is inside a record: the next field it expects. */
enum {
    S_LENGTH,
    S_ATTRIBUTES,
    S_TIMESTAMP_DELTA,
    S_OFFSET_DELTA,
    S_KEY_LENGTH,
    S_KEY,
    S_VALUE_LENGTH,
    S_VALUE,
    S_HEADER_COUNT,
    S_HEADER_KEY_LENGTH,
    S_HEADER_KEY,
    S_HEADER_VALUE_LENGTH,
    S_HEADER_VALUE,
    S_RECORD_END,
    S_DONE,
};

typedef struct {
    PyObject_HEAD
    /* what the batch header says */
    long long count;
    long long last_offset_delta;
    long long base_timestamp;
    int exact_offsets;
    /* progress */
    long long records;        /* records walked whole */
    long long position;       /* bytes consumed, from the start of the records section */
    int state;
    long long record_start;   /* absolute positions, in the records section */
    long long record_length;  /* declared by the current record's length varint */
    long long body_end;
    long long blob_end;       /* end of the key, value or header bytes being skipped */
    long long headers_left;
    long long previous_delta;
    /* outcome */
    int error;
    long long error_record;
    long long error_position;
    long long error_value;
    long long null_key_record;
    long long min_timestamp;
    long long max_timestamp;
    long long min_timestamp_record;
    long long max_timestamp_record;
    int busy;
} Walker;

/* read_varint results */
enum { V_OK, V_END, V_OVERRUN, V_TOO_LONG };

/*
 * Read one zigzag varint of at most max_bytes bytes (5: int32, 10: int64) starting at *pp.
 * `limit` is the end of the current record (absolute), `end` the end of the data (absolute).
 * The record's end is checked before the data's, so that an overrun is reported whatever the
 * data holds. On V_OK, *pp moves past the varint.
 */
static int
read_varint(const uint8_t *base, long long offset, long long end, long long limit,
            long long *pp, int max_bytes, long long *out)
{
    long long p = *pp;
    uint64_t result = 0;
    int shift = 0;
    int i = 0;
    for (;;) {
        if (p >= limit)
            return V_OVERRUN;
        if (p >= end)
            return V_END;
        uint8_t byte = base[p - offset];
        p++;
        uint64_t bits = (uint64_t)(byte & 0x7F);
        if (shift == 63 && bits > 1)
            return V_TOO_LONG; /* the 10th byte carries bits beyond 64 */
        result |= bits << shift;
        if (byte < 0x80)
            break;
        shift += 7;
        i++;
        if (i >= max_bytes)
            return V_TOO_LONG;
    }
    if (max_bytes == 5 && (result >> 32) != 0)
        return V_TOO_LONG;
    *out = (long long)(result >> 1) ^ -(long long)(result & 1);
    *pp = p;
    return V_OK;
}

static void
fail(Walker *w, int code, long long position, long long value)
{
    w->error = code;
    w->error_record = w->records;
    w->error_position = position;
    w->error_value = value;
}

/*
 * Walk data[0:n], which starts at absolute position w->position. Returns the absolute position
 * up to which the bytes are consumed. Runs without the GIL: touches only w and data.
 */
static long long
walk(Walker *w, const uint8_t *data, long long n, int final)
{
    const long long offset = w->position;
    const long long end = offset + n;
    long long p = offset;
    const long long no_limit = INT64_MAX;
    long long value;
    int r;

    while (!w->error) {
        long long field = p; /* where the field being read starts: error positions */
        long long limit = (w->state == S_LENGTH || w->state == S_DONE) ? no_limit : w->body_end;

        switch (w->state) {
        case S_DONE:
            if (p < end)
                fail(w, E_TRAILING_BYTES, p, 0);
            return p;

        case S_LENGTH:
            if (p >= end) {
                if (final)
                    fail(w, E_TOO_FEW_RECORDS, p, w->records);
                return p;
            }
            w->record_start = p;
            w->record_length = -1;
            r = read_varint(data, offset, end, limit, &p, 5, &value);
            if (r == V_OK) {
                if (value < 0) {
                    fail(w, E_RECORD_LENGTH_NEGATIVE, field, value);
                    continue;
                }
                w->record_length = value;
                w->body_end = p + value;
                w->state = S_ATTRIBUTES;
                continue;
            }
            break;

        case S_ATTRIBUTES:
            if (p >= w->body_end) {
                fail(w, E_FIELD_OVERRUN, field, w->record_length);
                continue;
            }
            if (p >= end) {
                r = V_END;
                break;
            }
            p++;
            w->state = S_TIMESTAMP_DELTA;
            continue;

        case S_TIMESTAMP_DELTA:
            r = read_varint(data, offset, end, limit, &p, 10, &value);
            if (r == V_OK) {
                long long timestamp =
                    (long long)((uint64_t)w->base_timestamp + (uint64_t)value);
                if (timestamp != NO_TIMESTAMP) {
                    if (timestamp < w->min_timestamp) {
                        w->min_timestamp = timestamp;
                        w->min_timestamp_record = w->records;
                    }
                    if (timestamp > w->max_timestamp) {
                        w->max_timestamp = timestamp;
                        w->max_timestamp_record = w->records;
                    }
                }
                w->state = S_OFFSET_DELTA;
                continue;
            }
            break;

        case S_OFFSET_DELTA:
            r = read_varint(data, offset, end, limit, &p, 5, &value);
            if (r == V_OK) {
                int bad = w->exact_offsets
                              ? value != w->records
                              : (value <= w->previous_delta || value > w->last_offset_delta);
                if (bad) {
                    fail(w, E_OFFSET_DELTA, field, value);
                    continue;
                }
                w->previous_delta = value;
                w->state = S_KEY_LENGTH;
                continue;
            }
            break;

        case S_KEY_LENGTH:
        case S_VALUE_LENGTH:
        case S_HEADER_VALUE_LENGTH:
            r = read_varint(data, offset, end, limit, &p, 5, &value);
            if (r == V_OK) {
                if (value < -1) {
                    int code = w->state == S_KEY_LENGTH     ? E_KEY_LENGTH
                               : w->state == S_VALUE_LENGTH ? E_VALUE_LENGTH
                                                            : E_HEADER_VALUE_LENGTH;
                    fail(w, code, field, value);
                    continue;
                }
                if (value == -1 && w->state == S_KEY_LENGTH && w->null_key_record < 0)
                    w->null_key_record = w->records;
                if (value > w->body_end - p) {
                    fail(w, E_FIELD_OVERRUN, field, w->record_length);
                    continue;
                }
                w->blob_end = p + (value < 0 ? 0 : value);
                w->state += 1; /* the bytes that follow their length */
                continue;
            }
            break;

        case S_HEADER_KEY_LENGTH:
            r = read_varint(data, offset, end, limit, &p, 5, &value);
            if (r == V_OK) {
                if (value < 0) {
                    fail(w, E_HEADER_KEY_NULL, field, value);
                    continue;
                }
                if (value > w->body_end - p) {
                    fail(w, E_FIELD_OVERRUN, field, w->record_length);
                    continue;
                }
                w->blob_end = p + value;
                w->state = S_HEADER_KEY;
                continue;
            }
            break;

        case S_KEY:
        case S_VALUE:
        case S_HEADER_KEY:
        case S_HEADER_VALUE:
            /* blob_end <= body_end was checked when its length was read */
            if (w->blob_end > end) {
                p = end;
                if (final)
                    fail(w, E_RECORD_TRUNCATED, w->record_start, w->record_length);
                return p;
            }
            p = w->blob_end;
            if (w->state == S_KEY)
                w->state = S_VALUE_LENGTH;
            else if (w->state == S_VALUE)
                w->state = S_HEADER_COUNT;
            else if (w->state == S_HEADER_KEY)
                w->state = S_HEADER_VALUE_LENGTH;
            else
                w->state = --w->headers_left > 0 ? S_HEADER_KEY_LENGTH : S_RECORD_END;
            continue;

        case S_HEADER_COUNT:
            r = read_varint(data, offset, end, limit, &p, 5, &value);
            if (r == V_OK) {
                if (value < 0 || value > w->body_end - p) {
                    fail(w, E_HEADER_COUNT, field, value);
                    continue;
                }
                w->headers_left = value;
                w->state = value > 0 ? S_HEADER_KEY_LENGTH : S_RECORD_END;
                continue;
            }
            break;

        case S_RECORD_END:
            if (p != w->body_end) {
                fail(w, E_RECORD_LENGTH_MISMATCH, w->record_start, w->record_length);
                continue;
            }
            w->records++;
            w->state = w->records == w->count ? S_DONE : S_LENGTH;
            continue;
        }

        /* A varint or byte did not complete: r says why. */
        if (r == V_TOO_LONG) {
            fail(w, E_VARINT_TOO_LONG, field, 0);
        } else if (r == V_OVERRUN) {
            fail(w, E_FIELD_OVERRUN, field, w->record_length);
        } else { /* V_END: the data ended inside this field */
            if (final)
                fail(w, E_RECORD_TRUNCATED, w->record_start, w->record_length);
            return field; /* leave the cut field unconsumed: it is read again whole */
        }
    }
    return p;
}

static int
Walker_init(Walker *w, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"count", "last_offset_delta", "base_timestamp", "exact_offsets",
                               NULL};
    long long count, last_offset_delta, base_timestamp;
    int exact_offsets;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LLLp", keywords, &count, &last_offset_delta,
                                     &base_timestamp, &exact_offsets))
        return -1;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "count must not be negative");
        return -1;
    }
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RecordWalker re-initialised during a feed");
        return -1;
    }
    w->count = count;
    w->last_offset_delta = last_offset_delta;
    w->base_timestamp = base_timestamp;
    w->exact_offsets = exact_offsets;
    w->records = 0;
    w->position = 0;
    w->state = count == 0 ? S_DONE : S_LENGTH;
    w->record_start = 0;
    w->record_length = -1;
    w->body_end = 0;
    w->blob_end = 0;
    w->headers_left = 0;
    w->previous_delta = -1;
    w->error = E_NONE;
    w->error_record = -1;
    w->error_position = -1;
    w->error_value = 0;
    w->null_key_record = -1;
    w->min_timestamp = INT64_MAX;
    w->max_timestamp = INT64_MIN;
    w->min_timestamp_record = -1;
    w->max_timestamp_record = -1;
    w->busy = 0;
    return 0;
}

static PyObject *
Walker_feed(Walker *w, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"data", "final", NULL};
    Py_buffer view;
    int final = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p", keywords, &view, &final))
        return NULL;
    if (w->busy) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "RecordWalker.feed called from two threads at once");
        return NULL;
    }
    w->busy = 1;
    long long start = w->position;
    long long consumed;
    if (view.len >= WALK_RELEASE_GIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        consumed = walk(w, (const uint8_t *)view.buf, view.len, final);
        Py_END_ALLOW_THREADS
    } else {
        consumed = walk(w, (const uint8_t *)view.buf, view.len, final);
    }
    w->position = consumed;
    w->busy = 0;
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(consumed - start);
}

static PyMethodDef Walker_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))Walker_feed, METH_VARARGS | METH_KEYWORDS,
     "feed(data, final=False) -> int: walk data, return how many bytes were consumed."},
    {NULL, NULL, 0, NULL},
};

#define MEMBER(name, type) {#name, type, offsetof(Walker, name), READONLY, NULL}
static PyMemberDef Walker_members[] = {
    MEMBER(count, T_LONGLONG),
    MEMBER(last_offset_delta, T_LONGLONG),
    MEMBER(records, T_LONGLONG),
    MEMBER(position, T_LONGLONG),
    MEMBER(error, T_INT),
    MEMBER(error_record, T_LONGLONG),
    MEMBER(error_position, T_LONGLONG),
    MEMBER(error_value, T_LONGLONG),
    MEMBER(null_key_record, T_LONGLONG),
    MEMBER(min_timestamp, T_LONGLONG),
    MEMBER(max_timestamp, T_LONGLONG),
    MEMBER(min_timestamp_record, T_LONGLONG),
    MEMBER(max_timestamp_record, T_LONGLONG),
    {NULL, 0, 0, 0, NULL},
};

static PyObject *
Walker_done(Walker *w, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(w->state == S_DONE && !w->error);
}

static PyGetSetDef Walker_getset[] = {
    {"done", (getter)Walker_done, NULL, "True once every record was walked without error.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.storage._recordwalk.RecordWalker",
    .tp_basicsize = sizeof(Walker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordWalker(count, last_offset_delta, base_timestamp, exact_offsets)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Walker_init,
    .tp_methods = Walker_methods,
    .tp_members = Walker_members,
    .tp_getset = Walker_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.storage._recordwalk",
    .m_doc = "The record walker of the append path (see _recordwalk.c).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__recordwalk(void)
{
    if (PyType_Ready(&WalkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WalkerType);
    if (PyModule_AddObject(m, "RecordWalker", (PyObject *)&WalkerType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", WALKER_ABI) < 0 ||
        PyModule_AddIntConstant(m, "RELEASE_GIL_MIN_BYTES", WALK_RELEASE_GIL_MIN_BYTES) < 0) {
        Py_DECREF(&WalkerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
