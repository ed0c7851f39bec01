/* plot.c — training curves as a PNG: a title, a legend under it, then two panels over a shared
 * epoch axis: train and test loss on top, test accuracy below (with the validation split's loss
 * and accuracy when the epochs have one), and the learning rate in a third panel when the epochs
 * give it, each with grid lines, ticks at nice numbers and an axis label.
 * It plots numbers it is given; it reads no metrics file (the command line does) and computes
 * nothing about training. */
#include <math.h>
#include <stdio.h>

#include "pictures/draw.h"

/* The picture is laid out on a logical canvas of about 960 x 720 units, scaled to the requested
 * size so that text keeps its proportions (but never below 3/4, where it would be unreadable). */
#define PLOT_BASE_W 960.0
#define PLOT_BASE_H 720.0
#define PLOT_MARGIN 14.0
#define PLOT_TITLE_SIZE 20.0
#define PLOT_LEGEND_SIZE 13.0
#define PLOT_LEGEND_Y 64.0      /* baseline of the legend */
#define PLOT_TOP 86.0           /* top of the upper panel */
#define PLOT_LABEL_SIZE 14.0    /* axis labels */
#define PLOT_TICK_SIZE 12.0     /* tick labels */
#define PLOT_TICK_LEN 5.0
#define PLOT_BOTTOM_BAND 62.0   /* under the lower panel: tick labels and "Epoch" */
#define PLOT_PANEL_GAP 24.0
#define PLOT_RIGHT_MARGIN 28.0
#define PLOT_MARKER_MAX 60      /* draw a dot on every point up to this many epochs */
#define PLOT_MIN_W 400
#define PLOT_MIN_H 300
#define PLOT_MAX_SIDE 8192

typedef enum {
    SERIES_TRAIN_LOSS,
    SERIES_TEST_LOSS,
    SERIES_VAL_LOSS,
    SERIES_TEST_ACCURACY,
    SERIES_VAL_ACCURACY,
    SERIES_LEARNING_RATE
} series_kind;

typedef struct {
    series_kind kind;
    const char *label;
    double r, g, b;
} series_style;

/* matplotlib's colours: blue, orange, red (the loss panel), green, purple (the
 * accuracy panel), and its tenth, cyan (the rate); indexed by series_kind. */
static const series_style plot_series[] = {
    {SERIES_TRAIN_LOSS, "train loss", 0.122, 0.467, 0.706},
    {SERIES_TEST_LOSS, "test loss", 1.000, 0.498, 0.055},
    {SERIES_VAL_LOSS, "val loss", 0.839, 0.153, 0.157},
    {SERIES_TEST_ACCURACY, "test accuracy", 0.173, 0.627, 0.173},
    {SERIES_VAL_ACCURACY, "val accuracy", 0.580, 0.404, 0.741},
    {SERIES_LEARNING_RATE, "learning rate", 0.090, 0.745, 0.812},
};
_Static_assert(sizeof plot_series / sizeof plot_series[0] == SERIES_LEARNING_RATE + 1,
               "one style per series, in series_kind's order");

typedef struct {
    double left, top, width, height;
} plot_rect;

/* One panel: where it goes, which series it shows, its axes. */
typedef struct {
    plot_rect area;
    const series_style *series;
    int num_series;
    const char *y_label;
    cn_axis_ticks y;
    int has_data;
} plot_panel;

typedef struct {
    const cn_epoch_metrics *epochs;
    int n;
    int width, height;
    const char *title;
    int with_val; /* an epoch has validation numbers: their series are drawn */
} plot_job;

static int is_val_series(series_kind kind)
{
    return kind == SERIES_VAL_LOSS || kind == SERIES_VAL_ACCURACY;
}

static double series_value(const cn_epoch_metrics *e, series_kind kind)
{
    if (kind == SERIES_LEARNING_RATE) return e->learning_rate > 0 ? e->learning_rate : NAN;
    if (is_val_series(kind) && !e->has_validation) return NAN;
    double v = kind == SERIES_TRAIN_LOSS    ? e->train_loss
             : kind == SERIES_TEST_LOSS     ? e->test_loss
             : kind == SERIES_VAL_LOSS      ? e->val_loss
             : kind == SERIES_VAL_ACCURACY  ? e->val_accuracy : e->test_accuracy;
    return isfinite(v) ? v : NAN;
}

/* Whether any epoch gives its learning rate: then the picture has the rate's panel. */
static int has_rate(const plot_job *job)
{
    for (int i = 0; i < job->n; i++)
        if (!isnan(series_value(&job->epochs[i], SERIES_LEARNING_RATE))) return 1;
    return 0;
}

