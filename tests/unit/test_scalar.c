/*
 * test_scalar.c: replays tests/golden/scalars.tsv, the table that
 * scripts/gen_scalars.py writes from the real PyYAML, against
 * accel_scalar_resolve, accel_doc_parse and accel_val_pystr.
 *
 * Every row names a Python type and Python's str() of the value; ours must
 * give the same type and the same text byte for byte.  The note column
 * marks the documented differences (ints beyond int64 clamp, timestamps stay
 * text, a few PyYAML-only types are refused); those rows are held to the
 * documented behaviour instead.  All mismatches of a case are listed before
 * the case fails, so one run shows the whole picture.
 */
#include <limits.h>
#include <sys/stat.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/fsutil.h"
#include "accel/value.h"
#include "../harness/test.h"

#define TSV_PATH "tests/golden/scalars.tsv"
#define TSV_MAX (1u << 20)
#define FIELD_MAX 4096

struct row {
    unsigned lineno;
    char section[16];
    char input[FIELD_MAX];
    size_t input_len;
    char type[32];
    char str[FIELD_MAX];
    char note[32];
};

/* Undoes the generator's escapes (\\ \t \n \r \xHH) from `s` (n bytes). */
static size_t unescape(const char *s, size_t n, char *out, size_t outsz)
{
    size_t j = 0;

    for (size_t i = 0; i < n && j + 1 < outsz; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            char e = s[++i];
            if (e == 't')
                c = '\t';
            else if (e == 'n')
                c = '\n';
            else if (e == 'r')
                c = '\r';
            else if (e == 'x' && i + 2 < n) {
                char hex[3] = {s[i + 1], s[i + 2], '\0'};
                c = (char)strtol(hex, NULL, 16);
                i += 2;
            } else
                c = e;
        }
        out[j++] = c;
    }
    out[j] = '\0';
    return j;
}

/* Splits one TSV line (without its newline) into a row; false if malformed. */
static bool parse_row(const char *line, size_t n, struct row *r)
{
    const char *f[5];
    size_t flen[5];
    size_t k = 0, start = 0;

    for (size_t i = 0; i <= n && k < 5; i++) {
        if (i == n || line[i] == '\t') {
            f[k] = line + start;
            flen[k] = i - start;
            k++;
            start = i + 1;
        }
    }
    if (k != 5)
        return false;
    unescape(f[0], flen[0], r->section, sizeof(r->section));
    r->input_len = unescape(f[1], flen[1], r->input, sizeof(r->input));
    unescape(f[2], flen[2], r->type, sizeof(r->type));
    unescape(f[3], flen[3], r->str, sizeof(r->str));
    unescape(f[4], flen[4], r->note, sizeof(r->note));
    return true;
}

/* Calls fn on every data row; returns the number of rows. */
static size_t for_each_row(bool (*fn)(const struct row *r, void *ctx), void *ctx, size_t *failed)
{
    char *data = NULL;
    size_t len = 0, rows = 0;
    struct accel_error err;
    struct row *r = calloc(1, sizeof(*r));
    unsigned lineno = 0;

    ASSERT(r != NULL);
    accel_error_clear(&err);
    if (accel_read_file(TSV_PATH, TSV_MAX, &data, &len, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "couldn't read %s (run from the repo root): %s", TSV_PATH,
                  err.msg);
    *failed = 0;
    for (char *p = data; p < data + len;) {
        char *nl = memchr(p, '\n', (size_t)(data + len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(data + len - p);
        lineno++;
        if (n > 0 && p[0] != '#') {
            memset(r, 0, sizeof(*r));
            r->lineno = lineno;
            if (!parse_row(p, n, r))
                test_fail(__FILE__, __LINE__, "%s:%u: malformed row", TSV_PATH, lineno);
            rows++;
            if (!fn(r, ctx))
                (*failed)++;
        }
        p += n + 1;
    }
    accel_free(data);
    free(r);
    return rows;
}

static enum accel_vtype type_of(const char *pytype)
{
    static const struct {
        const char *py;
        enum accel_vtype t;
    } map[] = {{"NoneType", ACCEL_V_NULL}, {"bool", ACCEL_V_BOOL}, {"int", ACCEL_V_INT},
               {"float", ACCEL_V_FLOAT},   {"str", ACCEL_V_STR},   {"list", ACCEL_V_LIST},
               {"dict", ACCEL_V_MAP}};

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i].py, pytype) == 0)
            return map[i].t;
    test_fail(__FILE__, __LINE__, "unexpected Python type %s in the table", pytype);
}

