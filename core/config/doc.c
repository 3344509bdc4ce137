/*
 * doc.c: libyaml events -> struct accel_val tree, with PyYAML's meaning.
 *
 * What it does: one document per file, scalars resolved as PyYAML's
 * SafeLoader resolves them (scalar.c), duplicate keys kept last-wins and
 * reported, a located error for every syntax problem and every cap.  Where
 * PyYAML's pure-Python scanner (what accelerate runs) refuses input libyaml
 * takes, so does this: a tab outside quotes, block scalars and comments, a
 * '?' inside a plain scalar in [...] or {...}, UTF-16 input, a plain = or <<
 * value (tests/golden/scalars.tsv holds PyYAML's answers).
 * What it does not: anchors and aliases (refused), merge keys (refused),
 * complex keys (refused), tags other than the core !!str/!!int/!!float/
 * !!bool/!!null/!!seq/!!map (refused).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "accel/value.h"

struct loader {
    yaml_parser_t parser;
    const char *file;
    size_t nodes;
    int flow; /* > 0 inside a [...] or {...} collection */
    accel_dup_cb dup_cb;
    void *dup_ctx;
    struct accel_error *err;
};

static enum accel_err located(struct loader *ld, enum accel_err code, yaml_mark_t m,
                              const char *key, const char *fmt, ...) ACCEL_PRINTF(5, 6);

static enum accel_err located(struct loader *ld, enum accel_err code, yaml_mark_t m,
                              const char *key, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    accel_error_set(ld->err, code, "%s", msg);
    accel_error_at(ld->err, ld->file, (unsigned)m.line + 1, (unsigned)m.column + 1, key);
    return code;
}

static enum accel_err next_event(struct loader *ld, yaml_event_t *ev)
{
    if (yaml_parser_parse(&ld->parser, ev))
        return ACCEL_OK;
    if (ld->parser.error == YAML_MEMORY_ERROR)
        return accel_error_set(ld->err, ACCEL_ENOMEM, "%s: out of memory parsing the YAML",
                               ld->file);
    {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s%s%s",
                 ld->parser.problem ? ld->parser.problem : "syntax error",
                 ld->parser.context ? " " : "", ld->parser.context ? ld->parser.context : "");
        return located(ld, ACCEL_EPARSE, ld->parser.problem_mark, NULL, "YAML syntax error: %s",
                       msg);
    }
}

static struct accel_mark mark_of(const struct loader *ld, yaml_mark_t m)
{
    struct accel_mark mk = {ld->file, (unsigned)m.line + 1, (unsigned)m.column + 1};
    return mk;
}

/* The scalar tags a config may carry; PyYAML's other tags build types a config
 * never needs (sets, bytes, dates) or are refused by safe_load itself. */
static const char *const core_tags[] = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                                        "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"};

/* Implicit resolution, as PyYAML does for an untagged plain scalar or any
 * scalar tagged "!".  `=` and `<<` resolve to the value and merge tags, which
 * safe_load has no constructor for (merge keys are refused in
 * build_mapping). */
static enum accel_err resolve_implicit(struct loader *ld, const yaml_event_t *ev,
                                       struct accel_val *out)
{
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;

    if ((len == 1 && text[0] == '=') || (len == 2 && memcmp(text, "<<", 2) == 0))
        return located(ld, ACCEL_EPARSE, ev->start_mark, NULL,
                       "PyYAML cannot load a plain %.*s; quote it", (int)len, text);
    return accel_scalar_resolve(text, len, out);
}

/* !!float on text that resolves to an int: PyYAML calls float() on the text,
 * so 010 is 10.0 (not 8.0), 1:30 is 90.0 and 0x10 is an error.  Appending a
 * dot gives text of the float pattern with exactly that meaning, and leaves
 * hex and binary text a string. */
static enum accel_err int_text_as_float(const char *text, size_t len, struct accel_val *out)
{
    char *tmp = accel_malloc(len + 2);
    enum accel_err rc;

    if (tmp == NULL)
        return ACCEL_ENOMEM;
    memcpy(tmp, text, len);
    tmp[len] = '.';
    tmp[len + 1] = '\0';
    rc = accel_scalar_resolve(tmp, len + 1, out);
    accel_free(tmp);
    return rc;
}

