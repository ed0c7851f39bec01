/* idx.c — reads IDX files of unsigned bytes (the Fashion-MNIST format), raw or gzip-compressed,
 * telling the two apart by their first bytes, never by the name. A file is read in two steps
 * (idx.h): its header, every field checked and the size checked against the file's, then its
 * data, so that a caller can compare the headers of two files before reading either body. The
 * buffer never grows beyond what the file can hold. It does not read other IDX element types
 * (int, float), knows nothing about images or labels beyond their number of dimensions, and
 * keeps no state between calls. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/idx.h"

#define IDX_TYPE_UBYTE 0x08
#define IDX_MAX_DATA ((uint64_t)1 << 30) /* 1 GiB; Fashion-MNIST's largest file holds 47 MB */
#define GZIP_MAX_RATIO 1032u             /* deflate never expands data more than this */
#define SOURCE_CHUNK 65536
#define FIRST_ALLOC ((size_t)1 << 20)    /* gzip data starts here and doubles as it arrives */

/* The bytes of a file as a stream: read straight from disk, or inflated on the way; its header
 * once read. */
typedef struct cn_idx_file {
    const char *path;
    FILE *file;
    uint64_t file_size;
    int gzip;
    int inflate_ready;
    int stream_done;   /* gzip: the last member ended and nothing follows it */
    uint64_t read_in;  /* compressed bytes taken from the file so far */
    uint64_t read_out; /* bytes handed out so far (decompressed for gzip) */
    z_stream zs;
    unsigned char in[SOURCE_CHUNK];
    uint64_t payload;  /* data bytes the header announces */
} idx_source;

static int fail_read(const idx_source *s, cn_error *err)
{
    return cn_fail(err, "%s: read error: %s", s->path, strerror(errno));
}

static int detect_gzip(idx_source *s, cn_error *err)
{
    unsigned char magic[2];
    size_t got = fread(magic, 1, sizeof magic, s->file);
    if (got == 0 && ferror(s->file)) return fail_read(s, err);
    s->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (fseek(s->file, 0, SEEK_SET) != 0) return fail_read(s, err);
    return 0;
}

static int start_inflate(idx_source *s, cn_error *err)
{
    memset(&s->zs, 0, sizeof s->zs);
    int ret = inflateInit2(&s->zs, 15 + 16); /* 16: gzip wrapper only */
    if (ret != Z_OK) return cn_fail(err, "%s: cannot start zlib: %s", s->path, zError(ret));
    s->inflate_ready = 1;
    return 0;
}

static void source_close(idx_source *s)
{
    if (!s) return;
    if (s->inflate_ready) inflateEnd(&s->zs);
    if (s->file) fclose(s->file);
    free(s);
}

