/*
 * value.c: the generic value tree: free, copy, lookup, Python equality,
 * Python truthiness and Python's str()/repr() text.  accelerate builds every
 * environment value with str(), so the text here must match CPython's
 * byte for byte (True, 1e-05, 100000000, ['a', 'b']).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/utf8.h"
#include "accel/value.h"

void accel_val_free(struct accel_val *v)
{
    if (v == NULL)
        return;
    switch (v->type) {
    case ACCEL_V_STR:
        accel_free(v->u.s);
        break;
    case ACCEL_V_LIST:
        for (size_t i = 0; i < v->u.list.n; i++)
            accel_val_free(&v->u.list.v[i]);
        accel_free(v->u.list.v);
        break;
    case ACCEL_V_MAP:
        for (size_t i = 0; i < v->u.map.n; i++) {
            accel_free(v->u.map.v[i].key);
            accel_val_free(&v->u.map.v[i].val);
        }
        accel_free(v->u.map.v);
        break;
    case ACCEL_V_NULL:
    case ACCEL_V_BOOL:
    case ACCEL_V_INT:
    case ACCEL_V_FLOAT:
        break;
    }
    v->type = ACCEL_V_NULL;
}

enum accel_err accel_val_copy(struct accel_val *dst, const struct accel_val *src)
{
    *dst = *src;
    switch (src->type) {
    case ACCEL_V_STR:
        dst->u.s = accel_strdup(src->u.s);
        if (dst->u.s == NULL)
            goto oom;
        break;
    case ACCEL_V_LIST:
        dst->u.list.v = accel_calloc(src->u.list.n ? src->u.list.n : 1, sizeof(struct accel_val));
        dst->u.list.n = 0;
        if (dst->u.list.v == NULL)
            goto oom;
        for (size_t i = 0; i < src->u.list.n; i++) {
            if (accel_val_copy(&dst->u.list.v[i], &src->u.list.v[i]) != ACCEL_OK)
                goto oom;
            dst->u.list.n++;
        }
        break;
    case ACCEL_V_MAP:
        dst->u.map.v = accel_calloc(src->u.map.n ? src->u.map.n : 1, sizeof(struct accel_pair));
        dst->u.map.n = 0;
        if (dst->u.map.v == NULL)
            goto oom;
        for (size_t i = 0; i < src->u.map.n; i++) {
            struct accel_pair *p = &dst->u.map.v[i];
            p->mark = src->u.map.v[i].mark;
            p->key = accel_strdup(src->u.map.v[i].key);
            if (p->key == NULL)
                goto oom;
            if (accel_val_copy(&p->val, &src->u.map.v[i].val) != ACCEL_OK) {
                accel_free(p->key);
                goto oom;
            }
            dst->u.map.n++;
        }
        break;
    case ACCEL_V_NULL:
    case ACCEL_V_BOOL:
    case ACCEL_V_INT:
    case ACCEL_V_FLOAT:
        break;
    }
    return ACCEL_OK;
oom:
    if (src->type == ACCEL_V_STR)
        dst->type = ACCEL_V_NULL;
    accel_val_free(dst);
    return ACCEL_ENOMEM;
}

struct accel_pair *accel_map_find(const struct accel_val *map, const char *key)
{
    if (map == NULL || map->type != ACCEL_V_MAP)
        return NULL;
    for (size_t i = 0; i < map->u.map.n; i++) {
        const char *k = map->u.map.v[i].key;
        /* the first byte inline: most keys differ there or soon after */
        if (k[0] == key[0] && strcmp(k, key) == 0)
            return &map->u.map.v[i];
    }
    return NULL;
}

static bool numeric(const struct accel_val *v, double *out)
{
    switch (v->type) {
    case ACCEL_V_BOOL:
        *out = v->u.b ? 1 : 0;
        return true;
    case ACCEL_V_INT:
        *out = (double)v->u.i;
        return true;
    case ACCEL_V_FLOAT:
        *out = v->u.f;
        return true;
    case ACCEL_V_NULL:
    case ACCEL_V_STR:
    case ACCEL_V_LIST:
    case ACCEL_V_MAP:
        break;
    }
    return false;
}

/* Python compares an int with a float exactly, not after rounding the int to
 * a double: 2**53 + 1 != 2.0**53. */
