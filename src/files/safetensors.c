/* safetensors.c — cnnc's checkpoint format: an 8-byte little-endian header length, a JSON header
 * (Jansson) and the raw little-endian tensor bytes. Writing is atomic (temporary file in the same
 * folder, fsync, rename, fsync of the folder); reading checks the header against the file's size
 * before the rest is read, then loads the whole file and validates it strictly again before
 * anything is handed out. The temporary is named PATH.tmp.PID.N: it never ends
 * in ".safetensors", so nothing that looks for checkpoints by name takes it for one.
 * Test hook, compiled only into the test builds (-DCNNC_TEST_HOOKS, never into the shipped
 * library): with CNNC_TEST_STALL_WRITE=1 in the environment, a write stops half-way through its
 * temporary (header and the first half of the tensors written), says so on stderr and waits to
 * be killed; the tests use it to kill a process in the middle of a write. Any other value stalls
 * only the writes whose path contains it.
 * It deliberately does not memory-map files, convert dtypes, read dtypes other than F32 and I64,
 * or run on big-endian hosts (tensor bytes are written and read as the host holds them). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnnc.h"
#include "error.h"
#include "files/file_read.h"
#include "files/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes tensor bytes as the host holds them: little-endian hosts only"
#endif

#define HEADER_LIMIT 100000000u
#define MAX_DIMS 4
#define NAME_CAPACITY ((int)sizeof(((cn_tensor_ref *)0)->name))
#define METADATA_KEY "__metadata__"
#define TEMP_ATTEMPTS 100

struct cn_safetensors {
    uint8_t *bytes;         /* the whole file */
    size_t size;
    cn_tensor_ref *tensors; /* in data order; data points into bytes */
    int count;
    json_t *meta;           /* the __metadata__ object, or NULL */
};

/* A tensor entry of the header while the file is checked. */
typedef struct {
    cn_tensor_ref ref;
    uint64_t begin, end; /* data_offsets */
    size_t index;        /* position in the header */
} entry;

/* ---------------------------------------------------------------- dtypes and shapes */

static const char *dtype_name(cn_dtype dtype)
{
    return dtype == CN_I64 ? "I64" : "F32";
}

static size_t dtype_size(cn_dtype dtype)
{
    return dtype == CN_I64 ? 8 : 4;
}

static int is_known_dtype(cn_dtype dtype)
{
    return dtype == CN_F32 || dtype == CN_I64;
}

/* Dtypes of the safetensors format that cnnc recognises but does not read. */
static int is_foreign_dtype(const char *name)
{
    static const char *const foreign[] = {"F64", "F16", "BF16", "I32", "I16", "I8", "U8",
                                          "U16", "U32", "U64", "BOOL", "F8_E4M3", "F8_E5M2"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
        if (strcmp(name, foreign[i]) == 0) return 1;
    return 0;
}

/* Bytes taken by a tensor of this shape; -1 when the count overflows 64 bits. */
static int shape_bytes(const int64_t *shape, int ndim, cn_dtype dtype, uint64_t *bytes)
{
    uint64_t total = dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        uint64_t dim = (uint64_t)shape[d];
        if (dim != 0 && total > UINT64_MAX / dim) return -1;
        total *= dim;
    }
    *bytes = total;
    return 0;
}

