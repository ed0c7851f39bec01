/* test_folder.c — the image folder reader (cn_folder_split_read) on small ImageFolder trees
 * written here in a temporary folder: PNG files by cairo (colour, and grey from A8 surfaces)
 * and JPEG files by libjpeg; the classes, labels and pixels against what was written, each
 * class's files in sorted order and spread over the split by (k + 1/2) / n, hidden files
 * skipped, the folders below a class read, files chosen by their names; images scaled to a size asked for; grey and colour conversions (and channels 0, as the
 * first image is); one test per refusal, each with its message naming the file or folder. It
 * does not test cn_dataset_load's choice of format. */
#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/formats.h"

/* ---------------------------------------------------------------- writing trees */

/* path/.../name, made with its parent folders; the result is malloc'd. */
static char *make_path(const char *root, const char *rel)
{
    char *path = tu_join(root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(path, 0755) != 0) assert_int_equal(errno, EEXIST);
        *p = '/';
    }
    return path;
}

static void make_folder(const char *root, const char *rel)
{
    char *path = make_path(root, rel);
    assert_int_equal(mkdir(path, 0755), 0);
    free(path);
}

static void write_file(const char *root, const char *rel, const void *bytes, size_t len)
{
    char *path = make_path(root, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(path);
}

/* Sample (channel ch, row r, col c) of test image id: a different value for each. */
static uint8_t sample(int id, int ch, int r, int c)
{
    return (uint8_t)(id * 53 + ch * 91 + r * 17 + c * 29 + 7);
}

/* A PNG of image id (height x width) written by cairo: colour (RGB24) or grey (A8, which cairo
 * writes as a grey PNG of channel 0's samples). */
static void write_png(const char *root, const char *rel, int id, int height, int width,
                      int colour)
{
    cairo_format_t format = colour ? CAIRO_FORMAT_RGB24 : CAIRO_FORMAT_A8;
    cairo_surface_t *s = cairo_image_surface_create(format, width, height);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    cairo_surface_flush(s);
    unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    for (int r = 0; r < height; r++)
        for (int c = 0; c < width; c++) {
            unsigned char *row = data + (size_t)r * stride;
            if (colour)
                ((uint32_t *)(void *)row)[c] = 0xff000000u | (uint32_t)sample(id, 0, r, c) << 16 |
                                               (uint32_t)sample(id, 1, r, c) << 8 |
                                               sample(id, 2, r, c);
            else
                row[c] = sample(id, 0, r, c);
        }
    cairo_surface_mark_dirty(s);
    char *path = make_path(root, rel);
    assert_int_equal(cairo_surface_write_to_png(s, path), CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
    free(path);
}

/* A JPEG (quality 100) of one constant colour (or grey, when colour is 0: value v[0]). */
static void write_jpeg(const char *root, const char *rel, int height, int width, int colour,
                       const uint8_t v[3])
{
    int components = colour ? 3 : 1;
    uint8_t *pixels = malloc((size_t)height * width * components);
    assert_non_null(pixels);
    for (int i = 0; i < height * width; i++) memcpy(pixels + i * components, v, components);
    unsigned long len = 0;
    unsigned char *out = tu_jpeg_bytes(pixels, width, height, components,
                                       colour ? JCS_RGB : JCS_GRAYSCALE, 100, 0, &len);
    write_file(root, rel, out, len);
    free(out);
    free(pixels);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tree(char *root)
{
    assert_int_equal(nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(root);
}

static void free_dataset(cn_dataset *ds)
{
    cn_dataset_free(ds);
}

/* ---------------------------------------------------------------- reading */

/* cn_folder_split_read of root/split as channels, at the images' own size. */
static int read_split(cn_dataset *ds, const char *root, const char *split, int channels,
                      cn_error *err)
{
    cn_data_source src = {.dir = root, .channels = channels};
    return cn_folder_split_read(ds, &src, split, err);
}

enum { H = 4, W = 5 };

/* Image i of ds is test image id as channels: colour planes or their luma. */
static void expect_image(const cn_dataset *ds, int i, int id, int channels)
{
    const uint8_t *px = ds->pixels + (size_t)i * channels * H * W;
    for (int r = 0; r < H; r++)
        for (int c = 0; c < W; c++) {
            unsigned rgb[3] = {sample(id, 0, r, c), sample(id, 1, r, c), sample(id, 2, r, c)};
            for (int ch = 0; ch < channels; ch++) {
                unsigned want = channels == 3 ? rgb[ch]
                                              : (rgb[0] * 19595 + rgb[1] * 38470 +
                                                 rgb[2] * 7471 + 0x8000) >> 16;
                if (px[(ch * H + r) * W + c] != want)
                    fail_msg("image %d, channel %d (%d, %d): %d, not %u", i, ch, r, c,
                             px[(ch * H + r) * W + c], want);
            }
        }
}

/* Classes dog, ant, cat (read as ant, cat, dog) with 2, 1 and 2 colour PNG files, written out
 * of order, beside hidden files and folders and a file outside the class folders. */
static char *colour_tree(void)
{
    char *root = tu_make_temp_dir("folder");
    write_png(root, "train/dog/b.png", 4, H, W, 1);
    write_png(root, "train/dog/a.png", 3, H, W, 1);
    write_png(root, "train/ant/only.png", 0, H, W, 1);
    write_png(root, "train/cat/2.png", 2, H, W, 1);
    write_png(root, "train/cat/10.png", 1, H, W, 1);
    write_file(root, "train/cat/.DS_Store", "junk", 4);
    write_file(root, "train/.hidden/x.png", "junk", 4);
    write_file(root, "train/README", "a file beside the classes", 25);
    return root;
}

static void test_colour_classes_and_labels(void **state)
{
    (void)state;
    char *root = colour_tree();
    static const int channels[] = {3, 0, 1};
    for (int k = 0; k < 3; k++) {
        cn_dataset ds = {0};
        cn_error err = {{0}};
        if (read_split(&ds, root, "train", channels[k], &err) != 0)
            fail_msg("%s", err.msg);
        int want_channels = channels[k] ? channels[k] : 3;
        assert_int_equal(ds.count, 5);
        assert_int_equal(ds.classes, 3);
        assert_int_equal(ds.channels, want_channels);
        assert_int_equal(ds.height, H);
        assert_int_equal(ds.width, W);
        assert_int_equal(ds.format, CN_DATA_FOLDER);
        assert_string_equal(ds.class_names[0], "ant");
        assert_string_equal(ds.class_names[1], "cat");
        assert_string_equal(ds.class_names[2], "dog");
        /* cat's and dog's first files (at 1/4 of the split), ant's only one (1/2), their
         * second ones (3/4); within cat, strcmp order: "10.png" before "2.png" */
        static const uint8_t labels[] = {1, 2, 0, 1, 2};
        assert_memory_equal(ds.labels, labels, 5);
        static const int ids[] = {1, 3, 0, 2, 4};
        for (int i = 0; i < 5; i++) expect_image(&ds, i, ids[i], want_channels);
        free_dataset(&ds);
    }
    remove_tree(root);
}

/* Grey PNG files are 1 channel (channels 0), repeated as colour; JPEG files of both kinds mix
 * with them, converted as asked. */
static void test_grey_and_jpeg(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    write_png(root, "test/a/1.png", 5, H, W, 0);
    static const uint8_t orange[3] = {200, 100, 50}, grey[3] = {90, 90, 90};
    write_jpeg(root, "test/a/2.jpg", H, W, 1, orange);
    write_jpeg(root, "test/b/3.jpeg", H, W, 0, grey);
    cn_dataset ds = {0};
    cn_error err = {{0}};
    if (read_split(&ds, root, "test", 0, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.channels, 1);
    assert_int_equal(ds.count, 3);
    assert_memory_equal(ds.labels, ((const uint8_t[]){0, 1, 0}), 3); /* a/1, b/3, a/2 */
    for (int r = 0; r < H; r++)
        for (int c = 0; c < W; c++) assert_int_equal(ds.pixels[r * W + c], sample(5, 0, r, c));
    int luma = (200 * 19595 + 100 * 38470 + 50 * 7471 + 0x8000) >> 16;
    for (int i = 0; i < H * W; i++) {
        assert_true(abs(ds.pixels[H * W + i] - 90) <= 2);
        assert_true(abs(ds.pixels[2 * H * W + i] - luma) <= 2);
    }
    free_dataset(&ds);
    if (read_split(&ds, root, "test", 3, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.channels, 3);
    size_t plane = H * W;
    for (int ch = 0; ch < 3; ch++)
        for (size_t i = 0; i < plane; i++) {
            assert_int_equal(ds.pixels[ch * plane + i], ds.pixels[i]); /* grey repeated */
            assert_true(abs(ds.pixels[(3 + ch) * plane + i] - 90) <= 2);
            assert_true(abs(ds.pixels[(6 + ch) * plane + i] - orange[ch]) <= 2);
        }
    free_dataset(&ds);
    remove_tree(root);
}

/* Classes of 6, 3 and 1 files are spread over the split by (k + 1/2) / n, ties in class order
 * (b's second file and c's only one, both at 1/2): any run of it holds about their shares. */
static void test_classes_spread_over_the_split(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    static const struct {
        const char *file;
        int id;
    } files[] = {{"train/a/0.png", 0}, {"train/a/1.png", 1}, {"train/a/2.png", 2},
                 {"train/a/3.png", 3}, {"train/a/4.png", 4}, {"train/a/5.png", 5},
                 {"train/b/0.png", 6}, {"train/b/1.png", 7}, {"train/b/2.png", 8},
                 {"train/c/0.png", 9}};
    for (int i = 0; i < 10; i++) write_png(root, files[i].file, files[i].id, H, W, 1);
    cn_dataset ds = {0};
    cn_error err = {{0}};
    if (read_split(&ds, root, "train", 3, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.count, 10);
    assert_memory_equal(ds.labels, ((const uint8_t[]){0, 1, 0, 0, 1, 2, 0, 0, 1, 0}), 10);
    static const int ids[] = {0, 6, 1, 2, 7, 9, 3, 4, 8, 5};
    for (int i = 0; i < 10; i++) expect_image(&ds, i, ids[i], 3);
    free_dataset(&ds);
    remove_tree(root);
}

/* With a size to scale to, images of any sizes (PNG and JPEG, grey and colour, one already
 * of that size) are each the pixels cn_image_read_resized gives for its file: scaled as
 * `cnnc predict` scales them. A size with a side of 0 or too large is refused. */
static void test_scaled_to_a_size(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    static const uint8_t teal[3] = {20, 140, 150};
    /* in the dataset's order: each class's first file, then each one's second */
    static const char *const files[] = {"train/a/1.png", "train/b/3.png", "train/a/2.jpg",
                                        "train/b/4.png"};
    write_png(root, files[0], 1, 6, 8, 1); /* the size asked for */
    write_jpeg(root, files[2], 11, 13, 1, teal);
    write_png(root, files[1], 2, 3, 5, 0);
    write_png(root, files[3], 3, 17, 4, 1);
    static const int channels[] = {0, 1, 3};
    for (int k = 0; k < 3; k++) {
        cn_dataset ds = {0};
        cn_error err = {{0}};
        cn_data_source src = {.dir = root, .channels = channels[k], .height = 6, .width = 8};
        if (cn_folder_split_read(&ds, &src, "train", &err) != 0) fail_msg("%s", err.msg);
        int want_channels = channels[k] ? channels[k] : 3;
        assert_int_equal(ds.count, 4);
        assert_int_equal(ds.channels, want_channels);
        assert_int_equal(ds.height, 6);
        assert_int_equal(ds.width, 8);
        size_t size = (size_t)want_channels * 6 * 8;
        for (int i = 0; i < 4; i++) {
            uint8_t want[3 * 6 * 8];
            char *path = tu_join(root, files[i]);
            if (cn_image_read_resized(path, want_channels, 6, 8, want, NULL, NULL, &err) != 0)
                fail_msg("%s", err.msg);
            free(path);
            if (memcmp(ds.pixels + (size_t)i * size, want, size) != 0)
                fail_msg("%s as %d channels: not the pixels of cn_image_read_resized", files[i],
                         want_channels);
        }
        assert_memory_equal(ds.labels, ((const uint8_t[]){0, 1, 0, 1}), 4);
        free_dataset(&ds);
    }
    static const int bad[][2] = {{6, 0}, {0, 8}, {-1, 8}, {CN_IMAGE_MAX_SIDE + 1, 8}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cn_dataset ds = {0};
        cn_error err = {{0}};
        cn_data_source src = {.dir = root, .height = bad[i][0], .width = bad[i][1]};
        assert_int_equal(cn_folder_split_read(&ds, &src, "train", &err), -1);
        assert_non_null(strstr(err.msg, "cannot scale images to"));
        free_dataset(&ds);
    }
    remove_tree(root);
}

/* ---------------------------------------------------------------- refusals */

/* Reading split of root (channels 0) fails with each of the texts (NULL-terminated) in its
 * message. */
static void expect_refused(const char *root, const char *split, const char *const *texts)
{
    cn_dataset ds = {0};
    cn_error err = {{0}};
    int rc = read_split(&ds, root, split, 0, &err);
    free_dataset(&ds);
    if (rc != -1) fail_msg("%s/%s: read, expected \"%s\"", root, split, texts[0]);
    for (int i = 0; texts[i]; i++)
        if (!strstr(err.msg, texts[i]))
            fail_msg("%s/%s: expected \"%s\" in \"%s\"", root, split, texts[i], err.msg);
}

#define REFUSED(root, split, ...) \
    expect_refused(root, split, (const char *const[]){__VA_ARGS__, NULL})

/* As ImageFolder, the files of a class are those named as images (any case) in its folder and
 * the folders below it, read by their content; other names are left out and counted, files named
 * as other image formats refused, and a folder that links back to one above it refused. */
static void test_folders_below_and_other_files(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    write_png(root, "train/a/day2/x.PNG", 1, H, W, 1);
    write_png(root, "train/a/day1/deeper/y.png", 0, H, W, 1);
    write_png(root, "train/a/z.JPEG", 2, H, W, 1); /* a PNG named as a JPEG: read as a PNG */
    write_png(root, "train/b/w.jpg", 3, H, W, 1);
    write_file(root, "train/a/day1/Thumbs.db", "x", 1);
    write_file(root, "train/b/notes.txt", "x", 1);
    write_file(root, "train/b/labels", "x", 1);
    write_file(root, "train/b/.hidden/v.png", "x", 1);
    cn_dataset ds = {0};
    cn_error err = {{0}};
    if (read_split(&ds, root, "train", 3, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.count, 4);
    assert_int_equal(ds.skipped, 3);
    /* a's files in strcmp order of their paths (day1/deeper/y, day2/x, z) at 1/6, 3/6 and 5/6,
     * b's only one at 3/6, after a's (class order) */
    assert_memory_equal(ds.labels, ((const uint8_t[]){0, 0, 1, 0}), 4);
    static const int ids[] = {0, 1, 3, 2};
    for (int i = 0; i < 4; i++) expect_image(&ds, i, ids[i], 3);
    free_dataset(&ds);
    write_file(root, "train/b/old/v.WebP", "x", 1);
    REFUSED(root, "train", "train/b/old/v.WebP: a WebP image by its name; folder datasets hold "
                           "PNG and JPEG files (convert it, or move it out of the folder)");
    char *webp = tu_join(root, "train/b/old/v.WebP"), *link = tu_join(root, "train/b/old/up");
    assert_int_equal(unlink(webp), 0);
    write_file(root, "train/b/v.pgm", "P5 5 4 255\n01234567890123456789", 31);
    REFUSED(root, "train", "train/b/v.pgm: a PGM image by its name");
    char *pgm = tu_join(root, "train/b/v.pgm");
    assert_int_equal(unlink(pgm), 0);
    assert_int_equal(symlink("..", link), 0); /* train/b/old/up is train/b */
    REFUSED(root, "train", "train/b/old/up: a link back to a folder above it");
    free(webp);
    free(pgm);
    free(link);
    remove_tree(root);
}

/* Any number of decoding threads reads the same bytes, and a split with two bad files gives the
 * same message, the first bad file's in dataset order, whatever the number. */
static void test_threads_decode_the_same(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    char rel[64];
    for (int i = 0; i < 23; i++) {
        snprintf(rel, sizeof rel, "train/c%d/%02d.png", i % 3, i);
        write_png(root, rel, i, H, W, i % 2);
    }
    cn_dataset one = {0};
    cn_error err = {{0}};
    cn_data_source src = {.dir = root, .channels = 3, .threads = 1};
    if (cn_folder_split_read(&one, &src, "train", &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(one.count, 23);
    static const int threads[] = {0, 2, 3, 7, 64, 1000};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        cn_dataset ds = {0};
        src.threads = threads[k];
        if (cn_folder_split_read(&ds, &src, "train", &err) != 0) fail_msg("%s", err.msg);
        assert_int_equal(ds.count, one.count);
        assert_memory_equal(ds.labels, one.labels, 23);
        assert_memory_equal(ds.pixels, one.pixels, (size_t)23 * 3 * H * W);
        free_dataset(&ds);
    }
    free_dataset(&one);
    write_file(root, "train/c1/04.png", "damaged", 7);
    write_file(root, "train/c2/20.png", "damaged", 7);
    char first[sizeof err.msg];
    src.threads = 1;
    assert_int_equal(cn_folder_split_read(&one, &src, "train", &err), -1);
    free_dataset(&one);
    snprintf(first, sizeof first, "%s", err.msg);
    assert_non_null(strstr(first, "04.png: not a PNG or JPEG image")); /* at 3/16 of the split */
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        cn_dataset ds = {0};
        src.threads = threads[k];
        assert_int_equal(cn_folder_split_read(&ds, &src, "train", &err), -1);
        assert_string_equal(err.msg, first);
        free_dataset(&ds);
    }
    remove_tree(root);
}

/* cn_folder_split_read of root (DIR/CLASS/IMAGE) split by share percent. */
static int read_share(cn_dataset *ds, const char *root, const char *split, int percent,
                      cn_error *err)
{
    cn_data_source src = {.dir = root, .channels = 3, .test_percent = percent};
    return cn_folder_split_read(ds, &src, split, err);
}

/* The test split (test set) or the training split of root by share percent, read or failed. */
static void read_share_ok(cn_dataset *ds, const char *root, int test, int percent)
{
    cn_error err = {{0}};
    if (read_share(ds, root, test ? "test" : "train", percent, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Whether file rel (CLASS/...) of a split by share percent is a test image: its own CRC-32. */
static int is_test_image(const char *rel, int percent)
{
    return crc32_z(0L, (const Bytef *)rel, strlen(rel)) % 100 < (uLong)percent;
}

/* Image i of ds is one of the nine ids (its first sample tells which, 53 being odd); returns
 * it. */
static int which_id(const cn_dataset *ds, int i)
{
    const uint8_t *px = ds->pixels + (size_t)i * 3 * H * W;
    for (int id = 0; id < 40; id++)
        if (px[0] == sample(id, 0, 0, 0)) return id;
    fail_msg("image %d is none of those written", i);
    return -1;
}

/* A folder of class folders, split by a share: each image's split is its path's CRC-32 modulo
 * 100 against the share, the folders below the classes included; the two splits part the
 * images, an image added later leaves the others where they were, a class may have none in a
 * split; a share out of range, a share of a folder that holds train/ and test/, and a split
 * with no images are refused. */
static void test_split_by_share(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    char rel[64][40];
    int n = 0, percent = 30;
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 16; k++, n++) {
            snprintf(rel[n], sizeof rel[n], "%s/%s%d.png", c ? "dog" : "cat", k % 3 ? "" : "old/",
                     k);
            write_png(root, rel[n], n, H, W, 1);
        }
    write_file(root, "cat/notes.txt", "x", 1);
    for (int round = 0; round < 2; round++) {
        int seen[40] = {0}, in_test = 0;
        for (int t = 0; t < 2; t++) {
            cn_dataset ds = {0};
            read_share_ok(&ds, root, t, percent);
            assert_int_equal(ds.classes, 2);
            assert_int_equal(ds.skipped, 1);
            for (int i = 0; i < ds.count; i++) {
                int id = which_id(&ds, i);
                if (is_test_image(rel[id], percent) != t)
                    fail_msg("%s read in the %s split", rel[id], t ? "test" : "training");
                assert_int_equal(ds.labels[i], strncmp(rel[id], "dog", 3) == 0);
                seen[id]++;
            }
            in_test += t * ds.count;
            free_dataset(&ds);
        }
        for (int id = 0; id < n; id++) assert_int_equal(seen[id], 1);
        assert_true(in_test > 0 && in_test < n);
        snprintf(rel[n], sizeof rel[n], "dog/new.png"); /* round 2: one more image */
        write_png(root, rel[n], n, H, W, 1);
        n++;
    }
    write_png(root, "bird/only.png", 39, H, W, 1); /* one image: one split has none of it */
    for (int t = 0; t < 2; t++) {
        cn_dataset ds = {0};
        read_share_ok(&ds, root, t, percent);
        assert_int_equal(ds.classes, 3);
        free_dataset(&ds);
    }
    cn_dataset ds = {0};
    cn_error err = {{0}};
    assert_int_equal(read_share(&ds, root, "test", 100, &err), -1);
    assert_non_null(strstr(err.msg, "cannot take 100% of the images as test images"));
    remove_tree(root);
    root = tu_make_temp_dir("folder");
    write_png(root, "cat/a.png", 0, H, W, 1);
    int test = is_test_image("cat/a.png", 50);
    assert_int_equal(read_share(&ds, root, test ? "test" : "train", 50, &err), 0);
    free_dataset(&ds);
    assert_int_equal(read_share(&ds, root, test ? "train" : "test", 50, &err), -1);
    assert_non_null(strstr(err.msg, test ? "none of the images is a training image (50% are test"
                                         : "none of the images is a test image (50% are test"));
    free_dataset(&ds);
    write_png(root, "train/cat/a.png", 0, H, W, 1);
    assert_int_equal(read_share(&ds, root, "train", 50, &err), -1);
    assert_non_null(strstr(err.msg, "holds train/ and test/, its own splits"));
    free_dataset(&ds);
    remove_tree(root);
}

static void test_mixed_sizes(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    write_png(root, "train/a/1.png", 0, H, W, 1);
    write_png(root, "train/b/1.png", 1, H + 1, W, 1);
    REFUSED(root, "train", "train/b/1.png: image is 5x5 pixels", "train/a/1.png) is 5x4",
            "images of mixed sizes");
    remove_tree(root);
}

static void test_empty_class_folder(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    write_png(root, "train/a/1.png", 0, H, W, 1);
    make_folder(root, "train/b");
    write_file(root, "train/b/.keep", "", 0);
    write_file(root, "train/b/notes.txt", "no image", 8);
    make_folder(root, "train/b/sub");
    REFUSED(root, "train", "train/b: a class folder without images (no .png, .jpg or .jpeg "
                           "files in it or below it)");
    remove_tree(root);
}

static void test_undecodable_files(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    write_png(root, "train/a/1.png", 0, H, W, 1);
    write_file(root, "train/a/2.png", "not an image at all", 19);
    REFUSED(root, "train", "train/a/2.png: not a PNG or JPEG image");
    write_file(root, "train/a/2.png", "P5 5 4 255\n01234567890123456789", 31);
    REFUSED(root, "train", "train/a/2.png: not a PNG or JPEG image"); /* PGM: not here */
    write_file(root, "train/a/2.png", "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
    REFUSED(root, "train", "train/a/2.png: not a valid PNG");
    remove_tree(root);
}

static void test_missing_split_and_classes(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    REFUSED(root, "train", "/train: no such folder (a folder dataset holds train/CLASS/IMAGE and "
                           "test/CLASS/IMAGE, or CLASS/IMAGE with a share of test images: "
                           "--test-percent P)");
    write_file(root, "train", "a file", 6);
    REFUSED(root, "train", "/train: cannot open the folder: Not a directory");
    char *file = tu_join(root, "train");
    assert_int_equal(unlink(file), 0);
    free(file);
    make_folder(root, "train");
    write_file(root, "train/loose.png", "x", 1);
    REFUSED(root, "train", "/train: no class folders");
    remove_tree(root);
    cn_dataset ds = {0};
    cn_error err = {{0}};
    assert_int_equal(read_split(&ds, "/tmp", "train", 2, &err), -1);
    assert_non_null(strstr(err.msg, "as 2 channels"));
}

/* A named pipe in a class folder is refused at once, not waited on; so is a folder. */
static void test_named_pipe(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    write_png(root, "train/a/1.png", 0, H, W, 1);
    char *fifo = make_path(root, "train/a/2.png");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(20); /* a hang ends the test */
    REFUSED(root, "train", "train/a/2.png: not a regular file (a named pipe)");
    assert_int_equal(unlink(fifo), 0);
    free(fifo);
    make_folder(root, "train/b");
    make_folder(root, "train/b/inner.png");
    REFUSED(root, "train", "train/b/inner.png: not a regular file (a folder)");
    alarm(0);
    remove_tree(root);
}

static void test_class_names_and_count(void **state)
{
    (void)state;
    char *root = tu_make_temp_dir("folder");
    char name[80];
    memset(name, 'n', 64);
    snprintf(name + 64, sizeof name - 64, "/1.png");
    write_png(root, "train/a/1.png", 0, H, W, 1);
    char rel[128];
    snprintf(rel, sizeof rel, "train/%s", name);
    write_png(root, rel, 0, H, W, 1);
    REFUSED(root, "train", "a class name longer than 63 bytes");
    snprintf(rel, sizeof rel, "train/%.64s", name);
    char *long_class = tu_join(root, rel);
    char *tab = tu_join(root, "train/tab\there");
    assert_int_equal(rename(long_class, tab), 0);
    REFUSED(root, "train", "a class folder's name: class 1: a name may not hold control characters");
    free(long_class);
    free(tab);
    remove_tree(root);
    root = tu_make_temp_dir("folder");
    for (int c = 0; c <= CN_MAX_CLASSES; c++) {
        snprintf(rel, sizeof rel, "train/c%03d", c);
        make_folder(root, rel);
    }
    REFUSED(root, "train", "/train: more than 256 class folders");
    remove_tree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_colour_classes_and_labels),
        cmocka_unit_test(test_grey_and_jpeg),
        cmocka_unit_test(test_classes_spread_over_the_split),
        cmocka_unit_test(test_scaled_to_a_size),
        cmocka_unit_test(test_folders_below_and_other_files),
        cmocka_unit_test(test_split_by_share),
        cmocka_unit_test(test_threads_decode_the_same),
        cmocka_unit_test(test_mixed_sizes),
        cmocka_unit_test(test_empty_class_folder),
        cmocka_unit_test(test_undecodable_files),
        cmocka_unit_test(test_missing_split_and_classes),
        cmocka_unit_test(test_named_pipe),
        cmocka_unit_test(test_class_names_and_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
