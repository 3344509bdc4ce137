/*
 * test_doc.c: accel_doc_parse and the value tree: marks, JSON input, located
 * errors, every cap, duplicate keys, tags, Python equality, copy, truthiness,
 * the shared corpus of accelerate configs, and allocation-failure torture
 * (fail each allocation of a full parse in turn: ENOMEM or success, never a
 * leak or a crash).
 *
 * What the scalars mean is test_scalar.c's job (the PyYAML table); this file
 * is about the document structure around them.
 */
#define _GNU_SOURCE /* strdup for the corpus file names */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/fsutil.h"
#include "accel/value.h"
#include "../harness/test.h"

/* ---------------------------------------------------------------- helpers */

static enum accel_err parse(struct accel_doc *doc, const char *text, struct accel_error *err)
{
    accel_error_clear(err);
    return accel_doc_parse(doc, "t.yaml", text, strlen(text), NULL, NULL, err);
}

/* Follows a path of keys ("a") and list indexes ("#1") from the root. */
static const struct accel_val *at(const struct accel_val *v, const char *const *path)
{
    for (; *path != NULL; path++) {
        if ((*path)[0] == '#') {
            size_t i = (size_t)atoi(*path + 1);
            if (v->type != ACCEL_V_LIST || i >= v->u.list.n)
                test_fail(__FILE__, __LINE__, "no item %s", *path);
            v = &v->u.list.v[i];
        } else {
            const struct accel_pair *p = accel_map_find(v, *path);
            if (p == NULL)
                test_fail(__FILE__, __LINE__, "no key %s", *path);
            v = &p->val;
        }
    }
    return v;
}

#define AT(v, ...) at((v), (const char *const[]){__VA_ARGS__, NULL})

#define ASSERT_MARK(m, l, c)                                                                       \
    do {                                                                                           \
        ASSERT_INT_EQ((m).line, (l));                                                              \
        ASSERT_INT_EQ((m).col, (c));                                                               \
    } while (0)

static void pystr(const struct accel_val *v, char *out, size_t outsz)
{
    struct accel_buf b;

    accel_buf_init(&b, 1u << 20);
    if (accel_val_pystr(v, &b) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_val_pystr failed");
    snprintf(out, outsz, "%s", accel_buf_str(&b));
    accel_buf_free(&b);
}

/* A buffer of `n` bytes of `c` (caller frees). */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);

    ASSERT(s != NULL);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ---------------------------------------------------------------- structure */

TEST(nested_marks)
{
    static const char text[] = "# comment\n"
                               "a:\n"
                               "  b: [1, {c: d}]\n"
                               "  e:\n"
                               "    - x\n"
                               "    - y: 2\n"
                               "f: 'q'\n";
    struct accel_doc doc;
    struct accel_error err;
    const struct accel_pair *p;
    char s[256];

    ASSERT_OK(parse(&doc, text, &err));
    ASSERT_STR_EQ(doc.file, "t.yaml");
    ASSERT_INT_EQ(doc.root.type, ACCEL_V_MAP);
    ASSERT_INT_EQ(doc.root.u.map.n, 2);
    ASSERT_MARK(doc.root.mark, 2, 1);
    ASSERT(doc.root.mark.file == doc.file);

    p = accel_map_find(&doc.root, "a");
    ASSERT(p != NULL);
    ASSERT_MARK(p->mark, 2, 1);
    ASSERT_MARK(p->val.mark, 3, 3);
    p = accel_map_find(&p->val, "b");
    ASSERT_MARK(p->mark, 3, 3);
    ASSERT_INT_EQ(p->val.type, ACCEL_V_LIST);
    ASSERT_MARK(p->val.mark, 3, 6);
    ASSERT_MARK(AT(&doc.root, "a", "b", "#0")->mark, 3, 7);
    ASSERT_MARK(AT(&doc.root, "a", "b", "#1")->mark, 3, 10);
    ASSERT_MARK(accel_map_find(AT(&doc.root, "a", "b", "#1"), "c")->mark, 3, 11);
    ASSERT_MARK(AT(&doc.root, "a", "b", "#1", "c")->mark, 3, 14);
    ASSERT_MARK(accel_map_find(AT(&doc.root, "a"), "e")->mark, 4, 3);
    ASSERT_MARK(AT(&doc.root, "a", "e")->mark, 5, 5);
    ASSERT_MARK(AT(&doc.root, "a", "e", "#0")->mark, 5, 7);
    ASSERT_MARK(AT(&doc.root, "a", "e", "#1")->mark, 6, 7);
    ASSERT_MARK(AT(&doc.root, "a", "e", "#1", "y")->mark, 6, 10);
    ASSERT_INT_EQ(AT(&doc.root, "a", "e", "#1", "y")->u.i, 2);
    ASSERT_MARK(AT(&doc.root, "f")->mark, 7, 4);
    ASSERT(AT(&doc.root, "f")->quoted);
    ASSERT(!AT(&doc.root, "a", "e", "#0")->quoted);
    ASSERT(AT(&doc.root, "a", "e", "#0")->mark.file == doc.file);

    pystr(&doc.root, s, sizeof(s));
    ASSERT_STR_EQ(s, "{'a': {'b': [1, {'c': 'd'}], 'e': ['x', {'y': 2}]}, 'f': 'q'}");
    accel_doc_free(&doc);
    accel_doc_free(&doc); /* twice is fine */
}

