/*
 * bench/store_attack.c: hostile clients of the rendezvous store, and the
 * server they attack, for bench/store_attack.sh (issue 12's hardening
 * review).  Every mode talks to 127.0.0.1 only, and every loop is bounded in
 * count and in time.  It measures what a stranger on the network can make
 * rank 0 do; it does not attack anything but the server it is given.
 *
 *   store_attack serve MAX_BYTES
 *       rank 0's server on an ephemeral port of 127.0.0.1 (nonce of job
 *       "bench", step "0"); prints the port, serves until stdin closes.
 *   store_attack bigset PORT N SECONDS wrong|right
 *       N connections each send a set's header claiming a 16 MiB value (with
 *       a wrong nonce, or the job's), then dribble the body, 64 KiB per
 *       connection every 10 ms, until the server closes them or SECONDS pass.
 *   store_attack idle PORT N SECONDS
 *       N connections that send nothing, held SECONDS.
 *   store_attack slow PORT SECONDS hello|set
 *       one connection sending one byte a second: of a hello with a wrong
 *       nonce (a stranger), or, after a hello with the job's nonce, of a set
 *       (a client of the job).
 *   store_attack client PORT SECONDS DEADLINE
 *       a correct client: connects, then sets and gets a key every 100 ms for
 *       SECONDS, each call with DEADLINE seconds; reconnects after a failure.
 *
 * Each attacker prints one line: how many of its connections the server
 * closed, and when (seconds from the attack's start).  The client prints its
 * calls, failures and slowest call; it exits 1 when any call failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../core/bootstrap/store_int.h"
#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/sock.h"
#include "accel/store.h"

#define MAX_CONNS 10000       /* the most connections one attacker holds */
#define BIG_VALUE (16u << 20) /* the value a bigset header claims: ACCEL_STORE_MAX_VALUE */
#define DRIBBLE (64u << 10)   /* bytes of body per connection per round */
#define ROUND_MS 10           /* a bigset round */
#define CLIENT_PERIOD_S 0.1   /* the correct client's pace */
#define CLIENT_VALUE 1024     /* bytes of the correct client's value */