static bool int_equals_float(long long i, double f)
{
    /* [-2^63, 2^63) as doubles; outside it (and for inf, nan) no int64 is equal. */
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0) || f != trunc(f))
        return false;
    return (long long)f == i;
}

bool accel_val_equal(const struct accel_val *a, const struct accel_val *b)
{
    double x, y;

    if (numeric(a, &x) && numeric(b, &y)) {
        if (a->type == ACCEL_V_INT && b->type == ACCEL_V_INT)
            return a->u.i == b->u.i;
        if (a->type == ACCEL_V_INT && b->type == ACCEL_V_FLOAT)
            return int_equals_float(a->u.i, b->u.f);
        if (a->type == ACCEL_V_FLOAT && b->type == ACCEL_V_INT)
            return int_equals_float(b->u.i, a->u.f);
        return x == y;
    }
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case ACCEL_V_NULL:
        return true;
    case ACCEL_V_STR:
        return strcmp(a->u.s, b->u.s) == 0;
    case ACCEL_V_LIST:
        if (a->u.list.n != b->u.list.n)
            return false;
        for (size_t i = 0; i < a->u.list.n; i++)
            if (!accel_val_equal(&a->u.list.v[i], &b->u.list.v[i]))
                return false;
        return true;
    case ACCEL_V_MAP:
        if (a->u.map.n != b->u.map.n)
            return false;
        for (size_t i = 0; i < a->u.map.n; i++) {
            const struct accel_pair *q = accel_map_find(b, a->u.map.v[i].key);
            if (q == NULL || !accel_val_equal(&a->u.map.v[i].val, &q->val))
                return false;
        }
        return true;
    case ACCEL_V_BOOL:
    case ACCEL_V_INT:
    case ACCEL_V_FLOAT:
        break;
    }
    return false;
}

bool accel_val_truthy(const struct accel_val *v)
{
    switch (v->type) {
    case ACCEL_V_NULL:
        return false;
    case ACCEL_V_BOOL:
        return v->u.b;
    case ACCEL_V_INT:
        return v->u.i != 0;
    case ACCEL_V_FLOAT:
        return v->u.f != 0;
    case ACCEL_V_STR:
        return v->u.s[0] != '\0';
    case ACCEL_V_LIST:
        return v->u.list.n != 0;
    case ACCEL_V_MAP:
        return v->u.map.n != 0;
    }
    return false;
}

const char *accel_vtype_name(enum accel_vtype t)
{
    switch (t) {
    case ACCEL_V_NULL:
        return "null";
    case ACCEL_V_BOOL:
        return "boolean";
    case ACCEL_V_INT:
        return "integer";
    case ACCEL_V_FLOAT:
        return "float";
    case ACCEL_V_STR:
        return "string";
    case ACCEL_V_LIST:
        return "list";
    case ACCEL_V_MAP:
        return "mapping";
    }
    return "value";
}

/* The p-digit decimal m * 10^(e - p + 1) as text that strtod reads back. */
static double decimal_value(unsigned long long m, int p, int e, char *tmp, size_t tmpsz)
{
    snprintf(tmp, tmpsz, "%llue%d", m, e - p + 1);
    return strtod(tmp, NULL);
}

/* The shortest decimal digits that read back as x (finite, > 0), and the
 * decimal exponent of the first digit, as CPython's repr (David Gay's
 * shortest mode) chooses them: the fewest digits, and of two candidates with
 * that many digits the closer one.  The nearest p-digit decimal can miss
 * while the one on the other side of x hits, because the rounding interval of
 * a power of two is twice as wide above it as below. */
