/*
 * tests/harness/test.c: runs each case in a forked child with a timeout and
 * prints TAP.  `./test_x name` runs one case in-process (for gdb).
 */
#define _GNU_SOURCE /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/diag.h"
#include "test.h"

#define TEST_TIMEOUT_S 60
#define SKIP_EXIT 77

static const void *case_arg;
static int skip_fd = -1; /* in a case's child: the pipe that takes its SKIP reason */

const void *test_arg(void)
{
    return case_arg;
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stdout, "#   %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
    _exit(1);
}

void test_skip(const char *reason)
{
    fprintf(stdout, "#   SKIP: %s\n", reason);
    fflush(stdout);
    if (skip_fd >= 0 && write(skip_fd, reason, strnlen(reason, 400)) < 0)
        fputs("#   (the SKIP reason did not reach the runner)\n", stdout);
    _exit(SKIP_EXIT);
}

void test_note(const char *fmt, ...)
{
    va_list ap;

    fputs("#   ", stdout);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

void test_note_diags(const struct accel_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        char b[1400];
        accel_diag_format(&d->v[i], b, sizeof(b));
        test_note("  %s", b);
    }
}

/* ---- counting allocator ---- */
static unsigned long alloc_calls, alloc_fail_at;
static long alloc_live;

static void *count_malloc(size_t n)
{
    alloc_calls++;
    if (alloc_fail_at != 0 && alloc_calls == alloc_fail_at)
        return NULL;
    alloc_live++;
    return malloc(n);
}

static void *count_realloc(void *p, size_t n)
{
    alloc_calls++;
    if (alloc_fail_at != 0 && alloc_calls == alloc_fail_at)
        return NULL;
    if (p == NULL)
        alloc_live++;
    return realloc(p, n);
}

static void count_free(void *p)
{
    if (p != NULL)
        alloc_live--;
    free(p);
}

void test_alloc_install(void)
{
    static const struct accel_alloc_hooks h = {count_malloc, count_realloc, count_free};
    accel_alloc_set(&h);
}

void test_alloc_fail_at(unsigned long n)
{
    alloc_calls = 0;
    alloc_fail_at = n;
}

unsigned long test_alloc_count(void)
{
    return alloc_calls;
}

long test_alloc_live(void)
{
    return alloc_live;
}

const char *test_corpus_dir(void)
{
    const char *s = getenv("ACCEL_SHARED");
    static char buf[4096];

    snprintf(buf, sizeof(buf), "%s/corpus", s ? s : "../shared");
    return buf;
}

/* Runs tc in a forked child; its exit code, and a SKIP's reason in `why`. */
static int run_one(const struct test_case *tc, char *why, size_t whylen)
{
    pid_t pid;
    int status = 0, pfd[2];
    ssize_t n;

    why[0] = '\0';
    fflush(stdout);
    /* non-blocking: a grandchild that outlives the case may hold the write
     * end, and the reason is in the pipe before the child exits anyway */
    if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0)
        return 1;
    case_arg = tc->arg;
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return 1;
    }
    if (pid == 0) {
        close(pfd[0]);
        skip_fd = pfd[1];
        /* a process group of its own: what the case forks and leaves behind
         * (a rank stuck after a failed assertion, or after the alarm) is
         * killed with it below, and never holds the runner's output pipe */
        setpgid(0, 0);
        alarm(TEST_TIMEOUT_S);
        tc->fn();
        fflush(stdout);
        _exit(0);
    }
    setpgid(pid, pid); /* also here: no race with the child's first fork */
    close(pfd[1]);
    while (waitpid(pid, &status, 0) < 0)
        ;
    kill(-pid, SIGKILL);
    n = read(pfd[0], why, whylen - 1);
    why[n > 0 ? n : 0] = '\0';
    close(pfd[0]);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        printf("#   killed by signal %d%s\n", WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
        return 1;
    }
    return 1;
}

int test_main(int argc, char **argv, const struct test_case *cases, size_t n)
{
    int failed = 0, skipped = 0;

    if (argc > 1) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(cases[i].name, argv[1]) == 0) {
                case_arg = cases[i].arg;
                cases[i].fn();
                printf("ok %s\n", cases[i].name);
                return 0;
            }
        fprintf(stderr, "no test named %s\n", argv[1]);
        return 2;
    }
    printf("1..%zu\n", n);
    for (size_t i = 0; i < n; i++) {
        char why[512];
        int rc = run_one(&cases[i], why, sizeof(why));
        if (rc == 0) {
            printf("ok %zu - %s\n", i + 1, cases[i].name);
        } else if (rc == SKIP_EXIT) {
            printf("ok %zu - %s # SKIP %s\n", i + 1, cases[i].name,
                   why[0] ? why : "(no reason given)");
            skipped++;
        } else {
            printf("not ok %zu - %s\n", i + 1, cases[i].name);
            failed++;
        }
        fflush(stdout);
    }
    printf("# %s: %zu passed, %d failed, %d skipped\n", argv[0],
           n - (size_t)failed - (size_t)skipped, failed, skipped);
    return failed ? 1 : 0;
}

unsigned test_mix32(unsigned x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

void test_mkdtemp(char *buf, size_t len, const char *tag)
{
    if ((size_t)snprintf(buf, len, "/tmp/accel-%s.XXXXXX", tag) >= len || mkdtemp(buf) == NULL)
        test_fail(__FILE__, __LINE__, "mkdtemp of /tmp/accel-%s.XXXXXX: %s", tag, strerror(errno));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_rmtree(const char *path)
{
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        test_fail(__FILE__, __LINE__, "could not remove %s: %s", path, strerror(errno));
}

size_t test_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        test_fail(__FILE__, __LINE__, "could not read %s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}