/* `accelerate config default` writes sorted, indented JSON into a .yaml file. */
TEST(json_input)
{
    static const char text[] = "{\n"
                               "  \"compute_environment\": \"LOCAL_MACHINE\",\n"
                               "  \"debug\": false,\n"
                               "  \"distributed_type\": \"MULTI_GPU\",\n"
                               "  \"downcast_bf16\": false,\n"
                               "  \"gpu_ids\": \"all\",\n"
                               "  \"machine_rank\": 0,\n"
                               "  \"main_training_function\": \"main\",\n"
                               "  \"mixed_precision\": \"no\",\n"
                               "  \"num_machines\": 1,\n"
                               "  \"num_processes\": 8,\n"
                               "  \"rdzv_backend\": \"static\",\n"
                               "  \"same_network\": true,\n"
                               "  \"tpu_env\": [],\n"
                               "  \"learning_rate\": 1e-05,\n"
                               "  \"ratio\": 0.5,\n"
                               "  \"nothing\": null,\n"
                               "  \"nested\": {\"a\": [1, 2.5, \"x\"]},\n"
                               "  \"use_cpu\": false\n"
                               "}\n";
    struct accel_doc doc;
    struct accel_error err;
    char s[1024];

    ASSERT_OK(parse(&doc, text, &err));
    ASSERT_INT_EQ(doc.root.type, ACCEL_V_MAP);
    ASSERT_INT_EQ(doc.root.u.map.n, 18);
    ASSERT_STR_EQ(doc.root.u.map.v[0].key, "compute_environment");
    ASSERT_MARK(doc.root.u.map.v[0].mark, 2, 3);
    ASSERT_MARK(doc.root.u.map.v[0].val.mark, 2, 26);
    /* "no" is quoted in JSON: the string, not False. */
    ASSERT_INT_EQ(AT(&doc.root, "mixed_precision")->type, ACCEL_V_STR);
    ASSERT_STR_EQ(AT(&doc.root, "mixed_precision")->u.s, "no");
    ASSERT(AT(&doc.root, "mixed_precision")->quoted);
    ASSERT_INT_EQ(AT(&doc.root, "debug")->type, ACCEL_V_BOOL);
    ASSERT_INT_EQ(AT(&doc.root, "num_processes")->u.i, 8);
    ASSERT_INT_EQ(AT(&doc.root, "tpu_env")->type, ACCEL_V_LIST);
    ASSERT_INT_EQ(AT(&doc.root, "tpu_env")->u.list.n, 0);
    /* PyYAML reads JSON's 1e-05 as a YAML 1.1 string (no dot). */
    ASSERT_INT_EQ(AT(&doc.root, "learning_rate")->type, ACCEL_V_STR);
    ASSERT_INT_EQ(AT(&doc.root, "ratio")->type, ACCEL_V_FLOAT);
    ASSERT_INT_EQ(AT(&doc.root, "nothing")->type, ACCEL_V_NULL);
    pystr(AT(&doc.root, "nested"), s, sizeof(s));
    ASSERT_STR_EQ(s, "{'a': [1, 2.5, 'x']}");
    accel_doc_free(&doc);
}

TEST(root_shapes)
{
    struct accel_doc doc;
    struct accel_error err;

    /* Empty, blank, comment-only and bare "---" files are None to PyYAML. */
    static const char *const empties[] = {"",      "\n\n",    "# only a comment\n",
                                          "---\n", "--- ~\n", "---\n...\n"};
    for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
        ASSERT_OK(parse(&doc, empties[i], &err));
        ASSERT_INT_EQ(doc.root.type, ACCEL_V_NULL);
        ASSERT(doc.file != NULL);
        accel_doc_free(&doc);
    }
    /* No buffer at all is an empty file too (libyaml alone would assert). */
    ASSERT_OK(accel_doc_parse(&doc, "empty.yaml", NULL, 0, NULL, NULL, &err));
    ASSERT_INT_EQ(doc.root.type, ACCEL_V_NULL);
    accel_doc_free(&doc);
    ASSERT_INT_EQ(accel_doc_parse(&doc, "empty.yaml", NULL, 1, NULL, NULL, &err), ACCEL_EINVAL);

    /* A scalar or a list at the root parses; the schema refuses it later. */
    ASSERT_OK(parse(&doc, "just text\n", &err));
    ASSERT_INT_EQ(doc.root.type, ACCEL_V_STR);
    accel_doc_free(&doc);
    ASSERT_OK(parse(&doc, "- 1\n- 2\n", &err));
    ASSERT_INT_EQ(doc.root.type, ACCEL_V_LIST);
    ASSERT_INT_EQ(doc.root.u.list.n, 2);
    accel_doc_free(&doc);
    /* An explicit document with an end marker. */
    ASSERT_OK(parse(&doc, "%YAML 1.1\n---\na: 1\n...\n", &err));
    ASSERT_INT_EQ(AT(&doc.root, "a")->u.i, 1);
    accel_doc_free(&doc);
    /* A UTF-8 byte order mark is allowed. */
    ASSERT_OK(parse(&doc,
                    "\xef\xbb\xbf"
                    "a: 1\n",
                    &err));
    ASSERT_INT_EQ(AT(&doc.root, "a")->u.i, 1);
    accel_doc_free(&doc);
}

/* ---------------------------------------------------------------- errors */

TEST(syntax_errors_are_located)
{
    static const struct {
        const char *text;
        unsigned line, col;
    } cases[] = {
        {"a: b: c\n", 1, 5},            /* mapping values are not allowed here */
        {"a: 1\n b: 2\n", 2, 3},        /* same, on the second line */
        {"a: [1, 2\n", 2, 1},           /* unterminated flow sequence */
        {"a:\n\t- x\n", 2, 1},          /* a tab cannot start a token */
        {"key: 'unterminated\n", 2, 1}, /* end of stream inside a quoted scalar */
        {"- a\nb: c\n", 2, 1},          /* a mapping after a list */
        {"{\"a\": 1,,}\n", 1, 9},       /* JSON with an extra comma */
        {"a: \"\\q\"\n", 1, 5},         /* an unknown escape (PyYAML says 1:6) */
        {"...\n", 1, 1},                /* a document end with no document */
    };
    struct accel_doc doc;
    struct accel_error err;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        accel_error_clear(&err);
        ASSERT_INT_EQ(accel_doc_parse(&doc, "conf/x.yaml", cases[i].text, strlen(cases[i].text),
                                      NULL, NULL, &err),
                      ACCEL_EPARSE);
        ASSERT_INT_EQ(err.code, ACCEL_EPARSE);
        ASSERT_STR_EQ(err.file, "conf/x.yaml");
        if (err.line != cases[i].line || err.column != cases[i].col)
            test_fail(__FILE__, __LINE__, "case %zu: at %u:%u, want %u:%u (%s)", i, err.line,
                      err.column, cases[i].line, cases[i].col, err.msg);
        ASSERT_CONTAINS(err.msg, "YAML syntax error");
        /* Nothing is left in the doc. */
        ASSERT(doc.file == NULL);
        ASSERT_INT_EQ(doc.root.type, ACCEL_V_NULL);
        accel_doc_free(&doc);
    }
}

