/*
 * test_base.c: the base component: the error enum and error struct, the
 * capped buffer, the allocator hooks, bounded reads and durable writes.
 *
 * File tests work in a fresh mkdtemp directory under /tmp that each case
 * removes when it passes (a failing case leaves it for inspection and prints
 * its name).  Nothing here needs privileges; the one case that needs an
 * unprivileged user skips under root and says why.
 */
#include <errno.h>
#include <grp.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/err.h"
#include "accel/fsutil.h"
#include "../harness/test.h"

/* ---------------------------------------------------------------- helpers */

static char tmpdir[64];

static const char *make_tmpdir(void)
{
    test_mkdtemp(tmpdir, sizeof(tmpdir), "test-base");
    return tmpdir;
}

static void remove_tmpdir(void)
{
    test_rmtree(tmpdir);
}

/* tmpdir/name in a static buffer (one at a time). */
static const char *in_tmp(const char *name)
{
    static char path[256];

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    return path;
}

static void put_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");

    ASSERT(f != NULL);
    ASSERT_INT_EQ(fwrite(content, 1, strlen(content), f), strlen(content));
    ASSERT_INT_EQ(fclose(f), 0);
}

/* ---------------------------------------------------------------- err */

TEST(err_every_code_has_distinct_texts)
{
    for (int i = 0; i < ACCEL_ERR__LAST; i++) {
        const char *s = accel_strerror((enum accel_err)i);
        const char *n = accel_errname((enum accel_err)i);

        ASSERT(s != NULL && s[0] != '\0');
        ASSERT(n != NULL && n[0] != '\0');
        ASSERT(strcmp(s, "unknown error") != 0);
        ASSERT(strcmp(n, "ACCEL_E?") != 0);
        ASSERT(strncmp(n, "ACCEL_", 6) == 0);
        for (int j = 0; j < i; j++) {
            if (strcmp(s, accel_strerror((enum accel_err)j)) == 0 ||
                strcmp(n, accel_errname((enum accel_err)j)) == 0)
                test_fail(__FILE__, __LINE__, "codes %d and %d share a text (%s / %s)", i, j, s, n);
        }
    }
    ASSERT_STR_EQ(accel_errname(ACCEL_OK), "ACCEL_OK");
    ASSERT_STR_EQ(accel_errname(ACCEL_ETOOBIG), "ACCEL_ETOOBIG");
    ASSERT_STR_EQ(accel_strerror(ACCEL_ENOMEM), "out of memory");
}

TEST(err_unknown_codes)
{
    ASSERT_STR_EQ(accel_strerror(ACCEL_ERR__LAST), "unknown error");
    ASSERT_STR_EQ(accel_strerror((enum accel_err)999), "unknown error");
    ASSERT_STR_EQ(accel_strerror((enum accel_err) - 1), "unknown error");
    ASSERT_STR_EQ(accel_errname(ACCEL_ERR__LAST), "ACCEL_E?");
    ASSERT_STR_EQ(accel_errname((enum accel_err)999), "ACCEL_E?");
}

/* The enum is append-only: these numbers are ABI. */
TEST(err_values_are_stable)
{
    ASSERT_INT_EQ(ACCEL_OK, 0);
    ASSERT_INT_EQ(ACCEL_ENOMEM, 1);
    ASSERT_INT_EQ(ACCEL_EINVAL, 2);
    ASSERT_INT_EQ(ACCEL_EIO, 3);
    ASSERT_INT_EQ(ACCEL_ETOOBIG, 4);
    ASSERT_INT_EQ(ACCEL_EPARSE, 5);
    ASSERT_INT_EQ(ACCEL_ECONFIG, 6);
    ASSERT_INT_EQ(ACCEL_EPOLICY, 7);
    ASSERT_INT_EQ(ACCEL_ENOTFOUND, 8);
    ASSERT_INT_EQ(ACCEL_EPERM, 9);
    ASSERT_INT_EQ(ACCEL_EUNSUPPORTED, 10);
    ASSERT_INT_EQ(ACCEL_ELAYOUT, 11);
    ASSERT_INT_EQ(ACCEL_ETIMEDOUT, 12);
    ASSERT_INT_EQ(ACCEL_EPEER, 13);
    ASSERT_INT_EQ(ACCEL_ENONCE, 14);
    ASSERT_INT_EQ(ACCEL_EBUSY, 15);
    ASSERT_INT_EQ(ACCEL_ENOSPC, 16);
}

