/* conv_bench.c — times the convolution kernels of src/kernels/conv.h, one thread, on the seed's
 * conv1 and conv2 (and their backward from the max-pool's picks, cn_conv2d_pool_backward, with
 * half the picks' gradients zero as after the seed's relu; conv1 as a first layer, without an
 * input gradient) and on the layers of a small CIFAR-10 network (3x3 kernels, padding 1, 32 to 64
 * channels on 32x32, 16x16 and 8x8 planes; those of models/fashion_mnist_best.model on 14x14 and
 * 7x7; the CIFAR network's conv1 also as the first layer it is, without an input gradient), with
 * a padded layer beside the valid convolution of the same size that it amounts to, and a
 * stride-2 layer. For each: forward, backward (weight,
 * bias and input gradients) and both, in ms per batch and GFLOP/s (2 flops per multiply-add of
 * the three products), best of several rounds, in fp32 and, where the CPU has AVX512_BF16, in
 * bf16. Run by `make bench-conv` (`build/conv_bench [--bf16] [TEXT]`: the layers whose name
 * contains TEXT). Measures; asserts nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/conv.h"

#define BATCH 32
#define ROUNDS 25

typedef struct {
    const char *what;
    int C, H, W, OC, K, stride, pad;
    int pool;  /* also backward from the picks of a max-pool of this window after it (0: not) */
    int first; /* ... as a first layer: no input gradient */
} layer;

static const layer layers[] = {
    {"seed conv1 1->10 5x5 28x28", 1, 28, 28, 10, 5, 1, 0, 2, 1},
    {"seed conv2 10->20 5x5 12x12", 10, 12, 12, 20, 5, 1, 0, 2, 0},
    {"cifar 3->32 3x3 pad 1 32x32", 3, 32, 32, 32, 3, 1, 1, 0, 1},
    {"cifar 32->32 3x3 pad 1 32x32", 32, 32, 32, 32, 3, 1, 1, 0, 0},
    {"  valid 32->32 3x3 34x34", 32, 34, 34, 32, 3, 1, 0, 0, 0},
    {"cifar 32->64 3x3 pad 1 16x16", 32, 16, 16, 64, 3, 1, 1, 0, 0},
    {"cifar 64->64 3x3 pad 1 16x16", 64, 16, 16, 64, 3, 1, 1, 0, 0},
    {"  valid 64->64 3x3 18x18", 64, 18, 18, 64, 3, 1, 0, 0, 0},
    {"cifar 64->64 3x3 pad 1 8x8", 64, 8, 8, 64, 3, 1, 1, 0, 0},
    {"stride 2 32->64 3x3 pad 1 32x32", 32, 32, 32, 64, 3, 2, 1, 0, 0},
    {"best 32->64 3x3 pad 1 14x14", 32, 14, 14, 64, 3, 1, 1, 0, 0},
    {"best 64->128 3x3 pad 1 7x7", 64, 7, 7, 128, 3, 1, 1, 0, 0},
    {"  valid 64->64 3x3 12x12", 64, 12, 12, 64, 3, 1, 0, 0, 0},
};

typedef struct {
    float *x, *w, *b, *y, *dy, *dx, *dw, *db, *col;
    cn_bf16_pair *packed;
    float *dpool, *pool_col; /* the pool's gradient and the fused backward's scratch */
    int32_t *picks;          /* the pool's picks: a random position in each window */
} buffers;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *random_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "conv_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

static buffers make_buffers(const cn_conv_shape *s)
{
    size_t nx = (size_t)BATCH * s->C * s->H * s->W, nw = (size_t)s->OC * s->C * s->K * s->K;
    size_t ny = (size_t)BATCH * s->OC * s->OH * s->OW;
    return (buffers){random_floats(nx), random_floats(nw), random_floats((size_t)s->OC),
                     random_floats(ny), random_floats(ny), random_floats(nx), random_floats(nw),
                     random_floats((size_t)s->OC), random_floats(cn_conv2d_col_floats(s)),
                     (cn_bf16_pair *)random_floats(cn_conv2d_packed_words(s)), NULL, NULL, NULL};
}

