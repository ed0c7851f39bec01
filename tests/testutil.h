/* testutil.h — what every cmocka test program here includes: cmocka itself (which needs these
 * standard headers first), the public and internal headers, and small helpers for temporary
 * files and folders, tensor sizes, PNG read-back, float comparisons and finite differences. No
 * test logic lives here. */
#ifndef CN_TESTUTIL_H
#define CN_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cairo.h>
#include <jpeglib.h>

#include "cnnc.h"

/* 1 in an AddressSanitizer build, whose shadow memory rules out capping the address space. */
#ifdef __SANITIZE_ADDRESS__
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

/* Runs check(ctx) in a child process whose address space is capped at 128 MiB (not under
 * AddressSanitizer), for readers that must refuse a file without allocating what its header
 * claims; 1 when check returned non-zero there, else 0 (it says why on stderr). */
static inline int tu_in_small_memory(int (*check)(const void *ctx), const void *ctx)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit limit = {(rlim_t)128 << 20, (rlim_t)128 << 20};
        if (!UNDER_ASAN && setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
        _exit(check(ctx) ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Writes len bytes to a fresh file under /tmp and returns its malloc'd path. */
static inline char *tu_write_temp(const void *bytes, size_t len, const char *suffix)
{
    char *path = malloc(256);
    assert_non_null(path);
    static int counter;
    snprintf(path, 256, "/tmp/cnnc-test-%d-%d%s", (int)getpid(), counter++, suffix);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Makes a fresh folder /tmp/cnnc-NAME-XXXXXX and returns its malloc'd path. */
static inline char *tu_make_temp_dir(const char *name)
{
    size_t len = strlen(name) + sizeof "/tmp/cnnc--XXXXXX";
    char *dir = malloc(len);
    assert_non_null(dir);
    snprintf(dir, len, "/tmp/cnnc-%s-XXXXXX", name);
    assert_non_null(mkdtemp(dir));
    return dir;
}

/* "dir/name", malloc'd. */
static inline char *tu_join(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    assert_non_null(path);
    snprintf(path, len, "%s/%s", dir, name);
    return path;
}

/* How many entries dir holds besides . and .. */
static inline int tu_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

/* Removes dir and the plain files and empty folders directly inside it; frees the path. Fails
 * the test when anything is left. */
static inline void tu_remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = tu_join(dir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
        free(p);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}

/* A fresh empty folder for one test and the path of the file the test writes there. */
typedef struct {
    char *dir;
    char *file;
} tu_place;

static inline tu_place tu_place_make(const char *name, const char *file)
{
    tu_place p = {tu_make_temp_dir(name), NULL};
    p.file = tu_join(p.dir, file);
    return p;
}

/* Removes the file and the folder, which must then be empty (no temporary left over). */
static inline void tu_place_remove(tu_place *p)
{
    unlink(p->file);
    assert_int_equal(tu_count_entries(p->dir), 0);
    free(p->file);
    tu_remove_dir(p->dir);
}

/* The bytes of a tensor's data. */
static inline size_t tu_ref_bytes(const cn_tensor_ref *r)
{
    size_t n = r->dtype == CN_I64 ? 8 : 4;
    for (int d = 0; d < r->ndim; d++) n *= (size_t)r->shape[d];
    return n;
}

/* The data of refs[0..n) and then extra_len bytes of extra, concatenated (malloc'd, its length in
 * *len): what a model or trainer holds, to compare before and after. */
static inline uint8_t *tu_concat_tensors(const cn_tensor_ref *refs, int n, const void *extra,
                                         size_t extra_len, size_t *len)
{
    size_t total = extra_len;
    for (int i = 0; i < n; i++) total += tu_ref_bytes(&refs[i]);
    uint8_t *bytes = malloc(total ? total : 1), *at = bytes;
    assert_non_null(bytes);
    for (int i = 0; i < n; i++) {
        memcpy(at, refs[i].data, tu_ref_bytes(&refs[i]));
        at += tu_ref_bytes(&refs[i]);
    }
    if (extra_len) memcpy(at, extra, extra_len);
    *len = total;
    return bytes;
}

/* Asserts that two malloc'd byte strings are the same, then frees both. */
static inline void tu_assert_same_bytes(uint8_t *a, size_t a_len, uint8_t *b, size_t b_len)
{
    assert_int_equal(a_len, b_len);
    assert_memory_equal(a, b, a_len);
    free(a);
    free(b);
}

/* Reads a PNG back with cairo and checks that it is opaque: cairo loads a PNG without an alpha
 * channel as RGB24. The caller destroys the surface. */
static inline cairo_surface_t *tu_png_read(const char *path)
{
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    assert_int_equal(cairo_image_surface_get_format(s), CAIRO_FORMAT_RGB24);
    return s;
}

/* The pixel at (x, y) of an RGB24 surface, as 0xRRGGBB. */
static inline uint32_t tu_pixel(cairo_surface_t *s, int x, int y)
{
    const unsigned char *row = cairo_image_surface_get_data(s) +
                               (size_t)y * (size_t)cairo_image_surface_get_stride(s);
    return ((const uint32_t *)(const void *)row)[x] & 0xFFFFFFu;
}

/* A JPEG made by libjpeg at quality (1..100) from width x height pixels of components bytes
 * each (interleaved) in colour space space (JCS_GRAYSCALE, JCS_RGB, JCS_CMYK, or JCS_YCCK: CMYK
 * pixels stored as YCCK), progressive or not: its bytes (malloc'd; the caller frees them) and
 * their number in *len. */
static inline unsigned char *tu_jpeg_bytes(const uint8_t *pixels, int width, int height,
                                           int components, J_COLOR_SPACE space, int quality,
                                           int progressive, unsigned long *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    *len = 0;
    jpeg_mem_dest(&c, &out, len);
    c.image_width = (JDIMENSION)width;
    c.image_height = (JDIMENSION)height;
    c.input_components = components;
    c.in_color_space = space == JCS_YCCK ? JCS_CMYK : space;
    jpeg_set_defaults(&c);
    if (space == JCS_YCCK) jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, quality, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * width * components);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return out;
}

/* x rounded to the nearest bfloat16 (ties to even), as a float; x finite. */
static inline float tu_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Largest |a-b| / (atol + rtol*|b|) over n values; <= 1 means within tolerance. */
static inline double tu_max_violation(const float *a, const float *b, size_t n, double atol,
                                      double rtol)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == b[i]) continue; /* equal, even where the tolerance is 0 (a tensor of zeros) */
        double v = fabs((double)a[i] - (double)b[i]) / (atol + rtol * fabs((double)b[i]));
        if (isnan(v)) return INFINITY; /* a NaN on either side fails every "> 1" and "<= 1" */
        if (v > worst) worst = v;
    }
    return worst;
}