static idx_source *source_open(const char *path, cn_error *err)
{
    idx_source *s = calloc(1, sizeof *s);
    if (!s) {
        cn_fail(err, "%s: out of memory", path);
        return NULL;
    }
    s->path = path;
    int fd = cn_open_regular(path, err); /* refuses a named pipe rather than waiting on it */
    if (fd >= 0 && !(s->file = fdopen(fd, "rb"))) {
        cn_fail(err, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    struct stat st;
    if (s->file && fstat(fileno(s->file), &st) != 0) {
        cn_fail(err, "%s: cannot stat: %s", path, strerror(errno));
    } else if (s->file) {
        s->file_size = (uint64_t)st.st_size;
        if (detect_gzip(s, err) == 0 && (!s->gzip || start_inflate(s, err) == 0)) return s;
    }
    source_close(s);
    return NULL;
}

/* Moves unread input to the front of the buffer and fills the rest from the file. */
static int top_up_input(idx_source *s, cn_error *err)
{
    if (s->zs.avail_in > 0) memmove(s->in, s->zs.next_in, s->zs.avail_in);
    size_t n = fread(s->in + s->zs.avail_in, 1, SOURCE_CHUNK - s->zs.avail_in, s->file);
    if (n == 0 && ferror(s->file)) return fail_read(s, err);
    s->zs.next_in = s->in;
    s->zs.avail_in += (uInt)n;
    s->read_in += n;
    return 0;
}

/* After a gzip member ends: the file ends too, another member follows, or it is garbage. */
static int after_gzip_member(idx_source *s, cn_error *err)
{
    if (s->zs.avail_in < 2 && top_up_input(s, err) < 0) return -1;
    if (s->zs.avail_in == 0) {
        s->stream_done = 1;
        return 0;
    }
    if (s->zs.avail_in >= 2 && s->zs.next_in[0] == 0x1f && s->zs.next_in[1] == 0x8b) {
        inflateReset(&s->zs);
        return 0;
    }
    uint64_t used = s->read_in - s->zs.avail_in;
    uint64_t left = s->file_size > used ? s->file_size - used : s->zs.avail_in;
    return cn_fail(err, "%s: %llu bytes of non-gzip data after the gzip stream", s->path,
                   (unsigned long long)left);
}

static int fail_inflate(const idx_source *s, int ret, cn_error *err)
{
    const char *why = s->zs.msg ? s->zs.msg : zError(ret);
    return cn_fail(err, "%s: corrupt gzip data (zlib: %s)", s->path, why);
}

static int fail_gzip_truncated(const idx_source *s, cn_error *err)
{
    return cn_fail(err,
                   "%s: truncated: the gzip stream ends early, after %llu decompressed bytes "
                   "(incomplete download?)",
                   s->path, (unsigned long long)s->read_out);
}

static int inflate_some(idx_source *s, uint8_t *buf, uInt n, size_t *got, cn_error *err)
{
    s->zs.next_out = buf;
    s->zs.avail_out = n;
    while (s->zs.avail_out > 0 && !s->stream_done) {
        if (s->zs.avail_in == 0 && top_up_input(s, err) < 0) return -1;
        if (s->zs.avail_in == 0) return fail_gzip_truncated(s, err);
        int ret = inflate(&s->zs, Z_NO_FLUSH);
        s->read_out += (n - s->zs.avail_out) - (*got);
        *got = n - s->zs.avail_out;
        if (ret == Z_STREAM_END) {
            if (after_gzip_member(s, err) < 0) return -1;
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            return fail_inflate(s, ret, err);
        }
    }
    return 0;
}

static int read_raw(idx_source *s, uint8_t *buf, size_t n, size_t *got, cn_error *err)
{
    *got = fread(buf, 1, n, s->file);
    if (*got < n && ferror(s->file)) return fail_read(s, err);
    s->read_out += *got;
    return 0;
}

/* Reads up to n bytes; *got < n only at the end of the data. */
static int source_read(idx_source *s, uint8_t *buf, size_t n, size_t *got, cn_error *err)
{
    *got = 0;
    if (!s->gzip) return read_raw(s, buf, n, got, err);
    while (*got < n && !s->stream_done) {
        size_t want = n - *got;
        uInt piece = want > SOURCE_CHUNK ? SOURCE_CHUNK : (uInt)want;
        size_t piece_got = 0;
        if (inflate_some(s, buf + *got, piece, &piece_got, err) < 0) return -1;
        *got += piece_got;
    }
    return 0;
}

/* ------------------------------------------------------------------ header */

static uint32_t read_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static const char *role_of_ndim(int ndim)
{
    return ndim == 3 ? "images" : ndim == 1 ? "labels" : NULL;
}

/* Writes the first bytes as text, escaping what is not printable: '<!DO' or '\x89PNG'. */
static void describe_bytes(char *out, size_t size, const uint8_t *bytes, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used + 5 < size; i++) {
        int printable = bytes[i] >= 0x20 && bytes[i] < 0x7f && bytes[i] != '\'';
        int w = printable ? snprintf(out + used, size - used, "%c", bytes[i])
                          : snprintf(out + used, size - used, "\\x%02X", bytes[i]);
        used += (size_t)w;
    }
}

static int fail_not_idx(const idx_source *s, const uint8_t *magic, size_t got, cn_error *err)
{
    char start[32];
    describe_bytes(start, sizeof start, magic, got);
    const char *hint = magic[0] == '<' ? " — an HTML page?" : "";
    return cn_fail(err, "%s: not an IDX file (it starts with '%s'%s)", s->path, start, hint);
}

static int fail_ndim(const idx_source *s, int want, int found, cn_error *err)
{
    const char *want_role = role_of_ndim(want);
    const char *found_role = found == 3 ? "an images" : found == 1 ? "a labels" : NULL;
    char want_text[32] = "", hint[48] = "";
    if (want_role) snprintf(want_text, sizeof want_text, " (%s)", want_role);
    if (found_role) snprintf(hint, sizeof hint, " — is this %s file?", found_role);
    return cn_fail(err, "%s: expected %d dimension%s%s, found %d%s", s->path, want,
                   want == 1 ? "" : "s", want_text, found, hint);
}

static int check_magic(const idx_source *s, const uint8_t *magic, size_t got, int want_ndim,
                       cn_error *err)
{
    if (got == 0)
        return cn_fail(err, "%s: empty%s", s->path, s->gzip ? " after decompression" : " file");
    if (s->gzip && got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b)
        return cn_fail(err,
                       "%s: still gzip-compressed after decompression? (a .gz inside a .gz; "
                       "gunzip it once more)",
                       s->path);
    if (magic[0] != 0 || (got >= 2 && magic[1] != 0)) return fail_not_idx(s, magic, got, err);
    if (got < 4)
        return cn_fail(err, "%s: truncated: %zu bytes, too short for an IDX header", s->path, got);
    if (magic[2] != IDX_TYPE_UBYTE)
        return cn_fail(err, "%s: IDX type 0x%02X is not unsigned bytes (0x%02X)", s->path,
                       magic[2], IDX_TYPE_UBYTE);
    if (magic[3] != want_ndim) return fail_ndim(s, want_ndim, magic[3], err);
    return 0;
}

static void format_dims(char *out, size_t size, const uint32_t *dims, int ndim)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%lu", i ? " x " : "",
                                 (unsigned long)dims[i]);
}

