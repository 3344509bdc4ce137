/*
 * check_int.h (private to core/config): the schema walk and the cross-field
 * rules, shared by config.c (user files) and site.c (the site's defaults and
 * enforce sections).
 */
#ifndef ACCEL_CONFIG_CHECK_INT_H
#define ACCEL_CONFIG_CHECK_INT_H

#include "accel/config.h"
#include "accel/diag.h"
#include "accel/value.h"

/* Walks a whole config tree (top level) against the schema of `version`:
 * unknown keys, removed keys, types, enums.  Findings go to `d`. */
void config__check_schema(const struct accel_val *root, unsigned version, struct accel_diags *d);

/* Cross-field rules on a merged tree (what accelerate launch rejects and what
 * it silently gets wrong).  `user` is the user's own tree, for warnings
 * about what the user wrote; opts may give the cluster shape. */
void config__check_rules(const struct accel_val *root, const struct accel_val *user,
                         const struct accel_cfg_opts *opts, unsigned version,
                         struct accel_diags *d);

/* Adds "; did you mean 'x'?" text for `key` among every known name into buf
 * (empty when nothing is close). */
void config__suggest(const char *key, const char *section, char *buf, size_t size);

/* accelerate's prefix rule for keys of a nested section: the canonical name
 * ("sharding_strategy" -> "fsdp_sharding_strategy") into buf. */
void config__canonical_key(const char *section, const char *key, char *buf, size_t size);

#endif
