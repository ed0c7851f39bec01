/* test_picture.c — cn_result_picture: draws 5 x 5 grids of synthetic images, reads the PNG back
 * with cairo and checks its size, opacity and caption colours; refuses bad arguments and leaves
 * no file behind when it cannot write. It does not compare pixels with a reference picture
 * (glyphs may differ between FreeType versions); tests/cli_fonts.sh checks that the picture does
 * not depend on fontconfig. */
#include "testutil.h"

#include <sys/stat.h>

#include <cairo.h>

#define SIDE 28
#define GRID 5
#define COUNT (GRID * GRID)

static tu_place place_make(void)
{
    return tu_place_make("picture", "result.png");
}

/* Image i: a horizontal or vertical gradient, a filled square or a ring, varying with i. */
static void synth_images(uint8_t *images)
{
    for (int i = 0; i < COUNT; i++) {
        uint8_t *img = images + (size_t)i * SIDE * SIDE;
        for (int y = 0; y < SIDE; y++)
            for (int x = 0; x < SIDE; x++) {
                int dx = x - 14, dy = y - 14, r2 = dx * dx + dy * dy, v;
                switch (i % 4) {
                case 0: v = x * 255 / (SIDE - 1); break;
                case 1: v = y * 255 / (SIDE - 1); break;
                case 2: v = (abs(dx) < 4 + i / 4 && abs(dy) < 4 + i / 4) ? 255 : 0; break;
                default: v = (r2 > 36 && r2 < 121) ? 200 : 0; break;
                }
                img[y * SIDE + x] = (uint8_t)v;
            }
    }
}

/* Pixel counts of the picture read back from a PNG. */
typedef struct {
    int width, height;
    uint32_t corner;   /* top-left pixel, 0xRRGGBB */
    long blue, red;    /* pixels near pure blue / pure red */
} png_stats;

static png_stats read_png(const char *path)
{
    cairo_surface_t *s = tu_png_read(path);
    png_stats st = {cairo_image_surface_get_width(s), cairo_image_surface_get_height(s),
                    tu_pixel(s, 0, 0), 0, 0};
    for (int y = 0; y < st.height; y++)
        for (int x = 0; x < st.width; x++) {
            uint32_t px = tu_pixel(s, x, y);
            int r = (px >> 16) & 255, g = (px >> 8) & 255, b = px & 255;
            if (b >= 150 && r <= 60 && g <= 60) st.blue++;
            if (r >= 150 && g <= 60 && b <= 60) st.red++;
        }
    cairo_surface_destroy(s);
    return st;
}

/* Writes a 5 x 5 picture with the given predictions and returns what it looks like. */
static png_stats draw_and_read(const tu_place *p, const uint8_t *labels, const uint8_t *preds)
{
    static uint8_t images[COUNT * SIDE * SIDE];
    synth_images(images);
    cn_error err = {{0}};
    int rc = cn_result_picture(p->file, images, labels, preds, COUNT, GRID, GRID,
                               "Predicted labels \xE2\x80\x94 test", &err);
    if (rc != 0) fail_msg("%s", err.msg);
    assert_int_equal(tu_count_entries(p->dir), 1); /* the PNG, no temporary left over */
    return read_png(p->file);
}

static void assert_plausible_size(const png_stats *st)
{
    /* Each cell holds a 112 px image and a caption about 243 px wide; a title band on top. */
    assert_in_range(st->width, GRID * 250, GRID * 400);
    assert_in_range(st->height, GRID * (112 + 14) + 20, GRID * 300);
}

static void test_mixed_predictions(void **state)
{
    (void)state;
    uint8_t labels[COUNT], preds[COUNT];
    for (int i = 0; i < COUNT; i++) {
        labels[i] = (uint8_t)(i % CN_FASHION_MNIST_CLASSES);
        preds[i] = (i % 4 == 1) ? (uint8_t)((i + 3) % CN_FASHION_MNIST_CLASSES) : labels[i];
    }
    labels[0] = 0, preds[0] = 9; /* the longest caption: T-shirt/top vs Ankle boot */
    tu_place p = place_make();
    png_stats st = draw_and_read(&p, labels, preds);
    assert_plausible_size(&st);
    assert_int_equal(st.corner, 0xFFFFFF);
    assert_true(st.blue > 200);
    assert_true(st.red > 200);
    tu_place_remove(&p);
}

