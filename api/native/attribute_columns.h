/* attribute_columns.c's one function, registered in fastpath.c's method table. */
#ifndef FLAGSIGHT_ATTRIBUTE_COLUMNS_H
#define FLAGSIGHT_ATTRIBUTE_COLUMNS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* attribute_columns(body, raw, rows: dict[str, int], missing, max_columns: int[, kinds: dict
 *                   | None[, coded: dict | None]]) -> dict[str, list] | None   (positional only)
 * With `kinds` (an optional sixth argument), each column's name is also put there with the
 * frozenset of its values' types (the type of `missing` among them when some row has none).
 * With `coded` (a seventh), each column of at most 255 distinct strings, numbers and booleans
 * is also put there as (distinct: tuple, codes: bytes): `missing` first among the distinct
 * values, and for each row the index of its value (the very object its list holds). */
PyObject *attribute_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
