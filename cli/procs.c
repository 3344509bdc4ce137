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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

static void child(const struct procs_opts *o, unsigned i, int out, int err, const sigset_t *old,
                  const struct rlimit *nofile)
{
    struct accel_error e;

    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL); /* ignored by the launcher; an ignored signal stays so across exec */
    sigprocmask(SIG_SETMASK, old, NULL);
    if (nofile->rlim_cur != RLIM_INFINITY)
        setrlimit(RLIMIT_NOFILE, nofile); /* the limit the launcher was given */
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

/* What to do about a --tee path that failed with `e`. */
static const char *tee_fix(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
    case EROFS:
        return "give --tee a directory you can write to";
    case ELOOP:
        return "it is a symbolic link, which --tee does not follow; remove it or give "
               "--tee another directory";
    case ENOTDIR:
        return "give --tee a directory";
    case ENOENT:
        return "the directory above it does not exist; create it, or give --tee another "
               "directory";
    default:
        return "give --tee another directory";
    }
}

/* Opens one log: created, or an existing regular file of the user's with no
 * other name, emptied.  O_NOFOLLOW refuses a symbolic link planted in its
 * place; O_NONBLOCK keeps a planted FIFO from blocking the open, and the
 * truncation waits for the checks, so a planted hard link to another file is
 * refused, not emptied.  -1 with errno set (ELOOP, EINVAL for what is not a
 * plain file of the user's with one link). */
static int open_log(int dir, const char *name)
{
    struct stat st;
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);

    if (fd < 0) {
        if (errno == ENXIO) /* a FIFO without a reader */
            errno = EINVAL;
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid()) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (ftruncate(fd, 0) != 0 || fcntl(fd, F_SETFL, 0) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Opens every rank's log in the --tee directory (created when missing, one
 * level) before any rank starts, so that a log that cannot be written is one
 * error and no rank runs unlogged.  False, with that error naming the path and
 * the fix, when one cannot be opened. */
static bool open_logs(const struct procs_opts *o, struct rank *ranks)
{
    char name[64];
    int dir;

    if (o->tee_dir == NULL)
        return true;
    if (mkdir(o->tee_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "accelrun launch: --tee: couldn't create the directory %s: %s; %s\n",
                o->tee_dir, strerror(errno), tee_fix(errno));
        return false;
    }
    dir = open(o->tee_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        fprintf(stderr, "accelrun launch: --tee: couldn't open the directory %s: %s; %s\n",
                o->tee_dir, strerror(errno), tee_fix(errno));
        return false;
    }
    for (unsigned i = 0; i < o->n; i++) {
        snprintf(name, sizeof(name), "rank-%u.log", o->first_rank + i);
        ranks[i].log = open_log(dir, name);
        if (ranks[i].log < 0) {
            int e = errno;
            fprintf(stderr, "accelrun launch: --tee: couldn't open %s/%s: %s; %s\n", o->tee_dir,
                    name,
                    e == EINVAL ? "not a regular file of yours with no other link" : strerror(e),
                    e == EINVAL ? "remove it or give --tee another directory" : tee_fix(e));
            close(dir);
            return false;
        }
    }
    close(dir);
    return true;
}

/* Makes sure the launcher may hold what n ranks need: the read ends of two
 * pipes per rank and its log, beside what is open now and the two ends of a
 * pipe being set up.  Raises the soft limit up to the hard one where that is
 * enough (the ranks get the old soft limit back at exec, and procs_run gives
 * it back to the launcher: a program using select() may depend on it).  *old
 * is that limit (soft RLIM_INFINITY when unknown).  False, with one error
 * naming the number and the fix, when the hard limit is too low: then no rank
 * starts, instead of some starting and being stopped when the next pipe
 * fails. */
static bool fit_fds(const struct procs_opts *o, struct rlimit *old)
{
    struct rlimit rl;
    rlim_t need = 8; /* the signalfd, a pipe being made, the --tee directory, stdio's spare */
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;

    if (getrlimit(RLIMIT_NOFILE, old) != 0) {
        old->rlim_cur = RLIM_INFINITY; /* unknown: the pipes say so if it is too low */
        return true;
    }
    while (d != NULL && (de = readdir(d)) != NULL)
        need += de->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    else
        need += 64; /* no /proc: a guess at what is open */
    need += (rlim_t)o->n * (o->tee_dir != NULL ? 3 : 2);
    if (old->rlim_cur == RLIM_INFINITY || old->rlim_cur >= need)
        return true;
    if (old->rlim_max == RLIM_INFINITY || old->rlim_max >= need) {
        rl.rlim_cur = need;
        rl.rlim_max = old->rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            return true;
    }
    fprintf(stderr,
            "accelrun launch: couldn't start %u ranks: the launcher needs %llu open files (%u per "
            "rank), and the limit is %llu; raise it (ulimit -n %llu) or start fewer ranks\n",
            o->n, (unsigned long long)need, o->tee_dir != NULL ? 3u : 2u,
            (unsigned long long)old->rlim_max, (unsigned long long)need);
    return false;
}

