/*
 * review.c: the AdmissionReview envelope, both ways.  Decoding checks the
 * caps before cJSON sees the bytes (size, then nesting in one pass over the
 * raw text), then every string's length with its field path, then the v1
 * envelope: apiVersion, kind, request, request.uid, and whether the request
 * is the CREATE of a v1 Pod.  It does not look inside the Pod (pod.c) nor
 * decide anything (mutate.c).  Encoding builds the response the API server
 * verifies (shared/reference/kubernetes.md §1.3): same apiVersion and kind,
 * the uid echoed, the patch base64 with its patchType.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "webhook.h"

#define REVIEW_VERSION "admission.k8s.io/v1"
#define REVIEW_KIND "AdmissionReview"

int wh_http_status(enum accel_err code)
{
    switch (code) {
    case ACCEL_OK:
        return 200;
    case ACCEL_ETOOBIG:
        return 413;
    case ACCEL_EINVAL:
    case ACCEL_EPARSE:
    case ACCEL_ECONFIG:
        return 400;
    case ACCEL_ENOMEM:
    case ACCEL_EIO:
    case ACCEL_EPOLICY:
    case ACCEL_ENOTFOUND:
    case ACCEL_EPERM:
    case ACCEL_EUNSUPPORTED:
    case ACCEL_ELAYOUT:
    case ACCEL_ETIMEDOUT:
    case ACCEL_EPEER:
    case ACCEL_ENONCE:
    case ACCEL_EBUSY:
    case ACCEL_ENOSPC:
    case ACCEL_ERR__LAST:
        break;
    }
    return 500;
}

/* One pass over the raw bytes: the deepest nesting outside strings.  Stops
 * at the first level past WH_MAX_DEPTH, so cJSON's recursion (and ours in
 * check_strings) stays bounded. */
static enum accel_err check_depth(const char *s, size_t len, struct accel_error *err)
{
    unsigned depth = 0;
    bool in_str = false, esc = false;

    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[') {
            if (++depth > WH_MAX_DEPTH)
                return accel_error_set(err, ACCEL_ETOOBIG,
                                       "body: nested deeper than %u objects and arrays (at byte "
                                       "%zu)",
                                       WH_MAX_DEPTH, i);
        } else if ((c == '}' || c == ']') && depth > 0)
            depth--;
    }
    return ACCEL_OK;
}

/* The first string value or key (in document order) over WH_MAX_STRING
 * bytes, or NULL; *at is where the message points: the value itself, or the
 * object holding the key.  Depth is bounded by check_depth. */
static const cJSON *oversized(const cJSON *v, const cJSON **at)
{
    if (cJSON_IsString(v) && strlen(v->valuestring) > WH_MAX_STRING) {
        *at = v;
        return v;
    }
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return NULL;
    for (const cJSON *c = v->child; c != NULL; c = c->next) {
        const cJSON *bad;
        if (c->string != NULL && strlen(c->string) > WH_MAX_STRING) {
            *at = v;
            return c;
        }
        if ((bad = oversized(c, at)) != NULL)
            return bad;
    }
    return NULL;
}

/* Writes the path from v down to `target` ("a.b[2]"; cut, never overflowed)
 * into p from offset at; true when target lies under v.  Only run once a
 * target was found, so the common case formats nothing. */
static bool path_to(const cJSON *v, const cJSON *target, char *p, size_t size, size_t at)
{
    size_t i = 0;

    if (v == target)
        return true;
    for (const cJSON *c = v->child; c != NULL; c = c->next, i++) {
        int n = c->string != NULL ? snprintf(p + at, size - at, "%s%s", at ? "." : "", c->string)
                                  : snprintf(p + at, size - at, "[%zu]", i);
        size_t end = n < 0 ? at : at + (size_t)n < size ? at + (size_t)n : size - 1;
        if (path_to(c, target, p, size, end))
            return true;
        p[at] = '\0';
    }
    return false;
}

/* Every string value and key at most WH_MAX_STRING bytes; the message
 * names the first one past it. */
static enum accel_err check_strings(const cJSON *root, char *path, size_t size,
                                    struct accel_error *err)
{
    const cJSON *at = NULL, *bad = oversized(root, &at);
    bool is_key = bad != at;

    if (bad == NULL)
        return ACCEL_OK;
    path[0] = '\0';
    path_to(root, at, path, size, 0);
    return accel_error_set(err, ACCEL_ETOOBIG, "%s: a %s of %zu bytes, over the cap of %u",
                           path[0] ? path : "body", is_key ? "key" : "string",
                           strlen(is_key ? bad->string : bad->valuestring), WH_MAX_STRING);
}

/* obj[key] when present and not null; ACCEL_EINVAL when it is not of the
 * type `want` (cJSON_Object, cJSON_Array or cJSON_String). */
