/* fuzz_cifar10.c — fuzz target for the CIFAR-10 reader and the class-name lists: each input
 * becomes a dataset folder, the batch file written as both data_batch_1.bin and test_batch.bin
 * and, when the first byte asks, a batches.meta.txt and a classes.txt, then both splits are
 * read. Input: a flags byte (bit 0: batches.meta.txt, bit 1: classes.txt), a length byte N, N
 * bytes of names, the rest the batch file. A reader that accepts must give whole records with
 * labels below its class count, names for every class when it has names; one that refuses must
 * say why. Built with libFuzzer by `make fuzz`, and with tests/fuzz/replay.c for `make test`. */
#include <sys/stat.h>

#include "cnnc.h"
#include "fuzz_input.h"

static char dir[64];

static void remove_dir(void)
{
    char path[128];
    const char *names[] = {"data_batch_1.bin", "test_batch.bin", "batches.meta.txt",
                           "classes.txt"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void put(const char *name, const uint8_t *data, size_t size, int keep)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    if (!keep) return;
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
}

static void check(const cn_dataset *ds, size_t batch)
{
    if (batch % 3073 != 0 || (size_t)ds->count != batch / 3073) abort();
    if (ds->channels != 3 || ds->height != 32 || ds->width != 32) abort();
    if (ds->classes < 1 || ds->classes > CN_MAX_CLASSES) abort();
    for (int i = 0; i < ds->count; i++)
        if (ds->labels[i] >= ds->classes) abort();
    for (int c = 0; ds->class_names && c < ds->classes; c++)
        if (!ds->class_names[c] || !ds->class_names[c][0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/cnnc-fuzz-XXXXXX", tmp && *tmp && strlen(tmp) < 32 ? tmp
                                                                                       : "/tmp");
        if (!mkdtemp(dir)) abort();
        atexit(remove_dir);
    }
    if (size < 2) return 0;
    size_t names = data[1] < size - 2 ? data[1] : size - 2;
    const uint8_t *batch = data + 2 + names;
    size_t batch_size = size - 2 - names;
    put("batches.meta.txt", data + 2, names, data[0] & 1);
    put("classes.txt", data + 2, names, data[0] & 2);
    put("data_batch_1.bin", batch, batch_size, 1);
    put("test_batch.bin", batch, batch_size, 1);
    cn_data_source src = {.dir = dir, .format = CN_DATA_CIFAR10};
    const char *splits[] = {"train", "test"};
    for (int s = 0; s < 2; s++) {
        cn_dataset ds;
        cn_error err = {{0}};
        if (cn_dataset_read(&ds, &src, splits[s], &err) == 0)
            check(&ds, batch_size);
        else if (err.msg[0] == '\0')
            abort();
        cn_dataset_free(&ds);
    }
    return 0;
}
