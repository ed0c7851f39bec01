/* test_plot.c — the training-curves and confusion-matrix pictures: nice axis ticks, the fonts
 * loaded from DejaVu's files (and one clear message for a missing or broken one), PNGs read back
 * with cairo at exactly the stated size, the curve colours present (and absent where the values
 * are missing), text in the title and axis-label bands, the confusion counts and their shading,
 * and the refusal of bad arguments without leaving a file. It does not compare pixels with a
 * reference picture (glyphs may differ between FreeType versions); tests/cli_fonts.sh checks
 * that the pictures do not depend on fontconfig. */
#include "testutil.h"

#include <cairo.h>

#include "pictures/draw.h"

/* ------------------------------------------------------------------ helpers */

static tu_place place_make(void)
{
    return tu_place_make("plot", "out.png");
}

/* A PNG read back at exactly the stated size. */
static cairo_surface_t *load_png(const char *path, int want_w, int want_h)
{
    cairo_surface_t *s = tu_png_read(path);
    assert_int_equal(cairo_image_surface_get_width(s), want_w);
    assert_int_equal(cairo_image_surface_get_height(s), want_h);
    return s;
}

typedef enum { PIX_DARK, PIX_NEAR, PIX_DARK_BLUE } pixel_test;

/* Pixels in [x0, x1) x [y0, y1) that pass the test: dark (text), near the colour rgb (within
 * 40 per channel), or dark blue (the top of the confusion colour scale). */
static long count_pixels(cairo_surface_t *s, int x0, int y0, int x1, int y1, pixel_test test,
                         uint32_t rgb)
{
    int wr = (rgb >> 16) & 255, wg = (rgb >> 8) & 255, wb = rgb & 255;
    long n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            uint32_t px = tu_pixel(s, x, y);
            int r = (px >> 16) & 255, g = (px >> 8) & 255, b = px & 255;
            if (test == PIX_DARK) n += r < 100 && g < 100 && b < 100;
            else if (test == PIX_NEAR)
                n += abs(r - wr) < 40 && abs(g - wg) < 40 && abs(b - wb) < 40;
            else n += r < 60 && g < 90 && b > 90 && b - r > 50;
        }
    return n;
}

#define TRAIN_BLUE 0x1F77B4u
#define TEST_ORANGE 0xFF7F0Eu
#define ACCURACY_GREEN 0x2CA02Cu
#define VAL_RED 0xD62728u
#define VAL_PURPLE 0x9467BDu
#define RATE_CYAN 0x17BECFu

/* A 50-epoch run: falling losses, rising accuracy; no validation split. */
static void synth_epochs(cn_epoch_metrics *e, int n)
{
    for (int i = 0; i < n; i++)
        e[i] = (cn_epoch_metrics){
            .epoch = i + 1,
            .train_loss = 0.25 + 0.35 * exp(-i / 6.0),
            .test_loss = 0.28 + 0.2 * exp(-i / 5.0),
            .test_accuracy = 90.5 - 6 * exp(-i / 5.0),
        };
}

/* ------------------------------------------------------------------ ticks */

static void expect_ticks(double lo, double hi, int max, double first, double last, double step,
                         int decimals)
{
    cn_axis_ticks t;
    cn_nice_ticks(lo, hi, max, &t);
    /* written as "not within", so that a NaN fails too */
    if (!(fabs(t.first - first) <= 1e-9) || !(fabs(t.last - last) <= 1e-9) ||
        !(fabs(t.step - step) <= 1e-12) || t.decimals != decimals)
        fail_msg("ticks(%g, %g, %d) = %g..%g step %g (%d decimals), expected %g..%g step %g "
                 "(%d)", lo, hi, max, t.first, t.last, t.step, t.decimals, first, last, step,
                 decimals);
}