/* str(v) into a fixed buffer (tests only). */
static void pystr(const struct accel_val *v, char *out, size_t outsz)
{
    struct accel_buf b;

    accel_buf_init(&b, 1u << 16);
    if (accel_val_pystr(v, &b) != ACCEL_OK)
        snprintf(out, outsz, "<pystr failed>");
    else
        snprintf(out, outsz, "%s", accel_buf_str(&b));
    accel_buf_free(&b);
}

/* Checks one value against a row; prints a note and returns false on a
 * mismatch.  `how` says which path produced the value. */
static bool check_value(const struct row *r, const struct accel_val *v, const char *how)
{
    static char got[FIELD_MAX];

    pystr(v, got, sizeof(got));
    if (strcmp(r->note, "lenient") == 0)
        return true; /* PyYAML raises; ours gives some value, which is all we ask */
    if (strcmp(r->note, "bigint") == 0) {
        long long want = r->str[0] == '-' ? LLONG_MIN : LLONG_MAX;
        if (v->type == ACCEL_V_INT && v->u.i == want)
            return true;
        test_note("%s:%u: %s %s: want a clamped int %lld, got %s %s", TSV_PATH, r->lineno, how,
                  r->input, want, accel_vtype_name(v->type), got);
        return false;
    }
    if (strcmp(r->note, "timestamp") == 0) {
        /* Ours keeps the text; str() of a date is that text too. */
        bool ok = v->type == ACCEL_V_STR && strcmp(v->u.s, r->input) == 0 &&
                  (strcmp(r->type, "date") != 0 || strcmp(got, r->str) == 0);
        if (!ok)
            test_note("%s:%u: %s %s: want the text as a string, got %s %s", TSV_PATH, r->lineno,
                      how, r->input, accel_vtype_name(v->type), got);
        return ok;
    }
    if (v->type != type_of(r->type) || strcmp(got, r->str) != 0) {
        test_note("%s:%u: %s %s: want %s %s, got %s %s", TSV_PATH, r->lineno, how, r->input,
                  r->type, r->str, accel_vtype_name(v->type), got);
        return false;
    }
    return true;
}

/* Parses "v: <input>\n"; returns the rc and leaves the doc to the caller. */
static enum accel_err parse_v(const struct row *r, struct accel_doc *doc, struct accel_error *err)
{
    static char text[FIELD_MAX + 16];
    int n = snprintf(text, sizeof(text), "v: %s\n", r->input);

    accel_error_clear(err);
    return accel_doc_parse(doc, "scalars.tsv", text, (size_t)n, NULL, NULL, err);
}

static bool check_plain(const struct row *r, void *ctx)
{
    struct accel_val v;
    struct accel_doc doc;
    struct accel_error err;
    enum accel_err rc;
    bool ok;

    (void)ctx;
    if (strcmp(r->section, "plain") != 0 && strcmp(r->section, "bare") != 0)
        return true;
    memset(&v, 0, sizeof(v));
    rc = accel_scalar_resolve(r->input, r->input_len, &v);
    if (rc != ACCEL_OK) {
        test_note("%s:%u: accel_scalar_resolve(%s) returned %d", TSV_PATH, r->lineno, r->input, rc);
        return false;
    }
    ok = check_value(r, &v, "resolve") && !v.quoted;
    accel_val_free(&v);
    if (!ok || strcmp(r->section, "bare") == 0)
        return ok;
    /* The same scalar through the whole parser. */
    rc = parse_v(r, &doc, &err);
    if (rc != ACCEL_OK) {
        test_note("%s:%u: parse of v: %s failed: %s", TSV_PATH, r->lineno, r->input, err.msg);
        return false;
    }
    ok = check_value(r, &accel_map_find(&doc.root, "v")->val, "doc");
    accel_doc_free(&doc);
    return ok;
}

