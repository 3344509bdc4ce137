/*
 * ckpt_int.h: the in-memory model of a checkpoint, shared by the commit
 * (rank 0 builds it from the rank files' headers, checks it and writes it
 * as the manifest) and by the reader (which builds it from the manifest and
 * checks it the same way), and the names on disk.
 */
#ifndef CKPT_INT_H
#define CKPT_INT_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <xxhash.h>

#include "accel/ckpt.h"
#include "st_int.h"

#define CK_MANIFEST "manifest.json"
#define CK_LATEST "latest"
#define CK_LOCK "accelrun.lock" /* in a root: lock.c */
#define CK_FORMAT "accelrun.checkpoint"
#define CK_VERSION 1
/* the rank file's __metadata__ key holding its pieces (a JSON string) */
#define CK_META_PIECES "accelrun.pieces"
/* ... and the save's metadata (a JSON object of strings, as the manifest's):
 * a local copy commits with it (saver.c) */
#define CK_META_USER "accelrun.meta"

struct ckpt__piece {
    uint32_t file;
    uint32_t tensor; /* its index in c->t (set by ckpt__check) */
    uint64_t lo, hi;
    uint64_t xxh3;
};

struct ckpt__tensor {
    struct accel_ckpt_tensor t; /* t.name owned */
    uint64_t numel;
    size_t first, n; /* its pieces: p[first .. first + n), by lo */
};

struct ckpt__file {
    char *name;     /* rank-RRRRR-of-WWWWW.safetensors */
    uint64_t bytes; /* its size */
    int fd;         /* -1 until read */
    bool parsed;    /* h holds the header (the commit read it already) */
    bool loaded;    /* header read and checked against the manifest */
    bool local;     /* fd is the local tier's copy (accel_ckpt_saver_open_step) */
    bool no_local;  /* that copy failed a check: the root's from now on */
    struct ckpt__st_header h;
};

struct accel_ckpt {
    char *dir;
    char *local_dir; /* the same step in a local tier, read first; NULL: none */
    unsigned long step;
    unsigned world;
    struct accel_ckpt_kv *meta; /* strings owned */
    size_t nmeta;
    struct ckpt__tensor *t; /* by name */
    size_t nt;
    struct ckpt__piece *p;
    size_t np;
    struct ckpt__file *f; /* f[r] is rank r's file */
    size_t nf;
    /* file r's pieces: by_file[file_first[r] .. file_first[r + 1]), indices
     * into p in tensor order (set by ckpt__check) */
    size_t *by_file, *file_first;
    size_t nopen, hand; /* rank files open now; the clock hand that closes one */
    void *scratch;      /* a piece read in part */
    size_t scratch_len;
};

/* "step-00000100" into buf (>= 16 bytes); and back: false unless `name` is
 * exactly that form. */
void ckpt__step_name(char *buf, size_t len, unsigned long step);
bool ckpt__parse_step_name(const char *name, unsigned long *step);
/* "rank-00003-of-00004.safetensors" */
void ckpt__rank_name(char *buf, size_t len, unsigned rank, unsigned world);

/* An XXH3 as the manifest writes it: exactly 16 lowercase hex digits. */
bool ckpt__parse_hex64(const char *s, uint64_t *out);

/* A new, empty checkpoint of `world` files (names set, fds -1) for dir. */
struct accel_ckpt *ckpt__new(const char *dir, unsigned long step, unsigned world,
                             struct accel_error *err);

/* Sorts c->t by name and each tensor's pieces by lo (pieces are given in
 * c->p with c->t[i].first/n naming them) and checks everything the reader
 * relies on: a valid type, shape and numel, no name twice, pieces that tile
 * [0, numel) exactly, files in range, at most one piece of a tensor in a
 * file; and indexes the pieces by file.  `what` names the source in messages
 * (the manifest, or "step-… (from the rank files)"). */
enum accel_err ckpt__check(struct accel_ckpt *c, const char *what, struct accel_error *err);

/* The manifest of c, as a new string (cJSON_free). */
char *ckpt__manifest_json(const struct accel_ckpt *c, struct accel_error *err);

/* accel_ckpt_list; with load false the manifests are not read: `committed`
 * then says a manifest is there, and world and bytes stay 0 (for finding
 * the newest, and for the clean-up, which must not parse every step). */
enum accel_err ckpt__list(const char *root, bool load, struct accel_ckpt_entry **out, size_t *n,
                          struct accel_error *err);

/* Reads and checks dir/manifest.json into a new checkpoint.  ACCEL_ENOTFOUND
 * when there is no manifest (an attempt that did not commit). */
enum accel_err ckpt__load(struct accel_ckpt **out, const char *dir, struct accel_error *err);

/* The byte offset and length of piece k in its file, opening and checking
 * the file on first use (its header against the manifest). */
