/* confusion.c — the confusion matrix: counting (actual, predicted) pairs, and its picture for 1
 * to 256 classes: one cell per pair, coloured from white to dark blue by the count, with the
 * count when it fits, actual classes down the left, predicted classes along the bottom, a colour
 * bar on the right, a title on top, written as an opaque PNG that appears whole or not at all.
 * Cells shrink as classes grow (down to CONF_MIN_CELL), and so does their text. It does not run
 * any model and knows no data set's class names; the caller passes them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pictures/draw.h"

#define CONF_SPAN 580         /* px the matrix side comes near: 58 px cells for 10 classes */
#define CONF_MIN_CELL 14      /* px: 256 classes make a 3584 px matrix */
#define CONF_MAX_CELL 116     /* px: few classes do not make huge cells */
#define CONF_SLANT_CELL 24    /* px: from this cell size on, column names are slanted */
#define CONF_MARGIN 16.0
#define CONF_TITLE_BAND 44.0
#define CONF_TITLE_SIZE 18.0
#define CONF_AXIS_BAND 24.0     /* "Actual" on the left, "Predicted" at the bottom */
#define CONF_AXIS_SIZE 14.0
#define CONF_ROW_LABELS 110.0   /* the band of actual class names */
#define CONF_COL_LABELS 84.0    /* the band of predicted class names, slanted */
#define CONF_LABEL_SIZE 13.0
#define CONF_LABEL_MIN 9.0      /* px: a longer class name is cut short with "…" */
#define CONF_COUNT_SIZE 14.0
#define CONF_COUNT_MIN 6.5      /* px: a count that would be smaller is not drawn */
#define CONF_BAR_GAP 24.0
#define CONF_BAR_W 18.0
#define CONF_BAR_LABELS 50.0
#define CONF_MAX_CLASSES 256

/* The light, middle and dark ends of the colour scale (close to matplotlib's "Blues"). */
static const double conf_scale[3][3] = {
    {0.969, 0.984, 1.000}, {0.420, 0.682, 0.839}, {0.031, 0.188, 0.420}};

typedef struct {
    const int64_t *counts;
    int classes;
    const char *const *names;
    const char *title;
    int64_t max_count;
    double cell; /* px: the side of one cell */
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

/* The side of one cell: 580 / classes px, whole, within 14..116 (58 for 10 classes). */
static int conf_cell(int classes)
{
    int cell = CONF_SPAN / classes;
    return cell < CONF_MIN_CELL ? CONF_MIN_CELL : cell > CONF_MAX_CELL ? CONF_MAX_CELL : cell;
}

static double conf_left(void) { return CONF_MARGIN + CONF_AXIS_BAND + CONF_ROW_LABELS; }
static double conf_top(void) { return CONF_MARGIN + CONF_TITLE_BAND; }

static int conf_width(int classes)
{
    return (int)(conf_left() + classes * conf_cell(classes) + CONF_BAR_GAP + CONF_BAR_W +
                 CONF_BAR_LABELS + CONF_MARGIN);
}

static int conf_height(int classes)
{
    return (int)(conf_top() + classes * conf_cell(classes) + CONF_COL_LABELS + CONF_AXIS_BAND +
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

/* The count at 14 px in cells of 58 px or more, smaller in smaller cells and when it has many
 * digits; not drawn at all when that would be under CONF_COUNT_MIN. */
static void draw_count(cairo_t *cr, const conf_job *job, int64_t count, double t, double x,
                       double y)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)count);
    double size = fmin(CONF_COUNT_SIZE, job->cell * 0.3);
    size = cn_fit_size(cr, text, size, 0, job->cell - 6);
    if (size < CONF_COUNT_MIN) return;
    if (count == 0) cairo_set_source_rgb(cr, 0.62, 0.62, 0.62);
    else if (t > 0.6) cairo_set_source_rgb(cr, 1, 1, 1);
    else cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, text, size, x + job->cell / 2, y + job->cell / 2 + size * 5 / 14, 0.5, 0);
}

static void draw_cell(cairo_t *cr, const conf_job *job, int actual, int predicted)
{
    int64_t count = job->counts[actual * job->classes + predicted];
    double t = job->max_count > 0 ? (double)count / (double)job->max_count : 0;
    double x = conf_left() + predicted * job->cell, y = conf_top() + actual * job->cell;
    set_scale_colour(cr, t);
    cairo_rectangle(cr, x, y, job->cell, job->cell);
    cairo_fill(cr);
    draw_count(cr, job, count, t, x, y);
}

