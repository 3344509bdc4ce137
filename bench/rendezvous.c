/*
 * bench/rendezvous.c: how long N clients take to meet through accelrun's TCP
 * rendezvous store: connect, set a key of their own, get another client's
 * key, pass one barrier of all N.  bench/rendezvous.sh runs it next to the
 * same workload on PyTorch's TCPStore (bench/tcpstore_peer.py).
 *
 *   rendezvous run N [PROCS]    the server (this process, a thread of it, as
 *                               on rank 0) and PROCS client processes
 *                               (default 8), N/PROCS clients each
 *   rendezvous client PORT NONCE FIRST COUNT N    one client process (run
 *                               starts these; each client is a thread with a
 *                               connection of its own, as a rank would be)
 *
 * Timing: every client process first starts its threads and says "ready";
 * when all are ready, run notes t0 and says "go" to all, so process and
 * thread start-up are not timed.  Each phase's figure is the time from t0 to
 * the moment the last client finished that phase (CLOCK_MONOTONIC, which all
 * processes of a machine share).  Output, one line:
 *
 *   accelrun N=1024 procs=8 connect=0.041 set=0.052 get=0.060 barrier=0.071 s
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/store.h"

#define PHASES 4
#define TIMEOUT_S 600.0
#define STACK_BYTES (256u << 10)
#define MAX_PROCS 64

extern char **environ;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- client */

struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
};

struct worker {
    struct gate *gate;
    unsigned port, id, n;
    uint64_t nonce;
    double t[PHASES];
    enum accel_err rc;
    char msg[300];
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct accel_store_opts o = {0};
    struct accel_store *s = NULL;
    struct accel_error err;
    char key[32], val[32];
    void *got = NULL;
    size_t len;

    pthread_mutex_lock(&w->gate->mu);
    while (!w->gate->open)
        pthread_cond_wait(&w->gate->cv, &w->gate->mu);
    pthread_mutex_unlock(&w->gate->mu);

    o.host = "127.0.0.1";
    o.port = w->port;
    o.nonce = w->nonce;
    o.rank = w->id;
    o.world = w->n;
    o.timeout_s = TIMEOUT_S;
    if ((w->rc = accel_store_connect(&s, &o, &err)) != ACCEL_OK)
        goto out;
    w->t[0] = now_s();
    snprintf(key, sizeof(key), "k/%u", w->id);
    snprintf(val, sizeof(val), "addr-of-%u", w->id);
    if ((w->rc = accel_store_set(s, key, val, strlen(val), &err)) != ACCEL_OK)
        goto out;
    w->t[1] = now_s();
    snprintf(key, sizeof(key), "k/%u", (w->id + 1) % w->n);
    if ((w->rc = accel_store_get(s, key, &got, &len, &err)) != ACCEL_OK)
        goto out;
    w->t[2] = now_s();
    if ((w->rc = accel_store_barrier(s, "all", w->n, &err)) != ACCEL_OK)
        goto out;
    w->t[3] = now_s();
out:
    if (w->rc != ACCEL_OK)
        snprintf(w->msg, sizeof(w->msg), "%.290s", err.msg);
    accel_free(got);
    accel_store_close(s);
    return NULL;
}

