/* attribute_columns.c's one function, registered in fastpath.c's method table. */
#ifndef FLAGSIGHT_ATTRIBUTE_COLUMNS_H
#define FLAGSIGHT_ATTRIBUTE_COLUMNS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* attribute_columns(body, raw, rows: dict[str, int], missing, max_columns: int[, kinds: dict])
 *     -> dict[str, list] | None   (positional arguments only)
 * With `kinds` (an optional sixth argument), each column's name is also put there with the frozenset of its values' types
 * (the type of `missing` among them when some row has none). */
PyObject *attribute_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