TEST(err_set_clear_at)
{
    struct accel_error e;
    char longs[2000];

    memset(&e, 0x5a, sizeof(e));
    accel_error_clear(&e);
    ASSERT_INT_EQ(e.code, ACCEL_OK);
    ASSERT_INT_EQ(e.sys_errno, 0);
    ASSERT_INT_EQ(e.line, 0);
    ASSERT_STR_EQ(e.msg, "");
    ASSERT_STR_EQ(e.file, "");
    accel_error_clear(NULL);

    ASSERT_INT_EQ(accel_error_set(&e, ACCEL_ECONFIG, "key %s: %d", "num_processes", 7),
                  ACCEL_ECONFIG);
    ASSERT_INT_EQ(e.code, ACCEL_ECONFIG);
    ASSERT_STR_EQ(e.msg, "key num_processes: 7");
    ASSERT_INT_EQ(accel_error_set(NULL, ACCEL_EINVAL, "ignored"), ACCEL_EINVAL);

    /* Long texts are truncated, never overflowed. */
    memset(longs, 'x', sizeof(longs) - 1);
    longs[sizeof(longs) - 1] = '\0';
    accel_error_set(&e, ACCEL_EIO, "%s", longs);
    ASSERT_INT_EQ(strlen(e.msg), sizeof(e.msg) - 1);
    accel_error_at(&e, longs, 3, 14, longs);
    ASSERT_INT_EQ(strlen(e.file), sizeof(e.file) - 1);
    ASSERT_INT_EQ(strlen(e.key), sizeof(e.key) - 1);
    ASSERT_INT_EQ(e.line, 3);
    ASSERT_INT_EQ(e.column, 14);
    accel_error_at(&e, NULL, 1, 2, NULL);
    ASSERT_STR_EQ(e.file, "");
    ASSERT_STR_EQ(e.key, "");
    accel_error_at(NULL, "f", 1, 1, "k");
}

TEST(err_sys_saves_errno)
{
    struct accel_error e;
    char want[256];

    accel_error_clear(&e);
    errno = ENOENT;
    ASSERT_INT_EQ(accel_error_sys(&e, ACCEL_EIO, "couldn't open %s", "/x"), ACCEL_EIO);
    ASSERT_INT_EQ(e.sys_errno, ENOENT);
    ASSERT_INT_EQ(e.code, ACCEL_EIO);
    snprintf(want, sizeof(want), "couldn't open /x: %s", strerror(ENOENT));
    ASSERT_STR_EQ(e.msg, want);

    /* errno is read on entry, before formatting can change it. */
    errno = EACCES;
    accel_error_sys(&e, ACCEL_EPERM, "%s", "denied");
    ASSERT_INT_EQ(e.sys_errno, EACCES);
    ASSERT_CONTAINS(e.msg, strerror(EACCES));
    errno = EINTR;
    ASSERT_INT_EQ(accel_error_sys(NULL, ACCEL_EIO, "x"), ACCEL_EIO);
}

/* ---------------------------------------------------------------- buf */

