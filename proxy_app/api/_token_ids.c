/*
 * proxy_app.api._token_ids: a placement body's prompt_token_ids read straight into SPEC 15.1's packed bytes.
 *
 * A 4,096-token prompt is most of its placement body (15-28 KB of digits).
 * orjson turns it into 4,096 Python ints (~0.08-0.15 ms), which the checks
 * and the keys then pack back into bytes. Here the array is read once into
 * the bytes the keys are computed from, and orjson parses the rest of the
 * body with the array's place taken by null. proxy_app/api/token_ids.py
 * calls it and does without it where pip built no C module;
 * tests/proxy/test_token_ids.py holds its answers to orjson's.
 *
 *   split(body) -> (start, end, packed) or None
 *       When body (bytes) is a JSON object with exactly one top-level
 *       "prompt_token_ids" member, no top-level name written with an escape, whose
 *       value is an array of plain decimal integers from 0 to 2**32-1 (no
 *       sign, fraction, exponent or leading zero): the array's span
 *       body[start:end] and its items as 4 bytes each, little-endian.
 *       None for any other body, valid or not: the caller then parses all of
 *       it as it always would, so every answer, error or not, stays the one
 *       the full parse gives.
 *
 * Only the walk over the top level has to be right: a member's value is
 * skipped by its strings and brackets, which finds its end in valid JSON;
 * in invalid JSON the rest of the body is still invalid and orjson says so.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static const char TOKENS_NAME[] = "prompt_token_ids";
#define TOKENS_NAME_LENGTH (sizeof(TOKENS_NAME) - 1)

static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static inline const char *past_space(const char *p, const char *end) {
    while (p < end && is_space(*p)) p++;
    return p;
}

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Past the string whose opening quote is at p; NULL if it never closes. */
static const char *past_string(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '"') return p + 1;
        if (*p == '\\') p++;  /* the escaped character, a quote or not */
    }
    return NULL;
}

/* Past the value at p (p < end); NULL where it has no end. */
static const char *past_value(const char *p, const char *end) {
    if (*p == '"') return past_string(p, end);
    if (*p == '{' || *p == '[') {
        Py_ssize_t depth = 0;
        while (p < end) {
            char c = *p;
            if (c == '"') {
                p = past_string(p, end);
                if (p == NULL) return NULL;
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if ((c == '}' || c == ']') && --depth == 0) return p + 1;
            p++;
        }
        return NULL;
    }
    const char *start = p;  /* a number, true, false or null: up to what may follow a value */
    while (p < end && !is_space(*p) && *p != ',' && *p != '}' && *p != ']') p++;
    return p > start ? p : NULL;
}

/* The array at p ('[') into out (room for one item per two bytes of it); past it, or NULL where it is not an
 * array of plain integers from 0 to 2**32-1. *count: its items. */
static const char *read_tokens(const char *p, const char *end, unsigned char *out, Py_ssize_t *count) {
    Py_ssize_t n = 0;
    p = past_space(p + 1, end);
    if (p < end && *p == ']') {
        *count = 0;
        return p + 1;
    }
    while (p < end) {
        const char *digits = p;
        uint64_t value = 0;
        while (p < end && is_digit(*p) && p - digits < 11) value = value * 10 + (uint64_t)(*p++ - '0');
        Py_ssize_t width = p - digits;
        if (width == 0 || width > 10 || value > UINT32_MAX || (width > 1 && *digits == '0')) return NULL;
        out[4 * n] = (unsigned char)value;
        out[4 * n + 1] = (unsigned char)(value >> 8);
        out[4 * n + 2] = (unsigned char)(value >> 16);
        out[4 * n + 3] = (unsigned char)(value >> 24);
        n++;
        p = past_space(p, end);
        if (p == end) return NULL;
        if (*p == ']') {
            *count = n;
            return p + 1;
        }
        if (*p != ',') return NULL;
        p = past_space(p + 1, end);
    }
    return NULL;
}

static PyObject *split(PyObject *module, PyObject *arg) {
    char *text;
    Py_ssize_t length;
    if (PyBytes_AsStringAndSize(arg, &text, &length) < 0) return NULL;
    const char *begin = text, *end = text + length;
    const char *p = past_space(begin, end), *span = NULL, *span_end = NULL;
    unsigned char *packed = NULL;
    Py_ssize_t count = 0;
    PyObject *answer = NULL;
    if (p == end || *p != '{') Py_RETURN_NONE;
    p = past_space(p + 1, end);
    if (p < end && *p == '}') Py_RETURN_NONE;
    while (p < end) {
        if (*p != '"') goto none;
        const char *name = p + 1;
        p = past_string(p, end);
        if (p == NULL) goto none;
        /* Any top-level name written with an escape may be "prompt_token_ids" spelt another way (a duplicate
         * the full parse takes, the last one winning), so such a body is left to the full parse whole. */
        if (memchr(name, '\\', (size_t)(p - 1 - name)) != NULL) goto none;
        int is_tokens = (size_t)(p - 1 - name) == TOKENS_NAME_LENGTH && memcmp(name, TOKENS_NAME, TOKENS_NAME_LENGTH) == 0;
        p = past_space(p, end);
        if (p == end || *p != ':') goto none;
        p = past_space(p + 1, end);
        if (p == end) goto none;
        if (is_tokens) {
            if (span != NULL || *p != '[') goto none;  /* twice, or not an array: the full parse answers */
            packed = PyMem_Malloc((size_t)(end - p) * 2 + 4);
            if (packed == NULL) return PyErr_NoMemory();
            span = p;
            p = read_tokens(p, end, packed, &count);
            span_end = p;
        } else {
            p = past_value(p, end);
        }
        if (p == NULL) goto none;
        p = past_space(p, end);
        if (p == end) goto none;
        if (*p == '}') break;
        if (*p != ',') goto none;
        p = past_space(p + 1, end);
    }
    if (p == end || span == NULL || past_space(p + 1, end) != end) goto none;
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)packed, 4 * count);
    if (bytes != NULL) answer = Py_BuildValue("(nnN)", span - begin, span_end - begin, bytes);
    PyMem_Free(packed);
    return answer;
none:
    PyMem_Free(packed);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"split", split, METH_O,
     "split(body) -> (start, end, packed) or None: the top-level prompt_token_ids array's span and its items "
     "packed as SPEC 15.1 packs token ids."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_token_ids", NULL, 0, methods};

PyMODINIT_FUNC PyInit__token_ids(void) { return PyModule_Create(&module); }
