/* jpeg.c — JPEG files for the image reader, decoded from memory by libjpeg-turbo (baseline,
 * progressive and arithmetic-coded; grey, YCbCr and RGB). Colour is decoded to RGB, and made grey
 * with the same luma as PNG when grey is asked for, so the pixels are those of PIL's
 * Image.open().convert("L") or convert("RGB") with the same library. libjpeg's fatal errors come
 * back here through longjmp, never exit(); its warnings about damaged data (a truncated file, a
 * bad Huffman code, ...) are fatal too, so a damaged file is refused rather than predicted from
 * grey filler; only warnings about metadata (an unknown JFIF revision, a bad ICC profile, which is
 * not used) are let through. The size is checked from the header before any pixel is decoded,
 * libjpeg's memory is capped, and so is the number of progressive scans, against files crafted to
 * decode forever. It does not read CMYK / YCCK files, apply EXIF orientation, or write JPEG. */
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

/* Grey stays grey; YCbCr and RGB are decoded to RGB; the rest is refused. */
static int choose_colour(j_decompress_ptr d, const char *path, cn_error *err)
{
    switch (d->jpeg_color_space) {
    case JCS_GRAYSCALE: d->out_color_space = JCS_GRAYSCALE; return 0;
    case JCS_YCbCr:
    case JCS_RGB: d->out_color_space = JCS_RGB; return 0;
    case JCS_CMYK:
    case JCS_YCCK:
        return cn_fail(err, "%s: a CMYK JPEG; only grey and colour (YCbCr, RGB) JPEG files are "
                       "read", path);
    default:
        return cn_fail(err, "%s: a JPEG in an unknown colour space (%d components)", path,
                       d->num_components);
    }
}

static int read_rows(jpeg_job *job, const char *path, cn_image *img, cn_error *err)
{
    j_decompress_ptr d = &job->cinfo;
    int colour = d->out_color_space == JCS_RGB;
    if ((int)d->output_width != img->width || (int)d->output_height != img->height ||
        d->output_components != (colour ? 3 : 1))
        return cn_fail(err, "%s: the JPEG decodes to another shape than its header gives", path);
    if (!(job->row = malloc((size_t)img->width * 3)))
        return cn_fail(err, "%s: out of memory for a JPEG row of %d pixels", path, img->width);
    while ((int)d->output_scanline < img->height) {
        int r = (int)d->output_scanline;
        JSAMPROW row = job->row;
        if (jpeg_read_scanlines(d, &row, 1) != 1)
            return cn_fail(err, "%s: the JPEG decoder returned no row", path);
        for (int c = 0; c < img->width; c++)
            if (colour) cn_image_put_rgb(img, r, c, row[3 * c], row[3 * c + 1], row[3 * c + 2]);
            else cn_image_put_grey(img, r, c, row[c]);
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
