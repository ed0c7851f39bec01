/* gemm.h — the single-precision matrix product that the conv and linear layers are built on,
 * the other vector kernels of the convolutions and pools (patch copies, 2x2 max-pooling,
 * gradients from a max-pool's picks, bf16 products), and the choice of instruction set behind
 * them. Row-major; no threads inside (the trainer parallelises across replicas); deterministic:
 * the order of the sums depends only on the shapes and on the instruction set. */
#ifndef CN_GEMM_H
#define CN_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "cnnc.h"

/* C[M,N] = (accumulate ? C : 0) + op(A)[M,K] * op(B)[K,N], where op(A) = A [M,K] (lda) or, with
 * trans_a, A^T of A [K,M]; likewise op(B) = B [K,N] (ldb) or, with trans_b, B^T of B [N,K].
 * Both transposed at once is not supported (asserted). */
void cn_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
              const float *B, int ldb, int accumulate, float *C, int ldc);

/* C[M,N] = start[i] in each row i + A[M,K] * B[K,N] (no transposes): the sums start from one
 * value per row (a bias), with the same bits as filling C with it and accumulating, without the
 * pass that fills C. */
void cn_sgemm_rows_from(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        const float *start, float *C, int ldc);

/* C[M,N] = (start ? start[i] in row i : 0) + A[M,K] * B'[K,N], where row k of B' is the N floats
 * at B + brow[k]: rows that overlap or repeat, such as those of a convolution's patch matrix
 * read from cn_shifted_planes. Each element is summed over k in order, as in cn_sgemm. */
void cn_sgemm_rows_at(int M, int N, int K, const float *A, int lda, const float *B,
                      const int32_t *brow, const float *start, float *C, int ldc);

/* 1 when this build has the kernels of isa and this CPU can run them (cpu.c). */
int cn_cpu_runs(cn_isa isa);

/* iters rounds of independent vector multiply-adds with the kernels in use: the arithmetic peak
 * of one core. Adds the flops done to *flops; returns a value to keep. */
float cn_fma_burn(long iters, float seed, double *flops);

/* C[M,N] += A[M,K] * B[K,N] (no transposes), each element's sum over k in chains of CN_CHAIN
 * terms from zero, each chain's sum added to it in order: a long sum (over the tiles of a batch)
 * rounds about as a tree of 16 lanes would, at the speed of a plain product. */
#define CN_CHAIN 16
void cn_sgemm_chained(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float *C, int ldc);

/* dst [cols, rows] (row stride ldd) = the transpose of src [rows, cols] (row stride lds). */
void cn_transpose(float *dst, int ldd, const float *src, int lds, int rows, int cols);
/* The same for a destination stored around the caches (cn_streamed): its whole, aligned
 * vectors go by non-temporal stores where the instruction set has them. */
void cn_transpose_streamed(float *dst, int ldd, const float *src, int lds, int rows, int cols);
/* dst [n] = src [n], the same way around the caches: an output that went through scratch. */
void cn_copy_streamed(float *dst, const float *src, size_t n);

/* Outputs of a pass over a batch of at least this many floats (4 MiB) are stored around the
 * caches (non-temporal stores): the next pass cannot find them there anyway (two threads'
 * batches of such outputs outgrow a last-level cache), and ordinary stores would first fetch
 * every line they write and evict what the pass works in (its transformed blocks, its
 * products). Smaller outputs stay in the caches for the pass after. Measured in
 * docs/speed.md ("Outputs around the caches"). */
#define CN_STREAM_FLOATS ((size_t)1 << 20)
static inline int cn_streamed(size_t floats) { return floats >= CN_STREAM_FLOATS; }

/* The patch matrices of a valid, stride-1 convolution of one sample in [C,H,W] with K x K
 * kernels, OH = H-K+1, OW = W-K+1: im2col writes col [C*K*K, OH*OW] (row (c,ky,kx) holds
 * in[c, oy+ky, ox+kx] for every position), im2row its transpose rows [OH*OW, C*K*K] with row
 * stride ld >= C*K*K (what lies between rows is not kept), and col2im is the adjoint of im2col
 * (din zeroed, then every patch entry added back). */
