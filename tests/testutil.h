/* testutil.h — what every cmocka test program here includes: cmocka itself (which needs these
 * standard headers first), the public and internal headers, and small helpers for temporary
 * files and float comparisons. No test logic lives here. */
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

#include "cnnc.h"

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

/* Largest |a-b| / (atol + rtol*|b|) over n values; <= 1 means within tolerance. */
static inline double tu_max_violation(const float *a, const float *b, size_t n, double atol,
                                      double rtol)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double v = fabs((double)a[i] - (double)b[i]) / (atol + rtol * fabs((double)b[i]));
        if (!(v <= worst)) worst = v; /* NaN propagates as a failure */
    }
    return worst;
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

#endif /* CN_TESTUTIL_H */