TEST(second_document_is_refused)
{
    struct accel_doc doc;
    struct accel_error err;

    ASSERT_INT_EQ(parse(&doc, "a: 1\n---\nb: 2\n", &err), ACCEL_EPARSE);
    ASSERT_CONTAINS(err.msg, "more than one YAML document");
    ASSERT_INT_EQ(err.line, 2);
    ASSERT_INT_EQ(err.column, 1);
    ASSERT_INT_EQ(parse(&doc, "a: 1\n...\n---\nb: 2\n", &err), ACCEL_EPARSE);
    ASSERT_INT_EQ(parse(&doc, "--- 1\n--- 2\n", &err), ACCEL_EPARSE);
    ASSERT(doc.file == NULL);
}

TEST(anchors_and_aliases_are_refused)
{
    static const struct {
        const char *text;
        const char *msg;
        unsigned line, col;
    } cases[] = {
        {"a: &x 1\nb: *x\n", "anchors", 1, 4},
        {"a: &x [1]\n", "anchors", 1, 4},
        {"a: &x {b: 1}\n", "anchors", 1, 4},
        {"&k a: 1\n", "anchors", 1, 1},
        {"a: *x\n", "alias", 1, 4},
        {"*x : 1\n", "alias", 1, 1},
        {"- &a [*a]\n", "anchors", 1, 3},
        /* The "billion laughs" shape never gets past its first anchor. */
        {"a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n", "anchors", 1, 4},
    };
    struct accel_doc doc;
    struct accel_error err;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (parse(&doc, cases[i].text, &err) != ACCEL_EPARSE)
            test_fail(__FILE__, __LINE__, "case %zu parsed", i);
        ASSERT_CONTAINS(err.msg, cases[i].msg);
        if (err.line != cases[i].line || err.column != cases[i].col)
            test_fail(__FILE__, __LINE__, "case %zu: at %u:%u, want %u:%u", i, err.line, err.column,
                      cases[i].line, cases[i].col);
    }
}

/* `n` nested flow lists around a 1: [[[...1...]]]. */
static char *nested_lists(int n)
{
    char *s = malloc((size_t)n * 2 + 16);
    size_t k = 0;

    ASSERT(s != NULL);
    for (int i = 0; i < n; i++)
        s[k++] = '[';
    s[k++] = '1';
    for (int i = 0; i < n; i++)
        s[k++] = ']';
    s[k++] = '\n';
    s[k] = '\0';
    return s;
}