void cn_im2col(float *col, const float *in, int C, int H, int W, int K);
void cn_im2row(float *rows, int ld, const float *in, int C, int H, int W, int K);
/* The patch matrix of the same convolution as K shifted copies of each input channel: planes
 * [C*K, H, OW] with plane stride ps >= H*OW, plane (c,kx) holding in[c, y, x+kx]. Row (c,ky,kx)
 * of im2col's matrix is the OH*OW floats at planes + (c*K + kx)*ps + ky*OW. */
void cn_shifted_planes(float *planes, ptrdiff_t ps, const float *in, int C, int H, int W, int K);
/* dst [C, rows, W + 2 pad]: rows [y0 - pad, y0 - pad + rows) of in [C, H, W] with pad zeros on
 * each side, rows outside [0, H) all zeros; cn_crop_rows takes the inside of a whole padded
 * plane [C, H + 2 pad, W + 2 pad] back out. */
void cn_pad_rows(float *dst, const float *in, int C, int H, int W, int pad, int y0, int rows);
void cn_crop_rows(float *out, const float *plane, int C, int H, int W, int pad);
/* im2row may write this many floats past the end of rows: leave them free. */
#define CN_IM2ROW_SLACK 8
void cn_col2im(float *din, const float *col, int C, int H, int W, int K);

/* dweight [OC, C*K*K] += the weight gradient of a valid, stride-1 convolution of one sample
 * in [C,H,W] whose output gradient is zero except at Q positions per output channel, as after a
 * max-pool: a [OC, Q] holds the values, at [OC, Q] their positions in the output plane
 * (y * OW + x). Sums over the positions in a fixed order. */
void cn_conv_picked_weight_gradient(int OC, int Q, const float *a, const int32_t *at,
                                    const float *in, int C, int H, int W, int K, float *dweight);

/* The same picks as rows of a patch matrix rows [P, L] (im2row, L = C*K*K, row stride ld):
 * dweight [OC, L] (row stride ldw) += sum over q of a[oc, q] * rows[at[oc, q], 0..L), each row in
 * pick order. */
void cn_picked_rows_weight_gradient(int OC, int Q, const float *a, const int32_t *at,
                                    const float *rows, int L, int ld, float *dweight, int ldw);
/* ... and the patch-matrix gradient of the input, in two steps: the picks sorted by position
 * into sorted (CN_PICK_SCRATCH_INTS(P, OC * Q) ints), then drows [P, L] = zeros, then a[oc, q] *
 * weight[oc, 0..L) added to row at[oc, q] for each pick, output channels in order; weight and
 * drows have row stride ld. One sort serves the columns of the weights taken group by group.
 * Rows starting on a cache line (ld a multiple of 16, buffers aligned to 64 bytes) go about half
 * again as fast. */
#define CN_PICK_SCRATCH_INTS(P, picks) ((size_t)(P) + 1 + 2 * (size_t)(picks))
void cn_picks_by_position(int OC, int Q, const float *a, const int32_t *at, int P,
                          int32_t *sorted);
void cn_picked_rows_input_gradient(const int32_t *sorted, int P, const float *weight, int L,
                                   int ld, float *drows);
/* The adjoint of im2row: din [C, H, W] = the patch rows [OH*OW, C*K*K] (row stride ld) summed
 * back onto the input, each element's terms in (ky, ox) order (the same bits on every
 * instruction set). */
void cn_row2im(float *din, const float *rows, int ld, int C, int H, int W, int K);

/* y [planes, H/2, W/2] = the maxima of the 2x2 windows of each plane of x [planes, H, W] (a
 * last odd row or column is left out), where [planes, H/2, W/2] = the index in its plane of
 * each: the first maximum in scan order, as PyTorch picks it. */
void cn_maxpool2_planes(float *y, int32_t *where, const float *x, int planes, int H, int W);
/* The same windows over x [H*W, C] with the positions as rows (a channel a column): y and
 * where [H/2 * W/2, C]; the same maxima and indices as cn_maxpool2_planes of the transpose. */