/* The fix for a rank that could not be started because of `e`. */
static const char *start_fix(int e)
{
    switch (e) {
    case EMFILE:
        return "; raise the open-file limit (ulimit -n) or start fewer ranks";
    case ENFILE:
        return "; the system's open-file table is full (fs.file-max)";
    case EAGAIN:
        return "; raise the process limit (ulimit -u) or start fewer ranks";
    case ENOMEM:
        return "; free memory or start fewer ranks";
    default:
        return "";
    }
}

/* Starts rank i; false when it could not be started (reported, with why). */
static bool start(const struct procs_opts *o, struct rank *r, unsigned i, const sigset_t *old,
                  const struct rlimit *nofile)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1}, e;
    const char *step = "pipe";

    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
        goto fail;
    step = "fork";
    r->pid = fork();
    if (r->pid < 0) {
        r->pid = 0;
        goto fail;
    }
    if (r->pid == 0)
        child(o, i, out[1], err[1], old, nofile);
    setpgid(r->pid, r->pid); /* also here: no race with an early signal */
    r->pgid = r->pid;
    close(out[1]);
    close(err[1]);
    r->out.fd = out[0];
    r->err.fd = err[0];
    r->out.to = o->main_only && i > 0 ? NULL : stdout;
    r->err.to = o->main_only && i > 0 ? NULL : stderr;
    return true;
fail:
    e = errno;
    for (int k = 0; k < 2; k++) {
        if (out[k] >= 0)
            close(out[k]);
        if (err[k] >= 0)
            close(err[k]);
    }
    fprintf(stderr, "accelrun: rank %u could not be started: %s: %s%s\n", o->first_rank + i, step,
            strerror(e), start_fix(e));
    return false;
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

/* Ranks started and not yet reaped. */
static unsigned live(const struct rank *ranks, unsigned n)
{
    unsigned k = 0;

    for (unsigned i = 0; i < n; i++)
        k += ranks[i].pid > 0;
    return k;
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
            *stopped = live(ranks, o->n);
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
    struct rlimit nofile = {RLIM_INFINITY, RLIM_INFINITY}; /* the soft limit given */
    int sfd = -1, failed = -1, interrupted = 0, code = 0, subreaper = 0;
    unsigned running = 0, stopped = 0, halted = 0; /* halted: running when interrupted */
    double kill_at = 0, drain_until = 0;
    bool killing = false, set_up = false, unstarted = false, children;

    if (ranks == NULL || fds == NULL || owner == NULL) {
        fprintf(stderr, "accelrun: out of memory\n");
        free(ranks);
        free(fds);
        free(owner);
        return 1;
    }
    for (unsigned i = 0; i < o->n; i++)
        ranks[i].out.fd = ranks[i].err.fd = ranks[i].log = -1;
    if (!fit_fds(o, &nofile) || !open_logs(o, ranks)) {
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
    if (sfd < 0)
        fprintf(stderr, "accelrun: couldn't watch signals (signalfd): %s; no rank started\n",
                strerror(errno));
    for (unsigned i = 0; sfd >= 0 && i < o->n; i++) {
        if (!start(o, &ranks[i], i, &old, &nofile)) {
            /* a rank that already failed is the failure; else this one is */
            reap(o, ranks, &running, &failed, &stopped, interrupted, &kill_at);
            if (failed < 0) {
                failed = (int)i;
                unstarted = true;
                stopped = live(ranks, i);
                signal_all(ranks, i, SIGTERM);
                kill_at = accel_now() + o->grace_s;
            }
            break;
        }
        running++;
    }
    if (sfd < 0)
        code = 1;
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
                halted = live(ranks, o->n);
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
            halted = live(ranks, o->n);
            signal_all(ranks, o->n, SIGTERM);
            kill_at = accel_now() + o->grace_s;
        }
    }
    if (failed >= 0) {
        char how[128], others[64] = "";
        if (unstarted) /* why was said when it happened */
            snprintf(how, sizeof(how), "could not be started");
        else
            describe(how, sizeof(how), ranks[failed].status);
        code = unstarted ? 127 : exit_code(ranks[failed].status);
        if (stopped > 0) /* those still running when it failed */
            snprintf(others, sizeof(others), "; stopped the other %u rank%s", stopped,
                     stopped == 1 ? "" : "s");
        fprintf(stderr, "accelrun: rank %u %s%s\n", o->first_rank + (unsigned)failed, how, others);
    } else if (interrupted) {
        code = 128 + interrupted;
        fprintf(stderr, "accelrun: %s%s%s: stopped %u rank%s\n",
                interrupted == SIGPIPE ? "the output was closed (" : "", strsignal(interrupted),
                interrupted == SIGPIPE ? ")" : "", halted, halted == 1 ? "" : "s");
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
    if (nofile.rlim_cur != RLIM_INFINITY)
        setrlimit(RLIMIT_NOFILE, &nofile);
    free(ranks);
    free(fds);
    free(owner);
    return code;
}