/* Compares n bytes, ignoring ASCII letter case (not the locale's). */
static bool ascii_caseeq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (char)(y - 'A' + 'a');
        if (x != y)
            return false;
    }
    return true;
}

/* !!bool as PyYAML's construct_yaml_bool reads it: yes/no/true/false/on/off
 * in any letter case (yEs too, which the implicit resolver leaves a string). */
static bool tagged_bool(const char *text, size_t len, struct accel_val *out)
{
    static const char *const words[] = {"yes", "true", "on", "no", "false", "off"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i]) == len && ascii_caseeq(words[i], text, len)) {
            out->type = ACCEL_V_BOOL;
            out->u.b = i < 3;
            return true;
        }
    }
    return false;
}

/* Builds a scalar honouring quoting and the core schema tags. */
static enum accel_err build_scalar(struct loader *ld, const yaml_event_t *ev, struct accel_val *out)
{
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    enum accel_err rc;

    if (len > ACCEL_MAX_SCALAR)
        return located(ld, ACCEL_ETOOBIG, ev->start_mark, NULL,
                       "a scalar is longer than %d bytes; shorten it", ACCEL_MAX_SCALAR);
    out->mark = mark_of(ld, ev->start_mark);
    if (plain && ld->flow > 0 && memchr(text, '?', len) != NULL) {
        /* Point at the '?' itself when the scalar is on one line (its text is
         * then the source text): columns count characters, not bytes. */
        yaml_mark_t m = ev->start_mark;
        const char *q = memchr(text, '?', len);
        if (ev->start_mark.line == ev->end_mark.line)
            for (const char *c = text; c < q; c++)
                m.column += (*c & 0xc0) != 0x80;
        return located(ld, ACCEL_EPARSE, m, NULL, "%s",
                       "PyYAML ends an unquoted value at '?' inside [...] or {...}; quote it");
    }
    if (tag != NULL && strcmp(tag, "!") != 0) {
        if (strcmp(tag, "tag:yaml.org,2002:str") == 0)
            goto string;
        if (strcmp(tag, "tag:yaml.org,2002:null") == 0) {
            /* PyYAML's construct_yaml_null ignores the text: !!null x is None. */
            out->type = ACCEL_V_NULL;
            return ACCEL_OK;
        }
        if (strcmp(tag, "tag:yaml.org,2002:bool") == 0 && tagged_bool(text, len, out))
            return ACCEL_OK;
        for (size_t i = 0; i < sizeof(core_tags) / sizeof(core_tags[0]); i++) {
            if (strcmp(tag, core_tags[i]) != 0)
                continue;
            rc = accel_scalar_resolve(text, len, out);
            if (rc == ACCEL_OK && i == 1 && out->type == ACCEL_V_INT)
                rc = int_text_as_float(text, len, out);
            if (rc != ACCEL_OK)
                return rc;
            if ((i == 0 && out->type != ACCEL_V_INT) || (i == 1 && out->type != ACCEL_V_FLOAT) ||
                (i == 2 && out->type != ACCEL_V_BOOL) || (i == 3 && out->type != ACCEL_V_NULL)) {
                accel_val_free(out);
                return located(ld, ACCEL_EPARSE, ev->start_mark, NULL,
                               "the value does not match its tag %s", tag);
            }
            out->mark = mark_of(ld, ev->start_mark);
            return ACCEL_OK;
        }
        return located(ld, ACCEL_EPARSE, ev->start_mark, NULL,
                       "unsupported YAML tag %s; remove the tag", tag);
    }
    /* PyYAML resolves an untagged plain scalar, and any scalar tagged with
     * the non-specific "!", by its text: ! '12' is the int 12. */
    if (plain || tag != NULL) {
        rc = resolve_implicit(ld, ev, out);
        out->mark = mark_of(ld, ev->start_mark);
        return rc;
    }
string:
    out->type = ACCEL_V_STR;
    out->quoted = true;
    out->u.s = accel_strndup(text, len);
    if (out->u.s == NULL) {
        out->type = ACCEL_V_NULL;
        return ACCEL_ENOMEM;
    }
    return ACCEL_OK;
}

/* A collection's tag must be absent, "!" or the core tag of its kind
 * (!!seq, !!map); PyYAML's !!set, !!omap and !!pairs build sets and tuples,
 * and every other tag fails in safe_load. */