/* "[10, 1, 5, 5]" into buf. */
static const char *format_shape(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "",
                                 (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

/* ---------------------------------------------------------------- header for writing */

static int check_ref(const char *path, const cn_tensor_ref *t, uint64_t *bytes, cn_error *err)
{
    if (memchr(t->name, '\0', sizeof t->name) == NULL)
        return cn_fail(err, "%s: cannot write: a tensor name is not NUL-terminated", path);
    if (strcmp(t->name, METADATA_KEY) == 0)
        return cn_fail(err, "%s: cannot write: \"%s\" is reserved, not a tensor name", path,
                       METADATA_KEY);
    if (!is_known_dtype(t->dtype))
        return cn_fail(err, "%s: cannot write tensor %s: unknown dtype %d", path, t->name,
                       (int)t->dtype);
    if (t->ndim < 0 || t->ndim > MAX_DIMS)
        return cn_fail(err, "%s: cannot write tensor %s: ndim %d is not in 0..%d", path, t->name,
                       t->ndim, MAX_DIMS);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0)
            return cn_fail(err, "%s: cannot write tensor %s: negative dimension %lld", path,
                           t->name, (long long)t->shape[d]);
    if (shape_bytes(t->shape, t->ndim, t->dtype, bytes) != 0)
        return cn_fail(err, "%s: cannot write tensor %s: its size overflows", path, t->name);
    if (*bytes > 0 && t->data == NULL)
        return cn_fail(err, "%s: cannot write tensor %s: data is NULL", path, t->name);
    return 0;
}

static json_t *shape_json(const cn_tensor_ref *t)
{
    json_t *shape = json_array();
    for (int d = 0; shape && d < t->ndim; d++)
        if (json_array_append_new(shape, json_integer((json_int_t)t->shape[d])) != 0) {
            json_decref(shape);
            return NULL;
        }
    return shape;
}

static json_t *tensor_json(const cn_tensor_ref *t, uint64_t begin, uint64_t end)
{
    return json_pack("{s:s, s:o, s:[I,I]}", "dtype", dtype_name(t->dtype), "shape",
                     shape_json(t), "data_offsets", (json_int_t)begin, (json_int_t)end);
}

static int add_tensors(json_t *root, const char *path, const cn_tensor_ref *tensors,
                       int num_tensors, cn_error *err)
{
    uint64_t offset = 0;
    for (int i = 0; i < num_tensors; i++) {
        const cn_tensor_ref *t = &tensors[i];
        uint64_t bytes = 0;
        if (check_ref(path, t, &bytes, err) != 0) return -1;
        if (json_object_get(root, t->name))
            return cn_fail(err, "%s: cannot write: tensor name %s appears twice", path, t->name);
        if (bytes > (uint64_t)LLONG_MAX - offset)
            return cn_fail(err, "%s: cannot write: the tensors' total size overflows", path);
        if (json_object_set_new(root, t->name, tensor_json(t, offset, offset + bytes)) != 0)
            return cn_fail(err, "%s: cannot write tensor %s: name is not UTF-8 or out of memory",
                           path, t->name);
        offset += bytes;
    }
    return 0;
}

static int add_meta_pair(json_t *meta, const char *path, const char *key, const char *value,
                         cn_error *err)
{
    if (key == NULL || value == NULL)
        return cn_fail(err, "%s: cannot write: a metadata key or value is NULL", path);
    if (json_object_get(meta, key))
        return cn_fail(err, "%s: cannot write: metadata key \"%s\" appears twice or is reserved",
                       path, key);
    if (json_object_set_new(meta, key, json_string(value)) != 0)
        return cn_fail(err, "%s: cannot write: metadata \"%s\" is not UTF-8 or out of memory",
                       path, key);
    return 0;
}

static int add_metadata(json_t *root, const char *path, const char *const *meta, int num_meta,
                        cn_error *err)
{
    json_t *obj = json_object();
    if (json_object_set_new(root, METADATA_KEY, obj) != 0)
        return cn_fail(err, "%s: cannot write: out of memory", path);
    if (add_meta_pair(obj, path, "format", "pt", err) != 0) return -1;
    for (int i = 0; i < num_meta; i++)
        if (add_meta_pair(obj, path, meta[2 * i], meta[2 * i + 1], err) != 0) return -1;
    return 0;
}

static json_t *build_header(const char *path, const cn_tensor_ref *tensors, int num_tensors,
                            const char *const *meta, int num_meta, cn_error *err)
{
    json_t *root = json_object();
    if (!root) {
        cn_fail(err, "%s: cannot write: out of memory", path);
        return NULL;
    }
    if (add_tensors(root, path, tensors, num_tensors, err) != 0 ||
        add_metadata(root, path, meta, num_meta, err) != 0) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* ---------------------------------------------------------------- atomic file output */

/* Each step below returns 0 or an errno value. */

static int write_bytes(FILE *f, const void *bytes, size_t len)
{
    errno = 0;
    if (len > 0 && fwrite(bytes, 1, len, f) != len) return errno ? errno : EIO;
    return 0;
}

static int write_header(FILE *f, const char *json)
{
    static const char spaces[8] = "        ";
    size_t len = strlen(json);
    size_t padded = len + (8 - len % 8) % 8; /* 8 + padded is a multiple of 8 */
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int rc = write_bytes(f, prefix, sizeof prefix);
    if (rc == 0) rc = write_bytes(f, json, len);
    if (rc == 0) rc = write_bytes(f, spaces, padded - len);
    return rc;
}

#ifdef CNNC_TEST_HOOKS
/* The test hook (see the top of this file): never returns. */
static void stall_forever(FILE *f, const char *tmp)
{
    fflush(f);
    fprintf(stderr, "cnnc: test hook CNNC_TEST_STALL_WRITE: stalled writing %s\n", tmp);
    for (;;) pause();
}

static int stall_requested(const char *path)
{
    const char *value = getenv("CNNC_TEST_STALL_WRITE");
    return value && *value && (strcmp(value, "1") == 0 || strstr(path, value));
}
#else
static void stall_forever(FILE *f, const char *tmp)
{
    (void)f, (void)tmp;
}

static int stall_requested(const char *path)
{
    (void)path;
    return 0;
}
#endif

/* stall_name: the temporary's name when the test hook is on, NULL otherwise. */
static int write_contents(FILE *f, const char *json, const cn_tensor_ref *tensors,
                          int num_tensors, const char *stall_name)
{
    int rc = write_header(f, json);
    for (int i = 0; rc == 0 && i < num_tensors; i++) {
        uint64_t bytes = 0;
        if (stall_name && i == num_tensors / 2) stall_forever(f, stall_name);
        shape_bytes(tensors[i].shape, tensors[i].ndim, tensors[i].dtype, &bytes);
        rc = write_bytes(f, tensors[i].data, (size_t)bytes);
    }
    if (rc == 0 && fflush(f) != 0) rc = errno ? errno : EIO;
    if (rc == 0 && fsync(fileno(f)) != 0) rc = errno;
    return rc;
}

/* Creates PATH.tmp.PID.N with O_EXCL (mode 0666 less the umask, as for any new file); the name
 * goes into tmp. Returns the descriptor, or -1 with errno set. */
static int create_temporary(const char *path, char *tmp, size_t cap)
{
    for (int attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
        snprintf(tmp, cap, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Fills the open temporary (named tmp) and closes it. */
static int fill_temporary(int fd, const char *tmp, const char *json,
                          const cn_tensor_ref *tensors, int num_tensors)
{
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int rc = errno;
        close(fd);
        return rc;
    }
    int rc = write_contents(f, json, tensors, num_tensors, stall_requested(tmp) ? tmp : NULL);
    if (fclose(f) != 0 && rc == 0) rc = errno ? errno : EIO;
    return rc;
}

static int sync_folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *folder = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
                         : strdup(".");
    if (!folder) return ENOMEM;
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(folder);
    if (fd < 0) return errno;
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : errno; /* EINVAL: cannot sync folders */
    close(fd);
    return rc;
}

static int replace_atomically(const char *path, const char *json, const cn_tensor_ref *tensors,
                              int num_tensors, cn_error *err)
{
    size_t cap = strlen(path) + 48;
    char *tmp = malloc(cap);
    if (!tmp) return cn_fail(err, "%s: cannot write: %s", path, strerror(ENOMEM));
    int fd = create_temporary(path, tmp, cap);
    int rc = fd < 0 ? errno : fill_temporary(fd, tmp, json, tensors, num_tensors);
    if (rc == 0 && rename(tmp, path) != 0) rc = errno;
    if (rc != 0 && fd >= 0) unlink(tmp);
    free(tmp);
    if (rc != 0) return cn_fail(err, "%s: cannot write: %s", path, strerror(rc));
    rc = sync_folder_of(path);
    if (rc != 0)
        return cn_fail(err, "%s: written, but its folder cannot be synced: %s", path,
                       strerror(rc));
    return 0;
}

int cn_safetensors_write(const char *path, const cn_tensor_ref *tensors, int num_tensors,
                         const char *const *meta, int num_meta, cn_error *err)
{
    if (path == NULL) return cn_fail(err, "safetensors: no file name given");
    if (num_tensors < 0 || num_meta < 0 || (num_tensors > 0 && !tensors) ||
        (num_meta > 0 && !meta))
        return cn_fail(err, "%s: cannot write: invalid tensor or metadata list", path);
    json_t *header = build_header(path, tensors, num_tensors, meta, num_meta, err);
    if (!header) return -1;
    char *json = json_dumps(header, JSON_COMPACT);
    json_decref(header);
    if (!json) return cn_fail(err, "%s: cannot write: %s", path, strerror(ENOMEM));
    int rc = replace_atomically(path, json, tensors, num_tensors, err);
    free(json);
    return rc;
}

/* ---------------------------------------------------------------- reading */

static uint64_t read_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int cn_safetensors_signature(const uint8_t *bytes, size_t len)
{
    return len >= 9 && bytes[8] == '{' && read_le64(bytes) <= len - 8;
}

/* Whether the 8-byte header length can begin a safetensors file of size bytes: a text file, a
 * picture or a corrupt length is refused as "not a safetensors file" here, before the file is
 * read whole. */
static int check_start(const char *path, const uint8_t *start, size_t got, uint64_t size,
                       cn_error *err)
{
    static const char *const lead = "not a safetensors file: its first 8 bytes, read as the "
                                    "header length, give";
    if (got < 8)
        return cn_fail(err, "%s: file is %llu bytes, too short for the 8-byte header length",
                       path, (unsigned long long)size);
    uint64_t len = read_le64(start);
    if (len > HEADER_LIMIT)
        return cn_fail(err, "%s: %s %llu, over the limit of %u bytes", path, lead,
                       (unsigned long long)len, HEADER_LIMIT);
    if (len > size - 8)
        return cn_fail(err, "%s: %s %llu, which runs past the end of the file (%llu bytes)",
                       path, lead, (unsigned long long)len, (unsigned long long)size);
    return 0;
}

static int take_header(cn_safetensors *f, const char *path, json_t *root, uint8_t *data,
                       uint64_t data_size, cn_error *err);

/* Parses the JSON header (len bytes at json) and validates it against data_size bytes of data
 * into f, the tensors pointing into data (NULL: the header alone is checked, the tensors point
 * nowhere). */
static int take_header_text(cn_safetensors *f, const char *path, const uint8_t *json,
                            uint64_t len, uint8_t *data, uint64_t data_size, cn_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)json, (size_t)len,
                              JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root)
        return cn_fail(err, "%s: header is not valid JSON: %s (header byte %d)", path, jerr.text,
                       jerr.position);
    int rc = take_header(f, path, root, data, data_size, err);
    json_decref(root);
    return rc;
}

/* Reads the JSON header (len bytes after the 8-byte length) of a file of size bytes and checks
 * it as parse_file will: a header that is not JSON, or whose tensors do not cover the rest of
 * the file exactly (a file far larger than its tensors), is refused before the rest is read. */
static int peek_header(const char *path, int fd, uint64_t len, uint64_t size, cn_error *err)
{
    uint8_t *json = malloc(len ? (size_t)len : 1);
    if (!json) return cn_fail(err, "%s: cannot read: %s", path, strerror(ENOMEM));
    size_t have = 0;
    ssize_t got = 1;
    while (have < len && (got = pread(fd, json + have, (size_t)len - have, 8 + (off_t)have)) > 0)
        have += (size_t)got;
    int rc;
    if (got < 0)
        rc = cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else if (have < len)
        rc = cn_fail(err, "%s: cannot read: file shrank while reading", path);
    else {
        cn_safetensors probe = {0};
        rc = take_header_text(&probe, path, json, len, NULL, size - 8 - len, err);
        free(probe.tensors);
        json_decref(probe.meta);
    }
    free(json);
    return rc;
}

/* Reads the first bytes of path and checks them (check_start), then the header (peek_header),
 * without reading the rest. A named pipe or a device is refused by cn_open_regular rather than
 * waited on. */
static int peek_start(const char *path, cn_error *err)
{
    int fd = cn_open_regular(path, err);
    if (fd < 0) return -1;
    struct stat st;
    uint8_t start[8];
    ssize_t got = 0;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else if ((got = pread(fd, start, sizeof start, 0)) < 0)
        rc = cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else if ((rc = check_start(path, start, (size_t)got, (uint64_t)st.st_size, err)) == 0)
        rc = peek_header(path, fd, read_le64(start), (uint64_t)st.st_size, err);
    close(fd);
    return rc;
}

static int read_file(const char *path, uint8_t **bytes, size_t *size, cn_error *err)
{
    if (peek_start(path, err) != 0) return -1;
    int rc = cn_read_file(path, UINT64_MAX, bytes, size, err);
    if (rc == CN_FILE_TOO_LARGE)
        return cn_fail(err, "%s: file too large (%lld bytes)", path, (long long)*size);
    return rc;
}

static int parse_dtype(const char *path, const char *name, json_t *value, cn_dtype *dtype,
                       cn_error *err)
{
    const char *s = json_string_value(value);
    if (!s) return cn_fail(err, "%s: tensor %s: dtype is not a string", path, name);
    if (strcmp(s, "F32") == 0) *dtype = CN_F32;
    else if (strcmp(s, "I64") == 0) *dtype = CN_I64;
    else if (is_foreign_dtype(s))
        return cn_fail(err, "%s: tensor %s: dtype %s is not supported (cnnc reads F32 and I64)",
                       path, name, s);
    else
        return cn_fail(err, "%s: tensor %s: unknown dtype \"%.40s\"", path, name, s);
    return 0;
}

static int parse_shape(const char *path, const char *name, json_t *value, cn_tensor_ref *ref,
                       cn_error *err)
{
    if (!json_is_array(value))
        return cn_fail(err, "%s: tensor %s: shape is not a list", path, name);
    size_t ndim = json_array_size(value);
    if (ndim > MAX_DIMS)
        return cn_fail(err, "%s: tensor %s: shape has %zu dimensions (cnnc reads at most %d)",
                       path, name, ndim, MAX_DIMS);
    for (size_t d = 0; d < ndim; d++) {
        json_t *dim = json_array_get(value, d);
        if (!json_is_integer(dim) || json_integer_value(dim) < 0)
            return cn_fail(err, "%s: tensor %s: shape[%zu] is not a non-negative integer", path,
                           name, d);
        ref->shape[d] = (int64_t)json_integer_value(dim);
    }
    ref->ndim = (int)ndim;
    return 0;
}

static int parse_offsets(const char *path, const char *name, json_t *value, entry *e,
                         cn_error *err)
{
    json_t *b = json_array_get(value, 0), *x = json_array_get(value, 1);
    if (!json_is_array(value) || json_array_size(value) != 2 || !json_is_integer(b) ||
        !json_is_integer(x) || json_integer_value(b) < 0 ||
        json_integer_value(b) > json_integer_value(x))
        return cn_fail(err,
                       "%s: tensor %s: data_offsets is not [begin, end] with 0 <= begin <= end",
                       path, name);
    e->begin = (uint64_t)json_integer_value(b);
    e->end = (uint64_t)json_integer_value(x);
    return 0;
}

static int check_entry_keys(const char *path, const char *name, json_t *value, cn_error *err)
{
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    if (!json_is_object(value))
        return cn_fail(err, "%s: tensor %s: entry is not an object", path, name);
    const char *key;
    json_t *v;
    json_object_foreach(value, key, v) {
        if (strcmp(key, keys[0]) != 0 && strcmp(key, keys[1]) != 0 && strcmp(key, keys[2]) != 0)
            return cn_fail(err, "%s: tensor %s: unexpected key \"%.40s\"", path, name, key);
    }
    for (int k = 0; k < 3; k++)
        if (!json_object_get(value, keys[k]))
            return cn_fail(err, "%s: tensor %s: \"%s\" is missing", path, name, keys[k]);
    return 0;
}

static int check_entry_size(const char *path, const entry *e, uint64_t data_size, cn_error *err)
{
    const cn_tensor_ref *r = &e->ref;
    uint64_t bytes = 0;
    char shape[128];
    if (shape_bytes(r->shape, r->ndim, r->dtype, &bytes) != 0)
        return cn_fail(err, "%s: tensor %s: shape %s is too large", path, r->name,
                       format_shape(shape, sizeof shape, r->shape, r->ndim));
    if (bytes != e->end - e->begin)
        return cn_fail(err,
                       "%s: tensor %s: shape %s of %s takes %llu bytes but data_offsets "
                       "[%llu, %llu] span %llu",
                       path, r->name, format_shape(shape, sizeof shape, r->shape, r->ndim),
                       dtype_name(r->dtype), (unsigned long long)bytes,
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)(e->end - e->begin));
    if (e->end > data_size)
        return cn_fail(err,
                       "%s: tensor %s: data_offsets [%llu, %llu] run past the end of the data "
                       "(%llu bytes)",
                       path, r->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)data_size);
    return 0;
}

