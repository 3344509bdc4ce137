/*
 * accel/value.h: a YAML or JSON document as PyYAML's safe_load sees it.
 *
 * Scalars are resolved with YAML 1.1 rules, exactly as PyYAML does: unquoted
 * yes/no/on/off/true/false (any of their three spellings) are booleans,
 * unquoted `NO` is false, ~ and null are null, `1e5` (no dot) is a string,
 * quoted scalars always stay strings.  Every value remembers where it was
 * written (file, line, column), so later checks can point at it.
 *
 * Ownership: a value owns its children and strings; accel_val_free releases
 * them.  `mark.file` points at a string owned by whoever parsed the document
 * (struct accel_doc) and must outlive the value.
 *
 * Thread-safety: parsing keeps no global state; a value tree belongs to one
 * thread while it is built or changed, and may be read by many after.
 */
#ifndef ACCEL_VALUE_H
#define ACCEL_VALUE_H

#include <stdbool.h>
#include <stddef.h>

#include "accel/buf.h"
#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

enum accel_vtype {
    ACCEL_V_NULL,
    ACCEL_V_BOOL,
    ACCEL_V_INT,
    ACCEL_V_FLOAT,
    ACCEL_V_STR,
    ACCEL_V_LIST,
    ACCEL_V_MAP
};

struct accel_mark {
    const char *file; /* not owned */
    unsigned line;    /* 1-based; 0 = not from a file (a built-in default) */
    unsigned col;     /* 1-based */
};

struct accel_pair;

struct accel_val {
    enum accel_vtype type;
    struct accel_mark mark;
    bool quoted; /* a quoted scalar: a string whatever it looks like */
    union {
        bool b;
        long long i;
        double f;
        char *s;
        struct {
            struct accel_val *v;
            size_t n;
        } list;
        struct {
            struct accel_pair *v;
            size_t n;
        } map;
    } u;
};

struct accel_pair {
    char *key; /* the key's text as written */
    struct accel_mark mark;
    struct accel_val val;
};

/* Caps on a parsed document; every one exceeded is a located error. */
#define ACCEL_MAX_CONFIG_BYTES (1u << 20) /* 1 MiB file */
#define ACCEL_MAX_DEPTH 32                /* nested collections */
#define ACCEL_MAX_SCALAR 65536            /* bytes in one scalar */
#define ACCEL_MAX_NODES 100000            /* values in one document */

/* A parsed file: its name (owned) and the root value. */
struct accel_doc {
    char *file;
    struct accel_val root;
};

/* Parses `len` bytes of YAML (or JSON, which is read as YAML flow syntax, as
 * PyYAML reads it) named `file` for messages.  On a syntax error or an
 * exceeded cap returns ACCEL_EPARSE / ACCEL_ETOOBIG with file:line:column in
 * `err`, and `doc` holds nothing.  Duplicate keys keep the last value, as
 * PyYAML does, and are reported through `dup_cb` when it is not NULL.
 * Anchors and aliases are refused (configs never need them, and they are the
 * way to build exponential documents). */
typedef void (*accel_dup_cb)(void *ctx, const struct accel_pair *first,
                             const struct accel_pair *second);
enum accel_err accel_doc_parse(struct accel_doc *doc, const char *file, const char *data,
                               size_t len, accel_dup_cb dup_cb, void *dup_ctx,
                               struct accel_error *err) ACCEL_WUR;

/* Reads (capped at ACCEL_MAX_CONFIG_BYTES) and parses a file. */
enum accel_err accel_doc_load(struct accel_doc *doc, const char *path, accel_dup_cb dup_cb,
                              void *dup_ctx, struct accel_error *err) ACCEL_WUR;

/* Releases the document; safe on a zeroed or already freed doc. */
void accel_doc_free(struct accel_doc *doc);

/* Releases a value's children and strings and makes it NULL-typed. */
void accel_val_free(struct accel_val *v);

/* Deep copy; ACCEL_ENOMEM leaves `dst` NULL-typed.  Marks are copied. */
enum accel_err accel_val_copy(struct accel_val *dst, const struct accel_val *src) ACCEL_WUR;

/* The pair whose key is `key` in a map, or NULL (also NULL for non-maps). */
struct accel_pair *accel_map_find(const struct accel_val *map, const char *key);

/* Python equality of two values (1 == 1.0 == True, as Python compares). */
bool accel_val_equal(const struct accel_val *a, const struct accel_val *b);

/* Appends Python's str(v) (True, 1024, 1e-05, 'x' inside lists, ...). */
enum accel_err accel_val_pystr(const struct accel_val *v, struct accel_buf *out) ACCEL_WUR;

/* Python truthiness (empty string, 0, None, empty collections are false). */
bool accel_val_truthy(const struct accel_val *v);

/* Name of a type for messages ("boolean", "integer", "string", ...). */
const char *accel_vtype_name(enum accel_vtype t);

/* Resolves a plain (unquoted) scalar with PyYAML's YAML 1.1 rules into `out`
 * (type and payload; the string case copies `text`).  ACCEL_ENOMEM only. */
enum accel_err accel_scalar_resolve(const char *text, size_t len, struct accel_val *out) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
