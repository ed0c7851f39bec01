/* test_idx.c — tests IDX reading (raw and gzip), split loading and pixel normalisation: good
 * files read back byte for byte, and each kind of bad file is refused with a message that names
 * the file and the problem. Every file it makes lives under /tmp and is removed again. It does
 * not test training or anything that uses the loaded data. */
#include "testutil.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#define REAL_DATA_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    uint8_t *bytes;
    size_t len;
} buffer;

static void buffer_free(buffer *b)
{
    free(b->bytes);
    b->bytes = NULL;
    b->len = 0;
}

static uint8_t pattern_byte(size_t i)
{
    return (uint8_t)(i * 7 + 3);
}

static buffer make_idx(uint8_t type, int ndim, const uint32_t *dims, size_t payload_len,
                       size_t extra)
{
    buffer b = {NULL, 4 + 4 * (size_t)ndim + payload_len + extra};
    b.bytes = calloc(1, b.len);
    assert_non_null(b.bytes);
    b.bytes[2] = type;
    b.bytes[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        for (int k = 0; k < 4; k++) b.bytes[4 + 4 * i + k] = (uint8_t)(dims[i] >> (24 - 8 * k));
    uint8_t *payload = b.bytes + 4 + 4 * ndim;
    for (size_t i = 0; i < payload_len + extra; i++) payload[i] = pattern_byte(i);
    return b;
}

static buffer images_file(uint32_t count)
{
    uint32_t dims[3] = {count, 28, 28};
    return make_idx(0x08, 3, dims, (size_t)count * 28 * 28, 0);
}

static buffer labels_file(uint32_t count)
{
    uint32_t dims[1] = {count};
    buffer b = make_idx(0x08, 1, dims, count, 0);
    for (uint32_t i = 0; i < count; i++) b.bytes[8 + i] = (uint8_t)(i % 10);
    return b;
}

static buffer gzip_bytes(const uint8_t *in, size_t len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    buffer out = {NULL, deflateBound(&zs, (uLong)len)};
    out.bytes = malloc(out.len);
    assert_non_null(out.bytes);
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out.bytes;
    zs.avail_out = (uInt)out.len;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    out.len = zs.total_out;
    assert_int_equal(deflateEnd(&zs), Z_OK);
    return out;
}

static buffer gzip_buffer(const buffer *b)
{
    return gzip_bytes(b->bytes, b->len);
}

static void expect_contains(const char *msg, const char *needle)
{
    if (!needle) return;
    if (!strstr(msg, needle)) fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

/* Writes the bytes to a temporary file, reads it back and expects a refusal naming the file. */
static void expect_idx_failure(const buffer *file, int ndim, const char *needle1,
                               const char *needle2)
{
    char *path = tu_write_temp(file->bytes, file->len, ".idx");
    uint8_t sentinel = 0;
    uint8_t *data = &sentinel;
    int dims[3] = {0};
    cn_error err = {{0}};
    int rc = cn_idx_read(path, ndim, &data, dims, &err);
    unlink(path);
    assert_int_equal(rc, -1);
    assert_null(data);
    expect_contains(err.msg, path);
    expect_contains(err.msg, needle1);
    expect_contains(err.msg, needle2);
    free(path);
}

static uint8_t *read_back(const buffer *file, int ndim, int *dims)
{
    char *path = tu_write_temp(file->bytes, file->len, ".idx");
    uint8_t *data = NULL;
    cn_error err = {{0}};
    int rc = cn_idx_read(path, ndim, &data, dims, &err);
    unlink(path);
    free(path);
    if (rc != 0) fail_msg("cn_idx_read failed: %s", err.msg);
    assert_non_null(data);
    return data;
}

static void expect_pattern(const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (data[i] != pattern_byte(i)) fail_msg("byte %zu is %u, want %u", i, data[i], pattern_byte(i));
}

/* ------------------------------------------------------------------ good files */

static void test_raw_images_read_back(void **state)
{
    (void)state;
    buffer file = images_file(2);
    int dims[3] = {0};
    uint8_t *data = read_back(&file, 3, dims);
    assert_int_equal(dims[0], 2);
    assert_int_equal(dims[1], 28);
    assert_int_equal(dims[2], 28);
    expect_pattern(data, 2 * 28 * 28);
    free(data);
    buffer_free(&file);
}

static void test_gzip_images_read_back(void **state)
{
    (void)state;
    buffer raw = images_file(3);
    buffer file = gzip_buffer(&raw);
    assert_int_equal(file.bytes[0], 0x1f);
    int dims[3] = {0};
    uint8_t *data = read_back(&file, 3, dims);
    assert_int_equal(dims[0], 3);
    assert_int_equal(dims[1], 28);
    assert_int_equal(dims[2], 28);
    expect_pattern(data, 3 * 28 * 28);
    free(data);
    buffer_free(&raw);
    buffer_free(&file);
}

/* More than the first buffer, so the gzip reader has to grow it. */
static void test_large_gzip_read_back(void **state)
{
    (void)state;
    buffer raw = images_file(2000);
    buffer file = gzip_buffer(&raw);
    int dims[3] = {0};
    uint8_t *data = read_back(&file, 3, dims);
    assert_int_equal(dims[0], 2000);
    expect_pattern(data, (size_t)2000 * 28 * 28);
    free(data);
    buffer_free(&raw);
    buffer_free(&file);
}

static void test_labels_read_back(void **state)
{
    (void)state;
    buffer raw = labels_file(25);
    buffer file = gzip_buffer(&raw);
    int dims[3] = {0};
    uint8_t *data = read_back(&file, 1, dims);
    assert_int_equal(dims[0], 25);
    for (int i = 0; i < 25; i++) assert_int_equal(data[i], i % 10);
    free(data);
    data = read_back(&raw, 1, dims);
    assert_int_equal(dims[0], 25);
    assert_int_equal(data[24], 4);
    free(data);
    buffer_free(&raw);
    buffer_free(&file);
}

/* Two gzip members one after the other are one gzip file (as gzip(1) writes them). */
static void test_multi_member_gzip_read_back(void **state)
{
    (void)state;
    buffer raw = images_file(2);
    size_t half = raw.len / 2;
    buffer first = gzip_bytes(raw.bytes, half);
    buffer second = gzip_bytes(raw.bytes + half, raw.len - half);
    buffer file = {malloc(first.len + second.len), first.len + second.len};
    assert_non_null(file.bytes);
    memcpy(file.bytes, first.bytes, first.len);
    memcpy(file.bytes + first.len, second.bytes, second.len);
    int dims[3] = {0};
    uint8_t *data = read_back(&file, 3, dims);
    assert_int_equal(dims[0], 2);
    expect_pattern(data, 2 * 28 * 28);
    free(data);
    buffer_free(&raw);
    buffer_free(&first);
    buffer_free(&second);
    buffer_free(&file);
}

/* ------------------------------------------------------------------ bad headers */

static void test_bad_leading_bytes(void **state)
{
    (void)state;
    buffer file = images_file(1);
    file.bytes[0] = 0x01;
    expect_idx_failure(&file, 3, "not an IDX file", NULL);
    buffer_free(&file);
}

static void test_wrong_type_code(void **state)
{
    (void)state;
    buffer file = images_file(1);
    file.bytes[2] = 0x0D;
    expect_idx_failure(&file, 3, "IDX type 0x0D is not unsigned bytes (0x08)", NULL);
    buffer_free(&file);
}

static void test_wrong_ndim(void **state)
{
    (void)state;
    buffer labels = labels_file(4);
    expect_idx_failure(&labels, 3, "expected 3 dimensions (images), found 1",
                       "is this a labels file?");
    buffer images = images_file(1);
    expect_idx_failure(&images, 1, "expected 1 dimension (labels), found 3",
                       "is this an images file?");
    buffer_free(&labels);
    buffer_free(&images);
}

static void test_zero_count(void **state)
{
    (void)state;
    uint32_t dims[3] = {0, 28, 28};
    buffer file = make_idx(0x08, 3, dims, 0, 0);
    expect_idx_failure(&file, 3, "dimension 0", "is zero");
    buffer gz = gzip_buffer(&file);
    expect_idx_failure(&gz, 3, "is zero", NULL);
    buffer_free(&file);
    buffer_free(&gz);
}

static void test_empty_and_short_header(void **state)
{
    (void)state;
    uint8_t nothing = 0;
    buffer empty = {&nothing, 0};
    expect_idx_failure(&empty, 3, "empty", NULL);
    buffer file = images_file(1);
    buffer cut = {file.bytes, 9};
    expect_idx_failure(&cut, 3, "truncated", "header needs 16 bytes, file has 9");
    buffer_free(&file);
}

static void test_missing_file_and_folder(void **state)
{
    (void)state;
    uint8_t *data = NULL;
    int dims[3];
    cn_error err = {{0}};
    assert_int_equal(cn_idx_read("/nonexistent/cnnc/x.idx", 3, &data, dims, &err), -1);
    expect_contains(err.msg, "/nonexistent/cnnc/x.idx");
    expect_contains(err.msg, "No such file");
    assert_int_equal(cn_idx_read("/tmp", 3, &data, dims, &err), -1);
    expect_contains(err.msg, "/tmp: not a regular file");
    assert_int_equal(cn_idx_read("/tmp", 4, &data, dims, &err), -1);
    assert_null(data);
}

/* fifo: a named pipe without a writer is refused at once, not waited on, by cn_open_regular and
 * so by every reader. An alarm ends the test (failed) if a regression makes it wait. */
static void test_fifo_refused_at_once(void **state)
{
    (void)state;
    tu_place p = tu_place_make("fifo", "t10k-labels-idx1-ubyte");
    assert_int_equal(mkfifo(p.file, 0600), 0);
    uint8_t *data = NULL;
    int dims[3];
    cn_error err = {{0}};
    alarm(5);
    assert_int_equal(cn_open_regular(p.file, &err), -1);
    expect_contains(err.msg, "t10k-labels-idx1-ubyte: not a regular file (a named pipe)");
    assert_int_equal(cn_idx_read(p.file, 1, &data, dims, &err), -1);
    expect_contains(err.msg, "t10k-labels-idx1-ubyte: not a regular file (a named pipe)");
    alarm(0);
    assert_null(data);
    int fd = cn_open_regular("/nonexistent/cnnc/x.idx", &err);
    assert_int_equal(fd, -1);
    expect_contains(err.msg, "/nonexistent/cnnc/x.idx: cannot open: No such file");
    tu_place_remove(&p);
}

/* ------------------------------------------------------------------ bad sizes */

static void test_truncated_payload(void **state)
{
    (void)state;
    buffer file = images_file(2);
    file.len -= 1;
    expect_idx_failure(&file, 3, "truncated: header says 1568 bytes of data, file has 1567", NULL);
    buffer gz = gzip_buffer(&file);
    expect_idx_failure(&gz, 3, "truncated: header says 1568 bytes of data, file has 1567", NULL);
    buffer_free(&file);
    buffer_free(&gz);
}

static void test_trailing_bytes(void **state)
{
    (void)state;
    uint32_t dims[3] = {2, 28, 28};
    buffer file = make_idx(0x08, 3, dims, 2 * 28 * 28, 3);
    expect_idx_failure(&file, 3, "3 trailing bytes after the data", NULL);
    buffer gz = gzip_buffer(&file);
    expect_idx_failure(&gz, 3, "3 trailing bytes after the data", NULL);
    buffer_free(&file);
    buffer_free(&gz);
}

static void test_truncated_gzip_stream(void **state)
{
    (void)state;
    buffer raw = images_file(3);
    buffer gz = gzip_buffer(&raw);
    size_t full = gz.len;
    gz.len = full / 2;
    expect_idx_failure(&gz, 3, "truncated", "gzip");
    gz.len = full - 4; /* only the length field of the gzip trailer is missing */
    expect_idx_failure(&gz, 3, "truncated", "gzip");
    gz.len = 2;
    expect_idx_failure(&gz, 3, "truncated", NULL);
    buffer_free(&raw);
    buffer_free(&gz);
}

static void test_corrupt_gzip_stream(void **state)
{
    (void)state;
    buffer raw = images_file(3);
    buffer gz = gzip_buffer(&raw);
    gz.bytes[gz.len - 8] ^= 0xFF; /* the CRC-32 of the trailer */
    expect_idx_failure(&gz, 3, "corrupt gzip data (zlib: incorrect data check)", NULL);
    buffer_free(&raw);
    buffer_free(&gz);
}

static void test_garbage_after_gzip_stream(void **state)
{
    (void)state;
    buffer raw = images_file(1);
    buffer gz = gzip_buffer(&raw);
    buffer file = {calloc(1, gz.len + 5), gz.len + 5};
    assert_non_null(file.bytes);
    memcpy(file.bytes, gz.bytes, gz.len);
    expect_idx_failure(&file, 3, "5 bytes of non-gzip data after the gzip stream", NULL);
    buffer_free(&raw);
    buffer_free(&gz);
    buffer_free(&file);
}

static void test_html_page(void **state)
{
    (void)state;
    static const char page[] = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
                               "<body>Not Found</body></html>\n";
    buffer file = {(uint8_t *)(uintptr_t)page, sizeof page - 1};
    expect_idx_failure(&file, 3, "not an IDX file (it starts with '<!DO' — an HTML page?)",
                       NULL);
    buffer gz = gzip_buffer(&file);
    expect_idx_failure(&gz, 3, "not an IDX file (it starts with '<!DO' — an HTML page?)", NULL);
    buffer_free(&gz);
}

static void test_gzip_inside_gzip(void **state)
{
    (void)state;
    buffer raw = images_file(1);
    buffer once = gzip_buffer(&raw);
    buffer twice = gzip_buffer(&once);
    expect_idx_failure(&twice, 3, "still gzip-compressed after decompression", NULL);
    buffer_free(&raw);
    buffer_free(&once);
    buffer_free(&twice);
}

/* Runs one refusal in a child whose address space is capped well below what the header claims,
 * so a reader that trusts the header fails with "out of memory" instead of the right message. */
typedef struct {
    const char *path, *needle;
} refusal;

static int idx_refused(const void *ctx)
{
    const refusal *r = ctx;
    uint8_t *data = NULL;
    int dims[3];
    cn_error err = {{0}};
    int rc = cn_idx_read(r->path, 3, &data, dims, &err);
    int ok = rc == -1 && data == NULL && strstr(err.msg, r->path) && strstr(err.msg, r->needle);
    if (!ok) fprintf(stderr, "child: rc %d, message \"%s\", want \"%s\"\n", rc, err.msg, r->needle);
    return ok;
}

static void expect_failure_in_small_memory(const buffer *file, const char *needle)
{
    char *path = tu_write_temp(file->bytes, file->len, ".idx");
    refusal r = {path, needle};
    int ok = tu_in_small_memory(idx_refused, &r);
    unlink(path);
    free(path);
    assert_true(ok);
}

static void test_absurd_dimensions(void **state)
{
    (void)state;
    uint32_t absurd[3] = {0xFFFFFFFFu, 28, 28};
    buffer raw = make_idx(0x08, 3, absurd, 100, 0);
    expect_failure_in_small_memory(&raw, "corrupt header: dimensions 4294967295 x 28 x 28");
    buffer gz = gzip_buffer(&raw);
    expect_failure_in_small_memory(&gz, "corrupt header: dimensions 4294967295 x 28 x 28");
    buffer_free(&raw);
    buffer_free(&gz);

    /* Under the hard cap, but far more than a small compressed file can hold. */
    uint32_t big[3] = {1000000, 28, 28};
    raw = make_idx(0x08, 3, big, 100, 0);
    expect_failure_in_small_memory(&raw, "truncated");
    gz = gzip_buffer(&raw);
    expect_failure_in_small_memory(&gz, "more than");
    buffer_free(&raw);
    buffer_free(&gz);
}

/* A gzip file big enough that its header is plausible, but whose data stops early: the buffer
 * must grow with the data, not be sized from the header. */
static void test_lying_gzip_header_within_ratio(void **state)
{
    (void)state;
    uint32_t dims[3] = {300000, 28, 28}; /* 235 MB claimed */
    size_t real = 300 * 1024;
    buffer raw = make_idx(0x08, 3, dims, real, 0);
    uint32_t x = 12345;
    for (size_t i = 16; i < raw.len; i++) {
        x = x * 1664525u + 1013904223u;
        raw.bytes[i] = (uint8_t)(x >> 24);
    }
    buffer gz = gzip_buffer(&raw);
    assert_true((uint64_t)gz.len * 1032 > (uint64_t)300000 * 28 * 28 + 16);
    expect_failure_in_small_memory(&gz, "truncated: header says 235200000 bytes of data");
    buffer_free(&raw);
    buffer_free(&gz);
}

/* ------------------------------------------------------------------ splits */

static void write_in_dir(const char *dir, const char *name, const buffer *b)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (b->len) assert_int_equal(fwrite(b->bytes, 1, b->len, f), b->len);
    assert_int_equal(fclose(f), 0);
}

static void write_split(const char *dir, const char *images_name, const buffer *images,
                        const char *labels_name, const buffer *labels)
{
    if (images) write_in_dir(dir, images_name, images);
    if (labels) write_in_dir(dir, labels_name, labels);
}

static void expect_zeroed(const cn_dataset *ds)
{
    assert_int_equal(ds->count, 0);
    assert_int_equal(ds->height, 0);
    assert_int_equal(ds->width, 0);
    assert_null(ds->pixels);
    assert_null(ds->labels);
}

static void expect_load_failure(const char *dir, const char *split, const char *needle1,
                                const char *needle2, const char *needle3)
{
    cn_dataset ds;
    memset(&ds, 0xAB, sizeof ds);
    cn_error err = {{0}};
    assert_int_equal(cn_dataset_load(&ds, dir, split, &err), -1);
    expect_zeroed(&ds);
    expect_contains(err.msg, needle1);
    expect_contains(err.msg, needle2);
    expect_contains(err.msg, needle3);
}

static void test_dataset_loads_gz_images_and_raw_labels(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    buffer images = images_file(3);
    buffer gz = gzip_buffer(&images);
    buffer labels = labels_file(3);
    write_split(dir, "t10k-images-idx3-ubyte.gz", &gz, "t10k-labels-idx1-ubyte", &labels);
    cn_dataset ds;
    cn_error err = {{0}};
    if (cn_dataset_load(&ds, dir, "t10k", &err) != 0) fail_msg("load failed: %s", err.msg);
    assert_int_equal(ds.count, 3);
    assert_int_equal(ds.height, 28);
    assert_int_equal(ds.width, 28);
    expect_pattern(ds.pixels, 3 * 28 * 28);
    assert_memory_equal(ds.labels, labels.bytes + 8, 3);
    cn_dataset_free(&ds);
    expect_zeroed(&ds);
    cn_dataset_free(&ds);
    cn_dataset_free(NULL);
    buffer_free(&images);
    buffer_free(&gz);
    buffer_free(&labels);
    tu_remove_dir(dir);
}

static void test_dataset_prefers_gz(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    buffer images3 = images_file(3), labels3 = labels_file(3);
    buffer images2 = images_file(2), labels2 = labels_file(2);
    buffer gz_images = gzip_buffer(&images3), gz_labels = gzip_buffer(&labels3);
    write_split(dir, "train-images-idx3-ubyte.gz", &gz_images, "train-labels-idx1-ubyte.gz",
                &gz_labels);
    write_split(dir, "train-images-idx3-ubyte", &images2, "train-labels-idx1-ubyte", &labels2);
    size_t len = strlen(dir);
    char *slashed = malloc(len + 2);
    assert_non_null(slashed);
    memcpy(slashed, dir, len);
    memcpy(slashed + len, "/", 2);
    cn_dataset ds;
    cn_error err = {{0}};
    if (cn_dataset_load(&ds, slashed, "train", &err) != 0) fail_msg("load failed: %s", err.msg);
    assert_int_equal(ds.count, 3);
    cn_dataset_free(&ds);
    free(slashed);
    buffer_free(&images3);
    buffer_free(&labels3);
    buffer_free(&images2);
    buffer_free(&labels2);
    buffer_free(&gz_images);
    buffer_free(&gz_labels);
    tu_remove_dir(dir);
}

static void test_dataset_label_out_of_range(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    buffer images = images_file(3), labels = labels_file(3);
    labels.bytes[8 + 1] = 10;
    write_split(dir, "train-images-idx3-ubyte", &images, "train-labels-idx1-ubyte", &labels);
    cn_dataset ds;
    cn_error err = {{0}};
    assert_int_equal(cn_dataset_load(&ds, dir, "train", &err), 0); /* unnamed: 11 classes */
    assert_int_equal(ds.classes, 11);
    assert_null(ds.class_names);
    cn_dataset_free(&ds);
    buffer names = {(uint8_t *)strdup("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"), 20};
    write_in_dir(dir, "classes.txt", &names); /* 10 names: label 10 names no class */
    expect_load_failure(dir, "train", "train sample 1 has label 10", "past the 10 classes", dir);
    buffer_free(&names);
    buffer_free(&images);
    buffer_free(&labels);
    tu_remove_dir(dir);
}

static void test_dataset_count_mismatch(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    buffer images = images_file(3), labels = labels_file(2);
    write_split(dir, "train-images-idx3-ubyte", &images, "train-labels-idx1-ubyte", &labels);
    expect_load_failure(dir, "train", "train-images-idx3-ubyte has 3 images",
                        "train-labels-idx1-ubyte has 2 labels", dir);
    buffer_free(&images);
    buffer_free(&labels);
    tu_remove_dir(dir);
}

/* Both headers are read and compared before either body: images whose compressed data is
 * corrupt past their header are refused for what the headers say (a count the labels do not
 * have, a wrong image size), which a reader that decompressed the images first would never
 * reach. */
static void test_dataset_headers_checked_before_bodies(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    buffer images = images_file(100), labels = labels_file(60);
    buffer gz = gzip_buffer(&images);
    assert_true(gz.len > 200);
    memset(gz.bytes + gz.len / 2, 0xFF, 32); /* the middle of the deflate data */
    write_split(dir, "train-images-idx3-ubyte.gz", &gz, "train-labels-idx1-ubyte", &labels);
    expect_load_failure(dir, "train", "train-images-idx3-ubyte.gz has 100 images",
                        "train-labels-idx1-ubyte has 60 labels", dir);
    buffer_free(&images);
    buffer_free(&labels);
    buffer_free(&gz);
    tu_remove_dir(dir);
}

/* The MNIST family holds images of any size: 10x12 loads as it is. */
static void test_dataset_any_image_size(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    uint32_t dims[3] = {2, 10, 12};
    buffer images = make_idx(0x08, 3, dims, 240, 0), labels = labels_file(2);
    write_split(dir, "train-images-idx3-ubyte", &images, "train-labels-idx1-ubyte", &labels);
    cn_dataset ds;
    cn_error err = {{0}};
    assert_int_equal(cn_dataset_load(&ds, dir, "train", &err), 0);
    assert_int_equal(ds.count, 2);
    assert_int_equal(ds.height, 10);
    assert_int_equal(ds.width, 12);
    assert_memory_equal(ds.pixels, images.bytes + 16, 240);
    assert_int_equal(ds.format, CN_DATA_IDX);
    cn_dataset_free(&ds);
    buffer_free(&images);
    buffer_free(&labels);
    tu_remove_dir(dir);
}

static void test_dataset_missing_dir(void **state)
{
    (void)state;
    expect_load_failure("/nonexistent/cnnc-data", "train", "/nonexistent/cnnc-data",
                        "not found", "sudo apt-get install dataset-fashion-mnist");
    expect_load_failure("/etc/hostname", "train", "/etc/hostname: not a folder", "--data-dir",
                        NULL);
}

static void test_dataset_missing_files(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    expect_load_failure(dir, "train", "no dataset found", "dataset-fashion-mnist", dir);
    buffer images = images_file(1);
    write_split(dir, "train-images-idx3-ubyte", &images, NULL, NULL);
    expect_load_failure(dir, "train", "train-labels-idx1-ubyte.gz: not found",
                        "install Debian's dataset-fashion-mnist", "--data-dir DIR");
    buffer_free(&images);
    tu_remove_dir(dir);
}

static void test_dataset_renamed_file(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("test-data");
    buffer labels = labels_file(3);
    buffer gz = gzip_buffer(&labels);
    write_split(dir, "train-images-idx3-ubyte.gz", &gz, "train-labels-idx1-ubyte.gz", &gz);
    expect_load_failure(dir, "train", "train-images-idx3-ubyte.gz: expected 3 dimensions",
                        "is this a labels file?", dir);
    buffer_free(&labels);
    buffer_free(&gz);
    tu_remove_dir(dir);
}

static void test_dataset_real_splits(void **state)
{
    (void)state;
    struct stat st;
    if (stat(REAL_DATA_DIR, &st) != 0) {
        skip();
        return;
    }
    static const struct {
        const char *split;
        int count;
    } splits[] = {{"train", 60000}, {"t10k", 10000}};
    for (size_t s = 0; s < 2; s++) {
        cn_dataset ds;
        cn_error err = {{0}};
        if (cn_dataset_load(&ds, REAL_DATA_DIR, splits[s].split, &err) != 0)
            fail_msg("load failed: %s", err.msg);
        assert_int_equal(ds.count, splits[s].count);
        assert_int_equal(ds.height, 28);
        assert_int_equal(ds.width, 28);
        assert_int_equal(ds.channels, 1);
        assert_int_equal(ds.classes, CN_FASHION_MNIST_CLASSES);
        assert_non_null(ds.class_names); /* known by its labels */
        for (int c = 0; c < CN_FASHION_MNIST_CLASSES; c++)
            assert_string_equal(ds.class_names[c], cn_fashion_mnist_names[c]);
        int per_class[CN_FASHION_MNIST_CLASSES] = {0};
        for (int i = 0; i < ds.count; i++) per_class[ds.labels[i]]++;
        for (int c = 0; c < CN_FASHION_MNIST_CLASSES; c++)
            assert_int_equal(per_class[c], splits[s].count / CN_FASHION_MNIST_CLASSES);
        cn_dataset_free(&ds);
    }
}

/* ------------------------------------------------------------------ normalisation, names */

/* Per channel, the mean and the population's std of x / 255, as numpy computes them. */
static void test_dataset_normalization(void **state)
{
    (void)state;
    uint8_t pixels[2 * 2 * 3] = {0, 255, 10, 20, 30, 40, /* sample 0: channel 0, channel 1 */
                                 255, 255, 0, 0, 1, 2};  /* sample 1 */
    cn_dataset ds = {.count = 2, .channels = 2, .height = 1, .width = 3, .pixels = pixels};
    float mean[2], std[2];
    cn_error err = {{0}};
    assert_int_equal(cn_dataset_normalization(&ds, mean, std, &err), 0);
    const uint8_t ch[2][6] = {{0, 255, 10, 255, 255, 0}, {20, 30, 40, 0, 1, 2}};
    for (int c = 0; c < 2; c++) {
        double m = 0, v = 0;
        for (int i = 0; i < 6; i++) m += ch[c][i] / 255.0 / 6;
        for (int i = 0; i < 6; i++) v += (ch[c][i] / 255.0 - m) * (ch[c][i] / 255.0 - m) / 6;
        assert_true(fabs(mean[c] - m) < 1e-6);
        assert_true(fabs(std[c] - sqrt(v)) < 1e-6);
    }
    memset(pixels + 3, 7, 3), memset(pixels + 9, 7, 3); /* channel 1 constant */
    assert_int_equal(cn_dataset_normalization(&ds, mean, std, &err), -1);
    expect_contains(err.msg, "channel 1");
    expect_contains(err.msg, "constant");
}

static void test_class_names(void **state)
{
    (void)state;
    assert_string_equal(cn_fashion_mnist_names[0], "T-shirt/top");
    assert_string_equal(cn_fashion_mnist_names[6], "Shirt");
    assert_string_equal(cn_fashion_mnist_names[9], "Ankle boot");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_images_read_back),
        cmocka_unit_test(test_gzip_images_read_back),
        cmocka_unit_test(test_large_gzip_read_back),
        cmocka_unit_test(test_labels_read_back),
        cmocka_unit_test(test_multi_member_gzip_read_back),
        cmocka_unit_test(test_bad_leading_bytes),
        cmocka_unit_test(test_wrong_type_code),
        cmocka_unit_test(test_wrong_ndim),
        cmocka_unit_test(test_zero_count),
        cmocka_unit_test(test_empty_and_short_header),
        cmocka_unit_test(test_missing_file_and_folder),
        cmocka_unit_test(test_fifo_refused_at_once),
        cmocka_unit_test(test_truncated_payload),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_truncated_gzip_stream),
        cmocka_unit_test(test_corrupt_gzip_stream),
        cmocka_unit_test(test_garbage_after_gzip_stream),
        cmocka_unit_test(test_html_page),
        cmocka_unit_test(test_gzip_inside_gzip),
        cmocka_unit_test(test_absurd_dimensions),
        cmocka_unit_test(test_lying_gzip_header_within_ratio),
        cmocka_unit_test(test_dataset_loads_gz_images_and_raw_labels),
        cmocka_unit_test(test_dataset_prefers_gz),
        cmocka_unit_test(test_dataset_label_out_of_range),
        cmocka_unit_test(test_dataset_count_mismatch),
        cmocka_unit_test(test_dataset_headers_checked_before_bodies),
        cmocka_unit_test(test_dataset_any_image_size),
        cmocka_unit_test(test_dataset_missing_dir),
        cmocka_unit_test(test_dataset_missing_files),
        cmocka_unit_test(test_dataset_renamed_file),
        cmocka_unit_test(test_dataset_real_splits),
        cmocka_unit_test(test_dataset_normalization),
        cmocka_unit_test(test_class_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