static void shortest_digits(double x, char digits[20], int *exp10)
{
    char tmp[64];
    unsigned long long m = 0, lo, hi;
    int e = 0, p;

    for (p = 1; p <= 17; p++) {
        const char *q;
        double back;

        /* tmp is d[.ddd]e[+-]XX: the nearest p-digit decimal. */
        snprintf(tmp, sizeof(tmp), "%.*e", p - 1, x);
        m = 0;
        for (q = tmp; *q != 'e'; q++)
            if (*q != '.')
                m = m * 10 + (unsigned long long)(*q - '0');
        e = atoi(q + 1);
        back = strtod(tmp, NULL);
        if (back == x)
            break;
        lo = 1;
        for (int i = 1; i < p; i++)
            lo *= 10;
        hi = lo * 10 - 1;
        if (back < x) {
            unsigned long long n = m + 1;
            int ne = e;
            if (n > hi) {
                n = lo;
                ne++;
            }
            if (decimal_value(n, p, ne, tmp, sizeof(tmp)) == x) {
                m = n;
                e = ne;
                break;
            }
        } else {
            unsigned long long n = m - 1;
            int ne = e;
            if (n < lo) {
                n = hi;
                ne--;
            }
            if (decimal_value(n, p, ne, tmp, sizeof(tmp)) == x) {
                m = n;
                e = ne;
                break;
            }
        }
    }
    snprintf(digits, 20, "%llu", m);
    for (size_t n = strlen(digits); n > 1 && digits[n - 1] == '0'; n--)
        digits[n - 1] = '\0';
    *exp10 = e;
}

/* CPython's float repr: the shortest digits that round-trip, in fixed
 * notation when the decimal exponent is in [-4, 16), else d.ddde+XX. */
static enum accel_err py_float(double x, struct accel_buf *out)
{
    char digits[20];
    int exp10, ndig, decpt;
    enum accel_err rc;

    if (isnan(x))
        return accel_buf_puts(out, "nan");
    if (isinf(x))
        return accel_buf_puts(out, x < 0 ? "-inf" : "inf");
    if (x == 0)
        return accel_buf_puts(out, signbit(x) ? "-0.0" : "0.0");
    if (x < 0) {
        rc = accel_buf_puts(out, "-");
        if (rc != ACCEL_OK)
            return rc;
        x = -x;
    }
    shortest_digits(x, digits, &exp10);
    ndig = (int)strlen(digits);
    decpt = exp10 + 1;
    if (decpt > -4 && decpt <= 16) {
        rc = ACCEL_OK;
        if (decpt <= 0) {
            rc = accel_buf_puts(out, "0.");
            for (int i = 0; rc == ACCEL_OK && i < -decpt; i++)
                rc = accel_buf_puts(out, "0");
            return rc == ACCEL_OK ? accel_buf_puts(out, digits) : rc;
        }
        if (decpt < ndig)
            return accel_buf_printf(out, "%.*s.%s", decpt, digits, digits + decpt);
        rc = accel_buf_puts(out, digits);
        for (int i = ndig; rc == ACCEL_OK && i < decpt; i++)
            rc = accel_buf_puts(out, "0");
        return rc == ACCEL_OK ? accel_buf_puts(out, ".0") : rc;
    }
    if (ndig > 1)
        rc = accel_buf_printf(out, "%c.%se%c%02d", digits[0], digits + 1, exp10 < 0 ? '-' : '+',
                              abs(exp10));
    else
        rc = accel_buf_printf(out, "%ce%c%02d", digits[0], exp10 < 0 ? '-' : '+', abs(exp10));
    return rc;
}

/* Code points above U+007F that Python's str.isprintable() rejects and repr()
 * therefore escapes: the categories Cc, Cf, Zs, Zl, Zp and Co (Unicode 14,
 * CPython 3.11).  Of the unassigned code points (Cn) only the noncharacters
 * are escaped: which others are unassigned depends on the Python that runs
 * accelerate. */
static const struct {
    unsigned lo, hi;
} nonprintable[] = {
    {0x80, 0xa0},       {0xad, 0xad},       {0x600, 0x605},       {0x61c, 0x61c},
    {0x6dd, 0x6dd},     {0x70f, 0x70f},     {0x890, 0x891},       {0x8e2, 0x8e2},
    {0x1680, 0x1680},   {0x180e, 0x180e},   {0x2000, 0x200f},     {0x2028, 0x202f},
    {0x205f, 0x2064},   {0x2066, 0x206f},   {0x3000, 0x3000},     {0xe000, 0xf8ff},
    {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd},   {0x110cd, 0x110cd},
    {0x13430, 0x13438}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},   {0xe0001, 0xe0001},
    {0xe0020, 0xe007f}, {0xf0000, 0xffffd}, {0x100000, 0x10fffd},
};

