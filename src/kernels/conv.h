/* conv.h — the kernels of a 2D convolution over a batch, on top of cn_sgemm and the patch copies
 * of gemm.h: forward, backward, the same two with bf16 products, and the backward pass of a
 * convolution whose output only feeds a max-pool. The shape of one convolution travels in a
 * cn_conv_shape: any stride >= 1 and zero padding >= 0 (as PyTorch's nn.Conv2d), except for the
 * max-pool's backward pass (stride 1, no padding but in a first layer: cn_conv2d_pool_fusable).
 * Backward adds (+=) into dweight and dbias and writes (=) din. Nothing here allocates; the
 * caller gives the scratch each function asks for. No dilation or groups. */
#ifndef CN_CONV_H
#define CN_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm.h"

/* in [C,H,W] per sample, weight [OC,C,K,K], zero padding pad on every side, stride stride:
 * out [OC,OH,OW] per sample with OH = (H + 2 pad - K) / stride + 1 (likewise OW). */
typedef struct {
    int C, H, W;
    int OC, K, stride, pad;
    int OH, OW;
} cn_conv_shape;

static inline cn_conv_shape cn_conv_shape_of(int C, int H, int W, int OC, int K, int stride,
                                             int pad)
{
    cn_conv_shape s = {C, H, W, OC, K, stride, pad, 0, 0};
    s.OH = (H + 2 * pad - K) / stride + 1;
    s.OW = (W + 2 * pad - K) / stride + 1;
    return s;
}

/* A batch's tensor for a convolution: in memory at `at`, or, where no buffer holds it (at NULL),
 * made a sample at a time as the kernels reach it: make(ctx, b, dst) writes sample b (counted
 * from the call's first) into dst. The layer that owns the tensor makes it (its normalised
 * output, its input gradient) from what it keeps, so that it never goes through memory. */
typedef struct {
    const float *at;
    void (*make)(const void *ctx, int sample, float *dst);
    const void *ctx;
} cn_samples;

/* Where a convolution shows what it writes to the layer that reads it, a sample at a time in
 * sample order while the sample is still in the caches: take(ctx, b, values) gets sample b
 * (counted from the call's first) of the output (forward) or of the input gradient (backward).
 * (That layer sums its statistics there instead of reading the batch back from memory.) */
typedef struct {
    void (*take)(const void *ctx, int sample, const float *values);
    const void *ctx;
} cn_taker;

/* Samples b .. b + count - 1 of t, floats each: where they are, or made into buf. */
static inline const float *cn_samples_at(const cn_samples *t, int b, int count, size_t floats,
                                         float *buf)
{
    if (t->at) return t->at + (size_t)b * floats;
    for (int k = 0; k < count; k++) t->make(t->ctx, b + k, buf + (size_t)k * floats);
    return buf;
}

/* 1 when the fp32 kernels do work per call that pays only over many samples (the transformed
 * kernels of Winograd's algorithm for 3x3 convolutions of stride 1, kernels/winograd.h):
 * give them the whole batch in one call. */
int cn_conv2d_batched(const cn_conv_shape *s);
/* The scratch of cn_conv2d_forward and cn_conv2d_backward, in floats (the patch matrix of one
 * sample and, with stride 1, a padded plane and the weight gradient's transposed sums). */
size_t cn_conv2d_col_floats(const cn_conv_shape *s);
/* in [B,C,H,W] -> out [B,OC,OH,OW] (+ bias [OC], or none when bias is NULL). */
void cn_conv2d_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, const cn_conv_shape *s, float *col);
/* dout [B,OC,OH,OW] -> dweight [OC,C,K,K] +=, dbias [OC] += (skipped if NULL), din [B,C,H,W] =
 * (skipped if NULL). */
void cn_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, const cn_conv_shape *s,
                        float *col);

/* The same two with the input (and the output gradient) as cn_samples, made where at is NULL,
 * for the shapes that cn_conv2d_takes_made (Winograd's without a bias, whose gradient it sums
 * before the products; any other); they show the output (din) to shown where its take is not
 * NULL. */
int cn_conv2d_takes_made(const cn_conv_shape *s, int bias);
void cn_conv2d_forward_made(float *out, const cn_samples *in, const float *weight,
                            const float *bias, int B, const cn_conv_shape *s, float *col,
                            const cn_taker *shown);
