/* One native call for a single evaluate's CPU work: decide (murmur3 buckets, segment table
 * probes), sign the evaluation id (keyed BLAKE2b, written here from RFC 7693), and encode the
 * event-log frame (msgpack as msgspec writes it, crc32 as zlib computes it). See
 * api/native/__init__.py for why, and tests/native/test_fastpath.py for the checks that it
 * matches the pure-Python path byte for byte.
 *
 * Nothing here does I/O: the caller meters, writes the frame and answers. The only state is the
 * BLAKE2b state after the signing key's block, kept for the last key seen.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

/* -- murmur3 x86 32, the bucketing hash (api/evaluation/hashing.py) ----------------------- */

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

/* -- murmur3 x64 128, first half: a segment member's hash (api/evaluation/segments.py) -- */

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

/* Whether a SegmentMembership holds the identifier: its table's linear probe, in C. */
static int probe_membership(PyObject *members, const char *utf8, Py_ssize_t len) {
    PyObject *slots = PyObject_GetAttrString(members, "_slots");
    if (slots == NULL) return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(slots, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(slots);
        return -1;
    }
    const uint64_t *table = (const uint64_t *)view.buf;
    size_t size = (size_t)view.len / 8;
    int found = 0;
    if (size > 0 && (size & (size - 1)) == 0) {
        uint64_t wanted = murmur3_x64_128_h1((const uint8_t *)utf8, (size_t)len);
        if (wanted == 0) wanted = 1;
        size_t mask = size - 1, index = (size_t)(wanted & mask);
        for (size_t step = 0; step < size; step++) {
            uint64_t slot = table[index];
            if (slot == wanted) { found = 1; break; }
            if (slot == 0) break;
            index = (index + 1) & mask;
        }
    }
    PyBuffer_Release(&view);
    Py_DECREF(slots);
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

/* A str as UTF-8; -1 with an exception set when it has none (a lone surrogate). */
static int put_str(Out *o, PyObject *s) {
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s, &n);
    if (utf8 == NULL) return -1;
    put_str_bytes(o, utf8, (size_t)n);
    return 0;
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

/* -- deciding ------------------------------------------------------------------------------ */

/* The index of the first rule that matches, NO_RULE if none does; -1 with an exception set. */
static int deciding_rule(PyObject *rules, PyObject *segments, const char *flag_key,
                         Py_ssize_t flag_key_len, PyObject *user, const char *user_utf8,
                         Py_ssize_t user_len) {
    Py_ssize_t count = PyTuple_GET_SIZE(rules);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *rule = PyTuple_GET_ITEM(rules, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(rule, 0));
        PyObject *param = PyTuple_GET_ITEM(rule, 1);
        if (kind == RULE_STATIC) return (int)i;
        if (kind == RULE_SEGMENT) {
            PyObject *members = PyObject_GetItem(segments, param);
            if (members == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError)) return -1;
                PyErr_Clear();
                continue; /* an unknown segment has no members */
            }
            int found = membership_type != NULL && Py_IS_TYPE(members, (PyTypeObject *)membership_type)
                            ? probe_membership(members, user_utf8, user_len)
                            : PySequence_Contains(members, user);
            Py_DECREF(members);
            if (found < 0) return -1;
            if (found) return (int)i;
        } else if (kind == RULE_PERCENTAGE) {
            long threshold = PyLong_AsLong(param);
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
            if ((long)bucket < threshold) return (int)i;
        } else {
            PyErr_SetString(PyExc_ValueError, "unknown rule kind");
            return -1;
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

/* -- BLAKE2b (RFC 7693), keyed, with a 12-byte digest: the id's MAC --------------------- */

static const uint64_t BLAKE2B_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t BLAKE2B_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static uint64_t rotr64(uint64_t x, int r) { return (x >> r) | (x << (64 - r)); }

#define BLAKE2B_G(a, b, c, d, x, y)        \
    do {                                   \
        v[a] = v[a] + v[b] + (x);          \
        v[d] = rotr64(v[d] ^ v[a], 32);    \
        v[c] = v[c] + v[d];                \
        v[b] = rotr64(v[b] ^ v[c], 24);    \
        v[a] = v[a] + v[b] + (y);          \
        v[d] = rotr64(v[d] ^ v[a], 16);    \
        v[c] = v[c] + v[d];                \
        v[b] = rotr64(v[b] ^ v[c], 63);    \
    } while (0)

/* One compression of a 128-byte block; ``counted`` bytes so far, this block included. */
static void blake2b_compress(uint64_t h[8], const uint8_t block[128], uint64_t counted, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) memcpy(&m[i], block + 8 * i, 8); /* little-endian words */
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = BLAKE2B_IV[i];
    }
    v[12] ^= counted;
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = BLAKE2B_SIGMA[r];
        BLAKE2B_G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        BLAKE2B_G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        BLAKE2B_G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        BLAKE2B_G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        BLAKE2B_G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        BLAKE2B_G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        BLAKE2B_G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        BLAKE2B_G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* The state after the key block, kept for the last key seen (a deployment has one). */