static bool check_doc(const struct row *r, void *ctx)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_pair *p;
    enum accel_err rc;
    bool ok = true;

    (void)ctx;
    if (strcmp(r->section, "doc") != 0)
        return true;
    rc = parse_v(r, &doc, &err);
    if (strcmp(r->note, "error") == 0 || strcmp(r->note, "refused") == 0) {
        if (rc == ACCEL_EPARSE && err.line >= 1 && err.column >= 1)
            return true;
        test_note("%s:%u: v: %s: PyYAML %s, want ACCEL_EPARSE with a position, got %s (%u:%u)",
                  TSV_PATH, r->lineno, r->input,
                  strcmp(r->note, "error") == 0 ? "raises" : "loads it but we refuse",
                  accel_errname(rc), err.line, err.column);
        accel_doc_free(&doc);
        return false;
    }
    if (rc != ACCEL_OK) {
        test_note("%s:%u: v: %s: parse failed: %s", TSV_PATH, r->lineno, r->input, err.msg);
        return false;
    }
    p = accel_map_find(&doc.root, "v");
    if (p == NULL) {
        test_note("%s:%u: v: %s: no key v", TSV_PATH, r->lineno, r->input);
        ok = false;
    } else if (strcmp(r->note, "typed-keys") == 0) {
        ok = p->val.type == ACCEL_V_MAP; /* keys keep their text: {'1': 'a'} */
    } else if (strcmp(r->note, "timestamp") == 0) {
        ok = p->val.type == ACCEL_V_LIST;
    } else {
        ok = check_value(r, &p->val, "doc");
        /* A quoted scalar must say so: the schema relies on it. */
        if (ok && p->val.type == ACCEL_V_STR && (r->input[0] == '\'' || r->input[0] == '"') &&
            !p->val.quoted) {
            test_note("%s:%u: v: %s: not marked quoted", TSV_PATH, r->lineno, r->input);
            ok = false;
        }
    }
    accel_doc_free(&doc);
    return ok;
}

/* A whole corpus config: str() of the document, key order and all. */
static bool check_file(const struct row *r, void *ctx)
{
    struct accel_doc doc;
    struct accel_error err;
    char path[4096];
    enum accel_err rc;
    bool ok;

    (void)ctx;
    if (strcmp(r->section, "file") != 0)
        return true;
    if (snprintf(path, sizeof(path), "%s/%s", test_corpus_dir(), r->input) >= (int)sizeof(path))
        test_fail(__FILE__, __LINE__, "corpus path too long");
    accel_error_clear(&err);
    rc = accel_doc_load(&doc, path, NULL, NULL, &err);
    if (rc != ACCEL_OK) {
        test_note("%s:%u: %s: %s", TSV_PATH, r->lineno, path, err.msg);
        return false;
    }
    ok = check_value(r, &doc.root, "file");
    accel_doc_free(&doc);
    return ok;
}

static bool count_row(const struct row *r, void *ctx)
{
    size_t *counts = ctx;

    if (strcmp(r->section, "doc") == 0)
        counts[1]++;
    else if (strcmp(r->section, "file") == 0)
        counts[3]++;
    else
        counts[0]++;
    if (r->note[0] != '\0')
        counts[2]++;
    return true;
}

TEST(table_is_complete)
{
    size_t counts[4] = {0, 0, 0, 0}, failed;
    size_t rows = for_each_row(count_row, counts, &failed);

    test_note("%zu rows: %zu plain scalars, %zu documents, %zu corpus files, %zu with a note", rows,
              counts[0], counts[1], counts[3], counts[2]);
    ASSERT(counts[0] >= 250);
    ASSERT(counts[1] >= 50);
    /* Most rows must be exact matches, not notes. */
    ASSERT(counts[2] * 4 < rows);
}

TEST(plain_scalars_match_pyyaml)
{
    size_t failed;
    size_t rows = for_each_row(check_plain, NULL, &failed);

    ASSERT(rows > 0);
    if (failed != 0)
        test_fail(__FILE__, __LINE__, "%zu rows differ from PyYAML", failed);
}

TEST(documents_match_pyyaml)
{
    size_t failed;
    size_t rows = for_each_row(check_doc, NULL, &failed);

    ASSERT(rows > 0);
    if (failed != 0)
        test_fail(__FILE__, __LINE__, "%zu rows differ from PyYAML", failed);
}

TEST(corpus_files_match_pyyaml)
{
    char dir[4096];
    size_t failed;
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/accelerate-configs", test_corpus_dir());
    if (stat(dir, &st) != 0)
        SKIP("the shared corpus is not there (set ACCEL_SHARED)");
    ASSERT(for_each_row(check_file, NULL, &failed) > 0);
    if (failed != 0)
        test_fail(__FILE__, __LINE__, "%zu corpus files differ from PyYAML", failed);
}

