/* attribute_columns.c's one function, registered in fastpath.c's method table. */
#ifndef FLAGSIGHT_ATTRIBUTE_COLUMNS_H
#define FLAGSIGHT_ATTRIBUTE_COLUMNS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* attribute_columns(body, raw, rows: dict[str, int], missing, max_columns: int)
 *     -> dict[str, list] | None */
PyObject *attribute_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
