/* One native call for a single evaluate's CPU work: decide (murmur3 buckets, segment table
 * probes), sign the evaluation id (keyed BLAKE2b), and encode the event-log frame (msgpack as
 * msgspec writes it, crc32 as zlib computes it). See api/native/__init__.py for why, and
 * tests/native/ for the checks that it matches the pure-Python path byte for byte and that it
 * refuses what it cannot serve.
 *
 * Inputs. Nothing here trusts its caller: every argument's type is checked, the plan's shape and
 * size are checked (a flag's rule index is its byte in the event, so a plan holds at most
 * NOT_EVALUATED - 1 rules and no index reaches the reserved bytes), and every integer is
 * converted, its error checked, before the rules are walked. An argument of the wrong type is
 * a TypeError; a value this call does not serve (a malformed plan, an integer out of range, a
 * string without UTF-8, an oversized frame) is a ValueError, which the caller
 * (api/serving/evaluations.py) answers by serving the request on the Python path. All of it is
 * checked before the nonce is taken, so a refused call leaves the issuer's counter as it was.
 *
 * BLAKE2b is the BLAKE2 team's reference code, vendored unchanged in api/native/blake2/ (CC0;
 * provenance in its README.md). Not Debian's libb2: its state buffers two blocks, so the key
 * block cannot be compressed once and kept, and every id would cost two compressions instead of
 * one (about 360 ns against 160-210 ns in a C loop on this machine), besides a build and run-time
 * dependency (libb2-1, which pulls libgomp into every worker). Not libsodium: its generichash
 * has no digest shorter than 16 bytes, and evaluation ids carry BLAKE2b-96.
 *
 * msgpack stays our own (put_* below). Its scope is one fixed 13-field array of known types,
 * and what matters is writing exactly the bytes msgspec writes (smallest int forms, str8,
 * bin8, float64), which the differential tests check byte for byte; a library (Debian's
 * libmsgpack-dev) would add a dependency and a write callback for 60 lines, and its choices
 * would still have to be checked against msgspec's.
 *
 * Segments defined by conditions (contract 12) are decided here by their lists and the request's
 * attributes, each condition by the Python core's own test of the attribute's value (one call
 * each, as conditions.all_hold makes it): the walk is C, the operators' meaning stays in
 * sdk/core/flagsight_core/conditions.py, and tests/native/test_condition_cases.py holds every
 * golden case to the Python path's answer and frame.
 *
 * Nothing here does I/O: the caller meters, writes the frame and answers. The only state is the
 * BLAKE2b state after the signing key's block, kept for the last key seen, and what import sets
 * up (crc tables, the membership and defined-segment types, the "_slots" and "native_plan"
 * names).
 */
#ifndef NDEBUG
#error "build with -DNDEBUG (api/native/build.py does): CPython's header asserts abort"
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "attribute_columns.h"
#include "blake2/blake2.h"

#define RULE_STATIC 0
#define RULE_SEGMENT 1
#define RULE_PERCENTAGE 2
#define NO_RULE 255
#define NOT_EVALUATED 254
#define BUCKETS 10000
#define HEAD_SIZE 19 /* version:1 | environment:8 | nonce:8 | count:2 */
#define MAC_SIZE 12
#define PREFIX_CHARS 42
#define FRAME_CAPACITY 16384 /* far above the largest valid single evaluate (about 6 KiB) */
#define EVALUATION_BATCH_CODE 4
#define BATCH_FIELDS 13

/* -- murmur3 x86 32, the bucketing hash (sdk/core/flagsight_core/hashing.py) ----------------------- */

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static uint32_t murmur3_32(const uint8_t *data, size_t len, uint32_t seed) {
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    uint32_t h = seed;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        uint32_t k;
        memcpy(&k, data + i * 4, 4); /* little-endian machines only: checked at import */
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64;
    }
    const uint8_t *tail = data + blocks * 4;
    uint32_t k = 0;
    switch (len & 3) {
    case 3: k ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: k ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return h;
}

