/*
 * proxy_app.prefix._runs: the prefix index's lookup (PrefixIndex.hits) in C.
 *
 * A placement with a 4,096-token prompt asks which slots hold the longest
 * leading run of its 256 keys. In numpy that is some forty small array calls
 * and binary searches whose memory is cold by then (~0.25 ms at a million
 * keys, a quarter of the placement); here it is one walk over the keys that
 * stops at the first one no slot still in the run holds.
 * proxy_app/prefix/index.py keeps the numpy version for an install built
 * without a C compiler; tests/proxy/test_prefix_index.py holds the two to
 * each other.
 *
 *   leading_runs(keys, slots, dead, query, added, removed) -> {slot: run}
 *       keys (int64) and slots (int32): the base's pairs, sorted by key then
 *       slot; dead (bool, by slot): slots whose keys no longer count; query:
 *       a sequence of int keys; added and removed: the delta, {key: slot or
 *       set of slots} pairs held beyond the base and base pairs no longer
 *       held. A slot's run is how many of query's first keys it holds in a
 *       row; slots holding the first key only are answered.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t *items;  /* sorted, distinct */
    Py_ssize_t size, capacity;
} Slots;

static int slots_reserve(Slots *set, Py_ssize_t size) {
    if (size <= set->capacity) return 0;
    Py_ssize_t capacity = set->capacity ? set->capacity : 32;
    while (capacity < size) capacity *= 2;
    int64_t *items = PyMem_Realloc(set->items, capacity * sizeof(int64_t));
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    set->items = items;
    set->capacity = capacity;
    return 0;
}

/* Where ``slot`` is in the set, or would go. */
static Py_ssize_t slots_find(const Slots *set, int64_t slot) {
    Py_ssize_t low = 0, high = set->size;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (set->items[middle] < slot) low = middle + 1;
        else high = middle;
    }
    return low;
}

static int slots_add(Slots *set, int64_t slot) {
    Py_ssize_t at = slots_find(set, slot);
    if (at < set->size && set->items[at] == slot) return 0;
    if (slots_reserve(set, set->size + 1) < 0) return -1;
    memmove(set->items + at + 1, set->items + at, (set->size - at) * sizeof(int64_t));
    set->items[at] = slot;
    set->size++;
    return 0;
}

static void slots_discard(Slots *set, int64_t slot) {
    Py_ssize_t at = slots_find(set, slot);
    if (at < set->size && set->items[at] == slot) {
        memmove(set->items + at, set->items + at + 1, (set->size - at - 1) * sizeof(int64_t));
        set->size--;
    }
}

