/* peak.c — measures this machine's single-precision arithmetic peak with the kernels in use:
 * every thread runs independent chains of vector multiply-adds for a fixed time. It is what the
 * benchmark compares achieved GFLOP/s against. Not a GEMM benchmark: no memory traffic at all. */
#include <stdlib.h>

#include "clock.h"
#include "cnnc.h"
#include "kernels/gemm.h"

typedef struct {
    long iters;
    double flops[1024];
    float sink[1024];
} burn_job;

static void burn_task(void *ctx, int task, int thread)
{
    (void)thread;
    burn_job *job = ctx;
    job->sink[task] = cn_fma_burn(job->iters, (float)task, &job->flops[task]);
}

/* Runs one round on every thread; returns its flops per second. */
static double burn_round(cn_pool *pool, int threads, burn_job *job, double *seconds)
{
    for (int i = 0; i < threads; i++) job->flops[i] = 0;
    double start = cn_seconds();
    cn_pool_run(pool, threads, burn_task, job);
    *seconds = cn_seconds() - start;
    double flops = 0;
    for (int i = 0; i < threads; i++) flops += job->flops[i];
    return flops / *seconds;
}

int cn_peak_gflops(int threads, double *gflops, cn_error *err)
{
    if (threads < 1 || threads > 1024) return cn_fail(err, "peak: %d threads", threads);
    cn_pool *pool = cn_pool_create(threads, err);
    burn_job *job = calloc(1, sizeof *job);
    if (!pool || !job) {
        cn_pool_free(pool);
        free(job);
        return pool ? cn_fail(err, "peak: out of memory") : -1;
    }
    double seconds = 0, best = 0;
    job->iters = 1 << 16;
    while (burn_round(pool, threads, job, &seconds) > 0 && seconds < 0.05) job->iters *= 2;
    for (int round = 0; round < 5; round++) { /* the best of five: the others were disturbed */
        double rate = burn_round(pool, threads, job, &seconds);
        best = rate > best ? rate : best;
    }
    *gflops = best * 1e-9;
    cn_pool_free(pool);
    free(job);
    return 0;
}