/* -- murmur3 x64 128, first half: a segment member's hash (sdk/core/flagsight_core/segments.py) -- */

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static uint64_t murmur3_x64_128_h1(const uint8_t *data, size_t len) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = 0, h2 = 0;
    size_t blocks = len / 16;
    for (size_t i = 0; i < blocks; i++) {
        uint64_t k1, k2;
        memcpy(&k1, data + i * 16, 8);
        memcpy(&k2, data + i * 16 + 8, 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
    /* The last 1..15 bytes, as little-endian words padded with zeros (the machine is
       little-endian: checked at import), so a copy reads them as murmur3's tail switch does. */
    const uint8_t *tail = data + blocks * 16;
    size_t rest = len & 15;
    uint64_t k1 = 0, k2 = 0;
    if (rest > 8) {
        memcpy(&k2, tail + 8, rest - 8);
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
    }
    if (rest > 0) {
        memcpy(&k1, tail, rest > 8 ? 8 : rest);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    return h1;
}

/* The type whose tables are probed here (SegmentMembership, registered at import); any other
 * container is asked through its own ``__contains__``. */
static PyObject *membership_type = NULL;
static PyObject *slots_name = NULL; /* "_slots", interned at import */

/* Whether a SegmentMembership holds the identifier: its table's linear probe, in C. */
static int probe_membership(PyObject *members, const char *utf8, Py_ssize_t len) {
    PyObject *slots = PyObject_GetAttr(members, slots_name);
    if (slots == NULL) return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(slots, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(slots);
        return -1;
    }
    const uint8_t *table = (const uint8_t *)view.buf;
    size_t size = (size_t)view.len / 8;
    int found = 0;
    if (size > 0 && (size & (size - 1)) == 0) {
        uint64_t wanted = murmur3_x64_128_h1((const uint8_t *)utf8, (size_t)len);
        if (wanted == 0) wanted = 1;
        size_t mask = size - 1, index = (size_t)(wanted & mask);
        for (size_t step = 0; step < size; step++) {
            uint64_t slot;
            memcpy(&slot, table + 8 * index, 8); /* any buffer: no alignment assumed */
            if (slot == wanted) { found = 1; break; }
            if (slot == 0) break;
            index = (index + 1) & mask;
        }
    }
    PyBuffer_Release(&view);
    Py_DECREF(slots);
    return found;
}

/* -- segments defined by conditions (contract 12) ------------------------------------------ */

/* DefinedSegment (registered at import): its ``native_plan`` is (listed, excluded, conditions),
 * each condition (attribute name or None for the identifier, its test of a str value, of a
 * float value, of any other value), the tests being the Python core's own (conditions.py
 * ``hold_plan``): only the walk is here, so every operator's meaning stays written once. */
static PyObject *defined_type = NULL;
static PyObject *native_plan_name = NULL; /* "native_plan", interned at import */

/* Whether a container holds the user: a SegmentMembership probed here, any other asked. */
static int holds_user(PyObject *members, PyObject *user, const char *utf8, Py_ssize_t len) {
    if (membership_type != NULL && Py_IS_TYPE(members, (PyTypeObject *)membership_type))
        return probe_membership(members, utf8, len);
    return PySequence_Contains(members, user);
}

/* Whether every condition holds for the user (conditions.all_hold): 1, 0, or -1 with an
   exception set. ``attributes`` is a dict or None (none sent: every attribute is missing, and
   a missing attribute never holds). */
static int conditions_hold(PyObject *conditions, PyObject *attributes, PyObject *user) {
    Py_ssize_t count = PyTuple_GET_SIZE(conditions);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *condition = PyTuple_GET_ITEM(conditions, i);
        if (!PyTuple_Check(condition) || PyTuple_GET_SIZE(condition) != 4) {
            PyErr_SetString(PyExc_ValueError, "a condition's plan is not a 4-tuple");
            return -1;
        }
        PyObject *name = PyTuple_GET_ITEM(condition, 0), *value = user;
        if (name != Py_None) {
            if (attributes == Py_None) return 0;
            value = PyDict_GetItemWithError(attributes, name); /* borrowed */
            if (value == NULL) return PyErr_Occurred() ? -1 : 0;
        }
        PyObject *test = PyTuple_GET_ITEM(condition, PyUnicode_CheckExact(value) ? 1
                                                     : PyFloat_CheckExact(value) ? 2 : 3);
        Py_INCREF(value); /* the attributes are the caller's: held across the call */
        PyObject *answer = PyObject_CallOneArg(test, value);
        Py_DECREF(value);
        if (answer == NULL) return -1;
        int held = PyObject_IsTrue(answer);
        Py_DECREF(answer);
        if (held <= 0) return held;
    }
    return 1;
}

/* Whether a DefinedSegment includes the user (DefinedSegment.includes, in its order): the
   conditions first; then a user they take is in unless excluded and not listed, and one they
   do not take is in only when listed. 1, 0, or -1 with an exception set. */
static int defined_includes(PyObject *segment, PyObject *attributes, PyObject *user,
                            const char *utf8, Py_ssize_t len) {
    PyObject *plan = PyObject_GetAttr(segment, native_plan_name);
    if (plan == NULL) return -1;
    int found = -1;
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != 3 ||
        !PyTuple_Check(PyTuple_GET_ITEM(plan, 2))) {
        PyErr_SetString(PyExc_ValueError, "a segment's native_plan is not (listed, excluded, "
                                          "conditions)");
    } else {
        PyObject *listed = PyTuple_GET_ITEM(plan, 0), *excluded = PyTuple_GET_ITEM(plan, 1);
        int held = conditions_hold(PyTuple_GET_ITEM(plan, 2), attributes, user);
        if (held > 0) {
            int out = holds_user(excluded, user, utf8, len);
            found = out < 0 ? -1 : out == 0 ? 1 : holds_user(listed, user, utf8, len);
        } else if (held == 0) {
            found = holds_user(listed, user, utf8, len);
        }
    }
    Py_DECREF(plan);
    return found;
}

/* -- crc32 (zlib's polynomial), over a frame's length and payload -------------------------- */

/* Slicing by 8: table k gives the crc of a byte followed by k zero bytes, so eight bytes are
   folded in per step instead of one (a frame's crc is over ~170 bytes on every request). */
