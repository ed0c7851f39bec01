/* test_cifar10.c — CIFAR-10's binary version through cn_dataset_read: records split into labels
 * and planes exactly, the training batches that follow data_batch_1.bin without a gap, class
 * names from batches.meta.txt, classes.txt and --classes in that order of precedence, the
 * format found from the files, and every refusal (a size that is not whole records, a label
 * of 10 or more, a names file of another count, a named pipe where a batch belongs) naming its
 * file, with the dataset left empty. */
#include <fcntl.h>
#include <sys/stat.h>

#include "testutil.h"

#define RECORD 3073

static void write_file(const char *dir, const char *name, const void *bytes, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* n records: record i has label labels[i] and pixel j = (i * 7 + j) % 251. */
static uint8_t *records(int n, const uint8_t *labels)
{
    uint8_t *b = malloc((size_t)n * RECORD);
    assert_non_null(b);
    for (int i = 0; i < n; i++) {
        b[(size_t)i * RECORD] = labels[i];
        for (int j = 0; j < 3072; j++) b[(size_t)i * RECORD + 1 + j] = (uint8_t)((i * 7 + j) % 251);
    }
    return b;
}

static void write_batch(const char *dir, const char *name, int n, const uint8_t *labels)
{
    uint8_t *b = records(n, labels);
    write_file(dir, name, b, (size_t)n * RECORD);
    free(b);
}

static const char names10[] = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\n"
                              "truck\n";

static void test_reads_records_and_names(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("cifar");
    const uint8_t a[2] = {3, 9}, b[1] = {0}, t[1] = {7};
    write_batch(dir, "data_batch_1.bin", 2, a);
    write_batch(dir, "data_batch_2.bin", 1, b);
    write_batch(dir, "data_batch_4.bin", 1, b); /* after a gap: not read */
    write_batch(dir, "test_batch.bin", 1, t);
    write_file(dir, "batches.meta.txt", names10, sizeof names10 - 1);
    cn_dataset ds;
    cn_error err = {{0}};
    if (cn_dataset_load(&ds, dir, "train", &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.format, CN_DATA_CIFAR10);
    assert_int_equal(ds.count, 3);
    assert_int_equal(ds.channels, 3);
    assert_int_equal(ds.height, 32);
    assert_int_equal(ds.width, 32);
    assert_int_equal(ds.classes, 10);
    assert_int_equal(ds.labels[0], 3);
    assert_int_equal(ds.labels[1], 9);
    assert_int_equal(ds.labels[2], 0);
    uint8_t *want = records(2, a);
    assert_memory_equal(ds.pixels + 3072, want + RECORD + 1, 3072); /* record 1's planes */
    free(want);
    assert_string_equal(cn_dataset_class_name(&ds, 1), "automobile");
    assert_string_equal(cn_dataset_class_name(&ds, 9), "truck");
    assert_null(cn_dataset_class_name(&ds, 10));
    cn_dataset_free(&ds);
    if (cn_dataset_load(&ds, dir, "test", &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(ds.count, 1);
    assert_int_equal(ds.labels[0], 7);
    cn_dataset_free(&ds);
    tu_remove_dir(dir);
}

/* --classes FILE wins over batches.meta.txt; classes.txt only names data that names nothing;
 * without any, CIFAR-10 has its 10 classes unnamed. */
static void test_name_precedence(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("cifar");
    const uint8_t l[1] = {2};
    write_batch(dir, "test_batch.bin", 1, l);
    cn_data_source src = {.dir = dir};
    cn_dataset ds;
    cn_error err = {{0}};
    assert_int_equal(cn_dataset_read(&ds, &src, "test", &err), 0);
    assert_int_equal(ds.classes, 10);
    assert_null(ds.class_names);
    cn_dataset_free(&ds);
    const char digits[] = "zero\r\none\r\ntwo\r\nthree\r\nfour\r\nfive\r\nsix\r\nseven\r\neight\r\nnine";
    write_file(dir, "classes.txt", digits, sizeof digits - 1);
    assert_int_equal(cn_dataset_read(&ds, &src, "test", &err), 0);
    assert_string_equal(cn_dataset_class_name(&ds, 2), "two");
    assert_string_equal(cn_dataset_class_name(&ds, 9), "nine");
    cn_dataset_free(&ds);
    write_file(dir, "batches.meta.txt", names10, sizeof names10 - 1);
    assert_int_equal(cn_dataset_read(&ds, &src, "test", &err), 0);
    assert_string_equal(cn_dataset_class_name(&ds, 2), "bird");
    cn_dataset_free(&ds);
    char path[4200];
    snprintf(path, sizeof path, "%s/classes.txt", dir);
    src.classes_file = path;
    assert_int_equal(cn_dataset_read(&ds, &src, "test", &err), 0);
    assert_string_equal(cn_dataset_class_name(&ds, 2), "two");
    cn_dataset_free(&ds);
    tu_remove_dir(dir);
}

static void expect_refusal(const char *dir, const char *split, const char *needle1,
                           const char *needle2)
{
    cn_dataset ds;
    memset(&ds, 0xAB, sizeof ds);
    cn_error err = {{0}};
    cn_data_source src = {.dir = dir, .format = CN_DATA_CIFAR10};
    assert_int_equal(cn_dataset_read(&ds, &src, split, &err), -1);
    assert_int_equal(ds.count, 0);
    assert_null(ds.pixels);
    assert_null(ds.class_names);
    if (!strstr(err.msg, needle1) || (needle2 && !strstr(err.msg, needle2)))
        fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", err.msg, needle1,
                 needle2 ? needle2 : "");
}

static void test_refusals(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("cifar");
    expect_refusal(dir, "test", "test_batch.bin", "No such file");
    uint8_t *b = records(2, (const uint8_t[]){1, 2});
    write_file(dir, "test_batch.bin", b, 2 * RECORD - 1); /* truncated */
    expect_refusal(dir, "test", "test_batch.bin: 6145 bytes is not a whole number of CIFAR-10 "
                   "records (3073 bytes each", "truncated");
    b[RECORD] = 10;
    write_file(dir, "test_batch.bin", b, 2 * RECORD);
    expect_refusal(dir, "test", "test_batch.bin: record 1 has label 10, outside 0..9", NULL);
    b[RECORD] = 4;
    write_file(dir, "test_batch.bin", b, 2 * RECORD);
    write_file(dir, "batches.meta.txt", "a\nb\nc\n", 6);
    expect_refusal(dir, "test", "batches.meta.txt: 3 class names, CIFAR-10 has 10", NULL);
    write_file(dir, "batches.meta.txt", "a\n\tb\nc\n", 7);
    expect_refusal(dir, "test", "batches.meta.txt: line 2: class 1: a name may not hold control",
                   NULL);
    write_file(dir, "batches.meta.txt", "a\n\xff\nc\n", 7);
    expect_refusal(dir, "test", "batches.meta.txt: line 2: class 1: the name is not UTF-8", NULL);
    expect_refusal(dir, "train", "data_batch_1.bin", "No such file");
    char path[4200];
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    assert_int_equal(mkfifo(path, 0600), 0); /* never opened: no writer would ever come */
    expect_refusal(dir, "train", "data_batch_1.bin: not a regular file (a named pipe)", NULL);
    free(b);
    tu_remove_dir(dir);
}

/* A folder with none of the formats' files is refused with what was looked for; a format asked
 * for by name is read even when another one's files are there too. */
static void test_format_choice(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("cifar");
    cn_dataset ds;
    cn_error err = {{0}};
    assert_int_equal(cn_dataset_load(&ds, dir, "train", &err), -1);
    assert_non_null(strstr(err.msg, "no dataset found"));
    assert_non_null(strstr(err.msg, "data_batch_1.bin"));
    write_batch(dir, "test_batch.bin", 1, (const uint8_t[]){5});
    write_file(dir, "t10k-images-idx3-ubyte", "", 0); /* IDX comes first for auto */
    assert_int_equal(cn_dataset_load(&ds, dir, "test", &err), -1);
    assert_non_null(strstr(err.msg, "t10k-")); /* read as IDX */
    cn_data_source src = {.dir = dir, .format = CN_DATA_CIFAR10};
    assert_int_equal(cn_dataset_read(&ds, &src, "test", &err), 0);
    assert_int_equal(ds.labels[0], 5);
    cn_dataset_free(&ds);
    cn_data_format f;
    assert_int_equal(cn_data_format_from_name("cifar10", &f), 0);
    assert_int_equal(f, CN_DATA_CIFAR10);
    assert_int_equal(cn_data_format_from_name("cifar100", &f), -1);
    assert_string_equal(cn_data_format_name(CN_DATA_FOLDER), "folder");
    assert_int_equal(cn_dataset_read(&ds, &src, "validation", &err), -1);
    assert_non_null(strstr(err.msg, "unknown split"));
    tu_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_records_and_names),
        cmocka_unit_test(test_name_precedence),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_format_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
