/* conv.c — 2D convolution (any stride >= 1, zero padding >= 0, bias or none) on top of cn_sgemm,
 * one sample at a time so the patch buffer stays in cache. Forward multiplies the weights by the
 * channel-major patch matrix (im2col's), which with stride 1 is read from K shifted copies of the
 * input (cn_shifted_planes, cn_sgemm_rows_at); the input gradient goes back through col2im. With
 * stride 1 the vector kernels of gemm.h do the patch copies, band of output rows by band (the
 * rows' input, with padding's zeros, copied into a plane of their own), and the weight gradient is
 * one transposed product per band on planes up to 512 positions; other shapes take the whole plane
 * at once, the weight gradient from the position-major patch matrix (im2row) on small planes and
 * from dot products with im2col's on larger ones. Strides over 1 take plain loops here for the
 * patch copies (not vectorised). A convolution that feeds a max-pool, directly or through a relu,
 * takes its backward pass from the pool's picks instead (cn_conv2d_pool_backward, at the end;
 * stride 1, and no padding unless it is a first layer, without an input gradient).
 * The _bf16 variants (--precision bf16) do the same products on bf16 operands packed in pairs
 * (cn_gemm_bf16), whole planes only, most of their patches read in place (see below). In
 * fp32, 3x3 convolutions of stride 1 with 8 channels or more on each side go through
 * Winograd's algorithm instead (winograd.c: 4 times fewer multiplications in each of the
 * three products; cn_conv2d_batched). No dilation or groups. */
#include <assert.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/conv.h"
#include "kernels/winograd.h"
#include "layers/layers.h"

/* The shape's numbers as locals. */
#define UNPACK(s)                                                                            \
    int C = (s)->C, H = (s)->H, W = (s)->W, OC = (s)->OC, K = (s)->K;                        \
    (void)C, (void)H, (void)W, (void)OC, (void)K;                                            \
    assert((s)->stride >= 1 && (s)->pad >= 0)

/* x[0] + ... + x[n-1] in sixteen interleaved partial sums folded in a fixed tree: the order
 * depends only on n, and the lanes vectorise. */
static float sum_floats(const float *x, int n)
{
    float lane[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i + l];
    for (int l = 0; i < n; i++, l++) lane[l] += x[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

/* dbias [OC] += the sums of the output gradient d [OC, P] of one sample (none without a bias). */
static void bias_gradient(float *dbias, const float *d, int OC, int P)
{
    if (!dbias) return;
    for (int oc = 0; oc < OC; oc++) dbias[oc] += sum_floats(d + (size_t)oc * P, P);
}

/* ---- the patches of one sample, for any stride and padding ----
 * With stride 1 the vector kernels read the "valid input": the sample itself without padding,
 * else the sample copied into a zero-padded plane [C, H + 2 pad, W + 2 pad] (padded_floats). A
 * band of output rows [y0, y0 + h) reads the valid input's rows [y0, y0 + h + K - 1), copied
 * into a plane of their own unless they are the whole unpadded sample. */

static int padded_h(const cn_conv_shape *s) { return s->H + 2 * s->pad; }
static int padded_w(const cn_conv_shape *s) { return s->W + 2 * s->pad; }

/* The floats of the zero-padded plane: none without padding or with a stride over 1. */
static size_t padded_floats(const cn_conv_shape *s)
{
    return s->stride == 1 && s->pad > 0 ? (size_t)s->C * padded_h(s) * padded_w(s) : 0;
}

/* The valid input's rows [y0, y0 + rows) of sample x as a plane [C, rows, W + 2 pad]: x itself
 * when that is the whole unpadded sample (or the stride is over 1: strided_patches pads as it
 * reads), else copied into plane with the padding's zeros. */
static const float *band_input(float *plane, const float *x, const cn_conv_shape *s, int y0,
                               int rows)
{
    if (s->stride > 1 || (s->pad == 0 && rows == s->H)) return x;
    cn_pad_rows(plane, x, s->C, s->H, s->W, s->pad, y0, rows);
    return plane;
}

/* The valid input of sample x: x, or x copied into plane with its border of zeros. */
static const float *valid_input(float *plane, const float *x, const cn_conv_shape *s)
{
    return band_input(plane, x, s, 0, padded_h(s));
}

/* The patch entry (c,ky,kx) of output position (oy,ox) of any stride and padding, stored at
 * dst[k * ks + pos * ps] (k = (c*K + ky)*K + kx, pos = oy*OW + ox): im2col with ks = OH*OW,
 * ps = 1, im2row with ks = 1, ps = its row stride. */
static void strided_patches(float *dst, ptrdiff_t ks, ptrdiff_t ps, const float *x,
                            const cn_conv_shape *s)
{
    UNPACK(s);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                float *d = dst + (((ptrdiff_t)c * K + ky) * K + kx) * ks;
                const float *plane = x + (size_t)c * H * W;
                for (int oy = 0; oy < s->OH; oy++) {
                    int y = oy * s->stride + ky - s->pad;
                    for (int ox = 0; ox < s->OW; ox++, d += ps) {
                        int xx = ox * s->stride + kx - s->pad;
                        *d = y >= 0 && y < H && xx >= 0 && xx < W ? plane[y * W + xx] : 0.0f;
                    }
                }
            }
}

/* The adjoint of strided_patches in im2col layout: din [C,H,W] = zeros, then every entry of col
 * [C*K*K, OH*OW] that lies inside the input added back, rows in order. */
static void strided_col2im(float *din, const float *col, const cn_conv_shape *s)
{
    UNPACK(s);
    memset(din, 0, (size_t)C * H * W * sizeof *din);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                const float *d = col + (((size_t)c * K + ky) * K + kx) * s->OH * s->OW;
                float *plane = din + (size_t)c * H * W;
                for (int oy = 0; oy < s->OH; oy++) {
                    int y = oy * s->stride + ky - s->pad;
                    for (int ox = 0; ox < s->OW; ox++, d++) {
                        int xx = ox * s->stride + kx - s->pad;
                        if (y >= 0 && y < H && xx >= 0 && xx < W) plane[y * W + xx] += *d;
                    }
                }
            }
}

/* col [C*K*K, h*OW]: the patches of h output rows from their band_input v (with a stride over
 * 1, h = OH and v = the sample). */
static void patch_columns(float *col, const float *v, int h, const cn_conv_shape *s)
{
    if (s->stride > 1)
        strided_patches(col, (ptrdiff_t)s->OH * s->OW, 1, v, s);
    else
        cn_im2col(col, v, s->C, h + s->K - 1, padded_w(s), s->K);
}

/* rows [h*OW, C*K*K] (row stride ld), the same patches transposed; may write CN_IM2ROW_SLACK
 * floats past the end. */
static void patch_rows(float *rows, int ld, const float *v, int h, const cn_conv_shape *s)
{
    if (s->stride > 1)
        strided_patches(rows, 1, ld, v, s);
    else
        cn_im2row(rows, ld, v, s->C, h + s->K - 1, padded_w(s), s->K);
}

/* din [C,H,W] of one sample = the patch gradient col [C*K*K, OH*OW] summed back; plane: the
 * padded plane's scratch. */
static void patches_to_input(float *din, const float *col, const cn_conv_shape *s, float *plane)
{
    UNPACK(s);
    if (s->stride > 1) {
        strided_col2im(din, col, s);
    } else if (s->pad == 0) {
        cn_col2im(din, col, C, H, W, K);
    } else {
        cn_col2im(plane, col, C, padded_h(s), padded_w(s), K);
        cn_crop_rows(din, plane, C, H, W, s->pad);
    }
}

