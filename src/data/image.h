/* image.h — what the image readers share: image.c (reading the file, telling the formats apart,
 * the public functions), one decoder per format, pgm.c, png.c (cairo) and jpeg.c
 * (libjpeg-turbo), and the folder reader (folder.c). Each decoder turns a whole file held in
 * memory into planar pixels [channels, height, width] at the file's own size, grey or colour
 * as the caller asks; none of them touches files, resizes or inverts. */
#ifndef CN_IMAGE_H
#define CN_IMAGE_H

#include "cnnc.h"

/* What a caller wants: channels 1 (grey) or 3 (RGB), or 0 for the file's own; exactly
 * height x width, or any size (height == 0). into (may be NULL) receives the pixels when the
 * size is exact, else they are malloc'd. first (may be NULL) names the image whose size an
 * exact size comes from, for the folder reader's "images of mixed sizes"; no_pgm refuses PGM
 * files (folders hold PNG and JPEG only). */
typedef struct {
    int channels;
    int height, width;
    uint8_t *into;
    const char *first;
    int no_pgm;
} cn_image_want;

/* An image as decoded: file_channels is the file's own (1 grey, 3 colour); pixels has
 * channels planes of height * width bytes, malloc'd unless owned is 0 (the caller's into). */
typedef struct {
    int file_channels, channels;
    int height, width;
    uint8_t *pixels;
    int owned;
} cn_image;

/* Checks the size a header gives (format names the format in messages): a side of 0, above
 * CN_IMAGE_MAX_SIDE or over CN_IMAGE_MAX_PIXELS in all, or another size than want's (when
 * want->height > 0) is refused. On success sets img's shape (channels: want's, else
 * file_channels) and its pixels (want->into, or allocated; uninitialised). */
int cn_image_start(const char *path, const char *format, long width, long height,
                   int file_channels, const cn_image_want *want, cn_image *img, cn_error *err);

/* img's pixels scaled to height x width into dst by cn_image_resize (dst: img->channels *
 * height * width bytes); a failure is refused naming path. */
int cn_image_scale_into(const cn_image *img, const char *path, uint8_t *dst, int height,
                        int width, cn_error *err);

/* Frees img's pixels when it owns them and zeroes it. */
void cn_image_free(cn_image *img);

/* The file at path (read whole, at most 16 MiB) decoded as want says into img (zeroed here;
 * free with cn_image_free, also on failure). */
int cn_image_load(const char *path, const cn_image_want *want, cn_image *img, cn_error *err);

/* PIL's convert("L"): (19595 R + 38470 G + 7471 B + 2^15) >> 16; grey stays grey exactly. */
static inline uint8_t cn_luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

/* Pixel (row, col) of img from a colour sample: its luma in a grey image, else one byte in
 * each of the three planes. */
static inline void cn_image_put_rgb(cn_image *img, int row, int col, unsigned r, unsigned g,
                                    unsigned b)
{
    size_t plane = (size_t)img->height * (size_t)img->width;
    uint8_t *p = img->pixels + (size_t)row * (size_t)img->width + (size_t)col;
    if (img->channels == 1) {
        *p = cn_luma(r, g, b);
    } else {
        p[0] = (uint8_t)r;
        p[plane] = (uint8_t)g;
        p[2 * plane] = (uint8_t)b;
    }
}

/* Pixel (row, col) of img from a grey sample: repeated in every plane (PIL's convert("RGB")). */
static inline void cn_image_put_grey(cn_image *img, int row, int col, unsigned v)
{
    size_t plane = (size_t)img->height * (size_t)img->width;
    uint8_t *p = img->pixels + (size_t)row * (size_t)img->width + (size_t)col;
    for (int ch = 0; ch < img->channels; ch++) p[(size_t)ch * plane] = (uint8_t)v;
}

/* Decode a whole file (bytes, len) that starts with its format's signature into img (set up
 * through cn_image_start; freed by the caller, also on failure). */
int cn_pgm_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_image *img, cn_error *err);
int cn_png_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                  cn_image *img, cn_error *err);
int cn_jpeg_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                   cn_image *img, cn_error *err);

#endif /* CN_IMAGE_H */
