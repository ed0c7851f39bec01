/* checkpoint_dir.c — the checkpoint files of a folder: their names, which order them by training
 * position, finding the newest, and deleting all but the newest few together with any temporary
 * an interrupted write left behind. It does not write checkpoints (train_checkpoint.c does) and
 * does not lock the folder: the caller makes sure it is the folder's only writer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnnc.h"

#define NAME_PREFIX CN_CHECKPOINT_PREFIX
#define NAME_STEP "-step-"
#define NAME_SUFFIX ".safetensors"
/* What cn_safetensors_write adds to a name for its temporary: NAME.tmp.PID.N */
#define TEMP_MARK NAME_SUFFIX ".tmp."
#define MAX_DIGITS 10

typedef struct {
    char name[CN_CHECKPOINT_NAME_MAX];
    int epoch, step; /* step -1: the epoch is complete */
} found;

/* ---------------------------------------------------------------- names */

static void format_name(char name[CN_CHECKPOINT_NAME_MAX], int epoch, int step)
{
    if (step < 0)
        snprintf(name, CN_CHECKPOINT_NAME_MAX, NAME_PREFIX "%04d" NAME_SUFFIX, epoch);
    else
        snprintf(name, CN_CHECKPOINT_NAME_MAX, NAME_PREFIX "%04d" NAME_STEP "%05d" NAME_SUFFIX,
                 epoch, step);
}

void cn_checkpoint_name(char name[CN_CHECKPOINT_NAME_MAX], const cn_epoch_position *pos,
                        int steps_per_epoch)
{
    format_name(name, pos->epoch, pos->step >= steps_per_epoch ? -1 : pos->step);
}

/* Reads decimal digits at *p (at most MAX_DIGITS, a value up to INT_MAX) and moves *p on. */
static int take_number(const char **p, int *out)
{
    const char *s = *p;
    long long v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (++digits > MAX_DIGITS) return 0;
        v = v * 10 + (*s - '0');
    }
    if (digits == 0 || v > INT_MAX) return 0;
    *out = (int)v;
    *p = s;
    return 1;
}

int cn_checkpoint_parse_name(const char *name, int *epoch, int *step)
{
    const char *p = name;
    int e = 0, s = -1;
    if (strncmp(p, NAME_PREFIX, strlen(NAME_PREFIX)) != 0) return 0;
    p += strlen(NAME_PREFIX);
    if (!take_number(&p, &e) || e < 1) return 0;
    if (strncmp(p, NAME_STEP, strlen(NAME_STEP)) == 0) {
        p += strlen(NAME_STEP);
        if (!take_number(&p, &s)) return 0;
    }
    if (strcmp(p, NAME_SUFFIX) != 0) return 0;
    char canonical[CN_CHECKPOINT_NAME_MAX];
    format_name(canonical, e, s);
    if (strcmp(canonical, name) != 0) return 0; /* one name per position */
    *epoch = e;
    *step = s;
    return 1;
}

int cn_checkpoint_compare(int epoch_a, int step_a, int epoch_b, int step_b)
{
    if (epoch_a != epoch_b) return epoch_a < epoch_b ? -1 : 1;
    long long a = step_a < 0 ? LLONG_MAX : step_a, b = step_b < 0 ? LLONG_MAX : step_b;
    return a < b ? -1 : a > b;
}

/* ---------------------------------------------------------------- listing */

