/* jpeg.c — JPEG files for the image reader, decoded from memory by libjpeg-turbo (baseline,
 * progressive and arithmetic-coded; grey, YCbCr, RGB, CMYK and YCCK). Colour is decoded to RGB
 * (CMYK as PIL converts it: Adobe's inverted polarity, which PIL assumes for every 4-channel
 * JPEG, and its integer arithmetic), and made grey with the same luma as PNG when grey is asked
 * for, so the pixels are those of PIL's Image.open().convert("L") or convert("RGB") with the
 * same library. libjpeg's fatal errors come
 * back here through longjmp, never exit(); its warnings about damaged data (a truncated file, a
 * bad Huffman code, ...) are fatal too, so a damaged file is refused rather than predicted from
 * grey filler; only warnings about metadata (an unknown JFIF revision, a bad ICC profile, which is
 * not used) are let through. The size is checked from the header before any pixel is decoded,
 * libjpeg's memory is capped, and so is the number of progressive scans, against files crafted to
 * decode forever. It does not apply ICC profiles or EXIF orientation, or write JPEG. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>
#include <jerror.h>

#include "data/image.h"

#define JPEG_MAX_SCANS 1000           /* progressive files from encoders have about ten */
#define JPEG_MAX_MEMORY (512L << 20)  /* libjpeg's own buffers (progressive coefficients) */

typedef struct {
    struct jpeg_error_mgr mgr; /* first: libjpeg hands &mgr back as cinfo->err */
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
    int truncated;
} jpeg_errors;

/* One decoding, owned by cn_jpeg_decode's frame (so nothing that setjmp must restore lives in
 * the frame that calls setjmp). */
typedef struct {
    struct jpeg_decompress_struct cinfo;
    jpeg_errors errors;
    struct jpeg_progress_mgr progress;
    int created;
    JSAMPLE *row; /* one scanline */
} jpeg_job;

static void stop(j_common_ptr cinfo)
{
    jpeg_errors *e = (jpeg_errors *)(void *)cinfo->err;
    longjmp(e->jump, 1);
}

static void on_error(j_common_ptr cinfo)
{
    jpeg_errors *e = (jpeg_errors *)(void *)cinfo->err;
    e->truncated = cinfo->err->msg_code == JWRN_JPEG_EOF;
    cinfo->err->format_message(cinfo, e->msg);
    stop(cinfo);
}

/* level < 0: a warning; level >= 0: trace messages, which are off. */
static void on_message(j_common_ptr cinfo, int level)
{
    int code = cinfo->err->msg_code;
    if (level < 0 && code != JWRN_JFIF_MAJOR && code != JWRN_BOGUS_ICC) on_error(cinfo);
}

static void on_progress(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)(void *)cinfo;
    if (d->input_scan_number <= JPEG_MAX_SCANS) return;
    jpeg_errors *e = (jpeg_errors *)(void *)cinfo->err;
    snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", JPEG_MAX_SCANS);
    stop(cinfo);
}

/* Grey stays grey; YCbCr and RGB are decoded to RGB, YCCK to CMYK (made RGB row by row); the
 * rest is refused. */
static int choose_colour(j_decompress_ptr d, const char *path, cn_error *err)
{
    switch (d->jpeg_color_space) {
    case JCS_GRAYSCALE: d->out_color_space = JCS_GRAYSCALE; return 0;
    case JCS_YCbCr:
    case JCS_RGB: d->out_color_space = JCS_RGB; return 0;
    case JCS_CMYK:
    case JCS_YCCK: d->out_color_space = JCS_CMYK; return 0;
    default:
        return cn_fail(err, "%s: a JPEG in an unknown colour space (%d components)", path,
                       d->num_components);
    }
}

/* One of R, G, B from a CMYK pixel's value v of C, M or Y and its k, as the file holds them:
 * PIL reads them inverted (C = 255 - v, K = 255 - k) and makes (255 - K)(1 - C / 255), rounded
 * by its MULDIV255. */
static uint8_t cmyk_to_rgb(int v, int k)
{
    int t = (255 - v) * k + 128;
    return (uint8_t)(k - (((t >> 8) + t) >> 8));
}

/* Puts decoded row r (out: 1, 3 or 4 samples a pixel) into img. */
static void put_row(cn_image *img, int r, const JSAMPLE *row, int out)
{
    for (int c = 0; c < img->width; c++, row += out)
        if (out == 1) cn_image_put_grey(img, r, c, row[0]);
        else if (out == 3) cn_image_put_rgb(img, r, c, row[0], row[1], row[2]);
        else
            cn_image_put_rgb(img, r, c, cmyk_to_rgb(row[0], row[3]), cmyk_to_rgb(row[1], row[3]),
                             cmyk_to_rgb(row[2], row[3]));
}

static int read_rows(jpeg_job *job, const char *path, cn_image *img, cn_error *err)
{
    j_decompress_ptr d = &job->cinfo;
    int out = d->out_color_space == JCS_GRAYSCALE ? 1 : d->out_color_space == JCS_RGB ? 3 : 4;
    if ((int)d->output_width != img->width || (int)d->output_height != img->height ||
        d->output_components != out)
        return cn_fail(err, "%s: the JPEG decodes to another shape than its header gives", path);
    if (!(job->row = malloc((size_t)img->width * (size_t)out)))
        return cn_fail(err, "%s: out of memory for a JPEG row of %d pixels", path, img->width);
    while ((int)d->output_scanline < img->height) {
        int r = (int)d->output_scanline;
        JSAMPROW row = job->row;
        if (jpeg_read_scanlines(d, &row, 1) != 1)
            return cn_fail(err, "%s: the JPEG decoder returned no row", path);
        put_row(img, r, job->row, out);
    }
    return 0;
}

static int decode_guarded(jpeg_job *job, const uint8_t *bytes, size_t len, const char *path,
                          const cn_image_want *want, cn_image *img, cn_error *err)
{
    if (setjmp(job->errors.jump))
        return job->errors.truncated
                   ? cn_fail(err, "%s: truncated JPEG: the file ends before its image data",
                             path)
                   : cn_fail(err, "%s: not a valid JPEG: %s", path, job->errors.msg);
    j_decompress_ptr d = &job->cinfo;
    jpeg_create_decompress(d);
    job->created = 1;
    d->mem->max_memory_to_use = JPEG_MAX_MEMORY;
    d->progress = &job->progress;
    jpeg_mem_src(d, bytes, (unsigned long)len);
    jpeg_read_header(d, TRUE);
    int file_channels = d->jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
    if (cn_image_start(path, "JPEG", (long)d->image_width, (long)d->image_height, file_channels,
                       want, img, err) ||
        choose_colour(d, path, err))
        return -1;
    jpeg_start_decompress(d);
    if (read_rows(job, path, img, err)) return -1;
    jpeg_finish_decompress(d);
    return 0;
}

int cn_jpeg_decode(const uint8_t *bytes, size_t len, const char *path, const cn_image_want *want,
                   cn_image *img, cn_error *err)
{
    jpeg_job job = {0};
    job.cinfo.err = jpeg_std_error(&job.errors.mgr);
    job.errors.mgr.error_exit = on_error;
    job.errors.mgr.emit_message = on_message;
    job.progress.progress_monitor = on_progress;
    int rc = decode_guarded(&job, bytes, len, path, want, img, err);
    if (job.created) jpeg_destroy_decompress(&job.cinfo);
    free(job.row);
    return rc;
}