enum accel_err wh_json_member(const cJSON *obj, const char *key, int want, const char *field,
                              const cJSON **out, struct accel_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    static const char *const names[] = {"an object", "an array", "a string"};
    int i = want == cJSON_Object ? 0 : want == cJSON_Array ? 1 : 2;

    *out = NULL;
    if (v == NULL || cJSON_IsNull(v))
        return ACCEL_OK;
    if ((v->type & 0xFF) != want)
        return accel_error_set(err, ACCEL_EINVAL, "%s: not %s", field, names[i]);
    *out = v;
    return ACCEL_OK;
}

enum accel_err wh_json_string(const cJSON *obj, const char *key, const char *field,
                              const char **out, struct accel_error *err)
{
    const cJSON *v;
    enum accel_err rc = wh_json_member(obj, key, cJSON_String, field, &v, err);

    *out = v ? v->valuestring : NULL;
    return rc;
}

static enum accel_err decode(struct wh_review *rv, struct accel_error *err)
{
    const cJSON *req, *obj, *dry;
    const char *api, *kind, *okind, *oapi;
    char path[256] = "";
    enum accel_err rc;

    rc = check_strings(rv->root, path, sizeof(path), err);
    if (rc != ACCEL_OK)
        return rc;
    if (!cJSON_IsObject(rv->root))
        return accel_error_set(err, ACCEL_EINVAL, "body: not a JSON object");
    if ((rc = wh_json_string(rv->root, "apiVersion", "apiVersion", &api, err)) != ACCEL_OK ||
        (rc = wh_json_string(rv->root, "kind", "kind", &kind, err)) != ACCEL_OK)
        return rc;
    if (api == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "apiVersion: missing (expected %s)",
                               REVIEW_VERSION);
    if (strcmp(api, REVIEW_VERSION) != 0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "apiVersion: '%.64s' is not %s (list only v1 in the webhook's "
                               "admissionReviewVersions)",
                               api, REVIEW_VERSION);
    if (kind == NULL || strcmp(kind, REVIEW_KIND) != 0)
        return accel_error_set(err, ACCEL_EINVAL, "kind: %s%.64s%s, expected %s", kind ? "'" : "",
                               kind ? kind : "missing", kind ? "'" : "", REVIEW_KIND);
    req = cJSON_GetObjectItemCaseSensitive(rv->root, "request");
    if (req == NULL || cJSON_IsNull(req))
        return accel_error_set(err, ACCEL_EINVAL, "request: missing");
    if (!cJSON_IsObject(req))
        return accel_error_set(err, ACCEL_EINVAL, "request: not an object");
    if ((rc = wh_json_string(req, "uid", "request.uid", &rv->uid, err)) != ACCEL_OK)
        return rc;
    if (rv->uid == NULL || rv->uid[0] == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "request.uid: missing");
    if (strlen(rv->uid) > WH_MAX_UID)
        return accel_error_set(err, ACCEL_EINVAL, "request.uid: %zu bytes, more than %u",
                               strlen(rv->uid), WH_MAX_UID);
    if ((rc = wh_json_string(req, "operation", "request.operation", &rv->operation, err)) !=
            ACCEL_OK ||
        (rc = wh_json_string(req, "namespace", "request.namespace", &rv->ns, err)) != ACCEL_OK)
        return rc;
    if (rv->ns == NULL)
        rv->ns = "";
    dry = cJSON_GetObjectItemCaseSensitive(req, "dryRun");
    if (dry != NULL && !cJSON_IsNull(dry) && !cJSON_IsBool(dry))
        return accel_error_set(err, ACCEL_EINVAL, "request.dryRun: not a boolean");
    rv->dry_run = cJSON_IsTrue(dry);
    if (rv->operation == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "request.operation: missing");
    if (strcmp(rv->operation, "CREATE") != 0) {
        snprintf(rv->skip, sizeof(rv->skip), "request.operation: %.32s (accelrun acts on CREATE)",
                 rv->operation);
        return ACCEL_OK;
    }
    obj = cJSON_GetObjectItemCaseSensitive(req, "object");
    if (obj == NULL || cJSON_IsNull(obj))
        return accel_error_set(err, ACCEL_EINVAL, "request.object: missing on a CREATE");
    if (!cJSON_IsObject(obj))
        return accel_error_set(err, ACCEL_EINVAL, "request.object: not an object");
    if ((rc = wh_json_string(obj, "kind", "request.object.kind", &okind, err)) != ACCEL_OK ||
        (rc = wh_json_string(obj, "apiVersion", "request.object.apiVersion", &oapi, err)) !=
            ACCEL_OK)
        return rc;
    if (okind == NULL || oapi == NULL || strcmp(okind, "Pod") != 0 || strcmp(oapi, "v1") != 0) {
        snprintf(rv->skip, sizeof(rv->skip),
                 "request.object: kind %.32s, apiVersion %.32s is not a v1 Pod; accelrun only "
                 "mutates Pods (check the webhook's rules)",
                 okind ? okind : "(none)", oapi ? oapi : "(none)");
        return ACCEL_OK;
    }
    rv->pod = obj;
    return ACCEL_OK;
}