static uint32_t crc_tables[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_tables[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_tables[k][n] = (crc_tables[k - 1][n] >> 8) ^ crc_tables[0][crc_tables[k - 1][n] & 0xff];
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t one = le32(p) ^ c, two = le32(p + 4);
        c = crc_tables[7][one & 0xff] ^ crc_tables[6][(one >> 8) & 0xff] ^
            crc_tables[5][(one >> 16) & 0xff] ^ crc_tables[4][one >> 24] ^
            crc_tables[3][two & 0xff] ^ crc_tables[2][(two >> 8) & 0xff] ^
            crc_tables[1][(two >> 16) & 0xff] ^ crc_tables[0][two >> 24];
    }
    while (n--) c = crc_tables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* -- msgpack, encoded as msgspec encodes the same values ----------------------------------- */

typedef struct {
    uint8_t *p;
    size_t len;
    int overflow;
} Out;

static void put(Out *o, const void *src, size_t n) {
    if (o->overflow || o->len + n > FRAME_CAPACITY) {
        o->overflow = 1;
        return;
    }
    memcpy(o->p + o->len, src, n);
    o->len += n;
}

static void put_byte(Out *o, uint8_t b) { put(o, &b, 1); }

static void put_be(Out *o, uint64_t v, int bytes) {
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    put(o, b, (size_t)bytes);
}

static void put_int(Out *o, int64_t v) {
    if (v >= 0) {
        if (v < 128) put_byte(o, (uint8_t)v);
        else if (v <= 0xff) { put_byte(o, 0xcc); put_be(o, (uint64_t)v, 1); }
        else if (v <= 0xffff) { put_byte(o, 0xcd); put_be(o, (uint64_t)v, 2); }
        else if (v <= 0xffffffffLL) { put_byte(o, 0xce); put_be(o, (uint64_t)v, 4); }
        else { put_byte(o, 0xcf); put_be(o, (uint64_t)v, 8); }
    } else {
        if (v >= -32) put_byte(o, (uint8_t)(int8_t)v);
        else if (v >= -128) { put_byte(o, 0xd0); put_be(o, (uint64_t)v, 1); }
        else if (v >= -32768) { put_byte(o, 0xd1); put_be(o, (uint64_t)v, 2); }
        else if (v >= -2147483648LL) { put_byte(o, 0xd2); put_be(o, (uint64_t)v, 4); }
        else { put_byte(o, 0xd3); put_be(o, (uint64_t)v, 8); }
    }
}

static void put_str_bytes(Out *o, const char *s, size_t n) {
    if (n < 32) put_byte(o, (uint8_t)(0xa0 | n));
    else if (n <= 0xff) { put_byte(o, 0xd9); put_be(o, n, 1); }
    else if (n <= 0xffff) { put_byte(o, 0xda); put_be(o, n, 2); }
    else { put_byte(o, 0xdb); put_be(o, n, 4); }
    put(o, s, n);
}

static void put_bin1(Out *o, uint8_t b) {
    put_byte(o, 0xc4);
    put_byte(o, 1);
    put_byte(o, b);
}

static void put_double(Out *o, double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    put_byte(o, 0xcb);
    put_be(o, bits, 8);
}

/* -- the plan: a flag's rules as Flag.plan gives them (sdk/core/flagsight_core/model.py) ------------ */

/* A rule's index is its byte in the event, below the reserved NOT_EVALUATED and NO_RULE (the
   Python model refuses a longer flag the same way), and indexes the 256-byte code table. */
#define MAX_RULES (NOT_EVALUATED - 1)

typedef struct {
    long kind;
    long threshold;    /* RULE_PERCENTAGE: a user whose bucket is below it matches */
    PyObject *segment; /* RULE_SEGMENT: the segment's key, a str (borrowed from the plan) */
} Rule;

/* An int object's value as a C long: 0, or -1 (no exception set) when it is no int or does
   not fit. */
static int long_of(PyObject *o, long *value) {
    if (!PyLong_Check(o)) return -1;
    int overflow;
    *value = PyLong_AsLongAndOverflow(o, &overflow);
    return overflow || (*value == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* ``plan`` (a tuple) read into ``rules``: the rule count, or -1 with a ValueError naming the
   first rule that is not a (kind, parameter) pair of a known kind with its parameter's type. */
static Py_ssize_t read_plan(PyObject *plan, Rule rules[MAX_RULES]) {
    Py_ssize_t count = PyTuple_GET_SIZE(plan);
    if (count > MAX_RULES) {
        PyErr_Format(PyExc_ValueError, "plan: %zd rules, at most %d", count, MAX_RULES);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(plan, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_ValueError, "plan: rule %zd is not a (kind, parameter) pair", i);
            return -1;
        }
        PyObject *param = PyTuple_GET_ITEM(pair, 1);
        Rule *rule = &rules[i];
        int known = long_of(PyTuple_GET_ITEM(pair, 0), &rule->kind) == 0 &&
                    (rule->kind == RULE_STATIC ||
                     (rule->kind == RULE_SEGMENT && PyUnicode_Check(param)) ||
                     (rule->kind == RULE_PERCENTAGE && long_of(param, &rule->threshold) == 0));
        if (!known) {
            PyErr_Format(PyExc_ValueError, "plan: rule %zd is not (0, _), (1, segment key) "
                                           "or (2, bucket threshold)", i);
            return -1;
        }
        rule->segment = param;
    }
    return count;
}

/* -- deciding ------------------------------------------------------------------------------ */

/* The index of the first rule that matches, NO_RULE if none does; -1 with an exception set
   (one a segment container raised). */
static int deciding_rule(const Rule *rules, Py_ssize_t count, PyObject *segments,
                         PyObject *attributes, const char *flag_key, Py_ssize_t flag_key_len,
                         PyObject *user, const char *user_utf8, Py_ssize_t user_len) {
    for (Py_ssize_t i = 0; i < count; i++) {
        const Rule *rule = &rules[i];
        if (rule->kind == RULE_STATIC) return (int)i;
        if (rule->kind == RULE_SEGMENT) {
            PyObject *members = PyObject_GetItem(segments, rule->segment);
            if (members == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError)) return -1;
                PyErr_Clear();
                continue; /* an unknown segment has no members */
            }
            int found = defined_type != NULL && Py_IS_TYPE(members, (PyTypeObject *)defined_type)
                            ? defined_includes(members, attributes, user, user_utf8, user_len)
                            : holds_user(members, user, user_utf8, user_len);
            Py_DECREF(members);
            if (found < 0) return -1;
            if (found) return (int)i;
        } else { /* RULE_PERCENTAGE: read_plan let no other kind through */
            size_t n = (size_t)flag_key_len + 1 + (size_t)user_len;
            uint8_t stack[2048];
            uint8_t *data = n <= sizeof stack ? stack : PyMem_Malloc(n);
            if (data == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            memcpy(data, flag_key, (size_t)flag_key_len);
            data[flag_key_len] = ':';
            memcpy(data + flag_key_len + 1, user_utf8, (size_t)user_len);
            uint32_t bucket = murmur3_32(data, n, 0) % BUCKETS;
            if (data != stack) PyMem_Free(data);
            if ((long)bucket < rule->threshold) return (int)i;
        }
    }
    return NO_RULE;
}

/* -- the evaluation id's signed prefix ------------------------------------------------------ */

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* base64url of 31 bytes without padding: exactly PREFIX_CHARS characters. */
static void base64url_31(const uint8_t *in, char *out) {
    size_t o = 0, i = 0;
    for (; i + 3 <= 30; i += 3) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = B64URL[(v >> 18) & 63];
        out[o++] = B64URL[(v >> 12) & 63];
        out[o++] = B64URL[(v >> 6) & 63];
        out[o++] = B64URL[v & 63];
    }
    uint32_t v = (uint32_t)in[30] << 16;
    out[o++] = B64URL[(v >> 18) & 63];
    out[o++] = B64URL[(v >> 12) & 63];
}

