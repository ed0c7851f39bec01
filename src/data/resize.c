/* resize.c — scaling an image to the model's input size, plane by plane ([channels, height,
 * width]), each axis on its own: area averaging along an axis that shrinks (a box filter one
 * output pixel wide: the mean of the source pixels whose centres lie under the output pixel),
 * bilinear interpolation along one that grows (a triangle filter: the two nearest source pixels,
 * by distance; edge pixels repeated). This is PIL's separable resampler (Pillow's Resample.c) with
 * Image.BOX and Image.BILINEAR, computed the same way — weights in double, rounded to 22-bit fixed
 * point, a horizontal pass rounded to 8 bits, then a vertical one — so its pixels are exactly
 * PIL's, which the tests check against files PIL wrote. It keeps no aspect ratio and does no
 * cropping, sharpening or gamma correction (pixel values are averaged as stored). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"

#define PRECISION_BITS 22 /* PIL's: 32 - 8 bits of pixel - 2 bits of headroom */

/* The weights of one axis: output pixel i reads count[i] source pixels from first[i] on, with
 * weights weight[i * taps ...]. */
typedef struct {
    int taps;
    int *first, *count;
    int32_t *weight;
} axis_weights;

static double box(double x)
{
    return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
}

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static void free_axis(axis_weights *a)
{
    free(a->first);
    free(a->count);
    free(a->weight);
}

/* One output pixel's weights, as PIL's precompute_coeffs and normalize_coeffs_8bpc; w is
 * scratch space for a->taps weights. */
static void pixel_weights(const axis_weights *a, int i, int in, double scale, int shrink,
                          double *w)
{
    double filterscale = shrink ? scale : 1.0, support = (shrink ? 0.5 : 1.0) * filterscale;
    double center = (i + 0.5) * scale, inv = 1.0 / filterscale, total = 0;
    int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    for (int x = lo; x < hi; x++) {
        double v = (x - center + 0.5) * inv;
        w[x - lo] = shrink ? box(v) : triangle(v);
        total += w[x - lo];
    }
    int32_t *k = a->weight + (size_t)i * a->taps;
    for (int x = 0; x < a->taps; x++) {
        double v = x < hi - lo && total != 0.0 ? w[x] / total : 0.0;
        k[x] = (int32_t)(0.5 + v * (1 << PRECISION_BITS));
    }
    a->first[i] = lo;
    a->count[i] = hi - lo;
}

static int axis_init(axis_weights *a, int in, int out)
{
    double scale = (double)in / out;
    int shrink = out < in;
    a->taps = (int)ceil((shrink ? 0.5 * scale : 1.0)) * 2 + 1;
    a->first = malloc((size_t)out * sizeof *a->first);
    a->count = malloc((size_t)out * sizeof *a->count);
    a->weight = malloc((size_t)out * a->taps * sizeof *a->weight);
    double *w = malloc((size_t)a->taps * sizeof *w);
    int rc = a->first && a->count && a->weight && w ? 0 : -1;
    for (int i = 0; rc == 0 && i < out; i++) pixel_weights(a, i, in, scale, shrink, w);
    free(w);
    return rc;
}

static uint8_t clip8(int64_t v)
{
    if (v >= (int64_t)256 << PRECISION_BITS) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

/* One output sample from count source samples step apart. */
static uint8_t sample(const uint8_t *src, size_t step, const int32_t *k, int count)
{
    int64_t sum = 1 << (PRECISION_BITS - 1);
    for (int x = 0; x < count; x++) sum += (int64_t)src[(size_t)x * step] * k[x];
    return clip8(sum);
}

/* [rows, in_cols] -> [rows, out_cols] */
static void horizontal(const uint8_t *src, int rows, int in_cols, uint8_t *dst, int out_cols,
                       const axis_weights *a)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < out_cols; c++)
            dst[(size_t)r * out_cols + c] =
                sample(src + (size_t)r * in_cols + a->first[c], 1,
                       a->weight + (size_t)c * a->taps, a->count[c]);
}

/* [in_rows, cols] -> [out_rows, cols] */
static void vertical(const uint8_t *src, int cols, uint8_t *dst, int out_rows,
                     const axis_weights *a)
{
    for (int r = 0; r < out_rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)r * cols + c] = sample(src + (size_t)a->first[r] * cols + c,
                                               (size_t)cols, a->weight + (size_t)r * a->taps,
                                               a->count[r]);
}

static int side_ok(int side)
{
    return side >= 1 && side <= CN_IMAGE_MAX_SIDE;
}

/* One plane [src_rows, src_cols] -> [rows, cols] through mid ([src_rows, cols]). */
static void resize_plane(const uint8_t *src, int src_rows, int src_cols, uint8_t *mid,
                         uint8_t *dst, int rows, int cols, const axis_weights *across,
                         const axis_weights *down)
{
    if (cols == src_cols) memcpy(mid, src, (size_t)src_rows * cols);
    else horizontal(src, src_rows, src_cols, mid, cols, across);
    if (rows == src_rows) memcpy(dst, mid, (size_t)rows * cols);
    else vertical(mid, cols, dst, rows, down);
}

int cn_image_resize(const uint8_t *src, int channels, int src_rows, int src_cols, uint8_t *dst,
                    int rows, int cols, cn_error *err)
{
    if (channels != 1 && channels != 3)
        return cn_fail(err, "resize: cannot scale an image of %d channels (1 or 3)", channels);
    if (!side_ok(src_rows) || !side_ok(src_cols) || !side_ok(rows) || !side_ok(cols))
        return cn_fail(err, "resize: cannot scale %dx%d pixels to %dx%d", src_cols, src_rows,
                       cols, rows);
    axis_weights across = {0}, down = {0};
    uint8_t *mid = malloc((size_t)src_rows * cols);
    int rc = mid && axis_init(&across, src_cols, cols) == 0 &&
                     axis_init(&down, src_rows, rows) == 0
                 ? 0
                 : cn_fail(err, "resize: out of memory scaling %dx%d pixels to %dx%d",
                           src_cols, src_rows, cols, rows);
    size_t src_plane = (size_t)src_rows * src_cols, plane = (size_t)rows * cols;
    for (int ch = 0; rc == 0 && ch < channels; ch++)
        resize_plane(src + ch * src_plane, src_rows, src_cols, mid, dst + ch * plane, rows, cols,
                     &across, &down);
    free(mid);
    free_axis(&across);
    free_axis(&down);
    return rc;
}