static enum accel_err check_collection_tag(struct loader *ld, const yaml_event_t *ev)
{
    bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
    const char *tag =
        (const char *)(seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag);

    if (tag == NULL || strcmp(tag, "!") == 0 ||
        strcmp(tag, seq ? "tag:yaml.org,2002:seq" : "tag:yaml.org,2002:map") == 0)
        return ACCEL_OK;
    return located(ld, ACCEL_EPARSE, ev->start_mark, NULL,
                   "unsupported YAML tag %s on a %s; remove the tag", tag,
                   seq ? "list" : "mapping");
}

static enum accel_err build_node(struct loader *ld, yaml_event_t *ev, int depth,
                                 struct accel_val *out);

static enum accel_err grow(void **arr, size_t *cap, size_t n, size_t size)
{
    void *p;
    size_t nc;

    if (n < *cap)
        return ACCEL_OK;
    nc = *cap ? *cap * 2 : 8;
    p = accel_realloc(*arr, nc * size);
    if (p == NULL)
        return ACCEL_ENOMEM;
    *arr = p;
    *cap = nc;
    return ACCEL_OK;
}

static enum accel_err build_sequence(struct loader *ld, int depth, struct accel_val *out)
{
    size_t cap = 0;
    enum accel_err rc;

    out->type = ACCEL_V_LIST;
    out->u.list.v = NULL;
    out->u.list.n = 0;
    for (;;) {
        yaml_event_t ev;
        rc = next_event(ld, &ev);
        if (rc != ACCEL_OK)
            return rc;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return ACCEL_OK;
        }
        rc = grow((void **)&out->u.list.v, &cap, out->u.list.n, sizeof(struct accel_val));
        if (rc == ACCEL_OK) {
            memset(&out->u.list.v[out->u.list.n], 0, sizeof(struct accel_val));
            rc = build_node(ld, &ev, depth + 1, &out->u.list.v[out->u.list.n]);
            if (rc == ACCEL_OK)
                out->u.list.n++;
        }
        yaml_event_delete(&ev);
        if (rc != ACCEL_OK)
            return rc;
    }
}

static enum accel_err build_mapping(struct loader *ld, int depth, struct accel_val *out)
{
    size_t cap = 0;
    enum accel_err rc;

    out->type = ACCEL_V_MAP;
    out->u.map.v = NULL;
    out->u.map.n = 0;
    for (;;) {
        yaml_event_t kev, vev;
        struct accel_pair pair;
        struct accel_pair *dup;

        rc = next_event(ld, &kev);
        if (rc != ACCEL_OK)
            return rc;
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            return ACCEL_OK;
        }
        if (kev.type != YAML_SCALAR_EVENT) {
            rc = located(ld, ACCEL_EPARSE, kev.start_mark, NULL, "%s",
                         kev.type == YAML_ALIAS_EVENT
                             ? "YAML aliases are not supported; write the value out"
                             : "a key must be a plain word, not a list or mapping");
            yaml_event_delete(&kev);
            return rc;
        }
        if (kev.data.scalar.anchor != NULL) {
            rc = located(ld, ACCEL_EPARSE, kev.start_mark, NULL, "%s",
                         "YAML anchors are not supported; remove the &anchor");
            yaml_event_delete(&kev);
            return rc;
        }
        if (kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && kev.data.scalar.tag == NULL &&
            kev.data.scalar.length == 2 && memcmp(kev.data.scalar.value, "<<", 2) == 0) {
            /* PyYAML merges the value into this mapping; accelerate configs
             * never need that, so say so rather than keep a key "<<". */
            rc = located(ld, ACCEL_EPARSE, kev.start_mark, NULL, "%s",
                         "YAML merge keys (<<) are not supported; write the keys out");
            yaml_event_delete(&kev);
            return rc;
        }
        if (kev.data.scalar.length > ACCEL_MAX_SCALAR) {
            rc = located(ld, ACCEL_ETOOBIG, kev.start_mark, NULL, "a key is longer than %d bytes",
                         ACCEL_MAX_SCALAR);
            yaml_event_delete(&kev);
            return rc;
        }
        /* The key keeps its text, but PyYAML constructs it first: a tag it
         * does not fit or a '?' inside {...} fails there as in a value.  (A
         * plain = is no error as a key: PyYAML's flatten_mapping makes it the
         * string "=".) */
        if (kev.data.scalar.tag != NULL ||
            (ld->flow > 0 && kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
             !(kev.data.scalar.length == 1 && kev.data.scalar.value[0] == '='))) {
            struct accel_val kv;
            memset(&kv, 0, sizeof(kv));
            rc = build_scalar(ld, &kev, &kv);
            accel_val_free(&kv);
            if (rc != ACCEL_OK) {
                yaml_event_delete(&kev);
                return rc;
            }
        }
        memset(&pair, 0, sizeof(pair));
        pair.mark = mark_of(ld, kev.start_mark);
        pair.key = accel_strndup((const char *)kev.data.scalar.value, kev.data.scalar.length);
        yaml_event_delete(&kev);
        if (pair.key == NULL)
            return ACCEL_ENOMEM;
        rc = next_event(ld, &vev);
        if (rc != ACCEL_OK) {
            accel_free(pair.key);
            return rc;
        }
        rc = build_node(ld, &vev, depth + 1, &pair.val);
        yaml_event_delete(&vev);
        if (rc != ACCEL_OK) {
            accel_free(pair.key);
            return rc;
        }
        dup = accel_map_find(out, pair.key);
        if (dup != NULL) {
            /* PyYAML keeps the last value of a repeated key. */
            if (ld->dup_cb)
                ld->dup_cb(ld->dup_ctx, dup, &pair);
            accel_val_free(&dup->val);
            dup->val = pair.val;
            dup->mark = pair.mark;
            accel_free(pair.key);
            continue;
        }
        rc = grow((void **)&out->u.map.v, &cap, out->u.map.n, sizeof(struct accel_pair));
        if (rc != ACCEL_OK) {
            accel_free(pair.key);
            accel_val_free(&pair.val);
            return rc;
        }
        out->u.map.v[out->u.map.n++] = pair;
    }
}