/* -- the id's MAC: keyed BLAKE2b with a 12-byte digest (api/native/blake2/) --------------- */

#define ID_VERSION 1 /* the head's first byte (sdk/core/flagsight_core/ids.py's VERSION) */

/* The state after the key's block and the version byte, kept for the last key seen (a
 * deployment has one): the reference code compresses a buffered block only once more input
 * follows, so feeding the head's constant first byte here leaves one compression per id, as
 * hashlib's keyed copy() does. */
static uint8_t keyed_for[BLAKE2B_KEYBYTES];
static size_t keyed_for_len = 0;
static blake2b_state keyed_state;

/* Whether ``key`` can sign: bytes, 1 to 64 of them (BLAKE2b's key sizes). */
static int valid_key(PyObject *key) {
    return PyBytes_Check(key) && PyBytes_GET_SIZE(key) >= 1 &&
           PyBytes_GET_SIZE(key) <= BLAKE2B_KEYBYTES;
}

/* The 12-byte keyed BLAKE2b of ``head``: what hashlib.blake2b(key=key, digest_size=12) gives.
 * ``key`` passed valid_key. Returns 0, or -1 with an exception set. */
static int mac_of(PyObject *key, const uint8_t head[HEAD_SIZE], uint8_t mac[MAC_SIZE]) {
    const uint8_t *k = (const uint8_t *)PyBytes_AS_STRING(key);
    size_t kk = (size_t)PyBytes_GET_SIZE(key);
    if (kk != keyed_for_len || memcmp(k, keyed_for, kk) != 0) {
        const uint8_t version = ID_VERSION;
        keyed_for_len = 0; /* until the state below is whole */
        if (blake2b_init_key(&keyed_state, MAC_SIZE, k, kk) < 0 ||
            blake2b_update(&keyed_state, &version, 1) < 0) {
            PyErr_SetString(PyExc_ValueError, "the signing key must be 1 to 64 bytes");
            return -1;
        }
        memcpy(keyed_for, k, kk);
        keyed_for_len = kk;
    }
    blake2b_state state = keyed_state;
    if (blake2b_update(&state, head + 1, HEAD_SIZE - 1) < 0 ||
        blake2b_final(&state, mac, MAC_SIZE) < 0) {
        PyErr_SetString(PyExc_SystemError, "BLAKE2b refused a 19-byte message");
        return -1;
    }
    return 0;
}

/* -- serve_one ------------------------------------------------------------------------------ */