static void test_all_right_has_no_red(void **state)
{
    (void)state;
    uint8_t labels[COUNT];
    for (int i = 0; i < COUNT; i++) labels[i] = (uint8_t)((i * 7) % CN_FASHION_MNIST_CLASSES);
    tu_place p = place_make();
    png_stats st = draw_and_read(&p, labels, labels);
    assert_plausible_size(&st);
    assert_true(st.blue > 200);
    assert_int_equal(st.red, 0);
    tu_place_remove(&p);
}

static void test_all_wrong_has_no_blue(void **state)
{
    (void)state;
    uint8_t labels[COUNT], preds[COUNT];
    for (int i = 0; i < COUNT; i++) {
        labels[i] = (uint8_t)(i % CN_FASHION_MNIST_CLASSES);
        preds[i] = (uint8_t)((i + 1) % CN_FASHION_MNIST_CLASSES);
    }
    tu_place p = place_make();
    png_stats st = draw_and_read(&p, labels, preds);
    assert_true(st.red > 200);
    assert_int_equal(st.blue, 0);
    tu_place_remove(&p);
}

static void test_replaces_existing_file(void **state)
{
    (void)state;
    uint8_t labels[COUNT] = {0};
    tu_place p = place_make();
    FILE *f = fopen(p.file, "wb");
    assert_non_null(f);
    assert_int_equal(fputs("not a png", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    png_stats st = draw_and_read(&p, labels, labels);
    assert_plausible_size(&st);
    tu_place_remove(&p);
}

static void test_missing_folder_fails_cleanly(void **state)
{
    (void)state;
    static uint8_t images[COUNT * SIDE * SIDE];
    uint8_t labels[COUNT] = {0};
    char dir[64], png[96];
    snprintf(dir, sizeof dir, "/tmp/cnnc-no-such-dir-%d", (int)getpid());
    snprintf(png, sizeof png, "%s/result.png", dir);
    cn_error err = {{0}};
    assert_int_equal(cn_result_picture(png, images, labels, labels, COUNT, GRID, GRID, "t", &err),
                     -1);
    assert_non_null(strstr(err.msg, png));
    assert_non_null(strstr(err.msg, "cannot write picture"));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    struct stat sb;
    assert_int_equal(stat(dir, &sb), -1);
}

/* Calls cn_result_picture with one bad argument; it must fail with a message containing want
 * and write nothing. */
static void expect_refusal(const uint8_t *labels, const uint8_t *preds, int n, int rows,
                           int cols, const char *want)
{
    static uint8_t images[COUNT * SIDE * SIDE];
    tu_place p = place_make();
    cn_error err = {{0}};
    assert_int_equal(cn_result_picture(p.file, images, labels, preds, n, rows, cols, "t", &err),
                     -1);
    if (!strstr(err.msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    assert_int_equal(tu_count_entries(p.dir), 0);
    tu_place_remove(&p);
}

static void test_bad_arguments_refused(void **state)
{
    (void)state;
    uint8_t good[COUNT] = {0}, bad[COUNT] = {0};
    bad[7] = CN_FASHION_MNIST_CLASSES;
    expect_refusal(good, good, COUNT - 1, GRID, GRID, "needs 25 images, only 24 given");
    expect_refusal(good, good, COUNT, 0, GRID, "at least one row");
    expect_refusal(good, good, COUNT, GRID, -1, "at least one row");
    expect_refusal(bad, good, COUNT, GRID, GRID, "labels[7] is 10");
    expect_refusal(good, bad, COUNT, GRID, GRID, "predictions[7] is 10");
    expect_refusal(good, good, 1 << 30, 1 << 15, 1 << 15, "too large");
    expect_refusal(NULL, good, COUNT, GRID, GRID, "needs images, labels and predictions");
}

static void test_label_outside_grid_ignored(void **state)
{
    (void)state;
    static uint8_t images[(COUNT + 1) * SIDE * SIDE];
    uint8_t labels[COUNT + 1] = {0};
    labels[COUNT] = 200; /* beyond rows * cols: not drawn, not checked */
    tu_place p = place_make();
    cn_error err = {{0}};
    assert_int_equal(
        cn_result_picture(p.file, images, labels, labels, COUNT + 1, GRID, GRID, "t", &err), 0);
    tu_place_remove(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_predictions),
        cmocka_unit_test(test_all_right_has_no_red),
        cmocka_unit_test(test_all_wrong_has_no_blue),
        cmocka_unit_test(test_replaces_existing_file),
        cmocka_unit_test(test_missing_folder_fails_cleanly),
        cmocka_unit_test(test_bad_arguments_refused),
        cmocka_unit_test(test_label_outside_grid_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
