/* formats.h — the readers of the dataset formats beyond Fashion-MNIST's IDX files, each filling
 * one split of a cn_dataset. Library-internal; the public entry is cn_dataset_load. It declares
 * no parsing helpers (those stay in each reader). */
#ifndef CN_FORMATS_H
#define CN_FORMATS_H

#include "cnnc.h"

/* Reads split "train" or "test" of an image folder in torchvision's ImageFolder layout:
 * DIR/SPLIT/CLASS/IMAGE, PNG or JPEG (decided by content), classes = the subfolder names in
 * sorted order (strcmp), labels their index. channels: 1 grey or 3 colour (converted as
 * cn_image_read does), 0 = as the first image is (1 for grey files, 3 otherwise). Every image
 * must have the first image's height and width. Fills ds (zeroed by the caller): count,
 * channels, height, width, classes, class_names (malloc'd array of malloc'd strings, freed by
 * cn_dataset_free), pixels [count, channels, height, width], labels. Images are taken class by
 * class, within a class in sorted file-name order. Errors (one line, naming the file or folder):
 * missing DIR/SPLIT, no class folders, an empty class folder, more than CN_MAX_CLASSES classes,
 * a class name longer than CN_CLASS_NAME_MAX bytes or with a control character, a file that is
 * not an image or does not decode, an image of another size than the first ("images of mixed
 * sizes"), too many images (more than INT_MAX/2 or more pixels than fit in memory), a
 * non-regular file in a class folder. Hidden files (starting with '.') are skipped. On failure
 * the arrays it allocated are left in ds for cn_dataset_free. */
int cn_folder_split_read(cn_dataset *ds, const char *dir, const char *split, int channels,
                         cn_error *err);

#endif /* CN_FORMATS_H */
