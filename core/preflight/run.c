/*
 * run.c: the preflight's child processes (the job's Python).  Each runs in a
 * process group of its own with the caller's environment, its stdout and
 * stderr read into a short tail (for the reason of a failure) and fd 3 into
 * a bounded buffer (what it reports).  All of them are read together by one
 * poll loop against one deadline; past it the groups are killed, so nothing
 * a child started is left running.  Not a general launcher: cli/procs.c
 * runs the job's own processes.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "pf_int.h"

extern char **environ;

void pf__start(struct pf__proc *p, const char *const argv[])
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int out[2] = {-1, -1}, rep[2] = {-1, -1}, rc;

    memset(p, 0, sizeof(*p));
    p->pid = -1;
    p->fd_out = p->fd_rep = -1;
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
        snprintf(p->spawn_err, sizeof(p->spawn_err), "couldn't make a pipe: %s", strerror(errno));
        goto fail;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    posix_spawn_file_actions_adddup2(&fa, rep[1], 3);
    /* a group of its own: a timeout kills whatever the child started too */
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    /* posix_spawn's argv is char *const[] for history's sake; it writes nothing */
    rc = posix_spawn(&p->pid, argv[0], &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) {
        p->pid = -1;
        snprintf(p->spawn_err, sizeof(p->spawn_err), "couldn't run %s: %s", argv[0], strerror(rc));
        goto fail;
    }
    close(out[1]);
    close(rep[1]);
    p->fd_out = out[0];
    p->fd_rep = rep[0];
    fcntl(p->fd_out, F_SETFL, O_NONBLOCK);
    fcntl(p->fd_rep, F_SETFL, O_NONBLOCK);
    return;
fail:
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (rep[i] >= 0)
            close(rep[i]);
    }
    p->done = true;
}

/* Keeps the last PF_TAIL bytes of what the child printed. */
static void keep_tail(struct pf__proc *p, const char *b, size_t n)
{
    if (n >= PF_TAIL) {
        memcpy(p->tail, b + n - PF_TAIL, PF_TAIL);
        p->tail_len = PF_TAIL;
    } else {
        size_t keep = p->tail_len + n > PF_TAIL ? PF_TAIL - n : p->tail_len;
        memmove(p->tail, p->tail + p->tail_len - keep, keep);
        memcpy(p->tail + keep, b, n);
        p->tail_len = keep + n;
    }
    p->tail[p->tail_len] = '\0';
}

static void keep_report(struct pf__proc *p, const char *b, size_t n)
{
    if (p->rep_len + n > PF_OUT_MAX) {
        p->rep_over = true;
        return;
    }
    if (!p->rep && !(p->rep = accel_malloc(PF_OUT_MAX + 1))) {
        p->rep_over = true; /* reported as no answer */
        return;
    }
    memcpy(p->rep + p->rep_len, b, n);
    p->rep_len += n;
    p->rep[p->rep_len] = '\0';
}

/* Reads what is there on one of p's pipes; closes it at end of file.
 * Whether it read anything. */
static bool drain(struct pf__proc *p, int *fd, bool report)
{
    char b[8192];
    ssize_t n = read(*fd, b, sizeof(b));

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return false;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return false;
    }
    if (report)
        keep_report(p, b, (size_t)n);
    else
        keep_tail(p, b, (size_t)n);
    return true;
}

/* Whether p's child has exited (left a zombie): not reaped, so its process
 * group id stays its own until pf__wait_all kills the group. */
