/* relu.c — the rectifier, elementwise. Backward is gated on the output (> 0), which is what
 * PyTorch does; the kink at 0 gets gradient 0. */
#include "layers/layers.h"

void cn_relu_forward(float *restrict out, const float *restrict in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void cn_relu_backward(float *restrict din, const float *restrict dout, const float *restrict out,
                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = dout[i]; /* loaded unconditionally so the loop vectorises */
        din[i] = out[i] > 0.0f ? g : 0.0f;
    }
}
