/* test_predict.c — reading images for prediction (PGM P2/P5, PNG in grey, colour and with
 * transparency, JPEG in grey, colour and CMYK, each as 1 or 3 channels; one refusal per kind of bad
 * file, each with its message), scaling them, plane by plane for colour (values computed by hand,
 * and PIL's own pixels from tests/fixtures/predict/pil), the light background test (by hand and
 * over Fashion-MNIST's test set), and cn_model_predict against cn_evaluate. The command line
 * (`cnnc predict` on PyTorch's fixtures) is tested in tests/cli_predict.sh. */
#include "testutil.h"

#include <cairo.h>
#include <jpeglib.h>
#include <zlib.h>

#define SIDE 28
#define PIXELS (SIDE * SIDE)
#define DATA_DIR "/usr/share/datasets/fashion-mnist"

/* ---------------------------------------------------------------- helpers */

static void pattern(uint8_t *img)
{
    for (int i = 0; i < PIXELS; i++) img[i] = (uint8_t)((i * 37 + i / 28) % 256);
}

/* A P5 file: header text, then raster bytes (len of them). */
static char *pgm_file(const char *header, const uint8_t *raster, size_t len)
{
    size_t hlen = strlen(header);
    uint8_t *bytes = malloc(hlen + len + 1);
    assert_non_null(bytes);
    memcpy(bytes, header, hlen);
    if (len) memcpy(bytes + hlen, raster, len);
    char *path = tu_write_temp(bytes, hlen + len, ".pgm");
    free(bytes);
    return path;
}

/* A P2 file with count samples from img, then tail. */
static char *plain_file(const char *header, const uint8_t *img, int count, const char *tail)
{
    size_t cap = strlen(header) + (size_t)count * 4 + strlen(tail) + 1;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t at = (size_t)snprintf(text, cap, "%s", header);
    for (int i = 0; i < count; i++)
        at += (size_t)snprintf(text + at, cap - at, "%d%c", img[i], i % 28 == 27 ? '\n' : ' ');
    snprintf(text + at, cap - at, "%s", tail);
    char *path = tu_write_temp(text, strlen(text), ".pgm");
    free(text);
    return path;
}

static void expect_pixels(char *path, const uint8_t *want)
{
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    if (cn_image_read(path, 1, SIDE, SIDE, got, &err) != 0) fail_msg("%s", err.msg);
    assert_memory_equal(got, want, PIXELS);
    unlink(path);
    free(path);
}

/* Both readers refuse path (exact size and resized) with what in the message; path is
 * removed and freed. */
static void expect_refused(char *path, const char *what)
{
    cn_error err = {{0}}, err_resized = {{0}};
    uint8_t got[PIXELS];
    int rc = cn_image_read(path, 1, SIDE, SIDE, got, &err);
    int rc_resized =
        cn_image_read_resized(path, 1, SIDE, SIDE, got, NULL, NULL, &err_resized);
    int as_expected = rc == -1 && strstr(err.msg, what) && strstr(err.msg, path);
    int resized_as_expected = rc_resized == -1 && strstr(err_resized.msg, what) &&
                              strstr(err_resized.msg, path);
    unlink(path);
    if (!as_expected) fail_msg("%s: expected \"%s\", got \"%s\"", path, what, err.msg);
    if (!resized_as_expected)
        fail_msg("%s: resized: expected \"%s\", got \"%s\"", path, what, err_resized.msg);
    free(path);
}

/* As expect_refused, for files that only the exact-size reader refuses. */
static void expect_refused_exact(char *path, const char *what)
{
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    int rc = cn_image_read(path, 1, SIDE, SIDE, got, &err);
    int as_expected = rc == -1 && strstr(err.msg, what) && strstr(err.msg, path);
    unlink(path);
    if (!as_expected) fail_msg("%s: expected \"%s\", got \"%s\"", path, what, err.msg);
    free(path);
}

/* tests/fixtures/predict/NAME (or under $CNNC_FIXTURES). */
static void fixture_path(char *buf, size_t size, const char *name)
{
    const char *dir = getenv("CNNC_FIXTURES");
    snprintf(buf, size, "%s/predict/%s", dir ? dir : "tests/fixtures", name);
}

