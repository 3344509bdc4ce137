/*
 * scalar.c: YAML 1.1 scalar resolution, the way PyYAML's SafeLoader does it
 * (resolver.py and constructor.py), so that a config means here exactly what
 * it means to `accelerate launch`.  Plain scalars only: the caller keeps
 * quoted scalars as strings.  Timestamps stay strings (accelerate has no
 * date-valued key, and str() of a date is its own text).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/value.h"

static bool is_one_of(const char *s, size_t n, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strlen(*words) == n && memcmp(*words, s, n) == 0)
            return true;
    return false;
}

static const char *const true_words[] = {"yes",  "Yes", "YES", "true", "True",
                                         "TRUE", "on",  "On",  "ON",   NULL};
static const char *const false_words[] = {"no",    "No",  "NO",  "false", "False",
                                          "FALSE", "off", "Off", "OFF",   NULL};
static const char *const null_words[] = {"~", "null", "Null", "NULL", "", NULL};

/* Scans `n` chars of `s` from *i while they are in `set`; returns how many. */
static size_t span(const char *s, size_t n, size_t *i, const char *set)
{
    size_t start = *i;

    while (*i < n && s[*i] != '\0' && strchr(set, s[*i]) != NULL)
        (*i)++;
    return *i - start;
}

static void skip_sign(const char *s, size_t n, size_t *i)
{
    if (*i < n && (s[*i] == '-' || s[*i] == '+'))
        (*i)++;
}

/* [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+ : the sexagesimal head (no sign here). */
static bool sexagesimal_head(const char *s, size_t n, size_t *i)
{
    if (*i >= n || !isdigit((unsigned char)s[*i]))
        return false;
    span(s, n, i, "0123456789_");
    if (*i >= n || s[*i] != ':')
        return false;
    while (*i < n && s[*i] == ':') {
        size_t d;
        (*i)++;
        d = span(s, n, i, "0123456789");
        if (d == 0 || d > 2)
            return false;
        if (d == 2 && s[*i - 2] > '5')
            return false;
    }
    return true;
}

static bool match_int(const char *s, size_t n)
{
    size_t i = 0;

    skip_sign(s, n, &i);
    if (i + 2 <= n && s[i] == '0' && s[i + 1] == 'b') {
        i += 2;
        return span(s, n, &i, "01_") > 0 && i == n;
    }
    if (i + 2 <= n && s[i] == '0' && s[i + 1] == 'x') {
        i += 2;
        return span(s, n, &i, "0123456789abcdefABCDEF_") > 0 && i == n;
    }
    if (i < n && s[i] == '0') {
        i++;
        span(s, n, &i, "01234567_");
        return i == n;
    }
    if (i < n && s[i] >= '1' && s[i] <= '9') {
        size_t save = i;
        span(s, n, &i, "0123456789_");
        if (i == n)
            return true;
        i = save;
        return sexagesimal_head(s, n, &i) && i == n && s[save] != '0';
    }
    return false;
}

static bool match_exponent(const char *s, size_t n, size_t *i)
{
    if (*i < n && (s[*i] == 'e' || s[*i] == 'E')) {
        (*i)++;
        if (*i >= n || (s[*i] != '-' && s[*i] != '+'))
            return false;
        (*i)++;
        return span(s, n, i, "0123456789") > 0;
    }
    return true;
}

static bool match_float(const char *s, size_t n)
{
    size_t i = 0;

    if (n >= 4 && s[0] == '.' &&
        (is_one_of(s + 1, n - 1, (const char *const[]){"nan", "NaN", "NAN", NULL})))
        return true;
    skip_sign(s, n, &i);
    if (n - i == 4 && s[i] == '.' &&
        is_one_of(s + i + 1, 3, (const char *const[]){"inf", "Inf", "INF", NULL}))
        return true;
    if (i < n && s[i] == '.') {
        /* \.[0-9][0-9_]*  : no sign allowed in this form */
        if (i != 0)
            return false;
        i++;
        if (i >= n || !isdigit((unsigned char)s[i]))
            return false;
        span(s, n, &i, "0123456789_");
        return match_exponent(s, n, &i) && i == n;
    }
    if (i >= n || !isdigit((unsigned char)s[i]))
        return false;
    {
        size_t save = i;
        span(s, n, &i, "0123456789_");
        if (i < n && s[i] == '.') {
            i++;
            span(s, n, &i, "0123456789_");
            return match_exponent(s, n, &i) && i == n;
        }
        i = save;
        if (!sexagesimal_head(s, n, &i) || i >= n || s[i] != '.')
            return false;
        i++;
        span(s, n, &i, "0123456789_");
        return i == n;
    }
}

/* Copies s without underscores into out (outsz bytes) or, when it does not
 * fit, into a new allocation; NULL only when that allocation fails.  The
 * caller frees the result with accel_free when it is not `out`. */
