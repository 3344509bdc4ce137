/*
 * args.c: plugstack.conf arguments, parsed strictly (key=value, every key
 * known, numbers in range).  plugstack.conf splits on blanks and has no
 * quoting, so values cannot contain spaces.
 *
 *   required accelrun.so site=/etc/accelrun/site.yaml port_base=29500 port_range=1000
 *                        accelrun=/usr/bin/accelrun preflight_dir=/shared/accelrun/preflight
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/site.h"
#include "plugin.h"

static bool parse_port(const char *text, unsigned long lo, unsigned long hi, unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < lo || v > hi)
        return false;
    *out = (unsigned)v;
    return true;
}

void plugin_args_parse(struct plugin_args *args, int ac, char **av)
{
    args->site[0] = '\0';
    args->topology[0] = '\0';
    args->topology_xml[0] = '\0';
    args->port_base = ACCEL_PORT_BASE_DEFAULT;
    args->port_range = ACCEL_PORT_RANGE_DEFAULT;
    args->error[0] = '\0';
    args->ports_given = false;
    args->accelrun[0] = '\0';
    args->preflight_dir[0] = '\0';
    for (int i = 0; i < ac; i++) {
        const char *a = av[i];
        if (strncmp(a, "site=", 5) == 0 && a[5] == '/' && strlen(a + 5) < sizeof(args->site)) {
            snprintf(args->site, sizeof(args->site), "%s", a + 5);
        } else if (strncmp(a, "topology_xml=", 13) == 0 && a[13] == '/' &&
                   strlen(a + 13) < sizeof(args->topology_xml)) {
            snprintf(args->topology_xml, sizeof(args->topology_xml), "%s", a + 13);
        } else if (strncmp(a, "topology=", 9) == 0 && a[9] == '/' &&
                   strlen(a + 9) < sizeof(args->topology)) {
            snprintf(args->topology, sizeof(args->topology), "%s", a + 9);
        } else if (strncmp(a, "accelrun=", 9) == 0 && a[9] == '/' &&
                   strlen(a + 9) < sizeof(args->accelrun)) {
            snprintf(args->accelrun, sizeof(args->accelrun), "%s", a + 9);
        } else if (strncmp(a, "preflight_dir=", 14) == 0 && a[14] == '/' &&
                   strlen(a + 14) < sizeof(args->preflight_dir)) {
            snprintf(args->preflight_dir, sizeof(args->preflight_dir), "%s", a + 14);
        } else if (strncmp(a, "port_base=", 10) == 0 &&
                   parse_port(a + 10, 1024, 65535, &args->port_base)) {
            args->ports_given = true;
        } else if (strncmp(a, "port_range=", 11) == 0 &&
                   parse_port(a + 11, 1, 64512, &args->port_range)) {
            args->ports_given = true;
        } else {
            snprintf(args->error, sizeof(args->error),
                     "plugstack.conf: bad argument '%.200s' (known: site=/ABSOLUTE/PATH, "
                     "topology=/ABSOLUTE/PATH, topology_xml=/ABSOLUTE/PATH, port_base=1024..65535, "
                     "port_range=1..64512, accelrun=/ABSOLUTE/PATH, preflight_dir=/ABSOLUTE/PATH)",
                     a);
            return;
        }
    }
    if ((unsigned long)args->port_base + args->port_range > 65536ul)
        snprintf(args->error, sizeof(args->error),
                 "plugstack.conf: port_base=%u + port_range=%u passes 65535", args->port_base,
                 args->port_range);
}