static enum accel_err build_node(struct loader *ld, yaml_event_t *ev, int depth,
                                 struct accel_val *out)
{
    memset(out, 0, sizeof(*out));
    if (++ld->nodes > ACCEL_MAX_NODES)
        return located(ld, ACCEL_ETOOBIG, ev->start_mark, NULL,
                       "the document has more than %d values", ACCEL_MAX_NODES);
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        if (ev->data.scalar.anchor != NULL)
            return located(ld, ACCEL_EPARSE, ev->start_mark, NULL, "%s",
                           "YAML anchors are not supported; remove the &anchor");
        return build_scalar(ld, ev, out);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if ((ev->type == YAML_SEQUENCE_START_EVENT ? ev->data.sequence_start.anchor
                                                   : ev->data.mapping_start.anchor) != NULL)
            return located(ld, ACCEL_EPARSE, ev->start_mark, NULL, "%s",
                           "YAML anchors are not supported; remove the &anchor");
        if (depth >= ACCEL_MAX_DEPTH)
            return located(ld, ACCEL_ETOOBIG, ev->start_mark, NULL,
                           "nesting is deeper than %d levels", ACCEL_MAX_DEPTH);
        if (check_collection_tag(ld, ev) != ACCEL_OK)
            return ACCEL_EPARSE;
        out->mark = mark_of(ld, ev->start_mark);
        {
            bool flow = ev->type == YAML_SEQUENCE_START_EVENT
                            ? ev->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                            : ev->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
            enum accel_err rc;

            ld->flow += flow;
            rc = ev->type == YAML_SEQUENCE_START_EVENT ? build_sequence(ld, depth, out)
                                                       : build_mapping(ld, depth, out);
            ld->flow -= flow;
            if (rc != ACCEL_OK)
                accel_val_free(out);
            return rc;
        }
    case YAML_ALIAS_EVENT:
        return located(ld, ACCEL_EPARSE, ev->start_mark, NULL, "%s",
                       "YAML aliases are not supported; write the value out");
    case YAML_NO_EVENT:
    case YAML_STREAM_START_EVENT:
    case YAML_STREAM_END_EVENT:
    case YAML_DOCUMENT_START_EVENT:
    case YAML_DOCUMENT_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        break;
    }
    return located(ld, ACCEL_EPARSE, ev->start_mark, NULL, "%s", "unexpected YAML event");
}

