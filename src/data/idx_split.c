/* idx_split.c — one split of the MNIST family: DIR/SPLIT-images-idx3-ubyte and
 * DIR/SPLIT-labels-idx1-ubyte (each raw or .gz), grey images of any size, with the two headers
 * checked against each other before either body is read. It does not name the classes or check
 * the labels against a class count (dataset.c does); the file format is idx.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/formats.h"
#include "data/idx.h"

/* Picks DIR/PREFIX-KIND.gz, else DIR/PREFIX-KIND. */
static int find_file(char *out, const char *dir, const char *prefix, const char *kind,
                     cn_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s-%s.gz", prefix, kind);
    if (cn_data_path(out, dir, name, err)) return -1;
    if (cn_data_path_may_exist(out)) return 0;
    snprintf(name, sizeof name, "%s-%s", prefix, kind);
    if (cn_data_path(out, dir, name, err)) return -1;
    if (cn_data_path_may_exist(out)) return 0;
    return cn_fail(err, "%s.gz: not found (nor without .gz) — " CN_DATA_FASHION_HINT, out);
}

static int check_counts(const char *image_path, int images, const char *label_path, int labels,
                        cn_error *err)
{
    if (images != labels)
        return cn_fail(err, "%s has %d images but %s has %d labels — files of different splits?",
                       image_path, images, label_path, labels);
    return 0;
}

/* Reads both headers and checks them against each other, then the labels (small), then the
 * images: a header that does not fit the other file costs no decompression and no buffer. */
static int read_pair(cn_dataset *ds, const char *image_path, const char *label_path,
                     cn_error *err)
{
    int image_dims[3] = {0}, label_dims[3] = {0};
    cn_idx_file *images = cn_idx_open(image_path, 3, image_dims, err);
    cn_idx_file *labels = images ? cn_idx_open(label_path, 1, label_dims, err) : NULL;
    int rc = labels ? 0 : -1;
    if (rc == 0) rc = check_counts(image_path, image_dims[0], label_path, label_dims[0], err);
    if (rc == 0) rc = cn_idx_read_data(labels, &ds->labels, err);
    if (rc == 0) rc = cn_idx_read_data(images, &ds->pixels, err);
    cn_idx_close(images);
    cn_idx_close(labels);
    if (rc < 0) return -1;
    ds->count = image_dims[0];
    ds->channels = 1, ds->height = image_dims[1], ds->width = image_dims[2];
    return 0;
}

int cn_idx_split_read(cn_dataset *ds, const char *dir, const char *split, cn_error *err)
{
    const char *prefix = strcmp(split, "train") == 0 ? "train" : "t10k";
    char image_path[CN_DATA_PATH_MAX], label_path[CN_DATA_PATH_MAX];
    if (find_file(image_path, dir, prefix, "images-idx3-ubyte", err) ||
        find_file(label_path, dir, prefix, "labels-idx1-ubyte", err))
        return -1;
    return read_pair(ds, image_path, label_path, err);
}