PyDoc_STRVAR(serve_one_doc,
"serve_one(plan, code_table, segments, flag_key, user, signing_key, environment, nonces,\n"
"          evaluated_at_us, organization_id, environment_id, sdk, api_key_id, source,\n"
"          split_rule, split_percentage[, attributes]) -> (outcome, rule, prefix, frame)\n\n"
"plan: the flag's rules as a tuple of (kind, param), or an int result code when the flag's\n"
"state or the plan decides. environment: the id's 8 environment bytes; nonces: the issuer's\n"
"counter (one is taken). attributes: the user's, a dict, or None (none), which a segment of\n"
"conditions (the registered DefinedSegment) is decided by. The frame is\n"
"encode_frame(EVALUATION_BATCH_CODE, EvaluationBatch(...)) for this one user.\n\n"
"TypeError when an argument is not of its type; ValueError, before the nonce is taken, for\n"
"what this call does not serve (a malformed plan, an integer out of range, a string without\n"
"UTF-8, an oversized frame, attributes other than a dict): the Python path serves those.");

/* An int argument's value: 0, or -1 with a ValueError naming it when it is past int64. */
static int int64_of(PyObject *o, const char *name, long long *value) {
    int overflow;
    *value = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (*value == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "serve_one: %s is past int64", name);
        return -1;
    }
    return 0;
}

/* The longest msgpack header of a str, and of an int or float64. */
#define STR_HEAD 5
#define NUMBER 9