/* ---- fp32 ----
 * A stride-1 convolution goes through its output in bands of rows whose patch matrix (im2col)
 * holds at most CONV_BAND_FLOATS, so that the products read it from the second-level cache
 * rather than memory. Its weight gradient is taken transposed, dweight^T [CKK, OC] = patches
 * [CKK, n] * dout^T [n, OC], one wide product per band into a sum of the whole batch, which is
 * added to dweight at the end: each element is summed over the samples and positions in order,
 * whatever the bands. With a larger stride or few patch entries (C*K*K < BANDED_MIN_ENTRIES:
 * a first layer) the whole output is one band, and the weight gradient is dout * the patch rows
 * (im2row) on small planes, dot products with the patch columns on larger ones. col holds:
 * the patch matrix of the whole output (the bf16 backward pass needs that much), then, for
 * stride 1, a band's input plane, the weight gradient's sum and dout^T, each on whole lines. */

#define CONV_BAND_FLOATS (128 * 1024)
#define BANDED_MIN_ENTRIES 64 /* below it, the transposed product has too few rows */
#define BANDED_BACKWARD_MAX_POSITIONS 512
/* Otherwise, below this many output positions the weight gradient comes from im2row. */
#define CN_CONV_ROW_GRADIENT_POSITIONS 256

/* 1 when the convolution goes band by band with the transposed weight gradient: stride 1 and
 * enough patch entries (C*K*K) to fill the transposed product's rows. */
static int banded(const cn_conv_shape *s)
{
    return s->stride == 1 && s->C * s->K * s->K >= BANDED_MIN_ENTRIES;
}

/* 1 when the backward pass goes band by band too: on larger planes the dot products of
 * whole_backward are faster (conv2 of models/cifar10.model, 32 x 32, in `make bench`). */
static int banded_backward(const cn_conv_shape *s)
{
    return banded(s) && s->OH * s->OW <= BANDED_BACKWARD_MAX_POSITIONS;
}

/* Output rows in a band. */
static int band_rows(const cn_conv_shape *s)
{
    if (!banded(s)) return s->OH;
    size_t per_row = (size_t)s->C * s->K * s->K * s->OW;
    size_t bands = (per_row * s->OH + CONV_BAND_FLOATS - 1) / CONV_BAND_FLOATS;
    return (int)((s->OH + bands - 1) / bands);
}

static size_t patch_floats(const cn_conv_shape *s)
{
    return (size_t)s->C * s->K * s->K * s->OH * s->OW + CN_IM2ROW_SLACK;
}

/* The parts of col after the patch matrix (stride 1 only). */
typedef struct {
    float *plane; /* [C, H + 2 pad, W + 2 pad]: a band's input, then its input gradient */
    float *dwt;   /* [CKK, OC]: the batch's weight gradient, transposed */
    float *dt;    /* [P, OC]: a band's output gradient, transposed */
    int32_t *brow; /* [CKK]: where each row of the patch matrix lies in the shifted planes */
    float *zero;   /* [OC]: where the sums start without a bias (no zeroed output to add to) */
} band_scratch;

_Static_assert(sizeof(int32_t) == sizeof(float), "the row offsets are counted in floats");

static size_t band_scratch_floats(const cn_conv_shape *s, band_scratch *parts, float *col)
{
    if (s->stride > 1) return 0;
    size_t plane = cn_whole_lines((size_t)s->C * padded_h(s) * padded_w(s));
    size_t dwt = cn_whole_lines((size_t)s->C * s->K * s->K * s->OC);
    size_t dt = cn_whole_lines((size_t)s->OH * s->OW * s->OC);
    size_t brow = cn_whole_lines((size_t)s->C * s->K * s->K);
    if (parts) {
        float *at = col + cn_whole_lines(patch_floats(s));
        *parts = (band_scratch){at, at + plane, at + plane + dwt,
                                (int32_t *)(at + plane + dwt + dt), at + plane + dwt + dt + brow};
    }
    return plane + dwt + dt + brow + (size_t)s->OC;
}

int cn_conv2d_batched(const cn_conv_shape *s) { return cn_winograd_fits(s); }

int cn_conv2d_takes_made(const cn_conv_shape *s, int bias)
{
    return !(bias && cn_winograd_fits(s));
}

/* The floats of one input sample, and of one output sample. */
static size_t input_floats(const cn_conv_shape *s) { return (size_t)s->C * s->H * s->W; }
static size_t output_floats(const cn_conv_shape *s) { return (size_t)s->OC * s->OH * s->OW; }

/* Where the samples made for the patch kernels (cn_samples) go in col: after the patches and
 * the band scratch, an input sample, then an output gradient's. */
static size_t made_offset(const cn_conv_shape *s)
{
    return cn_whole_lines(patch_floats(s)) + band_scratch_floats(s, NULL, NULL);
}

static float *made_input(const cn_conv_shape *s, float *col) { return col + made_offset(s); }

static float *made_gradient(const cn_conv_shape *s, float *col)
{
    return made_input(s, col) + cn_whole_lines(input_floats(s));
}

size_t cn_conv2d_col_floats(const cn_conv_shape *s)
{
    size_t col = made_offset(s) + cn_whole_lines(input_floats(s)) +
                 cn_whole_lines(output_floats(s));
    size_t winograd = cn_winograd_fits(s) ? cn_winograd_floats(s) : 0;
    return col > winograd ? col : winograd;
}

/* The stride of the shifted planes of a band (cn_shifted_planes): a band's input rows times
 * OW. */
static ptrdiff_t shifted_stride(const cn_conv_shape *s)
{
    return (ptrdiff_t)(band_rows(s) + s->K - 1) * s->OW;
}

/* brow [C*K*K]: where row (c,ky,kx) of the patch matrix lies in the shifted planes. */
static void shifted_rows(int32_t *brow, const cn_conv_shape *s)
{
    ptrdiff_t ps = shifted_stride(s);
    for (int c = 0; c < s->C; c++)
        for (int ky = 0; ky < s->K; ky++)
            for (int kx = 0; kx < s->K; kx++)
                *brow++ = (int32_t)(((ptrdiff_t)c * s->K + kx) * ps + (ptrdiff_t)ky * s->OW);
}

/* With stride 1 each band's patch matrix is read from shifted copies of its input
 * (cn_shifted_planes: K times fewer copies than im2col, and they stay in the first-level
 * cache); the sums are those of the im2col product, term for term. */
void cn_conv2d_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, const cn_conv_shape *s, float *col)
{
    cn_conv2d_forward_made(out, &(cn_samples){.at = in}, weight, bias, B, s, col, NULL);
}

void cn_conv2d_forward_made(float *out, const cn_samples *in, const float *weight,
                            const float *bias, int B, const cn_conv_shape *s, float *col,
                            const cn_taker *shown)
{
    UNPACK(s);
    if (cn_winograd_fits(s)) {
        cn_winograd_forward(out, in, weight, bias, B, s, col, shown);
        return;
    }
    int P = s->OH * s->OW, CKK = C * K * K, rows = band_rows(s);
    band_scratch sc = {0};
    band_scratch_floats(s, &sc, col);
    ptrdiff_t ps = shifted_stride(s);
    const float *start = bias; /* without a bias the sums start from zeros, not a zeroed out */
    if (s->stride == 1) {
        shifted_rows(sc.brow, s);
        if (!bias) memset(sc.zero, 0, (size_t)OC * sizeof *sc.zero), start = sc.zero;
    }
    for (int b = 0; b < B; b++) {
        const float *x = cn_samples_at(in, b, 1, input_floats(s), made_input(s, col));
        for (int y0 = 0; y0 < s->OH; y0 += rows) {
            int h = s->OH - y0 < rows ? s->OH - y0 : rows, n = h * s->OW;
            float *o = out + (size_t)b * OC * P + (size_t)y0 * s->OW;
            if (s->stride == 1) {
                const float *v = band_input(sc.plane, x, s, y0, h + K - 1);
                cn_shifted_planes(col, ps, v, C, h + K - 1, padded_w(s), K);
                cn_sgemm_rows_at(OC, n, CKK, weight, CKK, col, sc.brow, start, o, P);
                continue;
            }
            patch_columns(col, x, h, s);
            if (bias)
                cn_sgemm_rows_from(OC, n, CKK, weight, CKK, col, n, bias, o, P);
            else
                cn_sgemm(0, 0, OC, n, CKK, weight, CKK, col, n, 0, o, P);
        }
        if (shown && shown->take) shown->take(shown->ctx, b, out + (size_t)b * OC * P);
    }
}