static int is_regular_file(int dir_fd, const char *name)
{
    struct stat st;
    return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* A checkpoint's name on something else than a regular file would be found by no listing, and
 * then be in the way of the save of that position (a folder), or be written through or replaced
 * (a named pipe, a link): refused, so that a run stops before it starts rather than at that
 * save. 1: a regular file; 0: gone meanwhile; -1 with the message. */
static int check_checkpoint_file(int dir_fd, const char *dir, const char *name, cn_error *err)
{
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : cn_fail(err, "%s/%s: %s", dir, name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return cn_fail(err, "%s/%s: named like a checkpoint but is %s, not a regular file: "
                       "move it out of the folder", dir, name, cn_file_kind(st.st_mode));
    return 1;
}

static int compare_found(const void *pa, const void *pb)
{
    const found *a = pa, *b = pb;
    return cn_checkpoint_compare(a->epoch, a->step, b->epoch, b->step);
}

static int append(found **list, int *count, int *cap, int epoch, int step)
{
    if (*count == *cap) {
        int grown = *cap ? 2 * *cap : 16;
        found *more = realloc(*list, (size_t)grown * sizeof *more);
        if (!more) return -1;
        *list = more;
        *cap = grown;
    }
    found *f = &(*list)[(*count)++];
    format_name(f->name, epoch, step); /* name is this canonical name */
    f->epoch = epoch;
    f->step = step;
    return 0;
}

/* The checkpoints of an open folder, oldest first (malloc'd list, *count of them). */
static int list_checkpoints(DIR *d, const char *dir, found **list, int *count, cn_error *err)
{
    int cap = 0;
    *list = NULL;
    *count = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) break;
        int epoch, step, regular = 0;
        if (cn_checkpoint_parse_name(e->d_name, &epoch, &step))
            regular = check_checkpoint_file(dirfd(d), dir, e->d_name, err);
        if (regular == 1 && append(list, count, &cap, epoch, step) != 0)
            regular = cn_fail(err, "%s: %s", dir, strerror(ENOMEM));
        if (regular < 0) {
            free(*list);
            return -1;
        }
    }
    if (errno != 0) {
        int e = errno;
        free(*list);
        return cn_fail(err, "%s: cannot read the folder: %s", dir, strerror(e));
    }
    if (*count > 1) qsort(*list, (size_t)*count, sizeof **list, compare_found);
    return 0;
}

int cn_checkpoint_find(const char *dir, char newest[CN_CHECKPOINT_NAME_MAX], cn_error *err)
{
    DIR *d = opendir(dir);
    if (!d) return cn_fail(err, "%s: cannot open the folder: %s", dir, strerror(errno));
    found *list;
    int count;
    int rc = list_checkpoints(d, dir, &list, &count, err);
    closedir(d);
    if (rc != 0) return -1;
    if (count > 0) snprintf(newest, CN_CHECKPOINT_NAME_MAX, "%s", list[count - 1].name);
    free(list);
    return count;
}

/* ---------------------------------------------------------------- pruning */

static int is_temporary(const char *name)
{
    return strncmp(name, NAME_PREFIX, strlen(NAME_PREFIX)) == 0 && strstr(name, TEMP_MARK);
}

static int remove_temporaries(DIR *d, const char *dir, cn_error *err)
{
    struct dirent *e;
    rewinddir(d);
    while ((e = readdir(d)) != NULL)
        if (is_temporary(e->d_name) && is_regular_file(dirfd(d), e->d_name) &&
            unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT)
            return cn_fail(err, "%s/%s: cannot remove: %s", dir, e->d_name, strerror(errno));
    return 0;
}

static int remove_oldest(DIR *d, const char *dir, const found *list, int count, int keep,
                         cn_error *err)
{
    for (int i = 0; i + keep < count; i++)
        if (unlinkat(dirfd(d), list[i].name, 0) != 0 && errno != ENOENT)
            return cn_fail(err, "%s/%s: cannot remove: %s", dir, list[i].name, strerror(errno));
    return 0;
}

int cn_checkpoint_prune(const char *dir, int keep, cn_error *err)
{
    if (keep < 1) return cn_fail(err, "%s: cannot keep %d checkpoints (at least 1)", dir, keep);
    DIR *d = opendir(dir);
    if (!d) return cn_fail(err, "%s: cannot open the folder: %s", dir, strerror(errno));
    found *list = NULL;
    int count = 0;
    int rc = list_checkpoints(d, dir, &list, &count, err);
    if (rc == 0) rc = remove_oldest(d, dir, list, count, keep, err);
    if (rc == 0) rc = remove_temporaries(d, dir, err);
    if (rc == 0 && fsync(dirfd(d)) != 0 && errno != EINVAL)
        rc = cn_fail(err, "%s: cannot sync the folder: %s", dir, strerror(errno));
    free(list);
    closedir(d);
    return rc;
}