/* The resolver must not read past `len`: the text is not NUL-terminated. */
TEST(resolve_honours_length)
{
    struct accel_val v;

    ASSERT_OK(accel_scalar_resolve("123abc", 3, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_INT);
    ASSERT_INT_EQ(v.u.i, 123);
    ASSERT_OK(accel_scalar_resolve("yesno", 3, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_BOOL);
    ASSERT(v.u.b);
    ASSERT_OK(accel_scalar_resolve("1.5e+3x", 6, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_FLOAT);
    ASSERT(v.u.f == 1500.0);
    ASSERT_OK(accel_scalar_resolve("0x1fzz", 4, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_INT);
    ASSERT_INT_EQ(v.u.i, 31);
    ASSERT_OK(accel_scalar_resolve("1:30:00", 4, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_INT);
    ASSERT_INT_EQ(v.u.i, 90);
    ASSERT_OK(accel_scalar_resolve("null", 0, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_NULL);
}

/* A NUL inside the text (possible from a "\0" escape) makes it a string. */
TEST(resolve_nul_is_string)
{
    struct accel_val v;

    ASSERT_OK(accel_scalar_resolve("1\0002", 3, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_STR);
    accel_val_free(&v);
}

TEST(resolve_out_of_memory)
{
    static const char short_num[] = "0.000000000000000000000000000000000000000000000000001e-10";
    char long_num[300];
    struct accel_val v;
    long live;

    test_alloc_install();
    live = test_alloc_live();
    test_alloc_fail_at(1);
    ASSERT_INT_EQ(accel_scalar_resolve("hello", 5, &v), ACCEL_ENOMEM);
    ASSERT_INT_EQ(test_alloc_live(), live);
    /* Short numbers need no allocation. */
    test_alloc_fail_at(1);
    ASSERT_OK(accel_scalar_resolve(short_num, sizeof(short_num) - 1, &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_FLOAT);
    ASSERT(v.u.f == 1e-61);
    /* A float literal longer than the stack buffer needs a copy: ENOMEM, no leak. */
    memset(long_num, '0', sizeof(long_num));
    long_num[1] = '.';
    long_num[sizeof(long_num) - 1] = '5';
    test_alloc_fail_at(1);
    ASSERT_INT_EQ(accel_scalar_resolve(long_num, sizeof(long_num), &v), ACCEL_ENOMEM);
    ASSERT_INT_EQ(test_alloc_live(), live);
    test_alloc_fail_at(0);
    ASSERT_OK(accel_scalar_resolve(long_num, sizeof(long_num), &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_FLOAT);
    ASSERT(v.u.f == 5e-298);
    ASSERT_INT_EQ(test_alloc_live(), live);
    /* Long integers are read in place, without a copy. */
    memset(long_num, '0', sizeof(long_num));
    long_num[sizeof(long_num) - 1] = '7';
    test_alloc_fail_at(1);
    ASSERT_OK(accel_scalar_resolve(long_num, sizeof(long_num), &v));
    ASSERT_INT_EQ(v.type, ACCEL_V_INT);
    ASSERT_INT_EQ(v.u.i, 7);
    test_alloc_fail_at(0);
}

/* Python's float repr for values no table row spells out. */
TEST(float_repr)
{
    static const struct {
        double x;
        const char *want;
    } cases[] = {
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {0.0001, "0.0001"},
        {1e-05, "1e-05"},
        {1.5e-07, "1.5e-07"},
        {123456789.0, "123456789.0"},
        {1e100, "1e+100"},
        {2.0 / 3, "0.6666666666666666"},
        {0.1 + 0.2, "0.30000000000000004"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {-2.5, "-2.5"},
        {9007199254740993.0, "9007199254740992.0"},
        {1e22, "1e+22"},
        {1.2345678901234567e-300, "1.2345678901234568e-300"},
        {4.35, "4.35"},
    };
    char got[128];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct accel_val v = {.type = ACCEL_V_FLOAT, .u.f = cases[i].x};
        pystr(&v, got, sizeof(got));
        ASSERT_STR_EQ(got, cases[i].want);
    }
}

TEST_LIST(T(table_is_complete), T(plain_scalars_match_pyyaml), T(documents_match_pyyaml),
          T(corpus_files_match_pyyaml), T(resolve_honours_length), T(resolve_nul_is_string),
          T(resolve_out_of_memory), T(float_repr))
