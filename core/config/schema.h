/*
 * schema.h (private to core/config): the accelerate 1.x config schema as
 * tables, one per section, with the versions that added or removed each key.
 * check.c walks a document against these tables; nothing else reads them.
 */
#ifndef ACCEL_CONFIG_SCHEMA_H
#define ACCEL_CONFIG_SCHEMA_H

#include <stddef.h>

enum key_type {
    KT_BOOL,    /* YAML boolean */
    KT_INT,     /* integer */
    KT_FLOAT,   /* integer or float */
    KT_STR,     /* string (numbers are refused: they change meaning) */
    KT_ENUM,    /* string from `values` */
    KT_MAP,     /* a nested section (`sub`) or free mapping (sub NULL) */
    KT_STRLIST, /* list of strings */
    KT_ANY      /* anything; checked by a rule in check.c */
};

/* The ranges of num_processes and num_machines (the rules skip the layout
 * checks for values outside them: the schema reports those). */
#define SCHEMA_MAX_PROCESSES (1L << 24)
#define SCHEMA_MAX_MACHINES (1L << 20)

#define KF_NULL 0x01u   /* null allowed: means "not given" */
#define KF_CASEI 0x02u  /* enum compared case-insensitively */
#define KF_DIGITS 0x04u /* enum also accepted as its 1-based index */
#define KF_NOOP 0x08u   /* accepted by accelerate but read by nothing (see `instead`) */
#define KF_LEGACY 0x10u /* migrated by accelerate's loader (see `instead`) */
#define KF_AUTO 0x20u   /* the word "auto" is accepted as well */

struct section;

struct key_spec {
    const char *name;
    enum key_type type;
    const char *const *values; /* KT_ENUM: NULL-terminated */
    unsigned flags;
    unsigned since;      /* first accelerate version that reads it; 0 = before 1.0 */
    unsigned removed;    /* first version that rejects or ignores it; 0 = never */
    const char *instead; /* for removed, legacy and no-op keys: what to write */
    const struct section *sub;
    long min, max; /* KT_INT range when min <= max */
};

struct section {
    const char *name;        /* "fsdp_config"; "" for the top level */
    const char *prefix;      /* accelerate adds it to keys lacking it, or NULL */
    const char *prefix_test; /* a key starting with this keeps its name */
    unsigned prefix_since;   /* version that started adding the prefix */
    const struct key_spec *keys;
    size_t n;
};

extern const struct section config__schema_cluster;   /* compute_environment LOCAL_MACHINE */
extern const struct section config__schema_sagemaker; /* compute_environment AMAZON_SAGEMAKER */

/* Sections by name, for the did-you-mean that says "this key belongs under
 * fsdp_config"; NULL-terminated. */
extern const struct section *const config__schema_sections[];

const struct key_spec *config__schema_find(const struct section *s, const char *name);

extern const char *const config__schema_dist_values[];
extern const char *const config__schema_fsdp_strategies[];
extern const char *const config__schema_precisions[];
const char *const *config__schema_sagemaker_dist(void);

#endif
