/* folder.c — one split of an image folder in torchvision's ImageFolder layout,
 * DIR/SPLIT/CLASS/IMAGE: the class folders and, in each and in the folders below it, the image
 * files are listed and sorted first (so the pixel buffer is sized once, from the number of files
 * and the first image's size), then every file is read once and decoded straight into its place
 * in the dataset, the classes spread evenly over it (compare_places): by image.c and its
 * decoders, PNG and JPEG only, converted to the channels asked for, or, when a size is asked
 * for, decoded at its own size and scaled into its place (resize.c).
 * As ImageFolder, files are chosen by name: those named .png, .jpg or .jpeg (any case) are
 * images, whatever their content then proves; those named as other image formats (.bmp, .webp,
 * ...) are refused, since leaving them out would shrink the dataset unseen; anything else (notes,
 * Thumbs.db, annotations) is left out and counted. Names beginning with '.' are skipped, folders
 * included. A folder of class folders without train/ and test/ is split by a share
 * (cn_data_source.test_percent): an image is a test image when the CRC-32 of its path below DIR,
 * modulo 100, falls below the share, so that its split never depends on the other files (more
 * images added later keep theirs) and Python can tell it with zlib.crc32. Files are opened as
 * regular files only, so a named pipe or a device is refused, never waited on; a folder that is
 * its own ancestor through a link is refused, never walked forever. Images are decoded by
 * cn_data_source.threads threads at once, into their own places (decode_all), so the dataset is
 * the same bytes whatever their number. It does not crop, pad or augment images, keep their
 * aspect ratio when it scales them, or follow any list of files other than the folders
 * themselves. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/formats.h"
#include "data/image.h"

#define MAX_IMAGES (INT_MAX / 2)
#define MAX_DEPTH 32    /* folders below a class folder */
#define MAX_DECODERS 64 /* threads decoding images */

/* Sorted entry names of one folder. */
typedef struct {
    char **names;
    int n, cap;
} name_list;

/* What is being read: the split folder (DIR itself for a split by share), each class's sorted
 * files (paths below the class folder), and how many files were left out as not named as
 * images. share: test_percent, 0 for DIR/train and DIR/test; test: the test split is read. */
typedef struct {
    char *split_dir;
    name_list classes;
    name_list *files; /* [classes.n] */
    int total, skipped;
    int share, test;
} folder_plan;

static void free_names(name_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    *l = (name_list){NULL, 0, 0};
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s) return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

static int add_name(name_list *l, const char *name)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **names = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names) return -1;
        l->names = names;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name))) return -1;
    l->n++;
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether dir holds a folder (or a link to one) named name. */
static int holds_folder(const char *dir, const char *name)
{
    char *path = join(dir, name);
    int folder = path && is_folder(path);
    free(path);
    return folder;
}

/* The folders in dir whose names do not start with '.', sorted. At most CN_MAX_CLASSES. */
static int list_class_folders(const char *dir, name_list *l, cn_error *err)
{
    DIR *d = opendir(dir);
    if (!d) return cn_fail(err, "%s: cannot open the folder: %s", dir, strerror(errno));
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !holds_folder(dir, e->d_name)) continue;
        if (l->n >= CN_MAX_CLASSES)
            rc = cn_fail(err, "%s: more than %d class folders", dir, CN_MAX_CLASSES);
        else if (add_name(l, e->d_name) != 0)
            rc = cn_fail(err, "%s: out of memory listing the folder", dir);
    }
    closedir(d);
    if (rc == 0 && l->n > 1) qsort(l->names, (size_t)l->n, sizeof *l->names, compare_names);
    return rc;
}

/* A class folder's name must be a class name (cn_class_name_check). */
static int check_class_name(const char *split_dir, const char *name, int c, cn_error *err)
{
    cn_error why = {{0}};
    if (cn_class_name_check(name, c, &why) == 0) return 0;
    if (strlen(name) > CN_CLASS_NAME_MAX)
        return cn_fail(err, "%s/%.*s...: a class name longer than %d bytes", split_dir,
                       CN_CLASS_NAME_MAX, name, CN_CLASS_NAME_MAX);
    return cn_fail(err, "%s: a class folder's name: %s", split_dir, why.msg);
}

