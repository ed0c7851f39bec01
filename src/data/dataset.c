/* dataset.c — cn_dataset_read: which format a folder holds, the reader of that format
 * (idx_split.c, cifar10.c, folder.c), the class names and count, the labels checked against
 * them; and the normalisation a training set implies. It does not shuffle, batch, augment or
 * download anything, and turns no pixel into a float (the model does, with its
 * normalisation). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/formats.h"

const char *const cn_fashion_mnist_names[CN_FASHION_MNIST_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

/* CRC-32 of the labels of Fashion-MNIST's training and test sets (60,000 and 10,000 bytes). */
static const struct {
    int count;
    uint32_t crc;
} fashion_labels[] = {{60000, 0x2ed6e46au}, {10000, 0x242bc73fu}};

typedef int (*split_reader)(cn_dataset *ds, const cn_data_source *src, const char *split,
                            cn_error *err);

static int read_idx(cn_dataset *ds, const cn_data_source *src, const char *split, cn_error *err)
{
    return cn_idx_split_read(ds, src->dir, split, err);
}

static int read_cifar10(cn_dataset *ds, const cn_data_source *src, const char *split,
                        cn_error *err)
{
    return cn_cifar10_split_read(ds, src->dir, split, err);
}

static int read_folder(cn_dataset *ds, const cn_data_source *src, const char *split,
                       cn_error *err)
{
    return cn_folder_split_read(ds, src, split, err);
}

/* Each format: its name, its reader, and the files whose presence shows it (auto). */
static const struct {
    const char *name;
    split_reader read;
    const char *markers[5];
} formats[] = {
    [CN_DATA_AUTO] = {"auto", NULL, {NULL}},
    [CN_DATA_IDX] = {"idx", read_idx, {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte",
                                       "t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte"}},
    [CN_DATA_CIFAR10] = {"cifar10", read_cifar10, {"data_batch_1.bin", "test_batch.bin"}},
    [CN_DATA_FOLDER] = {"folder", read_folder, {"train", "test"}},
};
_Static_assert(sizeof formats / sizeof formats[0] == CN_DATA_FORMAT_COUNT,
               "one entry per cn_data_format");

const char *cn_data_format_name(cn_data_format f)
{
    return (unsigned)f < CN_DATA_FORMAT_COUNT ? formats[f].name : "unknown";
}

int cn_data_format_from_name(const char *name, cn_data_format *f)
{
    for (int i = 0; name && i < CN_DATA_FORMAT_COUNT; i++)
        if (strcmp(name, formats[i].name) == 0) {
            *f = (cn_data_format)i;
            return 0;
        }
    return -1;
}

int cn_data_path(char *out, const char *dir, const char *name, cn_error *err)
{
    size_t len = strlen(dir);
    const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
    int n = snprintf(out, CN_DATA_PATH_MAX, "%s%s%s", dir, sep, name);
    if (n < 0 || n >= CN_DATA_PATH_MAX) return cn_fail(err, "%s: path too long", dir);
    return 0;
}

int cn_data_path_may_exist(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) return 1;
    return errno != ENOENT && errno != ENOTDIR;
}

void cn_dataset_free(cn_dataset *ds)
{
    if (!ds) return;
    free(ds->pixels);
    free(ds->labels);
    cn_class_names_free(ds->class_names, ds->classes);
    memset(ds, 0, sizeof *ds);
}

const char *cn_dataset_class_name(const cn_dataset *ds, int c)
{
    return ds->class_names && c >= 0 && c < ds->classes ? ds->class_names[c] : NULL;
}

