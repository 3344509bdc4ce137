/*
 * accel/ckpt.h: crash-safe sharded checkpoints on shared storage (DESIGN 9,
 * docs/ckpt.md).
 *
 * A checkpoint is a directory ROOT/step-NNNNNNNN holding one safetensors file
 * per rank (rank-RRRRR-of-WWWWW.safetensors) and a manifest.json that rank 0
 * writes last: the manifest is the commit.  A directory without one is an
 * attempt that did not finish; it is never loaded, and a save of that step,
 * or the clean-up after a newer one, removes it.  ROOT/latest names the newest committed
 * checkpoint, for people and scripts; loading does not trust it (it takes the newest committed
 * step).
 *
 * What a rank saves is a list of pieces: elements [lo, hi) of a tensor
 * flattened in row-major order (FSDP's flat-parameter slices cut tensors
 * anywhere, mid-row too).  Each piece is one 1-D tensor of the rank's file,
 * with its XXH3-64 in the file's __metadata__ and in the manifest, which
 * also records every tensor's global shape and which file holds which
 * range.  Loading asks for any range of any tensor, whatever the world size
 * that saved it: the reader copies the overlapping parts of the saved
 * pieces, so resharding is bit-exact by construction, and checks the
 * checksum of every piece it reads from.
 *
 * Names: a tensor's name is its key in the Hugging Face state dict
 * ("h.3.attn.c_attn.weight").  Names that begin with "optim." hold optimizer
 * state (accel_shard uses "optim.exp_avg.<param>" and so on); consolidation
 * leaves them out.
 *
 * Limits (never trusted from a file): ACCEL_CKPT_MAX_* below; a header of a
 * rank file at most 100,000,000 bytes (the safetensors reader's own cap).
 *
 * Durability: each file is written under a temporary name, fsynced and
 * renamed; the directory is fsynced before the manifest is written, the
 * manifest and `latest` are written durably (accel_write_durable), and older
 * checkpoints are deleted only after the new one is committed.
 *
 * Thread-safety: the one-shot functions (save, list, verify, consolidate,
 * open) keep no shared state and are safe from any thread; the ranks of one
 * process may save and load at once (tests/unit/test_ckpt.c runs them as
 * threads).  A handle (accel_ckpt) and a saver belong to one thread at a
 * time, as said at each; a saver's own writer thread is internal.
 */
#ifndef ACCEL_CKPT_H
#define ACCEL_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/dtype.h"
#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_CKPT_MAX_WORLD 65536
#define ACCEL_CKPT_MAX_TENSORS 1048576 /* tensors in a checkpoint */
#define ACCEL_CKPT_MAX_PIECES 4194304  /* pieces over all files */
#define ACCEL_CKPT_MAX_NAME 512        /* bytes of a tensor name */
#define ACCEL_CKPT_MAX_DIMS 8
#define ACCEL_CKPT_MAX_META 64       /* user metadata entries */
#define ACCEL_CKPT_MAX_META_LEN 4096 /* bytes of a metadata key or value */
#define ACCEL_CKPT_MAX_MANIFEST (512u << 20)
#define ACCEL_CKPT_MAX_STEP 99999999UL /* step-NNNNNNNN */

/* One tensor's shape and type. */
struct accel_ckpt_tensor {
    const char *name;
    enum accel_dtype dtype; /* stored as safetensors' F32, BF16, F16 */
    unsigned ndim;          /* 0 (a scalar) .. ACCEL_CKPT_MAX_DIMS */
    uint64_t shape[ACCEL_CKPT_MAX_DIMS];
};

/* A rank's piece of a tensor: elements [lo, hi) of it flattened, lo < hi <=
 * numel, `data` holding hi - lo elements of t.dtype (host memory).  So a
 * tensor of no elements cannot be saved. */
struct accel_ckpt_piece {
    struct accel_ckpt_tensor t;
    uint64_t lo, hi;
    const void *data;
};