/* din [C,H,W] of one sample += the input gradient of a band of output rows from y0, whose
 * valid input's rows (h + K - 1 of them) got the gradient g [C, h + K - 1, W + 2 pad]. */
static void add_band_gradient(float *din, const float *g, int y0, int h, const cn_conv_shape *s)
{
    int rows = h + s->K - 1, Wp = padded_w(s), p = s->pad;
    for (int c = 0; c < s->C; c++)
        for (int r = 0; r < rows; r++) {
            int y = y0 + r - p;
            if (y < 0 || y >= s->H) continue;
            float *d = din + ((size_t)c * s->H + y) * s->W;
            const float *from = g + ((size_t)c * rows + r) * Wp + p;
            for (int x = 0; x < s->W; x++) d[x] += from[x];
        }
}

/* The gradients of one band of h output rows from y0 of sample x, d = the band's rows of the
 * sample's output gradient (row stride P): sc.dwt +=, and, with din_b, the band's part of the
 * input gradient (din_b = it for a single band, += for several, which the caller zeroed). */
static void band_backward(float *din_b, const float *d, const float *x, const float *weight,
                          int y0, int h, const cn_conv_shape *s, float *col, band_scratch sc)
{
    int P = s->OH * s->OW, CKK = s->C * s->K * s->K, OC = s->OC, n = h * s->OW;
    patch_columns(col, band_input(sc.plane, x, s, y0, h + s->K - 1), h, s);
    for (int p = 0; p < n; p++)
        for (int oc = 0; oc < OC; oc++) sc.dt[(size_t)p * OC + oc] = d[(size_t)oc * P + p];
    cn_sgemm(0, 0, CKK, OC, n, col, n, sc.dt, OC, 1, sc.dwt, OC);
    if (!din_b) return;
    cn_sgemm(1, 0, CKK, n, OC, weight, CKK, d, P, 0, col, n);
    if (h == s->OH) {
        patches_to_input(din_b, col, s, sc.plane);
        return;
    }
    cn_col2im(sc.plane, col, s->C, h + s->K - 1, padded_w(s), s->K);
    add_band_gradient(din_b, sc.plane, y0, h, s);
}

/* The gradients of the whole output in one band, without the transposed product (a stride
 * over 1, or few patch entries): dweight +=, din_b = (skipped if NULL). */
static void whole_backward(float *din_b, float *dweight, const float *d, const float *x,
                           const float *weight, const cn_conv_shape *s, float *col, float *plane)
{
    int P = s->OH * s->OW, CKK = s->C * s->K * s->K, OC = s->OC;
    const float *v = valid_input(plane, x, s);
    if (P < CN_CONV_ROW_GRADIENT_POSITIONS) {
        patch_rows(col, CKK, v, s->OH, s);
        cn_sgemm(0, 0, OC, CKK, P, d, P, col, CKK, 1, dweight, CKK);
    } else {
        patch_columns(col, v, s->OH, s);
        cn_sgemm(0, 1, OC, CKK, P, d, P, col, P, 1, dweight, CKK);
    }
    if (!din_b) return;
    cn_sgemm(1, 0, CKK, P, OC, weight, CKK, d, P, 0, col, P);
    patches_to_input(din_b, col, s, plane);
}

void cn_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, const cn_conv_shape *s,
                        float *col)
{
    cn_conv2d_backward_made(din, dweight, dbias, &(cn_samples){.at = dout},
                            &(cn_samples){.at = in}, weight, B, s, col, NULL);
}

void cn_conv2d_backward_made(float *din, float *dweight, float *dbias, const cn_samples *dout,
                             const cn_samples *in, const float *weight, int B,
                             const cn_conv_shape *s, float *col, const cn_taker *shown)
{
    UNPACK(s);
    int P = s->OH * s->OW, CKK = C * K * K, rows = band_rows(s);
    if (cn_winograd_fits(s)) {
        assert(dout->at || !dbias); /* cn_conv2d_takes_made */
        for (int b = 0; b < B && dbias; b++)
            bias_gradient(dbias, dout->at + (size_t)b * OC * P, OC, P);
        cn_winograd_backward(din, dweight, dout, in, weight, B, s, col, shown);
        return;
    }
    band_scratch sc = {0};
    band_scratch_floats(s, &sc, col);
    if (banded_backward(s)) memset(sc.dwt, 0, (size_t)CKK * OC * sizeof *sc.dwt);
    for (int b = 0; b < B; b++) {
        const float *d = cn_samples_at(dout, b, 1, output_floats(s), made_gradient(s, col));
        const float *x = cn_samples_at(in, b, 1, input_floats(s), made_input(s, col));
        float *din_b = din ? din + (size_t)b * C * H * W : NULL;
        bias_gradient(dbias, d, OC, P);
        if (!banded_backward(s)) {
            whole_backward(din_b, dweight, d, x, weight, s, col, sc.plane);
        } else {
            if (din_b && rows < s->OH) memset(din_b, 0, (size_t)C * H * W * sizeof *din_b);
            for (int y0 = 0; y0 < s->OH; y0 += rows) {
                int h = s->OH - y0 < rows ? s->OH - y0 : rows;
                band_backward(din_b, d + (size_t)y0 * s->OW, x, weight, y0, h, s, col, sc);
            }
        }
        if (din_b && shown && shown->take) shown->take(shown->ctx, b, din_b);
    }
    if (!banded_backward(s)) return;
    for (int oc = 0; oc < OC; oc++)
        for (int k = 0; k < CKK; k++) dweight[(size_t)oc * CKK + k] += sc.dwt[(size_t)k * OC + oc];
}

/* ---- bf16: the same products on operands packed in pairs (gemm.h) ----
 * With stride 1, on the valid input [C, Hv, Wv] (the padded plane, with padding): forward: out =
 * Wp [OC, Kp] * colp [Kp, P], with pairs of channels (c even, c+1) at each (ky,kx) -- the
 * input's channel pairs go through im2col as 32-bit words -- or, where that makes fewer pairs
 * (one channel, say), pairs of kernel columns (kx even, kx+1) of each (c,ky), an odd K's last
 * column with a zero weight -- from the input paired with its right-hand neighbours. With a
 * larger stride, pairs of consecutive rows (c,ky,kx) of the fp32 im2col matrix. Weight gradient:
 * dweight += dYp [OC, Pq] * rowsp [Pq, CKK], pairs of positions: for stride 1 horizontal
 * neighbours in each output row, the last of an odd row with a zero (Pq = OH * (OW+1)/2), im2row
 * in pairs from that same paired input; with a larger stride positions 2q and 2q+1 (Pq = P/2,
 * rounded up): im2row, then pairs of its rows. Input gradient: col = W^T [CKK, OC/2] * dYq
 * [OC/2, P], pairs of output channels, W^T transposed from W's row pairs once per call, so
 * that every kernel (AMX's tiles too) reads it row by row.
 * Positions as rows: the vector kernel's tiles are 32 columns wide, so a product whose columns
 * are positions wastes lanes when P is not a multiple of 32 (7 x 7 = 49: a quarter of them).
 * With stride 1 and the vector kernel (AMX keeps its own tiles and the layouts above), the
 * forward product is out^T [P, OC] = the patches * Wt [Kp, OC], transposed afterwards, where
 * that spends no more vector products (vectors_of), the patches read where they lie in the
 * paired plane (cn_gemm_bf16_gathered), not copied; the weight gradient is dW^T [CKK, OC] = the
 * patches of a group of samples, read in place in their planes of kernel column pairs, * the
 * output gradients' pairs of positions turned round, dyt [pairs, OC] (gathered_weight_gradient);
 * and with padding narrower than the kernel the input gradient is a convolution of the output
 * gradient padded by K-1-pad with the weights turned round (direct_input_gradient), else the
 * col2im route above, its rows [P, CKK] = dyq^T * W's row pairs [OCp, CKK] where that spends a
 * tenth fewer vector products. Only the direct input gradient changes the order of the sums.
 * packed: the fp32 words (the padded plane, or the strided im2col matrix), rounded to whole
 * lines, then the pairs as laid out in each function. */

