/* draw.c — the drawing helpers the library's pictures share (see draw.h): render-and-write of an
 * opaque PNG through a temporary file and a rename, the DejaVu faces loaded from their files
 * through FreeType, fitted one-line text, and nice axis ticks. It lays out no picture itself,
 * never asks fontconfig for a font, and draws text with cairo's toy text calls on those faces
 * (no pango, no line breaking). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairo-ft.h>

#include "pictures/draw.h"

/* ------------------------------------------------------------------ fonts */

/* The user-data slot through which a cairo font face owns its FreeType library (never written:
 * only its address is used). */
static const cairo_user_data_key_t font_owner;

static void free_library(void *library) { FT_Done_FreeType(library); }

static int font_fail(cn_error *err, const char *file, const char *what)
{
    return cn_fail(err, "font %s: %s (install Debian's fonts-dejavu-core)", file, what);
}

/* Loads dir/name as a cairo font face that owns a FreeType library of its own with the one face
 * in it: cairo frees both when it drops the face, which may be after the picture is done. A
 * library per face also keeps pictures drawn at once on several threads apart. NULL on error. */
static cairo_font_face_t *load_face(const char *dir, const char *name, cn_error *err)
{
    char file[4096];
    if ((size_t)snprintf(file, sizeof file, "%s/%s", dir, name) >= sizeof file) {
        font_fail(err, name, "the font folder's name is too long");
        return NULL;
    }
    /* Opened here first for the word on a missing or unreadable file, and so that a named
     * pipe is refused rather than waited on (FreeType would wait). */
    cn_error why = {{0}};
    int fd = cn_open_regular(file, &why);
    if (fd < 0) {
        cn_fail(err, "font %s (install Debian's fonts-dejavu-core)", why.msg);
        return NULL;
    }
    close(fd);
    FT_Library library;
    FT_Face face;
    if (FT_Init_FreeType(&library) != 0) {
        font_fail(err, file, "FreeType cannot start");
        return NULL;
    }
    FT_Error ft = FT_New_Face(library, file, 0, &face);
    if (ft != 0) {
        FT_Done_FreeType(library);
        char what[64];
        snprintf(what, sizeof what, "not a font FreeType can read, its error %d", ft);
        font_fail(err, file, what);
        return NULL;
    }
    cairo_font_face_t *cf = cairo_ft_font_face_create_for_ft_face(face, 0);
    if (cairo_font_face_status(cf) != CAIRO_STATUS_SUCCESS ||
        cairo_font_face_set_user_data(cf, &font_owner, library, free_library) !=
            CAIRO_STATUS_SUCCESS) {
        cairo_font_face_destroy(cf);
        FT_Done_FreeType(library);
        font_fail(err, file, "out of memory");
        return NULL;
    }
    return cf;
}

int cn_fonts_open(cn_fonts *fonts, const char *dir, cn_error *err)
{
    fonts->regular = load_face(dir, CN_FONT_REGULAR, err);
    fonts->bold = fonts->regular ? load_face(dir, CN_FONT_BOLD, err) : NULL;
    if (fonts->bold) return 0;
    cn_fonts_close(fonts);
    return -1;
}

void cn_fonts_close(cn_fonts *fonts)
{
    if (fonts->regular) cairo_font_face_destroy(fonts->regular);
    if (fonts->bold) cairo_font_face_destroy(fonts->bold);
    fonts->regular = fonts->bold = NULL;
}