static int parse_entry(const char *path, const char *name, json_t *value, uint64_t data_size,
                       entry *e, cn_error *err)
{
    if (strlen(name) >= (size_t)NAME_CAPACITY)
        return cn_fail(err, "%s: tensor name \"%.40s...\" is longer than %d bytes", path, name,
                       NAME_CAPACITY - 1);
    memcpy(e->ref.name, name, strlen(name) + 1);
    if (check_entry_keys(path, name, value, err) != 0 ||
        parse_dtype(path, name, json_object_get(value, "dtype"), &e->ref.dtype, err) != 0 ||
        parse_shape(path, name, json_object_get(value, "shape"), &e->ref, err) != 0 ||
        parse_offsets(path, name, json_object_get(value, "data_offsets"), e, err) != 0)
        return -1;
    return check_entry_size(path, e, data_size, err);
}

static int check_metadata(const char *path, json_t *meta, cn_error *err)
{
    if (!json_is_object(meta)) return cn_fail(err, "%s: %s is not an object", path, METADATA_KEY);
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value) {
        if (!json_is_string(value))
            return cn_fail(err, "%s: %s value for \"%.40s\" is not a string", path, METADATA_KEY,
                           key);
    }
    return 0;
}

static int compare_entries(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Entries sorted by offsets must tile [0, data_size) exactly. */
static int check_coverage(const char *path, const entry *e, size_t n, uint64_t data_size,
                          cn_error *err)
{
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].begin > pos)
            return cn_fail(err, "%s: bytes %llu..%llu of the data belong to no tensor (gap before "
                                "tensor %s)",
                           path, (unsigned long long)pos, (unsigned long long)e[i].begin,
                           e[i].ref.name);
        if (e[i].begin < pos)
            return cn_fail(err, "%s: tensors %s and %s overlap (bytes %llu..%llu and %llu..%llu)",
                           path, e[i - 1].ref.name, e[i].ref.name,
                           (unsigned long long)e[i - 1].begin, (unsigned long long)e[i - 1].end,
                           (unsigned long long)e[i].begin, (unsigned long long)e[i].end);
        pos = e[i].end;
    }
    if (pos < data_size)
        return cn_fail(err, "%s: %llu trailing bytes after the last tensor's data", path,
                       (unsigned long long)(data_size - pos));
    return 0;
}