/* ------------------------------------------------------------------ axes */

static void epoch_ticks(const plot_job *job, cn_axis_ticks *t)
{
    cn_nice_ticks(job->epochs[0].epoch, job->epochs[job->n - 1].epoch, 10, t);
    if (t->step < 1) { /* whole epochs only */
        t->step = 1, t->decimals = 0;
        t->first = floor(t->first), t->last = ceil(t->last);
    }
}

/* The value range of the panel's series; has_data is 0 when none of them has a finite value. */
static void panel_ticks(const plot_job *job, plot_panel *p, int max_ticks)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int s = 0; s < p->num_series; s++)
        for (int i = 0; i < job->n; i++) {
            double v = series_value(&job->epochs[i], p->series[s].kind);
            if (!isnan(v)) lo = fmin(lo, v), hi = fmax(hi, v);
        }
    p->has_data = lo <= hi;
    if (!p->has_data) lo = 0, hi = 1;
    cn_nice_ticks(lo, hi, max_ticks, &p->y);
}

static void format_tick(char *buf, size_t size, double v, const cn_axis_ticks *t)
{
    if (fabs(v) < 0.5 * t->step) v = 0; /* no "-0.00" */
    if (fmax(fabs(t->first), fabs(t->last)) >= 1e6)
        snprintf(buf, size, "%.3g", v);
    else
        snprintf(buf, size, "%.*f", t->decimals, v);
}

static int tick_count(const cn_axis_ticks *t)
{
    return (int)floor((t->last - t->first) / t->step + 0.5) + 1;
}

static double tick_value(const cn_axis_ticks *t, int i) { return t->first + i * t->step; }

/* The widest tick label of an axis, at PLOT_TICK_SIZE. */
static double widest_tick_label(cairo_t *cr, const cn_axis_ticks *t)
{
    double widest = 0;
    char buf[64];
    for (int i = 0; i < tick_count(t); i++) {
        format_tick(buf, sizeof buf, tick_value(t, i), t);
        widest = fmax(widest, cn_text_width(cr, buf, PLOT_TICK_SIZE));
    }
    return widest;
}

static double map_x(const plot_rect *r, const cn_axis_ticks *t, double v)
{
    return r->left + (v - t->first) / (t->last - t->first) * r->width;
}

static double map_y(const plot_rect *r, const cn_axis_ticks *t, double v)
{
    return r->top + r->height - (v - t->first) / (t->last - t->first) * r->height;
}

/* ------------------------------------------------------------------ panels */

static void draw_grid(cairo_t *cr, const plot_panel *p, const cn_axis_ticks *x)
{
    const plot_rect *r = &p->area;
    cairo_set_source_rgb(cr, 0.90, 0.90, 0.90);
    cairo_set_line_width(cr, 1);
    for (int i = 0; i < tick_count(&p->y); i++) {
        double y = round(map_y(r, &p->y, tick_value(&p->y, i))) + 0.5;
        cairo_move_to(cr, r->left, y);
        cairo_line_to(cr, r->left + r->width, y);
    }
    for (int i = 0; i < tick_count(x); i++) {
        double px = round(map_x(r, x, tick_value(x, i))) + 0.5;
        cairo_move_to(cr, px, r->top);
        cairo_line_to(cr, px, r->top + r->height);
    }
    cairo_stroke(cr);
}

/* The frame, tick marks on the left and bottom, and the y tick labels (x labels when asked). */
static void draw_axes(cairo_t *cr, const plot_panel *p, const cn_axis_ticks *x, int x_labels)
{
    const plot_rect *r = &p->area;
    char buf[64];
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, round(r->left) + 0.5, round(r->top) + 0.5, round(r->width),
                    round(r->height));
    for (int i = 0; i < tick_count(&p->y); i++) {
        double y = round(map_y(r, &p->y, tick_value(&p->y, i))) + 0.5;
        cairo_move_to(cr, r->left - PLOT_TICK_LEN, y);
        cairo_line_to(cr, r->left, y);
        format_tick(buf, sizeof buf, tick_value(&p->y, i), &p->y);
        cn_draw_text(cr, buf, PLOT_TICK_SIZE, r->left - PLOT_TICK_LEN - 3,
                     y + PLOT_TICK_SIZE * 0.35, 1, 0);
    }
    double bottom = r->top + r->height;
    for (int i = 0; i < tick_count(x); i++) {
        double px = round(map_x(r, x, tick_value(x, i))) + 0.5;
        cairo_move_to(cr, px, bottom);
        cairo_line_to(cr, px, bottom + PLOT_TICK_LEN);
        if (!x_labels) continue;
        format_tick(buf, sizeof buf, tick_value(x, i), x);
        cn_draw_text(cr, buf, PLOT_TICK_SIZE, px, bottom + PLOT_TICK_LEN + 3 + PLOT_TICK_SIZE,
                     0.5, 0);
    }
    cairo_stroke(cr);
}

