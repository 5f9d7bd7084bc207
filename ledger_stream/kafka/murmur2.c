/* Kafka's default partitioner in C: ledger_stream/kafka/partitioner.py's murmur2, which is
 * the reference this must equal (tests/kafka/test_partitioner.py compares them key by key).
 * Built by setup.py with the compiled decision core (LEDGER_BUILD_CORE=mypyc) as the
 * extension module ledger_stream.kafka._murmur2; without it the Python one runs.
 *
 * Why: the processor hashes every input record's key to check its partition; in Python
 * that costs about 6 us a key, here well under one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static uint32_t murmur2(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t whole = length - length % 4;
    for (Py_ssize_t i = 0; i < whole; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8)
                     | ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (length % 4) {
    case 3: h ^= (uint32_t)data[whole + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[whole + 1] << 8; /* fall through */
    case 1: h ^= (uint32_t)data[whole]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* murmur2(data: bytes) -> int: the unsigned 32-bit hash. */
static PyObject *py_murmur2(PyObject *self, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "murmur2 takes bytes");
        return NULL;
    }
    return PyLong_FromUnsignedLong(
        murmur2((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)));
}

/* partition(key: bytes, partitions: int) -> int: the key's partition among ``partitions``. */
static PyObject *py_partition(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "partition takes (key: bytes, partitions: int)");
        return NULL;
    }
    long partitions = PyLong_AsLong(args[1]);
    if (partitions == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (partitions <= 0) {
        PyErr_SetString(PyExc_ValueError, "partitions must be positive");
        return NULL;
    }
    uint32_t h = murmur2((const unsigned char *)PyBytes_AS_STRING(args[0]),
                         PyBytes_GET_SIZE(args[0]));
    return PyLong_FromLong((long)((h & 0x7fffffffu) % (unsigned long)partitions));
}

static PyMethodDef methods[] = {
    {"murmur2", (PyCFunction)py_murmur2, METH_O, "Kafka's murmur2 of bytes (unsigned)."},
    {"partition", (PyCFunction)(void (*)(void))py_partition, METH_FASTCALL,
     "The partition of a bytes key among a count of partitions (murmur2)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_murmur2", NULL, -1, methods};

PyMODINIT_FUNC PyInit__murmur2(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_DIGEST", MURMUR2_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