/* A string the trainer records with the checkpoint (its step's RNG seed, its
 * model's sizes): keys of [A-Za-z0-9_.-], values any UTF-8. */
struct accel_ckpt_kv {
    const char *key, *value;
};

/* The one collective step a save needs, supplied by the caller (a barrier
 * over its communicator): every rank passes whether its part succeeded;
 * returns ACCEL_OK with *all_ok true when every rank's did.  Called twice
 * per save, by every rank, in the same order. */
typedef enum accel_err (*accel_ckpt_agree_fn)(void *ctx, bool ok, bool *all_ok,
                                              struct accel_error *err);

struct accel_ckpt_save_opts {
    const char *root;   /* created when missing (mode 0777 less the umask) */
    unsigned long step; /* 0 .. ACCEL_CKPT_MAX_STEP */
    unsigned rank, world;
    const struct accel_ckpt_kv *meta; /* recorded in the manifest */
    size_t nmeta;
    unsigned keep; /* committed checkpoints kept after this one is; 0 = all */
    accel_ckpt_agree_fn agree;
    void *agree_ctx;
};

/* Saves this rank's pieces as part of checkpoint `step` under `root`, and on
 * rank 0 commits it.  Collective (through o->agree): returns ACCEL_OK on
 * every rank once the checkpoint is committed, or an error on every rank
 * when any rank failed (then nothing is committed, `latest` and the older
 * checkpoints are as they were).  Pieces of one tensor must agree on dtype
 * and shape over all ranks and cover it exactly once (rank 0 checks, from
 * the files' headers, before it commits).  Errors: ACCEL_EINVAL (bad
 * arguments, a name twice, pieces that overlap or leave holes, step
 * already committed), ACCEL_ETOOBIG (limits), ACCEL_EIO, ACCEL_EPERM,
 * ACCEL_ENOMEM, ACCEL_EPEER (another rank failed), and agree's. */
enum accel_err accel_ckpt_save(const struct accel_ckpt_save_opts *o,
                               const struct accel_ckpt_piece *pieces, size_t npieces,
                               struct accel_error *err) ACCEL_WUR;

/* ---------------------------------------------------------------- savers
 *
 * A saver is one rank's side of the checkpoints of a run: the root's lock
 * held for the run (one job per root), staging memory reused from save to
 * save, a writer thread, and optionally a second tier: each rank writes its
 * file to node-local storage (fast), training goes on, and the writer
 * copies it to the shared root, where rank 0 commits once every rank's copy
 * is there and verified.  Saves are synchronous (accel_ckpt_saver_save) or
 * asynchronous (accel_ckpt_saver_start, then accel_ckpt_saver_poll), one in
 * flight at a time; the commit protocol is accel_ckpt_save's.  On restart,
 * accel_ckpt_saver_resume picks what to load: the newest checkpoint
 * committed in the root, or a newer one every rank still has in its local
 * tier (committed in the root first, from those copies).
 *
 * The saver's collective step: every rank passes a value and gets the
 * smallest over all ranks (an all-reduce MIN, or an all-gather).  It is
 * called only from the thread that calls the saver, never from its writer,
 * by every rank in the same order. */
typedef enum accel_err (*accel_ckpt_min_fn)(void *ctx, uint64_t mine, uint64_t *min,
                                            struct accel_error *err);

/* Where the staging memory comes from (pinned host memory for a GPU's
 * copies); NULL fields: accel_malloc and accel_free. */
struct accel_ckpt_mem {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void *ctx;
};

struct accel_ckpt_saver_opts {
    const char *root;  /* the shared root, created when missing */
    const char *local; /* node-local root of a second tier; NULL: one tier */
    unsigned rank, world;
    unsigned keep;       /* committed checkpoints kept in root; 0 = all */
    unsigned keep_local; /* local copies kept once committed in root (0: 1) */
    uint64_t copy_rate;  /* bytes/s of the local -> root copy; 0 = as fast as it goes */
    const char *owner;   /* the lock's holder line ("job 42 of alice"); NULL: "a job" */
    accel_ckpt_min_fn min;
    void *min_ctx;
    const struct accel_ckpt_mem *mem; /* NULL: accel_malloc */
};

