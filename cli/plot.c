/* plot.c - pictures of memory over a schedule: a sparkline for the terminal and an SVG chart
 * (optionally with a second series, e.g. the eager order beside a schedule).
 * Both downsample or scale but never hide the peak: the sparkline takes the max of each column
 * and the SVG draws every step as a flat segment (memory is accounted per step, DESIGN.md). */
#include "cli.h"

#include <math.h>
#include <string.h>

#define SPARK_MAX_COLS 256

void cli_sparkline(FILE *f, const size_t *v, int n, int width) {
    static const char *const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                         "\u2585", "\u2586", "\u2587", "\u2588"};
    if (n <= 0 || width <= 0) return;
    if (width > SPARK_MAX_COLS) width = SPARK_MAX_COLS;
    if (width > n) width = n;
    size_t col[SPARK_MAX_COLS];
    size_t lo = SIZE_MAX, hi = 0;
    for (int c = 0; c < width; c++) {
        int a = (int)((int64_t)c * n / width), b = (int)((int64_t)(c + 1) * n / width);
        size_t m = 0;
        for (int s = a; s < b; s++)
            if (v[s] > m) m = v[s];
        col[c] = m;
        if (m < lo) lo = m;
        if (m > hi) hi = m;
    }
    for (int c = 0; c < width; c++) {
        int level = hi > lo ? (int)lround((double)(col[c] - lo) * 7.0 / (double)(hi - lo)) : 3;
        fputs(blocks[level], f);
    }
}

/* ---------------------------------------------------------------- SVG */

#define SVG_W 800
#define SVG_H 420
#define M_LEFT 90
#define M_RIGHT 30
#define M_TOP 50
#define M_BOTTOM 60
#define MIB (1024.0 * 1024.0)

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about `want` ticks over span. */
static double nice_step(double span, int want) {
    if (!(span > 0)) return 1.0;
    double raw = span / want, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

static void put_xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            /* Control characters are not allowed in XML 1.0 text. */
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

typedef struct svg_frame {
    double x_max, y_max_mib; /* data range: steps [0, x_max], MiB [0, y_max_mib] */
} svg_frame;

static double px(const svg_frame *fr, double step) {
    return M_LEFT + step / fr->x_max * (SVG_W - M_LEFT - M_RIGHT);
}
static double py(const svg_frame *fr, double bytes) {
    return SVG_H - M_BOTTOM - bytes / MIB / fr->y_max_mib * (SVG_H - M_TOP - M_BOTTOM);
}

static void svg_axes(FILE *f, const svg_frame *fr) {
    double x0 = M_LEFT, x1 = SVG_W - M_RIGHT, y0 = SVG_H - M_BOTTOM, y1 = M_TOP;
    double ys = nice_step(fr->y_max_mib, 5);
    int dec = ys >= 1.0 ? 0 : (int)ceil(-log10(ys) - 1e-9);
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#333\">\n");
    for (int i = 0; i * ys <= fr->y_max_mib * (1 + 1e-9); i++) {
        double y = py(fr, i * ys * MIB);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n",
                x0, y, x1, y, x0 - 6, y + 4, dec, i * ys);
    }
    double xs = nice_step(fr->x_max, 8);
    if (xs < 1) xs = 1;
    for (int i = 0; i * xs <= fr->x_max * (1 + 1e-9); i++) {
        double x = px(fr, i * xs);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                x, y0, x, y0 + 5, x, y0 + 19, i * xs);
    }
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n"
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n",
            M_LEFT, y0, SVG_W - M_RIGHT, y0, M_LEFT, y0, M_LEFT, y1);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">schedule step</text>\n",
            (M_LEFT + SVG_W - M_RIGHT) / 2, SVG_H - 15);
    fprintf(f,
            "<text x=\"20\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 20 %d)\">"
            "live memory (MiB)</text>\n</g>\n",
            (M_TOP + SVG_H - M_BOTTOM) / 2, (M_TOP + SVG_H - M_BOTTOM) / 2);
}