TEST(depth_cap)
{
    struct accel_doc doc;
    struct accel_error err;
    const struct accel_val *v;
    char *s;
    int depth = 0;

    /* ACCEL_MAX_DEPTH nested collections are fine ... */
    s = nested_lists(ACCEL_MAX_DEPTH);
    ASSERT_OK(parse(&doc, s, &err));
    for (v = &doc.root; v->type == ACCEL_V_LIST; v = &v->u.list.v[0])
        depth++;
    ASSERT_INT_EQ(depth, ACCEL_MAX_DEPTH);
    ASSERT_INT_EQ(v->u.i, 1);
    accel_doc_free(&doc);
    free(s);

    /* ... one more is a located ACCEL_ETOOBIG. */
    s = nested_lists(ACCEL_MAX_DEPTH + 1);
    ASSERT_INT_EQ(parse(&doc, s, &err), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(err.line, 1);
    ASSERT_INT_EQ(err.column, ACCEL_MAX_DEPTH + 1);
    ASSERT_CONTAINS(err.msg, "nesting");
    ASSERT(doc.file == NULL);
    free(s);

    /* Far deeper input stops at the cap too, without deep recursion. */
    s = nested_lists(100000);
    ASSERT_INT_EQ(parse(&doc, s, &err), ACCEL_ETOOBIG);
    free(s);

    /* Block mappings count the same way. */
    {
        struct accel_buf b;
        accel_buf_init(&b, 1u << 20);
        for (int i = 0; i <= ACCEL_MAX_DEPTH; i++)
            ASSERT_OK(accel_buf_printf(&b, "%*sk%d:\n", i, "", i));
        ASSERT_OK(accel_buf_printf(&b, "%*sleaf: 1\n", ACCEL_MAX_DEPTH + 1, ""));
        ASSERT_INT_EQ(parse(&doc, accel_buf_str(&b), &err), ACCEL_ETOOBIG);
        accel_buf_free(&b);
    }
}

TEST(scalar_cap)
{
    struct accel_doc doc;
    struct accel_error err;
    char *big = repeat('x', ACCEL_MAX_SCALAR + 1);
    char *text = malloc(ACCEL_MAX_SCALAR + 64);

    ASSERT(text != NULL);
    /* Exactly the cap is fine, as a value. */
    snprintf(text, ACCEL_MAX_SCALAR + 64, "a: %.*s\n", ACCEL_MAX_SCALAR, big);
    ASSERT_OK(parse(&doc, text, &err));
    ASSERT_INT_EQ(strlen(AT(&doc.root, "a")->u.s), ACCEL_MAX_SCALAR);
    accel_doc_free(&doc);
    /* One byte more: as a value, quoted, and as a key. */
    snprintf(text, ACCEL_MAX_SCALAR + 64, "a: %s\n", big);
    ASSERT_INT_EQ(parse(&doc, text, &err), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(err.line, 1);
    ASSERT_INT_EQ(err.column, 4);
    snprintf(text, ACCEL_MAX_SCALAR + 64, "a: [\"%s\"]\n", big);
    ASSERT_INT_EQ(parse(&doc, text, &err), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(err.column, 5);
    /* An implicit key is capped at 1024 characters by YAML itself (a syntax
     * error in PyYAML and libyaml alike); an explicit "? key" is not. */
    snprintf(text, ACCEL_MAX_SCALAR + 64, "b: 1\n%s: 1\n", big);
    ASSERT_INT_EQ(parse(&doc, text, &err), ACCEL_EPARSE);
    snprintf(text, ACCEL_MAX_SCALAR + 64, "b: 1\n? %s\n: 1\n", big);
    ASSERT_INT_EQ(parse(&doc, text, &err), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(err.line, 2);
    ASSERT_INT_EQ(err.column, 3);
    ASSERT_CONTAINS(err.msg, "key");
    ASSERT(doc.file == NULL);
    free(big);
    free(text);
}

TEST(file_size_cap)
{
    struct accel_doc doc;
    struct accel_error err;
    size_t n = ACCEL_MAX_CONFIG_BYTES + 1;
    char *text = repeat('#', n);

    text[n - 1] = '\n';
    accel_error_clear(&err);
    ASSERT_INT_EQ(accel_doc_parse(&doc, "huge.yaml", text, n, NULL, NULL, &err), ACCEL_ETOOBIG);
    ASSERT_STR_EQ(err.file, "huge.yaml");
    ASSERT_CONTAINS(err.msg, "limit");
    ASSERT(doc.file == NULL);
    /* Exactly the cap parses (a file of comments is None). */
    ASSERT_OK(accel_doc_parse(&doc, "huge.yaml", text + 1, n - 1, NULL, NULL, &err));
    ASSERT_INT_EQ(doc.root.type, ACCEL_V_NULL);
    accel_doc_free(&doc);
    free(text);
}

TEST(node_cap)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_buf b;

    /* ACCEL_MAX_NODES values in one flow list: the list itself is one more. */
    accel_buf_init(&b, ACCEL_MAX_CONFIG_BYTES);
    ASSERT_OK(accel_buf_puts(&b, "["));
    for (int i = 0; i < ACCEL_MAX_NODES; i++)
        ASSERT_OK(accel_buf_puts(&b, "1,"));
    ASSERT_OK(accel_buf_puts(&b, "]\n"));
    ASSERT_INT_EQ(parse(&doc, accel_buf_str(&b), &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg, "values");
    ASSERT(err.line == 1 && err.column > 1);
    accel_buf_reset(&b);
    ASSERT_OK(accel_buf_puts(&b, "["));
    for (int i = 0; i < ACCEL_MAX_NODES - 1; i++)
        ASSERT_OK(accel_buf_puts(&b, "1,"));
    ASSERT_OK(accel_buf_puts(&b, "]\n"));
    ASSERT_OK(parse(&doc, accel_buf_str(&b), &err));
    ASSERT_INT_EQ(doc.root.u.list.n, ACCEL_MAX_NODES - 1);
    accel_doc_free(&doc);
    accel_buf_free(&b);
}

/* ---------------------------------------------------------------- keys, tags */

struct dups {
    int calls;
    char first[64], second[64];
    unsigned first_line, second_line;
};

static void on_dup(void *ctx, const struct accel_pair *first, const struct accel_pair *second)
{
    struct dups *d = ctx;
    struct accel_buf b;

    d->calls++;
    accel_buf_init(&b, 60);
    if (accel_val_pystr(&first->val, &b) == ACCEL_OK)
        snprintf(d->first, sizeof(d->first), "%s=%s", first->key, accel_buf_str(&b));
    accel_buf_reset(&b);
    if (accel_val_pystr(&second->val, &b) == ACCEL_OK)
        snprintf(d->second, sizeof(d->second), "%s=%s", second->key, accel_buf_str(&b));
    accel_buf_free(&b);
    d->first_line = first->mark.line;
    d->second_line = second->mark.line;
}

TEST(duplicate_keys_last_wins)
{
    static const char text[] = "debug: false\n"
                               "num_processes: 2\n"
                               "debug: true\n";
    struct accel_doc doc;
    struct accel_error err;
    struct dups d = {0};
    char s[128];

    accel_error_clear(&err);
    ASSERT_OK(accel_doc_parse(&doc, "d.yaml", text, strlen(text), on_dup, &d, &err));
    ASSERT_INT_EQ(d.calls, 1);
    ASSERT_STR_EQ(d.first, "debug=False");
    ASSERT_STR_EQ(d.second, "debug=True");
    ASSERT_INT_EQ(d.first_line, 1);
    ASSERT_INT_EQ(d.second_line, 3);
    /* PyYAML's dict: the key keeps its first place, the value is the last. */
    ASSERT_INT_EQ(doc.root.u.map.n, 2);
    pystr(&doc.root, s, sizeof(s));
    ASSERT_STR_EQ(s, "{'debug': True, 'num_processes': 2}");
    ASSERT_INT_EQ(accel_map_find(&doc.root, "debug")->mark.line, 3);
    accel_doc_free(&doc);

    /* Without a callback, and with a collection replaced by a scalar. */
    ASSERT_OK(parse(&doc, "a: {x: [1, 2]}\nb: 0\na: 3\na: [4]\n", &err));
    pystr(&doc.root, s, sizeof(s));
    ASSERT_STR_EQ(s, "{'a': [4], 'b': 0}");
    accel_doc_free(&doc);

    /* Quoted and plain spellings of one key are one key. */
    memset(&d, 0, sizeof(d));
    ASSERT_OK(accel_doc_parse(&doc, "d.yaml", "a: 1\n'a': 2\n\"a\": 3\n", 19, on_dup, &d, &err));
    ASSERT_INT_EQ(d.calls, 2);
    ASSERT_INT_EQ(AT(&doc.root, "a")->u.i, 3);
    accel_doc_free(&doc);
}

TEST(tags)
{
    struct accel_doc doc;
    struct accel_error err;
    char s[256];

    ASSERT_OK(parse(&doc,
                    "a: !!str 1\nb: !!str yes\nc: !!int \"12\"\nd: !!int 0x1f\ne: !!float 2\n"
                    "f: !!bool 'on'\ng: !!null ''\nh: !!str\ni: ! 7\nj: !!map {k: !!seq [v]}\n",
                    &err));
    ASSERT_INT_EQ(AT(&doc.root, "a")->type, ACCEL_V_STR);
    ASSERT_STR_EQ(AT(&doc.root, "a")->u.s, "1");
    ASSERT_STR_EQ(AT(&doc.root, "b")->u.s, "yes");
    ASSERT_INT_EQ(AT(&doc.root, "c")->type, ACCEL_V_INT);
    ASSERT_INT_EQ(AT(&doc.root, "c")->u.i, 12);
    ASSERT_INT_EQ(AT(&doc.root, "d")->u.i, 31);
    ASSERT_INT_EQ(AT(&doc.root, "e")->type, ACCEL_V_FLOAT);
    ASSERT_MARK(AT(&doc.root, "e")->mark, 5, 4);
    ASSERT_INT_EQ(AT(&doc.root, "f")->type, ACCEL_V_BOOL);
    ASSERT_INT_EQ(AT(&doc.root, "g")->type, ACCEL_V_NULL);
    ASSERT_INT_EQ(AT(&doc.root, "h")->type, ACCEL_V_STR);
    ASSERT_STR_EQ(AT(&doc.root, "h")->u.s, "");
    ASSERT_INT_EQ(AT(&doc.root, "i")->type, ACCEL_V_INT);
    pystr(&doc.root, s, sizeof(s));
    ASSERT_STR_EQ(s, "{'a': '1', 'b': 'yes', 'c': 12, 'd': 31, 'e': 2.0, 'f': True, 'g': None, "
                     "'h': '', 'i': 7, 'j': {'k': ['v']}}");
    accel_doc_free(&doc);

    /* A tag its value does not fit, and tags safe_load has no use for. */
    static const char *const bad[] = {"a: !!int 1.5\n",
                                      "a: !!int abc\n",
                                      "a: !!bool 1\n",
                                      "a: !!float x\n",
                                      "a: !!python/object:os.system x\n",
                                      "a: !custom 1\n",
                                      "a: !!set {x}\n",
                                      "a: !!str [1]\n",
                                      "!foo k: 1\n",
                                      "<<: {a: 1}\n",
                                      "a: =\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(&doc, bad[i], &err) != ACCEL_EPARSE)
            test_fail(__FILE__, __LINE__, "%s parsed", bad[i]);
        ASSERT(err.line >= 1);
    }
    ASSERT_INT_EQ(parse(&doc, "a: !!int 1.5\n", &err), ACCEL_EPARSE);
    ASSERT_CONTAINS(err.msg, "tag");
    ASSERT_INT_EQ(err.line, 1);
    ASSERT_INT_EQ(err.column, 4);
}

/* Where PyYAML's pure-Python scanner (what accelerate runs) is stricter than
 * libyaml, the parser must refuse too, at the right place. */
TEST(pyyaml_scanner_rules)
{
    static const struct {
        const char *text;
        unsigned line, col;
        const char *msg;
    } refused[] = {
        {"a:\tb\n", 1, 3, "tab"},
        {"a: 1\t\n", 1, 5, "tab"},
        {"a: b\t# comment\n", 1, 5, "tab"},
        {"a: [1,\t2]\n", 1, 7, "tab"},
        {"x: 'q'\na: \"x\ty\"\t\n", 2, 9, "tab"},
        /* a BOM and a two-byte character before the tab: columns count characters */
        {"\xef\xbb\xbf\xc3\xa9: \"\t\"\nb: c\td\n", 2, 5, "tab"},
        {"a: 1\r\nb:\t2\r\n", 2, 3, "tab"},
        {"v: [a?b]\n", 1, 6, "'?'"},
        {"v: {k: c?d}\n", 1, 9, "'?'"},
        {"{a?b: 1}\n", 1, 3, "'?'"},
        {"[\xc3\xa9\xc3\xa9?]\n", 1, 4, "'?'"},
        {"{!!int k: 1}\n", 1, 2, "tag"},
        {"!!bool k: 1\n", 1, 1, "tag"},
        {"\xff\xfe" "a", 1, 1, "UTF-16"},
        {"\xfe\xff" "a", 1, 1, "UTF-16"},
    };
    static const char *const accepted[] = {
        "a: 1 # a tab\there\n",
        "a: 'x\ty'\nb: \"\tz\"\n",
        "a: |\n  in\tblock\n",
        "# \t\na: 1\n",
        "v: a?b\n",
        "v: [? a]\n",
        "=: 1\n",
        "v: !!null anything\n",
        "v: !!bool yEs\n",
    };
    struct accel_doc doc;
    struct accel_error err;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        enum accel_err rc = parse(&doc, refused[i].text, &err);
        if (rc != ACCEL_EPARSE)
            test_fail(__FILE__, __LINE__, "case %zu: got %s, want ACCEL_EPARSE", i,
                      accel_errname(rc));
        if (err.line != refused[i].line || err.column != refused[i].col)
            test_fail(__FILE__, __LINE__, "case %zu: at %u:%u, want %u:%u (%s)", i, err.line,
                      err.column, refused[i].line, refused[i].col, err.msg);
        ASSERT_CONTAINS(err.msg, refused[i].msg);
        ASSERT(doc.file == NULL);
    }
    for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
        if (parse(&doc, accepted[i], &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "accepted case %zu refused: %s", i, err.msg);
        accel_doc_free(&doc);
    }
    ASSERT_OK(parse(&doc, "=: 1\nv: !!bool OFF\n", &err));
    ASSERT(accel_map_find(&doc.root, "=") != NULL);
    ASSERT_INT_EQ(AT(&doc.root, "v")->type, ACCEL_V_BOOL);
    ASSERT(!AT(&doc.root, "v")->u.b);
    accel_doc_free(&doc);
}

/* ---------------------------------------------------------------- values */

TEST(equal_follows_python)
{
    struct accel_val one = {.type = ACCEL_V_INT, .u.i = 1};
    struct accel_val onef = {.type = ACCEL_V_FLOAT, .u.f = 1.0};
    struct accel_val yes = {.type = ACCEL_V_BOOL, .u.b = true};
    struct accel_val zero = {.type = ACCEL_V_INT, .u.i = 0};
    struct accel_val no = {.type = ACCEL_V_BOOL, .u.b = false};
    struct accel_val half = {.type = ACCEL_V_FLOAT, .u.f = 0.5};
    struct accel_val nan = {.type = ACCEL_V_FLOAT, .u.f = NAN};
    struct accel_val none = {.type = ACCEL_V_NULL};
    struct accel_val big = {.type = ACCEL_V_INT, .u.i = (1LL << 53) + 1};
    struct accel_val bigf = {.type = ACCEL_V_FLOAT, .u.f = 9007199254740992.0};
    struct accel_val maxi = {.type = ACCEL_V_INT, .u.i = 9223372036854775807LL};
    struct accel_val two63 = {.type = ACCEL_V_FLOAT, .u.f = 9223372036854775808.0};
    struct accel_val s1 = {.type = ACCEL_V_STR, .u.s = (char *)"1"};
    struct accel_val strue = {.type = ACCEL_V_STR, .u.s = (char *)"True"};

    ASSERT(accel_val_equal(&one, &onef));
    ASSERT(accel_val_equal(&onef, &one));
    ASSERT(accel_val_equal(&one, &yes));
    ASSERT(accel_val_equal(&yes, &onef));
    ASSERT(accel_val_equal(&zero, &no));
    ASSERT(!accel_val_equal(&one, &no));
    ASSERT(!accel_val_equal(&half, &one));
    ASSERT(!accel_val_equal(&nan, &nan)); /* nan != nan */
    ASSERT(accel_val_equal(&none, &none));
    ASSERT(!accel_val_equal(&none, &zero));
    ASSERT(!accel_val_equal(&none, &no));
    ASSERT(!accel_val_equal(&s1, &one)); /* '1' != 1 */
    ASSERT(!accel_val_equal(&strue, &yes));
    /* Python compares int and float exactly. */
    ASSERT(!accel_val_equal(&big, &bigf));
    ASSERT(!accel_val_equal(&bigf, &big));
    ASSERT(!accel_val_equal(&maxi, &two63));
    bigf.u.f = 9007199254740994.0;
    big.u.i = 9007199254740994LL;
    ASSERT(accel_val_equal(&big, &bigf));

    /* Collections: lists in order, maps as sets of pairs. */
    {
        struct accel_doc a, b;
        struct accel_error err;
        ASSERT_OK(parse(&a, "{x: [1, 2.0, yes], y: {z: ~}}\n", &err));
        ASSERT_OK(parse(&b, "y: {z: null}\nx: [1.0, 2, 1]\n", &err));
        ASSERT(accel_val_equal(&a.root, &b.root));
        accel_doc_free(&b);
        ASSERT_OK(parse(&b, "y: {z: null}\nx: [1.0, 1, 2]\n", &err));
        ASSERT(!accel_val_equal(&a.root, &b.root));
        accel_doc_free(&b);
        ASSERT_OK(parse(&b, "y: {z: null}\nx: [1, 2, yes]\nw: 1\n", &err));
        ASSERT(!accel_val_equal(&a.root, &b.root));
        ASSERT(!accel_val_equal(&b.root, &a.root));
        accel_doc_free(&b);
        ASSERT_OK(parse(&b, "[1, 2]\n", &err));
        ASSERT(!accel_val_equal(&a.root, &b.root));
        accel_doc_free(&b);
        accel_doc_free(&a);
    }
}

TEST(copy_is_deep)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_val copy;
    char s1[512], s2[512];
    long live;

    test_alloc_install();
    live = test_alloc_live();
    ASSERT_OK(parse(&doc, "a: [1, 'x', {b: 2.5, c: [no, ~]}]\nd: text\ne: {}\nf: []\n", &err));
    ASSERT_OK(accel_val_copy(&copy, &doc.root));
    ASSERT(accel_val_equal(&copy, &doc.root));
    pystr(&doc.root, s1, sizeof(s1));
    pystr(&copy, s2, sizeof(s2));
    ASSERT_STR_EQ(s1, s2);
    /* Marks come along; strings do not alias. */
    ASSERT_MARK(AT(&copy, "d")->mark, 2, 4);
    ASSERT(AT(&copy, "d")->u.s != AT(&doc.root, "d")->u.s);
    ASSERT(accel_map_find(&copy, "d")->key != accel_map_find(&doc.root, "d")->key);
    ASSERT(AT(&copy, "a", "#1")->quoted);
    /* The copy outlives its source's tree (not its file name). */
    accel_val_free(&doc.root);
    pystr(&copy, s2, sizeof(s2));
    ASSERT_STR_EQ(s1, s2);
    accel_val_free(&copy);
    ASSERT_INT_EQ(copy.type, ACCEL_V_NULL);
    accel_val_free(&copy);
    accel_doc_free(&doc);
    ASSERT_INT_EQ(test_alloc_live(), live);
}

TEST(copy_out_of_memory)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_val copy;
    unsigned long total;
    long live;

    test_alloc_install();
    ASSERT_OK(parse(&doc, "a: [1, 'x', {b: 2.5, c: [no, ~, s]}]\nd: text\ne: {}\nf: []\n", &err));
    live = test_alloc_live();
    test_alloc_fail_at(0);
    ASSERT_OK(accel_val_copy(&copy, &doc.root));
    total = test_alloc_count();
    accel_val_free(&copy);
    ASSERT(total > 5);
    for (unsigned long n = 1; n <= total; n++) {
        test_alloc_fail_at(n);
        ASSERT_INT_EQ(accel_val_copy(&copy, &doc.root), ACCEL_ENOMEM);
        ASSERT_INT_EQ(copy.type, ACCEL_V_NULL);
        ASSERT_INT_EQ(test_alloc_live(), live);
    }
    test_alloc_fail_at(0);
    accel_doc_free(&doc);
}

TEST(truthiness)
{
    struct accel_doc doc;
    struct accel_error err;

    ASSERT_OK(parse(&doc,
                    "f: [~, no, 0, 0.0, -0.0, '', [], {}, 0x0, 0_0]\n"
                    "t: [yes, 1, -1, 0.5, .nan, .inf, ' ', '0', 'no', 'False', [0], {a: ~}, x]\n",
                    &err));
    for (size_t i = 0; i < AT(&doc.root, "f")->u.list.n; i++)
        if (accel_val_truthy(&AT(&doc.root, "f")->u.list.v[i]))
            test_fail(__FILE__, __LINE__, "f[%zu] is truthy", i);
    for (size_t i = 0; i < AT(&doc.root, "t")->u.list.n; i++)
        if (!accel_val_truthy(&AT(&doc.root, "t")->u.list.v[i]))
            test_fail(__FILE__, __LINE__, "t[%zu] is falsy", i);
    ASSERT_INT_EQ(AT(&doc.root, "f")->u.list.n, 10);
    accel_doc_free(&doc);
}

TEST(map_find_and_type_names)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_val s = {.type = ACCEL_V_STR, .u.s = (char *)"x"};

    ASSERT_OK(parse(&doc, "a: 1\nb: 2\n", &err));
    ASSERT(accel_map_find(&doc.root, "b") == &doc.root.u.map.v[1]);
    ASSERT(accel_map_find(&doc.root, "c") == NULL);
    ASSERT(accel_map_find(&s, "a") == NULL);
    ASSERT(accel_map_find(NULL, "a") == NULL);
    accel_doc_free(&doc);
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_NULL), "null");
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_BOOL), "boolean");
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_INT), "integer");
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_FLOAT), "float");
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_STR), "string");
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_LIST), "list");
    ASSERT_STR_EQ(accel_vtype_name(ACCEL_V_MAP), "mapping");
}

