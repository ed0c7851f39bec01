/* image.h — what the image readers share: image.c (reading the file, telling the formats apart,
 * the public functions) and one decoder per format, pgm.c, png.c (cairo) and jpeg.c
 * (libjpeg-turbo). Each decoder turns a whole file held in memory into grey pixels at the
 * file's own size; none of them touches files, resizes or inverts. */
#ifndef CN_IMAGE_H
#define CN_IMAGE_H

#include "cnnc.h"

/* A grey image at its file's size: rows * cols bytes, malloc'd. */
typedef struct {
    int rows, cols;
    uint8_t *pixels;
} cn_grey_image;

/* The size a caller wants: exactly rows x cols, or any size (rows == 0, then resized). */
typedef struct {
    int rows, cols;
} cn_image_want;

/* Checks the size a header gives (format names the format in messages): a side of 0, above
 * CN_IMAGE_MAX_SIDE or over CN_IMAGE_MAX_PIXELS in all, or another size than want (when
 * want->rows > 0) is refused. On success allocates img for that size (uninitialised pixels). */
int cn_image_start(const char *path, const char *format, long width, long height,
                   const cn_image_want *want, cn_grey_image *img, cn_error *err);

/* PIL's convert("L"): (19595 R + 38470 G + 7471 B + 2^15) >> 16; grey stays grey exactly. */
static inline uint8_t cn_luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

/* Decode a whole file (bytes, len) that starts with its format's signature into img
 * (allocated by cn_image_start; freed by the caller, also on failure). */
int cn_pgm_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_grey_image *img, cn_error *err);
int cn_png_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_grey_image *img, cn_error *err);
int cn_jpeg_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                   cn_grey_image *img, cn_error *err);

#endif /* CN_IMAGE_H */
