/*
 * replay_main.c: a plain main() for the fuzz targets, so that `make test`
 * replays the seed corpus and every saved crasher without libFuzzer or clang.
 *
 * usage: fuzz_NAME_replay DIR...
 * Runs LLVMFuzzerTestOneInput once on every regular file (names starting with
 * '.' skipped, sorted by name) in each DIR; a DIR that does not exist counts
 * as empty.  Prints "NAME: replayed N inputs".  A broken rule inside the
 * target aborts, so a failing input stops the run with the usual signal; the
 * name of the input being run is printed first on stderr when ACCEL_FUZZ_V is
 * set.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INPUT_MAX (4u << 20) /* bytes read from one input; the parser caps at 1 MiB */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int skip_dot(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* Reads at most INPUT_MAX bytes of `path` into a new buffer (never NULL on
 * success, even when empty); returns -1 on error. */
static int read_input(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    size_t n;

    if (f == NULL)
        return -1;
    buf = malloc(INPUT_MAX);
    if (buf == NULL) {
        fclose(f);
        return -1;
    }
    n = fread(buf, 1, INPUT_MAX, f);
    if (ferror(f)) {
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    *out = buf;
    *len = n;
    return 0;
}

/* Runs every input in `dir`; returns how many, or -1 on an error. */
static long replay_dir(const char *dir, const char *name, int namelen, int verbose)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, skip_dot, alphasort);
    long ran = 0;

    if (n < 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "%.*s: couldn't read %s: %s\n", namelen, name, dir, strerror(errno));
        return -1;
    }
    for (int j = 0; j < n; j++) {
        char path[4096];
        struct stat st;
        uint8_t *data;
        size_t len;

        snprintf(path, sizeof(path), "%s/%s", dir, list[j]->d_name);
        if (ran < 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            goto next;
        if (read_input(path, &data, &len) != 0) {
            fprintf(stderr, "%.*s: couldn't read %s: %s\n", namelen, name, path, strerror(errno));
            ran = -1;
            goto next;
        }
        if (verbose)
            fprintf(stderr, "%.*s: %s\n", namelen, name, path);
        LLVMFuzzerTestOneInput(data, len);
        free(data);
        ran++;
    next:
        free(list[j]);
    }
    free(list);
    return ran;
}

int main(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    size_t namelen = strlen(name);
    unsigned long total = 0;
    int verbose = getenv("ACCEL_FUZZ_V") != NULL;

    if (namelen > 7 && strcmp(name + namelen - 7, "_replay") == 0)
        namelen -= 7;
    for (int i = 1; i < argc; i++) {
        long ran = replay_dir(argv[i], name, (int)namelen, verbose);
        if (ran < 0)
            return 1;
        total += (unsigned long)ran;
    }
    printf("%.*s: replayed %lu inputs\n", (int)namelen, name, total);
    return 0;
}
