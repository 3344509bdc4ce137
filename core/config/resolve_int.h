/*
 * resolve_int.h (private to core/config): turning a checked, merged tree into
 * struct accel_cfg, and the tree helpers config.c and site.c share.
 */
#ifndef ACCEL_CONFIG_RESOLVE_INT_H
#define ACCEL_CONFIG_RESOLVE_INT_H

#include "accel/config.h"

/* Fills the typed fields and cfg->args from cfg->tree (already checked:
 * types are trusted).  ACCEL_ENOMEM only. */
enum accel_err config__resolve(struct accel_cfg *cfg);

/* Applies accelerate's loader migrations in place: legacy `fp16: true`
 * becomes mixed_precision: fp16, a top-level dynamo_backend becomes
 * dynamo_config (replacing it, as accelerate does).  Run before merging
 * with the site, so an enforced key cannot be bypassed by a legacy one. */
enum accel_err config__migrate(struct accel_val *root);

/* Renames nested-section keys to accelerate's canonical names in place
 * (sharding_strategy -> fsdp_sharding_strategy), for targets that prefix. */
enum accel_err config__canonicalize(struct accel_val *root, unsigned version);

/* Sets map[key] = *val (moved in; *val becomes NULL-typed), replacing an
 * existing entry.  ACCEL_ENOMEM. */
enum accel_err config__map_set(struct accel_val *map, const char *key, struct accel_val *val,
                               const struct accel_mark *mark);

#endif