/* The 16-lane vectors the vector kernel spends on a row of n columns: tiles two vectors wide,
 * the last one or two. */
static int vectors_of(int n) { return n / 32 * 2 + (n % 32 == 0 ? 0 : n % 32 > 16 ? 2 : 1); }

/* 1 when the product of rows x P positions (positions as columns) is better taken with the
 * positions as rows: the forward pass (rows = OC) when that spends no more vectors, as it then
 * reads the patches in place instead of copying them and the pool after it runs on the rows;
 * the input gradient (rows = C K K) when it spends a tenth fewer, as its rows are then
 * transposed. */
static int vector_kernel_rows(const cn_conv_shape *s)
{
    /* the offsets into 8 samples' planes (or the padded output gradient's) fit an int32_t */
    size_t plane = (size_t)padded_h(s) * padded_w(s), most = 8 * (size_t)s->C * plane;
    size_t grad = (size_t)cn_bf16_pairs(s->OC) * (s->OH + 2 * s->K) * (s->OW + 2 * s->K);
    return s->stride == 1 && cn_bf16_kernel_active() == CN_BF16_AVX512 && most < INT32_MAX &&
           grad < INT32_MAX;
}

static int positions_as_rows(const cn_conv_shape *s)
{
    int P = s->OH * s->OW;
    return vector_kernel_rows(s) && P * vectors_of(s->OC) <= s->OC * vectors_of(P);
}

static int gradient_rows(const cn_conv_shape *s)
{
    int P = s->OH * s->OW, CKK = s->C * s->K * s->K;
    return vector_kernel_rows(s) && 10 * P * vectors_of(CKK) < 9 * CKK * vectors_of(P);
}

/* The weight gradient's pairs of positions: with stride 1, horizontal neighbours in each row
 * of the output (the last of an odd row with a zero), else positions 2q and 2q+1. */
static int position_pair_count(const cn_conv_shape *s)
{
    return s->stride == 1 ? s->OH * cn_bf16_pairs(s->OW) : cn_bf16_pairs(s->OH * s->OW);
}

/* 1: the forward product pairs kernel columns, 0: channels (stride 1 only). */
static int pairs_columns(int C, int K)
{
    return C * K * cn_bf16_pairs(K) < cn_bf16_pairs(C) * K * K;
}

static int forward_pairs(const cn_conv_shape *s)
{
    int C = s->C, K = s->K;
    if (s->stride > 1) return cn_bf16_pairs(C * K * K);
    return pairs_columns(C, K) ? C * K * cn_bf16_pairs(K) : cn_bf16_pairs(C) * K * K;
}

/* The fp32 words at the front of packed. */
static size_t fp32_words(const cn_conv_shape *s)
{
    return cn_whole_lines(s->stride > 1 ? patch_floats(s) : padded_floats(s));
}

typedef struct backward_parts backward_parts;
static size_t backward_words(const cn_conv_shape *s, backward_parts *w, cn_bf16_pair *packed);

size_t cn_conv2d_packed_words(const cn_conv_shape *s)
{
    UNPACK(s);
    size_t P = (size_t)s->OH * s->OW;
    size_t HW = (size_t)padded_h(s) * padded_w(s), Kp = (size_t)forward_pairs(s);
    size_t forward = (size_t)OC * Kp + (size_t)C * HW + Kp * P + CN_IM2ROW_SLACK +
                     (positions_as_rows(s) ? (size_t)OC * Kp + (size_t)P * OC + P + Kp : 0);
    size_t backward = backward_words(s, NULL, NULL);
    return fp32_words(s) + (forward > backward ? forward : backward);
}

/* wp [OC, Kp]: the weights in the forward product's pairs. */
static void pack_forward_weights(cn_bf16_pair *wp, const float *weight, const cn_conv_shape *s)
{
    int C = s->C, K = s->K, OC = s->OC, KK = K * K, Kp = forward_pairs(s);
    if (s->stride > 1) { /* [OC, CKK/2]: (k, k+1) of consecutive rows (c,ky,kx) */
        cn_bf16_pack_rows(wp, weight, OC, C * KK, C * KK);
        return;
    }
    for (int oc = 0; oc < OC; oc++) {
        const float *w = weight + (size_t)oc * C * KK;
        if (!pairs_columns(C, K)) { /* [C/2, K*K]: (c, c+1) at each (ky,kx) */
            cn_bf16_pack_row_pairs(wp + (size_t)oc * Kp, w, C, KK, KK);
            continue;
        }
        for (int r = 0; r < C * K; r++) /* [C*K, (K+1)/2]: (kx, kx+1) of each (c,ky) */
            cn_bf16_pack_rows(wp + (size_t)oc * Kp + (size_t)r * cn_bf16_pairs(K),
                              w + (size_t)r * K, 1, K, K);
    }
}

/* plane: one sample x (stride 1) padded, in pairs of kernel columns or of channels. */
static void forward_plane(cn_bf16_pair *plane, const float *x, const cn_conv_shape *s)
{
    if (pairs_columns(s->C, s->K))
        cn_bf16_pair_columns(plane, x, s->C, s->H, s->W, s->pad);
    else /* the channel pairs padded as they are made */
        cn_bf16_pair_channels(plane, x, s->C, s->H, s->W, s->pad);
}

/* colp [Kp, P]: the forward product's patches of one sample x; plane: the paired plane's
 * scratch; fp32: the front words of packed. */
static void forward_patch_pairs(cn_bf16_pair *colp, cn_bf16_pair *plane, float *fp32,
                                const float *x, const cn_conv_shape *s)
{
    int C = s->C, K = s->K, Hv = padded_h(s), Wv = padded_w(s), P = s->OH * s->OW;
    if (s->stride > 1) {
        strided_patches(fp32, P, 1, x, s);
        cn_bf16_pack_row_pairs(colp, fp32, C * K * K, P, P);
        return;
    }
    forward_plane(plane, x, s);
    if (pairs_columns(C, K))
        cn_bf16_im2col_pairs(colp, plane, C, Hv, Wv, K);
    else
        cn_im2col((float *)colp, (const float *)plane, cn_bf16_pairs(C), Hv, Wv, K); /* copies */
}

/* at[(c, ky, j)] = (c H + ky) W + step j for the planes c < C of H x W words, ky < K, j < n:
 * where the pairs of a patch lie from its first, for the gathered products' tables. */
static void tap_offsets(int32_t *at, int C, int H, int W, int K, int n, int step)
{
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int j = 0; j < n; j++) *at++ = (c * H + ky) * W + step * j;
}

