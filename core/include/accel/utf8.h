/*
 * accel/utf8.h: strict UTF-8 decoding (no overlong forms, no surrogates,
 * nothing past U+10FFFF), for text that arrives from files other programs
 * wrote.
 *
 * Thread-safety: pure functions, safe from any thread.
 */
#ifndef ACCEL_UTF8_H
#define ACCEL_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Decodes the multi-byte sequence at p (p[0] >= 0x80), reading at most n
 * bytes; returns its length and sets *cp, or returns 0 when it is not well
 * formed or cut short. */
size_t accel_utf8_decode(const unsigned char *p, size_t n, unsigned *cp);

/* True when the n bytes at s are well-formed UTF-8 (NUL bytes included). */
bool accel_utf8_valid(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