static bool exited(struct pf__proc *p)
{
    siginfo_t si;

    if (p->done || p->pid < 0)
        return true;
    memset(&si, 0, sizeof(si));
    while (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        if (errno != EINTR)
            return true; /* not ours to wait for: nothing to wait for */
    return si.si_pid == p->pid;
}

/* Reads what the pipes still hold (they are non-blocking): the child has
 * exited, but what it wrote last may not have been read yet. */
static void drain_rest(struct pf__proc *p)
{
    for (int k = 0; k < 2; k++) {
        int *fd = k ? &p->fd_rep : &p->fd_out;
        /* at most 64 reads of 8 KiB: more than PF_OUT_MAX, and bounded
         * against a grandchild that keeps writing */
        for (int i = 0; i < 64 && *fd >= 0 && drain(p, fd, k == 1); i++)
            ;
    }
}

/* The pipes of procs[0..n) still open, for poll: at most PF_MAX_PROCS. */
#define PF_MAX_PROCS 4
static size_t open_pipes(struct pf__proc *procs, size_t n, struct pollfd *fds,
                         struct pf__proc **owner, int **slot)
{
    size_t nf = 0;

    for (size_t i = 0; i < n && i < PF_MAX_PROCS; i++) {
        int *mine[2] = {&procs[i].fd_out, &procs[i].fd_rep};
        for (int k = 0; k < 2; k++) {
            if (*mine[k] < 0)
                continue;
            fds[nf] = (struct pollfd){.fd = *mine[k], .events = POLLIN};
            owner[nf] = &procs[i];
            slot[nf++] = mine[k];
        }
    }
    return nf;
}

void pf__wait_all(struct pf__proc *procs, size_t n, double deadline)
{
    for (;;) {
        struct pollfd fds[2 * PF_MAX_PROCS];
        struct pf__proc *owner[2 * PF_MAX_PROCS];
        int *slot[2 * PF_MAX_PROCS];
        size_t nf = open_pipes(procs, n, fds, owner, slot), live = 0;
        int ms = accel_ms_left(deadline);

        for (size_t i = 0; i < n; i++)
            live += !exited(&procs[i]);
        if (live == 0 || ms == 0)
            break; /* all exited (what they started may hold a pipe open), or out of time */
        /* a child's exit is seen within 50 ms even when something it started
         * keeps its pipes open */
        if (poll(fds, nf, ms < 50 ? ms : 50) < 0 && errno != EINTR)
            break;
        for (size_t k = 0; k < nf; k++)
            if (fds[k].revents)
                drain(owner[k], slot[k], slot[k] == &owner[k]->fd_rep);
    }
    for (size_t i = 0; i < n; i++) {
        struct pf__proc *p = &procs[i];
        pid_t r;

        if (p->done || p->pid < 0)
            continue;
        p->timed_out = !exited(p);
        drain_rest(p);
        /* the whole group (the child, or its zombie, still holds its id):
         * nothing it started outlives it */
        kill(-p->pid, SIGKILL);
        do
            r = waitpid(p->pid, &p->status, 0);
        while (r < 0 && errno == EINTR);
        p->done = true;
        if (p->fd_out >= 0)
            close(p->fd_out);
        if (p->fd_rep >= 0)
            close(p->fd_rep);
        p->fd_out = p->fd_rep = -1;
    }
}

void pf__proc_free(struct pf__proc *p)
{
    accel_free(p->rep);
    p->rep = NULL;
}

void pf__proc_why(const struct pf__proc *p, unsigned timeout_ms, char *buf, size_t size)
{
    char what[96], last[PF_TAIL + 1];
    const char *t = p->tail;
    size_t len = p->tail_len;

    if (p->spawn_err[0]) {
        snprintf(buf, size, "%s", p->spawn_err);
        return;
    }
    if (p->timed_out)
        snprintf(what, sizeof(what), "did not finish within %u s", (timeout_ms + 999) / 1000);
    else if (WIFSIGNALED(p->status))
        snprintf(what, sizeof(what), "was killed by signal %d", WTERMSIG(p->status));
    else if (WIFEXITED(p->status) && WEXITSTATUS(p->status) != 0)
        snprintf(what, sizeof(what), "exited with status %d", WEXITSTATUS(p->status));
    else
        snprintf(what, sizeof(what), "gave no report");
    /* the last non-empty line it printed (a traceback's last line says why) */
    while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == ' '))
        len--;
    {
        size_t s = len;
        while (s > 0 && t[s - 1] != '\n')
            s--;
        snprintf(last, sizeof(last), "%.*s", (int)(len - s), t + s);
    }
    snprintf(buf, size, "%s%s%s", what, last[0] ? ": " : "", last);
}
