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

/* The launcher's state while the ranks run, shared by procs_run's stages. */
struct group {
    const struct procs_opts *o;
    struct rank *ranks; /* [n] */
    struct pollfd *fds; /* [2n + 1]: the signalfd, then the open pipes */
    unsigned *owner;    /* [2n + 1] fds[k]: rank * 2 + (stderr) */
    sigset_t old;       /* the signal mask before (the ranks get it back) */
    struct sigaction old_pipe;
    struct rlimit nofile; /* the soft limit given */
    int sfd, failed, interrupted, code, subreaper;
    unsigned running, stopped, halted; /* halted: running when interrupted */
    double kill_at, drain_until;
    bool killing, set_up, unstarted, children;
};

/* Sends `sig` to the first n ranks (and what they left); SIGKILL follows
 * after the grace period. */
static void stop(struct group *g, unsigned n, int sig)
{
    signal_all(g->ranks, n, sig);
    g->kill_at = accel_now() + g->o->grace_s;
}

/* Collects ended children, ranks and adopted ones; the first failed rank
 * stops the others.  Returns whether a child is left. */
static bool reap(struct group *g)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (unsigned i = 0; i < g->o->n; i++) {
            if (g->ranks[i].pid != pid)
                continue;
            g->ranks[i].pid = -1;
            g->ranks[i].status = status;
            g->running--;
            if (status == 0 || g->failed >= 0 || g->interrupted)
                continue;
            g->failed = (int)i;
            g->stopped = live(g->ranks, g->o->n);
            stop(g, g->o->n, SIGTERM);
        }
    }
    return pid == 0 || (pid < 0 && errno == EINTR);
}

/* The group's memory, nothing open yet; false (said) without memory. */
static bool group_init(struct group *g, const struct procs_opts *o)
{
    memset(g, 0, sizeof(*g));
    g->o = o;
    g->ranks = calloc(o->n, sizeof(*g->ranks));
    g->fds = calloc(2 * o->n + 1, sizeof(*g->fds));
    g->owner = calloc(2 * o->n + 1, sizeof(*g->owner));
    g->nofile.rlim_cur = g->nofile.rlim_max = RLIM_INFINITY;
    g->sfd = -1;
    g->failed = -1;
    if (g->ranks == NULL || g->fds == NULL || g->owner == NULL) {
        fprintf(stderr, "accelrun: out of memory\n");
        free(g->ranks);
        free(g->fds);
        free(g->owner);
        return false;
    }
    for (unsigned i = 0; i < o->n; i++)
        g->ranks[i].out.fd = g->ranks[i].err.fd = g->ranks[i].log = -1;
    return true;
}

/* SIGPIPE ignored, the launcher a child subreaper, and SIGCHLD, SIGINT,
 * SIGTERM and SIGHUP blocked and read from a signalfd (g->sfd; -1, said,
 * when there is none). */
static void watch_signals(struct group *g)
{
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigset_t mask;

    sigaction(SIGPIPE, &ign, &g->old_pipe);
    prctl(PR_GET_CHILD_SUBREAPER, &g->subreaper);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &g->old);
    g->set_up = true;
    g->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (g->sfd < 0)
        fprintf(stderr, "accelrun: couldn't watch signals (signalfd): %s; no rank started\n",
                strerror(errno));
}

/* Starts the ranks in order, until one cannot be started: that one is the
 * failure, and the ranks before it are stopped, unless one of them already
 * failed (then that one is). */
static void start_ranks(struct group *g)
{
    for (unsigned i = 0; i < g->o->n; i++) {
        if (!start(g->o, &g->ranks[i], i, &g->old, &g->nofile)) {
            reap(g);
            if (g->failed < 0) {
                g->failed = (int)i;
                g->unstarted = true;
                g->stopped = live(g->ranks, i);
                stop(g, i, SIGTERM);
            }
            break;
        }
        g->running++;
    }
}

/* Reaps, and moves the stopping on: what outlives the ranks gets SIGTERM,
 * and SIGKILL once the grace period is over. */
static void escalate(struct group *g)
{
    g->children = reap(g);
    /* every rank ended, but something they started lives on: stop it */
    if (g->running == 0 && g->children && g->kill_at == 0 && !g->killing)
        stop(g, g->o->n, SIGTERM);
    if (g->kill_at > 0 && accel_now() >= g->kill_at) {
        g->killing = true;
        g->kill_at = 0;
    }
    if (g->killing && g->children) /* again until nothing is left */
        signal_all(g->ranks, g->o->n, SIGKILL);
}

/* Fills g->fds with the signalfd and the open pipes; returns their count. */
static unsigned watch_list(struct group *g)
{
    unsigned nfds = 0;

    if (g->sfd >= 0) {
        g->fds[nfds].fd = g->sfd;
        g->fds[nfds++].events = POLLIN;
    }
    for (unsigned i = 0; i < g->o->n; i++) {
        if (g->ranks[i].out.fd >= 0) {
            g->owner[nfds] = 2 * i;
            g->fds[nfds].fd = g->ranks[i].out.fd;
            g->fds[nfds++].events = POLLIN;
        }
        if (g->ranks[i].err.fd >= 0) {
            g->owner[nfds] = 2 * i + 1;
            g->fds[nfds].fd = g->ranks[i].err.fd;
            g->fds[nfds++].events = POLLIN;
        }
    }
    return nfds;
}

