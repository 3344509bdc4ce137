/*
 * procs.c: start, watch and stop the ranks of `accelrun launch`.
 *
 * One thread, one poll() loop over a signalfd (SIGCHLD, SIGINT, SIGTERM,
 * SIGHUP, blocked for the launcher) and two pipes per rank.  Each rank runs
 * in a process group of its own, so a signal reaches what the rank started
 * too, and a terminal's Ctrl-C reaches only the launcher, which forwards it
 * once (a second one kills).  Output is relayed by whole lines with a "[R] "
 * prefix; a line longer than the buffer is relayed in pieces.  When a rank
 * fails, the others get SIGTERM, then SIGKILL after the grace period.
 *
 * Nothing is left behind: the launcher is a child subreaper, so what a rank
 * started and left comes back to it as its child; a signal goes to every
 * rank's process group, also once its leader has ended (the group lives while
 * a member does), and to adopted children outside those groups; and the
 * launcher returns only when it has no child left.  What outlives ranks that
 * all ended gets SIGTERM, then SIGKILL after the grace period.
 *
 * SIGPIPE is ignored (the ranks get it back at exec).  When the reader of the
 * launcher's output goes away (EPIPE), the job is stopped as on SIGTERM, the
 * way a pipeline's writer ends when its reader does, and the launcher exits
 * 141; its output is dropped from then on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accel/clock.h"
#include "accel/err.h"
#include "accel/topo.h"
#include "procs.h"

#define LINE_MAX_BYTES 65536

struct stream {
    int fd;      /* read end, -1 when closed */
    FILE *to;    /* stdout or stderr, NULL = not shown */
    size_t used; /* bytes of an unfinished line */
    char buf[LINE_MAX_BYTES];
};

struct rank {
    pid_t pid;  /* 0 = not started, -1 = reaped */
    pid_t pgid; /* its process group, 0 = none or seen empty */
    int status; /* wait status once reaped */
    int log;    /* tee file, -1 none */
    struct stream out, err;
};

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Shows `n` bytes of one line (with its newline, or a piece of a long one).
 * Returns 0, or the errno of a failed write; after one, the stream's output is
 * dropped. */
static int show(const struct procs_opts *o, unsigned i, struct stream *s, const char *p, size_t n)
{
    if (s->to == NULL || ferror(s->to))
        return 0;
    fprintf(s->to, "[%u] %.*s", o->first_rank + i, (int)n, p);
    if (n == 0 || p[n - 1] != '\n')
        fputc('\n', s->to);
    if (fflush(s->to) != 0)
        return errno != 0 ? errno : EIO;
    return 0;
}

/* Reads what the pipe has; relays whole lines; false at EOF.  A failed write
 * of the relayed output sets *werr to its errno. */
static bool pump(const struct procs_opts *o, struct rank *r, unsigned i, struct stream *s,
                 int *werr)
{
    int e;

    ssize_t got = read(s->fd, s->buf + s->used, sizeof(s->buf) - s->used);
    char *start, *nl;

    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (got <= 0) {
        if (s->used > 0 && (e = show(o, i, s, s->buf, s->used)) != 0)
            *werr = e;
        s->used = 0;
        close(s->fd);
        s->fd = -1;
        return false;
    }
    if (r->log >= 0)
        write_all(r->log, s->buf + s->used, (size_t)got);
    s->used += (size_t)got;
    start = s->buf;
    while ((nl = memchr(start, '\n', s->used - (size_t)(start - s->buf))) != NULL) {
        if ((e = show(o, i, s, start, (size_t)(nl - start) + 1)) != 0)
            *werr = e;
        start = nl + 1;
    }
    s->used -= (size_t)(start - s->buf);
    memmove(s->buf, start, s->used);
    if (s->used == sizeof(s->buf)) { /* a line longer than the buffer */
        if ((e = show(o, i, s, s->buf, s->used)) != 0)
            *werr = e;
        s->used = 0;
    }
    return true;
}

static void child(const struct procs_opts *o, unsigned i, int out, int err, const sigset_t *old)
{
    struct accel_error e;

    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL); /* ignored by the launcher; an ignored signal stays so across exec */
    sigprocmask(SIG_SETMASK, old, NULL);
    if (dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
        _exit(127);
    if (o->cpus != NULL && o->cpus[i] != NULL && accel_topo_bind_cpus(o->cpus[i], &e) != ACCEL_OK)
        fprintf(stderr, "accelrun: rank %u: not bound to CPUs %s: %s\n", o->first_rank + i,
                o->cpus[i], e.msg);
    execvpe(o->argv[0], o->argv, o->envp[i]);
    fprintf(stderr, "accelrun: rank %u: cannot run %s: %s\n", o->first_rank + i, o->argv[0],
            strerror(errno));
    _exit(127);
}

/* Opens every rank's log in the --tee directory before any rank starts: no
 * link is followed (a planted symlink is an error, not a file overwritten).
 * False, with one error naming the path, when one cannot be opened. */
