/* formats.h — the readers of one split of each dataset format (idx_split.c, cifar10.c,
 * folder.c) and what they share (class_names.c), behind cn_dataset_read (dataset.c), which
 * chooses the format, names the classes and checks the labels. A reader fills the images, the
 * labels and, when its format names the classes itself, the names; it decides nothing else. */
#ifndef CN_DATA_FORMATS_H
#define CN_DATA_FORMATS_H

#include "cnnc.h"

#define CN_DATA_PATH_MAX 4096
/* How to get the default dataset, for messages about a missing one. */
#define CN_DATA_FASHION_HINT                                                                      \
    "install Debian's dataset-fashion-mnist (sudo apt-get install dataset-fashion-mnist) or "    \
    "pass --data-dir DIR"

/* out = DIR/NAME (no doubled slash); -1 when it does not fit CN_DATA_PATH_MAX. */
int cn_data_path(char *out, const char *dir, const char *name, cn_error *err);
/* 1 when path is there, or cannot be checked for a reason other than absence (opening it
 * will then say why); 0 when it is absent. */
int cn_data_path_may_exist(const char *path);

/* Reads split "train" or "test" of the IDX files in dir (DIR/train-* or DIR/t10k-*, raw or
 * .gz): count, channels 1, height, width, pixels, labels; classes 0 (the files name none). */
int cn_idx_split_read(cn_dataset *ds, const char *dir, const char *split, cn_error *err);

/* Reads split "train" (data_batch_1.bin and the numbers that follow it) or "test"
 * (test_batch.bin) of CIFAR-10's binary version in dir: 3x32x32 images, classes 10, and the
 * names of DIR/batches.meta.txt when it is there. */
int cn_cifar10_split_read(cn_dataset *ds, const char *dir, const char *split, cn_error *err);
/* The records of one CIFAR-10 batch file held in memory (bytes, len; source names it in
 * messages) appended at ds->count: ds->pixels and ds->labels must have room for
 * len / CN_CIFAR10_RECORD more samples. -1 when len is 0 or not a multiple of the record size,
 * or a label is 10 or more. */
#define CN_CIFAR10_SIDE 32
#define CN_CIFAR10_RECORD (1 + 3 * CN_CIFAR10_SIDE * CN_CIFAR10_SIDE)
#define CN_CIFAR10_CLASSES 10
int cn_cifar10_parse(cn_dataset *ds, const uint8_t *bytes, size_t len, const char *source,
                     cn_error *err);

/* Reads split "train" or "test" of an image folder in torchvision's ImageFolder layout:
 * DIR/SPLIT/CLASS/IMAGE (DIR: src->dir), or, with src->test_percent, DIR/CLASS/IMAGE split by
 * that share (an image is a test image when the CRC-32 of its path below DIR, modulo 100, is
 * below it). Classes = the class folders' names in sorted order (strcmp), labels their index;
 * a class's images are the files named .png, .jpg or .jpeg (any case) in its folder and the
 * folders below it (decoded by content, PNG or JPEG), other files are left out and counted in
 * ds->skipped, files named as other image formats are refused. src->channels: 1 grey or 3
 * colour (converted as cn_image_read does), 0 = as the first image is (1 for grey files, 3
 * otherwise). With src->height and src->width every image is scaled to that size as it is
 * read (cn_image_resize); else every image must have the first image's height and width.
 * Fills ds (zeroed by the caller): count, channels, height, width, classes, class_names
 * (malloc'd array of malloc'd strings, freed by cn_dataset_free), pixels [count, channels,
 * height, width], labels, skipped. Each class's files are taken in sorted path order and
 * spread over the split: file k of a class of n by (k + 1/2) / n, ties in class order, so that
 * the first or last N images hold the classes in about their shares. Errors (one line, naming
 * the file or folder): missing DIR/SPLIT, no class folders, a class folder without images,
 * more than CN_MAX_CLASSES classes, a class name longer than CN_CLASS_NAME_MAX bytes or with a
 * control character, a file named as another image format, a file that does not decode, an
 * image of another size than the first ("images of mixed sizes", without a size to scale to),
 * too many images (more than INT_MAX/2 or more pixels than fit in memory), a non-regular file
 * named as an image, a folder that links back to one above it; with a share: a share outside
 * 1..99, DIR holding train/ or test/, a split without images. Hidden files and folders
 * (starting with '.') are skipped. On failure the arrays it allocated are left in ds for
 * cn_dataset_free. */
int cn_folder_split_read(cn_dataset *ds, const cn_data_source *src, const char *split,
                         cn_error *err);

/* Class names from text (len bytes, one name per line; a last line without a newline counts,
 * trailing empty lines and a "\r" before a newline are dropped; source names it in messages)
 * into *names, a malloc'd array of *count malloc'd strings (free with cn_class_names_free).
 * -1 for no names, more than CN_MAX_CLASSES, an empty name between others, a name over
 * CN_CLASS_NAME_MAX bytes or holding a control character, or bytes that are not UTF-8. */
int cn_class_names_parse(const char *text, size_t len, const char *source, char ***names,
                         int *count, cn_error *err);
/* The same from the file at path (a regular file of at most 64 KiB). */
int cn_class_names_read(const char *path, char ***names, int *count, cn_error *err);
/* 0 when name can name a class: 1 to CN_CLASS_NAME_MAX bytes of UTF-8 without control
 * characters; else -1 with "class C: ..." in err. */
int cn_class_name_check(const char *name, int c, cn_error *err);
/* Frees names[0..count) and the array; names may be NULL. */
void cn_class_names_free(char **names, int count);

#endif /* CN_DATA_FORMATS_H */