/* The largest |x[i]| of n values (a comparison, not fmax: a loop of fmax crashed the arm64
 * cross compiler, GCC 12.2). */
static inline double tu_largest_abs(const float *x, size_t n)
{
    double largest = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)x[i]) > largest) largest = fabs((double)x[i]);
    return largest;
}

/* Fails the test when some |got - want| > atol + rtol * |want|, printing every value off. */
static inline void tu_expect_close(const char *what, const float *got, const float *want,
                                   size_t n, double atol, double rtol)
{
    double v = tu_max_violation(got, want, n, atol, rtol);
    if (v <= 1) return;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / (atol + rtol * fabs((double)want[i]));
        if (got[i] != want[i] && !(d <= 1)) print_error("%s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
    }
    fail_msg("%s: worst violation %.3g of atol %g + rtol %g", what, v, atol, rtol);
}

/* sum a[i] * b[i] in double. */
static inline double tu_dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Central finite differences of a loss L (summed in double) against a backward pass: the step
 * in float, the tolerance on the finite difference, the share of points that must be checked. */
#define TU_FD_EPS 1e-2f
#define TU_FD_ATOL 2e-4
#define TU_FD_RTOL 1e-3
#define TU_FD_MIN_CHECKED 0.8

typedef double (*tu_loss_fn)(void *ctx);        /* runs the forward, returns L */
typedef int (*tu_skip_fn)(void *ctx, size_t i); /* 1: point i is too close to a kink */

