/* winograd.h — 3x3 convolutions of stride 1 by Winograd's minimal filtering F(4x4, 3x3): the
 * fp32 forward and backward passes that conv.c takes for them (cn_winograd_fits). The arguments
 * are those of cn_conv2d_forward and cn_conv2d_backward; the scratch is cn_winograd_floats(s)
 * floats. Nothing here allocates, and there is no bf16 variant. */
#ifndef CN_WINOGRAD_H
#define CN_WINOGRAD_H

#include <stddef.h>

#include "kernels/conv.h"

/* 1 for a 3x3 kernel, stride 1, padding 0, 1 or 2, and enough channels on both sides for the
 * 36 products of each block to fill vectors. */
int cn_winograd_fits(const cn_conv_shape *s);
size_t cn_winograd_floats(const cn_conv_shape *s);
/* in [B,C,H,W] -> out [B,OC,OH,OW] (+ bias [OC], or none when bias is NULL). */
void cn_winograd_forward(float *out, const cn_samples *in, const float *weight,
                         const float *bias, int B, const cn_conv_shape *s, float *scratch,
                         const cn_taker *shown);
/* dout [B,OC,OH,OW] -> dweight [OC,C,3,3] +=, din [B,C,H,W] = (skipped if NULL). The bias
 * gradient is the caller's. */
void cn_winograd_backward(float *din, float *dweight, const cn_samples *dout,
                          const cn_samples *in, const float *weight, int B,
                          const cn_conv_shape *s, float *scratch, const cn_taker *shown);

#endif /* CN_WINOGRAD_H */