/* at[(y, x)] = base + y W + step x for y < rows, x < cols: where the patches of those
 * positions start in planes W words wide; returns the count. */
static int position_offsets(int32_t *at, int base, int rows, int cols, int W, int step)
{
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < cols; x++) *at++ = base + y * W + step * x;
    return rows * cols;
}

/* Where the patches' pairs lie in the paired plane (stride 1): the patch of position p = (oy,
 * ox) starts at arow[p], and its k-th pair is acol[k] further, k running over (c, ky, pair of
 * kernel columns) or (pair of channels, ky, kx) as colp's rows do. */
static void patch_offsets(int32_t *arow, int32_t *acol, const cn_conv_shape *s)
{
    int K = s->K, Hv = padded_h(s), Wv = padded_w(s);
    position_offsets(arow, 0, s->OH, s->OW, Wv, 1);
    if (pairs_columns(s->C, K))
        tap_offsets(acol, s->C, Hv, Wv, K, cn_bf16_pairs(K), 2);
    else
        tap_offsets(acol, cn_bf16_pairs(s->C), Hv, Wv, K, K, 1);
}

/* The forward pass's parts of packed (fp32 words first): the weights' pairs wp [OC, Kp], the
 * paired plane, the patches colp [Kp, P] and slack; with positions as rows then Wt [Kp, OC],
 * out^T [P, OC] and the patches' offsets in the plane (patch_offsets: arow [P], acol [Kp]),
 * which that product reads in place of colp. */
typedef struct {
    float *fp32;
    cn_bf16_pair *wp, *plane, *colp, *wt;
    float *out_t;
    int32_t *arow, *acol;
} forward_parts;

static forward_parts forward_parts_of(cn_bf16_pair *packed, const cn_conv_shape *s)
{
    int Kp = forward_pairs(s), P = s->OH * s->OW;
    forward_parts f = {.fp32 = (float *)packed, .wp = packed + fp32_words(s)};
    f.plane = f.wp + (size_t)s->OC * Kp;
    f.colp = f.plane + (size_t)s->C * padded_h(s) * padded_w(s);
    f.wt = f.colp + (size_t)Kp * P + CN_IM2ROW_SLACK;
    f.out_t = (float *)(f.wt + (size_t)Kp * s->OC);
    f.arow = (int32_t *)(f.out_t + (size_t)P * s->OC);
    f.acol = f.arow + P;
    return f;
}

void cn_conv2d_forward_bf16_weights(const float *weight, const cn_conv_shape *s,
                                    cn_bf16_pair *packed)
{
    forward_parts f = forward_parts_of(packed, s);
    pack_forward_weights(f.wp, weight, s);
    if (!positions_as_rows(s)) return;
    cn_bf16_transpose(f.wt, f.wp, s->OC, forward_pairs(s));
    patch_offsets(f.arow, f.acol, s);
}

/* out^T [P, OC] in f->out_t: the products of sample x's patches, read where they lie in its
 * paired plane, each row from the bias (or from zeros). */
static void forward_rows(const forward_parts *f, const float *x, const float *bias,
                         const cn_conv_shape *s)
{
    int P = s->OH * s->OW, OC = s->OC;
    forward_plane(f->plane, x, s);
    for (int p = 0; bias && p < P; p++)
        memcpy(f->out_t + (size_t)p * OC, bias, (size_t)OC * sizeof *bias);
    cn_gemm_bf16_gathered(P, OC, forward_pairs(s), f->plane, f->arow, f->acol, f->wt, OC,
                          bias != NULL, f->out_t, OC);
}

/* With the positions as rows out^T (forward_rows) is transposed into out. */
void cn_conv2d_forward_bf16_samples(float *out, const float *in, const float *bias, int B,
                                    const cn_conv_shape *s, cn_bf16_pair *packed)
{
    UNPACK(s);
    int P = s->OH * s->OW, Kp = forward_pairs(s), by_rows = positions_as_rows(s);
    forward_parts f = forward_parts_of(packed, s);
    int stream = cn_streamed((size_t)B * OC * P);
    for (int b = 0; b < B; b++) {
        float *o = out + (size_t)b * OC * P;
        const float *x = in + (size_t)b * C * H * W;
        if (by_rows) {
            forward_rows(&f, x, bias, s);
            (stream ? cn_transpose_streamed : cn_transpose)(o, P, f.out_t, OC, P, OC);
            continue;
        }
        forward_patch_pairs(f.colp, f.plane, f.fp32, x, s);
        if (bias) {
            cn_gemm_bf16_rows_from(OC, P, Kp, f.wp, Kp, 1, f.colp, P, bias, o, P);
        } else {
            cn_gemm_bf16(OC, P, Kp, f.wp, Kp, 1, f.colp, P, 0, o, P);
        }
    }
}

void cn_conv2d_forward_bf16(float *out, const float *in, const float *weight, const float *bias,
                            int B, const cn_conv_shape *s, cn_bf16_pair *packed)
{
    cn_conv2d_forward_bf16_weights(weight, s, packed);
    cn_conv2d_forward_bf16_samples(out, in, bias, B, s, packed);
}

int cn_conv2d_pool_rows_fit(const cn_conv_shape *s, int K, int S)
{
    return K == 2 && S == 2 && s->OH >= 2 && s->OW >= 2 && positions_as_rows(s);
}

/* Each sample's out^T [P, OC] is pooled as it is, a channel a lane, into col: the maxima
 * [Q, OC] then their indices [Q, OC], each transposed into its sample's place. */
void cn_conv2d_pool_forward_bf16(float *y, int32_t *argmax, const float *in, const float *bias,
                                 int B, const cn_conv_shape *s, float *col,
                                 cn_bf16_pair *packed)
{
    UNPACK(s);
    assert(cn_conv2d_pool_rows_fit(s, 2, 2));
    int Q = (s->OH / 2) * (s->OW / 2);
    forward_parts f = forward_parts_of(packed, s);
    float *best = col, *picks = col + cn_whole_lines((size_t)Q * OC);
    for (int b = 0; b < B; b++) {
        forward_rows(&f, in + (size_t)b * C * H * W, bias, s);
        cn_maxpool2_rows(best, (int32_t *)picks, f.out_t, s->OH, s->OW, OC);
        cn_transpose(y + (size_t)b * OC * Q, Q, best, OC, Q, OC);
        cn_transpose((float *)(argmax + (size_t)b * OC * Q), Q, picks, OC, Q, OC);
    }
}

/* rowsp [position_pair_count, CKK]: the patches of those pairs of positions, for one sample x;
 * fp32: the front words of packed. */
static void position_pairs(cn_bf16_pair *rowsp, cn_bf16_pair *plane, float *fp32, const float *x,
                           const cn_conv_shape *s, float *col)
{
    int C = s->C, K = s->K, Hv = padded_h(s), Wv = padded_w(s);
    int P = s->OH * s->OW, CKK = C * K * K;
    if (s->stride == 1) {
        cn_bf16_pair_columns(plane, x, C, s->H, s->W, s->pad);
        cn_bf16_im2row_pairs(rowsp, plane, C, Hv, Wv, K);
    } else {
        patch_rows(col, CKK, valid_input(fp32, x, s), s->OH, s);
        cn_bf16_pack_row_pairs(rowsp, col, P, CKK, CKK);
    }
}

/* dyp [OC, position_pair_count]: one sample's output gradient d [OC, P] in those pairs. */
static void gradient_pairs(cn_bf16_pair *dyp, const float *d, const cn_conv_shape *s)
{
    if (s->stride == 1)
        cn_bf16_pack_rows(dyp, d, s->OC * s->OH, s->OW, s->OW);
    else
        cn_bf16_pack_rows(dyp, d, s->OC, s->OH * s->OW, s->OH * s->OW);
}

