/*
 * hwloc_xml.c: hwloc XML exports as text, before hwloc reads them: the
 * comments taken out (hwloc's parser does not take them; people editing a
 * file write them), and a 3.x export rewritten into the 2.x dialect, the way
 * hwloc 3's own v2 export does, for the hwloc 2.x that Debian 12 ships.  No
 * hwloc call here: a scanner over tags and attributes, fuzzed with the rest
 * of the topology loader (tests/fuzz/fuzz_topology.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/buf.h"
#include "topo_int.h"

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* One past the '>' that closes the markup starting at in[i] ('<'); 0 when it
 * does not close or holds a '<'.  Quoted attribute values may hold '>'. */
static size_t markup_end(const char *in, size_t len, size_t i)
{
    const char *close = ">";
    char quote = 0;

    if (len - i >= 4 && memcmp(in + i, "<!--", 4) == 0)
        close = "-->";
    else if (len - i >= 9 && memcmp(in + i, "<![CDATA[", 9) == 0)
        close = "]]>";
    for (size_t j = i + 1; j < len; j++) {
        if (close[1] == '\0' && in[j] == '<') {
            return 0; /* '<' inside a tag, even quoted, is not XML (it is written &lt;) */
        } else if (close[1] == '\0' && quote) {
            if (in[j] == quote)
                quote = 0;
        } else if (close[1] == '\0' && (in[j] == '"' || in[j] == '\'')) {
            quote = in[j];
        } else if (in[j] == '>' && j + 1 >= strlen(close) &&
                   memcmp(in + j + 1 - strlen(close), close, strlen(close)) == 0) {
            return j + 1;
        }
    }
    return 0;
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == ':' || c == '.';
}

/* Reads the next attribute of a start tag at *p: 1 with its name and value,
 * 0 at the tag's end ("/>" or ">", which must close [.., end)), -1 when the
 * tag is not XML: '<' name (spaces name = "value")* spaces? '/'? '>'.  hwloc's
 * own parser reads some malformed tags differently (it takes a '/' after a
 * value as the end of the tag), so such tags are refused before either reads
 * them. */
static int next_attr(const char **p, const char *end, const char **name, size_t *nlen,
                     const char **val, size_t *vlen)
{
    const char *s = *p;
    bool space = false;
    char q;

    while (s < end && is_space(*s)) {
        s++;
        space = true;
    }
    if (s < end && *s == '/')
        s++;
    if (s < end && *s == '>')
        return s + 1 == end ? 0 : -1;
    if (!space || s >= end || !is_name_char(*s))
        return -1;
    *name = s;
    while (s < end && is_name_char(*s))
        s++;
    *nlen = (size_t)(s - *name);
    while (s < end && is_space(*s))
        s++;
    if (s >= end || *s++ != '=')
        return -1;
    while (s < end && is_space(*s))
        s++;
    if (s >= end || (*s != '"' && *s != '\''))
        return -1;
    q = *s++;
    *val = s;
    while (s < end && *s != q)
        s++;
    if (s >= end)
        return -1;
    *vlen = (size_t)(s - *val);
    *p = s + 1;
    return 1;
}

/* Skips '<' and the element name; NULL when there is none. */
static const char *after_name(const char *tag, const char *end)
{
    const char *p = tag + 1;

    if (p >= end || !is_name_char(*p))
        return NULL;
    while (p < end && is_name_char(*p))
        p++;
    return p;
}

static bool tag_well_formed(const char *tag, const char *end)
{
    const char *p = after_name(tag, end), *n, *v;
    size_t nl, vl;
    int r;

    if (p == NULL)
        return false;
    while ((r = next_attr(&p, end, &n, &nl, &v, &vl)) == 1)
        ;
    return r == 0;
}

/* The value of attribute `name` in a well-formed start tag [tag, end). */
static bool tag_attr(const char *tag, const char *end, const char *name, const char **val,
                     size_t *vlen)
{
    const char *p = after_name(tag, end), *n;
    size_t nl;

    while (p != NULL && next_attr(&p, end, &n, &nl, val, vlen) == 1)
        if (nl == strlen(name) && memcmp(n, name, nl) == 0)
            return true;
    return false;
}

static bool value_is(const char *v, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(v, s, n) == 0;
}

static unsigned long value_ulong(const char *v, size_t n)
{
    char tmp[24];

    if (n >= sizeof(tmp))
        return 0;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    return strtoul(tmp, NULL, 10);
}