/* Reads events up to the next one that is not stream/document framing. */
static enum accel_err expect(struct loader *ld, yaml_event_type_t type)
{
    yaml_event_t ev;
    enum accel_err rc = next_event(ld, &ev);

    if (rc != ACCEL_OK)
        return rc;
    if (ev.type != type) {
        rc = located(ld, ACCEL_EPARSE, ev.start_mark, NULL, "%s",
                     type == YAML_STREAM_END_EVENT
                         ? "the file holds more than one YAML document; keep one"
                         : "unexpected YAML structure");
    }
    yaml_event_delete(&ev);
    return rc;
}

/* A cursor over the raw input that keeps libyaml's position: its character
 * index counts characters, not bytes, and not a leading byte order mark. */
struct tab_walk {
    const unsigned char *p, *end;
    size_t index;        /* libyaml's character index of *p */
    unsigned line, col;  /* 0-based, as libyaml marks */
    bool comment, blank; /* in a comment; previous character was blank */
};

/* Moves the cursor to character index `to`; false (the cursor at the tab) on
 * a tab that is neither `inside` a quoted or block scalar nor in a comment. */
static bool tab_walk_to(struct tab_walk *w, size_t to, bool inside)
{
    while (w->index < to && w->p < w->end) {
        unsigned char c = *w->p;
        size_t n = 1;
        bool brk = c == '\n' || (c == '\r' && (w->p + 1 == w->end || w->p[1] != '\n'));

        if (c == '\t' && !inside && !w->comment)
            return false;
        if (c == '#' && !inside && w->blank)
            w->comment = true;
        if (c >= 0xc0)
            n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if ((size_t)(w->end - w->p) < n)
            n = (size_t)(w->end - w->p);
        /* NEL, LS and PS end a line too. */
        if ((n == 2 && c == 0xc2 && w->p[1] == 0x85) ||
            (n == 3 && c == 0xe2 && w->p[1] == 0x80 && (w->p[2] == 0xa8 || w->p[2] == 0xa9)))
            brk = true;
        w->blank = c == ' ' || c == '\t' || brk || c == '\r';
        w->p += n;
        w->index++;
        w->col++;
        if (brk) {
            w->line++;
            w->col = 0;
            w->comment = false;
        }
    }
    return true;
}

/* PyYAML's scanner, unlike libyaml's, separates tokens with spaces only: to
 * accelerate a tab anywhere but inside a quoted or block scalar or a comment
 * is "found character '\t' that cannot start any token".  Only when the input
 * has a tab, its tokens are scanned again and every other tab refused. */
static enum accel_err check_tabs(struct loader *ld, const char *data, size_t len)
{
    struct tab_walk w = {
        (const unsigned char *)data, (const unsigned char *)data + len, 0, 0, 0, false, true};
    yaml_parser_t scanner;
    enum accel_err rc = ACCEL_OK;
    bool ok = true;

    if (memchr(data, '\t', len) == NULL)
        return ACCEL_OK;
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0)
        w.p += 3;
    if (!yaml_parser_initialize(&scanner))
        return accel_error_set(ld->err, ACCEL_ENOMEM, "%s: out of memory parsing the YAML",
                               ld->file);
    yaml_parser_set_input_string(&scanner, (const unsigned char *)data, len);
    while (ok) {
        yaml_token_t tok;

        if (!yaml_parser_scan(&scanner, &tok)) {
            /* The event parser read this input whole, so only memory can
             * fail here; say what libyaml said if it is something else. */
            if (scanner.error == YAML_MEMORY_ERROR)
                rc = accel_error_set(ld->err, ACCEL_ENOMEM, "%s: out of memory parsing the YAML",
                                     ld->file);
            else
                rc = located(ld, ACCEL_EPARSE, scanner.problem_mark, NULL, "YAML syntax error: %s",
                             scanner.problem ? scanner.problem : "syntax error");
            break;
        }
        if (tok.type == YAML_SCALAR_TOKEN && tok.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
            ok = tab_walk_to(&w, tok.start_mark.index, false) &&
                 tab_walk_to(&w, tok.end_mark.index, true);
        } else if (tok.type == YAML_STREAM_END_TOKEN) {
            ok = tab_walk_to(&w, (size_t)-1, false);
            yaml_token_delete(&tok);
            break;
        }
        yaml_token_delete(&tok);
    }
    yaml_parser_delete(&scanner);
    if (!ok) {
        yaml_mark_t m = {w.index, w.line, w.col};
        rc = located(ld, ACCEL_EPARSE, m, NULL, "%s",
                     "a tab outside quotes: PyYAML (and so accelerate) reads only spaces "
                     "between YAML tokens; use spaces");
    }
    return rc;
}