/* Thin white lines between the cells and a dark frame around the matrix. */
static void draw_matrix_lines(cairo_t *cr, const conf_job *job)
{
    double left = conf_left(), top = conf_top(), side = job->classes * job->cell;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 1);
    for (int i = 1; i < job->classes; i++) {
        cairo_move_to(cr, left + i * job->cell, top);
        cairo_line_to(cr, left + i * job->cell, top + side);
        cairo_move_to(cr, left, top + i * job->cell);
        cairo_line_to(cr, left + side, top + i * job->cell);
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, left - 0.5, top - 0.5, side + 1, side + 1);
    cairo_stroke(cr);
}

/* Predicted class c's name under its column: slanted, ending at the column's centre, in cells
 * of CONF_SLANT_CELL px or more; else upright (reading upwards), ending at the matrix. */
static void draw_column_label(cairo_t *cr, const conf_job *job, const char *name, int c)
{
    double bottom = conf_top() + job->classes * job->cell;
    double centre = conf_left() + (c + 0.5) * job->cell;
    cairo_save(cr);
    if (job->cell >= CONF_SLANT_CELL) {
        double size = fmin(CONF_LABEL_SIZE, job->cell * 0.55);
        cairo_translate(cr, centre + 4, bottom + 12);
        cairo_rotate(cr, -M_PI / 4);
        cn_draw_text_fit(cr, name, size, CONF_LABEL_MIN, 0, 0, 1,
                         (CONF_COL_LABELS - 14) / sin(M_PI / 4));
    } else {
        double size = fmin(CONF_LABEL_SIZE, job->cell * 0.8);
        cairo_translate(cr, centre + size * 0.35, bottom + 6);
        cairo_rotate(cr, -M_PI / 2);
        cn_draw_text_fit(cr, name, size, CONF_LABEL_MIN, 0, 0, 1, CONF_COL_LABELS - 10);
    }
    cairo_restore(cr);
}

/* Actual classes right-aligned left of their rows, predicted classes under their columns. */
static void draw_class_labels(cairo_t *cr, const conf_job *job)
{
    char buf[16];
    double size = fmin(CONF_LABEL_SIZE, job->cell * 0.8);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int c = 0; c < job->classes; c++) {
        const char *name = class_name(job, c, buf, sizeof buf);
        cn_draw_text_fit(cr, name, size, CONF_LABEL_MIN, conf_left() - 8,
                         conf_top() + (c + 0.5) * job->cell + size * 4.5 / 13, 1,
                         CONF_ROW_LABELS - 12);
        draw_column_label(cr, job, name, c);
    }
}

static void draw_axis_titles(cairo_t *cr, const conf_job *job)
{
    double side = job->classes * job->cell;
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, "Predicted", CONF_AXIS_SIZE, conf_left() + side / 2,
                 conf_height(job->classes) - CONF_MARGIN - 6, 0.5, side);
    cairo_save(cr);
    cairo_translate(cr, CONF_MARGIN + CONF_AXIS_SIZE, conf_top() + side / 2);
    cairo_rotate(cr, -M_PI / 2);
    cn_draw_text(cr, "Actual", CONF_AXIS_SIZE, 0, 0, 0.5, side);
    cairo_restore(cr);
}

/* A vertical gradient from 0 (bottom) to the largest count (top), with ticks at nice counts. */
static void draw_colour_bar(cairo_t *cr, const conf_job *job)
{
    double h = job->classes * job->cell, x = conf_left() + h + CONF_BAR_GAP, top = conf_top();
    double max = job->max_count > 0 ? (double)job->max_count : 1;
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
    draw_matrix_lines(cr, job);
    draw_class_labels(cr, job);
    draw_axis_titles(cr, job);
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
    conf_job job = {counts, classes, class_names, title, 0, conf_cell(classes)};
    for (int i = 0; i < classes * classes; i++) {
        if (counts[i] < 0)
            return cn_fail(err, "%s: confusion matrix: count %d is negative (%lld)", path, i,
                           (long long)counts[i]);
        if (counts[i] > job.max_count) job.max_count = counts[i];
    }
    return cn_png_render(path, conf_width(classes), conf_height(classes), draw_confusion, &job,
                         err);
}