static int parse_entries(const char *path, json_t *root, uint64_t data_size, entry *entries,
                         cn_error *err)
{
    size_t i = 0;
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, METADATA_KEY) == 0) continue;
        entries[i].index = i;
        if (parse_entry(path, key, value, data_size, &entries[i], err) != 0) return -1;
        i++;
    }
    return 0;
}

/* Validates the header root and fills f->tensors (data order) and f->meta. */
static int take_header(cn_safetensors *f, const char *path, json_t *root, uint8_t *data,
                       uint64_t data_size, cn_error *err)
{
    if (!json_is_object(root)) return cn_fail(err, "%s: header is not a JSON object", path);
    json_t *meta = json_object_get(root, METADATA_KEY);
    if (meta && check_metadata(path, meta, err) != 0) return -1;
    size_t n = json_object_size(root) - (meta != NULL);
    if (n > INT_MAX) return cn_fail(err, "%s: too many tensors (%zu)", path, n);
    entry *entries = calloc(n ? n : 1, sizeof *entries);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!entries || !f->tensors) {
        free(entries);
        return cn_fail(err, "%s: cannot read: %s", path, strerror(ENOMEM));
    }
    int rc = parse_entries(path, root, data_size, entries, err);
    if (rc == 0) qsort(entries, n, sizeof *entries, compare_entries);
    if (rc == 0) rc = check_coverage(path, entries, n, data_size, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        f->tensors[i] = entries[i].ref;
        f->tensors[i].data = data ? data + entries[i].begin : NULL;
    }
    free(entries);
    if (rc != 0) return -1;
    f->count = (int)n;
    f->meta = json_incref(meta);
    return 0;
}

