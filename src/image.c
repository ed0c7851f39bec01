/* image.c — one grey image for prediction, from a PNG (decoded by cairo, from memory) or a PGM
 * file (pgm.c), told apart by their first bytes. The file is read once, is at most
 * IMAGE_FILE_LIMIT bytes, and its size in pixels is checked from the header before anything is
 * decoded. Colour becomes grey with PIL's luma weights; cairo hands transparent pixels over
 * already multiplied by their alpha, that is composited over black. It does not resize, crop,
 * invert or read any other format. */
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "file_read.h"
#include "image.h"

#define IMAGE_FILE_LIMIT (16L << 20)

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

int cn_image_size_refused(const char *path, long width, long height, int rows, int cols,
                          cn_error *err)
{
    return cn_fail(err, "%s: image is %ldx%ld pixels; the model takes %dx%d (images are not "
                   "resized)", path, width, height, cols, rows);
}

static int read_image_file(const char *path, uint8_t **bytes, size_t *len, cn_error *err)
{
    int rc = cn_read_file(path, IMAGE_FILE_LIMIT, bytes, len, err);
    if (rc == CN_FILE_TOO_LARGE)
        return cn_fail(err, "%s: %lld bytes is too large for an image file here (at most %ld)",
                       path, (long long)*len, IMAGE_FILE_LIMIT);
    return rc;
}

/* ---------------------------------------------------------------- PNG */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The size from the IHDR chunk, which the format puts right after the signature. */
static int png_check_size(const uint8_t *bytes, size_t len, const char *path, int rows, int cols,
                          cn_error *err)
{
    if (len < 24 || be32(bytes + 8) != 13 || memcmp(bytes + 12, "IHDR", 4) != 0)
        return cn_fail(err, "%s: damaged PNG: no IHDR chunk after the signature", path);
    uint32_t width = be32(bytes + 16), height = be32(bytes + 20);
    if (width != (uint32_t)cols || height != (uint32_t)rows)
        return cn_image_size_refused(path, (long)width, (long)height, rows, cols, err);
    return 0;
}

typedef struct {
    const uint8_t *p;
    size_t left;
} png_source;

static cairo_status_t png_read(void *closure, unsigned char *data, unsigned int len)
{
    png_source *src = closure;
    if (len > src->left) return CAIRO_STATUS_READ_ERROR;
    memcpy(data, src->p, len);
    src->p += len;
    src->left -= len;
    return CAIRO_STATUS_SUCCESS;
}

/* PIL's convert("L"): (19595 R + 38470 G + 7471 B + 2^15) >> 16; grey stays grey exactly. */
static uint8_t luma(uint32_t pixel)
{
    uint32_t r = (pixel >> 16) & 255, g = (pixel >> 8) & 255, b = pixel & 255;
    return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

static int surface_to_grey(cairo_surface_t *s, const char *path, int rows, int cols,
                           uint8_t *pixels, cn_error *err)
{
    cairo_format_t format = cairo_image_surface_get_format(s);
    if (format != CAIRO_FORMAT_ARGB32 && format != CAIRO_FORMAT_RGB24)
        return cn_fail(err, "%s: the PNG decodes to an unexpected pixel format", path);
    if (cairo_image_surface_get_width(s) != cols || cairo_image_surface_get_height(s) != rows)
        return cn_image_size_refused(path, cairo_image_surface_get_width(s),
                                     cairo_image_surface_get_height(s), rows, cols, err);
    cairo_surface_flush(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    size_t stride = (size_t)cairo_image_surface_get_stride(s);
    for (int r = 0; r < rows; r++) {
        const uint32_t *row = (const uint32_t *)(const void *)(data + (size_t)r * stride);
        for (int c = 0; c < cols; c++) pixels[(size_t)r * cols + c] = luma(row[c]);
    }
    return 0;
}

static int png_decode(const uint8_t *bytes, size_t len, const char *path, int rows, int cols,
                      uint8_t *pixels, cn_error *err)
{
    if (png_check_size(bytes, len, path, rows, cols, err)) return -1;
    png_source src = {bytes, len};
    cairo_surface_t *s = cairo_image_surface_create_from_png_stream(png_read, &src);
    cairo_status_t st = cairo_surface_status(s);
    int rc = st == CAIRO_STATUS_SUCCESS
                 ? surface_to_grey(s, path, rows, cols, pixels, err)
                 : cn_fail(err, "%s: cannot decode the PNG: %s", path, cairo_status_to_string(st));
    cairo_surface_destroy(s);
    return rc;
}

/* ---------------------------------------------------------------- either */

static int decode(const uint8_t *bytes, size_t len, const char *path, int rows, int cols,
                  uint8_t *pixels, cn_error *err)
{
    if (len >= sizeof png_signature && memcmp(bytes, png_signature, sizeof png_signature) == 0)
        return png_decode(bytes, len, path, rows, cols, pixels, err);
    if (len >= 2 && bytes[0] == 'P' && (bytes[1] == '2' || bytes[1] == '5'))
        return cn_pgm_decode(bytes, len, path, rows, cols, pixels, err);
    if (len >= 2 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '7')
        return cn_fail(err, "%s: a Netpbm P%c file; only grey PGM (P2, P5) and PNG are read",
                       path, bytes[1]);
    return cn_fail(err, "%s: not a PNG or PGM image", path);
}

int cn_image_read_grey(const char *path, int rows, int cols, uint8_t *pixels, cn_error *err)
{
    if (!path) return cn_fail(err, "image: no file name given");
    if (rows < 1 || cols < 1 || rows > 65535 || cols > 65535)
        return cn_fail(err, "%s: cannot read an image of %dx%d pixels", path, cols, rows);
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = read_image_file(path, &bytes, &len, err);
    if (rc == 0) rc = decode(bytes, len, path, rows, cols, pixels, err);
    free(bytes);
    return rc;
}
