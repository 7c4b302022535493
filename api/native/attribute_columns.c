/* A bulk request's attributes (contract 12) read straight into a column per attribute name:
 * what the conditions of a segment read, without a dict per user. See api/native/__init__.py
 * for why, and tests/native/test_attribute_columns.py for the checks that whatever it takes it
 * takes as the Python path does (msgspec's typed decoding, then the names' check), with equal
 * values, and that it hands on everything else.
 *
 * It never refuses a body: where anything is unusual (a syntax error, a name with an escape, a
 * value of another kind, a limit passed, a user named twice or not in the request, more
 * distinct names than the caller allows) it answers None, and the Python path decodes the body
 * and words the 400 when there is one. So it needs to accept only the common shape, exactly.
 *
 * JSON is read by RFC 8259's grammar: insignificant whitespace, strings of UTF-8 with the
 * escapes \" \\ \/ \b \f \n \r \t and \uXXXX (a surrogate pair for one character; a lone
 * surrogate is handed on), numbers by the grammar's own form. A number is read as msgspec reads
 * one into a float: an integer's exact value rounded to a double (so "-0" is 0.0), any other by
 * PyOS_string_to_double, correctly rounded as Python's float() is; one no double holds is
 * handed on (the service refuses it).
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attribute_columns.h"

#define NAME_MAX_LEN 64
#define STRING_MAX_CHARS 1024
#define ARRAY_MAX_ITEMS 100
#define ATTRIBUTES_MAX 50
#define NUMBER_MAX_LEN 64
#define USER_IDENTIFIER_NAME "userIdentifier"

typedef struct {
    const unsigned char *at;
    const unsigned char *end;
    char *scratch; /* a string's decoded bytes, where it had escapes or non-ASCII */
    Py_ssize_t scratch_size;
    const char *text; /* the last string read: in the input itself, or in scratch */
} Reader;

#define CODES_MAX 255 /* distinct values a coded column holds, MISSING's code 0 among them */
#define CODE_SLOTS 1024

/* A column's values as codes (contract 12's conditions then decide each distinct value once):
 * the distinct values in the order first read, MISSING first, and a byte per row. Kept while
 * every value is a string, a number or a boolean and there are at most CODES_MAX of them. */
typedef struct {
    PyObject *values[CODES_MAX + 1]; /* owned; values[0] is MISSING */
    uint64_t hashes[CODES_MAX + 1];
    uint16_t slots[CODE_SLOTS];      /* 0: empty; else an index into values */
    Py_ssize_t count;                /* distinct values, MISSING included */
    unsigned char *codes;            /* a code per row; 0 (MISSING) where a row has none */
} Coding;

typedef struct {
    const unsigned char *name;
    Py_ssize_t length;
    Coding *coding;    /* NULL when not coded (not asked for, or no longer possible) */
    PyObject *column;  /* a list, one item a row */
    PyObject *last;    /* the value last put in it (borrowed: the list holds it), or NULL */
    unsigned kinds;    /* KIND_* of the values put in it */
    Py_ssize_t filled; /* the rows given a value (the others hold `missing`) */
} Column;

/* The types read_value makes, as bits of a column's kinds. */
#define KIND_STR 1u
#define KIND_FLOAT 2u
#define KIND_BOOL 4u
#define KIND_TUPLE 8u

static unsigned kind_of(PyObject *value) {
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) return KIND_STR;
    if (type == &PyFloat_Type) return KIND_FLOAT;
    if (type == &PyBool_Type) return KIND_BOOL;
    return KIND_TUPLE;
}

static void skip_space(Reader *r) {
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\n' || *r->at == '\r')) {
        r->at++;
    }
}

/* Whether the next byte (after whitespace) is `c`; consumes it when it is. */
static int take(Reader *r, unsigned char c) {
    skip_space(r);
    if (r->at < r->end && *r->at == c) {
        r->at++;
        return 1;
    }
    return 0;
}

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(Reader *r, unsigned *out) {
    if (r->end - r->at < 4) return 0;
    unsigned value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(r->at[i]);
        if (digit < 0) return 0;
        value = value * 16 + (unsigned)digit;
    }
    r->at += 4;
    *out = value;
    return 1;
}

