/* picture.c — the result picture: a rows x cols grid of labelled images (grey or colour, any
 * size up to CN_PICTURE_MAX_SIDE), each scaled up by a whole factor under a caption
 * "Actual X / Predicted Y" in blue when right and red when wrong, below a title, written as an
 * opaque PNG that appears whole or not at all.
 * It does not choose which images to show, compute accuracy or compose the title, and knows no
 * data set's class names: the caller passes them. It uses cairo's toy text calls on the DejaVu
 * faces draw.c loads (no pango), so text is one line, left to right. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pictures/draw.h"

#define PIC_TARGET 115.0         /* px: the longer side a drawn image comes near */
#define PIC_MARGIN 16            /* around the whole picture */
#define PIC_TITLE_SIZE 20.0      /* px */
#define PIC_TITLE_H 40           /* the band for the title */
#define PIC_CAPTION_SIZE 12.0    /* px; Fashion-MNIST's longest caption is about 243 px wide */
#define PIC_CAPTION_MIN 9.0      /* px: a longer caption shrinks to this, then its names elide */
#define PIC_CAPTION_H 22         /* the band above each image */
#define PIC_CELL_W 260           /* the least cell width: fits 243 px captions at 12 px */
#define PIC_CELL_PAD 6           /* least space left and right of a caption or an image */
#define PIC_ROW_GAP 12           /* between an image and the next row's caption */
#define PIC_MAX_PX 32767         /* cairo's largest image surface */
#define PIC_NAME_MAX 128         /* bytes of a class name a caption shows at most */

/* Sizes of the drawn images, the cells and the whole picture, in px. */
typedef struct {
    int scale, image_w, image_h, cell_w;
    long width, height;
} pic_layout;

/* The layout of a rows x cols grid of height x width images (all in range). */
static pic_layout pic_layout_of(int height, int width, int rows, int cols)
{
    pic_layout lay;
    int longer = height > width ? height : width;
    lay.scale = (int)lround(PIC_TARGET / longer);
    if (lay.scale < 1) lay.scale = 1;
    lay.image_w = width * lay.scale;
    lay.image_h = height * lay.scale;
    lay.cell_w = lay.image_w + 2 * PIC_CELL_PAD;
    if (lay.cell_w < PIC_CELL_W) lay.cell_w = PIC_CELL_W;
    lay.width = 2L * PIC_MARGIN + (long)cols * lay.cell_w;
    lay.height = 2L * PIC_MARGIN + PIC_TITLE_H + (long)rows * (PIC_CAPTION_H + lay.image_h) +
                 (long)(rows - 1) * PIC_ROW_GAP;
    return lay;
}

/* ------------------------------------------------------------------ checks */

static int check_labels(const char *path, const uint8_t *v, int count, int classes,
                        const char *what, cn_error *err)
{
    for (int i = 0; i < count; i++)
        if (v[i] >= classes)
            return cn_fail(err, "%s: result picture: %s[%d] is %d, not a class 0..%d", path,
                           what, i, (int)v[i], classes - 1);
    return 0;
}

static int check_shape(const char *path, const cn_labelled_images *set, cn_error *err)
{
    if (set->channels != 1 && set->channels != 3)
        return cn_fail(err, "%s: result picture: images have %d channels, not 1 (grey) or 3 "
                       "(red, green, blue)", path, set->channels);
    if (set->height < 1 || set->height > CN_PICTURE_MAX_SIDE || set->width < 1 ||
        set->width > CN_PICTURE_MAX_SIDE)
        return cn_fail(err, "%s: result picture: images of %d x %d px, each side must be "
                       "1..%d", path, set->height, set->width, CN_PICTURE_MAX_SIDE);
    if (set->classes < 1 || set->classes > 256)
        return cn_fail(err, "%s: result picture: %d classes, not 1..256", path, set->classes);
    return 0;
}

