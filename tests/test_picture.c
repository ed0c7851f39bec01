/* test_picture.c — cn_result_picture and cn_confusion_picture at any shape: draws grids of
 * synthetic grey and colour images of several shapes and confusion matrices of 2 to 256
 * classes, reads the PNG back with cairo and checks its size against the layout the header
 * states, opacity, caption colours, colour images in colour, long names kept inside their
 * cells; refuses bad arguments and leaves no file behind when it cannot write. It does not
 * compare pixels with a reference picture (glyphs may differ between FreeType versions);
 * tests/cli_fonts.sh checks that the picture does not depend on fontconfig. */
#include "testutil.h"

#include <sys/stat.h>

#include <cairo.h>

#define SIDE 28
#define GRID 5
#define COUNT (GRID * GRID)
#define CLASSES 10

static const char *const names10[CLASSES] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                             "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                                             "Ankle boot"};

/* A set of n grey 28 x 28 images of 10 named classes. */
static cn_labelled_images grey_set(const uint8_t *images, const uint8_t *labels,
                                   const uint8_t *preds, int n)
{
    return (cn_labelled_images){images, 1, SIDE, SIDE, labels, preds, n, CLASSES, names10};
}

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
    cn_labelled_images set = grey_set(images, labels, preds, COUNT);
    int rc = cn_result_picture(p->file, &set, GRID, GRID, "Predicted labels \xE2\x80\x94 test",
                               &err);
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
        labels[i] = (uint8_t)(i % CLASSES);
        preds[i] = (i % 4 == 1) ? (uint8_t)((i + 3) % CLASSES) : labels[i];
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
    for (int i = 0; i < COUNT; i++) labels[i] = (uint8_t)((i * 7) % CLASSES);
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
        labels[i] = (uint8_t)(i % CLASSES);
        preds[i] = (uint8_t)((i + 1) % CLASSES);
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
    cn_labelled_images set = grey_set(images, labels, labels, COUNT);
    assert_int_equal(cn_result_picture(png, &set, GRID, GRID, "t", &err), -1);
    assert_non_null(strstr(err.msg, png));
    assert_non_null(strstr(err.msg, "cannot write picture"));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    struct stat sb;
    assert_int_equal(stat(dir, &sb), -1);
}

/* Calls cn_result_picture on set (NULL for none) with one bad argument; it must fail with a
 * one-line message containing want and write nothing. */