static char *put_utf8(char *out, unsigned code) {
    if (code < 0x80) {
        *out++ = (char)code;
    } else if (code < 0x800) {
        *out++ = (char)(0xC0 | (code >> 6));
        *out++ = (char)(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        *out++ = (char)(0xE0 | (code >> 12));
        *out++ = (char)(0x80 | ((code >> 6) & 0x3F));
        *out++ = (char)(0x80 | (code & 0x3F));
    } else {
        *out++ = (char)(0xF0 | (code >> 18));
        *out++ = (char)(0x80 | ((code >> 12) & 0x3F));
        *out++ = (char)(0x80 | ((code >> 6) & 0x3F));
        *out++ = (char)(0x80 | (code & 0x3F));
    }
    return out;
}

/* The length of the well-formed UTF-8 sequence at `s` (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0. */
static int utf8_sequence(const unsigned char *s, const unsigned char *end) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        return (end - s >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - s < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* a surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - s < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
            (s[3] & 0xC0) != 0x80) {
            return 0;
        }
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

/* The string at the reader (its opening quote consumed) decoded into r->scratch: its length in
 * bytes through *length and in characters through *chars; 0 where it is not a string this
 * takes (bad syntax or encoding, a lone surrogate, more than max_chars characters). */
static int read_string(Reader *r, Py_ssize_t *length, Py_ssize_t *chars, Py_ssize_t max_chars,
                       int *ascii) {
    /* Most strings are printable ASCII with no escape: read in place, a byte a step. */
    const unsigned char *start = r->at, *p = r->at;
    while (p < r->end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
    Py_ssize_t plain = p - start;
    if (plain > max_chars) return 0;
    if (p < r->end && *p == '"') {
        r->at = p + 1;
        r->text = (const char *)start;
        *length = *chars = plain;
        *ascii = 1;
        return 1;
    }
    /* Otherwise decoded into scratch, from where the plain part ends. */
    memcpy(r->scratch, start, (size_t)plain);
    r->at = p;
    r->text = r->scratch;
    char *out = r->scratch + plain;
    /* A character takes at most 4 bytes decoded, never more than its form in JSON. */
    char *limit = r->scratch + r->scratch_size - 4;
    Py_ssize_t count = plain;
    int only_ascii = 1;
    while (r->at < r->end) {
        unsigned char c = *r->at;
        if (c == '"') {
            r->at++;
            *length = out - r->scratch;
            *chars = count;
            *ascii = only_ascii;
            return 1;
        }
        if (count >= max_chars || out >= limit) return 0;
        if (c < 0x20) return 0; /* a control character must be escaped */
        if (c == '\\') {
            r->at++;
            if (r->at >= r->end) return 0;
            unsigned char e = *r->at++;
            switch (e) {
                case '"': *out++ = '"'; break;
                case '\\': *out++ = '\\'; break;
                case '/': *out++ = '/'; break;
                case 'b': *out++ = '\b'; break;
                case 'f': *out++ = '\f'; break;
                case 'n': *out++ = '\n'; break;
                case 'r': *out++ = '\r'; break;
                case 't': *out++ = '\t'; break;
                case 'u': {
                    unsigned code;
                    if (!read_hex4(r, &code)) return 0;
                    if (code >= 0xDC00 && code <= 0xDFFF) return 0; /* a lone low surrogate */
                    if (code >= 0xD800 && code <= 0xDBFF) {
                        unsigned low;
                        if (r->end - r->at < 6 || r->at[0] != '\\' || r->at[1] != 'u') return 0;
                        r->at += 2;
                        if (!read_hex4(r, &low) || low < 0xDC00 || low > 0xDFFF) return 0;
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    }
                    if (code >= 0x80) only_ascii = 0;
                    out = put_utf8(out, code);
                    break;
                }
                default: return 0;
            }
            count++;
            continue;
        }
        int size = utf8_sequence(r->at, r->end);
        if (size == 0) return 0;
        if (size > 1) only_ascii = 0;
        memcpy(out, r->at, (size_t)size);
        out += size;
        r->at += size;
        count++;
    }
    return 0;
}

static PyObject *string_object(Reader *r, Py_ssize_t length, int ascii) {
    if (ascii) {
        PyObject *text = PyUnicode_New(length, 127);
        if (text != NULL) memcpy(PyUnicode_DATA(text), r->text, (size_t)length);
        return text;
    }
    return PyUnicode_DecodeUTF8(r->text, length, "strict");
}

/* A JSON number at the reader, as msgspec reads one into a float; NULL with no exception where
 * this does not take it. */
static PyObject *read_number(Reader *r) {
    const unsigned char *start = r->at;
    const unsigned char *p = r->at;
    int integral = 1;
    if (p < r->end && *p == '-') p++;
    if (p >= r->end) return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < r->end && *p >= '0' && *p <= '9') p++;
    } else {
        return NULL;
    }
    if (p < r->end && *p == '.') {
        integral = 0;
        p++;
        if (p >= r->end || *p < '0' || *p > '9') return NULL;
        while (p < r->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < r->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < r->end && (*p == '+' || *p == '-')) p++;
        if (p >= r->end || *p < '0' || *p > '9') return NULL;
        while (p < r->end && *p >= '0' && *p <= '9') p++;
    }
    Py_ssize_t length = p - start;
    const unsigned char *digit = start + (*start == '-');
    if (integral && p - digit <= 18) {
        /* Exact in an int64, whose conversion to a double rounds correctly: the integer's
         * value rounded, as msgspec reads it (and "-0" is 0.0). */
        int64_t whole = 0;
        for (; digit < p; digit++) whole = whole * 10 + (*digit - '0');
        r->at = p;
        return PyFloat_FromDouble((double)(*start == '-' ? -whole : whole));
    }
    if (length > NUMBER_MAX_LEN) return NULL;
    char text[NUMBER_MAX_LEN + 1];
    memcpy(text, start, (size_t)length);
    text[length] = '\0';
    char *stop = NULL;
    double value = PyOS_string_to_double(text, &stop, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (stop != text + length || !isfinite(value)) return NULL;
    if (integral && value == 0.0) value = 0.0; /* an integer has no sign of zero: "-0" is 0 */
    r->at = p;
    return PyFloat_FromDouble(value);
}

static int take_word(Reader *r, const char *word, size_t length) {
    if ((size_t)(r->end - r->at) >= length && memcmp(r->at, word, length) == 0) {
        r->at += length;
        return 1;
    }
    return 0;
}

/* One attribute's value; NULL with no exception where this does not take it, NULL with one
 * where Python failed. A string equal to `last` (the column's value before) is `last` again:
 * many users share a country or a plan, and a string is immutable. */
static PyObject *read_value(Reader *r, PyObject *last) {
    skip_space(r);
    if (r->at >= r->end) return NULL;
    unsigned char c = *r->at;
    Py_ssize_t length, chars;
    int ascii;
    if (c == '"') {
        r->at++;
        if (!read_string(r, &length, &chars, STRING_MAX_CHARS, &ascii)) return NULL;
        if (ascii && last != NULL && PyUnicode_CheckExact(last) && PyUnicode_IS_COMPACT_ASCII(last) &&
            PyUnicode_GET_LENGTH(last) == length &&
            memcmp(PyUnicode_DATA(last), r->text, (size_t)length) == 0) {
            Py_INCREF(last);
            return last;
        }
        return string_object(r, length, ascii);
    }
    if (c == 't') {
        if (!take_word(r, "true", 4)) return NULL;
        Py_RETURN_TRUE;
    }
    if (c == 'f') {
        if (!take_word(r, "false", 5)) return NULL;
        Py_RETURN_FALSE;
    }
    if (c == '[') {
        r->at++;
        PyObject *items[ARRAY_MAX_ITEMS];
        Py_ssize_t count = 0;
        PyObject *result = NULL;
        if (!take(r, ']')) {
            do {
                if (count == ARRAY_MAX_ITEMS || !take(r, '"')) goto done;
                if (!read_string(r, &length, &chars, STRING_MAX_CHARS, &ascii)) goto done;
                PyObject *item = string_object(r, length, ascii);
                if (item == NULL) goto done;
                items[count++] = item;
            } while (take(r, ','));
            if (!take(r, ']')) goto done;
        }
        result = PyTuple_New(count);
        if (result != NULL) {
            for (Py_ssize_t i = 0; i < count; i++) PyTuple_SET_ITEM(result, i, items[i]);
            return result;
        }
    done:
        for (Py_ssize_t i = 0; i < count; i++) Py_DECREF(items[i]);
        return NULL;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return read_number(r);
    return NULL; /* null, an object: not an attribute's value */
}

static int name_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* The attribute name at the reader (its opening quote consumed), as it stands in the body:
 * 1 to 64 of [A-Za-z0-9._-] and not userIdentifier; 0 for any other (an escape included). */
static int read_name(Reader *r, const unsigned char **name, Py_ssize_t *length) {
    const unsigned char *start = r->at;
    while (r->at < r->end && name_char(*r->at)) r->at++;
    if (r->at >= r->end || *r->at != '"') return 0;
    *length = r->at - start;
    *name = start;
    r->at++;
    if (*length < 1 || *length > NAME_MAX_LEN) return 0;
    if ((size_t)*length == sizeof(USER_IDENTIFIER_NAME) - 1 &&
        memcmp(start, USER_IDENTIFIER_NAME, (size_t)*length) == 0) {
        return 0;
    }
    return 1;
}

/* FNV-1a over a value's bytes, its kind mixed in: a string's UTF-8, a number's double. */
static uint64_t value_hash(unsigned kind, const char *bytes, Py_ssize_t length) {
    uint64_t hash = 14695981039346656037ull ^ kind;
    for (Py_ssize_t i = 0; i < length; i++) {
        hash ^= (unsigned char)bytes[i];
        hash *= 1099511628211ull;
    }
    return hash;
}

static void coding_free(Coding *coding) {
    if (coding == NULL) return;
    for (Py_ssize_t i = 0; i < coding->count; i++) Py_DECREF(coding->values[i]);
    PyMem_Free(coding->codes);
    PyMem_Free(coding);
}

static Coding *coding_new(Py_ssize_t rows, PyObject *missing) {
    Coding *coding = PyMem_Calloc(1, sizeof(Coding));
    if (coding == NULL) return NULL;
    coding->codes = PyMem_Calloc((size_t)rows + 1, 1);
    if (coding->codes == NULL) {
        PyMem_Free(coding);
        return NULL;
    }
    Py_INCREF(missing);
    coding->values[0] = missing;
    coding->count = 1;
    return coding;
}

/* Whether a coded value of `kind` is the value of these bytes (a string's UTF-8, a double);
 * -1 with an exception where Python failed (a string's UTF-8 made for the first time). */
static int same_value(PyObject *value, unsigned kind, const char *bytes, Py_ssize_t length) {
    if (kind == KIND_STR) {
        if (!PyUnicode_CheckExact(value)) return 0;
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(value, &size);
        if (utf8 == NULL) return -1;
        return size == length && memcmp(utf8, bytes, (size_t)length) == 0;
    }
    if (kind == KIND_FLOAT) {
        if (!PyFloat_CheckExact(value)) return 0;
        double held = PyFloat_AS_DOUBLE(value);
        return memcmp(&held, bytes, sizeof(double)) == 0;
    }
    return value == (length ? Py_True : Py_False);
}

/* The code of the value (kind, bytes) in the coding, found or added (`make` makes its object,
 * a new reference, when it is added; NULL with an exception where Python failed); its object,
 * a new reference, in *object. -1 when the column holds too many distinct values to code (no
 * exception), -2 where Python failed. */
typedef PyObject *(*MakeValue)(void *context);

static int coded_value(Coding *coding, unsigned kind, const char *bytes, Py_ssize_t length,
                       MakeValue make, void *context, PyObject **object) {
    uint64_t hash = value_hash(kind, bytes, length);
    size_t slot = (size_t)hash & (CODE_SLOTS - 1);
    while (coding->slots[slot] != 0) {
        uint16_t at = coding->slots[slot];
        int same =
            coding->hashes[at] == hash ? same_value(coding->values[at], kind, bytes, length) : 0;
        if (same < 0) return -2;
        if (same) {
            Py_INCREF(coding->values[at]);
            *object = coding->values[at];
            return at;
        }
        slot = (slot + 1) & (CODE_SLOTS - 1);
    }
    if (coding->count > CODES_MAX) return -1;
    PyObject *made = make(context);
    if (made == NULL) return -2;
    Py_ssize_t at = coding->count++;
    Py_INCREF(made);
    coding->values[at] = made;
    coding->hashes[at] = hash;
    coding->slots[slot] = (uint16_t)at;
    *object = made;
    return (int)at;
}

/* The column of the name, made on its first appearance (filled with `missing`); NULL with no
 * exception when there would be more than max_columns, NULL with one where Python failed. */
static Column *column_of(Column *columns, Py_ssize_t *count, Py_ssize_t max_columns,
                         const unsigned char *name, Py_ssize_t length, Py_ssize_t rows,
                         PyObject *missing, Py_ssize_t guess, int coded) {
    if (guess < *count && columns[guess].length == length &&
        memcmp(columns[guess].name, name, (size_t)length) == 0) {
        return &columns[guess];
    }
    for (Py_ssize_t i = 0; i < *count; i++) {
        if (columns[i].length == length && memcmp(columns[i].name, name, (size_t)length) == 0) {
            return &columns[i];
        }
    }
    if (*count >= max_columns) return NULL;
    PyObject *column = PyList_New(rows);
    if (column == NULL) return NULL;
    for (Py_ssize_t i = 0; i < rows; i++) {
        Py_INCREF(missing);
        PyList_SET_ITEM(column, i, missing);
    }
    Coding *coding = NULL;
    if (coded && (coding = coding_new(rows, missing)) == NULL) {
        Py_DECREF(column);
        PyErr_NoMemory();
        return NULL;
    }
    Column *made = &columns[(*count)++];
    made->coding = coding;
    made->name = name;
    made->length = length;
    made->column = column;
    made->last = NULL;
    made->kinds = 0;
    made->filled = 0;
    return made;
}

typedef struct {
    Reader *reader;
    Py_ssize_t length;
    int ascii;
} StringRead;

static PyObject *make_string(void *context) {
    StringRead *read = context;
    return string_object(read->reader, read->length, read->ascii);
}

static PyObject *same_object(void *context) {
    Py_INCREF((PyObject *)context);
    return context;
}

static void stop_coding(Column *column) {
    coding_free(column->coding);
    column->coding = NULL;
}

/* One value of a coded column (read_value's counterpart): a string found among the distinct
 * ones is not made again. Its code goes in the row, or the column stops being coded. */
static PyObject *read_coded(Reader *r, Column *column, Py_ssize_t row) {
    skip_space(r);
    Coding *coding = column->coding;
    int code;
    PyObject *value = NULL;
    if (r->at < r->end && *r->at == '"') {
        StringRead read = {r, 0, 0};
        Py_ssize_t chars;
        r->at++;
        if (!read_string(r, &read.length, &chars, STRING_MAX_CHARS, &read.ascii)) return NULL;
        code = coded_value(coding, KIND_STR, r->text, read.length, make_string, &read, &value);
        if (code == -2) return NULL;
        if (code == -1) {
            stop_coding(column);
            return string_object(r, read.length, read.ascii);
        }
    } else {
        PyObject *read = read_value(r, NULL);
        if (read == NULL) return NULL;
        unsigned kind = kind_of(read);
        if (kind == KIND_FLOAT) {
            double number = PyFloat_AS_DOUBLE(read);
            code = coded_value(coding, kind, (const char *)&number, sizeof(number), same_object,
                               read, &value);
        } else if (kind == KIND_BOOL) {
            code = coded_value(coding, kind, "t", read == Py_True, same_object, read, &value);
        } else {
            code = -1;
        }
        if (code == -1) { /* not codable: the value stands, the column is no longer coded */
            stop_coding(column);
            return read;
        }
        Py_DECREF(read);
        if (code == -2) return NULL;
    }
    coding->codes[row] = (unsigned char)code;
    return value;
}

/* Read every user's object into the columns; 1 when the whole input was taken, 0 when it is
 * handed on, -1 with an exception. */
static int read_users(Reader *r, PyObject *rows, PyObject *missing, Column *columns,
                      Py_ssize_t *count, Py_ssize_t max_columns, char *seen, int coded) {
    Py_ssize_t row_count = PyDict_GET_SIZE(rows);
    Py_ssize_t guesses[ATTRIBUTES_MAX] = {0};
    if (!take(r, '{')) return 0;
    if (take(r, '}')) goto end;
    do {
        Py_ssize_t length, chars;
        int ascii;
        if (!take(r, '"')) return 0;
        if (!read_string(r, &length, &chars, PY_SSIZE_T_MAX, &ascii)) return 0;
        PyObject *user = string_object(r, length, ascii);
        if (user == NULL) return -1;
        PyObject *found = PyDict_GetItemWithError(rows, user);
        Py_DECREF(user);
        if (found == NULL) return PyErr_Occurred() ? -1 : 0; /* not a user of the request */
        Py_ssize_t row = PyLong_AsSsize_t(found);
        if (row < 0 || row >= row_count) return PyErr_Occurred() ? -1 : 0;
        if (seen[row]) return 0; /* a user named twice */
        seen[row] = 1;
        if (!take(r, ':') || !take(r, '{')) return 0;
        if (take(r, '}')) continue;
        int attributes = 0;
        do {
            const unsigned char *name;
            Py_ssize_t name_length;
            if (++attributes > ATTRIBUTES_MAX || !take(r, '"')) return 0;
            if (!read_name(r, &name, &name_length) || !take(r, ':')) return 0;
            /* Users of one request tend to send their names in one order: the k-th name is
             * first looked for in the column the k-th name of the user before went to. */
            Column *column = column_of(columns, count, max_columns, name, name_length, row_count,
                                       missing, guesses[attributes - 1], coded);
            if (column == NULL) return PyErr_Occurred() ? -1 : 0;
            if (PyList_GET_ITEM(column->column, row) != missing) return 0; /* a name twice */
            guesses[attributes - 1] = column - columns;
            PyObject *value =
                column->coding ? read_coded(r, column, row) : read_value(r, column->last);
            if (value == NULL) return PyErr_Occurred() ? -1 : 0;
            PyList_SET_ITEM(column->column, row, value);
            column->last = value;
            column->kinds |= kind_of(value);
            column->filled++;
            Py_DECREF(missing);
        } while (take(r, ','));
        if (!take(r, '}')) return 0;
    } while (take(r, ','));
    if (!take(r, '}')) return 0;
end:
    skip_space(r);
    return r->at == r->end;
}

static Py_ssize_t occurrences(const char *at, Py_ssize_t length, const char *word, size_t size) {
    Py_ssize_t count = 0;
    const char *end = at + length;
    while (at < end) {
        const char *found = memmem(at, (size_t)(end - at), word, size);
        if (found == NULL) break;
        count++;
        at = found + 1;
    }
    return count;
}

/* Whether `body` (the request) holds `raw` (its attributes' text, msgspec's Raw, a view of the
 * body) as the only value of an "attributes" key: JSON allows a key twice, and msgspec keeps
 * the last one's text without checking the others, which the Python path refuses when they are
 * wrong. Outside `raw`, where every top-level key is, the word appears once (the key before
 * it) and no \u escape (which could spell a key) appears at all. */
static int only_attributes(const Py_buffer *body, const Py_buffer *raw) {
    const char *start = (const char *)body->buf, *end = start + body->len;
    const char *inner = (const char *)raw->buf, *after = inner + raw->len;
    if (inner < start || after > end) return 0;
    static const char word[] = "attributes";
    Py_ssize_t before = inner - start, rest = end - after;
    if (occurrences(start, before, word, sizeof(word) - 1) +
            occurrences(after, rest, word, sizeof(word) - 1) != 1) {
        return 0;
    }
    return occurrences(start, before, "\\u", 2) + occurrences(after, rest, "\\u", 2) == 0;
}

/* The types of a column's values as a frozenset (what `set(map(type, column))` would be). */
static PyObject *kinds_set(const Column *column, Py_ssize_t rows, PyObject *missing) {
    PyObject *types = PyList_New(0);
    if (types == NULL) return NULL;
    static const unsigned bits[] = {KIND_STR, KIND_FLOAT, KIND_BOOL, KIND_TUPLE};
    PyTypeObject *named[] = {&PyUnicode_Type, &PyFloat_Type, &PyBool_Type, &PyTuple_Type};
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
        if ((column->kinds & bits[i]) && PyList_Append(types, (PyObject *)named[i]) < 0) {
            Py_DECREF(types);
            return NULL;
        }
    }
    if (column->filled < rows && PyList_Append(types, (PyObject *)Py_TYPE(missing)) < 0) {
        Py_DECREF(types);
        return NULL;
    }
    PyObject *result = PyFrozenSet_New(types);
    Py_DECREF(types);
    return result;
}

/* coded[name] = (distinct values: tuple, a code per row: bytes). */
static int put_coded(PyObject *coded, PyObject *name, const Coding *coding, Py_ssize_t rows) {
    PyObject *distinct = PyTuple_New(coding->count);
    if (distinct == NULL) return -1;
    for (Py_ssize_t i = 0; i < coding->count; i++) {
        Py_INCREF(coding->values[i]);
        PyTuple_SET_ITEM(distinct, i, coding->values[i]);
    }
    PyObject *codes = PyBytes_FromStringAndSize((const char *)coding->codes, rows);
    PyObject *pair = codes == NULL ? NULL : PyTuple_Pack(2, distinct, codes);
    int failed = pair == NULL || PyDict_SetItem(coded, name, pair) < 0;
    Py_DECREF(distinct);
    Py_XDECREF(codes);
    Py_XDECREF(pair);
    return failed ? -1 : 0;
}

PyObject *attribute_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 5 || nargs > 7 || !PyDict_CheckExact(args[2]) || !PyLong_Check(args[4]) ||
        (nargs >= 6 && args[5] != Py_None && !PyDict_CheckExact(args[5])) ||
        (nargs == 7 && args[6] != Py_None && !PyDict_CheckExact(args[6]))) {
        PyErr_SetString(PyExc_TypeError,
                        "attribute_columns(body, raw, rows: dict[str, int], missing, "
                        "max_columns: int[, kinds: dict | None[, coded: dict | None]]), "
                        "positional only");
        return NULL;
    }
    PyObject *kinds = nargs >= 6 && args[5] != Py_None ? args[5] : NULL;
    PyObject *coded = nargs == 7 && args[6] != Py_None ? args[6] : NULL;
    Py_ssize_t max_columns = PyLong_AsSsize_t(args[4]);
    if (max_columns < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "max_columns must be >= 0");
        return NULL;
    }
    Py_buffer body, raw;
    if (PyObject_GetBuffer(args[0], &body, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &raw, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&body);
        return NULL;
    }
    int alone = only_attributes(&body, &raw);
    PyBuffer_Release(&body);
    if (!alone) {
        PyBuffer_Release(&raw);
        Py_RETURN_NONE;
    }
    PyObject *rows = args[2], *missing = args[3], *result = NULL;
    Py_ssize_t row_count = PyDict_GET_SIZE(rows), count = 0;
    Reader r = {(const unsigned char *)raw.buf, (const unsigned char *)raw.buf + raw.len, NULL,
                raw.len + 8};
    Column *columns = PyMem_Calloc((size_t)max_columns + 1, sizeof(Column));
    char *seen = PyMem_Calloc((size_t)row_count + 1, 1);
    r.scratch = PyMem_Malloc((size_t)r.scratch_size);
    if (columns == NULL || seen == NULL || r.scratch == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    int taken = read_users(&r, rows, missing, columns, &count, max_columns, seen, coded != NULL);
    if (taken < 0) goto out;
    if (taken == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto out;
    }
    result = PyDict_New();
    for (Py_ssize_t i = 0; result != NULL && i < count; i++) {
        PyObject *name = PyUnicode_FromStringAndSize((const char *)columns[i].name,
                                                     columns[i].length);
        if (name == NULL || PyDict_SetItem(result, name, columns[i].column) < 0) {
            Py_CLEAR(result);
        } else {
            if (kinds != NULL) {
                PyObject *types = kinds_set(&columns[i], row_count, missing);
                if (types == NULL || PyDict_SetItem(kinds, name, types) < 0) Py_CLEAR(result);
                Py_XDECREF(types);
            }
            if (result != NULL && coded != NULL && columns[i].coding != NULL &&
                put_coded(coded, name, columns[i].coding, row_count) < 0) {
                Py_CLEAR(result);
            }
        }
        Py_XDECREF(name);
    }
out:
    for (Py_ssize_t i = 0; columns != NULL && i < count; i++) {
        Py_DECREF(columns[i].column);
        coding_free(columns[i].coding);
    }
    PyMem_Free(columns);
    PyMem_Free(seen);
    PyMem_Free(r.scratch);
    PyBuffer_Release(&raw);
    return result;
}