/* Grey antialiasing, slight hinting and whole-pixel metrics, whatever the surface would pick. */
static void set_font(cairo_t *cr, const cn_fonts *fonts)
{
    cairo_font_options_t *o = cairo_font_options_create();
    cairo_font_options_set_antialias(o, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(o, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_hint_metrics(o, CAIRO_HINT_METRICS_ON);
    cairo_set_font_options(cr, o);
    cairo_font_options_destroy(o);
    cairo_set_font_face(cr, fonts->regular);
}

/* ------------------------------------------------------------------ text */

double cn_text_width(cairo_t *cr, const char *text, double size)
{
    cairo_text_extents_t ext;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, text, &ext);
    return ext.x_advance;
}

void cn_draw_text(cairo_t *cr, const char *text, double size, double x, double y, double align,
                  double max_w)
{
    double w = cn_text_width(cr, text, size);
    if (w > max_w && w > 0 && max_w > 0) {
        size *= max_w / w;
        w = cn_text_width(cr, text, size);
    }
    cairo_move_to(cr, x - align * w, y);
    cairo_show_text(cr, text);
}

double cn_fit_size(cairo_t *cr, const char *text, double size, double min_size, double max_w)
{
    double w = cn_text_width(cr, text, size);
    if (w <= max_w || w <= 0 || max_w <= 0) return size;
    return fmax(size * max_w / w, min_size);
}

int cn_utf8_drop_last(char *s)
{
    size_t len = strlen(s);
    if (len == 0) return 0;
    do len--;
    while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80);
    s[len] = '\0';
    return 1;
}

void cn_draw_text_fit(cairo_t *cr, const char *text, double size, double min_size, double x,
                      double y, double align, double max_w)
{
    char buf[256];
    size = cn_fit_size(cr, text, size, min_size, max_w);
    snprintf(buf, sizeof buf, "%s", text);
    if (strlen(text) >= sizeof buf || cn_text_width(cr, buf, size) > max_w) {
        size_t room = sizeof buf - sizeof CN_ELLIPSIS;
        if (strlen(buf) > room) buf[room] = '\0';
        while (cn_utf8_drop_last(buf) && *buf) {
            char shown[sizeof buf + sizeof CN_ELLIPSIS];
            snprintf(shown, sizeof shown, "%s%s", buf, CN_ELLIPSIS);
            if (cn_text_width(cr, shown, size) <= max_w) break;
        }
        strcat(buf, CN_ELLIPSIS);
    }
    cn_draw_text(cr, buf, size, x, y, align, 0);
}

/* ------------------------------------------------------------------ ticks */

/* A 1, 2 or 5 times a power of ten near x (> 0): the nearest when round, else the next above. */
static double nice_number(double x, int round)
{
    double power = pow(10, floor(log10(x)));
    double f = x / power, nice;
    if (round)
        nice = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    else
        nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nice * power;
}

void cn_nice_ticks(double lo, double hi, int max_ticks, cn_axis_ticks *t)
{
    if (!(hi > lo)) { /* one value: a range around it */
        double pad = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= pad, hi += pad;
    }
    if (max_ticks < 1) max_ticks = 1;
    double range = nice_number(hi - lo, 0);
    t->step = nice_number(range / max_ticks, 1);
    t->first = floor(lo / t->step + 1e-9) * t->step;
    t->last = ceil(hi / t->step - 1e-9) * t->step;
    int d = (int)-floor(log10(t->step) + 1e-9);
    t->decimals = d > 0 ? d : 0;
}

/* ------------------------------------------------------------------ PNG files */

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

int cn_png_render(const char *path, int width, int height, cn_draw_fn draw, const void *ctx,
                  cn_error *err)
{
    cn_fonts fonts;
    if (cn_fonts_open(&fonts, CN_FONT_DIR, err) != 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return cn_fail(err, "%s: cannot draw picture: %s", path, why);
    }
    cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    cairo_t *cr = cairo_create(surface);
    int rc = -1;
    cairo_status_t st = cairo_status(cr);
    if (st == CAIRO_STATUS_SUCCESS) {
        cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_paint(cr);
        set_font(cr, &fonts);
        st = draw(cr, &fonts, ctx);
    }
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_status(cr);
    if (st != CAIRO_STATUS_SUCCESS)
        cn_fail(err, "%s: cannot draw picture: %s", path, cairo_status_to_string(st));
    else {
        cairo_surface_flush(surface);
        rc = write_png_atomic(surface, path, err);
    }
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    cn_fonts_close(&fonts);
    return rc;
}