static uint8_t keyed_for[64];
static size_t keyed_for_len = 0;
static uint64_t keyed_state[8];

/* The 12-byte keyed BLAKE2b of ``head`` (one block): what hashlib.blake2b(key=key,
 * digest_size=12) gives. Returns 0, or -1 with an exception set. */
static int mac_of(PyObject *key, const uint8_t *head, uint8_t *mac) {
    if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) < 1 || PyBytes_GET_SIZE(key) > 64) {
        PyErr_SetString(PyExc_ValueError, "the signing key must be 1 to 64 bytes");
        return -1;
    }
    const uint8_t *k = (const uint8_t *)PyBytes_AS_STRING(key);
    size_t kk = (size_t)PyBytes_GET_SIZE(key);
    if (kk != keyed_for_len || memcmp(k, keyed_for, kk) != 0) {
        uint8_t block[128] = {0};
        memcpy(block, k, kk);
        for (int i = 0; i < 8; i++) keyed_state[i] = BLAKE2B_IV[i];
        keyed_state[0] ^= 0x01010000ULL ^ ((uint64_t)kk << 8) ^ MAC_SIZE;
        blake2b_compress(keyed_state, block, 128, 0);
        memcpy(keyed_for, k, kk);
        keyed_for_len = kk;
    }
    uint64_t h[8];
    memcpy(h, keyed_state, sizeof h);
    uint8_t block[128] = {0};
    memcpy(block, head, HEAD_SIZE);
    blake2b_compress(h, block, 128 + HEAD_SIZE, 1);
    memcpy(mac, h, MAC_SIZE); /* the first 12 bytes, little-endian words */
    return 0;
}

/* -- serve_one ------------------------------------------------------------------------------ */

PyDoc_STRVAR(serve_one_doc,
"serve_one(plan, code_table, segments, flag_key, user, signing_key, environment, nonces,\n"
"          evaluated_at_us, organization_id, environment_id, sdk, api_key_id, source,\n"
"          split_rule, split_percentage) -> (outcome, rule, prefix, frame)\n\n"
"plan: the flag's rules as a tuple of (kind, param), or an int result code when the flag's\n"
"state or the plan decides. environment: the id's 8 environment bytes; nonces: the issuer's\n"
"counter (one is taken). The frame is\n"
"encode_frame(EVALUATION_BATCH_CODE, EvaluationBatch(...)) for this one user.");

