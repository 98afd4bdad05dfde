/* fmt.c - human-readable numbers for the text output: bytes in binary units (DESIGN.md counts
 * memory in bytes and writes limits in MiB/GiB), counts with SI prefixes, durations. */
#include "cli.h"

#include <math.h>

const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t n) {
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%u B", (unsigned)bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    /* Switch unit before rounding would print "1024.0 KiB". */
    while (v >= 1023.95 && u + 1 < (int)(sizeof units / sizeof units[0])) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, units[u]);
    return buf;
}

const char *cli_fmt_si(double v, char *buf, size_t n) {
    static const char *prefixes[] = {"", " k", " M", " G", " T", " P", " E"};
    int p = 0;
    double a = fabs(v);
    while (a >= 999.5 && p + 1 < (int)(sizeof prefixes / sizeof prefixes[0])) {
        a /= 1000.0;
        v /= 1000.0;
        p++;
    }
    if (p == 0)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.3g%s", v, prefixes[p]);
    return buf;
}

const char *cli_fmt_seconds(double s, char *buf, size_t n) {
    if (s < 1e-3)
        snprintf(buf, n, "%.1f us", s * 1e6);
    else if (s < 1.0)
        snprintf(buf, n, "%.2f ms", s * 1e3);
    else
        snprintf(buf, n, "%.3f s", s);
    return buf;
}
