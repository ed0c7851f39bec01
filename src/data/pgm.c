/* pgm.c — a strict reader of Netpbm grey images: binary P5 and plain P2, maxval 1..65535, comments
 * in the header. The size is checked (cn_image_start) before the raster is read, and
 * anything the format does not allow is refused with a message saying where: missing or extra
 * samples, samples above maxval, a second image in the same file. A PGM is 1 channel, repeated
 * in each plane when colour is asked for. It does not read PBM, PPM or
 * PAM, and does not resize (image.c does). */
#include <stdio.h>
#include <string.h>

#include "data/image.h"

#define MAX_SIDE 65535L

typedef struct {
    const uint8_t *p, *end;
    const char *path;
} cursor;

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Skips whitespace and comments (from '#' to the end of the line) between header fields. */
static void skip_header_space(cursor *c)
{
    while (c->p < c->end) {
        if (is_space(*c->p))
            c->p++;
        else if (*c->p == '#')
            while (c->p < c->end && *c->p != '\n' && *c->p != '\r') c->p++;
        else
            break;
    }
}

/* Reads a decimal number of at most max; what names it in messages. */
static int read_number(cursor *c, const char *where, const char *what, long max, long *out,
                       cn_error *err)
{
    if (c->p >= c->end)
        return cn_fail(err, "%s: PGM %s ends before %s", c->path, where, what);
    if (!is_digit(*c->p))
        return cn_fail(err, "%s: PGM %s: %s is not a number", c->path, where, what);
    long v = 0;
    for (; c->p < c->end && is_digit(*c->p); c->p++) {
        v = v * 10 + (*c->p - '0');
        if (v > max) return cn_fail(err, "%s: PGM %s: %s is over %ld", c->path, where, what, max);
    }
    if (c->p < c->end && !is_space(*c->p) && *c->p != '#')
        return cn_fail(err, "%s: PGM %s: %s is followed by '%c', not by white space", c->path,
                       where, what, *c->p >= 0x20 && *c->p < 0x7f ? *c->p : '?');
    *out = v;
    return 0;
}

static int header_field(cursor *c, const char *what, long min, long max, long *out,
                        cn_error *err)
{
    skip_header_space(c);
    if (read_number(c, "header", what, max, out, err)) return -1;
    if (*out < min) return cn_fail(err, "%s: PGM header: %s is %ld", c->path, what, *out);
    return 0;
}

static uint8_t to_byte(long v, long maxval)
{
    return (uint8_t)(maxval == 255 ? v : (v * 255 + maxval / 2) / maxval);
}

static int sample_above_maxval(const cursor *c, long i, int cols, long v, long maxval,
                               cn_error *err)
{
    return cn_fail(err, "%s: PGM sample %ld (row %ld, column %ld) is %ld, above maxval %ld",
                   c->path, i, i / cols, i % cols, v, maxval);
}

static int binary_raster(cursor *c, int rows, int cols, long maxval, cn_image *img,
                         cn_error *err)
{
    size_t width = maxval < 256 ? 1 : 2, samples = (size_t)rows * (size_t)cols;
    size_t need = samples * width, have = (size_t)(c->end - c->p);
    if (have < need)
        return cn_fail(err, "%s: PGM raster is %zu bytes, %zu short of %d x %d samples of %zu "
                       "byte(s)", c->path, have, need - have, cols, rows, width);
    if (have > need)
        return cn_fail(err, "%s: %zu bytes after the image's raster (one image per file)",
                       c->path, have - need);
    for (size_t i = 0; i < samples; i++) {
        long v = width == 1 ? c->p[i] : (long)c->p[2 * i] << 8 | c->p[2 * i + 1];
        if (v > maxval) return sample_above_maxval(c, (long)i, cols, v, maxval, err);
        cn_image_put_grey(img, (int)(i / (size_t)cols), (int)(i % (size_t)cols),
                          to_byte(v, maxval));
    }
    return 0;
}

static int plain_raster(cursor *c, int rows, int cols, long maxval, cn_image *img,
                        cn_error *err)
{
    long samples = (long)rows * cols;
    for (long i = 0; i < samples; i++) {
        char what[64];
        long v;
        while (c->p < c->end && is_space(*c->p)) c->p++;
        snprintf(what, sizeof what, "sample %ld of %ld", i, samples);
        if (read_number(c, "raster", what, MAX_SIDE, &v, err)) return -1;
        if (v > maxval) return sample_above_maxval(c, i, cols, v, maxval, err);
        cn_image_put_grey(img, (int)(i / cols), (int)(i % cols), to_byte(v, maxval));
    }
    while (c->p < c->end && is_space(*c->p)) c->p++;
    if (c->p < c->end)
        return cn_fail(err, "%s: PGM: text after the last of %ld samples (one image per file)",
                       c->path, samples);
    return 0;
}

int cn_pgm_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_image *img, cn_error *err)
{
    cursor c = {bytes, bytes + len, path};
    if (len < 3 || bytes[0] != 'P' || (bytes[1] != '2' && bytes[1] != '5') ||
        (!is_space(bytes[2]) && bytes[2] != '#'))
        return cn_fail(err, "%s: not a PGM image (no P2 or P5 magic number)", path);
    int binary = bytes[1] == '5';
    c.p += 2;
    long width, height, maxval;
    if (header_field(&c, "width", 1, MAX_SIDE, &width, err) ||
        header_field(&c, "height", 1, MAX_SIDE, &height, err))
        return -1;
    if (cn_image_start(path, "PGM", width, height, 1, want, img, err)) return -1;
    if (header_field(&c, "maxval", 1, 65535, &maxval, err)) return -1;
    int rows = img->height, cols = img->width;
    if (!binary) return plain_raster(&c, rows, cols, maxval, img, err);
    if (c.p >= c.end || !is_space(*c.p))
        return cn_fail(err, "%s: PGM header: no white space between maxval and the raster", path);
    c.p++; /* exactly one white space character before a binary raster */
    return binary_raster(&c, rows, cols, maxval, img, err);
}