/* hwloc 3's OS device type bitmask as hwloc 2's enum (block 0, GPU 1,
 * network 2, OpenFabrics 3, DMA 4, co-processor 5): the mapping of hwloc 3's
 * HWLOC_TOPOLOGY_EXPORT_XML_FLAG_V2 export. */
static unsigned osdev_v2(unsigned long types, const char *tag, const char *end)
{
    const char *v = NULL;
    size_t n = 0;
    bool bxi = tag_attr(tag, end, "subtype", &v, &n) && value_is(v, n, "BXI");
    bool smi = tag_attr(tag, end, "name", &v, &n) && n >= 4 &&
               (memcmp(v, "nvml", 4) == 0 || memcmp(v, "rsmi", 4) == 0);

    if (types & 0x3) /* storage, memory */
        return 0;
    if (types & 0x20) /* OpenFabrics */
        return 3;
    if (types & 0x10) /* network */
        return bxi ? 3 : 2;
    if (types & 0x40) /* DMA */
        return 4;
    if (types & 0x8) /* co-processor */
        return smi ? 1 : 5;
    if (types & 0x4) /* GPU */
        return 1;
    return 0;
}

static enum accel_err add_tag(struct accel_buf *out, const char *tag, size_t tlen, const char *val,
                              size_t vlen, const char *repl)
{
    enum accel_err rc;

    if (val == NULL)
        return accel_buf_add(out, tag, tlen);
    rc = accel_buf_add(out, tag, (size_t)(val - tag));
    if (rc == ACCEL_OK)
        rc = accel_buf_puts(out, repl);
    if (rc == ACCEL_OK)
        rc = accel_buf_add(out, val + vlen, tlen - (size_t)(val - tag) - vlen);
    return rc;
}

/* Copies one tag, rewriting the attribute hwloc 2 reads differently. */
static enum accel_err rewrite_tag(struct accel_buf *out, const char *tag, size_t tlen,
                                  const char *name, size_t nlen)
{
    const char *end = tag + tlen, *v = NULL;
    size_t n = 0;
    char repl[24];

    if (value_is(name, nlen, "topology") && tag_attr(tag, end, "version", &v, &n))
        return add_tag(out, tag, tlen, v, n, "2.0");
    if (value_is(name, nlen, "object") && tag_attr(tag, end, "type", &v, &n) &&
        value_is(v, n, "OSDev") && tag_attr(tag, end, "osdev_type", &v, &n)) {
        snprintf(repl, sizeof(repl), "%u", osdev_v2(value_ulong(v, n), tag, end));
        return add_tag(out, tag, tlen, v, n, repl);
    }
    if ((value_is(name, nlen, "distances2") || value_is(name, nlen, "distances2hetero")) &&
        tag_attr(tag, end, "kind", &v, &n)) {
        unsigned long kind = value_ulong(v, n);

        if (kind & 0x20) /* hwloc 3 "hops" was "latency" in hwloc 2 */
            kind = (kind & ~0x20ul) | 0x4;
        snprintf(repl, sizeof(repl), "%lu", kind);
        return add_tag(out, tag, tlen, v, n, repl);
    }
    return accel_buf_add(out, tag, tlen);
}

/* hwloc 2.9 trusts its input: an object without one of its four sets makes
 * it dereference NULL while loading.  Every object but the I/O and Misc ones
 * must carry them, as bitmaps ("0x000000ff,,0x1", "0xf...f"). */
static bool object_sets_ok(const char *tag, const char *end)
{
    static const char *const sets[] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};
    const char *v = NULL;
    size_t n = 0;

    if (!tag_attr(tag, end, "type", &v, &n))
        return false;
    if (value_is(v, n, "Bridge") || value_is(v, n, "PCIDev") || value_is(v, n, "OSDev") ||
        value_is(v, n, "Misc"))
        return true;
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
        if (!tag_attr(tag, end, sets[i], &v, &n) || n == 0 ||
            strspn(v, "0123456789abcdefABCDEFx,.") < n)
            return false;
    return true;
}

/* hwloc 2 stops reading the topology at the first top-level element it does
 * not know: hwloc 3's topology-wide <info>, <memtier> and <pci_locality>
 * elements are left out (hwloc 2 derives PCI locality from the tree). */
static bool v3_only(const char *name, size_t n)
{
    return value_is(name, n, "info") || value_is(name, n, "memtier") ||
           value_is(name, n, "pci_locality");
}