enum accel_err accel_doc_parse(struct accel_doc *doc, const char *file, const char *data,
                               size_t len, accel_dup_cb dup_cb, void *dup_ctx,
                               struct accel_error *err)
{
    struct loader ld;
    yaml_event_t ev;
    enum accel_err rc;

    memset(doc, 0, sizeof(*doc));
    if (data == NULL && len != 0)
        return accel_error_set(err, ACCEL_EINVAL, "%s: no data", file);
    if (data == NULL)
        data = ""; /* libyaml asserts on a NULL input, even an empty one */
    if (len > ACCEL_MAX_CONFIG_BYTES) {
        accel_error_at(err, file, 0, 0, NULL);
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: %zu bytes; the limit is %u bytes", file,
                               len, ACCEL_MAX_CONFIG_BYTES);
    }
    if (len >= 2 && (memcmp(data, "\xff\xfe", 2) == 0 || memcmp(data, "\xfe\xff", 2) == 0)) {
        /* libyaml would decode UTF-16; accelerate opens the file as UTF-8 and
         * fails on the byte order mark. */
        accel_error_at(err, file, 1, 1, NULL);
        return accel_error_set(err, ACCEL_EPARSE, "%s: UTF-16; save it as UTF-8", file);
    }
    doc->file = accel_strdup(file);
    if (doc->file == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory parsing the YAML", file);
    memset(&ld, 0, sizeof(ld));
    if (!yaml_parser_initialize(&ld.parser)) {
        accel_doc_free(doc);
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory parsing the YAML", file);
    }
    ld.file = doc->file;
    ld.err = err;
    ld.dup_cb = dup_cb;
    ld.dup_ctx = dup_ctx;
    yaml_parser_set_input_string(&ld.parser, (const unsigned char *)data, len);

    rc = expect(&ld, YAML_STREAM_START_EVENT);
    if (rc != ACCEL_OK)
        goto out;
    rc = next_event(&ld, &ev);
    if (rc != ACCEL_OK)
        goto out;
    if (ev.type == YAML_STREAM_END_EVENT) {
        /* An empty file: PyYAML's safe_load returns None. */
        yaml_event_delete(&ev);
        doc->root.type = ACCEL_V_NULL;
        doc->root.mark.file = doc->file;
        rc = check_tabs(&ld, data, len);
        goto out;
    }
    yaml_event_delete(&ev);
    rc = next_event(&ld, &ev);
    if (rc != ACCEL_OK)
        goto out;
    rc = build_node(&ld, &ev, 0, &doc->root);
    yaml_event_delete(&ev);
    if (rc != ACCEL_OK)
        goto out;
    rc = expect(&ld, YAML_DOCUMENT_END_EVENT);
    if (rc == ACCEL_OK)
        rc = expect(&ld, YAML_STREAM_END_EVENT);
    if (rc == ACCEL_OK)
        rc = check_tabs(&ld, data, len);
out:
    yaml_parser_delete(&ld.parser);
    if (rc != ACCEL_OK) {
        if (rc == ACCEL_ENOMEM)
            accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory parsing the YAML", file);
        accel_doc_free(doc);
    }
    return rc;
}

enum accel_err accel_doc_load(struct accel_doc *doc, const char *path, accel_dup_cb dup_cb,
                              void *dup_ctx, struct accel_error *err)
{
    char *data = NULL;
    size_t len = 0;
    enum accel_err rc;

    memset(doc, 0, sizeof(*doc));
    rc = accel_read_file(path, ACCEL_MAX_CONFIG_BYTES, &data, &len, err);
    if (rc != ACCEL_OK) {
        accel_error_at(err, path, 0, 0, NULL);
        return rc;
    }
    rc = accel_doc_parse(doc, path, data, len, dup_cb, dup_ctx, err);
    accel_free(data);
    return rc;
}

void accel_doc_free(struct accel_doc *doc)
{
    if (doc == NULL)
        return;
    accel_val_free(&doc->root);
    accel_free(doc->file);
    doc->file = NULL;
}