static bool open_logs(const struct procs_opts *o, struct rank *ranks)
{
    char path[4096];
    int dir;

    if (o->tee_dir == NULL)
        return true;
    dir = open(o->tee_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        fprintf(stderr, "accelrun launch: --tee %s: %s\n", o->tee_dir, strerror(errno));
        return false;
    }
    for (unsigned i = 0; i < o->n; i++) {
        snprintf(path, sizeof(path), "rank-%u.log", o->first_rank + i);
        ranks[i].log =
            openat(dir, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (ranks[i].log < 0) {
            fprintf(stderr, "accelrun launch: --tee: cannot open %s/%s: %s\n", o->tee_dir, path,
                    strerror(errno));
            close(dir);
            return false;
        }
    }
    close(dir);
    return true;
}

/* Starts rank i; false when it could not be started (reported). */
static bool start(const struct procs_opts *o, struct rank *r, unsigned i, const sigset_t *old)
{
    int out[2], err[2];

    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        fprintf(stderr, "accelrun: rank %u: pipe: %s\n", o->first_rank + i, strerror(errno));
        return false;
    }
    r->pid = fork();
    if (r->pid < 0) {
        fprintf(stderr, "accelrun: rank %u: fork: %s\n", o->first_rank + i, strerror(errno));
        r->pid = 0;
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return false;
    }
    if (r->pid == 0)
        child(o, i, out[1], err[1], old);
    setpgid(r->pid, r->pid); /* also here: no race with an early signal */
    r->pgid = r->pid;
    close(out[1]);
    close(err[1]);
    r->out.fd = out[0];
    r->err.fd = err[0];
    r->out.to = o->main_only && i > 0 ? NULL : stdout;
    r->err.to = o->main_only && i > 0 ? NULL : stderr;
    return true;
}

/* Is `pid` in the process group of one of the ranks? */
static bool in_rank_group(const struct rank *ranks, unsigned n, pid_t pid)
{
    pid_t g = getpgid(pid);

    for (unsigned i = 0; g > 0 && i < n; i++)
        if (ranks[i].pgid == g)
            return true;
    return false;
}

/* Signals every rank's process group, reaped leaders' too, and the adopted
 * children that left those groups (read from /proc: without it, only the
 * groups are reached). */
static void signal_all(struct rank *ranks, unsigned n, int sig)
{
    char path[64];
    FILE *f;
    long pid;

    for (unsigned i = 0; i < n; i++)
        if (ranks[i].pgid > 0 && kill(-ranks[i].pgid, sig) != 0 && errno == ESRCH)
            ranks[i].pgid = 0; /* empty: never signal the number again */
    snprintf(path, sizeof(path), "/proc/self/task/%ld/children", (long)getpid());
    if ((f = fopen(path, "re")) == NULL)
        return;
    while (fscanf(f, "%ld", &pid) == 1)
        if (pid > 0 && !in_rank_group(ranks, n, (pid_t)pid))
            kill((pid_t)pid, sig);
    fclose(f);
}

static void describe(char *buf, size_t size, int status)
{
    if (WIFEXITED(status))
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
}

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Collects ended children, ranks and adopted ones; the first failed rank
 * stops the others.  Returns whether a child is left. */
static bool reap(const struct procs_opts *o, struct rank *ranks, unsigned *running, int *failed,
                 unsigned *stopped, int interrupted, double *kill_at)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (unsigned i = 0; i < o->n; i++) {
            if (ranks[i].pid != pid)
                continue;
            ranks[i].pid = -1;
            ranks[i].status = status;
            (*running)--;
            if (status == 0 || *failed >= 0 || interrupted)
                continue;
            *failed = (int)i;
            for (unsigned k = 0; k < o->n; k++)
                *stopped += ranks[k].pid > 0;
            signal_all(ranks, o->n, SIGTERM);
            *kill_at = accel_now() + o->grace_s;
        }
    }
    return pid == 0 || (pid < 0 && errno == EINTR);
}