struct accel_ckpt_saver;
struct accel_ckpt;

/* Opens the rank's saver: collective (rank 0 makes the root and takes its
 * lock; a failure anywhere fails every rank, before anything is written).
 * Errors: ACCEL_EBUSY (another job holds the root, named in the message),
 * ACCEL_EINVAL, ACCEL_EPERM, ACCEL_EIO, ACCEL_ENOMEM, ACCEL_EPEER, and
 * min's.  Close with accel_ckpt_saver_close. */
enum accel_err accel_ckpt_saver_open(struct accel_ckpt_saver **out,
                                     const struct accel_ckpt_saver_opts *o,
                                     struct accel_error *err) ACCEL_WUR;

/* One save: its step (1 .. ACCEL_CKPT_MAX_STEP: a resume's 0 means none),
 * the metadata recorded in the manifest, and this rank's pieces (as
 * accel_ckpt_save takes them). */
struct accel_ckpt_save_req {
    unsigned long step;
    const struct accel_ckpt_kv *meta;
    size_t nmeta;
    const struct accel_ckpt_piece *pieces;
    size_t npieces;
    /* accel_ckpt_saver_start: false, the pieces' data is copied before it
     * returns; true, the writer copies it, and the caller keeps it unchanged
     * until accel_ckpt_saver_wait_staged returns (a trainer: until its next
     * optimizer update, so the copy overlaps forward and backward) */
    bool defer;
};

/* A save from start to commit: collective, like accel_ckpt_save (and with
 * its errors); with a local tier, it returns once the copies are
 * committed in the root. */
enum accel_err accel_ckpt_saver_save(struct accel_ckpt_saver *sv,
                                     const struct accel_ckpt_save_req *q,
                                     struct accel_error *err) ACCEL_WUR;

/* Staging memory of at least `bytes` (the saver's own, reused by the next
 * saves; valid until the next call here or the saver's close), for a
 * caller that copies its tensors into it itself (from a GPU): pieces whose
 * data lies in it are not copied again by accel_ckpt_saver_start.  NULL
 * (err set) when it cannot be had, or while a save is in flight. */
void *accel_ckpt_saver_staging(struct accel_ckpt_saver *sv, size_t bytes, struct accel_error *err);

/* What to do when a save is asked for while one is in flight. */
enum accel_ckpt_busy {
    ACCEL_CKPT_WAIT,  /* finish it first (collective, as accel_ckpt_saver_poll blocking) */
    ACCEL_CKPT_REFUSE /* ACCEL_EBUSY, the new one not taken */
};

/* Starts a save and returns once its pieces are copied into the staging
 * memory (the caller may change its tensors from then on); the writer
 * thread writes the rank file (and copies it to the root with a local
 * tier) meanwhile.  Every rank calls it at the same point.  A problem of
 * this rank's (its arguments, memory) is not returned here but by the
 * poll that ends the save, on every rank (as accel_ckpt_saver_save would
 * have it); returned here: ACCEL_EBUSY (busy = REFUSE), the previous save's
 * error (busy = WAIT). */
enum accel_err accel_ckpt_saver_start(struct accel_ckpt_saver *sv,
                                      const struct accel_ckpt_save_req *q,
                                      enum accel_ckpt_busy busy, struct accel_error *err) ACCEL_WUR;

/* In place of accel_ckpt_saver_start (with ACCEL_CKPT_WAIT) on a rank
 * that could not gather its pieces for save `step` (the others started
 * it): the poll that ends the save fails on every rank, this one with
 * `why` (NULL, or no code: ACCEL_EIO).  A save still in flight is finished
 * first, collectively, as start would: its error is returned (as start
 * returns it on the other ranks), else ACCEL_OK. */
