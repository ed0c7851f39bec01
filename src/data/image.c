/* image.c — grey or colour images from files, for prediction and image folders: reads the file
 * once (at most IMAGE_FILE_LIMIT bytes), tells PNG, JPEG and PGM apart by their first bytes and
 * hands the bytes to that format's decoder (png.c, jpeg.c, pgm.c), which checks the size from the
 * header before decoding anything and converts to the channels asked for. Then the image is taken
 * at exactly the size asked for, or scaled to it (resize.c: area averaging when shrinking,
 * bilinear when enlarging). Also the light background test behind `cnnc predict --invert=auto`. It
 * does not invert pixels (the caller decides), crop, centre, or read any other format. */
#include <stdlib.h>
#include <string.h>

#include "files/file_read.h"
#include "data/image.h"

#define IMAGE_FILE_LIMIT (16L << 20)

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t jpeg_signature[3] = {0xff, 0xd8, 0xff};

static int size_refused(const char *path, long width, long height, const cn_image_want *want,
                        cn_error *err)
{
    if (want->first)
        return cn_fail(err, "%s: image is %ldx%ld pixels, the first image (%s) is %dx%d: images of "
                       "mixed sizes (--resize scales them to the model's size)", path, width,
                       height, want->first, want->width, want->height);
    return cn_fail(err, "%s: image is %ldx%ld pixels; the model takes %dx%d (images are not "
                   "resized)", path, width, height, want->width, want->height);
}

int cn_image_start(const char *path, const char *format, long width, long height,
                   int file_channels, const cn_image_want *want, cn_image *img, cn_error *err)
{
    if (width < 1 || height < 1)
        return cn_fail(err, "%s: not a valid %s: image is %ldx%ld pixels", path, format, width,
                       height);
    if (width > CN_IMAGE_MAX_SIDE || height > CN_IMAGE_MAX_SIDE ||
        width * height > CN_IMAGE_MAX_PIXELS)
        return cn_fail(err, "%s: image is %ldx%ld pixels, more than cnnc reads (at most %d on a "
                       "side and %ld in all)", path, width, height, CN_IMAGE_MAX_SIDE,
                       CN_IMAGE_MAX_PIXELS);
    if (want->height > 0 && (width != want->width || height != want->height))
        return size_refused(path, width, height, want, err);
    img->file_channels = file_channels;
    img->channels = want->channels ? want->channels : file_channels;
    img->height = (int)height;
    img->width = (int)width;
    if (want->height > 0 && want->into) {
        img->pixels = want->into;
        return 0;
    }
    img->pixels = malloc((size_t)img->channels * (size_t)width * (size_t)height);
    if (!img->pixels)
        return cn_fail(err, "%s: out of memory for an image of %ldx%ld pixels", path, width,
                       height);
    img->owned = 1;
    return 0;
}

void cn_image_free(cn_image *img)
{
    if (img->owned) free(img->pixels);
    *img = (cn_image){0, 0, 0, 0, NULL, 0};
}

static int read_image_file(const char *path, uint8_t **bytes, size_t *len, cn_error *err)
{
    int rc = cn_read_file(path, IMAGE_FILE_LIMIT, bytes, len, err);
    if (rc == CN_FILE_TOO_LARGE)
        return cn_fail(err, "%s: %lld bytes is too large for an image file here (at most %ld)",
                       path, (long long)*len, IMAGE_FILE_LIMIT);
    return rc;
}

static int starts_with(const uint8_t *bytes, size_t len, const uint8_t *magic, size_t n)
{
    return len >= n && memcmp(bytes, magic, n) == 0;
}

static int decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_image *img, cn_error *err)
{
    if (starts_with(bytes, len, png_signature, sizeof png_signature))
        return cn_png_decode(bytes, len, path, want, img, err);
    if (starts_with(bytes, len, jpeg_signature, sizeof jpeg_signature))
        return cn_jpeg_decode(bytes, len, path, want, img, err);
    if (want->no_pgm) return cn_fail(err, "%s: not a PNG or JPEG image", path);
    if (len >= 2 && bytes[0] == 'P' && (bytes[1] == '2' || bytes[1] == '5'))
        return cn_pgm_decode(bytes, len, path, want, img, err);
    if (len >= 2 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '7')
        return cn_fail(err, "%s: a Netpbm P%c file; only grey PGM (P2, P5), PNG and JPEG are "
                       "read", path, bytes[1]);
    return cn_fail(err, "%s: not a PNG, JPEG or PGM image", path);
}

int cn_image_load(const char *path, const cn_image_want *want, cn_image *img, cn_error *err)
{
    *img = (cn_image){0, 0, 0, 0, NULL, 0};
    if (!path) return cn_fail(err, "image: no file name given");
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = read_image_file(path, &bytes, &len, err);
    if (rc == 0) rc = decode(bytes, len, path, want, img, err);
    free(bytes);
    return rc;
}

static int shape_ok(const char *path, int channels, int height, int width, cn_error *err)
{
    if (channels != 1 && channels != 3)
        return cn_fail(err, "%s: cannot read an image as %d channels (1 grey or 3 colour)",
                       path ? path : "image", channels);
    if (height < 1 || width < 1 || height > CN_IMAGE_MAX_SIDE || width > CN_IMAGE_MAX_SIDE)
        return cn_fail(err, "%s: cannot read an image of %dx%d pixels", path ? path : "image",
                       width, height);
    return 0;
}

int cn_image_read(const char *path, int channels, int height, int width, uint8_t *pixels,
                  cn_error *err)
{
    if (shape_ok(path, channels, height, width, err)) return -1;
    cn_image_want want = {channels, height, width, pixels, NULL, 0};
    cn_image img;
    int rc = cn_image_load(path, &want, &img, err);
    cn_image_free(&img);
    return rc;
}

int cn_image_scale_into(const cn_image *img, const char *path, uint8_t *dst, int height,
                        int width, cn_error *err)
{
    cn_error why = {{0}};
    if (cn_image_resize(img->pixels, img->channels, img->height, img->width, dst, height, width,
                        &why) == 0)
        return 0;
    return cn_fail(err, "%s: %s", path, why.msg);
}

int cn_image_read_resized(const char *path, int channels, int height, int width,
                          uint8_t *pixels, int *file_height, int *file_width, cn_error *err)
{
    if (shape_ok(path, channels, height, width, err)) return -1;
    cn_image_want any = {channels, 0, 0, NULL, NULL, 0};
    cn_image img;
    int rc = cn_image_load(path, &any, &img, err);
    if (rc == 0) rc = cn_image_scale_into(&img, path, pixels, height, width, err);
    if (rc == 0 && file_height) *file_height = img.height;
    if (rc == 0 && file_width) *file_width = img.width;
    cn_image_free(&img);
    return rc;
}

int cn_image_light_background(const uint8_t *pixels, int rows, int cols)
{
    if (rows < 1 || cols < 1) return 0;
    uint64_t sum = 0, count = 0;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = pixels + (size_t)r * cols;
        if (r == 0 || r == rows - 1) {
            for (int c = 0; c < cols; c++) sum += row[c];
            count += (uint64_t)cols;
        } else {
            sum += row[0] + (cols > 1 ? row[cols - 1] : 0);
            count += cols > 1 ? 2 : 1;
        }
    }
    return sum >= 128 * count;
}