/* Checks the dimensions and returns their product, refusing anything above IDX_MAX_DATA. */
static int check_dims(const idx_source *s, const uint32_t *dims, int ndim, uint64_t *payload,
                      cn_error *err)
{
    char text[64];
    format_dims(text, sizeof text, dims, ndim);
    for (int i = 0; i < ndim; i++)
        if (dims[i] == 0)
            return cn_fail(err, "%s: dimension %d of %s is zero (no data)", s->path, i, text);
    uint64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] > IDX_MAX_DATA / total)
            return cn_fail(err, "%s: corrupt header: dimensions %s make more than 1 GiB of data",
                           s->path, text);
        total *= dims[i];
    }
    *payload = total;
    return 0;
}

static int read_header(idx_source *s, int want_ndim, uint32_t *dims, uint64_t *payload,
                       cn_error *err)
{
    uint8_t magic[4], raw_dims[12];
    size_t got, need = 4 * (size_t)want_ndim;
    if (source_read(s, magic, sizeof magic, &got, err) < 0) return -1;
    if (check_magic(s, magic, got, want_ndim, err) < 0) return -1;
    if (source_read(s, raw_dims, need, &got, err) < 0) return -1;
    if (got < need)
        return cn_fail(err, "%s: truncated: the header needs %zu bytes, file has %zu", s->path,
                       4 + need, 4 + got);
    for (int i = 0; i < want_ndim; i++) dims[i] = read_be32(raw_dims + 4 * i);
    return check_dims(s, dims, want_ndim, payload, err);
}

/* ------------------------------------------------------------------ sizes and data */

static int fail_truncated(const idx_source *s, uint64_t payload, uint64_t have, cn_error *err)
{
    return cn_fail(err, "%s: truncated: header says %llu bytes of data, file has %llu%s", s->path,
                   (unsigned long long)payload, (unsigned long long)have,
                   s->gzip ? " after decompression" : "");
}

static int fail_trailing(const idx_source *s, uint64_t extra, int more, cn_error *err)
{
    return cn_fail(err, "%s: %s%llu trailing bytes after the data%s", s->path,
                   more ? "more than " : "", (unsigned long long)extra,
                   s->gzip ? " (after decompression)" : "");
}

/* Before anything is allocated: a raw file must be exactly header + payload long; a gzip file
 * must be big enough to inflate to that much. */