/* With stride 1 and the vector kernel the weight gradient is taken turned round, dW^T [CKK, OC]
 * = the patches [CKK, pairs of positions] * the output gradient's pairs turned round, dyt
 * [pairs, OC], the patches read where they lie in the planes of kernel column pairs
 * (cn_gemm_bf16_gathered) instead of copied into rows: the same sums in the same order, the
 * same bits (an odd row's last pair reads a real neighbour where the copy had a zero, against
 * a zero of the gradient: a product of 0 unless the input is infinite). A group of samples
 * goes into one product, their pairs one after the other, so that a short sum (conv3's 28
 * pairs) does not load and store all of dW^T for each sample. */
static int gathered_weight_gradient(const cn_conv_shape *s) { return vector_kernel_rows(s); }

/* With stride 1, the vector kernel and padding narrower than the kernel, the input gradient is
 * a convolution of the output gradient padded by q = K - 1 - pad with the weights turned round:
 * din^T [H W, C] = the output gradient's patches in pairs of channels, read where they lie in
 * its padded plane dyq [OCp, OH + 2q, OW + 2q] (cn_gemm_bf16_gathered), times the weights in
 * pairs of output channels at the turned-round taps, wflip [OCp K K, C]; then transposed into
 * din. No patch matrix, no col2im: each element is one sum over (pair of output channels, ky,
 * kx) where col2im added K K sums over the channels (so other bits in the last place). */
static int direct_input_gradient(const cn_conv_shape *s)
{
    return vector_kernel_rows(s) && s->pad < s->K;
}

/* The padding of dyq: q for the direct input gradient, else none. */
static int gradient_pad(const cn_conv_shape *s)
{
    return direct_input_gradient(s) ? s->K - 1 - s->pad : 0;
}

/* Samples a product of the gathered weight gradient sums over: about 128 pairs, at most 8
 * samples (their planes are scratch). */
static int wgrad_group(const cn_conv_shape *s)
{
    int per = position_pair_count(s), g = per < 128 ? 128 / per : 1;
    return gathered_weight_gradient(s) ? (g < 8 ? g : 8) : 1;
}

/* The backward pass's parts of packed (fp32 words first): the weights in pairs of output
 * channels wtp [OCp, CKK] (or turned round, wtr [CKK, OCp]; for the direct input gradient,
 * wflip in wtp's place), the paired plane (a group's planes, one after the other, for the
 * gathered weight gradient), the patches rowsp in pairs of positions (not with the gathered
 * one), a sample's output gradient in those pairs (dyp) and in pairs of channels (dyq, padded
 * for the direct input gradient); with positions as rows, rows_t [P, CKK] in wtr's place (the
 * direct input gradient's din^T [H W, C] there too). The gathered weight gradient's own: the
 * group's dyp turned round, dyt [group, pairs, OC]; dW^T [CKK, OC]; the offsets of the patches
 * (wrow [CKK]) and of the pairs (wcol [group * pairs]); the direct input gradient's: the
 * offsets of its positions (drow [H W]) and of its patches' pairs (dcol [OCp K K]). */
struct backward_parts {
    float *fp32, *rows_t, *dwt;
    cn_bf16_pair *wtp, *plane, *rowsp, *dyp, *dyq, *wtr, *dyt;
    int32_t *wrow, *wcol, *drow, *dcol;
    int by_rows; /* the input gradient's product with positions as rows */
    int stream;  /* the direct input gradient stored around the caches (cn_streamed) */
};

/* n words at *at, on a line of their own; NULL while only counting (base NULL). */
static cn_bf16_pair *take_words(cn_bf16_pair *base, size_t *at, size_t n)
{
    size_t start = cn_whole_lines(*at);
    *at = start + n;
    return base ? base + start : NULL;
}

/* Lays the parts out in packed after its fp32 words (w and packed given) or counts the words
 * they take (w NULL), with the input gradient's parts. */
static size_t backward_words(const cn_conv_shape *s, backward_parts *w, cn_bf16_pair *packed)
{
    backward_parts unused;
    if (!w) w = &unused, packed = NULL;
    size_t P = (size_t)s->OH * s->OW, CKK = (size_t)s->C * s->K * s->K, at = 0;
    size_t Pp = (size_t)position_pair_count(s), OCp = (size_t)cn_bf16_pairs(s->OC);
    size_t G = (size_t)wgrad_group(s), gathered = (size_t)gathered_weight_gradient(s);
    cn_bf16_pair *base = packed ? packed + fp32_words(s) : NULL;
    size_t direct = (size_t)direct_input_gradient(s), q = (size_t)gradient_pad(s);
    size_t HW = (size_t)s->H * s->W, KK = (size_t)s->K * s->K;
    size_t most = HW > 2 * KK ? HW : 2 * KK; /* din^T, or two output channels turned round */
    size_t wtr = direct ? most * s->C : CKK * OCp, rows_t = gradient_rows(s) ? P * CKK : 0;
    w->fp32 = (float *)packed;
    w->wtp = take_words(base, &at, CKK * OCp);
    w->plane = take_words(base, &at, G * s->C * padded_h(s) * padded_w(s));
    w->rowsp = take_words(base, &at, gathered ? 0 : Pp * CKK + CN_IM2ROW_SLACK);
    w->dyp = take_words(base, &at, (size_t)s->OC * Pp);
    w->dyq = take_words(base, &at, OCp * (s->OH + 2 * q) * (s->OW + 2 * q));
    w->wtr = take_words(base, &at, wtr > rows_t ? wtr : rows_t);
    w->rows_t = (float *)w->wtr;
    w->dyt = take_words(base, &at, gathered ? G * Pp * s->OC : 0);
    w->dwt = (float *)take_words(base, &at, gathered ? CKK * s->OC : 0);
    w->wrow = (int32_t *)take_words(base, &at, gathered ? CKK : 0);
    w->wcol = (int32_t *)take_words(base, &at, gathered ? G * Pp : 0);
    w->drow = (int32_t *)take_words(base, &at, direct ? HW : 0);
    w->dcol = (int32_t *)take_words(base, &at, direct ? OCp * KK : 0);
    return at;
}

/* The offsets of the direct input gradient: input position (y, x) reads from (y, x) of the
 * padded dyq, the pair (pair of output channels o, ky, kx) of its patch (o Hq + ky) Wq + kx
 * further. */
static void din_offsets(const backward_parts *w, const cn_conv_shape *s)
{
    int q = gradient_pad(s), Hq = s->OH + 2 * q, Wq = s->OW + 2 * q;
    position_offsets(w->drow, 0, s->H, s->W, Wq, 1);
    tap_offsets(w->dcol, cn_bf16_pairs(s->OC), Hq, Wq, s->K, s->K, 1);
}

/* wflip [OCp K K, C] in wtp's place: at (o, ky, kx) the weights of output channels 2o and 2o+1
 * at tap (K-1-ky, K-1-kx), a channel a column; each pair of output channels turned round in
 * rows_t first. */
static void flipped_weights(const backward_parts *w, const float *weight,
                            const cn_conv_shape *s)
{
    int C = s->C, K = s->K, KK = K * K, OC = s->OC;
    float *col = w->rows_t;
    for (int o = 0; o < OC; o += 2) {
        int rows = OC - o < 2 ? 1 : 2;
        for (int r = 0; r < rows; r++)
            for (int t = 0; t < KK; t++)
                for (int c = 0; c < C; c++)
                    col[((size_t)r * KK + t) * C + c] =
                        weight[(((size_t)(o + r) * C + c) * KK) + KK - 1 - t];
        cn_bf16_pack_row_pairs(w->wtp + (size_t)o / 2 * KK * C, col, rows, KK * C, KK * C);
    }
}

