/*
 * switch_int.h: what slurm_topo.c (the switch tree, SLURM_TOPOLOGY_ADDR)
 * and topology_conf.c (topology.conf) share to build a tree.  Internal: the
 * names carry the topo__ prefix and may change without notice.
 */
#ifndef SWITCH_INT_H
#define SWITCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/cluster.h"

/* A copy of s[0..n) with a NUL, in the tree's string arena; NULL when out
 * of memory.  It lives until accel_switch_tree_free. */
char *topo__str_save(struct accel_switch_tree *t, const char *s, size_t n);

/* Makes room for one more of *arr's `size`-byte elements (used of *cap):
 * doubles *cap from 16.  ACCEL_ENOMEM. */
enum accel_err topo__grow(void **arr, uint32_t *cap, uint32_t used, size_t size) ACCEL_WUR;

/* Appends a switch (its index in *idx); the caller checked that the name is
 * new and the caps.  ACCEL_ENOMEM. */
enum accel_err topo__switch_add(struct accel_switch_tree *t, const char *name, size_t len,
                                uint32_t parent, uint32_t depth, unsigned line,
                                uint32_t *idx) ACCEL_WUR;

/* Appends a node under the leaf switch `leaf`; the caller checked that the
 * name is new.  ACCEL_ENOMEM. */
enum accel_err topo__switch_add_node(struct accel_switch_tree *t, const char *name, uint32_t leaf,
                                     unsigned line) ACCEL_WUR;

/* A switch or node name: printable, no host-list punctuation ("[],=#"). */
bool topo__switch_name_ok(const char *s, size_t n);

#endif