void cn_maxpool2_rows(float *y, int32_t *where, const float *x, int H, int W, int C);
/* dx [planes, H, W] = the gradient dy [planes, H/2, W/2] of each window at its pick where
 * [planes, H/2, W/2] (as cn_maxpool2_planes writes them), zeros elsewhere: the bits of adding
 * each to a zeroed plane. */
void cn_maxpool2_gradient(float *dx, const float *dy, const int32_t *where, int planes, int H,
                          int W);

/* ---- the transforms of Winograd's algorithm F(4x4, 3x3) (winograd.c) ----
 * A plane of IH x IW inputs zero-padded by pad, with OH x OW outputs in TH x TW tiles of 4 x 4,
 * a tile's 36 entries (6x6 input blocks) xs floats apart. Multiplications by powers of two
 * only: the same bits on every instruction set. */
typedef struct {
    int IH, IW, pad;
    int OH, OW, TH, TW;
    /* the input and output transforms' (1 for the gradient's): the planes one call
     * transforms, stride floats apart, their tiles consecutive in the transformed rows, so
     * that planes of fewer tiles than a vector share vectors (the same channel of a few
     * samples) */
    int planes;
    ptrdiff_t stride;
    int stream; /* the output's: 1 stores whole vectors around the caches (cn_streamed) */
} cn_winograd_plane;
/* v = B^T d B of each tile's 6x6 input block of the planes; y = A^T m A (+ bias) of each tile's
 * entries; row: cn_winograd4_row_floats(s) floats of scratch. */
void cn_winograd4_input(float *v, ptrdiff_t xs, const float *plane, const cn_winograd_plane *s,
                        float *row);
void cn_winograd4_output(float *y, const float *m, ptrdiff_t xs, const cn_winograd_plane *s,
                         float bias, float *row);
/* m [36 entries xs apart][TH * TW tiles][C] = A dY A^T of each tile's 4x4 block dY of each of C
 * channels of the output gradient turned round, d [4 TH, 4 TW, C] (positions as rows, zeros
 * past its edges): the weight gradient's F(4x4, 3x3). */
void cn_winograd4_gradient_rows(float *m, ptrdiff_t xs, const float *d,
                                const cn_winograd_plane *s, int C);
/* 12 rows of 4 floats a tile (of every plane) and 4 vectors of 16 more, and a vector. */
static inline size_t cn_winograd4_row_floats(const cn_winograd_plane *s)
{
    return 12 * (4 * (size_t)s->planes * s->TH * s->TW + 64) + 16;
}

/* Asks for the n floats at p ahead of their turn, a 64-byte line at a time. Sweeps over planes
 * of 32 x 32 floats (whole 4 KB pages, where the hardware's prefetchers stop) fetch the next
 * plane while they work one (batchnorm.c, cn_winograd4_input). A function that does nothing
 * but call this must be always inlined: GCC drops the calls to a function it finds without
 * effects, and prefetches have none (tests/cli_fetch_ahead.sh). */
static inline void cn_fetch_ahead(const float *p, int n)
{
    for (int i = 0; i < n; i += 16) __builtin_prefetch(p + i);
}

/* The same for n floats that are about to be written: their lines are fetched to be owned. */
static inline void cn_fetch_ahead_to_write(float *p, int n)
{
    for (int i = 0; i < n; i += 16) __builtin_prefetch(p + i, 1);
}

/* ---- BatchNorm's passes over the planes of one channel (batchnorm.c) ----
 * Sums are in double, element i of each plane into lane i % 16 of each; they add to what the
 * lanes hold. */
typedef struct {
    float mean, invstd;  /* xhat = (x - mean) * invstd */
    float scale, beta;   /* y = (x - mean) * scale + beta, scale = gamma * invstd */
    float mean_dy, mean_dy_xhat; /* backward: dx = scale (g - mean_dy - xhat mean_dy_xhat) */
    int relu;            /* 1: a relu follows, fused: y = max(y, 0), g = dy where y > 0, else 0;
                          * 0: g = dy */
} cn_bn_channel;
/* The planes of one channel that a call sweeps: count planes of n floats, stride floats apart
 * (across a batch [B, C, n], stride = C n), each in turn. */
