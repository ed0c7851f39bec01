/* maxpool2d.c — max-pooling with window = stride = S (floor), remembering where each maximum
 * came from so backward routes the gradient there. Ties go to the first maximum in scan order,
 * as in PyTorch. The common 2x2 window has its own loop. No padding, dilation or overlapping
 * windows. */
#include <string.h>

#include "layers.h"

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f_unaligned __attribute__((vector_size(16), aligned(4), may_alias));
typedef int32_t v4i_unaligned __attribute__((vector_size(16), aligned(4), may_alias));

/* Lanes of `yes` where mask is all ones, of `no` where it is zero. */
static inline v4i pick_i(v4i mask, v4i yes, v4i no) { return (mask & yes) | (~mask & no); }
static inline v4f pick_f(v4i mask, v4f yes, v4f no) { return (v4f)pick_i(mask, (v4i)yes, (v4i)no); }

/* The first maximum in scan order (top-left, top-right, bottom-left, bottom-right) of a 2x2
 * window, in four lanes at once and without branches: the larger of each column pair (top
 * wins ties), then of the two columns, where the right column wins a tie only when it came from
 * the top row and the left one from the bottom row. rows: [a0 b0 a1 b1 ...] of the top row in
 * t0, t1 and of the bottom row in u0, u1; at: the index of each window's top-left element. */
static inline void pool2_lanes(float *y, int32_t *where, v4f t0, v4f t1, v4f u0, v4f u1, v4i at,
                               int W)
{
    v4f a = __builtin_shufflevector(t0, t1, 0, 2, 4, 6), b = __builtin_shufflevector(t0, t1, 1, 3, 5, 7);
    v4f c = __builtin_shufflevector(u0, u1, 0, 2, 4, 6), d = __builtin_shufflevector(u0, u1, 1, 3, 5, 7);
    v4i left_low = c > a, right_low = d > b;
    v4f left = pick_f(left_low, c, a), right = pick_f(right_low, d, b);
    v4i take_right = (right > left) | ((right == left) & left_low & ~right_low);
    v4i low = pick_i(take_right, right_low, left_low);
    *(v4f_unaligned *)y = pick_f(take_right, right, left);
    *(v4i_unaligned *)where = at + (take_right & 1) + (low & W);
}

static void pool2_plane(float *y, int32_t *where, const float *x, int W, int OH, int OW)
{
    for (int oy = 0; oy < OH; oy++) {
        const float *r0 = x + (size_t)(2 * oy) * W, *r1 = r0 + W;
        int ox = 0;
        for (; ox + 4 <= OW; ox += 4) {
            const v4f_unaligned *top = (const v4f_unaligned *)(r0 + 2 * ox);
            const v4f_unaligned *bottom = (const v4f_unaligned *)(r1 + 2 * ox);
            v4f t0 = top[0], t1 = top[1], u0 = bottom[0], u1 = bottom[1];
            int32_t base = 2 * oy * W + 2 * ox;
            v4i at = {base, base + 2, base + 4, base + 6};
            pool2_lanes(y + oy * OW + ox, where + oy * OW + ox, t0, t1, u0, u1, at, W);
        }
        for (; ox < OW; ox++) { /* the last few windows of a row, one lane used */
            float yy[4], top[8] = {r0[2 * ox], r0[2 * ox + 1]};
            float bottom[8] = {r1[2 * ox], r1[2 * ox + 1]};
            int32_t ww[4];
            v4i at = {2 * oy * W + 2 * ox, 0, 0, 0};
            pool2_lanes(yy, ww, *(v4f_unaligned *)top, *(v4f_unaligned *)(top + 4),
                        *(v4f_unaligned *)bottom, *(v4f_unaligned *)(bottom + 4), at, W);
            y[oy * OW + ox] = yy[0];
            where[oy * OW + ox] = ww[0];
        }
    }
}

static void pool_plane(float *y, int32_t *where, const float *x, int W, int OH, int OW, int S)
{
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            int best = oy * S * W + ox * S;
            for (int dy = 0; dy < S; dy++)
                for (int dx = 0; dx < S; dx++) {
                    int at = (oy * S + dy) * W + ox * S + dx;
                    if (x[at] > x[best]) best = at;
                }
            y[oy * OW + ox] = x[best];
            where[oy * OW + ox] = best;
        }
}

void cn_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int B, int C, int H,
                          int W, int S)
{
    int OH = H / S, OW = W / S;
    for (int plane = 0; plane < B * C; plane++) {
        const float *x = in + (size_t)plane * H * W;
        float *y = out + (size_t)plane * OH * OW;
        int32_t *where = argmax + (size_t)plane * OH * OW;
        if (S == 2)
            pool2_plane(y, where, x, W, OH, OW);
        else
            pool_plane(y, where, x, W, OH, OW, S);
    }
}

void cn_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int B, int C,
                           int H, int W, int S)
{
    int OHW = (H / S) * (W / S);
    memset(din, 0, (size_t)B * C * H * W * sizeof *din);
    for (int plane = 0; plane < B * C; plane++) {
        float *dx = din + (size_t)plane * H * W;
        const float *dy = dout + (size_t)plane * OHW;
        const int32_t *where = argmax + (size_t)plane * OHW;
        for (int i = 0; i < OHW; i++) dx[where[i]] += dy[i];
    }
}
