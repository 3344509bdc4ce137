/*
 * inputs.c: the webhook server's inputs before they reach libmicrohttpd:
 * the signatures of its files (a change triggers a reload), reading an
 * option's file, checking a certificate and key with GnuTLS, loading the
 * site file into a reference-counted policy, and the listening socket from
 * --listen.  server.c runs the daemons over them.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "accel/alloc.h"
#include "accel/diag.h"
#include "accel/fsutil.h"
#include "accel/site.h"
#include "server.h"

#define TLS_FILE_MAX (1u << 20) /* bytes of a PEM certificate chain or key */
#define LISTEN_BACKLOG 256

void wh_fsig_read(struct wh_fsig *s, const char *path)
{
    struct stat st;

    memset(s, 0, sizeof(*s));
    if (path == NULL || stat(path, &st) != 0)
        return;
    s->ok = true;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->size = st.st_size;
    s->mtime = st.st_mtim;
}

bool wh_fsig_same(const struct wh_fsig *a, const struct wh_fsig *b)
{
    return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads `path` for option `opt`; the message names both and the fix. */
enum accel_err wh_read_opt_file(const char *opt, const char *path, char **data, size_t *len,
                                struct accel_error *err)
{
    struct accel_error e;
    enum accel_err rc;

    accel_error_clear(&e);
    rc = accel_read_file(path, TLS_FILE_MAX, data, len, &e);
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, "%s %s: couldn't read: %s (give a readable PEM file)", opt,
                               path, e.msg[0] ? e.msg : accel_strerror(rc));
    return ACCEL_OK;
}

/* Checks that `cert` and `key` are PEM, and that the key is the
 * certificate's, with the TLS stack libmicrohttpd will use. */
