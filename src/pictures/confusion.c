/* confusion.c — the confusion matrix: counting (actual, predicted) pairs, and its picture: one
 * cell per pair with its count, coloured from white to dark blue by the count, actual classes
 * down the left, predicted classes along the bottom, a colour bar on the right, a title on top,
 * written as an opaque PNG that appears whole or not at all. It does not run any model; the
 * caller passes labels and predictions. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pictures/draw.h"

#define CONF_CELL 58.0
#define CONF_MARGIN 16.0
#define CONF_TITLE_BAND 44.0
#define CONF_TITLE_SIZE 18.0
#define CONF_AXIS_BAND 24.0     /* "Actual" on the left, "Predicted" at the bottom */
#define CONF_AXIS_SIZE 14.0
#define CONF_ROW_LABELS 110.0   /* the band of actual class names */
#define CONF_COL_LABELS 84.0    /* the band of predicted class names, slanted */
#define CONF_LABEL_SIZE 13.0
#define CONF_COUNT_SIZE 14.0
#define CONF_BAR_GAP 24.0
#define CONF_BAR_W 18.0
#define CONF_BAR_LABELS 50.0
#define CONF_MAX_CLASSES 64

/* The light, middle and dark ends of the colour scale (close to matplotlib's "Blues"). */
static const double conf_scale[3][3] = {
    {0.969, 0.984, 1.000}, {0.420, 0.682, 0.839}, {0.031, 0.188, 0.420}};

typedef struct {
    const int64_t *counts;
    int classes;
    const char *const *names;
    const char *title;
    int64_t max_count;
} conf_job;

int cn_confusion_count(int64_t *counts, int classes, const uint8_t *labels,
                       const uint8_t *predictions, int n, cn_error *err)
{
    if (!counts || classes < 1 || classes > 256 || n < 0 || (n > 0 && (!labels || !predictions)))
        return cn_fail(err, "confusion matrix: bad arguments (%d classes, %d samples)", classes,
                       n);
    for (int i = 0; i < n; i++)
        if (labels[i] >= classes || predictions[i] >= classes)
            return cn_fail(err, "confusion matrix: sample %d has label %d and prediction %d, "
                           "not classes 0..%d", i, labels[i], predictions[i], classes - 1);
    memset(counts, 0, (size_t)classes * (size_t)classes * sizeof *counts);
    for (int i = 0; i < n; i++) counts[labels[i] * classes + predictions[i]]++;
    return 0;
}

/* ------------------------------------------------------------------ layout */

static double conf_left(void) { return CONF_MARGIN + CONF_AXIS_BAND + CONF_ROW_LABELS; }
static double conf_top(void) { return CONF_MARGIN + CONF_TITLE_BAND; }

static int conf_width(int classes)
{
    return (int)(conf_left() + classes * CONF_CELL + CONF_BAR_GAP + CONF_BAR_W +
                 CONF_BAR_LABELS + CONF_MARGIN);
}

static int conf_height(int classes)
{
    return (int)(conf_top() + classes * CONF_CELL + CONF_COL_LABELS + CONF_AXIS_BAND +
                 CONF_MARGIN);
}

/* ------------------------------------------------------------------ drawing */

/* Sets the source to the scale's colour at t in [0, 1]. */
static void set_scale_colour(cairo_t *cr, double t)
{
    int lo = t < 0.5 ? 0 : 1;
    double u = t < 0.5 ? 2 * t : 2 * t - 1;
    const double *a = conf_scale[lo], *b = conf_scale[lo + 1];
    cairo_set_source_rgb(cr, a[0] + u * (b[0] - a[0]), a[1] + u * (b[1] - a[1]),
                         a[2] + u * (b[2] - a[2]));
}

static const char *class_name(const conf_job *job, int c, char *buf, size_t size)
{
    if (job->names && job->names[c]) return job->names[c];
    snprintf(buf, size, "%d", c);
    return buf;
}

static void draw_cell(cairo_t *cr, const conf_job *job, int actual, int predicted)
{
    int64_t count = job->counts[actual * job->classes + predicted];
    double t = job->max_count > 0 ? (double)count / (double)job->max_count : 0;
    double x = conf_left() + predicted * CONF_CELL, y = conf_top() + actual * CONF_CELL;
    set_scale_colour(cr, t);
    cairo_rectangle(cr, x, y, CONF_CELL, CONF_CELL);
    cairo_fill(cr);
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)count);
    if (count == 0) cairo_set_source_rgb(cr, 0.62, 0.62, 0.62);
    else if (t > 0.6) cairo_set_source_rgb(cr, 1, 1, 1);
    else cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, text, CONF_COUNT_SIZE, x + CONF_CELL / 2, y + CONF_CELL / 2 + 5, 0.5,
                 CONF_CELL - 6);
}

/* Thin white lines between the cells and a dark frame around the matrix. */
static void draw_matrix_lines(cairo_t *cr, int classes)
{
    double left = conf_left(), top = conf_top(), side = classes * CONF_CELL;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 1);
    for (int i = 1; i < classes; i++) {
        cairo_move_to(cr, left + i * CONF_CELL, top);
        cairo_line_to(cr, left + i * CONF_CELL, top + side);
        cairo_move_to(cr, left, top + i * CONF_CELL);
        cairo_line_to(cr, left + side, top + i * CONF_CELL);
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, left - 0.5, top - 0.5, side + 1, side + 1);
    cairo_stroke(cr);
}