/* The whole of a fixture file, malloc'd. */
static uint8_t *fixture_bytes(const char *name, size_t *len)
{
    char path[512];
    fixture_path(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: missing (generate with tools/gen_predict_fixtures.py)", path);
    uint8_t *bytes = malloc(1 << 16);
    assert_non_null(bytes);
    *len = fread(bytes, 1, 1 << 16, f);
    fclose(f);
    assert_true(*len > 0 && *len < 1 << 16);
    return bytes;
}

/* A PNG written by cairo from a surface of the given format, filled by fill(). */
static char *png_file(int width, int height, cairo_format_t format,
                      void (*fill)(uint32_t *px, int w, int h))
{
    cairo_surface_t *s = cairo_image_surface_create(format, width, height);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    cairo_surface_flush(s);
    int stride = cairo_image_surface_get_stride(s);
    uint32_t *px = calloc((size_t)width * height, sizeof *px);
    assert_non_null(px);
    fill(px, width, height);
    unsigned char *data = cairo_image_surface_get_data(s);
    for (int r = 0; r < height; r++)
        memcpy(data + (size_t)r * stride, px + (size_t)r * width, (size_t)width * 4);
    cairo_surface_mark_dirty(s);
    char *path = tu_write_temp("", 0, ".png");
    assert_int_equal(cairo_surface_write_to_png(s, path), CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
    free(px);
    return path;
}

static void fill_grey(uint32_t *px, int w, int h)
{
    uint8_t img[PIXELS];
    pattern(img);
    for (int i = 0; i < w * h; i++) px[i] = 0xff000000u | img[i % PIXELS] * 0x010101u;
}

/* Colour: R = 200, G = 100, B = 50 on the left half, pure blue on the right. */
static void fill_colour(uint32_t *px, int w, int h)
{
    for (int i = 0; i < w * h; i++) px[i] = i % w < w / 2 ? 0xffc86432u : 0xff0000ffu;
}

/* The object (pattern) opaque on the left half, fully transparent elsewhere. */
static void fill_alpha(uint32_t *px, int w, int h)
{
    uint8_t img[PIXELS];
    pattern(img);
    for (int i = 0; i < w * h; i++) px[i] = i % w < w / 2 ? 0xff000000u | img[i] * 0x010101u : 0;
}

static size_t put_chunk(uint8_t *at, const char *type, const uint8_t *data, size_t len)
{
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(len >> (24 - 8 * i));
    memcpy(at + 4, type, 4);
    if (len) memcpy(at + 8, data, len);
    uLong crc = crc32(crc32(0L, Z_NULL, 0), at + 4, (uInt)(len + 4));
    for (int i = 0; i < 4; i++) at[8 + len + i] = (uint8_t)(crc >> (24 - 8 * i));
    return len + 12;
}

/* A 28x28 PNG written by hand, with right CRCs: bit depth, colour type, palette (may be NULL)
 * and the IDAT chunk's contents as given. */
static char *png_chunks(int depth, int colour_type, const uint8_t *plte, size_t plte_len,
                        const uint8_t *idat, size_t idat_len)
{
    uint8_t *file = malloc(idat_len + plte_len + 100);
    assert_non_null(file);
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {0, 0, 0, SIDE, 0, 0, 0, SIDE, (uint8_t)depth, (uint8_t)colour_type, 0, 0, 0};
    size_t at = sizeof signature;
    memcpy(file, signature, at);
    at += put_chunk(file + at, "IHDR", ihdr, sizeof ihdr);
    if (plte) at += put_chunk(file + at, "PLTE", plte, plte_len);
    at += put_chunk(file + at, "IDAT", idat, idat_len);
    at += put_chunk(file + at, "IEND", NULL, 0);
    char *path = tu_write_temp(file, at, ".png");
    free(file);
    return path;
}

/* As png_chunks, with the scanlines (each led by its filter byte 0) compressed by zlib. */
static char *raw_png(int depth, int colour_type, const uint8_t *plte, size_t plte_len,
                     const uint8_t *raw, size_t raw_len)
{
    uLongf packed_len = compressBound((uLong)raw_len);
    uint8_t *packed = malloc(packed_len);
    assert_non_null(packed);
    assert_int_equal(compress(packed, &packed_len, raw, (uLong)raw_len), Z_OK);
    char *path = png_chunks(depth, colour_type, plte, plte_len, packed, packed_len);
    free(packed);
    return path;
}

static void test_png_16_bit_and_palette(void **state)
{
    (void)state;
    uint8_t img[PIXELS], want[PIXELS];
    uint8_t raw[SIDE * (1 + 2 * SIDE)];
    pattern(img);
    for (int r = 0; r < SIDE; r++) {
        uint8_t *line = raw + r * (1 + 2 * SIDE);
        line[0] = 0;
        for (int c = 0; c < SIDE; c++) /* v * 257, big-endian */
            line[1 + 2 * c] = line[2 + 2 * c] = img[r * SIDE + c];
    }
    expect_pixels(raw_png(16, 0, NULL, 0, raw, sizeof raw), img);

    static const uint8_t palette[] = {0, 0, 0, 255, 255, 255, 200, 100, 50, 0, 0, 255};
    static const uint8_t grey_of[] = {0, 255, 124, 29};
    for (int r = 0; r < SIDE; r++) {
        uint8_t *line = raw + r * (1 + SIDE);
        line[0] = 0;
        for (int c = 0; c < SIDE; c++) {
            line[1 + c] = (uint8_t)((r + c) % 4);
            want[r * SIDE + c] = grey_of[(r + c) % 4];
        }
    }
    expect_pixels(raw_png(8, 3, palette, sizeof palette, raw, SIDE * (1 + SIDE)), want);
}

/* ---------------------------------------------------------------- PGM */

static void test_pgm_binary_and_plain(void **state)
{
    (void)state;
    uint8_t img[PIXELS];
    pattern(img);
    expect_pixels(pgm_file("P5\n28 28\n255\n", img, PIXELS), img);
    expect_pixels(pgm_file("P5 # a comment\n# another\n28\t28 255\r", img, PIXELS), img);
    expect_pixels(plain_file("P2\n# plain\n28 28\n255\n", img, PIXELS, ""), img);
    expect_pixels(plain_file("P2 28 28 255 ", img, PIXELS, "\n\n  \n"), img);
}

static void test_pgm_scales_other_maxvals(void **state)
{
    (void)state;
    uint8_t img[PIXELS], raster[2 * PIXELS], want[PIXELS];
    pattern(img);
    for (int i = 0; i < PIXELS; i++) {
        raster[2 * i] = img[i]; /* v * 257, big-endian */
        raster[2 * i + 1] = img[i];
    }
    expect_pixels(pgm_file("P5 28 28 65535\n", raster, 2 * PIXELS), img);
    for (int i = 0; i < PIXELS; i++) {
        raster[i] = (uint8_t)(img[i] % 16);
        want[i] = (uint8_t)((raster[i] * 255 + 7) / 15);
    }
    expect_pixels(pgm_file("P5 28 28 15\n", raster, PIXELS), want);
    assert_int_equal(want[0], 0);
}

static void test_pgm_refusals(void **state)
{
    (void)state;
    uint8_t img[PIXELS + 8];
    pattern(img);
    expect_refused(pgm_file("P5 28 28 255\n", img, PIXELS - 1),
                   "PGM raster is 783 bytes, 1 short of 28 x 28 samples");
    expect_refused(pgm_file("P5 28 28 255\n", img, PIXELS + 3),
                   "3 bytes after the image's raster (one image per file)");
    expect_refused_exact(pgm_file("P5 27 28 255\n", img, 27 * 28),
                         "image is 27x28 pixels; the model takes 28x28 (images are not resized)");
    expect_refused(pgm_file("P5 100000 28 255\n", img, 0), "PGM header: width is over 65535");
    expect_refused(pgm_file("P5 28 28 0\n", img, PIXELS), "PGM header: maxval is 0");
    expect_refused(pgm_file("P5 28 28 65536\n", img, PIXELS), "maxval is over 65535");
    expect_refused(pgm_file("P5 28 28 100\n", img, PIXELS),
                   "PGM sample 3 (row 0, column 3) is 111, above maxval 100");
    expect_refused(pgm_file("P5\n# only a comment\n", img, 0), "PGM header ends before width");
    expect_refused(pgm_file("P5 28x28 255\n", img, 0),
                   "PGM header: width is followed by 'x', not by white space");
    expect_refused(pgm_file("P5 -28 28 255\n", img, 0), "PGM header: width is not a number");
    expect_refused(pgm_file("P528 28 255\n", img, 0), "not a PGM image (no P2 or P5 magic");
    expect_refused(pgm_file("P5 28 28 255", img, 0),
                   "PGM header: no white space between maxval and the raster");
    expect_refused(plain_file("P2 28 28 255\n", img, 700, ""),
                   "PGM raster ends before sample 700 of 784");
    expect_refused(plain_file("P2 28 28 255\n", img, 10, " x"),
                   "PGM raster: sample 10 of 784 is not a number");
    expect_refused(plain_file("P2 28 28 255\n", img, PIXELS, "7\n"),
                   "PGM: text after the last of 784 samples");
    expect_refused(plain_file("P2 28 28 200\n", img, PIXELS, ""), "above maxval 200");
    expect_refused(pgm_file("P6 28 28 255\n", img, 0),
                   "a Netpbm P6 file; only grey PGM (P2, P5), PNG and JPEG are read");
}

static void test_unknown_and_missing_files(void **state)
{
    (void)state;
    expect_refused(tu_write_temp("", 0, ".img"), "not a PNG, JPEG or PGM image");
    expect_refused(tu_write_temp("GIF89a......", 12, ".gif"), "not a PNG, JPEG or PGM image");
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    assert_int_equal(cn_image_read("/nonexistent/x.png", 1, SIDE, SIDE, got, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/x.png: cannot open"));
    assert_int_equal(cn_image_read("/tmp", 1, SIDE, SIDE, got, &err), -1);
    assert_non_null(strstr(err.msg, "/tmp: not a regular file"));
}

/* ---------------------------------------------------------------- PNG */

static void test_png_grey_colour_and_alpha(void **state)
{
    (void)state;
    uint8_t img[PIXELS], want[PIXELS];
    pattern(img);
    expect_pixels(png_file(SIDE, SIDE, CAIRO_FORMAT_RGB24, fill_grey), img);
    uint8_t orange = (uint8_t)((200 * 19595 + 100 * 38470 + 50 * 7471 + 0x8000) >> 16);
    uint8_t blue = (uint8_t)((255 * 7471 + 0x8000) >> 16);
    assert_int_equal(orange, 124);
    assert_int_equal(blue, 29);
    for (int i = 0; i < PIXELS; i++) want[i] = i % SIDE < SIDE / 2 ? orange : blue;
    expect_pixels(png_file(SIDE, SIDE, CAIRO_FORMAT_RGB24, fill_colour), want);
    for (int i = 0; i < PIXELS; i++) want[i] = i % SIDE < SIDE / 2 ? img[i] : 0;
    expect_pixels(png_file(SIDE, SIDE, CAIRO_FORMAT_ARGB32, fill_alpha), want);
}

/* The bytes of a good 28x28 grey PNG written by cairo. */
static size_t good_png(uint8_t *bytes, size_t size)
{
    char *good = png_file(SIDE, SIDE, CAIRO_FORMAT_RGB24, fill_grey);
    FILE *f = fopen(good, "rb");
    assert_non_null(f);
    size_t len = fread(bytes, 1, size, f);
    fclose(f);
    unlink(good);
    free(good);
    assert_true(len > 60 && len < size);
    return len;
}

static void test_png_refusals(void **state)
{
    (void)state;
    expect_refused_exact(png_file(30, 28, CAIRO_FORMAT_RGB24, fill_grey),
                         "image is 30x28 pixels; the model takes 28x28 (images are not resized)");
    /* a header that claims a huge image is refused before anything is decoded */
    static const uint8_t huge[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                   'I', 'H', 'D', 'R', 0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0,
                                   8, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_refused(tu_write_temp(huge, sizeof huge, ".png"),
                   "image is 100000x100000 pixels, more than cnnc reads (at most 32767 on a side");
    expect_refused(tu_write_temp(huge, 12, ".png"), "not a valid PNG: no IHDR chunk");

    uint8_t bytes[4096];
    size_t len = good_png(bytes, sizeof bytes);
    /* cairo writes IHDR at byte 8, bKGD at 33, IDAT at 51, then IEND */
    assert_memory_equal(bytes + 55, "IDAT", 4);
    expect_refused(tu_write_temp(bytes, len - 20, ".png"), "truncated PNG: chunk IDAT at byte 51");
    expect_refused(tu_write_temp(bytes, 40, ".png"), "truncated PNG: the file ends at byte 40");
    expect_refused(tu_write_temp(bytes, 45, ".png"), "truncated PNG: chunk bKGD at byte 33");
    expect_refused(tu_write_temp(bytes, len - 12, ".png"), "truncated PNG: the file ends at byte");
    bytes[60] ^= 0x40; /* inside IDAT */
    expect_refused(tu_write_temp(bytes, len, ".png"), "chunk IDAT at byte 51 has a wrong CRC");
}

/* Damaged PNG files whose chunks are whole (right CRCs) are not reported as out of memory. */
static void test_png_damaged_inside(void **state)
{
    (void)state;
    static const uint8_t garbage[] = "this is not a zlib stream at all, just text";
    char *path = png_chunks(8, 0, NULL, 0, garbage, sizeof garbage);
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    assert_int_equal(cn_image_read(path, 1, SIDE, SIDE, got, &err), -1);
    assert_null(strstr(err.msg, "memory"));
    expect_refused(path, "not a valid PNG: its image data does not decode");
    uint8_t raw[SIDE * (1 + SIDE)] = {0};
    expect_refused(raw_png(8, 0, NULL, 0, raw, sizeof raw - 100),
                   "not a valid PNG: its image data does not decode");
    expect_refused(raw_png(3, 0, NULL, 0, raw, sizeof raw),
                   "not a valid PNG: bit depth 3 with colour type 0");
    expect_refused(raw_png(8, 5, NULL, 0, raw, sizeof raw),
                   "not a valid PNG: bit depth 8 with colour type 5");
}

/* ---------------------------------------------------------------- JPEG */

/* A JPEG (quality 95) made by libjpeg from width x height pixels of components bytes each in
 * colour space space (JCS_GRAYSCALE, JCS_RGB, JCS_CMYK or JCS_YCCK). */
static char *jpeg_file(const uint8_t *pixels, int width, int height, int components,
                       J_COLOR_SPACE space, int progressive)
{
    unsigned long len = 0;
    unsigned char *out =
        tu_jpeg_bytes(pixels, width, height, components, space, 95, progressive, &len);
    char *path = tu_write_temp(out, len, ".jpg");
    free(out);
    return path;
}

/* Every pixel of path, read at 28x28, within 2 of want (JPEG is lossy). */
static void expect_near(char *path, int want)
{
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    if (cn_image_read_resized(path, 1, SIDE, SIDE, got, NULL, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    for (int i = 0; i < PIXELS; i++)
        if (abs(got[i] - want) > 2) fail_msg("%s: pixel %d is %d, not %d", path, i, got[i], want);
    unlink(path);
    free(path);
}

/* PIL's reading of fixture name (pil/NAME.pgm) against cnnc's, exactly, and the file's size. */
static void expect_as_pil(const char *name, int rows, int cols)
{
    char path[512], pil_name[256], pil_path[512];
    fixture_path(path, sizeof path, name);
    snprintf(pil_name, sizeof pil_name, "pil/%s.pgm", name);
    fixture_path(pil_path, sizeof pil_path, pil_name);
    cn_error err = {{0}};
    uint8_t got[PIXELS], want[PIXELS];
    int file_rows = 0, file_cols = 0;
    if (cn_image_read(pil_path, 1, SIDE, SIDE, want, &err) != 0 ||
        cn_image_read_resized(path, 1, SIDE, SIDE, got, &file_rows, &file_cols, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(file_rows, rows);
    assert_int_equal(file_cols, cols);
    for (int i = 0; i < PIXELS; i++)
        if (got[i] != want[i])
            fail_msg("%s: pixel %d (row %d) is %d, PIL reads %d", name, i, i / SIDE, got[i],
                     want[i]);
}

static void test_jpeg_grey_and_colour(void **state)
{
    (void)state;
    expect_as_pil("t10k-8.jpg", SIDE, SIDE);        /* grey, baseline */
    expect_as_pil("t10k-9-colour.jpg", SIDE, SIDE); /* YCbCr 4:2:0 */
    expect_as_pil("t10k-12-photo.jpg", 80, 100);    /* progressive colour, scaled */
    uint8_t grey[40 * 30], orange[30 * 30 * 3];
    memset(grey, 173, sizeof grey);
    for (int i = 0; i < 30 * 30; i++) {
        orange[3 * i] = 200;
        orange[3 * i + 1] = 100;
        orange[3 * i + 2] = 50;
    }
    expect_near(jpeg_file(grey, 40, 30, 1, JCS_GRAYSCALE, 0), 173);
    expect_near(jpeg_file(grey, 40, 30, 1, JCS_GRAYSCALE, 1), 173);
    expect_near(jpeg_file(orange, 30, 30, 3, JCS_RGB, 0), 124); /* luma, as for PNG */
    char *same = jpeg_file(grey, SIDE, SIDE, 1, JCS_GRAYSCALE, 0);
    uint8_t got[PIXELS];
    cn_error err = {{0}};
    assert_int_equal(cn_image_read(same, 1, SIDE, SIDE, got, &err), 0);
    unlink(same);
    free(same);
}

/* A copy of fixture t10k-8.jpg (28x28 baseline) with its frame header saying rows x cols. */
static char *jpeg_claiming(int rows, int cols)
{
    size_t len;
    uint8_t *bytes = fixture_bytes("t10k-8.jpg", &len);
    size_t sof = 2;
    while (sof + 9 < len && !(bytes[sof] == 0xff && bytes[sof + 1] == 0xc0)) sof++;
    assert_true(sof + 9 < len);
    bytes[sof + 5] = (uint8_t)(rows >> 8);
    bytes[sof + 6] = (uint8_t)rows;
    bytes[sof + 7] = (uint8_t)(cols >> 8);
    bytes[sof + 8] = (uint8_t)cols;
    char *path = tu_write_temp(bytes, len, ".jpg");
    free(bytes);
    return path;
}

static void test_jpeg_refusals(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes = fixture_bytes("t10k-8.jpg", &len);
    expect_refused(tu_write_temp(bytes, len / 2, ".jpg"),
                   "truncated JPEG: the file ends before its image data");
    expect_refused(tu_write_temp(bytes, 30, ".jpg"), "truncated JPEG");
    expect_refused(tu_write_temp(bytes, len - 2, ".jpg"), "truncated JPEG"); /* no EOI */
    static const uint8_t no_scan[] = {0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0, 28, 0, 28, 1,
                                      1, 0x11, 0, 0xff, 0xd9}; /* a frame, then the end */
    expect_refused(tu_write_temp(no_scan, sizeof no_scan, ".jpg"),
                   "not a valid JPEG: Invalid JPEG file structure: missing SOS marker");
    for (size_t i = len / 2; i < len - 2; i++) bytes[i] = (uint8_t)(i * 151); /* scan data */
    expect_refused(tu_write_temp(bytes, len, ".jpg"), "not a valid JPEG: Corrupt JPEG data");
    free(bytes);
    /* sizes come from the header, before anything is decoded */
    expect_refused(jpeg_claiming(40000, 28),
                   "image is 28x40000 pixels, more than cnnc reads (at most 32767 on a side");
    expect_refused(jpeg_claiming(8192, 8192), "and 33554432 in all)");
    expect_refused_exact(jpeg_claiming(28, 30), "image is 30x28 pixels; the model takes 28x28");
}

/* Every pixel of path, read at 28x28 in colour, within 2 of rgb, and in grey within 2 of grey. */
static void expect_near_rgb(char *path, const uint8_t rgb[3], int grey)
{
    cn_error err = {{0}};
    uint8_t got[3 * PIXELS];
    if (cn_image_read(path, 3, SIDE, SIDE, got, &err) != 0) fail_msg("%s", err.msg);
    for (int i = 0; i < 3 * PIXELS; i++)
        if (abs(got[i] - rgb[i / PIXELS]) > 2)
            fail_msg("%s: plane %d, pixel %d is %d, not %d", path, i / PIXELS, i % PIXELS, got[i],
                     rgb[i / PIXELS]);
    expect_near(path, grey);
}

/* CMYK and YCCK files (Photoshop's print images) are made RGB as PIL does: the values inverted
 * (Adobe's polarity), then (255 - K)(1 - C / 255): file values (200, 100, 50, 128) are RGB
 * (100, 50, 25), whose luma is 62. PIL's own pixels for a random CMYK file are compared in
 * tests/cli_predict.sh. */
static void test_jpeg_cmyk_and_ycck(void **state)
{
    (void)state;
    uint8_t cmyk[SIDE * SIDE * 4];
    for (int i = 0; i < SIDE * SIDE; i++)
        cmyk[4 * i] = 200, cmyk[4 * i + 1] = 100, cmyk[4 * i + 2] = 50, cmyk[4 * i + 3] = 128;
    static const uint8_t rgb[3] = {100, 50, 25};
    expect_near_rgb(jpeg_file(cmyk, SIDE, SIDE, 4, JCS_CMYK, 0), rgb, 62);
    expect_near_rgb(jpeg_file(cmyk, SIDE, SIDE, 4, JCS_CMYK, 1), rgb, 62);
    expect_near_rgb(jpeg_file(cmyk, SIDE, SIDE, 4, JCS_YCCK, 0), rgb, 62);
}

/* ---------------------------------------------------------------- resizing */

static void expect_resized(const uint8_t *src, int src_rows, int src_cols, int rows, int cols,
                           const uint8_t *want)
{
    cn_error err = {{0}};
    uint8_t got[64];
    assert_true(rows * cols <= 64);
    if (cn_image_resize(src, 1, src_rows, src_cols, got, rows, cols, &err) != 0)
        fail_msg("%s", err.msg);
    for (int i = 0; i < rows * cols; i++)
        if (got[i] != want[i])
            fail_msg("%dx%d -> %dx%d: pixel %d is %d, not %d", src_cols, src_rows, cols, rows, i,
                     got[i], want[i]);
}

/* Values worked out by hand from the filters' definitions. */
static void test_resize_by_hand(void **state)
{
    (void)state;
    /* bilinear: output centres at 0.25, 0.75, 1.25, 1.75 source pixels; edges repeated */
    expect_resized((const uint8_t[]){0, 100}, 1, 2, 1, 4, (const uint8_t[]){0, 25, 75, 100});
    expect_resized((const uint8_t[]){0, 100}, 2, 1, 4, 1, (const uint8_t[]){0, 25, 75, 100});
    /* both sides: the width first (each row), then the height */
    expect_resized((const uint8_t[]){0, 100, 100, 200}, 2, 2, 4, 4,
                   (const uint8_t[]){0, 25, 75, 100, 25, 50, 100, 125,
                                     75, 100, 150, 175, 100, 125, 175, 200});
    /* area averaging: the mean of each pair; halves round up */
    expect_resized((const uint8_t[]){0, 70, 140, 210}, 1, 4, 1, 2, (const uint8_t[]){35, 175});
    expect_resized((const uint8_t[]){0, 1}, 1, 2, 1, 1, (const uint8_t[]){1});
    expect_resized((const uint8_t[]){10, 20, 30, 40, 50, 60}, 2, 3, 1, 1,
                   (const uint8_t[]){35});
    /* 3 -> 2: the middle pixel's centre lies on the boundary and counts for the first only */
    expect_resized((const uint8_t[]){10, 20, 40}, 1, 3, 1, 2, (const uint8_t[]){15, 40});
    /* growing one side and shrinking the other */
    expect_resized((const uint8_t[]){0, 100, 40, 60}, 2, 2, 1, 4,
                   (const uint8_t[]){20, 35, 65, 80});
    /* the same size: a copy */
    expect_resized((const uint8_t[]){1, 2, 3, 4, 5, 6}, 2, 3, 2, 3,
                   (const uint8_t[]){1, 2, 3, 4, 5, 6});
    cn_error err = {{0}};
    uint8_t out[4];
    assert_int_equal(cn_image_resize(out, 1, 0, 3, out, 2, 2, &err), -1);
    assert_non_null(strstr(err.msg, "cannot scale 3x0 pixels to 2x2"));
    assert_int_equal(cn_image_resize(out, 1, 2, 2, out, 40000, 1, &err), -1);
}

/* A constant image stays that constant at any size, either way. */
static void test_resize_keeps_constants(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1, 1}, {5, 3}, {27, 28}, {28, 29}, {56, 56}, {80, 100},
                                   {1000, 7}};
    static uint8_t src[1000 * 100], dst[PIXELS];
    cn_error err = {{0}};
    for (int v = 0; v < 256; v += 51)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            memset(src, v, sizeof src);
            if (cn_image_resize(src, 1, sizes[k][0], sizes[k][1], dst, SIDE, SIDE, &err))
                fail_msg("%s", err.msg);
            for (int i = 0; i < PIXELS; i++)
                if (dst[i] != v)
                    fail_msg("%dx%d of %d: pixel %d is %d", sizes[k][1], sizes[k][0], v, i,
                             dst[i]);
        }
}

/* Files of other sizes read exactly as PIL resizes them (fixtures written by PIL). */
static void test_resized_files_as_pil(void **state)
{
    (void)state;
    expect_as_pil("t10k-10-56x56.png", 56, 56);  /* shrunk by 2: area average */
    expect_as_pil("t10k-11-20x40.pgm", 40, 20);  /* wider (bilinear), lower (area, 40 -> 28) */
    expect_as_pil("wrong-size.pgm", 28, 27);
    expect_as_pil("wrong-size.png", 32, 32);
    expect_as_pil("t10k-8.jpg", SIDE, SIDE);
}

/* ---------------------------------------------------------------- colour */

/* path read as 3 channels at its own size (height x width, at most 100 x 100): the planes. */
static void read_colour(const char *path, int height, int width, uint8_t *rgb)
{
    cn_error err = {{0}};
    int h = 0, w = 0;
    if (cn_image_read_resized(path, 3, height, width, rgb, &h, &w, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(h, height);
    assert_int_equal(w, width);
}

/* Read as grey, fixture name is the luma of its colour reading, pixel for pixel; colour
 * reports whether the file has colour (else its three planes must be equal). */
static void expect_luma_of_colour(const char *name, int height, int width, int colour)
{
    char path[512];
    fixture_path(path, sizeof path, name);
    static uint8_t rgb[3 * 100 * 100], grey[100 * 100];
    size_t plane = (size_t)height * width;
    cn_error err = {{0}};
    read_colour(path, height, width, rgb);
    if (cn_image_read(path, 1, height, width, grey, &err) != 0) fail_msg("%s", err.msg);
    int differ = 0;
    for (size_t i = 0; i < plane; i++) {
        uint8_t r = rgb[i], g = rgb[plane + i], b = rgb[2 * plane + i];
        if (grey[i] != (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16))
            fail_msg("%s: pixel %zu: grey %d is not the luma of (%d, %d, %d)", name, i, grey[i],
                     r, g, b);
        differ |= r != g || g != b;
    }
    assert_int_equal(differ, colour);
}

static void test_colour_planes(void **state)
{
    (void)state;
    /* planar [3, 28, 28]: orange (200, 100, 50) on the left half, blue on the right */
    char *path = png_file(SIDE, SIDE, CAIRO_FORMAT_RGB24, fill_colour);
    uint8_t rgb[3 * PIXELS];
    cn_error err = {{0}};
    if (cn_image_read(path, 3, SIDE, SIDE, rgb, &err) != 0) fail_msg("%s", err.msg);
    for (int i = 0; i < PIXELS; i++) {
        int left = i % SIDE < SIDE / 2;
        assert_int_equal(rgb[i], left ? 200 : 0);
        assert_int_equal(rgb[PIXELS + i], left ? 100 : 0);
        assert_int_equal(rgb[2 * PIXELS + i], left ? 50 : 255);
    }
    unlink(path);
    free(path);
    /* grey files repeat their grey in each plane */
    uint8_t img[PIXELS];
    pattern(img);
    path = pgm_file("P5 28 28 255\n", img, PIXELS);
    if (cn_image_read(path, 3, SIDE, SIDE, rgb, &err) != 0) fail_msg("%s", err.msg);
    for (int ch = 0; ch < 3; ch++) assert_memory_equal(rgb + ch * PIXELS, img, PIXELS);
    unlink(path);
    free(path);
    /* colour asks for neither 1 nor 3 channels */
    assert_int_equal(cn_image_read("x.png", 2, SIDE, SIDE, rgb, &err), -1);
    assert_non_null(strstr(err.msg, "x.png: cannot read an image as 2 channels"));
}

static void test_colour_files_luma(void **state)
{
    (void)state;
    expect_luma_of_colour("t10k-4-rgb.png", SIDE, SIDE, 1);
    expect_luma_of_colour("t10k-6-grey-alpha.png", SIDE, SIDE, 0);
    expect_luma_of_colour("t10k-8.jpg", SIDE, SIDE, 0);
    expect_luma_of_colour("t10k-9-colour.jpg", SIDE, SIDE, 1);
    expect_luma_of_colour("t10k-12-photo.jpg", 80, 100, 1);
}

/* Scaling colour scales each plane as grey scaling does. */
static void test_resize_colour_by_plane(void **state)
{
    (void)state;
    enum { H = 13, W = 17 };
    uint8_t src[3 * H * W], got[3 * 40 * 9], want[40 * 9];
    for (int i = 0; i < 3 * H * W; i++) src[i] = (uint8_t)(i * 97 % 251);
    cn_error err = {{0}};
    assert_int_equal(cn_image_resize(src, 3, H, W, got, 40, 9, &err), 0);
    for (int ch = 0; ch < 3; ch++) {
        assert_int_equal(cn_image_resize(src + ch * H * W, 1, H, W, want, 40, 9, &err), 0);
        assert_memory_equal(got + ch * 40 * 9, want, sizeof want);
    }
    assert_int_equal(cn_image_resize(src, 2, H, W, got, 40, 9, &err), -1);
    assert_non_null(strstr(err.msg, "2 channels"));
}

/* ---------------------------------------------------------------- light background */

static void test_light_background_by_hand(void **state)
{
    (void)state;
    uint8_t img[PIXELS];
    memset(img, 0, sizeof img);
    assert_int_equal(cn_image_light_background(img, SIDE, SIDE), 0);
    for (int r = 4; r < 24; r++) memset(img + r * SIDE + 4, 255, 20); /* a light object */
    assert_int_equal(cn_image_light_background(img, SIDE, SIDE), 0);
    memset(img, 128, sizeof img); /* the border's mean is exactly 128 */
    for (int r = 4; r < 24; r++) memset(img + r * SIDE + 4, 0, 20);
    assert_int_equal(cn_image_light_background(img, SIDE, SIDE), 1);
    img[0] = 127; /* now just below */
    assert_int_equal(cn_image_light_background(img, SIDE, SIDE), 0);
    img[SIDE + 1] = 255; /* not on the border: no change */
    assert_int_equal(cn_image_light_background(img, SIDE, SIDE), 0);
    img[SIDE] = 129; /* on the border (first column) */
    assert_int_equal(cn_image_light_background(img, SIDE, SIDE), 1);
    assert_int_equal(cn_image_light_background((const uint8_t[]){200}, 1, 1), 1);
    assert_int_equal(cn_image_light_background((const uint8_t[]){200, 0, 0}, 3, 1), 0);
}

/* What the header says: none of Fashion-MNIST's test images has a light background, and all of
 * them inverted have. */
static void test_light_background_on_fashion_mnist(void **state)
{
    (void)state;
    cn_dataset ds = {0};
    cn_error err = {{0}};
    if (access(DATA_DIR, F_OK) != 0) skip();
    if (cn_dataset_load(&ds, DATA_DIR, "t10k", &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.count, 10000);
    int light = 0, light_inverted = 0;
    uint8_t inverted[PIXELS];
    for (int n = 0; n < ds.count; n++) {
        const uint8_t *img = ds.pixels + (size_t)n * PIXELS;
        for (int i = 0; i < PIXELS; i++) inverted[i] = (uint8_t)(255 - img[i]);
        light += cn_image_light_background(img, SIDE, SIDE);
        light_inverted += cn_image_light_background(inverted, SIDE, SIDE);
    }
    assert_int_equal(light, 0);
    assert_int_equal(light_inverted, 10000);
    cn_dataset_free(&ds);
}

/* ---------------------------------------------------------------- predict */

static void test_predict_agrees_with_evaluate(void **state)
{
    (void)state;
    enum { N = 150 };
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_model_init(m, 9);
    cn_dataset ds = {.count = N, .channels = 1, .height = SIDE, .width = SIDE, .classes = 10,
                     .pixels = malloc(N * PIXELS),
                     .labels = malloc(N)};
    assert_non_null(ds.pixels);
    cn_rng rng;
    cn_rng_seed(&rng, 5);
    for (int i = 0; i < N * PIXELS; i++) ds.pixels[i] = (uint8_t)cn_rng_below(&rng, 256);
    for (int i = 0; i < N; i++) ds.labels[i] = (uint8_t)(i % 10);
    cn_train_config cfg = {.batch_size = 32, .num_replicas = 2, .threads = 2,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 9};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    assert_non_null(t);
    float loss;
    assert_int_equal(cn_trainer_epoch(t, &ds, 1, NULL, NULL, &loss, NULL, &err), 0);
    uint8_t predictions[N];
    double eval_loss, accuracy;
    assert_int_equal(cn_evaluate(t, &ds, N, &eval_loss, &accuracy, predictions, &err), 0);

    static float logp[N * CN_FASHION_MNIST_CLASSES], one[CN_FASHION_MNIST_CLASSES];
    assert_int_equal(cn_model_predict(m, ds.pixels, N, logp, &err), 0);
    double nll = 0;
    for (int i = 0; i < N; i++) {
        const float *row = logp + i * CN_FASHION_MNIST_CLASSES;
        int best = 0;
        double total = 0;
        for (int c = 0; c < CN_FASHION_MNIST_CLASSES; c++) {
            total += exp((double)row[c]);
            if (row[c] > row[best]) best = c;
        }
        assert_true(fabs(total - 1) < 1e-5);
        assert_int_equal(best, predictions[i]);
        nll -= row[ds.labels[i]];
    }
    assert_true(fabs(nll / N - eval_loss) < 1e-5);
    assert_int_equal(cn_model_predict(m, ds.pixels + 77 * PIXELS, 1, one, &err), 0);
    assert_true(tu_max_violation(one, logp + 77 * CN_FASHION_MNIST_CLASSES, CN_FASHION_MNIST_CLASSES, 1e-6, 1e-5) <=
                1);
    assert_int_equal(cn_model_predict(m, ds.pixels, 0, logp, &err), -1);
    assert_non_null(strstr(err.msg, "nothing to predict"));
    cn_trainer_free(t);
    cn_model_free(m);
    cn_dataset_free(&ds);
}

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pgm_binary_and_plain),
        cmocka_unit_test(test_pgm_scales_other_maxvals),
        cmocka_unit_test(test_pgm_refusals),
        cmocka_unit_test(test_unknown_and_missing_files),
        cmocka_unit_test(test_png_grey_colour_and_alpha),
        cmocka_unit_test(test_png_16_bit_and_palette),
        cmocka_unit_test(test_png_refusals),
        cmocka_unit_test(test_png_damaged_inside),
        cmocka_unit_test(test_jpeg_grey_and_colour),
        cmocka_unit_test(test_jpeg_refusals),
        cmocka_unit_test(test_jpeg_cmyk_and_ycck),
        cmocka_unit_test(test_resize_by_hand),
        cmocka_unit_test(test_resize_keeps_constants),
        cmocka_unit_test(test_resized_files_as_pil),
        cmocka_unit_test(test_colour_planes),
        cmocka_unit_test(test_colour_files_luma),
        cmocka_unit_test(test_resize_colour_by_plane),
        cmocka_unit_test(test_light_background_by_hand),
        cmocka_unit_test(test_light_background_on_fashion_mnist),
        cmocka_unit_test(test_predict_agrees_with_evaluate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
