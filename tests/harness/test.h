/*
 * tests/harness/test.h: the in-house TAP harness (after libuv's test/task.h).
 *
 * A test file defines its cases with TEST(name) and lists them once in
 * TEST_LIST(...).  Each case runs in a forked child with a timeout, so a crash
 * or a hang fails that case alone.  Assertions print both values and
 * file:line and cannot be compiled out.  SKIP(reason) reports "ok N # SKIP".
 */
#ifndef ACCEL_TEST_H
#define ACCEL_TEST_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/err.h"

typedef void (*test_fn)(void);

struct test_case {
    const char *name;
    test_fn fn;
    const void *arg; /* what test_arg() returns while the case runs (NULL from T) */
};

#define TEST(name) static void test_##name(void)
#define T(name)                                                                                    \
    {                                                                                              \
#name, test_##name                                                                         \
    }
#define TEST_LIST(...)                                                                             \
    static const struct test_case test_cases[] = {__VA_ARGS__};                                    \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        return test_main(argc, argv, test_cases, sizeof(test_cases) / sizeof(test_cases[0]));      \
    }

int test_main(int argc, char **argv, const struct test_case *cases, size_t n);

/* The running case's `arg`: one function serves a list of cases made at run
 * time (one TAP line per golden file, say). */
const void *test_arg(void);

/* Marks the running case failed (the child exits 1 after printing). */
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
/* Ends the case as skipped; the reason goes on its TAP line ("ok N - name # SKIP reason"). */
void test_skip(const char *reason) __attribute__((noreturn));
/* Prints a TAP diagnostic line ("# ..."). */
void test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define SKIP(reason) test_skip(reason)

/* A new directory /tmp/accel-TAG.XXXXXX in buf (fails the case when it
 * cannot), and its removal with everything under it (links not followed;
 * fails the case when something stays). */
void test_mkdtemp(char *buf, size_t len, const char *tag);
void test_rmtree(const char *path);
/* Entries of directory dir, not counting . and .. (fails the case when it
 * cannot be read). */
size_t test_count_entries(const char *dir);

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            test_fail(__FILE__, __LINE__, "assertion failed: %s", #cond);                          \
    } while (0)

#define ASSERT_INT_EQ(a, b)                                                                        \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_)                                                                              \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_);               \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                       \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,                    \
                      a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                     \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (h_ == NULL || strstr(h_, n_) == NULL)                                                  \
            test_fail(__FILE__, __LINE__, "%s does not contain \"%s\": \"%s\"", #hay, n_,          \
                      h_ ? h_ : "(null)");                                                         \
    } while (0)

#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        int rc_ = (int)(expr);                                                                     \
        if (rc_ != 0)                                                                              \
            test_fail(__FILE__, __LINE__, "%s returned %d, expected 0 (ACCEL_OK)", #expr, rc_);    \
    } while (0)

/* expr (an enum accel_err) succeeds; else e's message is shown. */
#define ASSERT_ACCEL_OK(expr, e)                                                                   \
    do {                                                                                           \
        enum accel_err rc_ = (expr);                                                               \
        if (rc_ != ACCEL_OK)                                                                       \
            test_fail(__FILE__, __LINE__, "%s: %s: %s", #expr, accel_errname(rc_), (e)->msg);      \
    } while (0)

/* expr fails with `code` and a message containing `needle`. */
#define ASSERT_ERR(expr, e, code, needle)                                                          \
    do {                                                                                           \
        enum accel_err rc_ = (expr);                                                               \
        if (rc_ != (code))                                                                         \
            test_fail(__FILE__, __LINE__, "%s: %s (\"%s\"), expected %s", #expr,                   \
                      accel_errname(rc_), rc_ ? (e)->msg : "", accel_errname(code));               \
        ASSERT_CONTAINS((e)->msg, needle);                                                         \
    } while (0)

/* Counting allocator: install, then fail the Nth allocation (0 = never). */
void test_alloc_install(void);
void test_alloc_fail_at(unsigned long n);
unsigned long test_alloc_count(void);
long test_alloc_live(void);

/* Prints every finding of a list as a TAP diagnostic line. */
struct accel_diags;
void test_note_diags(const struct accel_diags *d);

/* A 32-bit integer hash (good avalanche), for test data that is the same in
 * every process and every run without a random generator's state. */
unsigned test_mix32(unsigned x);

/* Path of the shared corpus folder (../shared/corpus or $ACCEL_SHARED/corpus). */
const char *test_corpus_dir(void);

#endif