static int parse_file(cn_safetensors *f, const char *path, cn_error *err)
{
    /* again on the bytes read: the file may have changed since peek_start */
    if (check_start(path, f->bytes, f->size, f->size, err) != 0) return -1;
    uint64_t header_len = read_le64(f->bytes);
    size_t data_start = 8 + (size_t)header_len;
    return take_header_text(f, path, f->bytes + 8, header_len, f->bytes + data_start,
                            f->size - data_start, err);
}

cn_safetensors *cn_safetensors_read(const char *path, cn_error *err)
{
    if (path == NULL) {
        cn_fail(err, "safetensors: no file name given");
        return NULL;
    }
    cn_safetensors *f = calloc(1, sizeof *f);
    if (!f) {
        cn_fail(err, "%s: cannot read: %s", path, strerror(ENOMEM));
        return NULL;
    }
    if (read_file(path, &f->bytes, &f->size, err) != 0 || parse_file(f, path, err) != 0) {
        cn_keep_one_line(err);
        cn_safetensors_free(f);
        return NULL;
    }
    return f;
}

void cn_safetensors_free(cn_safetensors *f)
{
    if (!f) return;
    json_decref(f->meta);
    free(f->tensors);
    free(f->bytes);
    free(f);
}

int cn_safetensors_count(const cn_safetensors *f)
{
    return f ? f->count : 0;
}

const cn_tensor_ref *cn_safetensors_at(const cn_safetensors *f, int i)
{
    return f && i >= 0 && i < f->count ? &f->tensors[i] : NULL;
}

const cn_tensor_ref *cn_safetensors_get(const cn_safetensors *f, const char *name)
{
    for (int i = 0; f && name && i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *cn_safetensors_meta(const cn_safetensors *f, const char *key)
{
    if (!f || !f->meta || !key) return NULL;
    return json_string_value(json_object_get(f->meta, key));
}