void cn_conv2d_backward_made(float *din, float *dweight, float *dbias, const cn_samples *dout,
                             const cn_samples *in, const float *weight, int B,
                             const cn_conv_shape *s, float *col, const cn_taker *shown);

/* The same two with bf16 operands and fp32 sums in every product (cn_gemm_bf16; only where
 * cn_bf16_supported): weights, patches and output gradients are rounded to bf16 as they are
 * packed; out, dweight, dbias and din stay fp32. packed: scratch of cn_conv2d_packed_words(s)
 * words; backward also uses col (as above). */
size_t cn_conv2d_packed_words(const cn_conv_shape *s);
void cn_conv2d_forward_bf16(float *out, const float *in, const float *weight, const float *bias,
                            int B, const cn_conv_shape *s, cn_bf16_pair *packed);
/* The same in two parts, so that the samples can go one at a time: the weights packed into
 * packed once, then the products of B samples on them. */
void cn_conv2d_forward_bf16_weights(const float *weight, const cn_conv_shape *s,
                                    cn_bf16_pair *packed);
void cn_conv2d_forward_bf16_samples(float *out, const float *in, const float *bias, int B,
                                    const cn_conv_shape *s, cn_bf16_pair *packed);
/* The forward pass with a 2x2 max-pool of stride 2 right after it, B samples: the pool's output
 * y and its picks argmax [B, OC, OH/2, OW/2], the same bits as the two passes one after the
 * other, for the shapes whose products take the positions as rows (cn_conv2d_pool_rows_fit of
 * the pool's window K and stride S), each sample's output pooled before it is transposed; the
 * weights already packed (cn_conv2d_forward_bf16_weights); col: 2 OC OH OW / 4 floats and a
 * line. */
int cn_conv2d_pool_rows_fit(const cn_conv_shape *s, int K, int S);
void cn_conv2d_pool_forward_bf16(float *y, int32_t *argmax, const float *in, const float *bias,
                                 int B, const cn_conv_shape *s, float *col,
                                 cn_bf16_pair *packed);
void cn_conv2d_backward_bf16(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *weight, int B,
                             const cn_conv_shape *s, float *col, cn_bf16_pair *packed);
/* The same backward pass from a max-pool right after the convolution, without its backward
 * pass: its output gradient dpool and its picks argmax [B, OC, pool OH, OW] go into the pairs the
 * products read as that pass's zeros and picks would (cn_bf16_pool_gradient_pairs), so dweight
 * and din are those of the two passes one after the other, bit for bit, and dbias their sums
 * in another order. For a stride of 1 and windows that do not overlap
 * (cn_conv2d_pool_pairs_fit: a window of K, S apart); pool: the pool's shape on this output. */
int cn_conv2d_pool_pairs_fit(const cn_conv_shape *s, int K, int S);
void cn_conv2d_pool_backward_bf16(float *din, float *dweight, float *dbias, const float *dpool,
                                  const int32_t *argmax, const float *in, const float *weight,
                                  int B, const cn_conv_shape *s, const cn_pool_shape *pool,
                                  float *col, cn_bf16_pair *packed);

/* 1 when cn_conv2d_pool_backward can take this convolution's gradients from a max-pool with
 * window = stride = S after it: stride 1, and no padding where the input gradient is wanted
 * (input_gradient 1; a first layer has none). */
int cn_conv2d_pool_fusable(const cn_conv_shape *s, int S, int input_gradient);
/* For such a convolution: dweight +=, dbias += (skipped if NULL), din = (skipped if NULL) from
 * the pool's output gradient dpool and its argmax, both [B,OC,OH/S,OW/S]; what the max-pool's
 * backward then cn_conv2d_backward give, summed in another order. gate: NULL, or the output
 * [B,OC,OH,OW] of a relu between the convolution and the pool, whose backward then runs here
 * too (a pick's gradient counts where the relu's output there is above 0). col: scratch of
 * cn_conv2d_pool_col_floats(s, S) floats (for a convolution that is not fusable, that is
 * cn_conv2d_col_floats(s)). */
size_t cn_conv2d_pool_col_floats(const cn_conv_shape *s, int S);
void cn_conv2d_pool_backward(float *din, float *dweight, float *dbias, const float *dpool,
                             const int32_t *argmax, const float *gate, const float *in,
                             const float *weight, int B, const cn_conv_shape *s, int S,
                             float *col);

#endif /* CN_CONV_H */
