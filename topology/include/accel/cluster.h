/*
 * accel/cluster.h: the across-nodes half of the topology plan (DESIGN
 * decision 7): which order the nodes of a step take in the ring, so that a
 * ring crosses the fewest switch boundaries, and how good a given order is.
 *
 * Three inputs, three parsers, all pure (no environment, no clock, no I/O
 * except accel_switch_tree_load, which reads one file):
 *   - a Slurm host list ("n[001-004,7],gpu-[1-2]-a"), expanded in full;
 *   - the switch tree, from a Slurm topology.conf in tree form
 *     ("SwitchName=leaf1 Nodes=n[1-4]", "SwitchName=spine Switches=leaf[1-2]")
 *     or from nodes' SLURM_TOPOLOGY_ADDR / SLURM_TOPOLOGY_ADDR_PATTERN pairs
 *     ("spine.leaf2.n2" / "switch.switch.node");
 *   - the step's node list in Slurm order (the first host runs rank 0 and is
 *     MASTER_ADDR).
 *
 * The order puts the nodes of one leaf switch next to each other, the leaves
 * of one spine next to each other (and so on up the tree), and the first
 * host of the step first.  It is a permutation of whole nodes: the caller
 * numbers ranks node after node in this order, so ranks stay contiguous per
 * node, and the per-node plan (which GPU and NIC local rank i gets) is the
 * same on every node and untouched by the order, so local rank i keeps the
 * same GPU/NIC rail on every node.  The ring is node order 0..N-1 and back
 * to 0.  The order reaches the lower bounds below exactly; the proof is in
 * docs/topology-cluster.md.
 *
 * Ownership: every struct here is caller-allocated; the functions that fill
 * one (accel_hostlist_expand, accel_switch_tree_parse/_load/_add) own the
 * memory hanging off it until the matching *_free, which accepts a struct
 * that was only initialised or zeroed.  Strings passed in are copied.
 * Threads: a tree may be read by several threads at once once it is built.
 */
#ifndef ACCEL_CLUSTER_H
#define ACCEL_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps.  Passing one is ACCEL_ETOOBIG with the position, never a crash. */
#define ACCEL_CLUSTER_MAX_NODES (1u << 20)    /* hosts in one list, nodes in one tree or step */
#define ACCEL_CLUSTER_MAX_SWITCHES (1u << 16) /* switches in one tree */
#define ACCEL_CLUSTER_MAX_DEPTH 16            /* switch levels from a top switch to a leaf */
#define ACCEL_CLUSTER_MAX_NAME 255            /* bytes of one host or switch name */
#define ACCEL_CLUSTER_MAX_LIST (1u << 22)     /* bytes of one host-list text (4 MiB) */
#define ACCEL_CLUSTER_MAX_FILE (1u << 24)     /* bytes of a topology.conf (16 MiB) */
#define ACCEL_CLUSTER_MAX_ADDR 4096           /* bytes of SLURM_TOPOLOGY_ADDR or its pattern */
#define ACCEL_CLUSTER_MAX_GROUPS 8            /* bracket groups in one host-list entry */

#define ACCEL_SWITCH_NONE UINT32_MAX /* "no switch": no parent, or not in the tree */

/* ---------------------------------------------------------------- host lists */

/* A fully expanded host list.  names[i] are NUL-terminated; the array and the
 * strings live in one block that accel_hostlist_free releases. */
struct accel_hostlist {
    size_t n;
    char **names; /* [n] */
};

/* Expands a Slurm host list the way Slurm's hostlist_create does, in the
 * order written: comma-separated entries, each a name with up to
 * ACCEL_CLUSTER_MAX_GROUPS bracket groups of comma-separated numbers or
 * ranges ("n[001-004,7]" -> n001 n002 n003 n004 n7: each range keeps the
 * zero padding of its low bound, as in Slurm; "r[1-2]n[1-2]" -> r1n1 r1n2
 * r2n1 r2n2, the last group varying fastest).  Duplicates are kept.
 * `max_hosts` caps the expanded count (0 means ACCEL_CLUSTER_MAX_NODES, which
 * is also the most it can be); the count is computed before anything is
 * expanded, so "n[1-999999999999]" costs nothing.
 * Errors: ACCEL_EINVAL for an empty or malformed list (err->column is the
 * 1-based byte where it went wrong), ACCEL_ETOOBIG past a cap (text length,
 * host count, name length, groups), ACCEL_ENOMEM.  On error *out is empty. */
enum accel_err accel_hostlist_expand(const char *list, size_t max_hosts, struct accel_hostlist *out,
                                     struct accel_error *err) ACCEL_WUR;

/* Releases the names; NULL and an empty list are fine. */
void accel_hostlist_free(struct accel_hostlist *hl);

/* The first host of a host list ("gpu[007-010,12],login1" -> "gpu007"),
 * without expanding the rest: the same grammar and caps as
 * accel_hostlist_expand, the whole list checked.  ACCEL_EINVAL for an empty
 * or malformed list, ACCEL_ETOOBIG past a cap or when the name does not fit
 * `size` bytes with its NUL. */