enum accel_err wh_tls_check(const struct wh_srv_opts *o, const char *cert, size_t certlen,
                            const char *key, size_t keylen, struct accel_error *err)
{
    gnutls_datum_t c = {(unsigned char *)cert, (unsigned)certlen};
    gnutls_datum_t k = {(unsigned char *)key, (unsigned)keylen};
    gnutls_x509_crt_t *list = NULL;
    unsigned n = 0;
    gnutls_x509_privkey_t pk = NULL;
    gnutls_certificate_credentials_t cred = NULL;
    enum accel_err rc = ACCEL_OK;
    int g;

    g = gnutls_x509_crt_list_import2(&list, &n, &c, GNUTLS_X509_FMT_PEM, 0);
    if (g < 0 || n == 0) {
        rc = accel_error_set(err, ACCEL_EINVAL,
                             "--tls-cert %s: not a PEM certificate: %s (give the server "
                             "certificate, then its intermediates, in PEM)",
                             o->cert, g < 0 ? gnutls_strerror(g) : "no certificate in it");
        goto out;
    }
    if ((g = gnutls_x509_privkey_init(&pk)) < 0 ||
        (g = gnutls_x509_privkey_import2(pk, &k, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        rc = accel_error_set(err, ACCEL_EINVAL,
                             "--tls-key %s: not an unencrypted PEM private key: %s (give the "
                             "certificate's key, PKCS#1, SEC1 or PKCS#8 without a passphrase)",
                             o->key, gnutls_strerror(g));
        goto out;
    }
    if ((g = gnutls_certificate_allocate_credentials(&cred)) < 0 ||
        (g = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM)) < 0) {
        rc = accel_error_set(err, ACCEL_EINVAL,
                             "--tls-key %s does not go with --tls-cert %s: %s (give the key the "
                             "certificate was issued for)",
                             o->key, o->cert, gnutls_strerror(g));
        goto out;
    }
out:
    if (cred != NULL)
        gnutls_certificate_free_credentials(cred);
    if (pk != NULL)
        gnutls_x509_privkey_deinit(pk);
    for (unsigned i = 0; i < n; i++)
        gnutls_x509_crt_deinit(list[i]);
    gnutls_free(list);
    return rc;
}

/* Loads the site file into a new reference (refs 1); the message is the
 * first finding, located, and the count of the others. */
/* the site loads of this process, numbered for the config cache's key */
static atomic_ulong site_gens;

enum accel_err wh_site_load(const struct wh_srv_opts *o, struct wh_site_ref **out,
                            struct accel_error *err)
{
    struct wh_site_ref *r;
    struct accel_diags d;
    struct accel_error e;
    char *data = NULL;
    size_t len = 0;
    enum accel_err rc;

    *out = NULL;
    r = accel_calloc(1, sizeof(*r));
    if (r == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "--site: out of memory");
    r->refs = 1;
    r->gen = atomic_fetch_add(&site_gens, 1) + 1;
    accel_site_init(&r->site);
    if (o->site == NULL) {
        *out = r;
        return ACCEL_OK;
    }
    accel_error_clear(&e);
    rc = accel_read_file(o->site, ACCEL_MAX_CONFIG_BYTES, &data, &len, &e);
    if (rc != ACCEL_OK) {
        accel_free(r);
        return accel_error_set(err, rc, "--site %s: couldn't read: %s (give a readable site file)",
                               o->site, e.msg[0] ? e.msg : accel_strerror(rc));
    }
    accel_diags_init(&d);
    accel_site_free(&r->site);
    rc = accel_site_load_buffer(&r->site, o->site, data, len, 0, &d, &e);
    accel_free(data);
    if (rc != ACCEL_OK) {
        char first[768] = "";

        accel_diags_sort(&d);
        for (size_t i = 0; i < d.n; i++)
            if (d.v[i].sev == ACCEL_SEV_ERROR) {
                accel_diag_format(&d.v[i], first, sizeof(first));
                break;
            }
        if (first[0] == '\0')
            snprintf(first, sizeof(first), "%s", e.msg[0] ? e.msg : accel_strerror(rc));
        accel_error_set(err, ACCEL_ECONFIG,
                        "--site %s: invalid: %s%s (fix the file; `accelrun check --site %s "
                        "CONFIG` lists every finding)",
                        o->site, first, d.errors > 1 ? " (and more errors)" : "", o->site);
        accel_diags_free(&d);
        accel_free(r);
        return ACCEL_ECONFIG;
    }
    accel_diags_free(&d);
    r->have = true;
    *out = r;
    return ACCEL_OK;
}

enum accel_err wh_listen(const char *addr, int *fd, unsigned *bound_port, bool *ipv6,
                         struct accel_error *err)
{
    char host[256];
    const char *colon, *port;
    struct addrinfo hints = {0}, *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int one = 1, g;
    size_t hl;

    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (rb == NULL || rb[1] != ':')
            goto bad;
        hl = (size_t)(rb - addr - 1);
        if (hl >= sizeof(host))
            goto bad;
        memcpy(host, addr + 1, hl);
        port = rb + 2;
    } else {
        colon = strrchr(addr, ':');
        if (colon == NULL || memchr(addr, ':', (size_t)(colon - addr)) != NULL)
            goto bad;
        hl = (size_t)(colon - addr);
        if (hl >= sizeof(host))
            goto bad;
        memcpy(host, addr, hl);
        port = colon + 1;
    }
    host[hl] = '\0';
    if (port[0] == '\0' || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 ||
        atoi(port) > 65535)
        goto bad;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
    g = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (g != 0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "--listen %s: %s (give a numeric address: 0.0.0.0:8443, "
                               "127.0.0.1:8443, [::]:8443)",
                               addr, gai_strerror(g));
    *ipv6 = ai->ai_family == AF_INET6;
    *fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0) {
        freeaddrinfo(ai);
        return accel_error_sys(err, ACCEL_EIO, "--listen %s: couldn't create a socket", addr);
    }
    setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(*fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        int e = errno;

        freeaddrinfo(ai);
        errno = e;
        return accel_error_sys(err, ACCEL_EIO, "--listen %s: couldn't bind (%s)", addr,
                               e == EADDRINUSE ? "another process holds the port: stop it or "
                                                 "choose another port"
                               : e == EACCES   ? "a port under 1024 needs CAP_NET_BIND_SERVICE: "
                                                 "use 8443"
                                               : "check the address is this host's");
    }
    freeaddrinfo(ai);
    if (listen(*fd, LISTEN_BACKLOG) != 0)
        return accel_error_sys(err, ACCEL_EIO, "--listen %s: couldn't listen", addr);
    if (getsockname(*fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return ACCEL_OK;
bad:
    return accel_error_set(err, ACCEL_EINVAL,
                           "--listen %s: not ADDR:PORT (give 0.0.0.0:8443, 127.0.0.1:8443 or "
                           "[::]:8443)",
                           addr);
}