/* The first position in keys[0:n] whose key is >= key (strict: > key). */
static Py_ssize_t bound(const int64_t *keys, Py_ssize_t n, int64_t key, int strict) {
    Py_ssize_t low = 0, high = n;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (keys[middle] < key || (strict && keys[middle] == key)) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* Each slot of a delta entry (an int, or a set of ints) through ``apply``; -1 on error. */
static int each_slot(PyObject *held, Slots *set, int (*apply)(Slots *, int64_t, const uint8_t *, Py_ssize_t),
                     const uint8_t *dead, Py_ssize_t dead_len) {
    if (PyLong_Check(held)) {
        long long slot = PyLong_AsLongLong(held);
        if (slot == -1 && PyErr_Occurred()) return -1;
        return apply(set, slot, dead, dead_len);
    }
    PyObject *iterator = PyObject_GetIter(held);
    if (iterator == NULL) return -1;
    PyObject *item;
    int status = 0;
    while (status == 0 && (item = PyIter_Next(iterator)) != NULL) {
        long long slot = PyLong_AsLongLong(item);
        Py_DECREF(item);
        status = (slot == -1 && PyErr_Occurred()) ? -1 : apply(set, slot, dead, dead_len);
    }
    Py_DECREF(iterator);
    return (status == 0 && PyErr_Occurred()) ? -1 : status;
}

static int is_dead(int64_t slot, const uint8_t *dead, Py_ssize_t dead_len) {
    return slot >= 0 && slot < dead_len && dead[slot];
}

static int add_live(Slots *set, int64_t slot, const uint8_t *dead, Py_ssize_t dead_len) {
    return is_dead(slot, dead, dead_len) ? 0 : slots_add(set, slot);
}

static int take(Slots *set, int64_t slot, const uint8_t *dead, Py_ssize_t dead_len) {
    (void)dead;
    (void)dead_len;
    slots_discard(set, slot);
    return 0;
}

/* The live slots holding ``key``: the base's pairs, less the removed, with the added. */
static int holders(Slots *set, PyObject *key_object, int64_t key, const int64_t *keys, const int32_t *slots,
                   Py_ssize_t n, const uint8_t *dead, Py_ssize_t dead_len, PyObject *added, PyObject *removed) {
    /* The base's pairs of a key are sorted by slot and distinct: appended as they come. */
    Py_ssize_t start = bound(keys, n, key, 0), end = bound(keys, n, key, 1);
    set->size = 0;
    if (slots_reserve(set, end - start) < 0) return -1;
    for (Py_ssize_t i = start; i < end; i++)
        if (!is_dead(slots[i], dead, dead_len)) set->items[set->size++] = slots[i];
    if (PyDict_GET_SIZE(removed)) {
        PyObject *held = PyDict_GetItemWithError(removed, key_object);
        if (held == NULL && PyErr_Occurred()) return -1;
        if (held != NULL && each_slot(held, set, take, dead, dead_len) < 0) return -1;
    }
    if (PyDict_GET_SIZE(added)) {
        PyObject *held = PyDict_GetItemWithError(added, key_object);
        if (held == NULL && PyErr_Occurred()) return -1;
        if (held != NULL && each_slot(held, set, add_live, dead, dead_len) < 0) return -1;
    }
    return 0;
}

static int put_run(PyObject *answer, int64_t slot, Py_ssize_t run) {
    PyObject *key = PyLong_FromLongLong(slot), *value = PyLong_FromSsize_t(run);
    int status = (key == NULL || value == NULL) ? -1 : PyDict_SetItem(answer, key, value);
    Py_XDECREF(key);
    Py_XDECREF(value);
    return status;
}

static PyObject *leading_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "leading_runs(keys, slots, dead, query, added, removed) takes 6 arguments");
        return NULL;
    }
    PyObject *added = args[4], *removed = args[5];
    if (!PyDict_Check(added) || !PyDict_Check(removed)) {
        PyErr_SetString(PyExc_TypeError, "added and removed must be dicts");
        return NULL;
    }
    Py_buffer keys, slots, dead;
    if (PyObject_GetBuffer(args[0], &keys, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &slots, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&keys);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &dead, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&keys);
        PyBuffer_Release(&slots);
        return NULL;
    }
    PyObject *answer = NULL, *query = NULL;
    Slots alive = {0}, current = {0};
    if (keys.itemsize != 8 || slots.itemsize != 4 || dead.itemsize != 1 ||
        keys.len / 8 != slots.len / 4) {
        PyErr_SetString(PyExc_TypeError, "keys must be int64, slots int32 of the same length, dead bool");
        goto done;
    }
    query = PySequence_Fast(args[3], "query must be a sequence");
    if (query == NULL) goto done;
    answer = PyDict_New();
    if (answer == NULL) goto done;
    const int64_t *key_items = keys.buf;
    const int32_t *slot_items = slots.buf;
    Py_ssize_t n = keys.len / 8, length = PySequence_Fast_GET_SIZE(query);
    PyObject *const *items = PySequence_Fast_ITEMS(query);
    Py_ssize_t position = 0;
    for (; position < length; position++) {
        long long key = PyLong_AsLongLong(items[position]);
        if (key == -1 && PyErr_Occurred()) goto fail;
        Slots *into = position == 0 ? &alive : &current;
        if (holders(into, items[position], key, key_items, slot_items, n, dead.buf, dead.len, added, removed) < 0)
            goto fail;
        if (position > 0) {
            /* A slot still in the run that does not hold this key ends its run here (both sets sorted). */
            Py_ssize_t kept = 0, j = 0;
            for (Py_ssize_t i = 0; i < alive.size; i++) {
                while (j < current.size && current.items[j] < alive.items[i]) j++;
                if (j < current.size && current.items[j] == alive.items[i]) alive.items[kept++] = alive.items[i];
                else if (put_run(answer, alive.items[i], position) < 0) goto fail;
            }
            alive.size = kept;
        }
        if (alive.size == 0) break;
    }
    for (Py_ssize_t i = 0; i < alive.size; i++)
        if (put_run(answer, alive.items[i], position) < 0) goto fail;
    goto done;
fail:
    Py_CLEAR(answer);
done:
    PyMem_Free(alive.items);
    PyMem_Free(current.items);
    Py_XDECREF(query);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&dead);
    return answer;
}

static PyMethodDef methods[] = {
    {"leading_runs", (PyCFunction)(void (*)(void))leading_runs, METH_FASTCALL,
     "leading_runs(keys, slots, dead, query, added, removed) -> {slot: run}"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "proxy_app.prefix._runs", NULL, 0, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__runs(void) { return PyModule_Create(&module); }
