/* fuzz_folder.c — fuzz target for the image folder reader (cn_folder_split_read): the input is
 * a list of records, each a class byte (taken modulo 4), a 2-byte little-endian length and that
 * many bytes of file; at most 8 records, a record cut short by the end of the input is left
 * out. The records are written as DIR/train/cK/fN (K the class, N the record) in a folder made
 * once per process under $TMPDIR and emptied for each input; the split is then read as channels
 * 0, 1 and 3, and as 1 channel scaled to 5 x 7. A read must give one image per record (of the
 * size asked for) with labels below its classes; a refusal must say why. Built with libFuzzer
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int records = write_tree(data, size);
    static const int channels[] = {0, 1, 3, 1}, side[] = {0, 0, 0, 5}; /* last: scaled */
    for (int k = 0; k < 4; k++) {
        cn_dataset ds = {0};
        cn_error err = {{0}};
        cn_data_source src = {.dir = fuzz_root, .channels = channels[k], .height = side[k],
                              .width = side[k] + 2};
        int rc = cn_folder_split_read(&ds, &src, "train", &err);
        if (rc != 0 && err.msg[0] == '\0') abort();
        if (rc == 0 && (ds.count != records || ds.skipped != 0 || ds.classes < 1 || ds.classes > CLASSES ||
                        (channels[k] && ds.channels != channels[k]) ||
                        (side[k] && (ds.height != side[k] || ds.width != side[k] + 2))))
            abort();
        for (int i = 0; rc == 0 && i < ds.count; i++)
            if (ds.labels[i] >= ds.classes) abort();
        cn_dataset_free(&ds);
    }
    return 0;
}
