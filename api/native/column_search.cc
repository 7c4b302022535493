/* RE2 over a column of strings, in one native call: the service's column search for MATCHES
 * (flagsight_core.conditions.use_column_search). See api/native/__init__.py for why it exists
 * and tests/native/test_column_search.py for the checks that it decides as the core's own path.
 *
 * The library is Debian's RE2 (libre2-dev), the engine the core uses through google-re2: the
 * same syntax, the same linear-time guarantee, the same unanchored search of UTF-8 text. What
 * this file adds is only the loop, so that 10,000 e-mail addresses cost one call rather than
 * 10,000 trips through Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <re2/re2.h>

#include <memory>
#include <string>
#include <unordered_map>

namespace {

/* Compiled expressions by source text. The service holds a few dozen; past CACHE_MAX the
 * cache starts again, so what segments hold cannot grow a worker. Every use holds the GIL. */
constexpr size_t CACHE_MAX = 256;
std::unordered_map<std::string, std::unique_ptr<RE2>> *cache;

/* The expression compiled as the core compiles it (never_capture, no logging), or null when
 * this RE2 refuses it (the caller then answers None and the core asks its own RE2). */
const RE2 *compiled(const char *source, Py_ssize_t length) {
    std::string key(source, static_cast<size_t>(length));
    auto found = cache->find(key);
    if (found != cache->end()) {
        return found->second.get();
    }
    RE2::Options options;
    options.set_never_capture(true);
    options.set_log_errors(false);
    auto expression = std::make_unique<RE2>(re2::StringPiece(source, length), options);
    if (!expression->ok()) {
        return nullptr;
    }
    if (cache->size() >= CACHE_MAX) {
        cache->clear();
    }
    const RE2 *kept = expression.get();
    cache->emplace(std::move(key), std::move(expression));
    return kept;
}

/* search(items: list[str], expression: str) -> bytearray | None: a byte per item, 1 where RE2
 * finds the expression in it; None where this cannot say (an item that is not valid Unicode,
 * such as a lone surrogate, which the core matches as bytes; an expression this RE2 refuses). */
PyObject *search(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "search(items: list[str], expression: str)");
        return nullptr;
    }
    Py_ssize_t source_length;
    const char *source = PyUnicode_AsUTF8AndSize(args[1], &source_length);
    if (source == nullptr) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const RE2 *expression = compiled(source, source_length);
    if (expression == nullptr) {
        Py_RETURN_NONE;
    }
    PyObject *items = args[0];
    Py_ssize_t count = PyList_GET_SIZE(items);
    PyObject *found = PyByteArray_FromStringAndSize(nullptr, count);
    if (found == nullptr) {
        return nullptr;
    }
    char *out = PyByteArray_AS_STRING(found);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyUnicode_Check(item)) {
            Py_DECREF(found);
            PyErr_SetString(PyExc_TypeError, "search: every item must be a str");
            return nullptr;
        }
        Py_ssize_t length;
        const char *text = PyUnicode_AsUTF8AndSize(item, &length);
        if (text == nullptr) {
            PyErr_Clear();
            Py_DECREF(found);
            Py_RETURN_NONE;
        }
        re2::StringPiece piece(text, static_cast<size_t>(length));
        out[i] = expression->Match(piece, 0, piece.size(), RE2::UNANCHORED, nullptr, 0) ? 1 : 0;
    }
    return found;
}

PyMethodDef methods[] = {
    {"search", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(search)), METH_FASTCALL,
     "search(items, expression): a byte per item, 1 where RE2 finds expression in it; None "
     "where it cannot say."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_column_search", "RE2 over a column of strings.", -1, methods,
    nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__column_search(void) {
    if (cache == nullptr) {
        cache = new std::unordered_map<std::string, std::unique_ptr<RE2>>();
    }
    return PyModule_Create(&module);
}