static void svg_series(FILE *f, const svg_frame *fr, const cli_mem_plot *p) {
    /* Each step is a flat segment: the chart shows what is live during the step. */
    fprintf(f,
            "<path fill=\"#4a90d9\" fill-opacity=\"0.25\" stroke=\"#1f5fa8\" "
            "stroke-width=\"1.2\" d=\"M%.2f %.2f",
            px(fr, 0), py(fr, 0));
    for (int s = 0; s < p->n_steps; s++)
        fprintf(f, " L%.2f %.2f L%.2f %.2f", px(fr, s), py(fr, (double)p->step_bytes[s]),
                px(fr, s + 1), py(fr, (double)p->step_bytes[s]));
    fprintf(f, " L%.2f %.2f Z\"/>\n", px(fr, p->n_steps), py(fr, 0));

    char b[32];
    double yr = py(fr, (double)p->resident_bytes);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#888\" "
            "stroke-dasharray=\"5,4\"/>\n<text x=\"%d\" y=\"%.1f\" font-family=\"sans-serif\" "
            "font-size=\"11\" fill=\"#666\" text-anchor=\"end\">resident %s</text>\n",
            M_LEFT, yr, SVG_W - M_RIGHT, yr, SVG_W - M_RIGHT - 4, yr - 4,
            cli_fmt_bytes(p->resident_bytes, b, sizeof b));

    if (p->n_steps > 0 && p->peak_step >= 0 && p->peak_step < p->n_steps) {
        double peak = (double)p->step_bytes[p->peak_step];
        double x = px(fr, p->peak_step + 0.5), y = py(fr, peak);
        /* Keep the label inside the chart when the peak is near the right edge. */
        const char *anchor = x > SVG_W * 0.7 ? "end" : "start";
        double tx = x > SVG_W * 0.7 ? x - 8 : x + 8;
        fprintf(f,
                "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"4\" fill=\"#d0021b\"/>\n"
                "<text x=\"%.2f\" y=\"%.2f\" font-family=\"sans-serif\" font-size=\"12\" "
                "fill=\"#d0021b\" text-anchor=\"%s\">peak %s at step %d</text>\n",
                x, y, tx, y - 6, anchor, cli_fmt_bytes((uint64_t)peak, b, sizeof b), p->peak_step);
    }
}

/* Steps of the second series (its own count when given, e.g. the eager order of a graph that a
 * plan rewrote). */
static int ref_steps(const cli_mem_plot *p) {
    return p->ref_n_steps > 0 ? p->ref_n_steps : p->n_steps;
}

/* The second series: a dashed step line, no fill, so the first stays readable beneath it. */
static void svg_ref_series(FILE *f, const svg_frame *fr, const cli_mem_plot *p) {
    if (!p->ref_bytes || ref_steps(p) <= 0) return;
    fprintf(f, "<path fill=\"none\" stroke=\"#e07b00\" stroke-width=\"1.4\" "
               "stroke-dasharray=\"6,3\" d=\"");
    for (int s = 0; s < ref_steps(p); s++)
        fprintf(f, "%s%.2f %.2f L%.2f %.2f", s ? " L" : "M", px(fr, s),
                py(fr, (double)p->ref_bytes[s]), px(fr, s + 1), py(fr, (double)p->ref_bytes[s]));
    fprintf(f, "\"/>\n");
}

static void svg_legend(FILE *f, const cli_mem_plot *p) {
    if (!p->label && !p->ref_label) return;
    int x = M_LEFT + 12, y = M_TOP + 8;
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#333\">\n");
    if (p->label) {
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"10\" fill=\"#4a90d9\" "
                "fill-opacity=\"0.25\" stroke=\"#1f5fa8\"/><text x=\"%d\" y=\"%d\">",
                x, y, x + 24, y + 10);
        put_xml_text(f, p->label);
        fprintf(f, "</text>\n");
        y += 18;
    }
    if (p->ref_label && p->ref_bytes) {
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#e07b00\" "
                "stroke-width=\"1.4\" stroke-dasharray=\"6,3\"/><text x=\"%d\" y=\"%d\">",
                x, y + 5, x + 18, y + 5, x + 24, y + 10);
        put_xml_text(f, p->ref_label);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n");
}

static bool svg_write(FILE *f, void *arg, ir_diag *d) {
    const cli_mem_plot *p = arg;
    size_t top = p->resident_bytes;
    for (int s = 0; s < p->n_steps; s++)
        if (p->step_bytes[s] > top) top = p->step_bytes[s];
    for (int s = 0; p->ref_bytes && s < ref_steps(p); s++)
        if (p->ref_bytes[s] > top) top = p->ref_bytes[s];
    int x_max = p->n_steps;
    if (p->ref_bytes && ref_steps(p) > x_max) x_max = ref_steps(p);
    double top_mib = (double)top / MIB;
    double ys = nice_step(top_mib > 0 ? top_mib * 1.08 : 1.0, 5);
    svg_frame fr = {
        .x_max = x_max > 0 ? x_max : 1,
        .y_max_mib = ceil((top_mib > 0 ? top_mib * 1.08 : 1.0) / ys) * ys,
    };
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_W, SVG_H, SVG_W, SVG_H);
    fprintf(f, "<title>");
    put_xml_text(f, p->title ? p->title : "memory");
    fprintf(f,
            "</title>\n<text x=\"%d\" y=\"28\" font-family=\"sans-serif\" font-size=\"16\" "
            "font-weight=\"bold\" text-anchor=\"middle\">",
            SVG_W / 2);
    put_xml_text(f, p->title ? p->title : "memory");
    fprintf(f, "</text>\n");
    svg_axes(f, &fr);
    svg_series(f, &fr, p);
    svg_ref_series(f, &fr, p);
    svg_legend(f, p);
    fprintf(f, "</svg>\n");
    if (ferror(f)) {
        ir_diag_set(d, IR_ERR_IO, "write error");
        return false;
    }
    return true;
}

ir_status cli_plot_svg(const char *path, const cli_mem_plot *p, ir_diag *d) {
    return cli_write_atomic(path, svg_write, (void *)p, d);
}