/* The offsets of the gathered weight gradient (stride 1): patch row (c, ky, kx) starts at
 * wrow in a plane of kernel column pairs, and the pair of positions (oy, 2j), (oy, 2j + 1) of
 * the group's sample i is wcol further. */
static void wgrad_offsets(const backward_parts *w, const cn_conv_shape *s)
{
    int Hv = padded_h(s), Wv = padded_w(s), k = 0;
    tap_offsets(w->wrow, s->C, Hv, Wv, s->K, s->K, 1);
    for (int i = 0; i < wgrad_group(s); i++)
        k += position_offsets(w->wcol + k, i * s->C * Hv * Wv, s->OH, cn_bf16_pairs(s->OW), Wv, 2);
}

static backward_parts backward_parts_of(cn_bf16_pair *packed, const cn_conv_shape *s, int din)
{
    backward_parts w;
    backward_words(s, &w, packed);
    w.by_rows = din && !direct_input_gradient(s) && gradient_rows(s);
    return w;
}

/* W [OCp, CKK] in pairs of output channels, and its transpose where it is read so; or for the
 * direct input gradient, wflip and the offsets. */
static void backward_weights(const backward_parts *w, const float *weight,
                             const cn_conv_shape *s)
{
    int CKK = s->C * s->K * s->K;
    if (direct_input_gradient(s)) {
        flipped_weights(w, weight, s);
        din_offsets(w, s);
        return;
    }
    cn_bf16_pack_row_pairs(w->wtp, weight, s->OC, CKK, CKK);
    if (!w->by_rows) cn_bf16_transpose(w->wtr, w->wtp, cn_bf16_pairs(s->OC), CKK);
}

/* One sample's input gradient din_b from its output gradient in w->dyq. */
static void input_gradient(float *din_b, const backward_parts *w, const cn_conv_shape *s,
                           float *col)
{
    int P = s->OH * s->OW, CKK = s->C * s->K * s->K, OCp = cn_bf16_pairs(s->OC);
    if (direct_input_gradient(s)) {
        int HW = s->H * s->W;
        cn_gemm_bf16_gathered(HW, s->C, OCp * s->K * s->K, w->dyq, w->drow, w->dcol, w->wtp,
                              s->C, 0, w->rows_t, s->C);
        (w->stream ? cn_transpose_streamed : cn_transpose)(din_b, HW, w->rows_t, s->C, HW, s->C);
        return;
    }
    if (w->by_rows) { /* the same sums, transposed into col */
        cn_gemm_bf16(P, CKK, OCp, w->dyq, 1, P, w->wtp, CKK, 0, w->rows_t, CKK);
        cn_transpose(col, P, w->rows_t, CKK, P, CKK);
    } else {
        cn_gemm_bf16(CKK, P, OCp, w->wtr, OCp, 1, w->dyq, P, 0, col, P);
    }
    patches_to_input(din_b, col, s, w->fp32);
}

/* Where each sample's output gradient comes from: d [B, OC, P] itself, or with a pool, a
 * max-pool's gradient d and its picks argmax [B, OC, pool OH, OW] (cn_bf16_pool_gradient_pairs). */
typedef struct {
    const float *d;
    const int32_t *argmax;
    const cn_pool_shape *pool;
} gradient_source;

/* Sample b's output gradient from g in pairs of positions into dyp (turned: turned round,
 * [pairs, OC]; else w->dyp [OC, pairs]) and, when din is wanted, in pairs of channels into
 * w->dyq; its bias's gradient added to dbias. */
static void output_gradient(float *dbias, gradient_source g, int b, int din, cn_bf16_pair *dyp,
                            int turned, const backward_parts *w, const cn_conv_shape *s)
{
    int OC = s->OC, P = s->OH * s->OW, per = g.pool ? g.pool->OH * g.pool->OW : P;
    const float *d = g.d + (size_t)b * OC * per;
    bias_gradient(dbias, d, OC, per);
    if (g.pool) {
        cn_bf16_pool_gradient_pairs(dyp, turned, din ? w->dyq : NULL, gradient_pad(s), d,
                                    g.argmax + (size_t)b * OC * per, g.pool);
        return;
    }
    gradient_pairs(turned ? w->dyp : dyp, d, s);
    if (turned) cn_bf16_transpose(dyp, w->dyp, OC, position_pair_count(s));
    if (din) cn_bf16_pair_channels(w->dyq, d, OC, s->OH, s->OW, gradient_pad(s));
}

/* The weight gradient of the gathered path: the group's samples b0 .. b0 + n - 1 one after the
 * other, each one's planes and output gradient turned round (dyt) made before its input
 * gradient; then one product for the group, into dW^T. */
static void gathered_group(float *din, float *dbias, gradient_source g, const float *in, int b0,
                           int n, const backward_parts *w, const cn_conv_shape *s, float *col)
{
    UNPACK(s);
    int Pp = position_pair_count(s), CKK = C * K * K;
    size_t plane = (size_t)C * padded_h(s) * padded_w(s);
    for (int i = 0; i < n; i++) {
        int b = b0 + i;
        output_gradient(dbias, g, b, din != NULL, w->dyt + (size_t)i * Pp * OC, 1, w, s);
        cn_bf16_pair_columns(w->plane + i * plane, in + (size_t)b * C * H * W, C, H, W, s->pad);
        if (din) input_gradient(din + (size_t)b * C * H * W, w, s, col);
    }
    cn_gemm_bf16_gathered(CKK, OC, n * Pp, w->plane, w->wrow, w->wcol, w->dyt, OC, 1, w->dwt, OC);
}

/* The bf16 backward pass of B samples, each output gradient put into pairs from g. */
static void backward_samples(float *din, float *dweight, float *dbias, gradient_source g,
                             const float *in, const float *weight, int B,
                             const cn_conv_shape *s, float *col, cn_bf16_pair *packed)
{
    UNPACK(s);
    int CKK = C * K * K, Pp = position_pair_count(s);
    backward_parts w = backward_parts_of(packed, s, din != NULL);
    w.stream = din && cn_streamed((size_t)B * C * H * W);
    if (din) backward_weights(&w, weight, s);
    if (gathered_weight_gradient(s)) {
        int G = wgrad_group(s);
        wgrad_offsets(&w, s);
        cn_transpose(w.dwt, OC, dweight, CKK, OC, CKK);
        for (int b = 0; b < B; b += G)
            gathered_group(din, dbias, g, in, b, B - b < G ? B - b : G, &w, s, col);
        cn_transpose(dweight, CKK, w.dwt, OC, CKK, OC);
        return;
    }
    for (int b = 0; b < B; b++) {
        const float *x = in + (size_t)b * C * H * W;
        output_gradient(dbias, g, b, din != NULL, w.dyp, 0, &w, s);
        position_pairs(w.rowsp, w.plane, w.fp32, x, s, col);
        cn_gemm_bf16(OC, CKK, Pp, w.dyp, Pp, 1, w.rowsp, CKK, 1, dweight, CKK);
        if (din) input_gradient(din + (size_t)b * C * H * W, &w, s, col);
    }
}

void cn_conv2d_backward_bf16(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *weight, int B,
                             const cn_conv_shape *s, float *col, cn_bf16_pair *packed)
{
    gradient_source g = {dout, NULL, NULL};
    backward_samples(din, dweight, dbias, g, in, weight, B, s, col, packed);
}

int cn_conv2d_pool_pairs_fit(const cn_conv_shape *s, int K, int S)
{
    return s->stride == 1 && K >= 1 && S >= K && s->OH >= K && s->OW >= K;
}