static PyObject *serve_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "serve_one takes 16 arguments");
        return NULL;
    }
    PyObject *plan = args[0], *code_table = args[1], *segments = args[2], *flag_key = args[3],
             *user = args[4], *signing_key = args[5], *environment = args[6], *nonce_obj = args[7],
             *at_obj = args[8], *organization_id = args[9], *environment_id = args[10],
             *sdk = args[11], *api_key_id = args[12], *source = args[13],
             *split_rule_obj = args[14], *split_percentage = args[15];
    if (!PyUnicode_Check(flag_key) || !PyUnicode_Check(user) || !PyBytes_Check(code_table) ||
        PyBytes_GET_SIZE(code_table) != 256 || !PyBytes_Check(environment) ||
        PyBytes_GET_SIZE(environment) != 8) {
        PyErr_SetString(PyExc_TypeError, "serve_one: wrong argument types");
        return NULL;
    }
    Py_ssize_t key_len, user_len;
    const char *key_utf8 = PyUnicode_AsUTF8AndSize(flag_key, &key_len);
    if (key_utf8 == NULL) return NULL;
    const char *user_utf8 = PyUnicode_AsUTF8AndSize(user, &user_len);
    if (user_utf8 == NULL) return NULL;

    int outcome, rule;
    if (PyLong_Check(plan)) {
        outcome = (int)PyLong_AsLong(plan);
        rule = NOT_EVALUATED;
    } else if (PyTuple_Check(plan)) {
        rule = deciding_rule(plan, segments, key_utf8, key_len, user, user_utf8, user_len);
        if (rule < 0) return NULL;
        outcome = (uint8_t)PyBytes_AS_STRING(code_table)[rule];
    } else {
        PyErr_SetString(PyExc_TypeError, "plan must be a tuple of rules or a result code");
        return NULL;
    }

    PyObject *next_nonce = PyIter_Next(nonce_obj);
    if (next_nonce == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "nonces ran out");
        return NULL;
    }
    uint64_t nonce = PyLong_AsUnsignedLongLongMask(next_nonce);
    Py_DECREF(next_nonce);
    long long at = PyLong_AsLongLong(at_obj);
    long split_rule = PyLong_AsLong(split_rule_obj);
    if (PyErr_Occurred()) return NULL;

    uint8_t signed_bytes[HEAD_SIZE + MAC_SIZE];
    signed_bytes[0] = 1; /* VERSION */
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
    if (put_str(&o, organization_id) < 0 || put_str(&o, environment_id) < 0) return NULL;
    put_str_bytes(&o, key_utf8, (size_t)key_len);
    if (sdk == Py_None) put_byte(&o, 0xc0);
    else if (put_str(&o, sdk) < 0) return NULL;
    if (put_str(&o, api_key_id) < 0 || put_str(&o, source) < 0) return NULL;
    put_byte(&o, 0x91);
    put_str_bytes(&o, user_utf8, (size_t)user_len);
    put_bin1(&o, (uint8_t)outcome);
    put_bin1(&o, (uint8_t)rule);
    put_int(&o, split_rule);
    if (split_percentage == Py_None) put_byte(&o, 0xc0);
    else {
        double d = PyFloat_AsDouble(split_percentage);
        if (d == -1.0 && PyErr_Occurred()) return NULL;
        put_double(&o, d);
    }
    if (o.overflow) {
        PyErr_SetString(PyExc_ValueError, "frame too large for the native path");
        return NULL;
    }
    uint32_t length = (uint32_t)(o.len - 12);
    for (int i = 0; i < 4; i++) buffer[8 + i] = (uint8_t)(length >> (8 * i));
    uint32_t crc = crc32_of(buffer + 8, o.len - 8);
    memcpy(buffer, "FSW1", 4);
    for (int i = 0; i < 4; i++) buffer[4 + i] = (uint8_t)(crc >> (8 * i));

    PyObject *frame = PyByteArray_FromStringAndSize((const char *)buffer, (Py_ssize_t)o.len);
    if (frame == NULL) return NULL;
    PyObject *prefix_str = PyUnicode_FromStringAndSize(prefix, PREFIX_CHARS);
    if (prefix_str == NULL) {
        Py_DECREF(frame);
        return NULL;
    }
    return Py_BuildValue("(iiNN)", outcome, rule, prefix_str, frame);
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
    if (nargs != 3 || !PyMemoryView_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "batch_bodies(view: memoryview, offset, budget)");
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

static PyMethodDef methods[] = {
    {"identifier_hash", identifier_hash, METH_O, identifier_hash_doc},
    {"register_membership", register_membership, METH_O, register_membership_doc},
    {"serve_one", (PyCFunction)(void (*)(void))serve_one, METH_FASTCALL, serve_one_doc},
    {"bucket", bucket, METH_O, bucket_doc},
    {"batch_bodies", (PyCFunction)(void (*)(void))batch_bodies, METH_FASTCALL, batch_bodies_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastpath", "A single evaluate's CPU work in one call, and the sealer's frame loop.", -1, methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "the native path assumes a little-endian machine");
        return NULL;
    }
    crc_init();
    return PyModule_Create(&module_def);
}