static void expect_set_refusal(const cn_labelled_images *set, int rows, int cols,
                               const char *want)
{
    tu_place p = place_make();
    cn_error err = {{0}};
    assert_int_equal(cn_result_picture(p.file, set, rows, cols, "t", &err), -1);
    if (!strstr(err.msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(tu_count_entries(p.dir), 0);
    tu_place_remove(&p);
}

static void expect_refusal(const uint8_t *labels, const uint8_t *preds, int n, int rows,
                           int cols, const char *want)
{
    static uint8_t images[COUNT * SIDE * SIDE];
    cn_labelled_images set = grey_set(images, labels, preds, n);
    expect_set_refusal(&set, rows, cols, want);
}

static void test_bad_arguments_refused(void **state)
{
    (void)state;
    uint8_t good[COUNT] = {0}, bad[COUNT] = {0};
    bad[7] = CLASSES;
    expect_refusal(good, good, COUNT - 1, GRID, GRID, "needs 25 images, only 24 given");
    expect_refusal(good, good, COUNT, 0, GRID, "at least one row");
    expect_refusal(good, good, COUNT, GRID, -1, "at least one row");
    expect_refusal(bad, good, COUNT, GRID, GRID, "labels[7] is 10");
    expect_refusal(good, bad, COUNT, GRID, GRID, "predictions[7] is 10");
    expect_refusal(good, good, 1 << 30, 1 << 15, 1 << 15, "too large");
    expect_refusal(NULL, good, COUNT, GRID, GRID, "needs images, labels and predictions");
    expect_set_refusal(NULL, GRID, GRID, "needs images, labels and predictions");
}

/* Channels other than 1 or 3, sides and class counts out of range, labels beyond a class
 * count other than 10, and a grid of large images too wide for cairo. */
static void test_bad_shapes_refused(void **state)
{
    (void)state;
    static uint8_t images[COUNT * 3 * 40 * 40];
    uint8_t labels[COUNT] = {0};
    cn_labelled_images set = {images, 2, 40, 40, labels, labels, COUNT, 3, NULL};
    expect_set_refusal(&set, GRID, GRID, "images have 2 channels, not 1 (grey) or 3");
    set.channels = 4;
    expect_set_refusal(&set, GRID, GRID, "images have 4 channels");
    set.channels = 3, set.height = 0;
    expect_set_refusal(&set, GRID, GRID, "each side must be 1..1024");
    set.height = 40, set.width = CN_PICTURE_MAX_SIDE + 1;
    expect_set_refusal(&set, GRID, GRID, "images of 40 x 1025 px");
    set.width = 40, set.classes = 0;
    expect_set_refusal(&set, GRID, GRID, "0 classes, not 1..256");
    set.classes = 257;
    expect_set_refusal(&set, GRID, GRID, "257 classes, not 1..256");
    set.classes = 3, labels[24] = 3;
    expect_set_refusal(&set, GRID, GRID, "labels[24] is 3, not a class 0..2");
    labels[24] = 0;
    set.height = set.width = CN_PICTURE_MAX_SIDE; /* 1036 px cells: 32 columns are too wide */
    expect_set_refusal(&set, 1, 32, "too large (33184 x");
}


static void test_label_outside_grid_ignored(void **state)
{
    (void)state;
    static uint8_t images[(COUNT + 1) * SIDE * SIDE];
    uint8_t labels[COUNT + 1] = {0};
    labels[COUNT] = 200; /* beyond rows * cols: not drawn, not checked */
    tu_place p = place_make();
    cn_error err = {{0}};
    cn_labelled_images set = grey_set(images, labels, labels, COUNT + 1);
    assert_int_equal(cn_result_picture(p.file, &set, GRID, GRID, "t", &err), 0);
    tu_place_remove(&p);
}

/* ------------------------------------------------------------------ any shape */

/* Where the header's layout puts things, computed here apart from picture.c. */
typedef struct {
    int scale, cell_w, width, height;
} grid_layout;

static grid_layout grid_layout_of(int height, int width, int rows, int cols)
{
    int longer = height > width ? height : width;
    grid_layout g;
    g.scale = (int)lround(115.0 / longer);
    if (g.scale < 1) g.scale = 1;
    g.cell_w = width * g.scale + 12 > 260 ? width * g.scale + 12 : 260;
    g.width = 32 + cols * g.cell_w;
    g.height = 72 + rows * (22 + g.scale * height) + (rows - 1) * 12;
    return g;
}

/* Top-left corner of grid cell (row, col)'s image of image_w x image_h px. */
static void image_corner(const grid_layout *g, int image_w, int image_h, int row, int col,
                         int *x, int *y)
{
    *x = 16 + col * g->cell_w + (g->cell_w - image_w) / 2;
    *y = 16 + 40 + row * (22 + image_h + 12) + 22;
}

/* Draws set as a rows x cols grid and reads the picture back; fails on any error. */
static cairo_surface_t *draw_set(const tu_place *p, const cn_labelled_images *set, int rows,
                                 int cols)
{
    cn_error err = {{0}};
    if (cn_result_picture(p->file, set, rows, cols, "Shapes", &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(tu_count_entries(p->dir), 1);
    return tu_png_read(p->file);
}

static void assert_size(cairo_surface_t *s, int width, int height)
{
    if (cairo_image_surface_get_width(s) != width || cairo_image_surface_get_height(s) != height)
        fail_msg("picture is %d x %d px, the layout says %d x %d",
                 cairo_image_surface_get_width(s), cairo_image_surface_get_height(s), width,
                 height);
}

/* Four 3 x 32 x 32 images, red, green, blue and white, each drawn in its colour, 4x. */
static void test_colour_images_in_colour(void **state)
{
    (void)state;
    enum { C = 3, H = 32, W = 32, PLANE = H * W };
    static uint8_t images[4 * C * PLANE];
    memset(images, 0, sizeof images);
    for (int i = 0; i < 4; i++)
        for (int ch = 0; ch < C; ch++)
            if (i == ch || i == 3) memset(images + (i * C + ch) * PLANE, 255, PLANE);
    uint8_t labels[4] = {0, 1, 2, 3};
    cn_labelled_images set = {images, C, H, W, labels, labels, 4, 4, NULL};
    tu_place p = place_make();
    cairo_surface_t *s = draw_set(&p, &set, 2, 2);
    grid_layout g = grid_layout_of(H, W, 2, 2);
    assert_int_equal(g.scale, 4);
    assert_size(s, g.width, g.height);
    const uint32_t want[4] = {0xFF0000, 0x00FF00, 0x0000FF, 0xFFFFFF};
    for (int i = 0; i < 4; i++) {
        int x, y;
        image_corner(&g, W * g.scale, H * g.scale, i / 2, i % 2, &x, &y);
        for (int d = 0; d < W * g.scale; d += 9) { /* down the diagonal of the image */
            uint32_t px = tu_pixel(s, x + d, y + d);
            if (px != want[i]) fail_msg("image %d at (%d, %d) is %06X, not %06X", i, x + d, y + d,
                                        px, want[i]);
        }
    }
    cairo_surface_destroy(s);
    tu_place_remove(&p);
}

/* Black images of the shape, scaled by a whole factor: black exactly from their corner to
 * scale * side, white just outside; the picture is the size the layout formula gives. */
static void check_shape(int channels, int height, int width, int want_scale)
{
    enum { ROWS = 2, COLS = 3 };
    size_t size = (size_t)channels * (size_t)height * (size_t)width;
    uint8_t *images = calloc(ROWS * COLS, size), labels[ROWS * COLS] = {0, 1, 2, 3, 4, 5};
    assert_non_null(images);
    cn_labelled_images set = {images, channels, height, width, labels, labels, ROWS * COLS, 6,
                              NULL};
    tu_place p = place_make();
    cairo_surface_t *s = draw_set(&p, &set, ROWS, COLS);
    grid_layout g = grid_layout_of(height, width, ROWS, COLS);
    assert_int_equal(g.scale, want_scale);
    assert_size(s, g.width, g.height);
    int iw = width * g.scale, ih = height * g.scale, x, y;
    image_corner(&g, iw, ih, ROWS - 1, COLS - 1, &x, &y);
    assert_int_equal(tu_pixel(s, x, y), 0x000000);
    assert_int_equal(tu_pixel(s, x + iw - 1, y + ih - 1), 0x000000);
    assert_int_equal(tu_pixel(s, x - 1, y + ih / 2), 0xFFFFFF);
    assert_int_equal(tu_pixel(s, x + iw, y + ih / 2), 0xFFFFFF);
    assert_int_equal(tu_pixel(s, x + iw / 2, y + ih), 0xFFFFFF);
    cairo_surface_destroy(s);
    tu_place_remove(&p);
    free(images);
}

static void test_other_shapes(void **state)
{
    (void)state;
    check_shape(1, 28, 28, 4);   /* 1332 x 790 for 5 x 5, as the seed drew it */
    check_shape(3, 32, 32, 4);   /* 128 px */
    check_shape(1, 16, 40, 3);   /* 48 x 120 px */
    check_shape(3, 40, 16, 3);   /* 120 x 48 px */
    check_shape(1, 1, 1, 115);   /* one pixel, 115 px */
    check_shape(1, 200, 300, 1); /* larger than the target: drawn as it is, a wider cell */
}

/* Class numbers for a grid of 2, 10 and 100 classes without names, and names with one NULL. */
static void test_class_counts(void **state)
{
    (void)state;
    static uint8_t images[COUNT * SIDE * SIDE];
    uint8_t labels[COUNT], preds[COUNT];
    const int counts[3] = {2, 10, 100};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < COUNT; i++) {
            labels[i] = (uint8_t)((i * 37) % counts[k]);
            preds[i] = (uint8_t)((i * 41) % counts[k]);
        }
        labels[COUNT - 1] = preds[COUNT - 1] = (uint8_t)(counts[k] - 1);
        cn_labelled_images set = {images, 1, SIDE, SIDE, labels, preds, COUNT, counts[k], NULL};
        tu_place p = place_make();
        cairo_surface_t *s = draw_set(&p, &set, GRID, GRID);
        assert_size(s, 1332, 790);
        cairo_surface_destroy(s);
        tu_place_remove(&p);
        set.classes = counts[k] - 1;
        expect_set_refusal(&set, GRID, GRID, "not a class 0..");
    }
    const char *names[3] = {"zero", NULL, "two"};
    uint8_t three[COUNT] = {0, 1, 2};
    cn_labelled_images set = {images, 1, SIDE, SIDE, three, three, COUNT, 3, names};
    tu_place p = place_make();
    cairo_surface_destroy(draw_set(&p, &set, GRID, GRID));
    tu_place_remove(&p);
}

/* Non-white pixels in the rectangle [x0, x1) x [y0, y1). */
static long ink(cairo_surface_t *s, int x0, int y0, int x1, int y1)
{
    long n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) n += tu_pixel(s, x, y) != 0xFFFFFF;
    return n;
}

/* 30-character names: each caption stays inside its cell (the 6 px either side of the border
 * between two cells, and the margins, stay white) and still shows text. */
static void test_long_names_stay_in_cell(void **state)
{
    (void)state;
    static uint8_t images[4 * SIDE * SIDE];
    const char *names[2] = {"A thirty character class name.", "Another class, thirty long ok."};
    uint8_t labels[4] = {0, 1, 0, 1}, preds[4] = {1, 0, 1, 1};
    cn_labelled_images set = {images, 1, SIDE, SIDE, labels, preds, 4, 2, names};
    assert_int_equal(strlen(names[0]), 30);
    tu_place p = place_make();
    cairo_surface_t *s = draw_set(&p, &set, 2, 2);
    grid_layout g = grid_layout_of(SIDE, SIDE, 2, 2);
    assert_size(s, g.width, g.height);
    for (int row = 0; row < 2; row++) {
        int top = 16 + 40 + row * (22 + 112 + 12), border = 16 + g.cell_w;
        assert_true(ink(s, 16 + 6, top, border - 6, top + 22) > 200);
        assert_true(ink(s, border + 6, top, g.width - 16 - 6, top + 22) > 200);
        assert_int_equal(ink(s, 0, top, 16 + 5, top + 22), 0);
        assert_int_equal(ink(s, border - 5, top, border + 5, top + 22), 0);
        assert_int_equal(ink(s, g.width - 16 - 5, top, g.width, top + 22), 0);
    }
    cairo_surface_destroy(s);
    tu_place_remove(&p);
}

/* Names of 150 two-byte characters (300 bytes): cut at whole characters, still drawn. */
static void test_very_long_utf8_names(void **state)
{
    (void)state;
    static char name[301];
    for (int i = 0; i < 150; i++) memcpy(name + 2 * i, "\xC3\xA9", 2); /* é */
    const char *names[2] = {name, "b"};
    static uint8_t images[SIDE * SIDE];
    uint8_t labels[1] = {0}, preds[1] = {1};
    cn_labelled_images set = {images, 1, SIDE, SIDE, labels, preds, 1, 2, names};
    tu_place p = place_make();
    cairo_surface_destroy(draw_set(&p, &set, 1, 1));
    int64_t counts[4] = {1, 2, 3, 4};
    cn_error err = {{0}};
    if (cn_confusion_picture(p.file, counts, 2, names, "t", &err) != 0) fail_msg("%s", err.msg);
    tu_place_remove(&p);
}

/* ------------------------------------------------------------------ confusion matrix */

/* The header's confusion layout: cells of 580 / classes px within 14..116. */
static int conf_cell(int classes)
{
    int cell = 580 / classes;
    return cell < 14 ? 14 : cell > 116 ? 116 : cell;
}

/* Draws a matrix of the given classes with a full diagonal and reads it back. */
static cairo_surface_t *draw_matrix(const tu_place *p, int classes, const char *const *names)
{
    int64_t *counts = calloc((size_t)classes * (size_t)classes, sizeof *counts);
    assert_non_null(counts);
    for (int c = 0; c < classes; c++) counts[c * classes + c] = 1000;
    cn_error err = {{0}};
    if (cn_confusion_picture(p->file, counts, classes, names, "Confusion", &err) != 0)
        fail_msg("%d classes: %s", classes, err.msg);
    free(counts);
    return tu_png_read(p->file);
}

/* Pixels in diagonal cell c's inside (2 px in from its edges) that differ from its centre. */
static long cell_marks(cairo_surface_t *s, int classes, int c)
{
    int cell = conf_cell(classes), x0 = 150 + c * cell, y0 = 60 + c * cell;
    uint32_t fill = tu_pixel(s, x0 + 2, y0 + 2);
    long n = 0;
    for (int y = y0 + 2; y < y0 + cell - 2; y++)
        for (int x = x0 + 2; x < x0 + cell - 2; x++) n += tu_pixel(s, x, y) != fill;
    return n;
}

/* 2, 10, 100 and 256 classes: the size the layout formula gives, counts written in the cells
 * while they fit (2 and 10) and left out where they would be too small (100, 256). */
static void test_confusion_class_counts(void **state)
{
    (void)state;
    const int counts[4] = {2, 10, 100, 256};
    for (int k = 0; k < 4; k++) {
        int classes = counts[k], side = conf_cell(classes) * classes;
        tu_place p = place_make();
        cairo_surface_t *s = draw_matrix(&p, classes, NULL);
        assert_size(s, 258 + side, 184 + side);
        if (classes <= 10)
            assert_true(cell_marks(s, classes, classes - 1) > 20);
        else
            assert_int_equal(cell_marks(s, classes, classes - 1), 0);
        cairo_surface_destroy(s);
        tu_place_remove(&p);
    }
}

/* 30-character row names stay in their band (between the "Actual" title and the matrix) and
 * still show text, for 2, 10 and 100 classes. */
static void test_confusion_long_names(void **state)
{
    (void)state;
    static char buf[100][48]; /* room for any int, though c < 100 needs 31 */
    static const char *names[100];
    for (int c = 0; c < 100; c++) {
        snprintf(buf[c], sizeof buf[c], "%02d class with a long name here", c);
        names[c] = buf[c];
    }
    const int counts[3] = {2, 10, 100};
    for (int k = 0; k < 3; k++) {
        int classes = counts[k], side = conf_cell(classes) * classes;
        tu_place p = place_make();
        cairo_surface_t *s = draw_matrix(&p, classes, names);
        assert_int_equal(ink(s, 33, 60, 43, 60 + side), 0);
        assert_true(ink(s, 43, 60, 142, 60 + side) > 100 * classes);
        cairo_surface_destroy(s);
        tu_place_remove(&p);
    }
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
        cmocka_unit_test(test_bad_shapes_refused),
        cmocka_unit_test(test_colour_images_in_colour),
        cmocka_unit_test(test_other_shapes),
        cmocka_unit_test(test_class_counts),
        cmocka_unit_test(test_long_names_stay_in_cell),
        cmocka_unit_test(test_very_long_utf8_names),
        cmocka_unit_test(test_confusion_class_counts),
        cmocka_unit_test(test_confusion_long_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
