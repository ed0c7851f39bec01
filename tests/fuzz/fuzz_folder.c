/* fuzz_folder.c — fuzz target for the image folder reader (cn_folder_split_read): the input is
 * a list of records, each a class byte (taken modulo 4), a 2-byte little-endian length and that
 * many bytes of file; at most 8 records, a record cut short by the end of the input is left
 * out. The records are written as DIR/train/cK/fN.png (K the class, N the record) in a folder made
 * once per process under $TMPDIR and emptied for each input; the split is then read as channels
 * 0, 1 and 3 (by two threads), and as 1 channel scaled to 5 x 7, and DIR/train as a folder of class folders
 * split in halves by share. A read must give one image per record (of the size asked for; the
 * halves, together) with labels below its classes; a refusal must say why. Built with libFuzzer
 * by `make fuzz`, and with tests/fuzz/replay.c for `make test`. The seed corpus is made by
 * tests/fuzz/make_folder_corpus.py. */
#include <sys/stat.h>

#include "cnnc.h"
#include "data/formats.h"
#include "fuzz_input.h"

#define MAX_RECORDS 8
#define CLASSES 4

static char fuzz_root[96];

static void remove_tree(void)
{
    char path[160];
    for (int c = 0; c < CLASSES; c++) {
        for (int n = 0; n < MAX_RECORDS; n++) {
            snprintf(path, sizeof path, "%s/train/c%d/f%d.png", fuzz_root, c, n);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/train/c%d", fuzz_root, c);
        rmdir(path);
    }
    snprintf(path, sizeof path, "%s/train", fuzz_root);
    rmdir(path);
    rmdir(fuzz_root);
}

/* The folder, made once per process (aborts when the file system fails: the harness's
 * problem, not a finding). */
static const char *root_folder(void)
{
    if (fuzz_root[0]) return fuzz_root;
    const char *dir = getenv("TMPDIR");
    snprintf(fuzz_root, sizeof fuzz_root, "%s/cnnc-fuzz-folder-%ld-XXXXXX",
             dir && *dir && strlen(dir) < 40 ? dir : "/tmp", (long)getpid());
    if (!mkdtemp(fuzz_root)) abort();
    atexit(remove_tree);
    return fuzz_root;
}

static void write_record(int n, int c, const uint8_t *bytes, size_t len)
{
    char path[160];
    snprintf(path, sizeof path, "%s/train/c%d", fuzz_root, c);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/train/c%d/f%d.png", fuzz_root, c, n);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) abort();
}

/* Writes the records of data as the tree; returns how many. */
static int write_tree(const uint8_t *data, size_t size)
{
    root_folder();
    remove_tree();
    char path[160];
    snprintf(path, sizeof path, "%s/train", fuzz_root);
    if (mkdir(fuzz_root, 0700) != 0 || mkdir(path, 0755) != 0) abort();
    int n = 0;
    size_t at = 0;
    while (n < MAX_RECORDS && size - at >= 3) {
        size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        if (len > size - at - 3) break;
        write_record(n++, data[at] % CLASSES, data + at + 3, len);
        at += 3 + len;
    }
    return n;
}

/* Aborts unless a read (rc) of count images is right or says why it is not. */
static void check_read(int rc, const cn_dataset *ds, const cn_error *err, int count,
                       int channels, int side)
{
    if (rc != 0 && err->msg[0] == '\0') abort();
    if (rc == 0 && (ds->count != count || ds->skipped != 0 || ds->classes < 1 ||
                    ds->classes > CLASSES || (channels && ds->channels != channels) ||
                    (side && (ds->height != side || ds->width != side + 2))))
        abort();
    for (int i = 0; rc == 0 && i < ds->count; i++)
        if (ds->labels[i] >= ds->classes) abort();
}

/* DIR/train read as a folder of class folders split by a half share: the two splits, where
 * both read, hold every record once. */
static void read_halves(int records)
{
    char dir[160];
    snprintf(dir, sizeof dir, "%s/train", fuzz_root);
    cn_data_source src = {.dir = dir, .channels = 1, .test_percent = 50};
    cn_dataset train = {0}, test = {0};
    cn_error err = {{0}}, err2 = {{0}};
    int rc = cn_folder_split_read(&train, &src, "train", &err);
    int rc2 = cn_folder_split_read(&test, &src, "test", &err2);
    check_read(rc, &train, &err, rc == 0 && rc2 == 0 ? records - test.count : train.count, 1, 0);
    check_read(rc2, &test, &err2, test.count, 1, 0);
    if (rc == 0 && rc2 == 0 && (test.count < 1 || train.count < 1)) abort();
    cn_dataset_free(&train);
    cn_dataset_free(&test);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int records = write_tree(data, size);
    static const int channels[] = {0, 1, 3, 1}, side[] = {0, 0, 0, 5}; /* last: scaled */
    for (int k = 0; k < 4; k++) {
        cn_dataset ds = {0};
        cn_error err = {{0}};
        cn_data_source src = {.dir = fuzz_root, .channels = channels[k], .height = side[k],
                              .width = side[k] + 2, .threads = k == 2 ? 2 : 0};
        int rc = cn_folder_split_read(&ds, &src, "train", &err);
        check_read(rc, &ds, &err, records, channels[k], side[k]);
        cn_dataset_free(&ds);
    }
    read_halves(records);
    return 0;
}