typedef struct {
    int n, count;
    size_t stride;
    int rectify; /* 1: read as max(x, 0) (a relu before the layer, fused), the input gradient
                  * gated on x > 0 */
} cn_bn_planes;
/* sums [32]: [0, 16) += x - shift, [16, 32) += (x - shift)^2, in double. */
void cn_bn_sums(double *sums, const float *x, const cn_bn_planes *p, float shift);
/* y = the normalised x (and the relu of it, with c->relu). */
void cn_bn_normalise(float *y, const float *x, const cn_bn_planes *p, const cn_bn_channel *c);
/* sums [32]: [0, 16) += g, [16, 32) += g * xhat (the product in float). */
void cn_bn_gradient_sums(double *sums, const float *dy, const float *x, const cn_bn_planes *p,
                         const cn_bn_channel *c);
/* dx = scale (g - mean_dy - xhat mean_dy_xhat). */
void cn_bn_input_gradient(float *dx, const float *dy, const float *x, const cn_bn_planes *p,
                          const cn_bn_channel *c);

/* A pooling window K with stride S on [C,H,W] per sample, floor, no padding: out [C,OH,OW]
 * with OH = (H - K) / S + 1 (likewise OW). */
typedef struct {
    int C, H, W, K, S, OH, OW;
} cn_pool_shape;

static inline cn_pool_shape cn_pool_shape_of(int C, int H, int W, int K, int S)
{
    cn_pool_shape s = {C, H, W, K, S, (H - K) / S + 1, (W - K) / S + 1};
    return s;
}

/* ---- bfloat16 products (x86/gemm_bf16.c, AVX512_BF16 only) ----
 * A cn_bf16_pair holds two bf16 values of consecutive k in one 32-bit word, the lower k in the
 * low half; an odd count of k is padded with a zero. Products are exact and sums are fp32. */
typedef uint32_t cn_bf16_pair;
/* The pairs n values make, an odd last one with a zero. */
static inline int cn_bf16_pairs(int n) { return (n + 1) / 2; }
/* dst [cols, rows] = the transpose of the pairs src [rows, cols]: cn_transpose moves words. */
static inline void cn_bf16_transpose(cn_bf16_pair *dst, const cn_bf16_pair *src, int rows,
                                     int cols)
{
    cn_transpose((float *)dst, rows, (const float *)src, cols, rows, cols);
}
/* 1 when this CPU has AVX-512 with BF16 (and BW, VL): the only place the functions below run
 * (cpu.c; always 0 on other processors, whose builds have portable/bf16_absent.c). */
int cn_bf16_supported(void);
/* 1 when this CPU has AMX with BF16 and the operating system lets this process use its tiles
 * (cpu.c; asks for that permission, once per process, on Linux). */
int cn_amx_supported(void);
/* cn_gemm_bf16's product on AMX tiles (x86/gemm_amx.c), A with contiguous rows (row stride ai):
 * C = (start ? start[i] : accumulate ? C : 0) + A B. */
void cn_gemm_bf16_amx(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai,
                      const cn_bf16_pair *B, int ldb, const float *start, int accumulate,
                      float *C, int ldc);
/* dst [rows, (cols+1)/2]: each row of src [rows, cols] (ld) rounded to bf16, in pairs. */
void cn_bf16_pack_rows(cn_bf16_pair *dst, const float *src, int rows, int cols, int ld);
/* dst [(rows+1)/2, cols]: row pairs of src [rows, cols] (ld), dst[r/2][c] = (src[r][c],
 * src[r+1][c]). */
void cn_bf16_pack_row_pairs(cn_bf16_pair *dst, const float *src, int rows, int cols, int ld);
/* dst [(C+1)/2, H + 2 pad, W + 2 pad]: in [C, H, W] in pairs of channels inside a border of pad
 * zeros, dst[c/2][pad + y][pad + x] = (in[c][y][x], in[c+1][y][x]) for even c, an odd last
 * channel's partner 0: cn_bf16_pack_row_pairs of the zero-padded input, without the padded copy. */