enum accel_err accel_hostlist_first(const char *list, char *out, size_t size,
                                    struct accel_error *err) ACCEL_WUR;

/* ---------------------------------------------------------------- the switch tree */

struct accel_switch {
    const char *name;
    uint32_t parent;   /* index in switches[], ACCEL_SWITCH_NONE for a top switch */
    uint32_t depth;    /* 0 for a top switch */
    uint32_t nodes;    /* nodes directly under it; > 0 only for a leaf */
    uint32_t children; /* switches directly under it */
    unsigned line;     /* topology.conf line that defined it; 0 when built from addresses */
};

struct accel_switch_node {
    const char *name;
    uint32_t leaf; /* index in switches[] */
    unsigned line; /* topology.conf line that put it there; 0 from an address */
};

struct accel_cluster__chunk;

/* A forest of switches (Slurm allows more than one top switch) with nodes
 * under leaf switches.  Read the public fields; leave the private ones. */
struct accel_switch_tree {
    uint32_t nswitches;
    struct accel_switch *switches; /* [nswitches] */
    uint32_t nnodes;
    struct accel_switch_node *nodes; /* [nnodes], in the order first seen */
    /* private */
    uint32_t switch_cap, node_cap;
    uint32_t *switch_hash, *node_hash; /* open addressing: index + 1, 0 = empty */
    size_t switch_hash_cap, node_hash_cap;
    struct accel_cluster__chunk *strings;
};

/* Makes an empty tree.  An empty tree is valid: every node is "not in the
 * tree" (what topology/none gives). */
void accel_switch_tree_init(struct accel_switch_tree *t);

/* Releases everything and leaves an empty tree; NULL is fine. */
void accel_switch_tree_free(struct accel_switch_tree *t);

/* Parses a topology.conf in tree form into the empty tree `t`.  `file` names
 * the text in errors.  Accepted, one statement per line ('#' comments,
 * backslash-newline continues a line, keys case-insensitive):
 *     SwitchName=NAME [Nodes=HOSTLIST | Switches=HOSTLIST] [LinkSpeed=N]
 * Switches may be named before they are defined.  Refused with the location
 * (err->file, line, column, key): a line not starting with SwitchName, a
 * token without '=' or value (ACCEL_EPARSE); an unknown or repeated key,
 * BlockName/BlockSizes (topology/block: ACCEL_EUNSUPPORTED, use the
 * addresses), a switch defined twice, one with both Nodes and Switches, an
 * undefined child switch, a switch under two parents (or twice under one),
 * a node under two leaves (or twice under one), a cycle of switches
 * (ACCEL_ECONFIG); the caps
 * (ACCEL_ETOOBIG), ACCEL_ENOMEM.  On any error the tree is left empty. */
enum accel_err accel_switch_tree_parse(struct accel_switch_tree *t, const char *file,
                                       const char *text, size_t len,
                                       struct accel_error *err) ACCEL_WUR;

/* Reads `path` (at most ACCEL_CLUSTER_MAX_FILE bytes, with the caller's
 * identity) and parses it as above.  Also ACCEL_ENOTFOUND, ACCEL_EPERM,
 * ACCEL_EIO from reading. */
enum accel_err accel_switch_tree_load(struct accel_switch_tree *t, const char *path,
                                      struct accel_error *err) ACCEL_WUR;

/* One node's topology address, split by its pattern.  Plain arrays, so the
 * struct may be copied. */
struct accel_switch_addr {
    unsigned nswitches;                                                 /* top switch first */
    char switches[ACCEL_CLUSTER_MAX_DEPTH][ACCEL_CLUSTER_MAX_NAME + 1]; /* [nswitches] */
    char node[ACCEL_CLUSTER_MAX_NAME + 1];
};

/* Splits SLURM_TOPOLOGY_ADDR by SLURM_TOPOLOGY_ADDR_PATTERN: "spine.leaf2.n2"
 * with "switch.switch.node" gives switches {spine, leaf2} and node n2.  The
 * pattern is dot-separated words "switch" or "block" (topology/block: the
 * block acts as a leaf), ending in one "node"; "node" alone (topology/none)
 * gives no switches.  The node name is the rest of the address after the
 * switches, so a node name may contain dots.  ACCEL_EINVAL for an empty
 * field, an unknown pattern word, or an address with fewer fields than the
 * pattern (err->column points at the problem); ACCEL_ETOOBIG past
 * ACCEL_CLUSTER_MAX_ADDR, _MAX_DEPTH or _MAX_NAME. */
enum accel_err accel_switch_addr_parse(const char *addr, const char *pattern,
                                       struct accel_switch_addr *out,
                                       struct accel_error *err) ACCEL_WUR;