static int check_plausible_size(const idx_source *s, uint64_t header, uint64_t payload,
                                cn_error *err)
{
    if (s->gzip) {
        uint64_t most = s->file_size * GZIP_MAX_RATIO;
        if (header + payload > most)
            return cn_fail(err,
                           "%s: truncated or corrupt: header says %llu bytes of data, more than "
                           "%llu compressed bytes can hold",
                           s->path, (unsigned long long)payload,
                           (unsigned long long)s->file_size);
        return 0;
    }
    uint64_t have = s->file_size > header ? s->file_size - header : 0;
    if (have < payload) return fail_truncated(s, payload, have, err);
    if (have > payload) return fail_trailing(s, have - payload, 0, err);
    return 0;
}

static int grow(uint8_t **buf, size_t *cap, size_t limit, const char *path, cn_error *err)
{
    size_t next = *cap * 2 < limit ? *cap * 2 : limit;
    uint8_t *bigger = realloc(*buf, next);
    if (!bigger) return cn_fail(err, "%s: out of memory (%zu bytes)", path, next);
    *buf = bigger;
    *cap = next;
    return 0;
}

/* Reads exactly payload bytes. Raw files were measured already and get one buffer; gzip data
 * gets a buffer that doubles only as decompressed bytes actually arrive. */
static int read_payload(idx_source *s, size_t payload, uint8_t **out, cn_error *err)
{
    size_t cap = s->gzip && payload > FIRST_ALLOC ? FIRST_ALLOC : payload;
    size_t have = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) return cn_fail(err, "%s: out of memory (%zu bytes)", s->path, cap);
    int rc = 0;
    while (rc == 0 && have < payload) {
        size_t got = 0;
        if (have == cap) rc = grow(&buf, &cap, payload, s->path, err);
        if (rc == 0) rc = source_read(s, buf + have, cap - have, &got, err);
        if (rc == 0 && have + got < cap) rc = fail_truncated(s, payload, have + got, err);
        have += got;
    }
    if (rc < 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

/* The data must end where the header says: counts whatever follows (up to a bound). */
static int expect_end(idx_source *s, cn_error *err)
{
    uint8_t scratch[16384];
    uint64_t extra = 0;
    size_t got;
    do {
        if (source_read(s, scratch, sizeof scratch, &got, err) < 0) return -1;
        extra += got;
    } while (got == sizeof scratch && extra < IDX_MAX_DATA);
    if (extra > 0) return fail_trailing(s, extra, got == sizeof scratch, err);
    return 0;
}

cn_idx_file *cn_idx_open(const char *path, int want_ndim, int dims[3], cn_error *err)
{
    if (!path || !dims || want_ndim < 1 || want_ndim > 3) {
        cn_fail(err, "cn_idx_read: bad arguments (want_ndim must be 1..3)");
        return NULL;
    }
    idx_source *s = source_open(path, err);
    if (!s) return NULL;
    uint32_t file_dims[3];
    uint64_t header = 4 + 4 * (uint64_t)want_ndim;
    int rc = read_header(s, want_ndim, file_dims, &s->payload, err);
    if (rc == 0) rc = check_plausible_size(s, header, s->payload, err);
    if (rc < 0) {
        source_close(s);
        return NULL;
    }
    for (int i = 0; i < want_ndim; i++) dims[i] = (int)file_dims[i];
    return s;
}

int cn_idx_read_data(cn_idx_file *f, uint8_t **data, cn_error *err)
{
    uint8_t *buf = NULL;
    *data = NULL;
    int rc = read_payload(f, (size_t)f->payload, &buf, err);
    if (rc == 0) rc = expect_end(f, err);
    if (rc < 0) {
        free(buf);
        return -1;
    }
    *data = buf;
    return 0;
}

void cn_idx_close(cn_idx_file *f)
{
    source_close(f);
}

int cn_idx_read(const char *path, int want_ndim, uint8_t **data, int dims[3], cn_error *err)
{
    if (!data) return cn_fail(err, "cn_idx_read: bad arguments (want_ndim must be 1..3)");
    *data = NULL;
    cn_idx_file *f = cn_idx_open(path, want_ndim, dims, err);
    if (!f) return -1;
    int rc = cn_idx_read_data(f, data, err);
    cn_idx_close(f);
    return rc;
}