/* Copies an hwloc XML export into *out, without comments (hwloc's own parser
 * does not take them; hwloc never writes them, people editing a file do) and,
 * with `v3`, rewritten into the 2.x dialect. */
enum accel_err topo__xml_normalize(const char *in, size_t len, bool v3, struct accel_buf *out,
                                   struct accel_error *err)
{
    unsigned depth = 0, skip = 0; /* skip: depth + 1 of the element being left out */
    size_t i = 0;
    enum accel_err rc = ACCEL_OK;

    while (i < len && rc == ACCEL_OK) {
        const char *lt = memchr(in + i, '<', len - i), *tag, *name;
        size_t stop = lt ? (size_t)(lt - in) : len, end, tlen, nlen;
        bool closing, empty, drop;

        if (!skip && stop > i) {
            /* Outside the root element only blanks are allowed; hwloc's own
             * parser refuses an empty line there (a dropped comment leaves
             * one), so any run of them becomes a single newline. */
            size_t k = i;
            while (depth == 0 && k < stop && strchr(" \t\r\n", in[k]) != NULL)
                k++;
            if (depth == 0 && k == stop) {
                if (out->len > 0 && out->data[out->len - 1] != '\n')
                    rc = accel_buf_add(out, "\n", 1);
            } else
                rc = accel_buf_add(out, in + i, stop - i);
        }
        if (lt == NULL || rc != ACCEL_OK)
            break;
        i = stop;
        end = markup_end(in, len, i);
        if (end == 0)
            return accel_error_set(
                err, ACCEL_EPARSE,
                "hwloc XML: the markup at byte %zu does not close, or holds a '<'", i);
        tag = in + i;
        tlen = end - i;
        i = end;
        if (tlen >= 4 && memcmp(tag, "<!--", 4) == 0)
            continue;
        if (tag[1] == '?' || tag[1] == '!') {
            if (!skip)
                rc = accel_buf_add(out, tag, tlen);
            continue;
        }
        closing = tag[1] == '/';
        empty = tlen >= 3 && tag[tlen - 2] == '/';
        if (closing) {
            if (depth == 0)
                return accel_error_set(err, ACCEL_EPARSE,
                                       "hwloc XML: unbalanced closing tag at byte %zu",
                                       (size_t)(tag - in));
            depth--;
            if (skip) {
                if (depth + 1 == skip)
                    skip = 0;
                continue;
            }
            rc = accel_buf_add(out, tag, tlen);
            continue;
        }
        name = tag + 1;
        nlen = 0;
        while (nlen < tlen - 1 && !is_space(name[nlen]) && name[nlen] != '>' && name[nlen] != '/')
            nlen++;
        if (!tag_well_formed(tag, tag + tlen))
            return accel_error_set(err, ACCEL_EPARSE, "hwloc XML: malformed tag at byte %zu",
                                   (size_t)(tag - in));
        if (value_is(name, nlen, "object") && !object_sets_ok(tag, tag + tlen))
            return accel_error_set(err, ACCEL_EPARSE,
                                   "hwloc XML: object at byte %zu lacks its type or a valid "
                                   "cpuset, complete_cpuset, nodeset or complete_nodeset",
                                   (size_t)(tag - in));
        drop = v3 && !skip && depth == 1 && v3_only(name, nlen);
        if (drop && !empty)
            skip = depth + 1;
        if (!empty)
            depth++;
        if (drop || skip)
            continue;
        rc = v3 ? rewrite_tag(out, tag, tlen, name, nlen) : accel_buf_add(out, tag, tlen);
    }
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, "hwloc XML: out of memory converting it");
    return ACCEL_OK;
}

/* The major version of an hwloc XML export (<topology version="3.0">); 0 when
 * there is none (hwloc 1.x wrote no version). */
unsigned topo__xml_major(const char *xml, size_t len)
{
    for (size_t i = 0; i + 9 < len; i++) {
        const char *v = NULL;
        size_t n = 0, end;

        if (xml[i] != '<' || memcmp(xml + i + 1, "topology", 8) != 0 || !is_space(xml[i + 9]))
            continue;
        end = markup_end(xml, len, i);
        if (end != 0 && tag_attr(xml + i, xml + end, "version", &v, &n))
            return (unsigned)value_ulong(v, n);
        return 0;
    }
    return 0;
}