static void test_nice_ticks(void **state)
{
    (void)state;
    expect_ticks(1, 50, 10, 0, 50, 5, 0);
    expect_ticks(0.25, 0.6, 6, 0.2, 0.6, 0.1, 1);
    expect_ticks(0.25, 0.6, 10, 0.25, 0.6, 0.05, 2);
    expect_ticks(84.8, 90.8, 5, 84, 92, 2, 0);
    expect_ticks(0, 958, 5, 0, 1000, 200, 0);
    expect_ticks(3, 3, 5, 2.6, 3.4, 0.2, 1);  /* one value: a range around it */
    expect_ticks(0, 0, 5, -1, 1, 0.5, 1);
    expect_ticks(-0.003, 0.0021, 4, -0.004, 0.004, 0.002, 3);
}

/* ------------------------------------------------------------------ fonts */

static void test_fonts_load(void **state)
{
    (void)state;
    cn_fonts f;
    cn_error err = {{0}};
    if (cn_fonts_open(&f, CN_FONT_DIR, &err) != 0) fail_msg("%s", err.msg);
    assert_non_null(f.regular);
    assert_non_null(f.bold);
    assert_int_equal(cairo_font_face_get_type(f.regular), CAIRO_FONT_TYPE_FT);
    assert_int_equal(cairo_font_face_status(f.bold), CAIRO_STATUS_SUCCESS);
    cn_fonts_close(&f);
    assert_null(f.regular);
    assert_null(f.bold);
}

/* cn_fonts_open(dir) must fail, hold no face, and say "font dir/file: want (install ...)". */
static void expect_font_refused(const char *dir, const char *file, const char *want)
{
    cn_fonts f;
    cn_error err = {{0}};
    assert_int_equal(cn_fonts_open(&f, dir, &err), -1);
    assert_null(f.regular);
    assert_null(f.bold);
    char head[512];
    snprintf(head, sizeof head, "font %s/%s: %s", dir, file, want);
    if (strncmp(err.msg, head, strlen(head)) != 0 ||
        !strstr(err.msg, "(install Debian's fonts-dejavu-core)"))
        fail_msg("message \"%s\", expected \"%s ... (install Debian's fonts-dejavu-core)\"",
                 err.msg, head);
}

/* Copies the file from to the file to. */
static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    assert_int_equal(fclose(in), 0);
    assert_int_equal(fclose(out), 0);
}