enum accel_err ckpt__piece_at(struct accel_ckpt *c, const struct ckpt__tensor *t, size_t k,
                              uint64_t *off, uint64_t *len, struct accel_error *err);

/* Checks rank file f (once: its size, and its header against the model:
 * every tensor the model puts there, 1-D, of its type and length, and
 * nothing else) and leaves it open for ckpt__pread; ckpt__close_file closes it
 * (the header stays checked).  At most CK_OPEN_FILES stay open: opening
 * another closes one (a reader of a world of thousands must not hold a
 * descriptor a rank). */
#define CK_OPEN_FILES 64
enum accel_err ckpt__open_file(struct accel_ckpt *c, uint32_t f, struct accel_error *err);
void ckpt__close_file(struct accel_ckpt *c, uint32_t f);

/* Reads bytes [off, off + len) of file f (a piece, whole) into dst, or, with
 * dst NULL, through c->scratch CK_CHUNK bytes at a time; its XXH3-64 must be
 * `sum` (the message names `tensor`). */
#define CK_CHUNK (64u << 20)
/* a read at a time, each hashed before the next (while readahead goes on) */
#define CK_READ_CHUNK (16u << 20)
enum accel_err ckpt__pread(struct accel_ckpt *c, uint32_t f, void *dst, uint64_t off, uint64_t len,
                           uint64_t sum, const char *tensor, struct accel_error *err);

/* rankfile.c: rank file r of c (c->dir/c->f[r].name) read back: its size
 * and header into c->f[r] (f->parsed), and the pieces it declares appended
 * to c->t and c->p, one tensor record per piece (the commit merges the
 * records of every rank's file).  The declaration must be of rank r, c's
 * world size and c's step. */
enum accel_err ckpt__read_declared(struct accel_ckpt *c, unsigned r, size_t *cap,
                                   struct accel_error *err);

/* Who wrote a rank file, when a saver did: its run (a random id the
 * saver's ranks agree on when it opens; never 0) and the step that run
 * went on from (the root's newest committed one when it opened or
 * resumed).  saver.c commits a local copy only of the run that wrote the
 * root's newest checkpoint, or of a run that went on from it. */
struct ckpt__origin {
    uint64_t run;
    unsigned long base;
};
/* The origin header h records; false (and *org zeroed) when none. */
bool ckpt__origin_of(const struct ckpt__st_header *h, struct ckpt__origin *org);

/* A rank file checked as its bytes stream past, front to back, once:
 * ckpt__check_open reads its header and declared pieces; ckpt__check_feed
 * takes the file's bytes in order, any number at a time, and fails at the
 * first piece whose XXH3 is not the declared one; ckpt__check_end fails
 * unless the whole file went past. */
struct ckpt__span {
    uint64_t off, len, xxh3;
    const char *name; /* c's */
};
struct ckpt__check {
    struct accel_ckpt *c; /* the header and the declared pieces */
    unsigned rank;
    struct ckpt__span *span; /* by offset */
    size_t n, k;             /* spans; the one being hashed */
    uint64_t pos;            /* bytes fed */
    XXH3_state_t *h;
};
enum accel_err ckpt__check_open(struct ckpt__check *v, const char *dir, unsigned long step,
                                unsigned rank, unsigned world, struct accel_error *err);
enum accel_err ckpt__check_feed(struct ckpt__check *v, const void *data, size_t n,
                                struct accel_error *err);
enum accel_err ckpt__check_end(struct ckpt__check *v, struct accel_error *err);
const struct ckpt__st_header *ckpt__check_header(const struct ckpt__check *v);
void ckpt__check_free(struct ckpt__check *v);

/* save.c: the parts of a save.  The arguments' checks (all but o->agree);
 * the root made and checked (rank 0 warns about a world-writable one); the
 * step's directory made under it (path into dir); this rank's file written
 * there durably (its pieces as 1-D tensors, their global shapes, ranges and
 * checksums and o's metadata in __metadata__; the data written first, each
 * piece's XXH3 made as it goes out, the header last; a saver's origin
 * recorded when org is not NULL). */
enum accel_err ckpt__check_save(const struct accel_ckpt_save_opts *o,
                                const struct accel_ckpt_piece *pc, size_t n,
                                struct accel_error *err);
enum accel_err ckpt__root_dir(const char *root, unsigned rank, struct accel_error *err);
enum accel_err ckpt__step_dir(const char *root, unsigned long step, unsigned rank, char *dir,
                              size_t len, struct accel_error *err);
enum accel_err ckpt__write_rank(const struct accel_ckpt_save_opts *o,
                                const struct ckpt__origin *org, const char *dir,
                                const struct accel_ckpt_piece *pc, size_t n,
                                struct accel_error *err);

