/* test_predict.c — reading images for prediction (PGM P2/P5 and PNG in grey, colour and with
 * transparency; one refusal per kind of bad file, each with its message) and cn_model_predict
 * against cn_evaluate. The command line (`cnnc predict` on PyTorch's fixtures) is tested in
 * tests/cli_predict.sh. */
#include "testutil.h"

#include <cairo.h>
#include <zlib.h>

#define SIDE 28
#define PIXELS (SIDE * SIDE)

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
    if (cn_image_read_grey(path, SIDE, SIDE, got, &err) != 0) fail_msg("%s", err.msg);
    assert_memory_equal(got, want, PIXELS);
    unlink(path);
    free(path);
}

static void expect_refused(char *path, const char *what)
{
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    int rc = cn_image_read_grey(path, SIDE, SIDE, got, &err);
    int as_expected = rc == -1 && strstr(err.msg, what) && strstr(err.msg, path);
    unlink(path);
    if (!as_expected) fail_msg("%s: expected \"%s\", got \"%s\"", path, what, err.msg);
    free(path);
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

/* A 28x28 PNG written by hand: bit depth, colour type, palette (may be NULL) and the scanlines
 * (each led by its filter byte 0). */
static char *raw_png(int depth, int colour_type, const uint8_t *plte, size_t plte_len,
                     const uint8_t *raw, size_t raw_len)
{
    uLongf packed_len = compressBound((uLong)raw_len);
    uint8_t *packed = malloc(packed_len), *file = malloc(packed_len + plte_len + 100);
    assert_non_null(packed);
    assert_non_null(file);
    assert_int_equal(compress(packed, &packed_len, raw, (uLong)raw_len), Z_OK);
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {0, 0, 0, SIDE, 0, 0, 0, SIDE, (uint8_t)depth, (uint8_t)colour_type, 0, 0, 0};
    size_t at = sizeof signature;
    memcpy(file, signature, at);
    at += put_chunk(file + at, "IHDR", ihdr, sizeof ihdr);
    if (plte) at += put_chunk(file + at, "PLTE", plte, plte_len);
    at += put_chunk(file + at, "IDAT", packed, packed_len);
    at += put_chunk(file + at, "IEND", NULL, 0);
    char *path = tu_write_temp(file, at, ".png");
    free(packed);
    free(file);
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
    expect_refused(pgm_file("P5 27 28 255\n", img, 27 * 28),
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
                   "a Netpbm P6 file; only grey PGM (P2, P5) and PNG are read");
}

static void test_unknown_and_missing_files(void **state)
{
    (void)state;
    expect_refused(tu_write_temp("", 0, ".img"), "not a PNG or PGM image");
    expect_refused(tu_write_temp("GIF89a......", 12, ".gif"), "not a PNG or PGM image");
    cn_error err = {{0}};
    uint8_t got[PIXELS];
    assert_int_equal(cn_image_read_grey("/nonexistent/x.png", SIDE, SIDE, got, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/x.png: cannot open"));
    assert_int_equal(cn_image_read_grey("/tmp", SIDE, SIDE, got, &err), -1);
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

static void test_png_refusals(void **state)
{
    (void)state;
    expect_refused(png_file(30, 28, CAIRO_FORMAT_RGB24, fill_grey),
                   "image is 30x28 pixels; the model takes 28x28 (images are not resized)");
    /* a header that claims a huge image is refused before anything is decoded */
    static const uint8_t huge[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                   'I', 'H', 'D', 'R', 0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0,
                                   8, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_refused(tu_write_temp(huge, sizeof huge, ".png"), "image is 100000x100000 pixels");
    expect_refused(tu_write_temp(huge, 12, ".png"), "damaged PNG: no IHDR chunk");

    char *good = png_file(SIDE, SIDE, CAIRO_FORMAT_RGB24, fill_grey);
    FILE *f = fopen(good, "rb");
    assert_non_null(f);
    uint8_t bytes[4096];
    size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    unlink(good);
    free(good);
    assert_true(len > 60 && len < sizeof bytes);
    expect_refused(tu_write_temp(bytes, len - 20, ".png"), "cannot decode the PNG");
    expect_refused(tu_write_temp(bytes, 40, ".png"), "cannot decode the PNG");
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
    cn_dataset ds = {N, SIDE, SIDE, malloc(N * PIXELS), malloc(N)};
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

    static float logp[N * CN_NUM_CLASSES], one[CN_NUM_CLASSES];
    assert_int_equal(cn_model_predict(m, ds.pixels, N, logp, &err), 0);
    double nll = 0;
    for (int i = 0; i < N; i++) {
        const float *row = logp + i * CN_NUM_CLASSES;
        int best = 0;
        double total = 0;
        for (int c = 0; c < CN_NUM_CLASSES; c++) {
            total += exp((double)row[c]);
            if (row[c] > row[best]) best = c;
        }
        assert_true(fabs(total - 1) < 1e-5);
        assert_int_equal(best, predictions[i]);
        nll -= row[ds.labels[i]];
    }
    assert_true(fabs(nll / N - eval_loss) < 1e-5);
    assert_int_equal(cn_model_predict(m, ds.pixels + 77 * PIXELS, 1, one, &err), 0);
    assert_true(tu_max_violation(one, logp + 77 * CN_NUM_CLASSES, CN_NUM_CLASSES, 1e-6, 1e-5) <=
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
        cmocka_unit_test(test_predict_agrees_with_evaluate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
