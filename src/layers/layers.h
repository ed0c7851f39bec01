/* layers.h — the kernels of each layer: a plain forward/backward pair over float arrays, shapes
 * in the comments (one file per layer: conv2d.c, maxpool2d.c, relu.c, batchnorm2d.c, linear.c,
 * log_softmax.c). Backward functions add (+=) into parameter gradients and write (=) input
 * gradients, so one zeroing per step serves every layer. Not part of the public header: models
 * reach these through cn_model. Nothing here allocates. */
#ifndef CN_LAYERS_H
#define CN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm.h" /* cn_bf16_pair */


/* Floats in a cache line: the workspace starts its buffers on one, and padded patch rows are
 * whole lines. */
#define CN_LINE_FLOATS 16

/* floats rounded up to whole cache lines. */
static inline size_t cn_whole_lines(size_t floats)
{
    return (floats + CN_LINE_FLOATS - 1) / CN_LINE_FLOATS * CN_LINE_FLOATS;
}

/* Max-pool (maxpool2d.c), window K, stride S, floor: in [B,C,H,W] -> out [B,C,OH,OW]; argmax
 * records the index inside the input plane (y*W + x) of the first maximum in scan order, as
 * PyTorch does. */
void cn_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int B,
                          const cn_pool_shape *s);
/* dout [B,C,OH,OW] -> din [B,C,H,W] = the sum of the gradients routed to each argmax (zero
 * elsewhere; overlapping windows add up). */
void cn_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int B,
                           const cn_pool_shape *s);

/* Average pooling (avgpool2d.c): each output is the window's sum / K*K. */
/* in [B,C,H,W] -> out [B,C,OH,OW]. */
void cn_avgpool2d_forward(float *out, const float *in, int B, const cn_pool_shape *s);
/* dout [B,C,OH,OW] -> din [B,C,H,W] = (overlapping windows add up; cells no window covers 0). */
void cn_avgpool2d_backward(float *din, const float *dout, int B, const cn_pool_shape *s);

/* Global average pooling (global_avgpool.c): in [P,HW] -> out [P], the mean of each of the P
 * planes (P = batch * channels); backward din [P,HW] = dout[plane] / HW. */
void cn_global_avgpool_forward(float *out, const float *in, size_t P, size_t HW);
void cn_global_avgpool_backward(float *din, const float *dout, size_t P, size_t HW);

/* ReLU over n values; backward uses the output: din = dout where out > 0, else 0. */
void cn_relu_forward(float *out, const float *in, size_t n);
void cn_relu_backward(float *din, const float *dout, const float *out, size_t n);

/* Dropout (dropout.c). The draws of one layer in one training step: a number made from the
 * step's (seed, epoch, step, replica) and the layer's index. */
uint64_t cn_dropout_stream(uint64_t seed, int epoch, int step, int replica, int layer);
/* in [B,N] -> out [B,N] = in * mask * 1/(1-p), where element i of the b-th row is zeroed with
 * probability p by a hash of (stream, first + b, i) alone: forward (in = x) and backward
 * (in = dout) alike, for any split of a batch into passes. p = 0 copies in exactly; 0 <= p < 1. */
void cn_dropout_apply(float *out, const float *in, int B, size_t N, float p, uint64_t stream,
                      int first);

/* The relu layers that run inside BatchNorm's passes (relu, below): the one after it (out is
 * the relu of the normalised value), the one before it (in is read as its relu). */
enum { CN_BN_RELU_AFTER = 1, CN_BN_RELU_BEFORE = 2 };

/* BatchNorm2d in training mode: statistics over B*HW values per channel, biased variance.
 * in [B,C,HW], gamma, beta [C] -> out [B,C,HW]; saves mean [C] and invstd [C] for backward and
 * var_unbiased [C] (n/(n-1) * variance) for the running statistics. relu: CN_BN_RELU_* of the
 * relu layers fused with it, or 0. */
void cn_batchnorm2d_forward_train(float *out, float *mean, float *invstd, float *var_unbiased,
                                  const float *in, const float *gamma, const float *beta, int B,
                                  int C, int HW, float eps, int relu);
/* Evaluation mode: out = (in - running_mean) / sqrt(running_var + eps) * gamma + beta (relu:
 * as above). */
void cn_batchnorm2d_forward_eval(float *out, const float *in, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, int B, int C, int HW, float eps,
                                 int relu);
/* dout [B,C,HW] -> din [B,C,HW] = (skipped if NULL), dgamma [C] +=, dbeta [C] += (training-mode
 * backward). relu & CN_BN_RELU_AFTER: dout is the gradient of the relu's output after the
 * layer, gated here on that output being > 0 (recomputed from in, mean, invstd, gamma and
 * beta); relu & CN_BN_RELU_BEFORE: in is the relu's input, and din its gradient (gated on in >
 * 0). */
void cn_batchnorm2d_backward(float *din, float *dgamma, float *dbeta, const float *dout,
                             const float *in, const float *mean, const float *invstd,
                             const float *gamma, const float *beta, int B, int C, int HW,
                             int relu);

/* Linear: in [B,I], weight [O,I], bias [O] -> out [B,O] = in * weight^T + bias. */
void cn_linear_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, int I, int O);
/* dout [B,O] -> dweight [O,I] +=, dbias [O] +=, din [B,I] = (skipped if NULL). */
void cn_linear_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, int I, int O);

/* The same with bf16 products (--precision bf16; gemm.h), over samples in groups of
 * CN_LINEAR_GROUP: packed holds cn_linear_packed_words(I, O) words. Each output and each
 * gradient element is summed in the same order whatever the batch size. */
#define CN_LINEAR_GROUP 64
size_t cn_linear_packed_words(int I, int O);
void cn_linear_forward_bf16(float *out, const float *in, const float *weight, const float *bias,
                            int B, int I, int O, cn_bf16_pair *packed);
void cn_linear_backward_bf16(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *weight, int B, int I, int O,
                             cn_bf16_pair *packed);

/* log_softmax over the last axis: in [B,N] -> out [B,N]. */
void cn_log_softmax_forward(float *out, const float *in, int B, int N);
/* dout [B,N], out [B,N] (forward result) -> din [B,N] = dout - exp(out) * sum(dout). */
void cn_log_softmax_backward(float *din, const float *dout, const float *out, int B, int N);
/* Mean negative log-likelihood of logp [B,N] at labels [B]. */
float cn_nll_loss(const float *logp, const uint8_t *labels, int B, int N);
/* dlogp [B,N] = -1/B at each label, 0 elsewhere. */
void cn_nll_backward(float *dlogp, const uint8_t *labels, int B, int N);
/* With label smoothing a in [0, 1), as PyTorch's CrossEntropyLoss(label_smoothing=a) on logp:
 * the mean over the batch of (1-a) * -logp[label] + a * mean_k(-logp[k]), and its gradient
 * (-a/N/B everywhere, -(1-a)/B more at each label). a == 0: exactly cn_nll_loss/backward. */
float cn_smoothed_nll_loss(const float *logp, const uint8_t *labels, int B, int N, float a);
void cn_smoothed_nll_backward(float *dlogp, const uint8_t *labels, int B, int N, float a);
/* The index of the largest of x[0..n) (the first one on a tie). */
int cn_argmax(const float *x, int n);
/* How many rows of logp [B,N] have their largest value at their label. */
int cn_count_correct(const float *logp, const uint8_t *labels, int B, int N);

#endif /* CN_LAYERS_H */