TEST(buf_cap_is_enforced)
{
    struct accel_buf b;

    accel_buf_init(&b, 10);
    ASSERT_STR_EQ(accel_buf_str(&b), "");
    ASSERT_OK(accel_buf_add(&b, "12345", 5));
    ASSERT_INT_EQ(accel_buf_add(&b, "678901", 6), ACCEL_ETOOBIG);
    ASSERT_STR_EQ(accel_buf_str(&b), "12345");
    ASSERT_INT_EQ(b.len, 5);
    ASSERT_OK(accel_buf_puts(&b, "67890"));
    ASSERT_STR_EQ(accel_buf_str(&b), "1234567890");
    ASSERT_INT_EQ(accel_buf_puts(&b, "x"), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(accel_buf_printf(&b, "%d", 1), ACCEL_ETOOBIG);
    ASSERT_OK(accel_buf_add(&b, "", 0));
    ASSERT_STR_EQ(accel_buf_str(&b), "1234567890");
    ASSERT_INT_EQ(b.len, 10);
    /* A length that would wrap size_t is refused, not wrapped. */
    ASSERT_INT_EQ(accel_buf_add(&b, "x", SIZE_MAX), ACCEL_ETOOBIG);
    ASSERT_STR_EQ(accel_buf_str(&b), "1234567890");
    accel_buf_free(&b);
    ASSERT(b.data == NULL);
    accel_buf_free(&b);
}

TEST(buf_printf)
{
    struct accel_buf b;
    char big[300];

    accel_buf_init(&b, 100);
    ASSERT_OK(accel_buf_printf(&b, "%s=%d", "num_processes", 8));
    ASSERT_OK(accel_buf_printf(&b, ",%c", 'x'));
    ASSERT_STR_EQ(accel_buf_str(&b), "num_processes=8,x");
    ASSERT_INT_EQ(b.len, strlen("num_processes=8,x"));
    /* Past the cap: refused whole, content unchanged. */
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ASSERT_INT_EQ(accel_buf_printf(&b, "%s", big), ACCEL_ETOOBIG);
    ASSERT_STR_EQ(accel_buf_str(&b), "num_processes=8,x");
    accel_buf_free(&b);

    /* Growth across many doublings keeps every byte. */
    accel_buf_init(&b, 1u << 20);
    for (int i = 0; i < 10000; i++)
        ASSERT_OK(accel_buf_printf(&b, "%04d,", i % 10000));
    ASSERT_INT_EQ(b.len, 50000);
    ASSERT(memcmp(b.data + 5 * 1234, "1234,", 5) == 0);
    ASSERT_INT_EQ(b.data[b.len], '\0');
    accel_buf_free(&b);
}

TEST(buf_take_and_reset)
{
    struct accel_buf b;
    char *s;
    const char *before;
    size_t cap;

    accel_buf_init(&b, 64);
    s = accel_buf_take(&b);
    ASSERT_STR_EQ(s, ""); /* never NULL, even when nothing was appended */
    accel_free(s);

    ASSERT_OK(accel_buf_puts(&b, "hello"));
    s = accel_buf_take(&b);
    ASSERT_STR_EQ(s, "hello");
    ASSERT(b.data == NULL);
    ASSERT_INT_EQ(b.len, 0);
    ASSERT_STR_EQ(accel_buf_str(&b), "");
    ASSERT_OK(accel_buf_puts(&b, "again"));
    ASSERT_STR_EQ(accel_buf_str(&b), "again");
    accel_free(s);

    before = b.data;
    cap = b.cap;
    accel_buf_reset(&b);
    ASSERT_STR_EQ(accel_buf_str(&b), "");
    ASSERT_INT_EQ(b.len, 0);
    ASSERT(b.data == before); /* the memory is kept */
    ASSERT_INT_EQ(b.cap, cap);
    ASSERT_OK(accel_buf_puts(&b, "x"));
    ASSERT_STR_EQ(accel_buf_str(&b), "x");
    accel_buf_free(&b);

    accel_buf_init(&b, 8);
    accel_buf_reset(&b); /* on an empty buffer */
    ASSERT_STR_EQ(accel_buf_str(&b), "");
}

TEST(buf_reserve)
{
    struct accel_buf b;
    char *before;

    /* reserved room on a new buffer is an empty string (CI caught a base64
     * of "" read past its 64 bytes: the first allocation had no NUL) */
    accel_buf_init(&b, 100);
    ASSERT_OK(accel_buf_reserve(&b, 0));
    ASSERT(b.data != NULL);
    ASSERT_STR_EQ(accel_buf_str(&b), "");
    ASSERT_OK(accel_buf_reserve(&b, 90));
    ASSERT_STR_EQ(accel_buf_str(&b), "");
    ASSERT(b.cap >= 91);
    /* room reserved is used without moving the memory */
    before = b.data;
    for (int i = 0; i < 9; i++)
        ASSERT_OK(accel_buf_puts(&b, "0123456789"));
    ASSERT(b.data == before);
    ASSERT_INT_EQ(b.len, 90);
    /* the cap: refused, content unchanged */
    ASSERT_INT_EQ(accel_buf_reserve(&b, 11), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(accel_buf_reserve(&b, SIZE_MAX), ACCEL_ETOOBIG);
    ASSERT_OK(accel_buf_reserve(&b, 10));
    ASSERT_INT_EQ(b.len, 90);
    ASSERT_INT_EQ(b.data[90], '\0');
    accel_buf_free(&b);
}

TEST(buf_out_of_memory_keeps_content)
{
    struct accel_buf b;
    char chunk[100];
    long live;

    test_alloc_install();
    live = test_alloc_live();
    memset(chunk, 'z', sizeof(chunk));
    accel_buf_init(&b, 1000);
    ASSERT_OK(accel_buf_add(&b, "abc", 3));
    test_alloc_fail_at(1);
    ASSERT_INT_EQ(accel_buf_add(&b, chunk, sizeof(chunk)), ACCEL_ENOMEM);
    ASSERT_STR_EQ(accel_buf_str(&b), "abc");
    ASSERT_INT_EQ(b.len, 3);
    test_alloc_fail_at(1);
    ASSERT(accel_buf_take(&(struct accel_buf){NULL, 0, 0, 8}) == NULL);
    test_alloc_fail_at(0);
    accel_buf_free(&b);
    ASSERT_INT_EQ(test_alloc_live(), live);
}

/* ---------------------------------------------------------------- alloc */

TEST(alloc_calloc_overflow)
{
    unsigned char *p;

    ASSERT(accel_calloc(SIZE_MAX / 2 + 1, 2) == NULL);
    ASSERT(accel_calloc(SIZE_MAX, SIZE_MAX) == NULL);
    ASSERT(accel_calloc(2, SIZE_MAX / 2 + 1) == NULL);
    p = accel_calloc(16, 4);
    ASSERT(p != NULL);
    for (int i = 0; i < 64; i++)
        ASSERT_INT_EQ(p[i], 0);
    accel_free(p);
    p = accel_calloc(0, 8); /* zero bytes still gives a pointer to free */
    ASSERT(p != NULL);
    accel_free(p);
    accel_free(NULL);
}

TEST(alloc_hooks_and_strings)
{
    char *s;
    long live;

    test_alloc_install();
    live = test_alloc_live();
    test_alloc_fail_at(0);
    s = accel_strdup("fsdp_config");
    ASSERT_STR_EQ(s, "fsdp_config");
    ASSERT_INT_EQ(test_alloc_live(), live + 1);
    accel_free(s);
    s = accel_strndup("mixed_precision", 5);
    ASSERT_STR_EQ(s, "mixed");
    accel_free(s);
    s = accel_malloc(0);
    ASSERT(s != NULL);
    s = accel_realloc(s, 100);
    ASSERT(s != NULL);
    accel_free(s);
    ASSERT_INT_EQ(test_alloc_live(), live);

    test_alloc_fail_at(1);
    ASSERT(accel_strdup("x") == NULL);
    test_alloc_fail_at(1);
    ASSERT(accel_calloc(4, 4) == NULL);
    test_alloc_fail_at(0);
    ASSERT_INT_EQ(test_alloc_live(), live);

    accel_alloc_set(NULL); /* back to libc */
    s = accel_strdup("libc");
    ASSERT_STR_EQ(s, "libc");
    accel_free(s);
}

/* ---------------------------------------------------------------- fsutil */

TEST(read_file_round_trip)
{
    struct accel_error e;
    char *data = NULL;
    size_t len = 99;

    make_tmpdir();
    put_file(in_tmp("a.yaml"), "num_processes: 2\n");
    accel_error_clear(&e);
    ASSERT_OK(accel_read_file(in_tmp("a.yaml"), 1024, &data, &len, &e));
    ASSERT_INT_EQ(len, 17);
    ASSERT_STR_EQ(data, "num_processes: 2\n");
    accel_free(data);

    /* Exactly the cap is allowed. */
    ASSERT_OK(accel_read_file(in_tmp("a.yaml"), 17, &data, &len, &e));
    ASSERT_INT_EQ(len, 17);
    accel_free(data);

    /* An empty file gives an empty, NUL-terminated buffer. */
    put_file(in_tmp("empty"), "");
    ASSERT_OK(accel_read_file(in_tmp("empty"), 1024, &data, &len, &e));
    ASSERT_INT_EQ(len, 0);
    ASSERT(data != NULL);
    ASSERT_STR_EQ(data, "");
    accel_free(data);
    remove_tmpdir();
}

TEST(read_file_missing)
{
    struct accel_error e;
    char *data = (char *)"unchanged?";
    size_t len = 5;

    make_tmpdir();
    accel_error_clear(&e);
    ASSERT_INT_EQ(accel_read_file(in_tmp("nope.yaml"), 1024, &data, &len, &e), ACCEL_ENOTFOUND);
    ASSERT(data == NULL);
    ASSERT_INT_EQ(len, 0);
    ASSERT_INT_EQ(e.code, ACCEL_ENOTFOUND);
    ASSERT_INT_EQ(e.sys_errno, ENOENT);
    ASSERT_CONTAINS(e.msg, "nope.yaml");

    /* A file used as a directory (ENOTDIR) is "not found" too. */
    put_file(in_tmp("file"), "x");
    ASSERT_INT_EQ(accel_read_file(in_tmp("file/child"), 1024, &data, &len, &e), ACCEL_ENOTFOUND);
    ASSERT_INT_EQ(e.sys_errno, ENOTDIR);
    remove_tmpdir();
}

TEST(read_file_not_regular)
{
    struct accel_error e;
    char *data;
    size_t len;

    make_tmpdir();
    accel_error_clear(&e);
    ASSERT_INT_EQ(accel_read_file(tmpdir, 1024, &data, &len, &e), ACCEL_EINVAL);
    ASSERT(data == NULL);
    ASSERT_CONTAINS(e.msg, "not a regular file");
    /* A FIFO must not block the reader: it is refused before any read. */
    ASSERT_INT_EQ(mkfifo(in_tmp("fifo"), 0600), 0);
    ASSERT_INT_EQ(accel_read_file(in_tmp("fifo"), 1024, &data, &len, &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_read_file("/dev/null", 1024, &data, &len, &e), ACCEL_EINVAL);
    remove_tmpdir();
}

TEST(read_file_over_cap)
{
    struct accel_error e;
    char *data;
    size_t len;

    make_tmpdir();
    put_file(in_tmp("big"), "0123456789A");
    accel_error_clear(&e);
    ASSERT_INT_EQ(accel_read_file(in_tmp("big"), 10, &data, &len, &e), ACCEL_ETOOBIG);
    ASSERT(data == NULL);
    ASSERT_INT_EQ(e.code, ACCEL_ETOOBIG);
    ASSERT_CONTAINS(e.msg, "11 bytes");
    ASSERT_INT_EQ(accel_read_file(in_tmp("big"), 0, &data, &len, &e), ACCEL_ETOOBIG);
    remove_tmpdir();
}

/* Reads the mode-000 file; exits 0 when the result is ACCEL_EPERM/EACCES. */
static int try_unreadable(const char *path)
{
    struct accel_error e;
    char *data = NULL;
    size_t len;

    accel_error_clear(&e);
    if (accel_read_file(path, 1024, &data, &len, &e) != ACCEL_EPERM)
        return 1;
    return (e.sys_errno == EACCES && data == NULL) ? 0 : 2;
}

TEST(read_file_unreadable)
{
    make_tmpdir();
    put_file(in_tmp("secret"), "x");
    ASSERT_INT_EQ(chmod(in_tmp("secret"), 0), 0);
    if (geteuid() != 0) {
        ASSERT_INT_EQ(try_unreadable(in_tmp("secret")), 0);
    } else {
        /* root reads anything: check as the unprivileged uid 65534, which is
         * how the plugin reads a user's file */
        int status = 0;
        pid_t pid;
        ASSERT_INT_EQ(chmod(tmpdir, 0755), 0);
        pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
                _exit(3);
            _exit(try_unreadable(in_tmp("secret")));
        }
        ASSERT(waitpid(pid, &status, 0) == pid);
        ASSERT(WIFEXITED(status));
        ASSERT_INT_EQ(WEXITSTATUS(status), 0);
    }
    remove_tmpdir();
}

TEST(read_file_out_of_memory)
{
    struct accel_error e;
    char *data;
    size_t len;
    long live;

    make_tmpdir();
    put_file(in_tmp("a"), "abc");
    test_alloc_install();
    live = test_alloc_live();
    test_alloc_fail_at(1);
    accel_error_clear(&e);
    ASSERT_INT_EQ(accel_read_file(in_tmp("a"), 1024, &data, &len, &e), ACCEL_ENOMEM);
    ASSERT(data == NULL);
    test_alloc_fail_at(0);
    ASSERT_INT_EQ(test_alloc_live(), live);
    remove_tmpdir();
}

TEST(write_durable_replaces_atomically)
{
    struct accel_error e;
    struct stat st1, st2;
    char *data;
    size_t len;
    char old[16] = {0};
    int fd;

    make_tmpdir();
    accel_error_clear(&e);
    ASSERT_OK(accel_write_durable(in_tmp("out.env"), "old\n", 4, 0644, &e));
    ASSERT_INT_EQ(stat(in_tmp("out.env"), &st1), 0);
    /* A reader that opened the old file keeps reading the old content: the
     * new one arrives by rename, not by rewriting the file in place. */
    fd = open(in_tmp("out.env"), O_RDONLY);
    ASSERT(fd >= 0);

    ASSERT_OK(accel_write_durable(in_tmp("out.env"), "new content\n", 12, 0644, &e));
    ASSERT_INT_EQ(stat(in_tmp("out.env"), &st2), 0);
    ASSERT(st1.st_ino != st2.st_ino);
    ASSERT_INT_EQ(read(fd, old, sizeof(old) - 1), 4);
    ASSERT_STR_EQ(old, "old\n");
    close(fd);

    ASSERT_OK(accel_read_file(in_tmp("out.env"), 1024, &data, &len, &e));
    ASSERT_STR_EQ(data, "new content\n");
    ASSERT_INT_EQ(len, 12);
    accel_free(data);

    /* No temp file is left behind. */
    ASSERT_INT_EQ(test_count_entries(tmpdir), 1);

    /* Empty content is a valid file. */
    ASSERT_OK(accel_write_durable(in_tmp("out.env"), "", 0, 0644, &e));
    ASSERT_INT_EQ(stat(in_tmp("out.env"), &st2), 0);
    ASSERT_INT_EQ(st2.st_size, 0);
    ASSERT_INT_EQ(test_count_entries(tmpdir), 1);
    remove_tmpdir();
}

TEST(write_durable_mode)
{
    struct accel_error e;
    struct stat st;

    make_tmpdir();
    umask(022);
    accel_error_clear(&e);
    ASSERT_OK(accel_write_durable(in_tmp("a"), "x", 1, 0600, &e));
    ASSERT_INT_EQ(stat(in_tmp("a"), &st), 0);
    ASSERT_INT_EQ(st.st_mode & 0777, 0600);
    ASSERT_OK(accel_write_durable(in_tmp("b"), "x", 1, 0640, &e));
    ASSERT_INT_EQ(stat(in_tmp("b"), &st), 0);
    ASSERT_INT_EQ(st.st_mode & 0777, 0640);
    /* Replacing a file gives it the new mode, not the old one. */
    ASSERT_OK(accel_write_durable(in_tmp("b"), "y", 1, 0600, &e));
    ASSERT_INT_EQ(stat(in_tmp("b"), &st), 0);
    ASSERT_INT_EQ(st.st_mode & 0777, 0600);
    remove_tmpdir();
}

TEST(write_durable_failures_leave_nothing)
{
    struct accel_error e;
    struct stat st;

    make_tmpdir();
    accel_error_clear(&e);
    /* Into a missing directory: nothing to create the temp file in. */
    ASSERT_INT_EQ(accel_write_durable(in_tmp("nodir/out"), "x", 1, 0644, &e), ACCEL_ENOTFOUND);
    ASSERT_INT_EQ(e.sys_errno, ENOENT);
    ASSERT_INT_EQ(test_count_entries(tmpdir), 0);

    /* Onto a directory: the rename fails, the temp file is removed and the
     * directory is untouched. */
    ASSERT_INT_EQ(mkdir(in_tmp("dir"), 0755), 0);
    accel_error_clear(&e);
    ASSERT_INT_EQ(accel_write_durable(in_tmp("dir"), "x", 1, 0644, &e), ACCEL_EIO);
    ASSERT(e.sys_errno != 0);
    ASSERT_CONTAINS(e.msg, "rename");
    ASSERT_INT_EQ(test_count_entries(tmpdir), 1);
    ASSERT_INT_EQ(stat(in_tmp("dir"), &st), 0);
    ASSERT(S_ISDIR(st.st_mode));

    /* A path too long for the temp name is refused before touching disk. */
    {
        char longpath[5000];
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[0] = '/';
        longpath[sizeof(longpath) - 1] = '\0';
        ASSERT_INT_EQ(accel_write_durable(longpath, "x", 1, 0644, &e), ACCEL_EINVAL);
    }
    remove_tmpdir();
}

TEST_LIST(T(err_every_code_has_distinct_texts), T(err_unknown_codes), T(err_values_are_stable),
          T(err_set_clear_at), T(err_sys_saves_errno), T(buf_cap_is_enforced), T(buf_printf),
          T(buf_take_and_reset), T(buf_reserve), T(buf_out_of_memory_keeps_content),
          T(alloc_calloc_overflow), T(alloc_hooks_and_strings), T(read_file_round_trip),
          T(read_file_missing), T(read_file_not_regular), T(read_file_over_cap),
          T(read_file_unreadable), T(read_file_out_of_memory), T(write_durable_replaces_atomically),
          T(write_durable_mode), T(write_durable_failures_leave_nothing))
