/* picture.c — the result picture: a rows x cols grid of test images, each under a
 * caption "Actual X / Predicted Y" in blue when right and red when wrong, below a title, written
 * as an opaque PNG that appears whole or not at all.
 * It does not choose which images to show, compute accuracy or compose the title: the caller
 * passes them. It uses cairo's toy text API (no pango), so text is one line, left to right. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairo.h>

#include "cnnc.h"

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
#define PIC_FONT "DejaVu Sans"

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
        if (v[i] >= CN_NUM_CLASSES)
            return cn_fail(err, "result picture: %s[%d] is %d, not a class 0..%d", what, i,
                           (int)v[i], CN_NUM_CLASSES - 1);
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

/* Draws one line of text centred on center_x at the given baseline, in a smaller size when it
 * would be wider than max_w. */
static void draw_text_fitted(cairo_t *cr, const char *text, double size, double center_x,
                             double baseline, double max_w)
{
    cairo_text_extents_t ext;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, text, &ext);
    if (ext.x_advance > max_w && ext.x_advance > 0) {
        cairo_set_font_size(cr, size * max_w / ext.x_advance);
        cairo_text_extents(cr, text, &ext);
    }
    cairo_move_to(cr, center_x - ext.x_advance / 2, baseline);
    cairo_show_text(cr, text);
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
static cairo_status_t draw_cell(cairo_t *cr, const uint8_t *img, int label, int prediction, double x,
                     double y)
{
    char caption[128];
    snprintf(caption, sizeof caption, "Actual %s / Predicted %s", cn_class_names[label],
             cn_class_names[prediction]);
    if (label == prediction)
        cairo_set_source_rgb(cr, 0, 0, 0.8);
    else
        cairo_set_source_rgb(cr, 0.8, 0, 0);
    draw_text_fitted(cr, caption, PIC_CAPTION_SIZE, x + PIC_CELL_W / 2.0,
                     y + PIC_CAPTION_H - 7, PIC_CELL_W - 2 * PIC_CELL_PAD);
    return draw_image(cr, img, x + (PIC_CELL_W - PIC_IMAGE) / 2.0, y + PIC_CAPTION_H);
}

/* Renders the whole picture onto cr. */
static cairo_status_t draw_picture(cairo_t *cr, const pic_layout *lay, const uint8_t *images,
                        const uint8_t *labels, const uint8_t *predictions, int rows, int cols,
                        const char *title)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, PIC_FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw_text_fitted(cr, title ? title : "", PIC_TITLE_SIZE, lay->width / 2.0,
                     PIC_MARGIN + PIC_TITLE_SIZE, lay->width - 2.0 * PIC_MARGIN);
    cairo_select_font_face(cr, PIC_FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    for (int i = 0; i < rows * cols; i++) {
        double x = PIC_MARGIN + (double)(i % cols) * PIC_CELL_W;
        double y = PIC_MARGIN + PIC_TITLE_H + (double)(i / cols) * (PIC_CAPTION_H + PIC_IMAGE +
                                                                     PIC_ROW_GAP);
        cairo_status_t st = draw_cell(cr, images + (size_t)i * PIC_SIDE * PIC_SIDE, labels[i],
                                      predictions[i], x, y);
        if (st != CAIRO_STATUS_SUCCESS) return st;
    }
    return cairo_status(cr);
}

/* Where the PNG stream goes: an open temporary file, and the first write error. */
typedef struct {
    FILE *f;
    int error;
} png_sink;

static cairo_status_t png_write(void *closure, const unsigned char *data, unsigned int len)
{
    png_sink *sink = closure;
    if (fwrite(data, 1, len, sink->f) != len) {
        sink->error = errno ? errno : EIO;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    return CAIRO_STATUS_SUCCESS;
}

/* Streams the surface into the open temporary file and closes it; returns 0 or an errno-like
 * code (EIO when cairo fails without one). */
static int write_png_file(cairo_surface_t *surface, FILE *f)
{
    png_sink sink = {f, 0};
    errno = 0;
    cairo_status_t st = cairo_surface_write_to_png_stream(surface, png_write, &sink);
    int code = sink.error;
    if (!code && st != CAIRO_STATUS_SUCCESS) code = EIO;
    if (!code && fflush(f) != 0) code = errno ? errno : EIO;
    if (!code && fsync(fileno(f)) != 0) code = errno;
    if (fclose(f) != 0 && !code) code = errno ? errno : EIO;
    return code;
}

/* Writes the surface to path through a temporary file in the same folder and a rename, so that
 * path holds either its old content or the whole new picture. */
static int write_png_atomic(cairo_surface_t *surface, const char *path, cn_error *err)
{
    size_t len = strlen(path) + sizeof ".tmp.XXXXXX";
    char *tmp = malloc(len);
    if (!tmp) return cn_fail(err, "%s: cannot write picture: out of memory", path);
    snprintf(tmp, len, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return cn_fail(err, "%s: cannot write picture: %s", path, strerror(e));
    }
    int code = 0;
    FILE *f = NULL;
    /* mkstemp makes the file private; a picture is for everyone to read. */
    if (fchmod(fd, 0644) != 0 || !(f = fdopen(fd, "wb"))) {
        code = errno;
        close(fd);
    }
    if (!code) code = write_png_file(surface, f);
    if (!code && rename(tmp, path) != 0) code = errno;
    if (code) unlink(tmp);
    free(tmp);
    if (code) return cn_fail(err, "%s: cannot write picture: %s", path, strerror(code));
    return 0;
}

int cn_result_picture(const char *path, const uint8_t *images, const uint8_t *labels,
                      const uint8_t *predictions, int n, int rows, int cols, const char *title,
                      cn_error *err)
{
    pic_layout lay = {0, 0};
    if (check_args(path, images, labels, predictions, n, rows, cols, &lay, err)) return -1;
    cairo_surface_t *surface =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, lay.width, lay.height);
    cairo_t *cr = cairo_create(surface);
    int rc = -1;
    cairo_status_t st = cairo_status(cr);
    if (st == CAIRO_STATUS_SUCCESS)
        st = draw_picture(cr, &lay, images, labels, predictions, rows, cols, title);
    if (st != CAIRO_STATUS_SUCCESS)
        cn_fail(err, "%s: cannot draw picture: %s", path, cairo_status_to_string(st));
    else {
        cairo_surface_flush(surface);
        rc = write_png_atomic(surface, path, err);
    }
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    return rc;
}
