/*
 * st_int.h: the safetensors format, both ways (reference/checkpoint.md §1).
 *
 * The reader applies every rule of the reference reader (safetensors 0.8,
 * `Metadata::validate`): an 8-byte little-endian header length N of at most
 * 100,000,000 bytes, a UTF-8 JSON object, tensors with exactly dtype, shape
 * and data_offsets, offsets that tile the data buffer from 0 with no hole,
 * overlap or trailing byte, sizes that equal numel x bits / 8, metadata of
 * strings only; and a duplicate name is an error here (upstream's reader
 * lets serde keep one).  The writer lays the tensors out back to back,
 * larger element types first (so each is aligned to its element size), puts
 * __metadata__ first and pads the header with spaces to a multiple of 8, as
 * the reference writer does.  Neither touches tensor data: the caller reads
 * and writes it at the offsets the header gives.
 */
#ifndef CKPT_ST_INT_H
#define CKPT_ST_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/ckpt.h"

#define ST_MAX_HEADER 100000000u

struct ckpt__st_tensor {
    char *name;
    const char *dtype; /* safetensors' name ("F32"), static */
    unsigned bits;     /* per element */
    unsigned ndim;
    uint64_t shape[ACCEL_CKPT_MAX_DIMS];
    uint64_t begin, end; /* bytes, relative to the data buffer */
};

struct ckpt__st_header {
    uint64_t data_start;       /* 8 + N: the data buffer's offset in the file */
    struct ckpt__st_tensor *t; /* sorted by name */
    size_t nt;
    char **meta_key, **meta_val; /* __metadata__, sorted by key */
    size_t nmeta;
};

/* Parses the n header bytes `json` of a file whose data buffer is data_len
 * bytes long (file size - 8 - n) and checks the rules above.  `what` names
 * the file in messages.  On error *h is empty (safe to free).  Errors:
 * ACCEL_EPARSE (the message says which rule and which tensor), ACCEL_ETOOBIG
 * (more than ACCEL_CKPT_MAX_TENSORS tensors, ACCEL_CKPT_MAX_DIMS dims or a
 * name over ACCEL_CKPT_MAX_NAME bytes), ACCEL_ENOMEM. */
enum accel_err ckpt__st_parse(const char *json, size_t n, uint64_t data_len, const char *what,
                              struct ckpt__st_header *h, struct accel_error *err);

/* Reads and parses the header of the open file fd of file_size bytes; the
 * header may be at most max_header bytes (<= ST_MAX_HEADER).  Errors as
 * ckpt__st_parse, and ACCEL_EIO. */
enum accel_err ckpt__st_read(int fd, uint64_t file_size, size_t max_header, const char *what,
                             struct ckpt__st_header *h, struct accel_error *err);

const struct ckpt__st_tensor *ckpt__st_find(const struct ckpt__st_header *h, const char *name);
const char *ckpt__st_meta(const struct ckpt__st_header *h, const char *key);
void ckpt__st_header_free(struct ckpt__st_header *h);

/* One tensor to write. */
struct ckpt__st_out {
    const struct accel_ckpt_tensor *t; /* name, dtype and shape of the stored tensor */
    uint64_t bytes;                    /* must equal numel x element size */
    uint64_t begin;                    /* set by ckpt__st_build: offset in the data buffer */
};

/* Builds the first 8 + N bytes of a file holding the n tensors of `o` (each
 * o[i].begin set) and the metadata pairs, in a new buffer (*out, accel_free)
 * of *len bytes; `seq` (n entries, or NULL) receives the indices of o in the
 * order their data follows the header.  Names must be unique (the caller's
 * check).  Errors: ACCEL_EINVAL (bytes that do not match the shape),
 * ACCEL_ETOOBIG, ACCEL_ENOMEM. */
enum accel_err ckpt__st_build(struct ckpt__st_out *o, size_t n, const struct accel_ckpt_kv *meta,
                              size_t nmeta, char **out, size_t *len, size_t *seq,
                              struct accel_error *err);
/* The same with the data starting at a multiple of `align` (a power of
 * two >= 8: 4096 lets the data go out with O_DIRECT from offset 8 + N). */
enum accel_err ckpt__st_build_aligned(struct ckpt__st_out *o, size_t n,
                                      const struct accel_ckpt_kv *meta, size_t nmeta, size_t align,
                                      char **out, size_t *len, size_t *seq,
                                      struct accel_error *err);

/* A JSON number that is an integer in [0, 2^53] (exact in cJSON's double). */
struct cJSON;
bool ckpt__st_json_uint(const struct cJSON *v, uint64_t *out);

/* The n bytes of `json` as one JSON object, as serde_json reads a document
 * into the safetensors header's types: only JSON whitespace (space, tab, CR,
 * LF) around the object, no control byte, and numbers only as unsigned
 * integers in plain digits (cJSON alone skips a BOM and any byte <= 0x20,
 * takes control bytes in strings, reads "4.0" and "-0" as integers, and
 * ignores what follows the value).  The manifest has the same number rule.
 * A new tree (cJSON_Delete), or NULL. */
struct cJSON *ckpt__st_json_object(const char *json, size_t n);

/* numel of a shape, false on overflow of 2^63. */
bool ckpt__st_numel(const uint64_t *shape, unsigned ndim, uint64_t *numel);

#endif