TEST(pystr_cap)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_buf b;

    ASSERT_OK(parse(&doc, "a: [aaaaaaaaaa, bbbbbbbbbb, cccccccccc]\n", &err));
    accel_buf_init(&b, 16);
    ASSERT_INT_EQ(accel_val_pystr(&doc.root, &b), ACCEL_ETOOBIG);
    ASSERT(b.len <= 16);
    accel_buf_free(&b);
    accel_doc_free(&doc);
}

/* ---------------------------------------------------------------- files */

TEST(load_errors)
{
    struct accel_doc doc;
    struct accel_error err;

    accel_error_clear(&err);
    ASSERT_INT_EQ(accel_doc_load(&doc, "/nonexistent/accelrun/x.yaml", NULL, NULL, &err),
                  ACCEL_ENOTFOUND);
    ASSERT_STR_EQ(err.file, "/nonexistent/accelrun/x.yaml");
    ASSERT(doc.file == NULL);
    accel_doc_free(&doc);
    ASSERT_INT_EQ(accel_doc_load(&doc, "/", NULL, NULL, &err), ACCEL_EINVAL);
}

static int count_dups(const char *path)
{
    struct accel_doc doc;
    struct accel_error err;
    struct dups d = {0};

    accel_error_clear(&err);
    if (accel_doc_load(&doc, path, on_dup, &d, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
    accel_doc_free(&doc);
    return d.calls;
}

TEST(corpus_configs_parse)
{
    char dir[4096], path[8192];
    struct dirent *e;
    DIR *d;
    int n = 0;

    snprintf(dir, sizeof(dir), "%s/accelerate-configs", test_corpus_dir());
    d = opendir(dir);
    if (d == NULL)
        SKIP("the shared corpus is not there (set ACCEL_SHARED)");
    while ((e = readdir(d)) != NULL) {
        struct accel_doc doc;
        struct accel_error err;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        accel_error_clear(&err);
        if (accel_doc_load(&doc, path, NULL, NULL, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "%s: %s (%u:%u)", path, err.msg, err.line, err.column);
        if (doc.root.type != ACCEL_V_MAP || doc.root.u.map.n == 0)
            test_fail(__FILE__, __LINE__, "%s: root is not a non-empty mapping", path);
        ASSERT(accel_map_find(&doc.root, "distributed_type") != NULL);
        ASSERT_STR_EQ(doc.file, path);
        accel_doc_free(&doc);
        n++;
    }
    closedir(d);
    ASSERT_INT_EQ(n, 16);
}

TEST(corpus_sagemaker_no_and_duplicate)
{
    char path[4200];
    struct accel_doc doc;
    struct accel_error err;
    const struct accel_val *v;

    snprintf(path, sizeof(path), "%s/accelerate-configs/test_configs__0_30_0_sagemaker.yaml",
             test_corpus_dir());
    accel_error_clear(&err);
    if (accel_doc_load(&doc, path, NULL, NULL, &err) == ACCEL_ENOTFOUND)
        SKIP("the shared corpus is not there (set ACCEL_SHARED)");
    /* Unquoted NO is YAML 1.1 false, as accelerate itself reads it. */
    v = AT(&doc.root, "distributed_type");
    ASSERT_INT_EQ(v->type, ACCEL_V_BOOL);
    ASSERT(!v->u.b);
    ASSERT(!v->quoted);
    ASSERT_MARK(v->mark, 3, 19);
    ASSERT_INT_EQ(AT(&doc.root, "debug")->type, ACCEL_V_BOOL);
    ASSERT_INT_EQ(doc.root.u.map.n, 7);
    accel_doc_free(&doc);
    ASSERT_INT_EQ(count_dups(path), 1);
}

TEST(corpus_fsdp_template)
{
    char path[4200];
    struct accel_doc doc;
    struct accel_error err;

    snprintf(path, sizeof(path), "%s/accelerate-configs/templates__fsdp.yaml", test_corpus_dir());
    accel_error_clear(&err);
    if (accel_doc_load(&doc, path, NULL, NULL, &err) == ACCEL_ENOTFOUND)
        SKIP("the shared corpus is not there (set ACCEL_SHARED)");
    ASSERT_STR_EQ(AT(&doc.root, "distributed_type")->u.s, "FSDP");
    ASSERT_STR_EQ(AT(&doc.root, "mixed_precision")->u.s, "bf16");
    ASSERT(AT(&doc.root, "mixed_precision")->quoted);
    ASSERT_INT_EQ(AT(&doc.root, "num_processes")->u.i, 2);
    ASSERT_INT_EQ(AT(&doc.root, "fsdp_config")->u.map.n, 10);
    ASSERT(AT(&doc.root, "fsdp_config", "fsdp_use_orig_params")->u.b);
    ASSERT_MARK(accel_map_find(&doc.root, "fsdp_config")->mark, 8, 1);
    ASSERT_MARK(AT(&doc.root, "fsdp_config", "fsdp_activation_checkpointing")->mark, 9, 34);
    accel_doc_free(&doc);
    ASSERT_INT_EQ(count_dups(path), 0);
}

/* ---------------------------------------------------------------- torture */

/* Fails each allocation of one full parse in turn: every run must end in
 * ACCEL_ENOMEM (or succeed, for an allocation whose failure is absorbed),
 * leave the doc empty, and free everything it took. */
static void torture(const char *file, const char *data, size_t len)
{
    struct accel_doc doc;
    struct accel_error err;
    unsigned long total, enomem = 0;
    long live;

    test_alloc_install();
    live = test_alloc_live();
    test_alloc_fail_at(0);
    ASSERT_OK(accel_doc_parse(&doc, file, data, len, NULL, NULL, &err));
    total = test_alloc_count();
    accel_doc_free(&doc);
    ASSERT_INT_EQ(test_alloc_live(), live);
    ASSERT(total > 10);
    for (unsigned long n = 1; n <= total; n++) {
        enum accel_err rc;

        test_alloc_fail_at(n);
        accel_error_clear(&err);
        rc = accel_doc_parse(&doc, file, data, len, NULL, NULL, &err);
        if (rc == ACCEL_ENOMEM) {
            enomem++;
            ASSERT_INT_EQ(err.code, ACCEL_ENOMEM);
            ASSERT(doc.file == NULL);
            ASSERT_INT_EQ(doc.root.type, ACCEL_V_NULL);
        } else if (rc != ACCEL_OK) {
            test_fail(__FILE__, __LINE__, "allocation %lu of %lu failed: got %s (%s)", n, total,
                      accel_errname(rc), err.msg);
        }
        accel_doc_free(&doc);
        if (test_alloc_live() != live)
            test_fail(__FILE__, __LINE__, "allocation %lu of %lu failed: %ld blocks leaked", n,
                      total, test_alloc_live() - live);
    }
    test_alloc_fail_at(0);
    test_note("%s: %lu allocations, each failed once: %lu ENOMEM", file, total, enomem);
    ASSERT_INT_EQ(enomem, total);
}

TEST(alloc_failure_torture_fsdp)
{
    char path[4200];
    char *data;
    size_t len;
    struct accel_error err;

    snprintf(path, sizeof(path), "%s/accelerate-configs/templates__fsdp.yaml", test_corpus_dir());
    accel_error_clear(&err);
    if (accel_read_file(path, ACCEL_MAX_CONFIG_BYTES, &data, &len, &err) == ACCEL_ENOTFOUND)
        SKIP("the shared corpus is not there (set ACCEL_SHARED)");
    torture(path, data, len);
    accel_alloc_set(NULL);
    free(data); /* read with libc hooks before the counting allocator was installed */
}

TEST(alloc_failure_torture_shapes)
{
    /* Lists that grow past their first allocation, duplicate keys, tags,
     * nested flow collections and a !!float that needs a copy. */
    static const char text[] =
        "a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]\n"
        "b: {c: [x, {d: e}], f: !!float 010, g: ! 12}\n"
        "a: {k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7, k8: 8, k9: 9, k10: 10}\n"
        "h: 'quoted'\n"
        "i: 0.000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000000000000001\n";

    torture("shapes.yaml", text, sizeof(text) - 1);
}

TEST_LIST(T(nested_marks), T(json_input), T(root_shapes), T(syntax_errors_are_located),
          T(second_document_is_refused), T(anchors_and_aliases_are_refused), T(depth_cap),
          T(scalar_cap), T(file_size_cap), T(node_cap), T(duplicate_keys_last_wins), T(tags),
          T(pyyaml_scanner_rules),
          T(equal_follows_python), T(copy_is_deep), T(copy_out_of_memory), T(truthiness),
          T(map_find_and_type_names), T(pystr_cap), T(load_errors), T(corpus_configs_parse),
          T(corpus_sagemaker_no_and_duplicate), T(corpus_fsdp_template),
          T(alloc_failure_torture_fsdp), T(alloc_failure_torture_shapes))