static PyObject *serve_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 16 && nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "serve_one takes 16 or 17 arguments");
        return NULL;
    }
    PyObject *attributes = nargs == 17 ? args[16] : Py_None;
    if (attributes != Py_None && !PyDict_CheckExact(attributes)) {
        PyErr_SetString(PyExc_ValueError, "serve_one: attributes other than a dict");
        return NULL;
    }
    PyObject *plan = args[0], *code_table = args[1], *segments = args[2], *flag_key = args[3],
             *user = args[4], *signing_key = args[5], *environment = args[6], *nonce_obj = args[7],
             *at_obj = args[8], *organization_id = args[9], *environment_id = args[10],
             *sdk = args[11], *api_key_id = args[12], *source = args[13],
             *split_rule_obj = args[14], *split_percentage = args[15];
    int split_is_float = split_percentage != Py_None && PyFloat_Check(split_percentage);
    if (!(PyLong_Check(plan) || PyTuple_Check(plan)) || !PyBytes_Check(code_table) ||
        PyBytes_GET_SIZE(code_table) != 256 || !PyUnicode_Check(flag_key) ||
        !PyUnicode_Check(user) || !PyBytes_Check(environment) ||
        PyBytes_GET_SIZE(environment) != 8 || !PyIter_Check(nonce_obj) ||
        !PyLong_Check(at_obj) || !PyUnicode_Check(organization_id) ||
        !PyUnicode_Check(environment_id) || !(sdk == Py_None || PyUnicode_Check(sdk)) ||
        !PyUnicode_Check(api_key_id) || !PyUnicode_Check(source) ||
        !PyLong_CheckExact(split_rule_obj) ||
        !(split_percentage == Py_None || split_is_float || PyLong_CheckExact(split_percentage))) {
        PyErr_SetString(PyExc_TypeError, "serve_one: wrong argument types");
        return NULL;
    }
    if (!valid_key(signing_key)) {
        PyErr_SetString(PyExc_ValueError, "the signing key must be 1 to 64 bytes");
        return NULL;
    }

    /* Every value in its C form, each conversion checked: a str without UTF-8 (a lone
       surrogate) raises UnicodeEncodeError and an int past int64 ValueError; both decline. */
    Py_ssize_t key_len, user_len, org_len, env_len, sdk_len = 0, api_key_len, source_len;
    const char *key_utf8, *user_utf8, *org_utf8, *env_utf8, *sdk_utf8 = NULL, *api_key_utf8,
               *source_utf8;
    if ((key_utf8 = PyUnicode_AsUTF8AndSize(flag_key, &key_len)) == NULL ||
        (user_utf8 = PyUnicode_AsUTF8AndSize(user, &user_len)) == NULL ||
        (org_utf8 = PyUnicode_AsUTF8AndSize(organization_id, &org_len)) == NULL ||
        (env_utf8 = PyUnicode_AsUTF8AndSize(environment_id, &env_len)) == NULL ||
        (sdk != Py_None && (sdk_utf8 = PyUnicode_AsUTF8AndSize(sdk, &sdk_len)) == NULL) ||
        (api_key_utf8 = PyUnicode_AsUTF8AndSize(api_key_id, &api_key_len)) == NULL ||
        (source_utf8 = PyUnicode_AsUTF8AndSize(source, &source_len)) == NULL)
        return NULL;
    long long at, split_rule, split_int = 0;
    double split_float = split_is_float ? PyFloat_AS_DOUBLE(split_percentage) : 0.0;
    if (int64_of(at_obj, "evaluated_at_us", &at) < 0 ||
        int64_of(split_rule_obj, "split_rule", &split_rule) < 0 ||
        (!split_is_float && split_percentage != Py_None &&
         int64_of(split_percentage, "split_percentage", &split_int) < 0))
        return NULL;
    size_t frame_bound = 12 + 3 + (STR_HEAD + PREFIX_CHARS) + NUMBER + 1 + 2 * 3 + 2 * NUMBER +
                         7 * STR_HEAD + (size_t)key_len + (size_t)user_len + (size_t)org_len +
                         (size_t)env_len + (size_t)sdk_len + (size_t)api_key_len +
                         (size_t)source_len;
    if (frame_bound > FRAME_CAPACITY) {
        PyErr_SetString(PyExc_ValueError, "frame too large for the native path");
        return NULL;
    }

    int outcome, rule;
    if (PyLong_Check(plan)) {
        long code;
        if (long_of(plan, &code) < 0 || code < 0 || code > 255) {
            PyErr_Format(PyExc_ValueError, "plan: result code %R is not a byte", plan);
            return NULL;
        }
        outcome = (int)code;
        rule = NOT_EVALUATED;
    } else {
        Rule rules[MAX_RULES];
        Py_ssize_t count = read_plan(plan, rules);
        if (count < 0) return NULL;
        rule = deciding_rule(rules, count, segments, attributes, key_utf8, key_len, user,
                             user_utf8, user_len);
        if (rule < 0) return NULL;
        outcome = (uint8_t)PyBytes_AS_STRING(code_table)[rule]; /* rule < MAX_RULES or NO_RULE */
    }

    PyObject *next_nonce = PyIter_Next(nonce_obj);
    if (next_nonce == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "nonces ran out");
        return NULL;
    }
    if (!PyLong_Check(next_nonce)) {
        Py_DECREF(next_nonce);
        PyErr_SetString(PyExc_TypeError, "serve_one: a nonce must be an int");
        return NULL;
    }
    uint64_t nonce = PyLong_AsUnsignedLongLongMask(next_nonce); /* & _NONCE_MASK, as ids.py */
    Py_DECREF(next_nonce);

    uint8_t signed_bytes[HEAD_SIZE + MAC_SIZE];
    signed_bytes[0] = ID_VERSION;
    memcpy(signed_bytes + 1, PyBytes_AS_STRING(environment), 8);
    for (int i = 0; i < 8; i++) signed_bytes[9 + i] = (uint8_t)(nonce >> (8 * (7 - i)));
    signed_bytes[17] = 0; /* count = 1, big-endian */
    signed_bytes[18] = 1;
    if (mac_of(signing_key, signed_bytes, signed_bytes + HEAD_SIZE) < 0) return NULL;
    char prefix[PREFIX_CHARS];
    base64url_31(signed_bytes, prefix);

    uint8_t buffer[FRAME_CAPACITY];
    Out o = {buffer, 12, 0}; /* the header (magic, crc, length) is filled in last */
    put_byte(&o, 0x92);
    put_int(&o, EVALUATION_BATCH_CODE);
    put_byte(&o, 0x90 | BATCH_FIELDS);
    put_str_bytes(&o, prefix, PREFIX_CHARS);
    put_int(&o, at);
    put_str_bytes(&o, org_utf8, (size_t)org_len);
    put_str_bytes(&o, env_utf8, (size_t)env_len);
    put_str_bytes(&o, key_utf8, (size_t)key_len);
    if (sdk_utf8 == NULL) put_byte(&o, 0xc0);
    else put_str_bytes(&o, sdk_utf8, (size_t)sdk_len);
    put_str_bytes(&o, api_key_utf8, (size_t)api_key_len);
    put_str_bytes(&o, source_utf8, (size_t)source_len);
    put_byte(&o, 0x91);
    put_str_bytes(&o, user_utf8, (size_t)user_len);
    put_bin1(&o, (uint8_t)outcome);
    put_bin1(&o, (uint8_t)rule);
    put_int(&o, split_rule);
    if (split_is_float) put_double(&o, split_float);
    else if (split_percentage != Py_None) put_int(&o, split_int);
    else put_byte(&o, 0xc0);
    if (o.overflow) { /* frame_bound above makes this unreachable */
        PyErr_SetString(PyExc_SystemError, "serve_one: the frame outgrew its bound");
        return NULL;
    }
    uint32_t length = (uint32_t)(o.len - 12);
    for (int i = 0; i < 4; i++) buffer[8 + i] = (uint8_t)(length >> (8 * i));
    uint32_t crc = crc32_of(buffer + 8, o.len - 8);
    memcpy(buffer, "FSW1", 4);
    for (int i = 0; i < 4; i++) buffer[4 + i] = (uint8_t)(crc >> (8 * i));

    PyObject *answer = PyTuple_New(4), *prefix_str = PyUnicode_New(PREFIX_CHARS, 127);
    PyObject *frame = PyByteArray_FromStringAndSize((const char *)buffer, (Py_ssize_t)o.len);
    PyObject *outcome_int = PyLong_FromLong(outcome), *rule_int = PyLong_FromLong(rule);
    if (answer == NULL || prefix_str == NULL || frame == NULL || outcome_int == NULL ||
        rule_int == NULL) {
        Py_XDECREF(answer);
        Py_XDECREF(prefix_str);
        Py_XDECREF(frame);
        Py_XDECREF(outcome_int);
        Py_XDECREF(rule_int);
        return NULL;
    }
    memcpy(PyUnicode_1BYTE_DATA(prefix_str), prefix, PREFIX_CHARS); /* base64url: ASCII */
    PyTuple_SET_ITEM(answer, 0, outcome_int);
    PyTuple_SET_ITEM(answer, 1, rule_int);
    PyTuple_SET_ITEM(answer, 2, prefix_str);
    PyTuple_SET_ITEM(answer, 3, frame);
    return answer;
}