enum accel_err accel_ckpt_saver_fail(struct accel_ckpt_saver *sv, unsigned long step,
                                     const struct accel_error *why, struct accel_error *err);

/* With a deferred save (q->defer) in flight: returns once its pieces are
 * copied into staging (at once when they are, or no save is in flight), so
 * that the caller may change them.  Not collective. */
void accel_ckpt_saver_wait_staged(struct accel_ckpt_saver *sv);

/* Collective, every rank at the same point (after each training step, say):
 * when every rank's writer is done (with `block`, after waiting for this
 * rank's), agrees, commits in the root and returns ACCEL_OK with *committed
 * the step committed; else ACCEL_OK with *committed 0 (still writing
 * somewhere, or no save in flight).  A failed save is the error of every
 * rank (its own on the rank that failed, ACCEL_EPEER elsewhere) and nothing
 * of it is committed. */
enum accel_err accel_ckpt_saver_poll(struct accel_ckpt_saver *sv, bool block,
                                     unsigned long *committed, struct accel_error *err) ACCEL_WUR;

/* The step being saved, 0 when none is in flight. */
unsigned long accel_ckpt_saver_pending(struct accel_ckpt_saver *sv);

/* Collective, before the first save of a run: which checkpoint to load.
 * The newest committed in the root, unless every rank has in its local
 * tier a newer step of this world size (a run that died after the local
 * writes, before the copies were committed): then those copies are copied
 * to the root, each piece checked against its checksum on the way, and
 * committed there first.  Only copies of one run are taken, and only of
 * the run that wrote the root's newest checkpoint or of one that went on
 * from it (not those a run left on some nodes before another run moved the
 * root on).  Local steps newer than the one chosen are attempts that did
 * not finish, and are removed; but when the copies are sound and the root
 * fails to take them, the error is returned and they are kept.  *step is
 * the step to load (0: none); open it with accel_ckpt_saver_open_step.
 *
 * The local tier of a root is LOCAL/NAME-HASH (NAME: the root's last
 * component, HASH: of its whole name, as given): jobs of other roots may
 * share LOCAL. */
enum accel_err accel_ckpt_saver_resume(struct accel_ckpt_saver *sv, unsigned long *step,
                                       struct accel_error *err) ACCEL_WUR;

/* Opens committed checkpoint `step` of the saver's root for reading, its
 * rank files read from the local tier where a copy of the same size is
 * there (every piece's checksum is checked on every read, from either). */
enum accel_err accel_ckpt_saver_open_step(struct accel_ckpt_saver *sv, unsigned long step,
                                          struct accel_ckpt **c, struct accel_error *err) ACCEL_WUR;

/* Waits for the writer (a save in flight is not committed: a later run's
 * accel_ckpt_saver_resume may still find it in the local tier), stops it,
 * lets go of the root's lock and frees everything.  NULL: nothing. */
void accel_ckpt_saver_close(struct accel_ckpt_saver *sv);

/* A handle on a committed checkpoint.  One thread uses a handle at a time
 * (reads share its scratch buffer); open one per thread. */
struct accel_ckpt;

/* Opens a committed checkpoint: `path` is a checkpoint directory, or a root,
 * which means its newest committed checkpoint.  Reads and checks the
 * manifest (types, shapes, pieces tiling each tensor exactly); rank files
 * are opened when read.  Errors: ACCEL_ENOTFOUND (no committed checkpoint
 * there; the message says what was found), ACCEL_EPARSE (a malformed
 * manifest: the message names the file and the field), ACCEL_ETOOBIG,
 * ACCEL_EIO, ACCEL_EPERM, ACCEL_ENOMEM. */
enum accel_err accel_ckpt_open(struct accel_ckpt **out, const char *path,
                               struct accel_error *err) ACCEL_WUR;