/* The outcome of a step that ends in an agreement: this rank's own error
 * rc first, then the agreement's (arc), then, when another rank failed
 * (!all), ACCEL_EPEER with the message fmt names. */
/* This rank's own failure, on stderr (accel_log) before it goes into an
 * agreement: the other ranks' errors say "its log says why", and the
 * launcher may stop this rank as soon as another one exits with that, before
 * this one's caller prints its error. */
void ckpt__tell(unsigned rank, const struct accel_error *err);
enum accel_err ckpt__agreed(enum accel_err rc, enum accel_err arc, bool all,
                            struct accel_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* lock.c: the root's lock (ROOT/accelrun.lock, flock), taken for `owner`
 * (a line naming the job; NULL: "a job"): *fd holds it until
 * ckpt__lock_drop.  ACCEL_EBUSY, naming the holder, when another process
 * has it. */
enum accel_err ckpt__lock_take(const char *root, const char *owner, int *fd,
                               struct accel_error *err);
void ckpt__lock_drop(int fd);

/* commit.c: rank 0's commit of step o->step in dir, once every rank's file
 * is there (save.c's protocol); and, once every rank knows it committed,
 * `latest` moved forward and the clean-up (failures only logged). */
enum accel_err ckpt__commit(const struct accel_ckpt_save_opts *o, const char *dir,
                            struct accel_error *err);
void ckpt__after_commit(const struct accel_ckpt_save_opts *o);
/* ... in its two parts: `latest` moved forward (a small durable write), and
 * the clean-up (deleting old checkpoints takes time: a saver leaves it to
 * its writer thread, off the training's path) */
void ckpt__move_latest(const struct accel_ckpt_save_opts *o);
void ckpt__collect(const struct accel_ckpt_save_opts *o);

/* out.c: a file written durably in a directory: created as name.tmp,
 * written, then (ckpt__out_close with rc ACCEL_OK) fsynced and renamed to
 * name, or (any other rc) removed.  The directory is the caller's to fsync.
 * write() at most CK_WRITE_CHUNK at a time through the page cache (1 MiB
 * writes ran 2-3x faster than 64 MiB ones here, as the reference writer's 1
 * MiB buffer does); O_DIRECT goes through two buffers of CK_DIRECT_BUF bytes
 * aligned to CK_DIRECT_ALIGN, one written while the other fills. */
#define CK_WRITE_CHUNK (1u << 20)
#define CK_DIRECT_BUF (8u << 20)
#define CK_DIRECT_ALIGN 4096
struct ckpt__out {
    /* set by the caller before ckpt__out_open (zero: none) */
    uint64_t total;   /* the file's size when known, for a full disk's message */
    bool hashing;     /* keep `hash` of every byte ckpt__out_write takes */
    const char *head; /* written last, at offset 0: head_len bytes (a multiple */
    size_t head_len;  /* of CK_DIRECT_ALIGN), the data following them */
    /* the writer's */
    int fd;
    bool direct;   /* O_DIRECT, through buf[] */
    char *buf[2];  /* aligned */
    int cur, busy; /* the buffer being filled; the one being written (-1: none) */
    size_t fill, busy_len;
    uint64_t off, busy_off; /* where the next buffer goes; where the busy one does */
    pthread_t io;           /* writing buf[busy] */
    int io_errno;           /* its failure */
    uint64_t written;       /* bytes written to the file so far */
    XXH3_state_t *hash;
    char path[4096], tmp[4200];
};
enum accel_err ckpt__out_open(struct ckpt__out *o, const char *dir, const char *name,
                              struct accel_error *err);
enum accel_err ckpt__out_write(struct ckpt__out *o, const void *data, uint64_t len,
                               struct accel_error *err);
/* Returns rc, or the first error of finishing the file; with `hashing`,
 * *sum (when not NULL) is the XXH3-64 of every byte ckpt__out_write took. */
enum accel_err ckpt__out_close(struct ckpt__out *o, enum accel_err rc, uint64_t *sum,
                               struct accel_error *err);

/* Removes checkpoint directory root/name: its manifest first, then its
 * files, then the directory (a subdirectory makes it fail).  Only a real
 * directory owned by this process's effective uid: a symbolic link, or
 * another user's directory, is left alone with an error, and nothing is
 * reached through a link. */
enum accel_err ckpt__remove_dir(const char *root, const char *name, struct accel_error *err);

/* Directory `name` under directory descriptor `at` (AT_FDCWD for a path)
 * as a stream, its last component never followed if it is a link (ELOOP,
 * or ENOTDIR); NULL with errno. */
DIR *ckpt__opendir_nofollow(int at, const char *name);

/* A path under dir, into buf; false when it does not fit. */
bool ckpt__path(char *buf, size_t len, const char *dir, const char *name);

#endif