static bool is_nonprintable(unsigned cp)
{
    /* Noncharacters are unassigned in every Unicode version. */
    if ((cp & 0xfffe) == 0xfffe || (cp >= 0xfdd0 && cp <= 0xfdef))
        return true;
    for (size_t i = 0; i < sizeof(nonprintable) / sizeof(nonprintable[0]); i++)
        if (cp >= nonprintable[i].lo && cp <= nonprintable[i].hi)
            return true;
    return false;
}

/* Python's repr() of a str: single quotes unless the text has a ' and no ",
 * backslash escapes for the quote, \\, \n, \r, \t, and \xHH / \uHHHH /
 * \UHHHHHHHH for characters that are not printable. */
static enum accel_err py_repr_str(const char *s, struct accel_buf *out)
{
    char q = (strchr(s, '\'') != NULL && strchr(s, '"') == NULL) ? '"' : '\'';
    enum accel_err rc = accel_buf_add(out, &q, 1);

    for (const unsigned char *p = (const unsigned char *)s; rc == ACCEL_OK && *p; p++) {
        unsigned cp;
        size_t n;

        if (*p == '\\' || *p == (unsigned char)q)
            rc = accel_buf_printf(out, "\\%c", *p);
        else if (*p == '\n')
            rc = accel_buf_puts(out, "\\n");
        else if (*p == '\r')
            rc = accel_buf_puts(out, "\\r");
        else if (*p == '\t')
            rc = accel_buf_puts(out, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            rc = accel_buf_printf(out, "\\x%02x", *p);
        else if (*p < 0x80 || (n = accel_utf8_decode(p, 4, &cp)) == 0) /* the NUL stops it */
            rc = accel_buf_add(out, (const char *)p, 1);
        else {
            if (!is_nonprintable(cp))
                rc = accel_buf_add(out, (const char *)p, n);
            else if (cp < 0x100)
                rc = accel_buf_printf(out, "\\x%02x", cp);
            else if (cp < 0x10000)
                rc = accel_buf_printf(out, "\\u%04x", cp);
            else
                rc = accel_buf_printf(out, "\\U%08x", cp);
            p += n - 1;
        }
    }
    if (rc == ACCEL_OK)
        rc = accel_buf_add(out, &q, 1);
    return rc;
}

static enum accel_err py_text(const struct accel_val *v, struct accel_buf *out, bool repr)
{
    enum accel_err rc = ACCEL_OK;

    switch (v->type) {
    case ACCEL_V_NULL:
        return accel_buf_puts(out, "None");
    case ACCEL_V_BOOL:
        return accel_buf_puts(out, v->u.b ? "True" : "False");
    case ACCEL_V_INT:
        return accel_buf_printf(out, "%lld", v->u.i);
    case ACCEL_V_FLOAT:
        return py_float(v->u.f, out);
    case ACCEL_V_STR:
        return repr ? py_repr_str(v->u.s, out) : accel_buf_puts(out, v->u.s);
    case ACCEL_V_LIST:
        rc = accel_buf_puts(out, "[");
        for (size_t i = 0; rc == ACCEL_OK && i < v->u.list.n; i++) {
            if (i > 0)
                rc = accel_buf_puts(out, ", ");
            if (rc == ACCEL_OK)
                rc = py_text(&v->u.list.v[i], out, true);
        }
        return rc == ACCEL_OK ? accel_buf_puts(out, "]") : rc;
    case ACCEL_V_MAP:
        rc = accel_buf_puts(out, "{");
        for (size_t i = 0; rc == ACCEL_OK && i < v->u.map.n; i++) {
            if (i > 0)
                rc = accel_buf_puts(out, ", ");
            if (rc == ACCEL_OK)
                rc = py_repr_str(v->u.map.v[i].key, out);
            if (rc == ACCEL_OK)
                rc = accel_buf_puts(out, ": ");
            if (rc == ACCEL_OK)
                rc = py_text(&v->u.map.v[i].val, out, true);
        }
        return rc == ACCEL_OK ? accel_buf_puts(out, "}") : rc;
    }
    return ACCEL_EINVAL;
}

enum accel_err accel_val_pystr(const struct accel_val *v, struct accel_buf *out)
{
    return py_text(v, out, false);
}