void cn_bf16_pair_channels(cn_bf16_pair *dst, const float *in, int C, int H, int W, int pad);
/* dst [C, H + 2 pad, W + 2 pad]: each value of in [C, H, W] inside a border of pad zeros paired
 * with its right-hand neighbour, dst[c][y][x] = (v[c][y][x], v[c][y][x+1]) for the padded plane
 * v, the last column's partner 0: the pairs two horizontally adjacent output positions of a
 * convolution read, without the padded copy. */
void cn_bf16_pair_columns(cn_bf16_pair *dst, const float *in, int C, int H, int W, int pad);
/* colp [C*K*((K+1)/2), OH*OW]: im2col in pairs of kernel columns (kx, kx+1) for even kx, read
 * from a cn_bf16_pair_columns plane [C, H, W]; the partner of an odd K's last column is the
 * input's next value or 0, to be multiplied by a zero weight. */
void cn_bf16_im2col_pairs(cn_bf16_pair *colp, const cn_bf16_pair *plane, int C, int H, int W,
                          int K);
/* rowsp [OH * (OW+1)/2, C*K*K], OW = W-K+1: the patch entries of the output positions in pairs
 * of horizontal neighbours, (oy, ox) with (oy, ox+1) for each even ox, the last of an odd row
 * with zeros, row by row (for an even OW, positions 2q and 2q+1), read from a
 * cn_bf16_pair_columns plane [C, H, W] (im2row in pairs). May write CN_IM2ROW_SLACK pairs past
 * the end. */
void cn_bf16_im2row_pairs(cn_bf16_pair *rowsp, const cn_bf16_pair *plane, int C, int H, int W,
                          int K);
/* The pairs that cn_bf16_pack_rows(dyp, g, C * H, W, W) (turned: and then cn_bf16_transpose
 * of its C rows) and, unless dyq is NULL, cn_bf16_pair_channels(dyq, g, C, H, W, qpad) make of
 * g [C, H, W], the input gradient of the max-pool s whose windows do not overlap (S >= K):
 * zeros but d[c][q] + 0 at the pick at[c][q] of each window (d, at [C, OH, OW]), as the pool's
 * backward pass would make it, without making it. */
void cn_bf16_pool_gradient_pairs(cn_bf16_pair *dyp, int turned, cn_bf16_pair *dyq, int qpad,
                                 const float *d, const int32_t *at, const cn_pool_shape *s);
/* C[M,N] = (accumulate ? C : 0) + A[M, Kp pairs] * B[Kp pairs, N], with A(i,k) at
 * A[i*ai + k*ak] (a row-packed A has ai = Kp, ak = 1; the row pairs of a matrix packed with
 * cn_bf16_pack_row_pairs, read as its transpose, ai = 1, ak = its columns); ldb counts pairs,
 * ldc floats. Each element of C is summed over the pairs in order. */
void cn_gemm_bf16(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai, ptrdiff_t ak,
                  const cn_bf16_pair *B, int ldb, int accumulate, float *C, int ldc);
/* The same with A(i, k) at A[arow[i] + acol[k]]: patches read where they lie in a plane of
 * pairs, without copying them into a matrix (the vector kernel; not AMX's). */
void cn_gemm_bf16_gathered(int M, int N, int Kp, const cn_bf16_pair *A, const int32_t *arow,
                           const int32_t *acol, const cn_bf16_pair *B, int ldb, int accumulate,
                           float *C, int ldc);
/* The same with the sums of row i starting from start[i] (a bias), as cn_sgemm_rows_from. */
void cn_gemm_bf16_rows_from(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai,
                            ptrdiff_t ak, const cn_bf16_pair *B, int ldb, const float *start,
                            float *C, int ldc);

/* The kernels, one set per instruction set (gemm_kernels.inc): generic in every build, avx2 and
 * avx512 in x86-64 builds (x86/), neon in arm64 builds (arm/). Only the sets of the build's own
 * processor family are defined; gemm.c refers to no other. */