static uint64_t job_nonce(void)
{
    return accel_store_nonce("bench", "0");
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Raises the soft limit on descriptors to the hard one: an attacker holds
 * thousands. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* A non-blocking TCP connection to 127.0.0.1:port; -1 when even the socket
 * cannot be made.  The connect may still be in progress. */
static int open_conn(unsigned port)
{
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Has the server closed fd (a reply then EOF, or a reset)?  Reads and drops
 * what it sent. */
static bool closed_by_server(int fd)
{
    uint8_t buf[4096];

    for (int i = 0; i < 64; i++) { /* a refusal is one short reply */
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0)
            return true;
        if (n < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
    return false;
}

/* One attack's connections and when the server closed each. */
struct herd {
    int fd[MAX_CONNS];
    double closed_at[MAX_CONNS]; /* seconds from t0; < 0: still open */
    unsigned n, nclosed;
    double t0;
};

static void herd_open(struct herd *h, unsigned port, unsigned n)
{
    h->t0 = accel_now();
    h->n = h->nclosed = 0;
    for (unsigned i = 0; i < n && i < MAX_CONNS; i++) {
        int fd = open_conn(port);
        if (fd < 0) {
            fprintf(stderr, "store_attack: socket %u: %s\n", i, strerror(errno));
            break;
        }
        h->fd[h->n] = fd;
        h->closed_at[h->n] = -1;
        h->n++;
    }
}

/* Notes the connections the server has closed since the last look. */
static void herd_poll(struct herd *h)
{
    double t = accel_now() - h->t0;
    for (unsigned i = 0; i < h->n; i++)
        if (h->closed_at[i] < 0 && closed_by_server(h->fd[i])) {
            h->closed_at[i] = t;
            h->nclosed++;
        }
}

static void herd_report(struct herd *h, const char *what)
{
    double first = -1, last = -1;

    for (unsigned i = 0; i < h->n; i++) {
        if (h->closed_at[i] < 0)
            continue;
        if (first < 0 || h->closed_at[i] < first)
            first = h->closed_at[i];
        if (h->closed_at[i] > last)
            last = h->closed_at[i];
    }
    if (h->nclosed > 0)
        printf("%s: %u connections, %u closed by the server (first at %.2f s, last at %.2f s), "
               "%u still open\n",
               what, h->n, h->nclosed, first, last, h->n - h->nclosed);
    else
        printf("%s: %u connections, none closed by the server, all held for %.1f s\n", what, h->n,
               accel_now() - h->t0);
    for (unsigned i = 0; i < h->n; i++)
        close(h->fd[i]);
}

/* ---------------------------------------------------------------- modes */

static int serve_main(uint64_t max_bytes)
{
    struct accel_store_server_opts o = {0};
    struct accel_store_server *srv;
    struct accel_error err;
    char b[64];

    o.bind_addr = "127.0.0.1";
    o.nonce = job_nonce();
    o.max_bytes = max_bytes;
    if (accel_store_server_start(&srv, &o, &err) != ACCEL_OK) {
        fprintf(stderr, "store_attack: %s\n", err.msg);
        return 1;
    }
    printf("%u\n", accel_store_server_port(srv));
    fflush(stdout);
    while (read(0, b, sizeof(b)) > 0) /* until the script closes our stdin */
        ;
    accel_store_server_stop(srv);
    return 0;
}

static int bigset_main(unsigned port, unsigned n, double seconds, bool right)
{
    static struct herd h;
    struct bootstrap__frame f = {0};
    uint8_t hdr[STORE_HDR + 1];
    static uint8_t body[DRIBBLE];
    uint64_t sent = 0;
    double end;

    raise_nofile();
    memset(body, 'x', sizeof(body));
    f.op = STORE_SET;
    f.nonce = right ? job_nonce() : job_nonce() ^ 0x5a5a;
    f.klen = 1;
    f.vlen = BIG_VALUE;
    bootstrap__frame_encode(hdr, &f);
    hdr[STORE_HDR] = 'k';
    herd_open(&h, port, n);
    end = h.t0 + seconds;
    pause_ms(100); /* the connects complete */
    for (unsigned i = 0; i < h.n; i++)
        if (send(h.fd[i], hdr, sizeof(hdr), MSG_NOSIGNAL) == (ssize_t)sizeof(hdr))
            sent += sizeof(hdr);
    while (accel_now() < end && h.nclosed < h.n) {
        herd_poll(&h);
        for (unsigned i = 0; i < h.n; i++) {
            ssize_t k;
            if (h.closed_at[i] >= 0)
                continue;
            k = send(h.fd[i], body, sizeof(body), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0)
                sent += (uint64_t)k;
        }
        pause_ms(ROUND_MS);
    }
    herd_poll(&h);
    printf("bigset (%s nonce): %.1f MiB of bodies sent\n", right ? "the job's" : "a wrong",
           (double)sent / (1 << 20));
    herd_report(&h, right ? "bigset (the job's nonce)" : "bigset (a wrong nonce)");
    return 0;
}

static int idle_main(unsigned port, unsigned n, double seconds)
{
    static struct herd h;
    double end;

    raise_nofile();
    herd_open(&h, port, n);
    end = h.t0 + seconds;
    while (accel_now() < end) {
        herd_poll(&h);
        pause_ms(100);
    }
    herd_report(&h, "idle");
    return 0;
}

static int slow_main(unsigned port, double seconds, bool set)
{
    struct bootstrap__frame f = {0};
    uint8_t msg[STORE_HDR + 1 + 100], reply[STORE_HDR];
    size_t len = STORE_HDR, off = 0;
    double t0 = accel_now();
    int fd = open_conn(port);
    struct pollfd p = {.fd = fd, .events = POLLOUT};

    if (fd < 0 || poll(&p, 1, 2000) != 1) {
        fprintf(stderr, "store_attack: slow: couldn't connect\n");
        return 1;
    }
    f.op = STORE_HELLO;
    f.nonce = set ? job_nonce() : job_nonce() ^ 0x5a5a; /* hello: a stranger's */
    if (set) {     /* a client of the job: hello first, then a set, a byte a second */
        f.arg = 1; /* rank 0 of 1 */
        bootstrap__frame_encode(msg, &f);
        if (accel_send_all(fd, msg, STORE_HDR, t0 + 2) != 0)
            return 1;
        p.events = POLLIN;
        if (poll(&p, 1, 2000) != 1 || recv(fd, reply, sizeof(reply), 0) != (ssize_t)STORE_HDR) {
            fprintf(stderr, "store_attack: slow: no answer to the hello\n");
            return 1;
        }
        f.op = STORE_SET;
        f.arg = 0;
        f.klen = 1;
        f.vlen = 100;
        len = sizeof(msg);
        memset(msg + STORE_HDR, 'v', sizeof(msg) - STORE_HDR);
    }
    bootstrap__frame_encode(msg, &f);
    while (accel_now() - t0 < seconds) { /* after the last byte, to see what the server does */
        if (closed_by_server(fd)) {
            printf("slow %s: closed by the server after %.1f s (%zu of %zu bytes sent)\n",
                   set ? "set" : "hello", accel_now() - t0, off, len);
            close(fd);
            return 0;
        }
        if (off < len && send(fd, msg + off, 1, MSG_NOSIGNAL) == 1)
            off++;
        pause_ms(1000);
    }
    printf("slow %s: still open after %.1f s (%zu of %zu bytes sent)\n", set ? "set" : "hello",
           accel_now() - t0, off, len);
    close(fd);
    return 0;
}

static int client_main(unsigned port, double seconds, double deadline)
{
    struct accel_store_opts o = {0};
    struct accel_store *c = NULL;
    struct accel_error err;
    uint8_t val[CLIENT_VALUE];
    unsigned calls = 0, failed = 0;
    double t0 = accel_now(), worst = 0, connect_s = 0;

    memset(val, 'c', sizeof(val));
    o.host = "127.0.0.1";
    o.port = port;
    o.nonce = job_nonce();
    o.rank = 0;
    o.world = 1;
    o.timeout_s = deadline;
    while (accel_now() - t0 < seconds) {
        double t = accel_now(), took;
        enum accel_err rc = ACCEL_OK;
        void *v = NULL;
        size_t n = 0;

        if (c == NULL) {
            rc = accel_store_connect(&c, &o, &err);
            if (rc == ACCEL_OK && accel_now() - t > connect_s)
                connect_s = accel_now() - t;
        }
        if (rc == ACCEL_OK)
            rc = accel_store_set(c, "client", val, sizeof(val), &err);
        if (rc == ACCEL_OK)
            rc = accel_store_get(c, "client", &v, &n, &err);
        accel_free(v);
        took = accel_now() - t;
        calls++;
        if (took > worst)
            worst = took;
        if (rc == ACCEL_OK && n != sizeof(val))
            rc = ACCEL_EPEER;
        if (rc != ACCEL_OK) {
            failed++;
            if (failed <= 3)
                printf("client: call %u failed after %.2f s: %s\n", calls, took, err.msg);
            accel_store_close(c);
            c = NULL;
        }
        if (took < CLIENT_PERIOD_S)
            pause_ms((long)((CLIENT_PERIOD_S - took) * 1000));
    }
    accel_store_close(c);
    printf("client: %u calls (connect + set + get), %u failed, slowest %.3f s (deadline %g s), "
           "slowest connect %.3f s\n",
           calls, failed, worst, deadline, connect_s);
    return failed > 0;
}

static unsigned num(const char *s)
{
    return (unsigned)strtoul(s, NULL, 10);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve_main(strtoull(argv[2], NULL, 10));
    if (argc == 6 && strcmp(argv[1], "bigset") == 0)
        return bigset_main(num(argv[2]), num(argv[3]), atof(argv[4]),
                           strcmp(argv[5], "right") == 0);
    if (argc == 5 && strcmp(argv[1], "idle") == 0)
        return idle_main(num(argv[2]), num(argv[3]), atof(argv[4]));
    if (argc == 5 && strcmp(argv[1], "slow") == 0)
        return slow_main(num(argv[2]), atof(argv[3]), strcmp(argv[4], "set") == 0);
    if (argc == 5 && strcmp(argv[1], "client") == 0)
        return client_main(num(argv[2]), atof(argv[3]), atof(argv[4]));
    fprintf(stderr, "usage: store_attack serve MAX_BYTES\n"
                    "       store_attack bigset PORT N SECONDS wrong|right\n"
                    "       store_attack idle PORT N SECONDS\n"
                    "       store_attack slow PORT SECONDS hello|set\n"
                    "       store_attack client PORT SECONDS DEADLINE\n");
    return 2;
}