static int client_main(unsigned port, uint64_t nonce, unsigned first, unsigned count, unsigned n)
{
    struct gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct worker *w = calloc(count, sizeof(*w));
    pthread_t *th = calloc(count, sizeof(*th));
    pthread_attr_t attr;
    double t[PHASES] = {0};
    unsigned failed = 0;
    const char *first_msg = "";
    char go;

    if (w == NULL || th == NULL)
        return 1;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_BYTES);
    for (unsigned i = 0; i < count; i++) {
        w[i] = (struct worker){&gate, port, first + i, n, nonce, {0}, ACCEL_OK, ""};
        if (pthread_create(&th[i], &attr, worker_main, &w[i]) != 0) {
            fprintf(stderr, "rendezvous: couldn't start thread %u of %u\n", i, count);
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    if (read(0, &go, 1) != 1)
        return 1;
    pthread_mutex_lock(&gate.mu);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    for (unsigned i = 0; i < count; i++) {
        pthread_join(th[i], NULL);
        if (w[i].rc != ACCEL_OK) {
            if (failed++ == 0)
                first_msg = w[i].msg;
            continue;
        }
        for (int p = 0; p < PHASES; p++)
            if (w[i].t[p] > t[p])
                t[p] = w[i].t[p];
    }
    printf("done %.6f %.6f %.6f %.6f %u %s\n", t[0], t[1], t[2], t[3], failed, first_msg);
    fflush(stdout);
    return failed != 0;
}

/* ---------------------------------------------------------------- run */

struct child {
    pid_t pid;
    FILE *out; /* its stdout */
    int go;    /* its stdin */
};

static int spawn_client(const char *self, unsigned port, uint64_t nonce, unsigned first,
                        unsigned count, unsigned n, struct child *c)
{
    char a_port[16], a_nonce[24], a_first[16], a_count[16], a_n[16], a_client[] = "client";
    char *argv[] = {(char *)self, a_client, a_port, a_nonce, a_first, a_count, a_n, NULL};
    posix_spawn_file_actions_t fa;
    int in[2], out[2], rc;

    snprintf(a_port, sizeof(a_port), "%u", port);
    snprintf(a_nonce, sizeof(a_nonce), "%" PRIu64, nonce);
    snprintf(a_first, sizeof(a_first), "%u", first);
    snprintf(a_count, sizeof(a_count), "%u", count);
    snprintf(a_n, sizeof(a_n), "%u", n);
    if (pipe(in) != 0 || pipe(out) != 0)
        return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    rc = posix_spawn(&c->pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0)
        return -1;
    c->go = in[1];
    c->out = fdopen(out[0], "r");
    return c->out ? 0 : -1;
}

static int run_main(const char *self, unsigned n, unsigned procs)
{
    struct accel_store_server_opts so = {0};
    struct accel_store_server *srv;
    struct accel_error err;
    struct child kids[MAX_PROCS];
    double t0, t[PHASES] = {0};
    unsigned first = 0, failed = 0;
    struct rlimit rl;
    char line[512];
    int rc = 0;

    if (procs == 0 || procs > MAX_PROCS || procs > n) {
        fprintf(stderr, "rendezvous: PROCS must be 1..%d and at most N\n", MAX_PROCS);
        return 2;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl); /* the server's side of every connection */
    }
    so.bind_addr = "127.0.0.1";
    so.nonce = accel_store_nonce("bench", "0");
    so.max_clients = n + 16;
    if (accel_store_server_start(&srv, &so, &err) != ACCEL_OK) {
        fprintf(stderr, "rendezvous: %s\n", err.msg);
        return 1;
    }
    for (unsigned p = 0; p < procs; p++) {
        unsigned count = n / procs + (p < n % procs);
        if (spawn_client(self, accel_store_server_port(srv), so.nonce, first, count, n, &kids[p]) !=
            0) {
            fprintf(stderr, "rendezvous: couldn't start client process %u: %s\n", p,
                    strerror(errno));
            return 1;
        }
        first += count;
    }
    for (unsigned p = 0; p < procs; p++)
        if (fgets(line, sizeof(line), kids[p].out) == NULL || strcmp(line, "ready\n") != 0) {
            fprintf(stderr, "rendezvous: client process %u did not start\n", p);
            return 1;
        }
    t0 = now_s();
    for (unsigned p = 0; p < procs; p++)
        if (write(kids[p].go, "g", 1) != 1)
            return 1;
    for (unsigned p = 0; p < procs; p++) {
        double c[PHASES];
        unsigned f;
        int status, off = 0;
        if (fgets(line, sizeof(line), kids[p].out) == NULL ||
            sscanf(line, "done %lf %lf %lf %lf %u %n", &c[0], &c[1], &c[2], &c[3], &f, &off) < 5) {
            fprintf(stderr, "rendezvous: client process %u said nothing\n", p);
            rc = 1;
        } else {
            if (f > 0 && failed == 0)
                fprintf(stderr, "rendezvous: %u clients failed; first: %s", f, line + off);
            failed += f;
            for (int i = 0; i < PHASES; i++)
                if (c[i] - t0 > t[i])
                    t[i] = c[i] - t0;
        }
        fclose(kids[p].out);
        close(kids[p].go);
        waitpid(kids[p].pid, &status, 0);
    }
    accel_store_server_stop(srv);
    if (failed > 0 || rc != 0) {
        printf("accelrun N=%u procs=%u FAILED (%u clients)\n", n, procs, failed);
        return 1;
    }
    printf("accelrun N=%u procs=%u connect=%.3f set=%.3f get=%.3f barrier=%.3f s\n", n, procs, t[0],
           t[1], t[2], t[3]);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: rendezvous run N [PROCS]\n"
                    "       rendezvous client PORT NONCE FIRST COUNT N\n");
    return 2;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        unsigned n = (unsigned)strtoul(argv[2], NULL, 10);
        unsigned procs = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 8;
        if (n == 0)
            return usage();
        return run_main("/proc/self/exe", n, procs);
    }
    if (argc == 7 && strcmp(argv[1], "client") == 0)
        return client_main((unsigned)strtoul(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
                           (unsigned)strtoul(argv[4], NULL, 10),
                           (unsigned)strtoul(argv[5], NULL, 10),
                           (unsigned)strtoul(argv[6], NULL, 10));
    return usage();
}
