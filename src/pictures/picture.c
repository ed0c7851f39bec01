/* picture.c — the result picture: a rows x cols grid of test images, each under a
 * caption "Actual X / Predicted Y" in blue when right and red when wrong, below a title, written
 * as an opaque PNG that appears whole or not at all.
 * It does not choose which images to show, compute accuracy or compose the title: the caller
 * passes them. It uses cairo's toy text calls on the DejaVu faces draw.c loads (no pango), so
 * text is one line, left to right. */
#include <stdio.h>

#include "pictures/draw.h"

#define PIC_SIDE 28              /* input images are 28 x 28 */
#define PIC_SCALE 4              /* each pixel becomes a 4 x 4 block: 112 px images */
#define PIC_IMAGE (PIC_SIDE * PIC_SCALE)
#define PIC_MARGIN 16            /* around the whole picture */
#define PIC_TITLE_SIZE 20.0      /* px */
#define PIC_TITLE_H 40           /* the band for the title */
#define PIC_CAPTION_SIZE 12.0    /* px; the longest caption is about 243 px wide at this size */
#define PIC_CAPTION_H 22         /* the band above each image */
#define PIC_CELL_W 260           /* fits the longest caption with a few px either side */
#define PIC_CELL_PAD 6           /* least space left and right of a caption */
#define PIC_ROW_GAP 12           /* between an image and the next row's caption */
#define PIC_MAX_SIDE 32767       /* cairo's largest image surface */

/* Pixel size of the whole picture. */
typedef struct {
    int width, height;
} pic_layout;

static long pic_width(int cols) { return 2L * PIC_MARGIN + (long)cols * PIC_CELL_W; }

static long pic_height(int rows)
{
    return 2L * PIC_MARGIN + PIC_TITLE_H + (long)rows * (PIC_CAPTION_H + PIC_IMAGE) +
           (long)(rows - 1) * PIC_ROW_GAP;
}

static int check_labels(const uint8_t *v, int count, const char *what, cn_error *err)
{
    for (int i = 0; i < count; i++)
        if (v[i] >= CN_FASHION_MNIST_CLASSES)
            return cn_fail(err, "result picture: %s[%d] is %d, not a class 0..%d", what, i,
                           (int)v[i], CN_FASHION_MNIST_CLASSES - 1);
    return 0;
}

/* Checks every argument and computes the layout. */
static int check_args(const char *path, const uint8_t *images, const uint8_t *labels,
                      const uint8_t *predictions, int n, int rows, int cols, pic_layout *lay,
                      cn_error *err)
{
    if (!path || !*path) return cn_fail(err, "result picture: no file name given");
    if (!images || !labels || !predictions)
        return cn_fail(err, "%s: result picture needs images, labels and predictions", path);
    if (rows <= 0 || cols <= 0)
        return cn_fail(err, "%s: result picture grid %d x %d must have at least one row and "
                       "one column", path, rows, cols);
    long w = pic_width(cols), h = pic_height(rows);
    if (w > PIC_MAX_SIDE || h > PIC_MAX_SIDE)
        return cn_fail(err, "%s: result picture grid %d x %d is too large (%ld x %ld px, at "
                       "most %d)", path, rows, cols, w, h, PIC_MAX_SIDE);
    if ((long)n < (long)rows * cols)
        return cn_fail(err, "%s: result picture grid %d x %d needs %d images, only %d given",
                       path, rows, cols, rows * cols, n);
    if (check_labels(labels, rows * cols, "labels", err) ||
        check_labels(predictions, rows * cols, "predictions", err))
        return -1;
    lay->width = (int)w;
    lay->height = (int)h;
    return 0;
}

/* Paints one 28 x 28 image scaled up with nearest-neighbour sampling at (x, y). Raw values are
 * shown as they are: 0 (Fashion-MNIST's background) black, 255 (the garment) white, as
 * matplotlib's grey colour map shows them. */
static cairo_status_t draw_image(cairo_t *cr, const uint8_t *img, double x, double y)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, PIC_SIDE, PIC_SIDE);
    cairo_status_t st = cairo_surface_status(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        return st;
    }
    cairo_surface_flush(s);
    unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    for (int r = 0; r < PIC_SIDE; r++) {
        uint32_t *row = (uint32_t *)(void *)(data + (size_t)r * (size_t)stride);
        for (int c = 0; c < PIC_SIDE; c++) {
            uint32_t v = img[r * PIC_SIDE + c];
            row[c] = (v << 16) | (v << 8) | v;
        }
    }
    cairo_surface_mark_dirty(s);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, PIC_SCALE, PIC_SCALE);
    cairo_set_source_surface(cr, s, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, PIC_SIDE, PIC_SIDE);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(s);
    return cairo_status(cr);
}

/* Draws one grid cell (caption, then image) with its top-left corner at (x, y). */
static cairo_status_t draw_cell(cairo_t *cr, const uint8_t *img, int label, int prediction,
                                double x, double y)
{
    char caption[128];
    snprintf(caption, sizeof caption, "Actual %s / Predicted %s", cn_fashion_mnist_names[label],
             cn_fashion_mnist_names[prediction]);
    if (label == prediction)
        cairo_set_source_rgb(cr, 0, 0, 0.8);
    else
        cairo_set_source_rgb(cr, 0.8, 0, 0);
    cn_draw_text(cr, caption, PIC_CAPTION_SIZE, x + PIC_CELL_W / 2.0, y + PIC_CAPTION_H - 7, 0.5,
                 PIC_CELL_W - 2 * PIC_CELL_PAD);
    return draw_image(cr, img, x + (PIC_CELL_W - PIC_IMAGE) / 2.0, y + PIC_CAPTION_H);
}

/* What one picture shows. */
typedef struct {
    pic_layout lay;
    const uint8_t *images, *labels, *predictions;
    int rows, cols;
    const char *title;
} pic_job;

/* Renders the whole picture onto cr (a cn_draw_fn). */
static cairo_status_t draw_picture(cairo_t *cr, const cn_fonts *fonts, const void *ctx)
{
    const pic_job *job = ctx;
    cairo_set_font_face(cr, fonts->bold);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cn_draw_text(cr, job->title ? job->title : "", PIC_TITLE_SIZE, job->lay.width / 2.0,
                 PIC_MARGIN + PIC_TITLE_SIZE, 0.5, job->lay.width - 2.0 * PIC_MARGIN);
    cairo_set_font_face(cr, fonts->regular);
    for (int i = 0; i < job->rows * job->cols; i++) {
        double x = PIC_MARGIN + (double)(i % job->cols) * PIC_CELL_W;
        double y = PIC_MARGIN + PIC_TITLE_H + (double)(i / job->cols) * (PIC_CAPTION_H +
                                                                          PIC_IMAGE + PIC_ROW_GAP);
        cairo_status_t st = draw_cell(cr, job->images + (size_t)i * PIC_SIDE * PIC_SIDE,
                                      job->labels[i], job->predictions[i], x, y);
        if (st != CAIRO_STATUS_SUCCESS) return st;
    }
    return cairo_status(cr);
}

int cn_result_picture(const char *path, const uint8_t *images, const uint8_t *labels,
                      const uint8_t *predictions, int n, int rows, int cols, const char *title,
                      cn_error *err)
{
    pic_job job = {{0, 0}, images, labels, predictions, rows, cols, title};
    if (check_args(path, images, labels, predictions, n, rows, cols, &job.lay, err)) return -1;
    return cn_png_render(path, job.lay.width, job.lay.height, draw_picture, &job, err);
}
