/* RE2 expressions compiled and searched natively: the service's engine for MATCHES
 * (flagsight_core.conditions.use_expressions). See api/native/__init__.py for why it exists and
 * tests/native/test_expressions.py for the checks that it decides as the core's own path.
 *
 * The library is Debian's RE2 (libre2-dev), the engine the core uses through google-re2: the
 * same syntax, the same linear-time guarantee, the same unanchored search of a string's UTF-8
 * bytes (a lone surrogate encoded with surrogatepass, as the core encodes it). What this file
 * adds is a search without google-re2's binding around it (a single evaluate's MATCHES cost
 * 1.4 us there), and the loop over a bulk request's column in one call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <re2/re2.h>

#include <memory>
#include <new>

namespace {

typedef struct {
    PyObject_HEAD
    RE2 *expression;
} Expression;

/* The UTF-8 bytes of `text` as the core encodes them (surrogatepass): in place when the string
 * is valid Unicode, else in `*holder` (a new bytes object the caller releases). */
bool text_of(PyObject *text, re2::StringPiece *piece, PyObject **holder) {
    Py_ssize_t length;
    const char *data = PyUnicode_AsUTF8AndSize(text, &length);
    if (data != nullptr) {
        *piece = re2::StringPiece(data, static_cast<size_t>(length));
        return true;
    }
    PyErr_Clear();
    *holder = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (*holder == nullptr) return false;
    *piece = re2::StringPiece(PyBytes_AS_STRING(*holder),
                              static_cast<size_t>(PyBytes_GET_SIZE(*holder)));
    return true;
}

/* 1 where the expression is found in `text`, 0 where not, -1 with an exception. */
int found_in(const RE2 *expression, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "an expression searches a str");
        return -1;
    }
    re2::StringPiece piece;
    PyObject *holder = nullptr;
    if (!text_of(text, &piece, &holder)) return -1;
    bool found = expression->Match(piece, 0, piece.size(), RE2::UNANCHORED, nullptr, 0);
    Py_XDECREF(holder);
    return found ? 1 : 0;
}

PyObject *expression_search(PyObject *self, PyObject *text) {
    int found = found_in(reinterpret_cast<Expression *>(self)->expression, text);
    if (found < 0) return nullptr;
    return PyBool_FromLong(found);
}

PyObject *expression_search_column(PyObject *self, PyObject *items) {
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "search_column(items: list[str])");
        return nullptr;
    }
    const RE2 *expression = reinterpret_cast<Expression *>(self)->expression;
    Py_ssize_t count = PyList_GET_SIZE(items);
    PyObject *found = PyByteArray_FromStringAndSize(nullptr, count);
    if (found == nullptr) return nullptr;
    char *out = PyByteArray_AS_STRING(found);
    for (Py_ssize_t i = 0; i < count; i++) {
        int one = found_in(expression, PyList_GET_ITEM(items, i));
        if (one < 0) {
            Py_DECREF(found);
            return nullptr;
        }
        out[i] = static_cast<char>(one);
    }
    return found;
}

void expression_dealloc(PyObject *self) {
    delete reinterpret_cast<Expression *>(self)->expression;
    Py_TYPE(self)->tp_free(self);
}

PyMethodDef expression_methods[] = {
    {"search", expression_search, METH_O,
     "search(text): whether RE2 finds the expression in text (unanchored)."},
    {"search_column", expression_search_column, METH_O,
     "search_column(items): a byte per item (a bytearray), 1 where the expression is found."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject expression_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

/* compile(expression: str) -> Expression | None: compiled as the core compiles it
 * (never_capture, no logging); None where this RE2 does not take it (the core then keeps its
 * own). */
PyObject *compile(PyObject *, PyObject *source) {
    if (!PyUnicode_Check(source)) {
        PyErr_SetString(PyExc_TypeError, "compile(expression: str)");
        return nullptr;
    }
    re2::StringPiece piece;
    PyObject *holder = nullptr;
    if (!text_of(source, &piece, &holder)) return nullptr;
    RE2::Options options;
    options.set_never_capture(true);
    options.set_log_errors(false);
    std::unique_ptr<RE2> compiled;
    try {  // no C++ exception may cross into CPython's C frames
        compiled = std::make_unique<RE2>(piece, options);
    } catch (const std::bad_alloc &) {
        Py_XDECREF(holder);
        return PyErr_NoMemory();
    }
    Py_XDECREF(holder);
    if (!compiled->ok()) Py_RETURN_NONE;
    Expression *made = PyObject_New(Expression, &expression_type);
    if (made == nullptr) return nullptr;
    made->expression = compiled.release();
    return reinterpret_cast<PyObject *>(made);
}

PyMethodDef methods[] = {
    {"compile", compile, METH_O,
     "compile(expression): RE2's compiled expression (search, search_column), or None where "
     "this RE2 does not take it."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_expressions", "RE2 expressions compiled and searched natively.", -1,
    methods, nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__expressions(void) {
    expression_type.tp_name = "api.native._expressions.Expression";
    expression_type.tp_basicsize = sizeof(Expression);
    expression_type.tp_flags = Py_TPFLAGS_DEFAULT;
    expression_type.tp_doc = "A compiled RE2 expression.";
    expression_type.tp_dealloc = expression_dealloc;
    expression_type.tp_methods = expression_methods;
    if (PyType_Ready(&expression_type) < 0) return nullptr;
    return PyModule_Create(&module);
}