/* True when the loop is over: no child left, and the pipes are closed or
 * had their last second for output still in them (something outside the
 * job may keep one open). */
static bool finished(struct group *g, unsigned nfds)
{
    if (g->running == 0 && !g->children && g->drain_until == 0)
        g->drain_until = accel_now() + 1.0;
    return g->running == 0 && !g->children && (nfds <= 1 || accel_now() >= g->drain_until);
}

/* poll()'s timeout in ms: to the next deadline, -1 for none. */
static int poll_timeout(const struct group *g)
{
    double t, next;

    next = g->kill_at > 0 && (g->drain_until == 0 || g->kill_at < g->drain_until) ? g->kill_at
                                                                                  : g->drain_until;
    if (g->killing && g->children)
        next = accel_now() + 0.1;
    if (next <= 0)
        return -1;
    t = next - accel_now();
    return t > 0 ? (int)(t * 1000) + 1 : 0;
}

/* The signals the launcher got: forwarded once; a second one kills. */
static void take_signals(struct group *g)
{
    for (struct signalfd_siginfo si; g->sfd >= 0 && read(g->sfd, &si, sizeof(si)) == sizeof(si);) {
        if (si.ssi_signo == SIGCHLD)
            continue;         /* reaped at the top of the loop */
        if (g->interrupted) { /* a second one: no more waiting */
            g->killing = true;
            g->kill_at = 0;
        } else {
            g->interrupted = (int)si.ssi_signo;
            g->halted = live(g->ranks, g->o->n);
            stop(g, g->o->n, (int)si.ssi_signo);
        }
    }
}

/* Relays the output of the pipes poll() found ready (a read never blocks);
 * when the reader of the launcher's output is gone, stops the job. */
static void relay(struct group *g, unsigned nfds)
{
    int werr = 0;

    for (unsigned k = g->sfd >= 0 ? 1 : 0; k < nfds; k++) {
        struct rank *r = &g->ranks[g->owner[k] / 2];
        if (g->fds[k].revents != 0)
            pump(g->o, r, g->owner[k] / 2, g->owner[k] % 2 ? &r->err : &r->out, &werr);
    }
    if (werr == EPIPE && !g->interrupted && !g->killing) { /* the reader is gone: stop the job */
        g->interrupted = SIGPIPE;
        g->halted = live(g->ranks, g->o->n);
        stop(g, g->o->n, SIGTERM);
    }
}

/* The exit status, and the summary line, of a failed or interrupted run. */
static void report(struct group *g)
{
    int failed = g->failed, interrupted = g->interrupted;

    if (failed >= 0) {
        char how[128], others[64] = "";
        if (g->unstarted) /* why was said when it happened */
            snprintf(how, sizeof(how), "could not be started");
        else
            describe(how, sizeof(how), g->ranks[failed].status);
        g->code = g->unstarted ? 127 : exit_code(g->ranks[failed].status);
        if (g->stopped > 0) /* those still running when it failed */
            snprintf(others, sizeof(others), "; stopped the other %u rank%s", g->stopped,
                     g->stopped == 1 ? "" : "s");
        fprintf(stderr, "accelrun: rank %u %s%s\n", g->o->first_rank + (unsigned)failed, how,
                others);
    } else if (interrupted) {
        g->code = 128 + interrupted;
        fprintf(stderr, "accelrun: %s%s%s: stopped %u rank%s\n",
                interrupted == SIGPIPE ? "the output was closed (" : "", strsignal(interrupted),
                interrupted == SIGPIPE ? ")" : "", g->halted, g->halted == 1 ? "" : "s");
    }
}

/* Closes what is open, gives back the signal mask, SIGPIPE's action, the
 * subreaper flag and the open-file limit, frees the memory. */
static void group_free(struct group *g)
{
    for (unsigned i = 0; i < g->o->n; i++) {
        if (g->ranks[i].out.fd >= 0)
            close(g->ranks[i].out.fd);
        if (g->ranks[i].err.fd >= 0)
            close(g->ranks[i].err.fd);
        if (g->ranks[i].log >= 0)
            close(g->ranks[i].log);
    }
    if (g->sfd >= 0)
        close(g->sfd);
    if (g->set_up) {
        sigprocmask(SIG_SETMASK, &g->old, NULL);
        sigaction(SIGPIPE, &g->old_pipe, NULL);
        prctl(PR_SET_CHILD_SUBREAPER, g->subreaper);
    }
    if (g->nofile.rlim_cur != RLIM_INFINITY)
        setrlimit(RLIMIT_NOFILE, &g->nofile);
    free(g->ranks);
    free(g->fds);
    free(g->owner);
}

int procs_run(const struct procs_opts *o)
{
    struct group g;

    if (!group_init(&g, o))
        return 1;
    if (!fit_fds(o, &g.nofile) || !open_logs(o, g.ranks)) {
        g.code = 2;
        goto out;
    }
    watch_signals(&g);
    if (g.sfd >= 0)
        start_ranks(&g);
    else
        g.code = 1;
    for (;;) {
        unsigned nfds;

        escalate(&g);
        nfds = watch_list(&g);
        if (finished(&g, nfds))
            break;
        if (poll(g.fds, nfds, poll_timeout(&g)) < 0 && errno != EINTR)
            break;
        take_signals(&g);
        relay(&g, nfds);
    }
    report(&g);
out:
    group_free(&g);
    return g.code;
}