PyDoc_STRVAR(bucket_doc, "bucket(data: bytes) -> int: murmur3_x86_32(data, 0) % 10000.");

static PyObject *bucket(PyObject *module, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "bucket takes bytes");
        return NULL;
    }
    uint32_t h = murmur3_32((const uint8_t *)PyBytes_AS_STRING(arg),
                            (size_t)PyBytes_GET_SIZE(arg), 0);
    return PyLong_FromUnsignedLong(h % BUCKETS);
}

PyDoc_STRVAR(identifier_hash_doc,
"identifier_hash(data: bytes) -> int: the first 64 bits of murmur3_x64_128(data, 0), 0 as 1.");

static PyObject *identifier_hash(PyObject *module, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "identifier_hash takes bytes");
        return NULL;
    }
    uint64_t h = murmur3_x64_128_h1((const uint8_t *)PyBytes_AS_STRING(arg),
                                    (size_t)PyBytes_GET_SIZE(arg));
    return PyLong_FromUnsignedLongLong(h ? h : 1);
}

/* An identifier's UTF-8 as the core encodes it (``encode("utf-8", "surrogatepass")``): in place
 * for a string without lone surrogates, else into *holder (a bytes object the caller releases).
 * NULL with an exception for an item that is not a str. */
static const char *surrogatepass_utf8(PyObject *item, Py_ssize_t *len, PyObject **holder) {
    *holder = NULL;
    if (!PyUnicode_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "identifiers must be str");
        return NULL;
    }
    const char *utf8 = PyUnicode_AsUTF8AndSize(item, len);
    if (utf8 != NULL) return utf8;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
    PyErr_Clear(); /* a lone surrogate: encoded as the core encodes it */
    *holder = PyUnicode_AsEncodedString(item, "utf-8", "surrogatepass");
    if (*holder == NULL) return NULL;
    *len = PyBytes_GET_SIZE(*holder);
    return PyBytes_AS_STRING(*holder);
}

PyDoc_STRVAR(identifier_hashes_doc,
"identifier_hashes(identifiers: list[str]) -> bytes: identifier_hash of each identifier's\n"
"UTF-8 (surrogatepass), as native-order uint64s: SegmentMembership's keys, in one call.");

static PyObject *identifier_hashes(PyObject *module, PyObject *arg) {
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "identifier_hashes takes a list of str");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(arg);
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * 8);
    if (out == NULL) return NULL;
    char *at = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *holder;
        Py_ssize_t len;
        const char *utf8 = surrogatepass_utf8(PyList_GET_ITEM(arg, i), &len, &holder);
        if (utf8 == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        uint64_t h = murmur3_x64_128_h1((const uint8_t *)utf8, (size_t)len);
        Py_XDECREF(holder);
        if (h == 0) h = 1;
        memcpy(at + 8 * i, &h, 8);
    }
    return out;
}

PyDoc_STRVAR(buckets_doc,
"buckets(prefix: str, identifiers: list[str]) -> bytes: murmur3_x86_32(UTF-8 of prefix +\n"
"identifier, surrogatepass) % 10000 of each identifier, as native-order uint16s: a\n"
"percentage rule's buckets (prefix: the flag key and ':'), in one call.");

static PyObject *buckets(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "buckets(prefix: str, identifiers: list[str])");
        return NULL;
    }
    PyObject *prefix_holder, *items = args[1];
    Py_ssize_t prefix_len;
    const char *prefix = surrogatepass_utf8(args[0], &prefix_len, &prefix_holder);
    if (prefix == NULL) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(items), size = prefix_len + 256;
    char *scratch = PyMem_Malloc((size_t)size);
    PyObject *out = scratch == NULL ? NULL : PyBytes_FromStringAndSize(NULL, count * 2);
    if (out == NULL) {
        if (scratch == NULL) PyErr_NoMemory();
        goto done;
    }
    memcpy(scratch, prefix, (size_t)prefix_len);
    char *at = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *holder;
        Py_ssize_t len;
        const char *utf8 = surrogatepass_utf8(PyList_GET_ITEM(items, i), &len, &holder);
        if (utf8 == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        if (prefix_len + len > size) {
            size = 2 * (prefix_len + len);
            char *grown = PyMem_Realloc(scratch, (size_t)size);
            if (grown == NULL) {
                Py_XDECREF(holder);
                Py_CLEAR(out);
                PyErr_NoMemory();
                goto done;
            }
            scratch = grown;
        }
        memcpy(scratch + prefix_len, utf8, (size_t)len);
        Py_XDECREF(holder);
        uint16_t bucket = (uint16_t)(murmur3_32((const uint8_t *)scratch,
                                                (size_t)(prefix_len + len), 0) % BUCKETS);
        memcpy(at + 2 * i, &bucket, 2);
    }