void cn_conv2d_pool_backward_bf16(float *din, float *dweight, float *dbias, const float *dpool,
                                  const int32_t *argmax, const float *in, const float *weight,
                                  int B, const cn_conv_shape *s, const cn_pool_shape *pool,
                                  float *col, cn_bf16_pair *packed)
{
    assert(s->stride == 1 && pool->C == s->OC && pool->H == s->OH && pool->W == s->OW);
    gradient_source g = {dpool, argmax, pool};
    backward_samples(din, dweight, dbias, g, in, weight, B, s, col, packed);
}

/* The gradients of a convolution whose output feeds only a max-pool (window = stride = S), from
 * the pool's gradient: each window has one nonzero, so only the picked positions (a quarter of
 * them with 2x2 windows) enter the products, and the pool's backward pass is not needed; a relu
 * between them gates the picks (its backward is not needed either). Without din (a first
 * layer) the weight gradient reads the picked patches straight from the input. With din, col
 * holds, each part on a cache line of its own: the patch matrix (im2row), its rows padded to
 * whole lines, which then becomes the input gradient's patch rows for row2im; the weights in
 * rows padded alike; the picks sorted by position; with a gate, the gated gradients. */

/* The row stride of the padded rows: whole lines, an odd number of them, so that a column of
 * rows (row2im reads them so) spreads over the cache's sets instead of a few of them. */
static int row_stride(int floats)
{
    return (int)((cn_whole_lines((size_t)floats) / CN_LINE_FLOATS | 1) * CN_LINE_FLOATS);
}

_Static_assert(sizeof(int32_t) == sizeof(float), "the picks' scratch is counted in floats");

int cn_conv2d_pool_fusable(const cn_conv_shape *s, int S, int input_gradient)
{
    return s->stride == 1 && (s->pad == 0 || !input_gradient) && S >= 1 && s->OH >= S &&
           s->OW >= S;
}

/* The input channels go in groups whose patch rows fit the first-level cache with room to
 * spare: each sample's rows are written, read, written again and read again, so a group's
 * rows stay there from one step to the next (the seed's conv2: two groups of five channels,
 * 37 KB of rows each, instead of 70 KB). Each gradient element is summed as without groups. */
#define PICK_ROWS_FLOATS (10 * 1024)

typedef struct {
    int count, channels, ld; /* groups, channels in each (the last may have fewer), row stride */
} pick_groups;

static pick_groups pick_groups_of(const cn_conv_shape *s)
{
    int KK = s->K * s->K, P = s->OH * s->OW;
    for (int n = 1;; n++) {
        int g = (s->C + n - 1) / n, ld = row_stride(g * KK);
        if ((size_t)P * ld <= PICK_ROWS_FLOATS || g == 1)
            return (pick_groups){(s->C + g - 1) / g, g, ld};
    }
}

/* For a convolution that is not fusable: cn_conv2d_col_floats, what its dense backward needs.
 * With padding (then without din) the padded plane comes last. */
size_t cn_conv2d_pool_col_floats(const cn_conv_shape *s, int S)
{
    if (!cn_conv2d_pool_fusable(s, S, 0)) return cn_conv2d_col_floats(s);
    UNPACK(s);
    int OH = s->OH, OW = s->OW, Q = (OH / S) * (OW / S);
    pick_groups g = pick_groups_of(s);
    return cn_whole_lines((size_t)OH * OW * g.ld + CN_IM2ROW_SLACK) +
           (size_t)g.count * OC * g.ld + CN_PICK_SCRATCH_INTS(OH * OW, OC * Q) + (size_t)OC * Q +
           padded_floats(s);
}

/* g [OC, Q] = d where the relu's output y [OC, P] at the pick is above 0, else +0: the relu's
 * backward (d where its output is above 0) at the only positions the pool's backward fills.
 * Without branches, by masking d's bits: the relu's sign is a coin toss a pick, and mispredicted
 * branches made the gate cost more than the picked products (LeNet's first layer: backward 27
 * thread-ms an epoch without a relu to gate, 80 with a branch). */
static void gate_picks(float *g, const float *d, const int32_t *at, const float *y, int OC, int Q,
                       int P)
{
    for (int oc = 0; oc < OC; oc++)
        for (int q = 0; q < Q; q++) {
            size_t i = (size_t)oc * Q + q;
            uint32_t bits;
            memcpy(&bits, &d[i], sizeof bits);
            bits &= 0u - (uint32_t)(y[(size_t)oc * P + at[i]] > 0.0f);
            memcpy(&g[i], &bits, sizeof bits);
        }
}

/* padded [groups, OC, ld]: the weights of each group of input channels, rows padded to ld. */
static void group_weights(float *padded, const float *weight, const cn_conv_shape *s,
                          pick_groups g)
{
    int KK = s->K * s->K, CKK = s->C * KK;
    for (int i = 0; i < g.count; i++) {
        int c0 = i * g.channels, n = (s->C - c0 < g.channels ? s->C - c0 : g.channels) * KK;
        for (int oc = 0; oc < s->OC; oc++)
            memcpy(padded + ((size_t)i * s->OC + oc) * g.ld, weight + (size_t)oc * CKK + c0 * KK,
                   (size_t)n * sizeof *padded);
    }
}

void cn_conv2d_pool_backward(float *din, float *dweight, float *dbias, const float *dpool,
                             const int32_t *argmax, const float *gate, const float *in,
                             const float *weight, int B, const cn_conv_shape *s, int S,
                             float *col)
{
    UNPACK(s);
    assert(cn_conv2d_pool_fusable(s, S, din != NULL));
    int OH = s->OH, OW = s->OW, KK = K * K, CKK = C * KK, Q = (OH / S) * (OW / S);
    pick_groups g = pick_groups_of(s);
    float *rows = col, *padded = rows + cn_whole_lines((size_t)OH * OW * g.ld + CN_IM2ROW_SLACK);
    int32_t *picks = (int32_t *)(padded + (size_t)g.count * OC * g.ld);
    float *gated = (float *)(picks + CN_PICK_SCRATCH_INTS(OH * OW, OC * Q));
    float *plane = gated + (size_t)OC * Q; /* the padded input of a first layer */
    if (din) group_weights(padded, weight, s, g);
    for (int b = 0; b < B; b++) {
        const float *d = dpool + (size_t)b * OC * Q, *x = in + (size_t)b * C * H * W;
        const int32_t *at = argmax + (size_t)b * OC * Q;
        if (gate) {
            gate_picks(gated, d, at, gate + (size_t)b * OC * OH * OW, OC, Q, OH * OW);
            d = gated;
        }
        bias_gradient(dbias, d, OC, Q);
        if (!din) {
            cn_conv_picked_weight_gradient(OC, Q, d, at, valid_input(plane, x, s), C,
                                           padded_h(s), padded_w(s), K, dweight);
            continue;
        }
        cn_picks_by_position(OC, Q, d, at, OH * OW, picks);
        for (int i = 0; i < g.count; i++) {
            int c0 = i * g.channels, n = C - c0 < g.channels ? C - c0 : g.channels;
            const float *xg = x + (size_t)c0 * H * W;
            cn_im2row(rows, g.ld, xg, n, H, W, K);
            cn_picked_rows_weight_gradient(OC, Q, d, at, rows, n * KK, g.ld, dweight + c0 * KK,
                                           CKK);
            cn_picked_rows_input_gradient(picks, OH * OW, padded + (size_t)i * OC * g.ld,
                                          n * KK, g.ld, rows);
            cn_row2im(din + ((size_t)b * C + c0) * H * W, rows, g.ld, n, H, W, K);
        }
    }
}
