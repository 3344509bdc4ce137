/*
 * data.h: the example GPT's training text and its batches.
 *
 * The corpus is the licence texts Debian's base-files package installs in
 * /usr/share/common-licenses (present on every Debian system): the regular
 * files of a fixed list, in sorted name order, concatenated as bytes
 * (~237 KB of English prose).  The last 10% is the validation split.  A
 * missing folder or file is an error naming it.
 *
 * Batches are a function of (seed, step, sequence index in the global batch)
 * only, so every world size sees the same global batch and a rank takes its
 * contiguous slice of it.  Ownership: gpt_data_load allocates, gpt_data_free
 * frees (zeroed allowed).
 */
#ifndef GPT_DATA_H
#define GPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#define GPT_DATA_DEFAULT_DIR "/usr/share/common-licenses"
#define GPT_DATA_MAX_FILE (4u << 20) /* bytes of one file */

struct gpt_data {
    unsigned char *bytes; /* the concatenation */
    size_t n;             /* its length */
    size_t ntrain;        /* bytes [0, ntrain) train, [ntrain, n) validation */
    size_t nfiles;
    uint64_t hash; /* FNV-1a 64 of the bytes, printed so runs can be compared */
};

/* Reads the corpus from dir.  Returns 0, or -1 with the reason in why. */
int gpt_data_load(struct gpt_data *d, const char *dir, char *why, size_t whylen);
void gpt_data_free(struct gpt_data *d);

/* The files read, in order (NULL-terminated). */
extern const char *const gpt_data_files[];

/* Training sequence j of step `step`: inputs tok (T bytes) and targets tgt
 * (the next T bytes) from a window of the train split chosen by
 * (seed, step, j). */
void gpt_data_train_seq(const struct gpt_data *d, uint64_t seed, uint64_t step, uint64_t j,
                        size_t T, unsigned char *tok, unsigned char *tgt);

/* Validation sequence j of `count` (fixed windows evenly spaced over the
 * validation split; the same for every run and world size). */
void gpt_data_val_seq(const struct gpt_data *d, size_t j, size_t count, size_t T,
                      unsigned char *tok, unsigned char *tgt);

#endif