static char *strip_underscores(const char *s, size_t n, char *out, size_t outsz)
{
    size_t j = 0;

    if (n >= outsz) {
        out = accel_malloc(n + 1);
        if (out == NULL)
            return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (s[i] != '_')
            out[j++] = s[i];
    out[j] = '\0';
    return out;
}

/* Value of digit `c` in base 16 or lower. */
static unsigned digit_value(char c)
{
    if (isdigit((unsigned char)c))
        return (unsigned)(c - '0');
    return (unsigned)(tolower((unsigned char)c) - 'a' + 10);
}

/* Adds one digit: *v = *v * base + d; false once the result passes `limit`,
 * after which *v is meaningless. */
static bool mul_add(unsigned long long *v, unsigned base, unsigned d, unsigned long long limit)
{
    if (*v > (limit - d) / base)
        return false;
    *v = *v * base + d;
    return true;
}

/* int(text) as PyYAML's construct_yaml_int computes it, on text that matched
 * the int pattern.  Underscores are skipped in place, so a long literal needs
 * no copy.  Python's ints are unbounded and ours are not: a value outside
 * int64 clamps to LLONG_MAX or LLONG_MIN, and the schema's range checks
 * report it as out of range. */
static void construct_int(const char *text, size_t n, struct accel_val *out)
{
    unsigned long long v = 0, part = 0, limit = (unsigned long long)LLONG_MAX;
    unsigned base = 10;
    bool neg = false, ok = true;
    size_t i = 0;

    out->type = ACCEL_V_INT;
    if (n > 0 && (text[0] == '-' || text[0] == '+')) {
        neg = text[0] == '-';
        i = 1;
    }
    if (neg)
        limit += 1; /* -2**63 fits */
    if (i + 1 < n && text[i] == '0' && (text[i + 1] == 'b' || text[i + 1] == 'x')) {
        base = text[i + 1] == 'b' ? 2 : 16;
        i += 2;
    } else if (i < n && text[i] == '0') {
        base = 8;
    }
    if (base == 10 && memchr(text + i, ':', n - i) != NULL) {
        /* Sexagesimal: the parts are base 10, the places base 60. */
        for (; ok && i < n; i++) {
            if (text[i] == '_')
                continue;
            if (text[i] == ':') {
                ok = mul_add(&v, 60, 0, limit) && v <= limit - part;
                v += part;
                part = 0;
                continue;
            }
            ok = mul_add(&part, 10, digit_value(text[i]), limit);
        }
        ok = ok && mul_add(&v, 60, 0, limit) && v <= limit - part;
        v += part;
    } else {
        for (; ok && i < n; i++)
            if (text[i] != '_')
                ok = mul_add(&v, base, digit_value(text[i]), limit);
    }
    if (!ok)
        out->u.i = neg ? LLONG_MIN : LLONG_MAX;
    else if (neg)
        out->u.i = v == limit ? LLONG_MIN : -(long long)v;
    else
        out->u.i = (long long)v;
}

/* float(60**k) as Python converts that int: correctly rounded.  60**k is
 * 15**k * 2**(2k); 15**k is built exactly in decimal digits and rounded once
 * by strtod, and the power of two is exact.  Past the double range Python
 * raises OverflowError; this returns HUGE_VAL (the 174th ':' group). */
static double pow60(unsigned k)
{
    unsigned char dig[220] = {1}; /* little-endian decimal digits of 15**k */
    char text[sizeof(dig) + 1];
    size_t nd = 1;

    if (k > 173)
        return HUGE_VAL;
    for (unsigned i = 0; i < k; i++) {
        unsigned carry = 0;
        for (size_t j = 0; j < nd; j++) {
            unsigned x = dig[j] * 15u + carry;
            dig[j] = (unsigned char)(x % 10);
            carry = x / 10;
        }
        for (; carry != 0; carry /= 10)
            dig[nd++] = (unsigned char)(carry % 10);
    }
    for (size_t j = 0; j < nd; j++)
        text[j] = (char)('0' + dig[nd - 1 - j]);
    text[nd] = '\0';
    return ldexp(strtod(text, NULL), 2 * (int)k);
}

/* float(text) as PyYAML's construct_yaml_float computes it, on text that
 * matched the float pattern.  Sexagesimal parts are summed from the right,
 * in Python's order, so that the rounding is the same.  ACCEL_ENOMEM only
 * for a literal longer than the stack buffer. */
static enum accel_err construct_float(const char *text, size_t n, struct accel_val *out)
{
    char stack[128];
    char *tmp, *p, *colon;
    double sign = 1, v = 0;
    unsigned place = 0; /* the current part is worth 60**place */

    tmp = strip_underscores(text, n, stack, sizeof(stack));
    if (tmp == NULL)
        return ACCEL_ENOMEM;
    out->type = ACCEL_V_FLOAT;
    for (char *q = tmp; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    p = tmp;
    if (*p == '-' || *p == '+') {
        sign = *p == '-' ? -1 : 1;
        p++;
    }
    if (strcmp(p, ".inf") == 0) {
        v = HUGE_VAL;
    } else if (strcmp(p, ".nan") == 0) {
        v = NAN;
        sign = 1;
    } else {
        while ((colon = strrchr(p, ':')) != NULL) {
            v += strtod(colon + 1, NULL) * pow60(place++);
            *colon = '\0';
        }
        v += strtod(p, NULL) * pow60(place);
    }
    out->u.f = sign * v;
    if (tmp != stack)
        accel_free(tmp);
    return ACCEL_OK;
}

enum accel_err accel_scalar_resolve(const char *text, size_t len, struct accel_val *out)
{
    out->quoted = false;
    if (len > 0 && memchr(text, '\0', len) != NULL)
        goto string;
    if (is_one_of(text, len, null_words)) {
        out->type = ACCEL_V_NULL;
        return ACCEL_OK;
    }
    if (is_one_of(text, len, true_words) || is_one_of(text, len, false_words)) {
        out->type = ACCEL_V_BOOL;
        out->u.b = is_one_of(text, len, true_words);
        return ACCEL_OK;
    }
    if (len > 0 && strchr("-+0123456789.", text[0]) != NULL) {
        if (match_int(text, len)) {
            construct_int(text, len, out);
            return ACCEL_OK;
        }
        if (match_float(text, len))
            return construct_float(text, len, out);
    }
string:
    out->type = ACCEL_V_STR;
    out->u.s = accel_strndup(text, len);
    return out->u.s ? ACCEL_OK : ACCEL_ENOMEM;
}