enum accel_err wh_review_decode(struct wh_review *rv, const char *body, size_t len,
                                struct accel_error *err)
{
    const char *end = NULL;
    enum accel_err rc;

    memset(rv, 0, sizeof(*rv));
    if (len > WH_MAX_BODY)
        return accel_error_set(err, ACCEL_ETOOBIG, "body: %zu bytes, over the cap of %u", len,
                               WH_MAX_BODY);
    if (len == 0 || body == NULL)
        return accel_error_set(err, ACCEL_EPARSE, "body: empty, expected an AdmissionReview");
    rc = check_depth(body, len, err);
    if (rc != ACCEL_OK)
        return rc;
    rv->root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (rv->root == NULL) {
        /* cJSON tells the failing offset through end when it knows it */
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        return accel_error_set(err, ACCEL_EPARSE, "body: not JSON (at byte %zu)", at);
    }
    for (; end != NULL && end < body + len; end++)
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            rc =
                accel_error_set(err, ACCEL_EPARSE, "body: bytes after the JSON value (at byte %zu)",
                                (size_t)(end - body));
            goto fail;
        }
    rc = decode(rv, err);
    if (rc == ACCEL_OK)
        return ACCEL_OK;
fail:
    wh_review_free(rv);
    return rc;
}

void wh_review_free(struct wh_review *rv)
{
    if (rv == NULL)
        return;
    cJSON_Delete(rv->root);
    memset(rv, 0, sizeof(*rv));
}

/* ---------------------------------------------------------------- response */

void wh_response_init(struct wh_response *r)
{
    memset(r, 0, sizeof(*r));
    r->allowed = true;
}

void wh_response_free(struct wh_response *r)
{
    if (r == NULL)
        return;
    accel_free(r->message);
    accel_free(r->patch);
    for (size_t i = 0; i < r->nwarnings; i++)
        accel_free(r->warnings[i]);
    memset(r, 0, sizeof(*r));
}

/* Cuts s to at most max bytes without splitting a UTF-8 sequence. */
static void cut_utf8(char *s, size_t max)
{
    size_t n = strlen(s);

    if (n <= max)
        return;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    s[max] = '\0';
}

static char *vformat(size_t max, const char *fmt, va_list ap)
{
    va_list aq;
    int n;
    char *s;

    va_copy(aq, ap);
    n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0)
        return NULL;
    s = accel_malloc((size_t)n + 1);
    if (s == NULL)
        return NULL;
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    cut_utf8(s, max);
    return s;
}

enum accel_err wh_response_warn(struct wh_response *r, const char *fmt, ...)
{
    va_list ap;
    char *s;

    if (r->nwarnings >= WH_MAX_WARNINGS - 1) {
        /* the last entry counts the warnings left out */
        char text[96];
        r->warnings_dropped++;
        snprintf(text, sizeof(text), "accelrun: %zu more warning%s not shown", r->warnings_dropped,
                 r->warnings_dropped == 1 ? "" : "s");
        s = accel_strdup(text);
        if (s == NULL)
            return ACCEL_ENOMEM;
        if (r->nwarnings == WH_MAX_WARNINGS)
            accel_free(r->warnings[WH_MAX_WARNINGS - 1]);
        r->warnings[WH_MAX_WARNINGS - 1] = s;
        r->nwarnings = WH_MAX_WARNINGS;
        return ACCEL_OK;
    }
    va_start(ap, fmt);
    s = vformat(WH_MAX_WARNING, fmt, ap);
    va_end(ap);
    if (s == NULL)
        return ACCEL_ENOMEM;
    r->warnings[r->nwarnings++] = s;
    return ACCEL_OK;
}

enum accel_err wh_response_deny(struct wh_response *r, const char *fmt, ...)
{
    va_list ap;
    char *s;

    va_start(ap, fmt);
    s = vformat(WH_MAX_MESSAGE, fmt, ap);
    va_end(ap);
    if (s == NULL)
        return ACCEL_ENOMEM;
    accel_free(r->message);
    accel_free(r->patch);
    r->patch = NULL;
    r->nops = 0;
    r->message = s;
    r->allowed = false;
    r->code = 403;
    return ACCEL_OK;
}