/* Checks every argument and computes the layout. */
static int check_args(const char *path, const cn_labelled_images *set, int rows, int cols,
                      pic_layout *lay, cn_error *err)
{
    if (!path || !*path) return cn_fail(err, "result picture: no file name given");
    if (!set || !set->images || !set->labels || !set->predictions)
        return cn_fail(err, "%s: result picture needs images, labels and predictions", path);
    if (check_shape(path, set, err)) return -1;
    if (rows <= 0 || cols <= 0)
        return cn_fail(err, "%s: result picture grid %d x %d must have at least one row and "
                       "one column", path, rows, cols);
    *lay = pic_layout_of(set->height, set->width, rows, cols);
    if (lay->width > PIC_MAX_PX || lay->height > PIC_MAX_PX)
        return cn_fail(err, "%s: result picture grid %d x %d is too large (%ld x %ld px, at "
                       "most %d)", path, rows, cols, lay->width, lay->height, PIC_MAX_PX);
    if ((long)set->n < (long)rows * cols)
        return cn_fail(err, "%s: result picture grid %d x %d needs %d images, only %d given",
                       path, rows, cols, rows * cols, set->n);
    if (check_labels(path, set->labels, rows * cols, set->classes, "labels", err) ||
        check_labels(path, set->predictions, rows * cols, set->classes, "predictions", err))
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ drawing */

/* Copies image img (channels planes of height x width) into the RGB24 surface s: a grey value
 * v becomes (v, v, v); colour planes are red, green, blue. */
static void fill_surface(cairo_surface_t *s, const cn_labelled_images *set, const uint8_t *img)
{
    cairo_surface_flush(s);
    unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    size_t plane = (size_t)set->height * (size_t)set->width;
    const uint8_t *green = set->channels == 3 ? img + plane : img;
    const uint8_t *blue = set->channels == 3 ? img + 2 * plane : img;
    for (int r = 0; r < set->height; r++) {
        uint32_t *row = (uint32_t *)(void *)(data + (size_t)r * (size_t)stride);
        for (int c = 0; c < set->width; c++) {
            size_t at = (size_t)r * (size_t)set->width + (size_t)c;
            row[c] = ((uint32_t)img[at] << 16) | ((uint32_t)green[at] << 8) | blue[at];
        }
    }
    cairo_surface_mark_dirty(s);
}

/* Paints one image scaled up with nearest-neighbour sampling at (x, y). Raw values are shown as
 * they are: 0 black, 255 white (Fashion-MNIST's garments light on black), as matplotlib's grey
 * colour map shows them. */
static cairo_status_t draw_image(cairo_t *cr, const cn_labelled_images *set, int scale,
                                 const uint8_t *img, double x, double y)
{
    cairo_surface_t *s =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, set->width, set->height);
    cairo_status_t st = cairo_surface_status(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        return st;
    }
    fill_surface(s, set, img);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, scale, scale);
    cairo_set_source_surface(cr, s, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, set->width, set->height);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(s);
    return cairo_status(cr);
}

/* Class c's name into buf: its name when there is one, else its number. 1 when the name was
 * longer than buf and lost its end (whole characters). */
static int class_name(const cn_labelled_images *set, int c, char *buf, size_t size)
{
    if (!set->class_names || !set->class_names[c]) {
        snprintf(buf, size, "%d", c);
        return 0;
    }
    if ((size_t)snprintf(buf, size, "%s", set->class_names[c]) < size) return 0;
    cn_utf8_drop_last(buf); /* a character snprintf may have cut in two */
    return 1;
}

/* "Actual A / Predicted P" into buf, a name cut short ending in "…". */
static void format_caption(char *buf, size_t size, const char *actual, int actual_cut,
                           const char *predicted, int predicted_cut)
{
    snprintf(buf, size, "Actual %s%s / Predicted %s%s", actual, actual_cut ? CN_ELLIPSIS : "",
             predicted, predicted_cut ? CN_ELLIPSIS : "");
}