static int list_classes(folder_plan *plan, cn_error *err)
{
    struct stat st;
    if (stat(plan->split_dir, &st) != 0 && errno == ENOENT)
        return cn_fail(err, "%s: no such folder (a folder dataset holds train/CLASS/IMAGE and "
                       "test/CLASS/IMAGE, or CLASS/IMAGE with a share of test images: "
                       "--test-percent P)", plan->split_dir);
    if (list_class_folders(plan->split_dir, &plan->classes, err)) return -1;
    if (plan->classes.n == 0)
        return cn_fail(err, "%s: no class folders (images go in %s)", plan->split_dir,
                       plan->share ? "CLASS/IMAGE" : "SPLIT/CLASS/IMAGE");
    for (int c = 0; c < plan->classes.n; c++)
        if (check_class_name(plan->split_dir, plan->classes.names[c], c, err)) return -1;
    return 0;
}

/* What a file's name says it holds, by its extension: 1 an image cnnc reads, 0 anything else;
 * -1 another image format, refused (its name in *format). */
static int image_name(const char *name, const char **format)
{
    static const char *const readable[] = {"png", "jpg", "jpeg"};
    static const char *const other[][2] = {
        {"bmp", "BMP"},   {"gif", "GIF"},   {"webp", "WebP"}, {"tif", "TIFF"},
        {"tiff", "TIFF"}, {"pgm", "PGM"},   {"ppm", "PPM"},   {"pbm", "PBM"},
        {"pnm", "PNM"},   {"heic", "HEIC"}, {"heif", "HEIF"}, {"avif", "AVIF"},
        {"jxl", "JPEG XL"}, {"jp2", "JPEG 2000"}};
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    for (size_t i = 0; i < sizeof readable / sizeof *readable; i++)
        if (strcasecmp(dot + 1, readable[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        if (strcasecmp(dot + 1, other[i][0]) == 0) {
            *format = other[i][1];
            return -1;
        }
    return 0;
}

/* A walk through one class folder and the folders below it: their image files go to files as
 * paths below the class folder; above: the folders on the way down, whose identities no folder
 * below may repeat (a link back up). */
typedef struct {
    const char *root; /* the class folder */
    folder_plan *plan;
    name_list *files;  /* the plan's files of the class */
    uLong class_crc;   /* of "CLASS/", where a path's CRC-32 for a split by share begins */
    int found;         /* image files, in this split or not */
    struct stat above[MAX_DEPTH + 1];
    int depth;
} class_walk;

/* Whether image entry (its path below the class folder) is in the split being read: always,
 * unless the split is by share (see the top). */
static int in_split(const class_walk *w, const char *entry)
{
    if (w->plan->share == 0) return 1;
    uLong crc = crc32_z(w->class_crc, (const Bytef *)entry, strlen(entry));
    return (crc % 100 < (uLong)w->plan->share) == w->plan->test;
}

static int is_above(const class_walk *w, const struct stat *st)
{
    for (int i = 0; i < w->depth; i++)
        if (w->above[i].st_dev == st->st_dev && w->above[i].st_ino == st->st_ino) return 1;
    return 0;
}

static int walk_folder(class_walk *w, const char *rel, cn_error *err);

/* Image file entry (its path below the class folder), kept when it is in the split. */
static int add_image(class_walk *w, const char *entry, cn_error *err)
{
    w->found++;
    if (!in_split(w, entry)) return 0;
    if (w->files->n >= MAX_IMAGES)
        return cn_fail(err, "%s: more than %d images", w->root, MAX_IMAGES);
    if (add_name(w->files, entry) != 0)
        return cn_fail(err, "%s: out of memory listing the folder", w->root);
    return 0;
}

/* Folder entry (at full, st its identity) below the class folder, walked unless it is too deep
 * or one of the folders above it. */
static int walk_below(class_walk *w, const char *full, const char *entry, const struct stat *st,
                      cn_error *err)
{
    if (w->depth > MAX_DEPTH)
        return cn_fail(err, "%s: folders nested more than %d deep below the class folder", full,
                       MAX_DEPTH);
    if (is_above(w, st))
        return cn_fail(err, "%s: a link back to a folder above it, which would be walked "
                       "forever", full);
    w->above[w->depth++] = *st;
    int rc = walk_folder(w, entry, err);
    w->depth--;
    return rc;
}

/* Entry name of folder rel (path: the folder's path) below the class folder: an image, a folder
 * to walk, a file of another image format (refused) or any other file (left out). */
static int walk_entry(class_walk *w, const char *path, const char *rel, const char *name,
                      cn_error *err)
{
    const char *format = NULL;
    int kind = image_name(name, &format);
    char *entry = rel[0] ? join(rel, name) : strdup(name), *full = join(path, name);
    struct stat st;
    int rc = entry && full ? 0 : cn_fail(err, "%s: out of memory listing the folder", path);
    if (rc == 0 && kind == 1)
        rc = add_image(w, entry, err);
    else if (rc == 0 && stat(full, &st) == 0 && S_ISDIR(st.st_mode))
        rc = walk_below(w, full, entry, &st, err);
    else if (rc == 0 && kind == -1)
        rc = cn_fail(err, "%s: a %s image by its name; folder datasets hold PNG and JPEG files "
                     "(convert it, or move it out of the folder)", full, format);
    else if (rc == 0)
        w->plan->skipped++;
    free(entry);
    free(full);
    return rc;
}

/* The entries of folder rel below the class folder ("" for itself), but those starting '.'. */
static int walk_folder(class_walk *w, const char *rel, cn_error *err)
{
    char *path = rel[0] ? join(w->root, rel) : strdup(w->root);
    DIR *d = path ? opendir(path) : NULL;
    if (!d) {
        int rc = path ? cn_fail(err, "%s: cannot open the folder: %s", path, strerror(errno))
                      : cn_fail(err, "%s: out of memory", w->root);
        free(path);
        return rc;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') rc = walk_entry(w, path, rel, e->d_name, err);
    closedir(d);
    free(path);
    return rc;
}

/* Class c's image files in the split, sorted: a class folder without images is refused (a
 * class without images in a split by share is not), so is more than MAX_IMAGES in all. */
static int list_class_files(folder_plan *plan, int c, const char *dir, cn_error *err)
{
    const char *name = plan->classes.names[c];
    name_list *l = &plan->files[c];
    class_walk w = {.root = dir, .plan = plan, .files = l, .depth = 1};
    w.class_crc = crc32_z(crc32_z(0L, (const Bytef *)name, strlen(name)), (const Bytef *)"/", 1);
    if (stat(dir, &w.above[0]) != 0)
        return cn_fail(err, "%s: cannot open the folder: %s", dir, strerror(errno));
    if (walk_folder(&w, "", err)) return -1;
    if (w.found == 0)
        return cn_fail(err, "%s: a class folder without images (no .png, .jpg or .jpeg files "
                       "in it or below it)", dir);
    if (l->n > MAX_IMAGES - plan->total)
        return cn_fail(err, "%s: more than %d images in all", plan->split_dir, MAX_IMAGES);
    if (l->n > 1) /* none (a split by share) leaves names NULL */
        qsort(l->names, (size_t)l->n, sizeof *l->names, compare_names);
    plan->total += l->n;
    return 0;
}

static int list_files(folder_plan *plan, cn_error *err)
{
    plan->files = calloc((unsigned)plan->classes.n, sizeof *plan->files);
    if (!plan->files) return cn_fail(err, "%s: out of memory", plan->split_dir);
    for (int c = 0; c < plan->classes.n; c++) {
        char *dir = join(plan->split_dir, plan->classes.names[c]);
        int rc = dir ? list_class_files(plan, c, dir, err)
                     : cn_fail(err, "%s: out of memory", plan->split_dir);
        free(dir);
        if (rc) return -1;
    }
    if (plan->total == 0) /* only a split by share can come to none */
        return cn_fail(err, "%s: none of the images is a %s image (%d%% are test images, by the "
                       "CRC-32 of their paths): add images, or change the share",
                       plan->split_dir, plan->test ? "test" : "training", plan->share);
    return 0;
}

static void free_plan(folder_plan *plan)
{
    for (int c = 0; plan->files && c < plan->classes.n; c++) free_names(&plan->files[c]);
    free(plan->files);
    free_names(&plan->classes);
    free(plan->split_dir);
}

static int copy_class_names(cn_dataset *ds, const name_list *classes, cn_error *err)
{
    ds->class_names = calloc((unsigned)classes->n, sizeof *ds->class_names);
    if (!ds->class_names) return cn_fail(err, "out of memory for %d class names", classes->n);
    ds->classes = classes->n;
    for (int c = 0; c < classes->n; c++)
        if (!(ds->class_names[c] = strdup(classes->names[c])))
            return cn_fail(err, "out of memory for %d class names", classes->n);
    return 0;
}

/* The image at path, decoded at its own size, scaled into dst (ds's size): the pixels of
 * cn_image_read_resized. */
static int read_scaled(const cn_dataset *ds, const char *path, uint8_t *dst, cn_error *err)
{
    cn_image_want any = {ds->channels, 0, 0, NULL, NULL, 1};
    cn_image img;
    int rc = cn_image_load(path, &any, &img, err);
    if (rc == 0) rc = cn_image_scale_into(&img, path, dst, ds->height, ds->width, err);
    cn_image_free(&img);
    return rc;
}

/* The first image sets the shape (its channels, and its size or src's to scale to); the
 * arrays are allocated for plan->total images of it, and it becomes image 0 (copied, or
 * scaled). */
static int start_pixels(cn_dataset *ds, const folder_plan *plan, const char *first,
                        const cn_data_source *src, cn_error *err)
{
    cn_image_want want = {src->channels, 0, 0, NULL, NULL, 1};
    cn_image img;
    int rc = cn_image_load(first, &want, &img, err), scale = src->height > 0;
    int height = scale ? src->height : img.height, width = scale ? src->width : img.width;
    size_t size = (size_t)img.channels * (size_t)height * (size_t)width;
    if (rc == 0 && size > SIZE_MAX / (size_t)plan->total)
        rc = cn_fail(err, "%s: %d images of %dx%d pixels are more than fit in memory",
                     plan->split_dir, plan->total, width, height);
    if (rc == 0 && (!(ds->pixels = malloc(size * (size_t)plan->total)) ||
                    !(ds->labels = malloc((size_t)plan->total))))
        rc = cn_fail(err, "%s: out of memory for %d images of %dx%d pixels (%zu bytes)",
                     plan->split_dir, plan->total, width, height, size * (size_t)plan->total);
    if (rc == 0) {
        ds->channels = img.channels;
        ds->height = height;
        ds->width = width;
        if (scale)
            rc = cn_image_scale_into(&img, first, ds->pixels, height, width, err);
        else
            memcpy(ds->pixels, img.pixels, size);
    }
    cn_image_free(&img);
    return rc;
}

/* Image i (label c) of the dataset from path, scaled to ds's size when scale is set, else of
 * that size (first: the image that set it, for the refusal of another); image 0 has been read
 * by start_pixels. */
static int read_one(cn_dataset *ds, int i, int c, const char *path, const char *first,
                    int scale, cn_error *err)
{
    size_t size = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    uint8_t *dst = ds->pixels + (size_t)i * size;
    ds->labels[i] = (uint8_t)c;
    if (i == 0) return 0;
    if (scale) return read_scaled(ds, path, dst, err);
    cn_image_want want = {ds->channels, ds->height, ds->width, dst, first, 1};
    cn_image img;
    int rc = cn_image_load(path, &want, &img, err);
    cn_image_free(&img);
    return rc;
}

/* File k of class c, of n files. */
typedef struct {
    int c, k, n;
} file_ref;

/* Places in the dataset: file k of a class of n files by (k + 1/2) / n, ties in class order.
 * Every class is spread evenly over the whole split, so that any run of it (the first N, the
 * last N) holds the classes in about their proportions. Compared exactly, in integers:
 * (2k + 1) n' against (2k' + 1) n, below 2^62 for counts below 2^30. */
static int compare_places(const void *pa, const void *pb)
{
    const file_ref *a = pa, *b = pb;
    int64_t x = (2 * (int64_t)a->k + 1) * b->n, y = (2 * (int64_t)b->k + 1) * a->n;
    if (x != y) return x < y ? -1 : 1;
    return (a->c > b->c) - (a->c < b->c);
}

/* The plan's files in dataset order (compare_places): a malloc'd array of plan->total. */
static file_ref *dataset_order(const folder_plan *plan)
{
    file_ref *order = malloc((size_t)plan->total * sizeof *order);
    if (!order) return NULL;
    for (int c = 0, i = 0; c < plan->classes.n; c++)
        for (int k = 0; k < plan->files[c].n; k++) order[i++] = (file_ref){c, k, plan->files[c].n};
    qsort(order, (size_t)plan->total, sizeof *order, compare_places);
    return order;
}

/* DIR/SPLIT/CLASS/FILE of f, malloc'd (NULL: out of memory). */
static char *file_path(const folder_plan *plan, file_ref f)
{
    char *dir = join(plan->split_dir, plan->classes.names[f.c]);
    char *path = dir ? join(dir, plan->files[f.c].names[f.k]) : NULL;
    free(dir);
    return path;
}

/* The images of a split, decoded by one or more threads, each into its own place: a thread
 * takes the next index under the lock; a failure at i stops the indices after it, and the
 * message of the first failing image in dataset order is kept (every index before it has been
 * taken, and is finished before the threads are joined), so that any number of threads gives
 * the same dataset, or the same error. */
typedef struct {
    cn_dataset *ds;
    const folder_plan *plan;
    const file_ref *order;
    const char *first;
    int scale;
    pthread_mutex_t lock;
    int next, failed_at; /* under lock */
    cn_error err;        /* under lock: the failure at failed_at */
} image_jobs;

static int take_index(image_jobs *j)
{
    pthread_mutex_lock(&j->lock);
    int i = j->next < j->failed_at ? j->next++ : -1;
    pthread_mutex_unlock(&j->lock);
    return i;
}

static void fail_at(image_jobs *j, int i, const cn_error *err)
{
    pthread_mutex_lock(&j->lock);
    if (i < j->failed_at) j->failed_at = i, j->err = *err;
    pthread_mutex_unlock(&j->lock);
}

static void *decode_images(void *arg)
{
    image_jobs *j = arg;
    for (int i; (i = take_index(j)) >= 0;) {
        cn_error err = {{0}};
        char *path = file_path(j->plan, j->order[i]);
        int rc = path ? read_one(j->ds, i, j->order[i].c, path, j->first, j->scale, &err)
                      : cn_fail(&err, "%s: out of memory", j->plan->split_dir);
        free(path);
        if (rc) fail_at(j, i, &err);
    }
    return NULL;
}

/* Decodes every image with up to threads threads (fewer when they cannot be started). */
static int decode_all(image_jobs *j, int threads, cn_error *err)
{
    pthread_t helpers[MAX_DECODERS - 1];
    int want = threads < MAX_DECODERS ? threads - 1 : MAX_DECODERS - 1, started = 0;
    if (want > j->plan->total - 1) want = j->plan->total - 1;
    while (started < want && pthread_create(&helpers[started], NULL, decode_images, j) == 0)
        started++;
    decode_images(j);
    for (int k = 0; k < started; k++) pthread_join(helpers[k], NULL);
    if (j->failed_at == j->plan->total) return 0;
    *err = j->err;
    return -1;
}

static int read_images(cn_dataset *ds, const folder_plan *plan, const cn_data_source *src,
                       cn_error *err)
{
    file_ref *order = dataset_order(plan);
    char *first = order ? file_path(plan, order[0]) : NULL;
    int rc = first ? start_pixels(ds, plan, first, src, err)
                   : cn_fail(err, "%s: out of memory", plan->split_dir);
    if (rc == 0) {
        image_jobs j = {.ds = ds, .plan = plan, .order = order, .first = first,
                        .scale = src->height > 0, .failed_at = plan->total};
        if (pthread_mutex_init(&j.lock, NULL) != 0)
            rc = cn_fail(err, "%s: cannot make a lock for the decoding threads",
                         plan->split_dir);
        else {
            rc = decode_all(&j, src->threads, err);
            pthread_mutex_destroy(&j.lock);
        }
    }
    if (rc == 0) ds->count = plan->total;
    free(first);
    free(order);
    return rc;
}

int cn_folder_split_read(cn_dataset *ds, const cn_data_source *src, const char *split,
                         cn_error *err)
{
    const char *dir = src->dir;
    if (src->channels != 0 && src->channels != 1 && src->channels != 3)
        return cn_fail(err, "%s: cannot read images as %d channels (1 grey, 3 colour, 0 as "
                       "they are)", dir, src->channels);
    int h = src->height, w = src->width;
    if ((h || w) && (h < 1 || w < 1 || h > CN_IMAGE_MAX_SIDE || w > CN_IMAGE_MAX_SIDE))
        return cn_fail(err, "%s: cannot scale images to %dx%d (sides 1 to %d)", dir, w, h,
                       CN_IMAGE_MAX_SIDE);
    folder_plan plan = {.share = src->test_percent, .test = strcmp(split, "test") == 0};
    if (plan.share < 0 || plan.share > 99)
        return cn_fail(err, "%s: cannot take %d%% of the images as test images (1 to 99, or 0 "
                       "for train/ and test/)", dir, plan.share);
    if (plan.share && (holds_folder(dir, "train") || holds_folder(dir, "test")))
        return cn_fail(err, "%s: holds train/ and test/, its own splits: a share of test images "
                       "is taken only from a folder whose sub-folders are the classes", dir);
    plan.split_dir = plan.share ? strdup(dir) : join(dir, split);
    int rc = plan.split_dir ? 0 : cn_fail(err, "%s: out of memory", dir);
    if (rc == 0) rc = list_classes(&plan, err);
    if (rc == 0) rc = list_files(&plan, err);
    if (rc == 0) rc = copy_class_names(ds, &plan.classes, err);
    if (rc == 0) rc = read_images(ds, &plan, src, err);
    if (rc == 0) ds->format = CN_DATA_FOLDER, ds->skipped = plan.skipped;
    free_plan(&plan);
    return rc;
}