static int check_data_dir(const char *dir, cn_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return cn_fail(err, "%s: data folder not found (%s) — " CN_DATA_FASHION_HINT, dir,
                       strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cn_fail(err, "%s: not a folder (%s) — pass the folder that holds the dataset's "
                       "files with --data-dir DIR", dir, cn_file_kind(st.st_mode));
    return 0;
}

static int holds(const char *dir, const char *name)
{
    char path[CN_DATA_PATH_MAX];
    return cn_data_path(path, dir, name, NULL) == 0 && cn_data_path_may_exist(path);
}

/* The first format, in the order of the table, whose files dir holds. */
static int detect_format(const char *dir, cn_data_format *f, cn_error *err)
{
    for (int i = CN_DATA_AUTO + 1; i < CN_DATA_FORMAT_COUNT; i++)
        for (int k = 0; formats[i].markers[k]; k++)
            if (holds(dir, formats[i].markers[k])) {
                *f = (cn_data_format)i;
                return 0;
            }
    return cn_fail(err, "%s: no dataset found: expected IDX files (train-images-idx3-ubyte[.gz], "
                   "...), CIFAR-10 batches (data_batch_1.bin, test_batch.bin) or folders "
                   "train/CLASS/ and test/CLASS/ of images (for CLASS/ alone, --test-percent P) "
                   "— " CN_DATA_FASHION_HINT, dir);
}

static int is_fashion_mnist(const cn_dataset *ds)
{
    if (ds->channels != 1 || ds->height != 28 || ds->width != 28) return 0;
    uint32_t crc = (uint32_t)crc32_z(0L, ds->labels, (size_t)ds->count);
    for (size_t i = 0; i < sizeof fashion_labels / sizeof fashion_labels[0]; i++)
        if (ds->count == fashion_labels[i].count && crc == fashion_labels[i].crc) return 1;
    return 0;
}

static int copy_names(cn_dataset *ds, const char *const *names, int n, cn_error *err)
{
    ds->class_names = calloc((size_t)n, sizeof *ds->class_names);
    if (!ds->class_names) return cn_fail(err, "out of memory for %d class names", n);
    ds->classes = n;
    for (int c = 0; c < n; c++)
        if (!(ds->class_names[c] = strdup(names[c])))
            return cn_fail(err, "out of memory for %d class names", n);
    return 0;
}

/* The names of --classes FILE (replacing the format's), else the format's, else
 * DIR/classes.txt, else Fashion-MNIST's for its labels. */
static int name_classes(cn_dataset *ds, const cn_data_source *src, cn_error *err)
{
    char path[CN_DATA_PATH_MAX];
    const char *file = src->classes_file;
    if (!file && !ds->class_names && cn_data_path(path, src->dir, "classes.txt", NULL) == 0 &&
        cn_data_path_may_exist(path))
        file = path;
    if (file) {
        int had = ds->classes, n = 0;
        char **names = NULL;
        if (cn_class_names_read(file, &names, &n, err)) return -1;
        cn_class_names_free(ds->class_names, ds->classes);
        ds->class_names = names, ds->classes = n;
        if (had && had != n)
            return cn_fail(err, "%s: names %d classes, the data has %d", file, n, had);
        return 0;
    }
    if (!ds->class_names && is_fashion_mnist(ds))
        return copy_names(ds, cn_fashion_mnist_names, CN_FASHION_MNIST_CLASSES, err);
    return 0;
}

/* Without names, the classes are the labels seen; every label must name a class. */
static int check_labels(cn_dataset *ds, const cn_data_source *src, const char *split,
                        cn_error *err)
{
    int top = 0;
    for (int i = 0; i < ds->count; i++) top = ds->labels[i] > top ? ds->labels[i] : top;
    if (ds->classes == 0) ds->classes = top + 1;
    for (int i = 0; i < ds->count; i++)
        if (ds->labels[i] >= ds->classes)
            return cn_fail(err, "%s: %s sample %d has label %d, past the %d classes named%s%s",
                           src->dir, split, i, ds->labels[i], ds->classes,
                           src->classes_file ? " in " : "",
                           src->classes_file ? src->classes_file : "");
    return 0;
}

int cn_dataset_read(cn_dataset *ds, const cn_data_source *src, const char *split,
                    cn_error *err)
{
    if (!ds || !src || !src->dir || !split)
        return cn_fail(err, "cn_dataset_read: missing dataset, source or split");
    memset(ds, 0, sizeof *ds);
    if (strcmp(split, "train") != 0 && strcmp(split, "test") != 0)
        return cn_fail(err, "%s: unknown split \"%s\" (train or test)", src->dir, split);
    if (src->channels != 0 && src->channels != 1 && src->channels != 3)
        return cn_fail(err, "%s: images of %d channels (1 or 3)", src->dir, src->channels);
    cn_data_format f = src->format;
    int rc = check_data_dir(src->dir, err);
    if (rc == 0 && f == CN_DATA_AUTO) { /* a folder of class folders shows no marker */
        rc = detect_format(src->dir, &f, err);
        if (rc != 0 && src->test_percent) f = CN_DATA_FOLDER, rc = 0;
    }
    if (rc == 0 && (unsigned)f >= CN_DATA_FORMAT_COUNT)
        rc = cn_fail(err, "%s: unknown data format %d", src->dir, (int)f);
    if (rc == 0) rc = formats[f].read(ds, src, split, err);
    if (rc == 0) rc = name_classes(ds, src, err);
    if (rc == 0) rc = check_labels(ds, src, split, err);
    if (rc != 0) {
        cn_dataset_free(ds);
        return -1;
    }
    ds->format = f;
    return 0;
}

int cn_dataset_load(cn_dataset *ds, const char *dir, const char *split, cn_error *err)
{
    cn_data_source src = {.dir = dir};
    int t10k = split && strcmp(split, "t10k") == 0;
    return cn_dataset_read(ds, &src, t10k ? "test" : split, err);
}

int cn_dataset_normalization(const cn_dataset *ds, float *mean, float *std, cn_error *err)
{
    if (ds->count < 1) return cn_fail(err, "no samples to compute a normalisation from");
    size_t plane = (size_t)ds->height * ds->width;
    uint64_t *hist = calloc(256, sizeof *hist);
    if (!hist) return cn_fail(err, "out of memory");
    int rc = 0;
    for (int c = 0; c < ds->channels && rc == 0; c++) {
        memset(hist, 0, 256 * sizeof *hist);
        for (int s = 0; s < ds->count; s++) {
            const uint8_t *p = ds->pixels + ((size_t)s * ds->channels + c) * plane;
            for (size_t i = 0; i < plane; i++) hist[p[i]]++;
        }
        /* Exact integer sums: the same bits on every machine, whatever the order. */
        uint64_t n = 0, sum = 0, squares = 0; /* below 2^64 up to 2^48 pixels */
        for (int v = 0; v < 256; v++)
            n += hist[v], sum += hist[v] * (uint64_t)v, squares += hist[v] * (uint64_t)(v * v);
        double mu = (double)sum / (double)n;
        double var = ((double)squares / (double)n - mu * mu); /* in pixel units squared */
        mean[c] = (float)(mu / 255.0);
        std[c] = (float)(sqrt(var > 0 ? var : 0) / 255.0);
        if (!(std[c] > 0.0f))
            rc = cn_fail(err, "channel %d of the training images is constant (every pixel %d): "
                         "no normalisation can be computed from it", c, (int)(sum / n));
    }
    free(hist);
    return rc;
}