/* Actual classes right-aligned left of their rows; predicted classes slanted under their
 * columns, ending at the column's centre. */
static void draw_class_labels(cairo_t *cr, const conf_job *job)
{
    char buf[16];
    double bottom = conf_top() + job->classes * CONF_CELL;
    double slant_max = (CONF_COL_LABELS - 14) / sin(M_PI / 4);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int c = 0; c < job->classes; c++) {
        const char *name = class_name(job, c, buf, sizeof buf);
        cn_draw_text(cr, name, CONF_LABEL_SIZE, conf_left() - 8,
                     conf_top() + (c + 0.5) * CONF_CELL + 4.5, 1, CONF_ROW_LABELS - 12);
        cairo_save(cr);
        cairo_translate(cr, conf_left() + (c + 0.5) * CONF_CELL + 4, bottom + 12);
        cairo_rotate(cr, -M_PI / 4);
        cn_draw_text(cr, name, CONF_LABEL_SIZE, 0, 0, 1, slant_max);
        cairo_restore(cr);
    }
}

static void draw_axis_titles(cairo_t *cr, int classes)
{
    double side = classes * CONF_CELL;
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, "Predicted", CONF_AXIS_SIZE, conf_left() + side / 2,
                 conf_height(classes) - CONF_MARGIN - 6, 0.5, side);
    cairo_save(cr);
    cairo_translate(cr, CONF_MARGIN + CONF_AXIS_SIZE, conf_top() + side / 2);
    cairo_rotate(cr, -M_PI / 2);
    cn_draw_text(cr, "Actual", CONF_AXIS_SIZE, 0, 0, 0.5, side);
    cairo_restore(cr);
}

/* A vertical gradient from 0 (bottom) to the largest count (top), with ticks at nice counts. */
static void draw_colour_bar(cairo_t *cr, const conf_job *job)
{
    double x = conf_left() + job->classes * CONF_CELL + CONF_BAR_GAP, top = conf_top();
    double h = job->classes * CONF_CELL, max = job->max_count > 0 ? (double)job->max_count : 1;
    for (int i = 0; i < (int)h; i++) {
        set_scale_colour(cr, 1 - (i + 0.5) / h);
        cairo_rectangle(cr, x, top + i, CONF_BAR_W, 1);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x - 0.5, top - 0.5, CONF_BAR_W + 1, h + 1);
    cn_axis_ticks t;
    cn_nice_ticks(0, max, 5, &t);
    if (t.step < 1) t.step = 1;
    char buf[32];
    for (double v = 0; v <= max + 1e-9; v += t.step) {
        double y = round(top + h - v / max * h) + 0.5;
        cairo_move_to(cr, x + CONF_BAR_W, y);
        cairo_line_to(cr, x + CONF_BAR_W + 4, y);
        snprintf(buf, sizeof buf, "%.0f", v);
        cn_draw_text(cr, buf, CONF_LABEL_SIZE - 1, x + CONF_BAR_W + 7, y + 4.5, 0,
                     CONF_BAR_LABELS - 8);
    }
    cairo_stroke(cr);
}

static cairo_status_t draw_confusion(cairo_t *cr, const cn_fonts *fonts, const void *ctx)
{
    const conf_job *job = ctx;
    int width = conf_width(job->classes);
    cairo_set_font_face(cr, fonts->bold);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, job->title ? job->title : "", CONF_TITLE_SIZE, width / 2.0,
                 CONF_MARGIN + CONF_TITLE_SIZE + 4, 0.5, width - 2 * CONF_MARGIN);
    cairo_set_font_face(cr, fonts->regular);
    for (int a = 0; a < job->classes; a++)
        for (int p = 0; p < job->classes; p++) draw_cell(cr, job, a, p);
    draw_matrix_lines(cr, job->classes);
    draw_class_labels(cr, job);
    draw_axis_titles(cr, job->classes);
    draw_colour_bar(cr, job);
    return cairo_status(cr);
}

int cn_confusion_picture(const char *path, const int64_t *counts, int classes,
                         const char *const *class_names, const char *title, cn_error *err)
{
    if (!path || !*path) return cn_fail(err, "confusion matrix: no file name given");
    if (!counts || classes < 1 || classes > CONF_MAX_CLASSES)
        return cn_fail(err, "%s: confusion matrix needs counts for 1..%d classes, not %d", path,
                       CONF_MAX_CLASSES, classes);
    conf_job job = {counts, classes, class_names, title, 0};
    for (int i = 0; i < classes * classes; i++) {
        if (counts[i] < 0)
            return cn_fail(err, "%s: confusion matrix: count %d is negative (%lld)", path, i,
                           (long long)counts[i]);
        if (counts[i] > job.max_count) job.max_count = counts[i];
    }
    return cn_png_render(path, conf_width(classes), conf_height(classes), draw_confusion, &job,
                         err);
}