#define CN_DECLARE_GEMM_KERNELS(isa)                                                           \
    void cn_gemm_nn_##isa(int M, int N, int K, const float *A, ptrdiff_t ai, ptrdiff_t ak,    \
                          const float *B, int ldb, const int32_t *brow, const float *init,   \
                          float *C, int ldc);                                                 \
    void cn_gemm_nt_##isa(int M, int N, int K, const float *A, int lda, const float *Bt,      \
                          int ldb, float *C, int ldc);                                 \
    float cn_fma_burn_##isa(long iters, float seed, double *flops);                          \
    void cn_gemm_nn_chained_##isa(int M, int N, int K, const float *A, int lda, const float *B, \
                                  int ldb, float *C, int ldc);                                \
    void cn_transpose_##isa(float *dst, int ldd, const float *src, int lds, int rows,         \
                            int cols);                                                        \
    void cn_transpose_streamed_##isa(float *dst, int ldd, const float *src, int lds,         \
                                     int rows, int cols);                                     \
    void cn_copy_streamed_##isa(float *dst, const float *src, size_t n);                      \
    void cn_im2col_##isa(float *col, const float *in, int C, int H, int W, int K);           \
    void cn_shifted_planes_##isa(float *planes, ptrdiff_t ps, const float *in, int C, int H,  \
                                 int W, int K);                                               \
    void cn_pad_rows_##isa(float *dst, const float *in, int C, int H, int W, int pad, int y0, \
                           int rows);                                                         \
    void cn_crop_rows_##isa(float *out, const float *plane, int C, int H, int W, int pad);     \
    void cn_im2row_##isa(float *rows, int ld, const float *in, int C, int H, int W, int K);   \
    void cn_col2im_##isa(float *din, const float *col, int C, int H, int W, int K);           \
    void cn_conv_picked_weight_gradient_##isa(int OC, int Q, const float *a,                \
                                              const int32_t *at, const float *in, int C,     \
                                              int H, int W, int K, float *dweight);  \
    void cn_maxpool2_planes_##isa(float *y, int32_t *where, const float *x, int planes, int H, \
                                  int W);                                                      \
    void cn_maxpool2_rows_##isa(float *y, int32_t *where, const float *x, int H, int W,       \
                                int C);                                                        \
    void cn_maxpool2_gradient_##isa(float *dx, const float *dy, const int32_t *where,         \
                                    int planes, int H, int W);                                 \
    void cn_picked_rows_weight_gradient_##isa(int OC, int Q, const float *a,                 \
                                              const int32_t *at, const float *rows, int L,   \
                                              int ld, float *dweight, int ldw);              \
    void cn_picks_by_position_##isa(int OC, int Q, const float *a, const int32_t *at, int P,  \
                                    int32_t *sorted);                                         \
    void cn_picked_rows_input_gradient_##isa(const int32_t *sorted, int P,                   \
                                             const float *weight, int L, int ld,             \
                                             float *drows);                                  \
    void cn_row2im_##isa(float *din, const float *rows, int ld, int C, int H, int W, int K);   \
    void cn_winograd4_input_##isa(float *v, ptrdiff_t xs, const float *plane,                  \
                                  const cn_winograd_plane *s, float *row);                     \
    void cn_winograd4_output_##isa(float *y, const float *m, ptrdiff_t xs,                     \
                                   const cn_winograd_plane *s, float bias, float *row);        \
    void cn_winograd4_gradient_rows_##isa(float *m, ptrdiff_t xs, const float *d,              \
                                          const cn_winograd_plane *s, int C);                  \
    void cn_bn_sums_##isa(double *sums, const float *x, const cn_bn_planes *p, float shift);   \
    void cn_bn_normalise_##isa(float *y, const float *x, const cn_bn_planes *p,                \
                               const cn_bn_channel *c);                                        \
    void cn_bn_gradient_sums_##isa(double *sums, const float *dy, const float *x,              \
                                   const cn_bn_planes *p, const cn_bn_channel *c);             \
    void cn_bn_input_gradient_##isa(float *dx, const float *dy, const float *x,                \
                                    const cn_bn_planes *p, const cn_bn_channel *c);
CN_DECLARE_GEMM_KERNELS(generic)
CN_DECLARE_GEMM_KERNELS(avx2)
CN_DECLARE_GEMM_KERNELS(avx512)
CN_DECLARE_GEMM_KERNELS(neon)

#endif /* CN_GEMM_H */
