/* png.c — PNG files for the image reader, decoded by cairo (libpng inside) from memory. Before
 * cairo sees a file, its chunks are walked here: each chunk's length must fit in the file, its
 * CRC must match, IHDR must come first with a size and a bit depth / colour type the format
 * allows, and IEND must be there. So a damaged or truncated file gets a message that says what
 * is wrong with it, and the size is checked before anything is decoded. Grey files (colour
 * types 0 and 4) count as 1 channel, the others as 3; cairo hands every file over as RGB,
 * already multiplied by its alpha, so transparency is composited over black. It does not
 * write PNG files (picture.c and plot.c do, through cairo) or read APNG frames beyond the
 * first. */
#include <string.h>

#include <cairo.h>
#include <zlib.h>

#include "data/image.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---------------------------------------------------------------- the chunks */

/* The colour types and bit depths PNG allows (PNG specification, table 11.1). */
static int ihdr_valid(unsigned depth, unsigned colour_type)
{
    switch (colour_type) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case 2: case 4: case 6: return depth == 8 || depth == 16;
    default: return 0;
    }
}

static int check_ihdr(const uint8_t *bytes, size_t len, const char *path, cn_error *err)
{
    if (len < 33 || be32(bytes + 8) != 13 || memcmp(bytes + 12, "IHDR", 4) != 0)
        return cn_fail(err, "%s: not a valid PNG: no IHDR chunk after the signature", path);
    const uint8_t *h = bytes + 16;
    if (!ihdr_valid(h[8], h[9]))
        return cn_fail(err, "%s: not a valid PNG: bit depth %u with colour type %u", path, h[8],
                       h[9]);
    if (h[10] != 0 || h[11] != 0 || h[12] > 1)
        return cn_fail(err, "%s: not a valid PNG: unknown compression, filter or interlace "
                       "method (%u, %u, %u)", path, h[10], h[11], h[12]);
    return 0;
}

/* Walks every chunk up to IEND: lengths inside the file, CRCs right. */
static int check_chunks(const uint8_t *bytes, size_t len, const char *path, cn_error *err)
{
    size_t at = 8;
    for (;;) {
        if (len - at < 12)
            return cn_fail(err, "%s: truncated PNG: the file ends at byte %zu, before the IEND "
                           "chunk", path, len);
        uint32_t size = be32(bytes + at);
        char type[5] = {0};
        memcpy(type, bytes + at + 4, 4);
        for (int i = 0; i < 4; i++)
            if (!((type[i] >= 'A' && type[i] <= 'Z') || (type[i] >= 'a' && type[i] <= 'z')))
                return cn_fail(err, "%s: not a valid PNG: no chunk type at byte %zu", path,
                               at + 4);
        if (size > len - at - 12)
            return cn_fail(err, "%s: truncated PNG: chunk %s at byte %zu needs %lu bytes, the "
                           "file ends after %zu", path, type, at, (unsigned long)size + 12,
                           len - at);
        uLong crc = crc32(crc32(0L, Z_NULL, 0), bytes + at + 4, (uInt)size + 4);
        if (crc != be32(bytes + at + 8 + size))
            return cn_fail(err, "%s: not a valid PNG: chunk %s at byte %zu has a wrong CRC (the "
                           "file is damaged)", path, type, at);
        at += (size_t)size + 12;
        if (memcmp(type, "IEND", 4) == 0) return 0;
    }
}

/* ---------------------------------------------------------------- decoding */

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

/* What a failed cairo_image_surface_create_from_png_stream means here, where the chunks are
 * known to be whole and the size is within limits: libpng's errors (cairo 1.16 reports them as
 * NO_MEMORY, later versions as PNG_ERROR) come from the image data itself. */
static int cairo_refusal(cairo_status_t st, const char *path, cn_error *err)
{
    switch (st) {
    case CAIRO_STATUS_NO_MEMORY:
    case CAIRO_STATUS_PNG_ERROR:
        return cn_fail(err, "%s: not a valid PNG: its image data does not decode (corrupt "
                       "compressed data, or chunks out of order)", path);
    case CAIRO_STATUS_READ_ERROR:
        return cn_fail(err, "%s: truncated PNG: the image data ends early", path);
    case CAIRO_STATUS_INVALID_SIZE:
        return cn_fail(err, "%s: the PNG is too large for cairo to decode", path);
    default:
        return cn_fail(err, "%s: cannot decode the PNG: %s", path, cairo_status_to_string(st));
    }
}

static int surface_to_image(cairo_surface_t *s, const char *path, cn_image *img,
                            cn_error *err)
{
    cairo_format_t format = cairo_image_surface_get_format(s);
    if (format != CAIRO_FORMAT_ARGB32 && format != CAIRO_FORMAT_RGB24)
        return cn_fail(err, "%s: the PNG decodes to an unexpected pixel format", path);
    if (cairo_image_surface_get_width(s) != img->width ||
        cairo_image_surface_get_height(s) != img->height)
        return cn_fail(err, "%s: the PNG decodes to another size than its header gives", path);
    cairo_surface_flush(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    size_t stride = (size_t)cairo_image_surface_get_stride(s);
    for (int r = 0; r < img->height; r++) {
        const uint32_t *row = (const uint32_t *)(const void *)(data + (size_t)r * stride);
        for (int c = 0; c < img->width; c++)
            cn_image_put_rgb(img, r, c, (row[c] >> 16) & 255, (row[c] >> 8) & 255, row[c] & 255);
    }
    return 0;
}

/* Grey (colour types 0 and 4, with or without alpha) is 1 channel, the rest (RGB, palette) 3. */
static int png_channels(const uint8_t *bytes)
{
    return bytes[25] == 0 || bytes[25] == 4 ? 1 : 3;
}

int cn_png_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_image *img, cn_error *err)
{
    if (check_ihdr(bytes, len, path, err) ||
        cn_image_start(path, "PNG", (long)be32(bytes + 16), (long)be32(bytes + 20),
                       png_channels(bytes), want, img, err) ||
        check_chunks(bytes, len, path, err))
        return -1;
    png_source src = {bytes, len};
    cairo_surface_t *s = cairo_image_surface_create_from_png_stream(png_read, &src);
    cairo_status_t st = cairo_surface_status(s);
    int rc = st == CAIRO_STATUS_SUCCESS ? surface_to_image(s, path, img, err)
                                        : cairo_refusal(st, path, err);
    cairo_surface_destroy(s);
    return rc;
}