/* A text turned a quarter left (reading upwards), centred on (x, y). */
static void draw_vertical_text(cairo_t *cr, const char *text, double size, double x, double y,
                               double max_w)
{
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, -M_PI / 2);
    cn_draw_text(cr, text, size, 0, 0, 0.5, max_w);
    cairo_restore(cr);
}

static void draw_series(cairo_t *cr, const plot_job *job, const plot_panel *p,
                        const cn_axis_ticks *x, const series_style *s)
{
    const plot_rect *r = &p->area;
    cairo_set_source_rgb(cr, s->r, s->g, s->b);
    cairo_set_line_width(cr, 2);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    int pen_down = 0;
    for (int i = 0; i < job->n; i++) {
        double v = series_value(&job->epochs[i], s->kind);
        if (isnan(v)) {
            pen_down = 0;
            continue;
        }
        double px = map_x(r, x, job->epochs[i].epoch), py = map_y(r, &p->y, v);
        if (pen_down) cairo_line_to(cr, px, py);
        else cairo_move_to(cr, px, py);
        pen_down = 1;
    }
    cairo_stroke(cr);
    if (job->n > PLOT_MARKER_MAX) return;
    for (int i = 0; i < job->n; i++) {
        double v = series_value(&job->epochs[i], s->kind);
        if (isnan(v)) continue;
        cairo_new_sub_path(cr);
        cairo_arc(cr, map_x(r, x, job->epochs[i].epoch), map_y(r, &p->y, v), 3, 0, 2 * M_PI);
    }
    cairo_fill(cr);
}

static void draw_panel(cairo_t *cr, const plot_job *job, const plot_panel *p,
                       const cn_axis_ticks *x, int x_labels)
{
    const plot_rect *r = &p->area;
    draw_grid(cr, p, x);
    cairo_save(cr); /* a little beyond the frame, so that markers on it show whole */
    cairo_rectangle(cr, r->left - 4, r->top - 4, r->width + 8, r->height + 8);
    cairo_clip(cr);
    for (int s = 0; s < p->num_series; s++) draw_series(cr, job, p, x, &p->series[s]);
    cairo_restore(cr);
    draw_axes(cr, p, x, x_labels);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    draw_vertical_text(cr, p->y_label, PLOT_LABEL_SIZE, PLOT_MARGIN + PLOT_LABEL_SIZE * 0.8,
                       r->top + r->height / 2, r->height);
    if (!p->has_data) {
        cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
        cn_draw_text(cr, "no data", PLOT_LABEL_SIZE, r->left + r->width / 2,
                     r->top + r->height / 2, 0.5, r->width);
    }
}

/* ------------------------------------------------------------------ title and legend */

/* The names and colours of the series the picture shows (validation's and the rate's only when
 * it has them). */
static void draw_legend(cairo_t *cr, double canvas_w, int with_val, int with_rate)
{
    const double sample = 26, gap = 8, spacing = 30;
    const series_style *shown[sizeof plot_series / sizeof plot_series[0]];
    int count = 0;
    for (size_t i = 0; i < sizeof plot_series / sizeof plot_series[0]; i++) {
        series_kind k = plot_series[i].kind;
        if ((with_val || !is_val_series(k)) && (with_rate || k != SERIES_LEARNING_RATE))
            shown[count++] = &plot_series[i];
    }
    double total = 0;
    for (int i = 0; i < count; i++)
        total += sample + gap + cn_text_width(cr, shown[i]->label, PLOT_LEGEND_SIZE) +
                 (i + 1 < count ? spacing : 0);
    double x = (canvas_w - total) / 2, y = PLOT_LEGEND_Y;
    for (int i = 0; i < count; i++) {
        const series_style *s = shown[i];
        cairo_set_source_rgb(cr, s->r, s->g, s->b);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, x, y - PLOT_LEGEND_SIZE * 0.35);
        cairo_line_to(cr, x + sample, y - PLOT_LEGEND_SIZE * 0.35);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cn_draw_text(cr, s->label, PLOT_LEGEND_SIZE, x + sample + gap, y, 0, 0);
        x += sample + gap + cn_text_width(cr, s->label, PLOT_LEGEND_SIZE) + spacing;
    }
}

/* ------------------------------------------------------------------ the picture */

/* Places the n panels (2, or 3 with the rate's) one under the other: the left edge leaves room
 * for the y label and the widest tick label; the last takes what the others leave. */