int procs_run(const struct procs_opts *o)
{
    struct rank *ranks = calloc(o->n, sizeof(*ranks));
    struct pollfd *fds = calloc(2 * o->n + 1, sizeof(*fds));
    unsigned *owner = calloc(2 * o->n + 1, sizeof(*owner)); /* fds[k]: rank * 2 + (stderr) */
    sigset_t mask, old;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    int sfd = -1, failed = -1, interrupted = 0, code = 0, subreaper = 0;
    unsigned running = 0, stopped = 0;
    double kill_at = 0, drain_until = 0;
    bool killing = false, set_up = false, children;

    if (ranks == NULL || fds == NULL || owner == NULL) {
        fprintf(stderr, "accelrun: out of memory\n");
        free(ranks);
        free(fds);
        free(owner);
        return 1;
    }
    for (unsigned i = 0; i < o->n; i++)
        ranks[i].out.fd = ranks[i].err.fd = ranks[i].log = -1;
    if (!open_logs(o, ranks)) {
        code = 2;
        goto out;
    }
    sigaction(SIGPIPE, &ign, &old_pipe);
    prctl(PR_GET_CHILD_SUBREAPER, &subreaper);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old);
    set_up = true;
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    for (unsigned i = 0; i < o->n; i++) {
        if (sfd < 0 || !start(o, &ranks[i], i, &old)) {
            failed = (int)i;
            ranks[i].status = 127 << 8;
            signal_all(ranks, i, SIGTERM);
            kill_at = accel_now() + o->grace_s;
            break;
        }
        running++;
    }
    for (;;) {
        unsigned nfds = 0;
        int timeout = -1, werr = 0;
        double t, next = 0;

        children = reap(o, ranks, &running, &failed, &stopped, interrupted, &kill_at);
        /* every rank ended, but something they started lives on: stop it */
        if (running == 0 && children && kill_at == 0 && !killing) {
            signal_all(ranks, o->n, SIGTERM);
            kill_at = accel_now() + o->grace_s;
        }
        if (kill_at > 0 && accel_now() >= kill_at) {
            killing = true;
            kill_at = 0;
        }
        if (killing && children) /* again until nothing is left */
            signal_all(ranks, o->n, SIGKILL);
        if (sfd >= 0) {
            fds[nfds].fd = sfd;
            fds[nfds++].events = POLLIN;
        }
        for (unsigned i = 0; i < o->n; i++) {
            if (ranks[i].out.fd >= 0) {
                owner[nfds] = 2 * i;
                fds[nfds].fd = ranks[i].out.fd;
                fds[nfds++].events = POLLIN;
            }
            if (ranks[i].err.fd >= 0) {
                owner[nfds] = 2 * i + 1;
                fds[nfds].fd = ranks[i].err.fd;
                fds[nfds++].events = POLLIN;
            }
        }
        /* no child left: a last second for output still in the pipes
         * (something outside the job may keep one open) */
        if (running == 0 && !children && drain_until == 0)
            drain_until = accel_now() + 1.0;
        if (running == 0 && !children && (nfds <= 1 || accel_now() >= drain_until))
            break;
        next = kill_at > 0 && (drain_until == 0 || kill_at < drain_until) ? kill_at : drain_until;
        if (killing && children)
            next = accel_now() + 0.1;
        if (next > 0) {
            t = next - accel_now();
            timeout = t > 0 ? (int)(t * 1000) + 1 : 0;
        }
        if (poll(fds, nfds, timeout) < 0 && errno != EINTR)
            break;
        for (struct signalfd_siginfo si; sfd >= 0 && read(sfd, &si, sizeof(si)) == sizeof(si);) {
            if (si.ssi_signo == SIGCHLD)
                continue;      /* reaped at the top of the loop */
            if (interrupted) { /* a second one: no more waiting */
                killing = true;
                kill_at = 0;
            } else {
                interrupted = (int)si.ssi_signo;
                signal_all(ranks, o->n, (int)si.ssi_signo);
                kill_at = accel_now() + o->grace_s;
            }
        }
        /* only pipes poll() found ready: a read never blocks */
        for (unsigned k = sfd >= 0 ? 1 : 0; k < nfds; k++) {
            struct rank *r = &ranks[owner[k] / 2];
            if (fds[k].revents != 0)
                pump(o, r, owner[k] / 2, owner[k] % 2 ? &r->err : &r->out, &werr);
        }
        if (werr == EPIPE && !interrupted && !killing) { /* the reader is gone: stop the job */
            interrupted = SIGPIPE;
            signal_all(ranks, o->n, SIGTERM);
            kill_at = accel_now() + o->grace_s;
        }
    }
    if (failed >= 0) {
        char how[128];
        describe(how, sizeof(how), ranks[failed].status);
        code = exit_code(ranks[failed].status);
        fprintf(stderr, "accelrun: rank %u %s; stopped the other %u rank%s\n",
                o->first_rank + (unsigned)failed, how, stopped, stopped == 1 ? "" : "s");
    } else if (interrupted == SIGPIPE) {
        code = 128 + SIGPIPE;
        fprintf(stderr, "accelrun: the output was closed (%s): stopped %u rank%s\n",
                strsignal(SIGPIPE), o->n, o->n == 1 ? "" : "s");
    } else if (interrupted) {
        code = 128 + interrupted;
        fprintf(stderr, "accelrun: %s: stopped %u rank%s\n", strsignal(interrupted), o->n,
                o->n == 1 ? "" : "s");
    }
out:
    for (unsigned i = 0; i < o->n; i++) {
        if (ranks[i].out.fd >= 0)
            close(ranks[i].out.fd);
        if (ranks[i].err.fd >= 0)
            close(ranks[i].err.fd);
        if (ranks[i].log >= 0)
            close(ranks[i].log);
    }
    if (sfd >= 0)
        close(sfd);
    if (set_up) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        sigaction(SIGPIPE, &old_pipe, NULL);
        prctl(PR_SET_CHILD_SUBREAPER, subreaper);
    }
    free(ranks);
    free(fds);
    free(owner);
    return code;
}