/* Adds one node's address to the tree (gathered from every node, e.g. by the
 * rendezvous store: Slurm exports only the task's own address).  Adding the
 * same address twice is fine; an address with no switches adds nothing.
 * ACCEL_ECONFIG when it contradicts the tree: a switch under another parent
 * (or a top switch in one address and not in another), a leaf that also has
 * child switches, a node under another leaf.  On ACCEL_ECONFIG or
 * ACCEL_ETOOBIG the tree is unchanged; on ACCEL_ENOMEM it stays valid but
 * may hold some of the address's switches without the node. */
enum accel_err accel_switch_tree_add(struct accel_switch_tree *t, const struct accel_switch_addr *a,
                                     struct accel_error *err) ACCEL_WUR;

/* The leaf switch of `node`, or ACCEL_SWITCH_NONE when it is not in the tree. */
uint32_t accel_switch_tree_leaf(const struct accel_switch_tree *t, const char *node);

/* The index of the switch called `name`, or ACCEL_SWITCH_NONE. */
uint32_t accel_switch_tree_find(const struct accel_switch_tree *t, const char *name);

/* The index in nodes[] of the node called `name`, or ACCEL_SWITCH_NONE. */
uint32_t accel_switch_tree_node(const struct accel_switch_tree *t, const char *name);

/* ---------------------------------------------------------------- order and metrics */

/* The node order of a step.  nodes[0..n-1] are the step's nodes in Slurm
 * order (SLURM_STEP_NODELIST expanded); order_out[k] receives the index in
 * nodes[] of the k-th node of the ring, so order_out[0] == 0 always (rank 0
 * stays on the first host, which is MASTER_ADDR).
 *
 * The rule: a DFS of the switch tree in which the children of a switch are
 * visited in the order their first node appears in nodes[], and the nodes of
 * a leaf in nodes[] order.  Equivalently, nodes sort by the path of their
 * switch ancestors from the top, each switch keyed by its first node's
 * index, then by their own index: the sort is stable and deterministic, and
 * it takes O(n + s + l log l) time for n nodes, s switches, l leaves touched.
 * Every subtree's nodes are contiguous, so the ring meets the bounds of
 * accel_cluster_bound exactly.
 *
 * Nodes not in the tree go last, in nodes[] order (node 0 still goes first):
 * then the function returns ACCEL_OK but sets err->code to ACCEL_ENOTFOUND,
 * a warning, with a message naming them; the order is complete and usable.
 * (err is cleared on entry, so err->code is ACCEL_OK after a clean run.)
 * Errors: ACCEL_EINVAL for n == 0, a NULL or empty name, a name twice;
 * ACCEL_ETOOBIG past ACCEL_CLUSTER_MAX_NODES; ACCEL_ENOMEM.  `tree` may be
 * empty (every node then keeps its Slurm place). */
enum accel_err accel_cluster_order(const struct accel_switch_tree *tree, const char *const *nodes,
                                   size_t n, size_t *order_out, struct accel_error *err) ACCEL_WUR;

/* The inverse permutation: rank_out[i] is the ring position (GROUP_RANK) of
 * nodes[i], given order[] from accel_cluster_order. */
void accel_cluster_node_ranks(const size_t *order, size_t n, size_t *rank_out);

/* What a ring costs.  A node not in the tree counts as a leaf of its own
 * hanging off a virtual switch above every top switch (the worst place it
 * could be); so do the top switches of a forest. */
struct accel_ring_metrics {
    size_t nodes;      /* n */
    size_t edges;      /* ring edges: n when n > 1, else 0 (a ring of 2 has 2) */
    size_t leaves;     /* distinct leaves touched; each node not in the tree counts one */
    size_t unplaced;   /* nodes not in the tree */
    size_t crossings;  /* ring edges whose two nodes sit under different leaves */
    size_t spine_hops; /* switch-to-switch links summed over the ring's edges: 2 for
                          leaf-spine-leaf, 4 across pods of a 3-level tree */
};

/* Metrics of the ring nodes[order[0]], ..., nodes[order[n-1]], back to the
 * first; order NULL means Slurm order (0..n-1).  ACCEL_EINVAL when order is
 * not a permutation of 0..n-1 or the names are bad (as in
 * accel_cluster_order), ACCEL_ETOOBIG, ACCEL_ENOMEM. */
enum accel_err accel_cluster_metrics(const struct accel_switch_tree *tree, const char *const *nodes,
                                     size_t n, const size_t *order, struct accel_ring_metrics *out,
                                     struct accel_error *err) ACCEL_WUR;

/* Lower bounds over every order of the same nodes, in the same struct:
 * crossings >= leaves when leaves > 1 (each leaf's group must be entered and
 * left at least once, and an edge leaves one group and enters one other);
 * spine_hops >= 2 x the number of switch uplinks whose subtree holds some
 * but not all of the nodes (a ring crosses such a cut an even number of
 * times, at least twice).  Errors as accel_cluster_metrics. */
enum accel_err accel_cluster_bound(const struct accel_switch_tree *tree, const char *const *nodes,
                                   size_t n, struct accel_ring_metrics *out,
                                   struct accel_error *err) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