static void layout_panels(cairo_t *cr, double canvas_w, double canvas_h, plot_panel *p, int n)
{
    static const double share[2][3] = {{0.55, 0.45, 0}, {0.45, 0.30, 0.25}};
    double labels = 0;
    for (int i = 0; i < n; i++) labels = fmax(labels, widest_tick_label(cr, &p[i].y));
    double left = PLOT_MARGIN + 1.6 * PLOT_LABEL_SIZE + 6 + labels + PLOT_TICK_LEN + 3;
    double width = canvas_w - left - PLOT_RIGHT_MARGIN;
    double all = canvas_h - PLOT_TOP - PLOT_BOTTOM_BAND - (n - 1) * PLOT_PANEL_GAP, top = PLOT_TOP;
    for (int i = 0; i < n; i++) {
        double height = i + 1 < n ? round(all * share[n - 2][i])
                                  : canvas_h - PLOT_BOTTOM_BAND - top;
        p[i].area = (plot_rect){left, top, width, height};
        top += height + PLOT_PANEL_GAP;
    }
}

static cairo_status_t draw_curves(cairo_t *cr, const cn_fonts *fonts, const void *ctx)
{
    const plot_job *job = ctx;
    double scale = fmax(fmin(job->width / PLOT_BASE_W, job->height / PLOT_BASE_H), 0.75);
    double canvas_w = job->width / scale, canvas_h = job->height / scale;
    cairo_scale(cr, scale, scale);
    cairo_set_font_face(cr, fonts->bold);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, job->title ? job->title : "", PLOT_TITLE_SIZE, canvas_w / 2,
                 PLOT_MARGIN + PLOT_TITLE_SIZE, 0.5, canvas_w - 2 * PLOT_MARGIN);
    cairo_set_font_face(cr, fonts->regular);
    int n = has_rate(job) ? 3 : 2;
    draw_legend(cr, canvas_w, job->with_val, n == 3);
    plot_panel p[3] = {
        {.series = &plot_series[SERIES_TRAIN_LOSS], .num_series = job->with_val ? 3 : 2,
         .y_label = "Loss (NLL)"},
        {.series = &plot_series[SERIES_TEST_ACCURACY], .num_series = job->with_val ? 2 : 1,
         .y_label = job->with_val ? "Accuracy (%)" : "Test accuracy (%)"},
        {.series = &plot_series[SERIES_LEARNING_RATE], .num_series = 1,
         .y_label = "Learning rate"},
    };
    cn_axis_ticks x;
    epoch_ticks(job, &x);
    panel_ticks(job, &p[0], n == 3 ? 5 : 6);
    panel_ticks(job, &p[1], n == 3 ? 4 : 5);
    if (n == 3) panel_ticks(job, &p[2], 3);
    layout_panels(cr, canvas_w, canvas_h, p, n);
    for (int i = 0; i < n; i++) draw_panel(cr, job, &p[i], &x, i == n - 1);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cn_draw_text(cr, "Epoch", PLOT_LABEL_SIZE, p[0].area.left + p[0].area.width / 2,
                 canvas_h - PLOT_MARGIN, 0.5, 0);
    return cairo_status(cr);
}

static int check_curves(const char *path, const cn_epoch_metrics *epochs, int n, int width,
                        int height, cn_error *err)
{
    if (!path || !*path) return cn_fail(err, "training curves: no file name given");
    if (!epochs || n < 1) return cn_fail(err, "%s: training curves need at least one epoch", path);
    if (width < PLOT_MIN_W || width > PLOT_MAX_SIDE || height < PLOT_MIN_H ||
        height > PLOT_MAX_SIDE)
        return cn_fail(err, "%s: training curves of %d x %d px: the size must be %d..%d x "
                       "%d..%d", path, width, height, PLOT_MIN_W, PLOT_MAX_SIDE, PLOT_MIN_H,
                       PLOT_MAX_SIDE);
    for (int i = 1; i < n; i++)
        if (epochs[i].epoch <= epochs[i - 1].epoch)
            return cn_fail(err, "%s: training curves: epoch %d follows epoch %d (epochs must "
                           "increase)", path, epochs[i].epoch, epochs[i - 1].epoch);
    return 0;
}

int cn_plot_curves(const char *path, const cn_epoch_metrics *epochs, int n, int width,
                   int height, const char *title, cn_error *err)
{
    if (check_curves(path, epochs, n, width, height, err)) return -1;
    plot_job job = {epochs, n, width, height, title, 0};
    for (int i = 0; i < n; i++) job.with_val |= epochs[i].has_validation != 0;
    return cn_png_render(path, width, height, draw_curves, &job, err);
}
