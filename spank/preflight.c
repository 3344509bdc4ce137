/*
 * preflight.c: --accel-preflight[=full].  At the end of task_init, with the
 * task's environment complete, every task runs `accelrun preflight --task`
 * (core/preflight through the CLI: the plugin links neither the job's
 * Python nor the rendezvous) as the job's user, waits for it and relays its
 * lines to the user's terminal; rank 0's lines are the table.  Exit 0 lets
 * the program start; anything else fails the task (srun exits 1, no node
 * is drained).  Bounded: the helper has its own deadlines, and the plugin
 * kills its process group past PREFLIGHT_LIMIT_S.
 *
 * The helper is ACCELRUN_BIN (PREFIX/bin/accelrun, set by the build) or
 * accelrun=/PATH on the plugstack line; records go to preflight_dir=/DIR.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"

#ifndef ACCELRUN_BIN
#define ACCELRUN_BIN "/usr/local/bin/accelrun"
#endif
#define PREFLIGHT_LIMIT_S 600

/* Relays the helper's output a line at a time (a partial last line too). */
static void relay(char *buf, size_t *len, bool flush)
{
    char *nl;
    size_t used = 0;

    while ((nl = memchr(buf + used, '\n', *len - used)) != NULL) {
        *nl = '\0';
        slurm_spank_log("%s", buf + used);
        used = (size_t)(nl - buf) + 1;
    }
    if (flush && used < *len) {
        buf[*len] = '\0';
        slurm_spank_log("%s", buf + used);
        used = *len;
    }
    memmove(buf, buf + used, *len - used);
    *len -= used;
}

static void child(int out, char **argv, char **env)
{
    dup2(out, 1);
    dup2(out, 2);
    if (out > 2)
        close(out);
    setpgid(0, 0);
    execve(argv[0], argv, env);
    dprintf(2, PLUGIN_NAME ": couldn't run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int plugin_preflight_task(spank_t sp, uint32_t rank)
{
    static char built_in[] = ACCELRUN_BIN, word_preflight[] = "preflight", word_task[] = "--task",
                word_full[] = "--full", word_dir[] = "--record-dir", word_site[] = "--site",
                word_dashes[] = "--";
    char *bin = plugin.args.accelrun[0] ? plugin.args.accelrun : built_in;
    char *argv[13], buf[4097];
    char **env = NULL;
    size_t n = 0, len = 0;
    int fds[2], status = -1;
    bool killed = false;
    struct timespec end;
    pid_t pid, w;

    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == NULL) {
        slurm_error(PLUGIN_NAME ": preflight: couldn't read the task's environment");
        return -1;
    }
    /* execve's argv is char *const[]: the words live in writable arrays */
    argv[n++] = bin;
    argv[n++] = word_preflight;
    argv[n++] = word_task;
    if (plugin.preflight == 2)
        argv[n++] = word_full;
    if (plugin.args.preflight_dir[0]) {
        argv[n++] = word_dir;
        argv[n++] = plugin.args.preflight_dir;
    }
    if (plugin.args.site[0]) {
        argv[n++] = word_site;
        argv[n++] = plugin.args.site;
    }
    argv[n++] = word_dashes; /* the config is never taken for an option */
    argv[n++] = plugin.config_abs;
    argv[n] = NULL;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += PREFLIGHT_LIMIT_S;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        slurm_error(PLUGIN_NAME ": preflight: couldn't make a pipe: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        slurm_error(PLUGIN_NAME ": preflight: couldn't fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], argv, env);
    }
    close(fds[1]);
    for (;;) {
        struct pollfd p = {fds[0], POLLIN, 0};
        struct timespec now;
        ssize_t r;
        int ready;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec >= end.tv_sec) {
            killed = true;
            break;
        }
        ready = poll(&p, 1, (int)(end.tv_sec - now.tv_sec) * 1000);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            killed = ready == 0;
            break;
        }
        r = read(fds[0], buf + len, sizeof(buf) - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        relay(buf, &len, len == sizeof(buf) - 1);
    }
    relay(buf, &len, true);
    close(fds[0]);
    if (killed) {
        /* its group, before it is reaped: the id cannot be another's yet */
        kill(-pid, SIGKILL);
        slurm_error(PLUGIN_NAME ": rank %u: preflight: no answer within %d s: stopped", rank,
                    PREFLIGHT_LIMIT_S);
    }
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (w != pid) {
        slurm_error(PLUGIN_NAME ": rank %u: preflight: couldn't wait for %s: %s", rank, bin,
                    strerror(errno));
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
        slurm_error(PLUGIN_NAME ": rank %u: preflight: %s %s %d", rank, bin,
                    WIFEXITED(status) ? "exited with status" : "was killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
}
