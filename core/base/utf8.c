/*
 * utf8.c: strict UTF-8 decoding (accel/utf8.h).
 */
#include "accel/utf8.h"

size_t accel_utf8_decode(const unsigned char *p, size_t n, unsigned *cp)
{
    size_t len;
    unsigned c = p[0];

    if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        c &= 0x07;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        c &= 0x0f;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        c &= 0x1f;
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if (i >= n || (p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
        (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

bool accel_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        unsigned cp;
        size_t len;

        if (p[i] < 0x80) {
            i++;
            continue;
        }
        len = accel_utf8_decode(p + i, n - i, &cp);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}