static void test_fonts_missing_or_broken(void **state)
{
    (void)state;
    tu_place p = tu_place_make("fonts", CN_FONT_REGULAR);
    expect_font_refused(p.dir, CN_FONT_REGULAR, "cannot open: No such file or directory");
    FILE *f = fopen(p.file, "wb");
    assert_non_null(f);
    assert_int_equal(fputs("not a font\n", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    expect_font_refused(p.dir, CN_FONT_REGULAR, "not a font FreeType can read");
    copy_file(CN_FONT_DIR "/" CN_FONT_REGULAR, p.file); /* the regular face alone */
    expect_font_refused(p.dir, CN_FONT_BOLD, "cannot open: No such file or directory");
    tu_place_remove(&p);
}

/* ------------------------------------------------------------------ curves */

static cairo_surface_t *draw_curves(const tu_place *p, const cn_epoch_metrics *e, int n, int w,
                                    int h, const char *title)
{
    cn_error err = {{0}};
    if (cn_plot_curves(p->file, e, n, w, h, title, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(tu_count_entries(p->dir), 1); /* the PNG, no temporary left over */
    return load_png(p->file, w, h);
}

static void test_curves_show_all_three(void **state)
{
    (void)state;
    cn_epoch_metrics e[50];
    synth_epochs(e, 50);
    tu_place p = place_make();
    cairo_surface_t *s = draw_curves(&p, e, 50, CN_PLOT_WIDTH, CN_PLOT_HEIGHT, "Curves title");
    int w = CN_PLOT_WIDTH, h = CN_PLOT_HEIGHT;
    assert_int_equal(tu_pixel(s, 0, 0), 0xFFFFFF);
    assert_true(count_pixels(s, 0, 0, w, h, PIX_NEAR, TRAIN_BLUE) > 500);
    assert_true(count_pixels(s, 0, 0, w, h, PIX_NEAR, TEST_ORANGE) > 500);
    assert_true(count_pixels(s, 0, 0, w, h, PIX_NEAR, ACCURACY_GREEN) > 500);
    /* the loss curves lie in the upper panel, the accuracy curve in the lower */
    assert_true(count_pixels(s, 0, h / 2, w, h, PIX_NEAR, TRAIN_BLUE) == 0);
    assert_true(count_pixels(s, 0, 90, w, h / 2, PIX_NEAR, ACCURACY_GREEN) == 0);
    /* text: the title on top, "Epoch" along the bottom, the y labels along the left edge */
    assert_true(count_pixels(s, 0, 0, w, 45, PIX_DARK, 0) > 100);
    assert_true(count_pixels(s, w / 3, h - 30, 2 * w / 3, h, PIX_DARK, 0) > 30);
    assert_true(count_pixels(s, 0, 90, 35, h - 70, PIX_DARK, 0) > 100);
    cairo_surface_destroy(s);
    /* the same curves without a title leave the title band empty */
    s = draw_curves(&p, e, 50, CN_PLOT_WIDTH, CN_PLOT_HEIGHT, NULL);
    assert_int_equal(count_pixels(s, 0, 0, w, 45, PIX_DARK, 0), 0);
    cairo_surface_destroy(s);
    tu_place_remove(&p);
}

static void test_curves_other_sizes(void **state)
{
    (void)state;
    cn_epoch_metrics e[200];
    synth_epochs(e, 200);
    tu_place p = place_make();
    int sizes[][2] = {{1600, 500}, {400, 300}, {2000, 2000}};
    for (int i = 0; i < 3; i++) {
        int w = sizes[i][0], h = sizes[i][1];
        cairo_surface_t *s = draw_curves(&p, e, 200, w, h, "t");
        assert_true(count_pixels(s, 0, 0, w, h, PIX_NEAR, TRAIN_BLUE) > 100);
        assert_true(count_pixels(s, 0, 0, w, h, PIX_NEAR, ACCURACY_GREEN) > 100);
        cairo_surface_destroy(s);
    }
    tu_place_remove(&p);
}

static void test_curves_leave_out_missing_values(void **state)
{
    (void)state;
    cn_epoch_metrics e[5];
    synth_epochs(e, 5);
    for (int i = 0; i < 5; i++) e[i].test_loss = NAN, e[i].test_accuracy = INFINITY;
    tu_place p = place_make();
    cairo_surface_t *s = draw_curves(&p, e, 5, 960, 720, "t");
    /* the legend still shows every colour: look below it */
    assert_true(count_pixels(s, 0, 80, 960, 720, PIX_NEAR, TRAIN_BLUE) > 100);
    assert_int_equal(count_pixels(s, 0, 80, 960, 720, PIX_NEAR, TEST_ORANGE), 0);
    assert_int_equal(count_pixels(s, 0, 80, 960, 720, PIX_NEAR, ACCURACY_GREEN), 0);
    cairo_surface_destroy(s);
    /* a single epoch is a dot per series */
    s = draw_curves(&p, e, 1, 960, 720, "t");
    assert_true(count_pixels(s, 0, 80, 960, 720, PIX_NEAR, TRAIN_BLUE) > 5);
    cairo_surface_destroy(s);
    tu_place_remove(&p);
}

static void test_curves_show_validation(void **state)
{
    (void)state;
    cn_epoch_metrics e[20];
    synth_epochs(e, 20);
    tu_place p = place_make();
    int w = CN_PLOT_WIDTH, h = CN_PLOT_HEIGHT;
    cairo_surface_t *s = draw_curves(&p, e, 20, w, h, "t");
    assert_int_equal(count_pixels(s, 0, 0, w, h, PIX_NEAR, VAL_RED), 0);
    assert_int_equal(count_pixels(s, 0, 0, w, h, PIX_NEAR, VAL_PURPLE), 0);
    cairo_surface_destroy(s);
    for (int i = 0; i < 20; i++) {
        e[i].has_validation = 1;
        e[i].val_loss = 0.3 + 0.25 * exp(-i / 5.0);
        e[i].val_accuracy = 89.0 - 7 * exp(-i / 5.0);
    }
    s = draw_curves(&p, e, 20, w, h, "t");
    /* validation loss in the upper panel, validation accuracy in the lower, both below the
     * legend (where the red and blue lines cross, a pixel or two of their blend looks purple) */
    assert_true(count_pixels(s, 0, 80, w, h / 2, PIX_NEAR, VAL_RED) > 300);
    assert_true(count_pixels(s, 0, h / 2, w, h, PIX_NEAR, VAL_RED) < 10);
    assert_true(count_pixels(s, 0, h / 2, w, h, PIX_NEAR, VAL_PURPLE) > 300);
    assert_true(count_pixels(s, 0, 90, w, h / 2, PIX_NEAR, VAL_PURPLE) < 10);
    assert_true(count_pixels(s, 0, 0, w, h, PIX_NEAR, TEST_ORANGE) > 300);
    cairo_surface_destroy(s);
    tu_place_remove(&p);
}

/* Epochs that give their learning rate get a third panel at the bottom with its curve, under
 * the accuracy's; without rates there is none, and no cyan anywhere. */
static void test_curves_show_the_learning_rate(void **state)
{
    (void)state;
    cn_epoch_metrics e[20];
    synth_epochs(e, 20);
    tu_place p = place_make();
    int w = CN_PLOT_WIDTH, h = CN_PLOT_HEIGHT;
    cairo_surface_t *s = draw_curves(&p, e, 20, w, h, "t");
    assert_int_equal(count_pixels(s, 0, 0, w, h, PIX_NEAR, RATE_CYAN), 0);
    cairo_surface_destroy(s);
    for (int i = 0; i < 20; i++) e[i].learning_rate = 0.01 * (1 + cos(M_PI * i / 20)) / 2;
    e[3].learning_rate = NAN; /* a gap */
    s = draw_curves(&p, e, 20, w, h, "t");
    assert_true(count_pixels(s, 0, 80, w, h, PIX_NEAR, RATE_CYAN) > 500);
    assert_int_equal(count_pixels(s, 0, 80, w, 3 * h / 4 - 20, PIX_NEAR, RATE_CYAN), 0);
    assert_int_equal(count_pixels(s, 0, 3 * h / 4, w, h, PIX_NEAR, ACCURACY_GREEN), 0);
    assert_true(count_pixels(s, 0, h / 2, w, 3 * h / 4, PIX_NEAR, ACCURACY_GREEN) > 100);
    cairo_surface_destroy(s);
    tu_place_remove(&p);
}

static void expect_curves_refused(const cn_epoch_metrics *e, int n, int w, int h,
                                  const char *want)
{
    tu_place p = place_make();
    cn_error err = {{0}};
    assert_int_equal(cn_plot_curves(p.file, e, n, w, h, "t", &err), -1);
    if (!strstr(err.msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    assert_int_equal(tu_count_entries(p.dir), 0);
    tu_place_remove(&p);
}

static void test_curves_refusals(void **state)
{
    (void)state;
    cn_epoch_metrics e[3];
    synth_epochs(e, 3);
    expect_curves_refused(e, 0, 960, 720, "at least one epoch");
    expect_curves_refused(NULL, 3, 960, 720, "at least one epoch");
    expect_curves_refused(e, 3, 399, 720, "the size must be");
    expect_curves_refused(e, 3, 960, 8193, "the size must be");
    e[2].epoch = 2;
    expect_curves_refused(e, 3, 960, 720, "epoch 2 follows epoch 2");
    e[2].epoch = 3;
    cn_error err = {{0}};
    char path[96];
    snprintf(path, sizeof path, "/tmp/cnnc-no-such-dir-%d/c.png", (int)getpid());
    assert_int_equal(cn_plot_curves(path, e, 3, 960, 720, "t", &err), -1);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "No such file or directory"));
}

/* ------------------------------------------------------------------ confusion matrix */

static void test_confusion_count(void **state)
{
    (void)state;
    uint8_t labels[] = {0, 0, 1, 2, 2, 2}, preds[] = {0, 1, 1, 2, 0, 2};
    int64_t counts[9];
    cn_error err = {{0}};
    assert_int_equal(cn_confusion_count(counts, 3, labels, preds, 6, &err), 0);
    int64_t want[9] = {1, 1, 0, 0, 1, 0, 1, 0, 2};
    assert_memory_equal(counts, want, sizeof want);
    preds[3] = 3;
    assert_int_equal(cn_confusion_count(counts, 3, labels, preds, 6, &err), -1);
    assert_non_null(strstr(err.msg, "sample 3"));
    assert_memory_equal(counts, want, sizeof want); /* unchanged */
}

enum { CLASSES = CN_FASHION_MNIST_CLASSES, CONF_W = 258 + 58 * CLASSES, CONF_H = 184 + 58 * CLASSES };

static cairo_surface_t *draw_confusion(const tu_place *p, const int64_t *counts,
                                       const char *const *names)
{
    cn_error err = {{0}};
    if (cn_confusion_picture(p->file, counts, CLASSES, names, "Confusion", &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(tu_count_entries(p->dir), 1);
    return load_png(p->file, CONF_W, CONF_H);
}

static void test_confusion_picture(void **state)
{
    (void)state;
    int64_t diagonal[CLASSES * CLASSES] = {0}, empty[CLASSES * CLASSES] = {0};
    for (int c = 0; c < CLASSES; c++) diagonal[c * CLASSES + c] = 900 + c;
    diagonal[6 * CLASSES + 0] = 120;
    tu_place p = place_make();
    cairo_surface_t *s = draw_confusion(&p, diagonal, cn_fashion_mnist_names);
    assert_int_equal(tu_pixel(s, 0, 0), 0xFFFFFF);
    long dark_diagonal = count_pixels(s, 0, 0, CONF_W, CONF_H, PIX_DARK_BLUE, 0);
    /* text: title band, class names left of the matrix and under it */
    assert_true(count_pixels(s, 0, 0, CONF_W, 50, PIX_DARK, 0) > 100);
    assert_true(count_pixels(s, 0, 60, 150, 60 + 58 * CLASSES, PIX_DARK, 0) > 300);
    assert_true(count_pixels(s, 150, 60 + 58 * CLASSES, CONF_W, CONF_H, PIX_DARK, 0) > 300);
    cairo_surface_destroy(s);
    s = draw_confusion(&p, empty, NULL);
    long dark_empty = count_pixels(s, 0, 0, CONF_W, CONF_H, PIX_DARK_BLUE, 0);
    cairo_surface_destroy(s);
    /* ten dark diagonal cells of 58 x 58 px, less their numbers; the colour bar is in both */
    if (dark_diagonal - dark_empty < 10 * 2500)
        fail_msg("dark blue pixels: %ld with a full diagonal, %ld with no counts", dark_diagonal,
                 dark_empty);
    tu_place_remove(&p);
}

static void expect_confusion_refused(const int64_t *counts, int classes, const char *want)
{
    tu_place p = place_make();
    cn_error err = {{0}};
    assert_int_equal(cn_confusion_picture(p.file, counts, classes, NULL, "t", &err), -1);
    if (!strstr(err.msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    assert_int_equal(tu_count_entries(p.dir), 0);
    tu_place_remove(&p);
}

static void test_confusion_refusals(void **state)
{
    (void)state;
    static int64_t counts[257 * 257];
    expect_confusion_refused(counts, 0, "1..256 classes");
    expect_confusion_refused(counts, 257, "1..256 classes");
    expect_confusion_refused(NULL, 10, "1..256 classes");
    counts[5] = -1;
    expect_confusion_refused(counts, 10, "count 5 is negative");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nice_ticks),
        cmocka_unit_test(test_fonts_load),
        cmocka_unit_test(test_fonts_missing_or_broken),
        cmocka_unit_test(test_curves_show_all_three),
        cmocka_unit_test(test_curves_other_sizes),
        cmocka_unit_test(test_curves_leave_out_missing_values),
        cmocka_unit_test(test_curves_show_validation),
        cmocka_unit_test(test_curves_show_the_learning_rate),
        cmocka_unit_test(test_curves_refusals),
        cmocka_unit_test(test_confusion_count),
        cmocka_unit_test(test_confusion_picture),
        cmocka_unit_test(test_confusion_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