/* Compares grad[i] with (L(p[i] + eps) - L(p[i] - eps)) / (actual float step) for every i of
 * p that near_kink does not reject (it may be NULL), and requires 80% of the points checked. */
static inline void tu_fd_check(const char *what, tu_loss_fn loss, void *ctx, float *p,
                               const float *grad, size_t n, tu_skip_fn near_kink)
{
    size_t checked = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (near_kink && near_kink(ctx, i)) continue;
        float v = p[i], hi = v + TU_FD_EPS, lo = v - TU_FD_EPS;
        p[i] = hi;
        double lp = loss(ctx);
        p[i] = lo;
        double lm = loss(ctx);
        p[i] = v;
        double fd = (lp - lm) / ((double)hi - lo);
        double viol = fabs(fd - grad[i]) / (TU_FD_ATOL + TU_FD_RTOL * fabs(fd));
        if (!(viol <= 1)) print_error("%s[%zu]: backward %.7g, finite difference %.7g\n", what,
                                      i, grad[i], fd);
        if (!(viol <= worst)) worst = viol;
        checked++;
    }
    if (!(worst <= 1)) fail_msg("%s: worst finite-difference violation %.3g", what, worst);
    if ((double)checked < TU_FD_MIN_CHECKED * (double)n)
        fail_msg("%s: only %zu of %zu points checked", what, checked, n);
}

/* Reads tests/fixtures/FILE (or $CNNC_FIXTURES/FILE), written by tools/gen_fixtures.py; NULL with
 * a printed hint when it cannot. */
static inline cn_safetensors *tu_read_fixture(const char *file)
{
    const char *dir = getenv("CNNC_FIXTURES");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", file);
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) print_error("%s (generate with /usr/bin/python3 tools/gen_fixtures.py)\n", err.msg);
    return f;
}

/* Says which instruction set the kernels use in this run. When CNNC_ISA names one this CPU
 * lacks, returns 1 so that main() can skip the whole program (tests/run.sh runs the kernel
 * tests once per instruction set). */
static inline int tu_isa_unavailable(void)
{
    cn_error err;
    cn_isa isa;
    if (cn_isa_from_env(&isa, &err) != 0) {
        printf("skipped: %s\n", err.msg);
        return 1;
    }
    printf("instruction set: %s\n", cn_isa_name(cn_isa_active()));
    return 0;
}

/* A synthetic 28x28 set whose label is a function of the image (random pixels with a bright
 * row band at the label's height), so that a model can learn it; the caller frees it. */
static inline cn_dataset tu_synthetic_set(int count, uint64_t seed)
{
    cn_dataset ds = {.count = count, .channels = 1, .height = 28, .width = 28, .classes = 10,
                     .pixels = malloc((size_t)count * 784), .labels = malloc((size_t)count)};
    assert_non_null(ds.pixels);
    assert_non_null(ds.labels);
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    for (int i = 0; i < count; i++) {
        int label = (int)cn_rng_below(&rng, 10);
        ds.labels[i] = (uint8_t)label;
        for (int p = 0; p < 784; p++) {
            int band = (p / 28) / 3 == label; /* a bright row band at the label's height */
            ds.pixels[(size_t)i * 784 + p] = (uint8_t)(cn_rng_below(&rng, 80) + (band ? 170 : 0));
        }
    }
    return ds;
}

#endif /* CN_TESTUTIL_H */