enum accel_err wh_base64(struct accel_buf *b, const unsigned char *d, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[1024]; /* encoded in blocks of 768 input bytes */
    size_t k = 0;
    enum accel_err rc;

    if (n > (SIZE_MAX - 2) / 4 * 3)
        return ACCEL_ETOOBIG;
    if ((rc = accel_buf_reserve(b, (n + 2) / 3 * 4)) != ACCEL_OK)
        return rc;
    for (size_t i = 0; i < n && rc == ACCEL_OK; i += 3) {
        unsigned v = (unsigned)d[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        q[k++] = tab[(v >> 18) & 63];
        q[k++] = tab[(v >> 12) & 63];
        q[k++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        q[k++] = i + 2 < n ? tab[v & 63] : '=';
        if (k == sizeof(q) || i + 3 >= n) {
            rc = accel_buf_add(b, q, k);
            k = 0;
        }
    }
    return rc;
}

enum accel_err wh_json_quote(struct accel_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s; /* bytes not yet appended, that need no escape */
    enum accel_err rc = accel_buf_add(b, "\"", 1);

    for (; *s && rc == ACCEL_OK; s++) {
        unsigned char c = (unsigned char)*s;
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t n = 2;

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        switch (c) {
        case '"':
            e[1] = '"';
            break;
        case '\\':
            e[1] = '\\';
            break;
        case '\b':
            e[1] = 'b';
            break;
        case '\f':
            e[1] = 'f';
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\r':
            e[1] = 'r';
            break;
        case '\t':
            e[1] = 't';
            break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            n = 6;
        }
        rc = accel_buf_add(b, run, (size_t)(s - run));
        if (rc == ACCEL_OK)
            rc = accel_buf_add(b, e, n);
        run = s + 1;
    }
    if (rc == ACCEL_OK)
        rc = accel_buf_add(b, run, (size_t)(s - run));
    return rc == ACCEL_OK ? accel_buf_add(b, "\"", 1) : rc;
}

enum accel_err wh_response_encode(const char *uid, const struct wh_response *r, char **out,
                                  size_t *len, struct accel_error *err)
{
    struct accel_buf b;
    enum accel_err rc;

    *out = NULL;
    *len = 0;
    accel_buf_init(&b, WH_MAX_RESPONSE);
    /* room for all of it at once where that fits the cap; where it does
     * not, the appends below find out whether the response does */
    if (accel_buf_reserve(&b, 256 + (r->patch ? strlen(r->patch) / 3 * 4 + 4 : 0)) != ACCEL_OK)
        accel_buf_reset(&b);
    rc = accel_buf_puts(&b, "{\"apiVersion\":\"" REVIEW_VERSION "\",\"kind\":\"" REVIEW_KIND
                            "\",\"response\":{\"uid\":");
    if (rc == ACCEL_OK)
        rc = wh_json_quote(&b, uid);
    if (rc == ACCEL_OK)
        rc = accel_buf_puts(&b, r->allowed ? ",\"allowed\":true" : ",\"allowed\":false");
    if (rc == ACCEL_OK && r->allowed && r->patch != NULL) {
        rc = accel_buf_puts(&b, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        if (rc == ACCEL_OK)
            rc = wh_base64(&b, (const unsigned char *)r->patch, strlen(r->patch));
        if (rc == ACCEL_OK)
            rc = accel_buf_add(&b, "\"", 1);
    }
    if (rc == ACCEL_OK && !r->allowed) {
        rc = accel_buf_printf(&b, ",\"status\":{\"code\":%d", r->code ? r->code : 403);
        if (rc == ACCEL_OK)
            rc = accel_buf_puts(&b, ",\"message\":");
        if (rc == ACCEL_OK)
            rc = wh_json_quote(&b, r->message ? r->message : "denied");
        if (rc == ACCEL_OK)
            rc = accel_buf_add(&b, "}", 1);
    }
    if (rc == ACCEL_OK && r->nwarnings > 0) {
        rc = accel_buf_puts(&b, ",\"warnings\":[");
        for (size_t i = 0; i < r->nwarnings && rc == ACCEL_OK; i++) {
            if (i > 0)
                rc = accel_buf_add(&b, ",", 1);
            if (rc == ACCEL_OK)
                rc = wh_json_quote(&b, r->warnings[i]);
        }
        if (rc == ACCEL_OK)
            rc = accel_buf_add(&b, "]", 1);
    }
    if (rc == ACCEL_OK)
        rc = accel_buf_add(&b, "}}", 2);
    if (rc == ACCEL_OK) {
        *len = b.len;
        *out = accel_buf_take(&b);
        if (*out == NULL)
            rc = ACCEL_ENOMEM;
    }
    accel_buf_free(&b);
    if (rc == ACCEL_ETOOBIG)
        return accel_error_set(err, rc, "response: over the cap of %u bytes", WH_MAX_RESPONSE);
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, "response: out of memory");
    return ACCEL_OK;
}