unsigned long accel_ckpt_step(const struct accel_ckpt *c);
/* The world size that saved it. */
unsigned accel_ckpt_world(const struct accel_ckpt *c);
/* The checkpoint's directory. */
const char *accel_ckpt_dir(const struct accel_ckpt *c);
/* A metadata value; NULL when the key is not there. */
const char *accel_ckpt_meta(const struct accel_ckpt *c, const char *key);
/* Tensors, in name order: i < accel_ckpt_ntensors(c). */
size_t accel_ckpt_ntensors(const struct accel_ckpt *c);
const struct accel_ckpt_tensor *accel_ckpt_tensor_at(const struct accel_ckpt *c, size_t i);
/* The tensor called `name`; NULL when there is none. */
const struct accel_ckpt_tensor *accel_ckpt_find(const struct accel_ckpt *c, const char *name);

/* Reads elements [lo, hi) of tensor `name` (flattened) into dst, which holds
 * hi - lo elements of the tensor's stored type `dtype` (which must match).
 * Every saved piece it reads from is read whole and its checksum checked,
 * on every read.  Errors: ACCEL_ENOTFOUND (no such tensor),
 * ACCEL_EINVAL (a range or type that does not fit: the message names the
 * tensor, its shape and type), ACCEL_EIO (a short file, a checksum that does
 * not match: the message names the file and the tensor), ACCEL_EPARSE (a
 * rank file whose header breaks the safetensors rules or disagrees with the
 * manifest), ACCEL_ENOMEM. */
enum accel_err accel_ckpt_read(struct accel_ckpt *c, const char *name, enum accel_dtype dtype,
                               uint64_t lo, uint64_t hi, void *dst,
                               struct accel_error *err) ACCEL_WUR;

/* Checks that every rank file is there with the size the manifest says and
 * a header that matches it, reading no tensor data (what a load would trip
 * over first: a truncated or replaced file).  The first problem is the
 * error; accel_ckpt_verify checks the data too. */
enum accel_err accel_ckpt_check_files(struct accel_ckpt *c, struct accel_error *err) ACCEL_WUR;

/* Reads every piece of every file and checks its checksum, each file's
 * header against the manifest and that no file has bytes beyond its last
 * tensor.  The first problem is the error. */
enum accel_err accel_ckpt_verify(struct accel_ckpt *c, struct accel_error *err) ACCEL_WUR;

/* Writes the model's tensors (names not beginning with "optim.") in the
 * Hugging Face layout into directory `out` (created when missing; an
 * earlier export there, of any layout, is replaced, other files are left
 * alone): model.safetensors, or, past `max_shard_bytes` of tensor data
 * (0 = 5,000,000,000, huggingface_hub's default), model-0000i-of-0000N
 * .safetensors split as huggingface_hub splits and model.safetensors
 * .index.json; metadata {"format":"pt"}; global shapes.  Every piece read is
 * checked as accel_ckpt_read does.  On error the earlier export is as it
 * was (docs/ckpt.md: what a crash leaves). */
enum accel_err accel_ckpt_consolidate(struct accel_ckpt *c, const char *out,
                                      uint64_t max_shard_bytes, struct accel_error *err) ACCEL_WUR;

void accel_ckpt_close(struct accel_ckpt *c);

/* One checkpoint directory under a root, for listings: its step, whether it
 * is committed (a valid manifest), the world size and bytes of its files
 * (committed only). */
struct accel_ckpt_entry {
    unsigned long step;
    bool committed;
    unsigned world;
    uint64_t bytes;
    char name[32]; /* "step-00000100" */
};

/* Lists the step-NNNNNNNN directories of `root`, by step, into a new array
 * (*out, accel_free) of *n entries.  Other names are ignored. */
enum accel_err accel_ckpt_list(const char *root, struct accel_ckpt_entry **out, size_t *n,
                               struct accel_error *err) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