done:
    PyMem_Free(scratch);
    Py_XDECREF(prefix_holder);
    return out;
}

PyDoc_STRVAR(batch_bodies_doc,
"batch_bodies(view: memoryview, offset: int, budget: int) -> (bodies, offset, size)\n"
"From ``offset``, the consecutive complete, crc-valid frames that each hold one evaluation\n"
"batch (a payload starting 0x92 0x04): ``bodies`` their payloads after those two bytes, as\n"
"slices of ``view``; ``offset`` where the scan stopped; ``size`` their payload bytes. It stops\n"
"before any other frame (torn, corrupt, zeros a crash left, or another kind: the caller\n"
"reads that one) and once ``size`` reaches ``budget``. The sealer's frame loop, in C.");

#define FRAME_HEADER 12
#define MAX_PAYLOAD (256u * 1024u * 1024u)

static PyObject *batch_bodies(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyMemoryView_Check(args[0]) ||
        PyMemoryView_GET_BUFFER(args[0])->ndim != 1 ||
        PyMemoryView_GET_BUFFER(args[0])->itemsize != 1) { /* its slices must count bytes */
        PyErr_SetString(PyExc_TypeError, "batch_bodies(view: memoryview of bytes, offset, budget)");
        return NULL;
    }
    PyObject *view = args[0];
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t budget = PyLong_AsSsize_t(args[2]);
    if (budget == -1 && PyErr_Occurred()) return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(view, &buf, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *data = (const uint8_t *)buf.buf;
    Py_ssize_t end = buf.len, size = 0;
    PyObject *bodies = PyList_New(0);
    if (bodies == NULL) goto fail;
    while (offset >= 0 && end - offset >= FRAME_HEADER && size < budget) {
        const uint8_t *head = data + offset;
        uint32_t length = le32(head + 8);
        Py_ssize_t start = offset + FRAME_HEADER, stop = start + (Py_ssize_t)length;
        if (memcmp(head, "FSW1", 4) != 0 || length > MAX_PAYLOAD || stop > end) break;
        if (length < 2 || data[start] != 0x92 || data[start + 1] != 4) break;
        if (crc32_of(head + 8, 4 + (size_t)length) != le32(head + 4)) break;
        PyObject *body = PySequence_GetSlice(view, start + 2, stop);
        if (body == NULL) goto fail;
        int failed = PyList_Append(bodies, body);
        Py_DECREF(body);
        if (failed) goto fail;
        size += length;
        offset = stop;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("(Nnn)", bodies, offset, size);
fail:
    Py_XDECREF(bodies);
    PyBuffer_Release(&buf);
    return NULL;
}

PyDoc_STRVAR(register_membership_doc,
"register_membership(cls): probe instances of cls (SegmentMembership: a power-of-two uint64\n"
"table in its ``_slots`` memoryview) in C.");

static PyObject *register_membership(PyObject *module, PyObject *cls) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "register_membership takes a class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(membership_type, cls);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(register_defined_segment_doc,
"register_defined_segment(cls): decide instances of cls (DefinedSegment) by their\n"
"``native_plan`` and the request's attributes.");

static PyObject *register_defined_segment(PyObject *module, PyObject *cls) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "register_defined_segment takes a class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(defined_type, cls);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"identifier_hash", identifier_hash, METH_O, identifier_hash_doc},
    {"register_membership", register_membership, METH_O, register_membership_doc},
    {"register_defined_segment", register_defined_segment, METH_O, register_defined_segment_doc},
    {"serve_one", (PyCFunction)(void (*)(void))serve_one, METH_FASTCALL, serve_one_doc},
    {"bucket", bucket, METH_O, bucket_doc},
    {"buckets", (PyCFunction)(void (*)(void))buckets, METH_FASTCALL, buckets_doc},
    {"identifier_hashes", identifier_hashes, METH_O, identifier_hashes_doc},
    {"batch_bodies", (PyCFunction)(void (*)(void))batch_bodies, METH_FASTCALL, batch_bodies_doc},
    {"attribute_columns", (PyCFunction)(void (*)(void))attribute_columns, METH_FASTCALL,
     "attribute_columns(body, raw, rows, missing, max_columns[, kinds[, coded]]): a bulk "
     "request's attributes by user (raw: their JSON, a view of the body) as a list per "
     "attribute name, a row per user (rows: user -> row), missing where a user has none; with "
     "kinds (a dict), each column's frozenset of value types put there too; with coded (a "
     "dict), each column of at most 255 distinct strings, numbers and booleans as (distinct "
     "values, missing first; a code per row as bytes); None where it hands the body on "
     "(attribute_columns.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastpath", "A single evaluate's CPU work in one call, the sealer's frame loop, and a bulk request's attributes as columns.", -1, methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "the native path assumes a little-endian machine");
        return NULL;
    }
    crc_init();
    if (slots_name == NULL && (slots_name = PyUnicode_InternFromString("_slots")) == NULL)
        return NULL;
    if (native_plan_name == NULL &&
        (native_plan_name = PyUnicode_InternFromString("native_plan")) == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