/* Draws the caption of an image of classes label and prediction centred on x with its baseline
 * at y, at most max_w wide: at PIC_CAPTION_SIZE, else smaller down to PIC_CAPTION_MIN, and
 * then the longer of the two names loses characters at its end for "…" until it fits. */
static void draw_caption(cairo_t *cr, const cn_labelled_images *set, int label, int prediction,
                         double x, double y, double max_w)
{
    char actual[PIC_NAME_MAX], predicted[PIC_NAME_MAX], caption[3 * PIC_NAME_MAX];
    int actual_cut = class_name(set, label, actual, sizeof actual);
    int predicted_cut = class_name(set, prediction, predicted, sizeof predicted);
    format_caption(caption, sizeof caption, actual, actual_cut, predicted, predicted_cut);
    double size = cn_fit_size(cr, caption, PIC_CAPTION_SIZE, PIC_CAPTION_MIN, max_w);
    while (cn_text_width(cr, caption, size) > max_w && (*actual || *predicted)) {
        if (strlen(actual) >= strlen(predicted))
            actual_cut |= cn_utf8_drop_last(actual);
        else
            predicted_cut |= cn_utf8_drop_last(predicted);
        format_caption(caption, sizeof caption, actual, actual_cut, predicted, predicted_cut);
    }
    cn_draw_text(cr, caption, size, x, y, 0.5, 0);
}

/* What one picture shows. */
typedef struct {
    pic_layout lay;
    const cn_labelled_images *set;
    int rows, cols;
    const char *title;
} pic_job;

/* Draws grid cell i (caption, then image) with its top-left corner at (x, y). */
static cairo_status_t draw_cell(cairo_t *cr, const pic_job *job, int i, double x, double y)
{
    const cn_labelled_images *set = job->set;
    int label = set->labels[i], prediction = set->predictions[i];
    if (label == prediction)
        cairo_set_source_rgb(cr, 0, 0, 0.8);
    else
        cairo_set_source_rgb(cr, 0.8, 0, 0);
    draw_caption(cr, set, label, prediction, x + job->lay.cell_w / 2.0, y + PIC_CAPTION_H - 7,
                 job->lay.cell_w - 2 * PIC_CELL_PAD);
    size_t size = (size_t)set->channels * (size_t)set->height * (size_t)set->width;
    return draw_image(cr, set, job->lay.scale, set->images + (size_t)i * size,
                      x + (job->lay.cell_w - job->lay.image_w) / 2, y + PIC_CAPTION_H);
}

/* Renders the whole picture onto cr (a cn_draw_fn). */
static cairo_status_t draw_picture(cairo_t *cr, const cn_fonts *fonts, const void *ctx)
{
    const pic_job *job = ctx;
    cairo_set_font_face(cr, fonts->bold);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cn_draw_text(cr, job->title ? job->title : "", PIC_TITLE_SIZE, job->lay.width / 2.0,
                 PIC_MARGIN + PIC_TITLE_SIZE, 0.5, job->lay.width - 2.0 * PIC_MARGIN);
    cairo_set_font_face(cr, fonts->regular);
    double row_h = PIC_CAPTION_H + job->lay.image_h + PIC_ROW_GAP;
    for (int i = 0; i < job->rows * job->cols; i++) {
        double x = PIC_MARGIN + (double)(i % job->cols) * job->lay.cell_w;
        double y = PIC_MARGIN + PIC_TITLE_H + (double)(i / job->cols) * row_h;
        cairo_status_t st = draw_cell(cr, job, i, x, y);
        if (st != CAIRO_STATUS_SUCCESS) return st;
    }
    return cairo_status(cr);
}

int cn_result_picture(const char *path, const cn_labelled_images *set, int rows, int cols,
                      const char *title, cn_error *err)
{
    pic_job job = {{0}, set, rows, cols, title};
    if (check_args(path, set, rows, cols, &job.lay, err)) return -1;
    return cn_png_render(path, (int)job.lay.width, (int)job.lay.height, draw_picture, &job, err);
}
