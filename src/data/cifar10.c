/* cifar10.c — CIFAR-10's binary version: data_batch_1.bin .. data_batch_5.bin (training) and
 * test_batch.bin, each a run of 3,073-byte records (a label byte, then the 32x32 red, green and
 * blue planes, rows in order), and the class names of batches.meta.txt. The record layout is
 * the model's input layout, so records are split, not converted. Every file's size is checked
 * before its records are taken; nothing is allocated beyond what the files hold. It does not
 * read CIFAR-100 or the Python version (pickles). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/formats.h"
#include "files/file_read.h"

#define CIFAR_TRAIN_FILES 5
#define CIFAR_IMAGE (CN_CIFAR10_RECORD - 1)
#define CIFAR_FILE_LIMIT ((uint64_t)1 << 30)

int cn_cifar10_parse(cn_dataset *ds, const uint8_t *bytes, size_t len, const char *source,
                     cn_error *err)
{
    if (len == 0 || len % CN_CIFAR10_RECORD != 0)
        return cn_fail(err, "%s: %zu bytes is not a whole number of CIFAR-10 records (%d bytes "
                       "each: a label and a 3x32x32 image) — a truncated file?", source, len,
                       CN_CIFAR10_RECORD);
    size_t n = len / CN_CIFAR10_RECORD;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *record = bytes + i * CN_CIFAR10_RECORD;
        if (record[0] >= CN_CIFAR10_CLASSES)
            return cn_fail(err, "%s: record %zu has label %d, outside 0..%d", source, i,
                           record[0], CN_CIFAR10_CLASSES - 1);
        size_t at = (size_t)ds->count + i;
        ds->labels[at] = record[0];
        memcpy(ds->pixels + at * CIFAR_IMAGE, record + 1, CIFAR_IMAGE);
    }
    ds->count += (int)n;
    return 0;
}

/* The batch files of a split and their sizes, checked before anything is read. */
typedef struct {
    char path[CIFAR_TRAIN_FILES][CN_DATA_PATH_MAX];
    uint64_t size[CIFAR_TRAIN_FILES];
    int files;
    uint64_t records;
} batch_list;

static int add_batch(batch_list *b, const char *dir, const char *name, cn_error *err)
{
    char *path = b->path[b->files];
    if (cn_data_path(path, dir, name, err)) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return cn_fail(err, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return cn_fail(err, "%s: not a regular file (%s)", path, cn_file_kind(st.st_mode));
    uint64_t size = (uint64_t)st.st_size;
    if (size == 0 || size % CN_CIFAR10_RECORD != 0)
        return cn_fail(err, "%s: %llu bytes is not a whole number of CIFAR-10 records (%d bytes "
                       "each) — a truncated file?", path, (unsigned long long)size,
                       CN_CIFAR10_RECORD);
    if (size > CIFAR_FILE_LIMIT)
        return cn_fail(err, "%s: %llu bytes is more than a CIFAR-10 batch file may hold here",
                       path, (unsigned long long)size);
    b->size[b->files++] = size;
    b->records += size / CN_CIFAR10_RECORD;
    return 0;
}

static int list_batches(batch_list *b, const char *dir, const char *split, cn_error *err)
{
    if (strcmp(split, "train") != 0) return add_batch(b, dir, "test_batch.bin", err);
    for (int i = 1; i <= CIFAR_TRAIN_FILES; i++) {
        char name[32], path[CN_DATA_PATH_MAX];
        snprintf(name, sizeof name, "data_batch_%d.bin", i);
        if (i > 1 && (cn_data_path(path, dir, name, err) || !cn_data_path_may_exist(path)))
            break; /* the batches that follow data_batch_1.bin without a gap */
        if (add_batch(b, dir, name, err)) return -1;
    }
    if (b->records > (uint64_t)(INT32_MAX / 2))
        return cn_fail(err, "%s: %llu CIFAR-10 records are more than cnnc reads", dir,
                       (unsigned long long)b->records);
    return 0;
}

static int read_batch(cn_dataset *ds, const char *path, uint64_t size, cn_error *err)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = cn_read_file(path, size, &bytes, &len, err);
    if (rc == 0 && len != size)
        rc = cn_fail(err, "%s: changed size while being read", path);
    else if (rc == CN_FILE_TOO_LARGE)
        rc = cn_fail(err, "%s: grew while being read", path);
    if (rc == 0) rc = cn_cifar10_parse(ds, bytes, len, path, err);
    free(bytes);
    return rc;
}

static int read_names(cn_dataset *ds, const char *dir, cn_error *err)
{
    char path[CN_DATA_PATH_MAX];
    if (cn_data_path(path, dir, "batches.meta.txt", err)) return -1;
    if (!cn_data_path_may_exist(path)) return 0;
    int n = 0;
    if (cn_class_names_read(path, &ds->class_names, &n, err)) return -1;
    ds->classes = n;
    if (n != CN_CIFAR10_CLASSES)
        return cn_fail(err, "%s: %d class names, CIFAR-10 has %d", path, n, CN_CIFAR10_CLASSES);
    return 0;
}

int cn_cifar10_split_read(cn_dataset *ds, const char *dir, const char *split, cn_error *err)
{
    batch_list *b = calloc(1, sizeof *b);
    if (!b) return cn_fail(err, "out of memory");
    int rc = list_batches(b, dir, split, err);
    if (rc == 0) {
        ds->pixels = malloc((size_t)b->records * CIFAR_IMAGE);
        ds->labels = malloc((size_t)b->records);
        if (!ds->pixels || !ds->labels)
            rc = cn_fail(err, "%s: out of memory for %llu CIFAR-10 images", dir,
                         (unsigned long long)b->records);
    }
    ds->channels = 3, ds->height = ds->width = CN_CIFAR10_SIDE;
    for (int i = 0; rc == 0 && i < b->files; i++) rc = read_batch(ds, b->path[i], b->size[i], err);
    free(b);
    if (rc == 0) rc = read_names(ds, dir, err);
    if (rc == 0 && ds->classes == 0) ds->classes = CN_CIFAR10_CLASSES;
    return rc;
}
