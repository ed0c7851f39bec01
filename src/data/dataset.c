/* dataset.c — loads one Fashion-MNIST split (images and labels, .gz or raw IDX) into memory,
 * checks that the two files belong together (from their headers, before either body is read),
 * and turns pixels into the normalised floats the model reads. It does not shuffle, batch,
 * augment or download anything; file format checks live in idx.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/idx.h"
#include "model/model.h"

#define IMAGE_SIDE 28
#define DATA_PATH_MAX 4096
#define INSTALL_HINT                                                                              \
    "install Debian's dataset-fashion-mnist (sudo apt-get install dataset-fashion-mnist) or "    \
    "pass --data-dir DIR"

const char *const cn_class_names[CN_NUM_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};


void cn_pixel_values(float table[256])
{
    for (int p = 0; p < 256; p++) table[p] = ((float)p / 255.0f - CN_PIXEL_MEAN) / CN_PIXEL_STD;
}

void cn_normalize(float *out, const uint8_t *pixels, size_t n)
{
    float table[256];
    cn_pixel_values(table);
    for (size_t i = 0; i < n; i++) out[i] = table[pixels[i]];
}

void cn_dataset_free(cn_dataset *ds)
{
    if (!ds) return;
    free(ds->pixels);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

static int check_data_dir(const char *dir, cn_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return cn_fail(err, "%s: data folder not found (%s) — " INSTALL_HINT, dir,
                       strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cn_fail(err, "%s: not a folder — pass the folder that holds the Fashion-MNIST "
                            "files with --data-dir DIR",
                       dir);
    return 0;
}

/* True when the path is there, or when it cannot be checked for a reason other than absence
 * (opening it will then say why). */
static int path_may_exist(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) return 1;
    return errno != ENOENT && errno != ENOTDIR;
}

static int join_path(char *out, const char *dir, const char *split, const char *kind,
                     const char *suffix, cn_error *err)
{
    size_t len = strlen(dir);
    const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
    int n = snprintf(out, DATA_PATH_MAX, "%s%s%s-%s%s", dir, sep, split, kind, suffix);
    if (n < 0 || n >= DATA_PATH_MAX) return cn_fail(err, "%s: path too long", dir);
    return 0;
}

/* Picks DIR/SPLIT-KIND.gz, else DIR/SPLIT-KIND. */
static int find_split_file(char *out, const char *dir, const char *split, const char *kind,
                           cn_error *err)
{
    if (join_path(out, dir, split, kind, ".gz", err) < 0) return -1;
    if (path_may_exist(out)) return 0;
    if (join_path(out, dir, split, kind, "", err) < 0) return -1;
    if (path_may_exist(out)) return 0;
    join_path(out, dir, split, kind, ".gz", err);
    return cn_fail(err, "%s: not found (nor without .gz) — " INSTALL_HINT, out);
}

static int check_image_size(const char *path, const int *dims, cn_error *err)
{
    if (dims[1] != IMAGE_SIDE || dims[2] != IMAGE_SIDE)
        return cn_fail(err, "%s: images are %dx%d, expected %dx%d (Fashion-MNIST)", path, dims[1],
                       dims[2], IMAGE_SIDE, IMAGE_SIDE);
    return 0;
}

static int check_counts(const char *image_path, int images, const char *label_path, int labels,
                        cn_error *err)
{
    if (images != labels)
        return cn_fail(err, "%s has %d images but %s has %d labels — files of different splits?",
                       image_path, images, label_path, labels);
    return 0;
}

static int check_labels(const char *path, const uint8_t *labels, int count, cn_error *err)
{
    for (int i = 0; i < count; i++)
        if (labels[i] >= CN_NUM_CLASSES)
            return cn_fail(err, "%s: label at index %d is %u, outside 0..%d", path, i,
                           (unsigned)labels[i], CN_NUM_CLASSES - 1);
    return 0;
}

/* Reads both headers and checks them against each other, then the labels (small), then the
 * images: a header that does not fit the other file costs no decompression and no buffer. */
static int read_split(cn_dataset *ds, const char *image_path, const char *label_path,
                      cn_error *err)
{
    uint8_t *pixels = NULL, *labels = NULL;
    int image_dims[3] = {0}, label_dims[3] = {0};
    cn_idx_file *image_file = cn_idx_open(image_path, 3, image_dims, err);
    cn_idx_file *label_file = image_file ? cn_idx_open(label_path, 1, label_dims, err) : NULL;
    int rc = label_file ? 0 : -1;
    if (rc == 0) rc = check_image_size(image_path, image_dims, err);
    if (rc == 0) rc = check_counts(image_path, image_dims[0], label_path, label_dims[0], err);
    if (rc == 0) rc = cn_idx_read_data(label_file, &labels, err);
    if (rc == 0) rc = check_labels(label_path, labels, label_dims[0], err);
    if (rc == 0) rc = cn_idx_read_data(image_file, &pixels, err);
    cn_idx_close(image_file);
    cn_idx_close(label_file);
    if (rc < 0) {
        free(pixels);
        free(labels);
        return -1;
    }
    ds->count = image_dims[0];
    ds->rows = image_dims[1];
    ds->cols = image_dims[2];
    ds->pixels = pixels;
    ds->labels = labels;
    return 0;
}

int cn_dataset_load(cn_dataset *ds, const char *dir, const char *split, cn_error *err)
{
    if (!ds || !dir || !split || !*split)
        return cn_fail(err, "cn_dataset_load: missing dataset, folder or split name");
    memset(ds, 0, sizeof *ds);
    char image_path[DATA_PATH_MAX], label_path[DATA_PATH_MAX];
    if (check_data_dir(dir, err) < 0) return -1;
    if (find_split_file(image_path, dir, split, "images-idx3-ubyte", err) < 0) return -1;
    if (find_split_file(label_path, dir, split, "labels-idx1-ubyte", err) < 0) return -1;
    return read_split(ds, image_path, label_path, err);
}
