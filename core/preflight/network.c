/*
 * network.c: does this node have what the job's environment names?
 * NCCL_SOCKET_IFNAME against /sys/class/net and NCCL_IB_HCA against
 * /sys/class/infiniband, read as NCCL reads them (a comma list of prefixes;
 * "=" exact names; "^" names to leave out; ":port" after an HCA), and
 * MASTER_ADDR resolved.  That every node reaches MASTER_ADDR:MASTER_PORT is
 * the rendezvous's to prove, where there is one.
 */
#include <dirent.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pf_int.h"

#define PF_MAX_NAMES 512

struct names {
    size_t n;
    char v[PF_MAX_NAMES][64];
};

static void list(const char *dir, struct names *out)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    out->n = 0;
    if (!d)
        return;
    while ((e = readdir(d)) && out->n < PF_MAX_NAMES)
        if (e->d_name[0] != '.')
            pf__copy(out->v[out->n++], sizeof(out->v[0]), e->d_name);
    closedir(d);
}

static void join(const struct names *ns, char *buf, size_t size)
{
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < ns->n && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", ns->v[i]);
    if (ns->n == 0)
        snprintf(buf, size, "none");
}

/* Marks in `hit` the names of `have` the entry (len bytes, no ":port")
 * selects; returns how many it selects. */
static size_t selects(const struct names *have, const char *entry, size_t len, bool exact,
                      bool *hit)
{
    size_t k = 0;

    for (size_t i = 0; i < have->n; i++)
        if (strncmp(have->v[i], entry, len) == 0 && (!exact || have->v[i][len] == '\0')) {
            hit[i] = true;
            k++;
        }
    return k;
}

/* One NCCL list variable against the names in `dir`; appends its finding to
 * why (and raises *st). */
static void check_list(const char *var, const char *dir, bool ports, enum accel_pf_status *st,
                       char *why, size_t size)
{
    const char *val = getenv(var), *s;
    struct names have; /* 32 KiB */
    bool hit[PF_MAX_NAMES] = {false};
    char names[400];
    size_t off = strlen(why), any = 0, bad = 0;
    bool exclude, exact;

    if (!val || !*val)
        return;
    list(dir, &have);
    join(&have, names, sizeof(names));
    s = val;
    exclude = *s == '^';
    s += exclude;
    exact = *s == '=';
    s += exact;
    while (*s) {
        size_t len = strcspn(s, ","), name = ports ? strcspn(s, ":,") : len;
        size_t k;
        if (name == 0) { /* an empty entry selects nothing (NCCL skips it too) */
            s += len;
            s += *s == ',';
            continue;
        }
        k = selects(&have, s, name, exact, hit);
        if (!exclude && k == 0 && off < size)
            off += (size_t)snprintf(
                why + off, size - off, "%s%s=%s: no %s on this node is %.*s%s (it has: %s)",
                off ? "; " : "", var, val, ports ? "InfiniBand device" : "interface", (int)name, s,
                exact ? "" : "*", names);
        bad += !exclude && k == 0;
        s += len;
        s += *s == ',';
    }
    for (size_t i = 0; i < have.n; i++)
        any += hit[i];
    if (exclude ? any >= have.n : any == 0) {
        /* NCCL finds nothing to use: it fails at init, after the queue */
        *st = ACCEL_PF_FAIL;
        if (exclude && off < size)
            snprintf(why + off, size - off, "%s%s=%s leaves none of this node's (%s)",
                     off ? "; " : "", var, val, names);
    } else if (bad) {
        if (*st == ACCEL_PF_PASS)
            *st = ACCEL_PF_WARN; /* NCCL uses the others */
    } else if (off < size) {
        snprintf(why + off, size - off, "%s%s=%s", off ? "; " : "", var, val);
    }
}

void pf__check_network(struct accel_pf_node *node)
{
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    enum accel_pf_status st = ACCEL_PF_PASS;
    char why[ACCEL_PF_REASON] = "";

    check_list("NCCL_SOCKET_IFNAME", "/sys/class/net", false, &st, why, sizeof(why));
    check_list("NCCL_IB_HCA", "/sys/class/infiniband", true, &st, why, sizeof(why));
    if (addr && *addr) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        int rc = getaddrinfo(addr, NULL, &hints, &res);
        size_t off = strlen(why);
        if (res)
            freeaddrinfo(res);
        if (off < sizeof(why))
            snprintf(why + off, sizeof(why) - off, "%sMASTER_ADDR=%s%s%s", off ? "; " : "", addr,
                     rc ? " does not resolve here: " : " resolves", rc ? gai_strerror(rc) : "");
        if (rc)
            st = ACCEL_PF_FAIL;
    }
    if (port && *port) {
        char *end;
        unsigned long p = strtoul(port, &end, 10);
        if (*end || p == 0 || p > 65535) {
            size_t off = strlen(why);
            snprintf(why + off, sizeof(why) - off, "%sMASTER_PORT=%s is not a port (1-65535)",
                     off ? "; " : "", port);
            st = ACCEL_PF_FAIL;
        }
    }
    if (!why[0])
        snprintf(why, sizeof(why), "no NCCL_SOCKET_IFNAME, NCCL_IB_HCA or MASTER_ADDR to check");
    accel_pf_add_row(node, "network", st, "%s", why);
}