/* The pool's gradient, half of it zero, and picks for windows (and stride) S. */
static void make_picks(buffers *b, const cn_conv_shape *s, int S)
{
    int PW = s->OW / S, Q = (s->OH / S) * PW;
    size_t n = (size_t)BATCH * s->OC * Q;
    b->dpool = random_floats(n);
    b->picks = malloc(n * sizeof *b->picks);
    b->pool_col = random_floats(cn_conv2d_pool_col_floats(s, S));
    if (!b->picks) {
        fprintf(stderr, "conv_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        int q = (int)(i % (size_t)Q), wy = q / PW, wx = q % PW;
        b->picks[i] = (S * wy + rand() % S) * s->OW + S * wx + rand() % S;
        if (rand() % 2) b->dpool[i] = 0.0f;
    }
}

static void free_buffers(buffers *b)
{
    float *all[] = {b->x, b->w, b->b, b->y, b->dy, b->dx, b->dw, b->db, b->col,
                    (float *)b->packed, b->dpool, b->pool_col, (float *)b->picks};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* part 0: forward, 1: backward, 2: backward from the picks of window 2, 3: the same as a first
 * layer, 4: backward as a first layer (no input gradient). */
static void run(int part, int bf16, const cn_conv_shape *s, buffers *b)
{
    if (part == 2 || part == 3)
        cn_conv2d_pool_backward(part == 3 ? NULL : b->dx, b->dw, b->db, b->dpool, b->picks, NULL,
                                b->x, b->w, BATCH, s, 2, b->pool_col);
    else if (part == 0 && bf16)
        cn_conv2d_forward_bf16(b->y, b->x, b->w, b->b, BATCH, s, b->packed);
    else if (part == 0)
        cn_conv2d_forward(b->y, b->x, b->w, b->b, BATCH, s, b->col);
    else if (bf16)
        cn_conv2d_backward_bf16(part == 4 ? NULL : b->dx, b->dw, b->db, b->dy, b->x, b->w, BATCH, s, b->col,
                                b->packed);
    else
        cn_conv2d_backward(part == 4 ? NULL : b->dx, b->dw, b->db, b->dy, b->x, b->w, BATCH, s, b->col);
}

/* Seconds per call of part, best of ROUNDS rounds of enough calls for about 20 ms each. */
static double seconds_per_call(int part, int bf16, const cn_conv_shape *s, buffers *b)
{
    int reps = 1;
    double start = now_seconds();
    run(part, bf16, s, b);
    double once = now_seconds() - start;
    if (once < 0.02) reps = (int)(0.02 / (once > 1e-7 ? once : 1e-7)) + 1;
    double best = 1e30;
    for (int round = 0; round < ROUNDS; round++) {
        start = now_seconds();
        for (int r = 0; r < reps; r++) run(part, bf16, s, b);
        double t = (now_seconds() - start) / reps;
        if (t < best) best = t;
    }
    return best;
}

static void report(const layer *l, int bf16)
{
    cn_conv_shape s = cn_conv_shape_of(l->C, l->H, l->W, l->OC, l->K, l->stride, l->pad);
    buffers b = make_buffers(&s);
    double macs = (double)BATCH * s.OC * s.C * s.K * s.K * s.OH * s.OW;
    double fwd = seconds_per_call(0, bf16, &s, &b), bwd = seconds_per_call(1, bf16, &s, &b);
    printf("%-34s %4s %8.3f %7.1f %8.3f %7.1f %8.3f %7.1f\n", l->what, bf16 ? "bf16" : "fp32",
           1e3 * fwd, 2 * macs / fwd * 1e-9, 1e3 * bwd, 4 * macs / bwd * 1e-9, 1e3 * (fwd + bwd),
           6 * macs / (fwd + bwd) * 1e-9);
    if (l->first && !l->pool) { /* the weight and bias gradients only */
        double first = seconds_per_call(4, bf16, &s, &b);
        printf("%-34s %4s %8s %7s %8.3f %7.1f\n", "  backward as a first layer",
               bf16 ? "bf16" : "fp32", "", "", 1e3 * first, 2 * macs / first * 1e-9);
    }
    if (l->pool == 2 && !bf16) { /* the products it does: a quarter of the dense ones */
        make_picks(&b, &s, l->pool);
        double picked = seconds_per_call(l->first ? 3 : 2, 0, &s, &b);
        double done = (l->first ? 2 : 4) * macs / (l->pool * l->pool);
        printf("%-34s %4s %8s %7s %8.3f %7.1f\n", l->first ? "  from the picks, a first layer"
                                                           : "  from the picks",
               "fp32", "", "", 1e3 * picked, done / picked * 1e-9);
    }
    free_buffers(&b);
}

/* conv_bench [--bf16] [TEXT]: every layer, or those whose name contains TEXT. */
int main(int argc, char **argv)
{
    int bf16 = argc > 1 && strcmp(argv[1], "--bf16") == 0;
    const char *only = argc > 1 + bf16 ? argv[1 + bf16] : "";
    if (argc > 2 + bf16 || only[0] == '-') {
        fprintf(stderr, "usage: conv_bench [--bf16] [TEXT]\n");
        return 2;
    }
    printf("batch %d, one thread; ms per batch and GFLOP/s\n", BATCH);
    printf("%-34s %4s %8s %7s %8s %7s %8s %7s\n", "layer", "", "fwd ms", "GF/s", "bwd ms",
           "GF/s", "both ms", "GF/s");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        if (!strstr(layers[i].what, only)) continue;
        report(&layers[i], 0);
        if (bf16 && cn_bf16_supported()) report(&layers[i], 1);
    }
    return 0;
}
