/* gemm_bf16.c — matrix products with bfloat16 operands and single-precision sums, on AVX512_BF16
 * (VDPBF16PS: two bf16 products added to an fp32 lane per instruction, twice the multiply-adds
 * of an fp32 FMA), for `--precision bf16`. Operands are packed in pairs along the summed
 * dimension: a cn_bf16_pair holds two bf16 values in one 32-bit word, the earlier one in the low
 * half; an odd count is padded with a zero. Rounding to bf16 is to nearest even, by the CPU's
 * conversion instructions. Only this one instruction set, and AMX's tiles beside it where the
 * CPU has them (gemm_amx.c, cn_bf16_kernel_active): other CPUs train in fp32, and
 * cn_bf16_supported (cpu.c) says which. This file alone is compiled with the bf16 target flags;
 * builds for other processors have src/kernels/portable/bf16_absent.c instead. */
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm.h"

/* The first n <= 16 lanes. */
static inline __mmask16 first(int n) { return (__mmask16)((1u << n) - 1); }

/* The first n <= 16 floats at p rounded to bf16, each in the low half of a 32-bit lane. */
static inline __m512i bf16_lanes(const float *p, int n)
{
    return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(first(n), p)));
}

/* 16 pairs: the low halves from the first n floats at lo, the high halves from the first m at
 * hi (0 for the lanes past m). */
static inline __m512i pairs16(const float *lo, int n, const float *hi, int m)
{
    __m512i h = m > 0 ? bf16_lanes(hi, m) : _mm512_setzero_si512();
    return _mm512_or_si512(bf16_lanes(lo, n), _mm512_slli_epi32(h, 16));
}

void cn_bf16_pack_rows(cn_bf16_pair *dst, const float *src, int rows, int cols, int ld)
{
    int pairs = cn_bf16_pairs(cols);
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * ld;
        uint16_t *d = (uint16_t *)(dst + (size_t)r * pairs);
        for (int c = 0; c < cols; c += 16) {
            int n = cols - c < 16 ? cols - c : 16;
            __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(first(n), s + c));
            _mm256_mask_storeu_epi16(d + c, first(n), v);
        }
        if (cols % 2) d[cols] = 0;
    }
}

void cn_bf16_pack_row_pairs(cn_bf16_pair *dst, const float *src, int rows, int cols, int ld)
{
    for (int r = 0; r < rows; r += 2) {
        int last = r + 1 == rows; /* an odd last row pairs with zeros */
        const float *lo = src + (size_t)r * ld, *hi = last ? lo : lo + ld;
        cn_bf16_pair *d = dst + (size_t)(r / 2) * cols;
        for (int c = 0; c < cols; c += 16) {
            int n = cols - c < 16 ? cols - c : 16;
            _mm512_mask_storeu_epi32(d + c, first(n), pairs16(lo + c, n, hi + c, last ? 0 : n));
        }
    }
}

/* Where the picks at[0..n) of channel c go, as 16-bit places (halves, the lower k of a pair
 * first): hp[i] in dyp (rows of W values in pairs of columns, pairs words a row; turned round,
 * a pair's words of the C channels side by side), hq[i] in dyq (pairs of channels at each
 * position of the plane padded by qpad). The picks' windows begin at row r0[i], whose place in
 * the plane is r0[i] W; a pick lies at most K - 1 rows lower, found by comparisons in vectors
 * instead of a division (or a branch: which row of a window wins is a coin toss). */
static inline void pick_halves(int32_t hp[16], int32_t hq[16], const int32_t *at,
                               const int32_t *r0, int n, int c, int turned, int qpad,
                               const cn_pool_shape *s)
{
    __m512i W = _mm512_set1_epi32(s->W), one = _mm512_set1_epi32(1);
    __m512i pick = _mm512_maskz_loadu_epi32(first(n), at);
    __m512i row = _mm512_maskz_loadu_epi32(first(n), r0);
    __m512i col = _mm512_sub_epi32(pick, _mm512_mullo_epi32(row, W));
    for (int k = 1; k < s->K; k++) {
        __mmask16 past = _mm512_cmpge_epi32_mask(col, W);
        col = _mm512_mask_sub_epi32(col, past, col, W);
        row = _mm512_mask_add_epi32(row, past, row, one);
    }
    __m512i pairs = _mm512_set1_epi32(cn_bf16_pairs(s->W));
    if (turned) { /* 2 ((r pairs + col / 2) C + c) + col % 2 */
        __m512i pair = _mm512_add_epi32(_mm512_mullo_epi32(row, pairs), _mm512_srli_epi32(col, 1));
        __m512i word = _mm512_add_epi32(_mm512_mullo_epi32(pair, _mm512_set1_epi32(s->C)),
                                        _mm512_set1_epi32(c));
        _mm512_storeu_si512(hp, _mm512_add_epi32(_mm512_add_epi32(word, word),
                                                 _mm512_and_si512(col, one)));
    } else { /* 2 (c H + r) pairs + col */
        __m512i line = _mm512_add_epi32(row, _mm512_set1_epi32(c * s->H));
        __m512i words = _mm512_mullo_epi32(line, pairs);
        _mm512_storeu_si512(hp, _mm512_add_epi32(_mm512_add_epi32(words, words), col));
    }
    int Wq = s->W + 2 * qpad, Hq = s->H + 2 * qpad; /* (c/2 Hq + r + qpad) Wq + col + qpad */
    __m512i line_q = _mm512_add_epi32(row, _mm512_set1_epi32(c / 2 * Hq + qpad));
    __m512i at_q = _mm512_add_epi32(_mm512_mullo_epi32(line_q, _mm512_set1_epi32(Wq)),
                                    _mm512_add_epi32(col, _mm512_set1_epi32(qpad)));
    _mm512_storeu_si512(hq, _mm512_add_epi32(_mm512_add_epi32(at_q, at_q),
                                             _mm512_set1_epi32(c % 2)));
}

/* The windows' first rows, r0[i] for the windows q0 + i (i < n) of a pool output OW wide. */
static void window_rows(int32_t r0[16], int q0, int n, const cn_pool_shape *s)
{
    int py = q0 / s->OW, px = q0 % s->OW;
    for (int i = 0; i < n; i++) {
        r0[i] = py * s->S;
        if (++px == s->OW) px = 0, py++;
    }
}

void cn_bf16_pool_gradient_pairs(cn_bf16_pair *dyp, int turned, cn_bf16_pair *dyq, int qpad,
                                 const float *d, const int32_t *at, const cn_pool_shape *s)
{
    int Q = s->OH * s->OW;
    size_t plane_q = (size_t)(s->H + 2 * qpad) * (s->W + 2 * qpad);
    memset(dyp, 0, (size_t)s->C * s->H * cn_bf16_pairs(s->W) * sizeof *dyp);
    if (dyq) memset(dyq, 0, (size_t)cn_bf16_pairs(s->C) * plane_q * sizeof *dyq);
    uint16_t *halves_p = (uint16_t *)dyp, *halves_q = (uint16_t *)dyq;
    for (int q0 = 0; q0 < Q; q0 += 16) { /* 16 windows, then every channel's picks in them */
        int n = Q - q0 < 16 ? Q - q0 : 16;
        int32_t r0[16], hp[16], hq[16];
        window_rows(r0, q0, n, s);
        for (int c = 0; c < s->C; c++) {
            size_t at_c = (size_t)c * Q + q0;
            uint16_t h[16]; /* + 0 turns a -0 into the +0 that 0 + -0 gives */
            __m512 x = _mm512_maskz_loadu_ps(first(n), d + at_c);
            x = _mm512_add_ps(x, _mm512_setzero_ps());
            _mm256_storeu_si256((__m256i *)h, (__m256i)_mm512_cvtneps_pbh(x));
            pick_halves(hp, hq, at + at_c, r0, n, c, turned, qpad, s);
            for (int i = 0; i < n; i++) halves_p[hp[i]] = h[i];
            if (dyq)
                for (int i = 0; i < n; i++) halves_q[hq[i]] = h[i];
        }
    }
}

/* A plane [H + 2 pad, W + 2 pad] of pairs: its top and bottom pad rows zeroed. */
static void zero_border_rows(cn_bf16_pair *plane, int H, int W, int pad)
{
    size_t Wp = (size_t)W + 2 * pad, border = (size_t)pad * Wp;
    memset(plane, 0, border * sizeof *plane);
    memset(plane + (size_t)(pad + H) * Wp, 0, border * sizeof *plane);
}

/* Row y of the inside of such a plane, its left and right pad zeroed: where its W pairs go.
 * The pads are a word or two: stores, not two calls of memset a row (which took 1.4% of the
 * recipe's time). */
static cn_bf16_pair *inside_row(cn_bf16_pair *plane, int y, int W, int pad)
{
    cn_bf16_pair *row = plane + (size_t)(pad + y) * (W + 2 * pad);
    for (int i = 0; i < pad; i++) row[i] = 0, row[pad + W + i] = 0;
    return row + pad;
}

void cn_bf16_pair_channels(cn_bf16_pair *dst, const float *in, int C, int H, int W, int pad)
{
    size_t plane = (size_t)(H + 2 * pad) * (W + 2 * pad);
    for (int c = 0; c < C; c += 2) {
        int last = c + 1 == C; /* an odd last channel pairs with zeros */
        cn_bf16_pair *d = dst + (size_t)(c / 2) * plane;
        zero_border_rows(d, H, W, pad);
        for (int y = 0; y < H; y++) {
            const float *lo = in + ((size_t)c * H + y) * W, *hi = last ? lo : lo + (size_t)H * W;
            cn_bf16_pair *row = inside_row(d, y, W, pad);
            for (int x = 0; x < W; x += 16) {
                int n = W - x < 16 ? W - x : 16;
                _mm512_mask_storeu_epi32(row + x, first(n),
                                         pairs16(lo + x, n, hi + x, last ? 0 : n));
            }
        }
    }
}

void cn_bf16_pair_columns(cn_bf16_pair *dst, const float *in, int C, int H, int W, int pad)
{
    size_t plane = (size_t)(H + 2 * pad) * (W + 2 * pad);
    for (int c = 0; c < C; c++) {
        cn_bf16_pair *d = dst + (size_t)c * plane;
        zero_border_rows(d, H, W, pad);
        for (int y = 0; y < H; y++) {
            const float *s = in + ((size_t)c * H + y) * W;
            cn_bf16_pair *row = inside_row(d, y, W, pad);
            if (pad > 0) /* the last zero of the left border pairs with the row's first value */
                row[-1] = (cn_bf16_pair)_mm_cvtsi128_si32(
                    _mm512_castsi512_si128(pairs16(s, 0, s, 1)));
            for (int x = 0; x < W; x += 16) { /* the right-hand neighbours stop at the row's end */
                int n = W - x < 16 ? W - x : 16, right = W - 1 - x < 16 ? W - 1 - x : 16;
                _mm512_mask_storeu_epi32(row + x, first(n), pairs16(s + x, n, s + x + 1, right));
            }
        }
    }
}

void cn_bf16_im2col_pairs(cn_bf16_pair *colp, const cn_bf16_pair *plane, int C, int H, int W,
                          int K)
{
    int OH = H - K + 1, OW = W - K + 1, KH = (K + 1) / 2;
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int h = 0; h < KH; h++) {
                cn_bf16_pair *row = colp + ((size_t)(c * K + ky) * KH + h) * OH * OW;
                const cn_bf16_pair *from = plane + ((size_t)c * H + ky) * W + 2 * h;
                for (int oy = 0; oy < OH; oy++)
                    for (int x = 0; x < OW; x += 16) {
                        __mmask16 m = first(OW - x < 16 ? OW - x : 16);
                        _mm512_mask_storeu_epi32(row + oy * OW + x, m,
                                                 _mm512_maskz_loadu_epi32(m, from + oy * W + x));
                    }
            }
}

/* The K-word pieces of one row of im2row pairs: row[(c*K + ky)*K + kx] = plane's word at
 * (c, ky, kx) from s, and-ed with keep. */
static inline __attribute__((always_inline)) void
pair_row_pieces(cn_bf16_pair *row, const cn_bf16_pair *s, int C, int H, int W, int K,
                cn_bf16_pair keep)
{
    __mmask8 piece = (__mmask8)((1u << (K < 8 ? K : 8)) - 1);
    __m256i kept = _mm256_set1_epi32((int)keep);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++) {
            const cn_bf16_pair *from = s + ((size_t)c * H + ky) * W;
            cn_bf16_pair *d = row + (c * K + ky) * K;
            if (K <= 8) { /* a whole 8-word store: the next piece overwrites the rest */
                __m256i v = _mm256_maskz_loadu_epi32(piece, from);
                _mm256_storeu_si256((__m256i *)d, _mm256_and_si256(v, kept));
                continue;
            }
            for (int kx = 0; kx < K; kx++) d[kx] = from[kx] & keep;
        }
}

void cn_bf16_im2row_pairs(cn_bf16_pair *rowsp, const cn_bf16_pair *plane, int C, int H, int W,
                          int K)
{
    int OH = H - K + 1, OW = W - K + 1, CKK = C * K * K;
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox += 2) /* an odd row's last position pairs with zeros */
            pair_row_pieces(rowsp + ((size_t)oy * cn_bf16_pairs(OW) + ox / 2) * CKK,
                            plane + (size_t)oy * W + ox, C, H, W, K,
                            ox + 1 < OW ? 0xFFFFFFFFu : 0xFFFFu);
}

/* Where A's elements lie: A(i, k) at A[i*ai + k*ak], or, gathered (arow given), at
 * A[arow[i] + acol[k]]. */
typedef struct {
    const cn_bf16_pair *A;
    ptrdiff_t ai, ak;
    const int32_t *arow, *acol;
} a_operand;

/* C[R, w] (+)= A[R, Kp] * B[Kp, w] for the columns of m0 (the first vector) and m1 (the
 * second; none when the tile is one vector wide): R = 1..6 rows of two vectors of
 * accumulators, which start from start[r] when start is given, else from C or, with masks m0
 * and m1 turned off for loading, from 0. gather: A is read through a's tables. */
static inline __attribute__((always_inline)) void
tile(int R, int wide, int gather, int Kp, const a_operand *a, const cn_bf16_pair *B, int ldb,
     const float *start, float *C, int ldc, __mmask16 m0, __mmask16 m1, int add)
{
    __m512 c[6][2];
    const cn_bf16_pair *A = a->A, *ar[6];
    const int32_t *acol = a->acol;
    ptrdiff_t ai = a->ai, ak = a->ak;
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        if (gather) ar[r] = A + a->arow[r];
        if (start) {
            c[r][0] = c[r][1] = _mm512_set1_ps(start[r]);
            continue;
        }
        c[r][0] = _mm512_maskz_loadu_ps(add ? m0 : 0, C + (size_t)r * ldc);
        if (wide) c[r][1] = _mm512_maskz_loadu_ps(add ? m1 : 0, C + (size_t)r * ldc + 16);
    }
    for (int k = 0; k < Kp; k++) {
        const cn_bf16_pair *b = B + (size_t)k * ldb;
        __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(m0, b);
        __m512bh b1 = wide ? (__m512bh)_mm512_maskz_loadu_epi32(m1, b + 16) : b0;
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            cn_bf16_pair w = gather ? ar[r][acol[k]] : A[r * ai + k * ak];
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)w);
            c[r][0] = _mm512_dpbf16_ps(c[r][0], av, b0);
            if (wide) c[r][1] = _mm512_dpbf16_ps(c[r][1], av, b1);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        _mm512_mask_storeu_ps(C + (size_t)r * ldc, m0, c[r][0]);
        if (wide) _mm512_mask_storeu_ps(C + (size_t)r * ldc + 16, m1, c[r][1]);
    }
}

#define TILE_ROWS 6
typedef void (*tile_fn)(int, const a_operand *, const cn_bf16_pair *, int, const float *,
                        float *, int, __mmask16, __mmask16, int);
#define DEFINE_TILE(R, WIDE, GATHER)                                                          \
    static void tile_##R##_##WIDE##_##GATHER(int Kp, const a_operand *a,                      \
                                             const cn_bf16_pair *B, int ldb,                  \
                                             const float *start, float *C, int ldc,           \
                                             __mmask16 m0, __mmask16 m1, int add)             \
    {                                                                                         \
        tile(R, WIDE, GATHER, Kp, a, B, ldb, start, C, ldc, m0, m1, add);                     \
    }
#define DEFINE_TILES(R)                                                                       \
    DEFINE_TILE(R, 0, 0) DEFINE_TILE(R, 1, 0) DEFINE_TILE(R, 0, 1) DEFINE_TILE(R, 1, 1)
DEFINE_TILES(1)
DEFINE_TILES(2)
DEFINE_TILES(3)
DEFINE_TILES(4)
DEFINE_TILES(5)
DEFINE_TILES(6)
#define TILES_OF(WIDE, GATHER)                                                                \
    {NULL,                        tile_1_##WIDE##_##GATHER, tile_2_##WIDE##_##GATHER,          \
     tile_3_##WIDE##_##GATHER,    tile_4_##WIDE##_##GATHER, tile_5_##WIDE##_##GATHER,          \
     tile_6_##WIDE##_##GATHER}
static const tile_fn tiles[2][2][TILE_ROWS + 1] = {
    {TILES_OF(0, 0), TILES_OF(1, 0)},
    {TILES_OF(0, 1), TILES_OF(1, 1)},
};

/* a's rows from i on. */
static a_operand rows_from(const a_operand *a, int i)
{
    a_operand b = *a;
    if (a->arow) b.arow += i;
    else b.A += i * a->ai;
    return b;
}

static void gemm(int M, int N, int Kp, const a_operand *a, const cn_bf16_pair *B, int ldb,
                 const float *start, int accumulate, float *C, int ldc)
{
    if (!a->arow && a->ak == 1 && cn_bf16_kernel_active() == CN_BF16_AMX) {
        cn_gemm_bf16_amx(M, N, Kp, a->A, a->ai, B, ldb, start, accumulate, C, ldc);
        return;
    }
    /* the fewest bands of at most TILE_ROWS rows, as even as can be: the first M % bands of
     * them one row more (49 rows: 6, 6, 6, 6, 5, 5, 5, 5, 5, not eight of 6 and one of 1) */
    int bands = (M + TILE_ROWS - 1) / TILE_ROWS, gather = a->arow != NULL;
    for (int band = 0, i = 0, R = 0; band < bands; band++, i += R) {
        R = M / bands + (band < M % bands);
        a_operand ai = rows_from(a, i);
        for (int j = 0; j < N; j += 32) {
            int w = N - j < 32 ? N - j : 32;
            __mmask16 m0 = first(w < 16 ? w : 16), m1 = first(w > 16 ? w - 16 : 0);
            tiles[gather][w > 16][R](Kp, &ai, B + j, ldb, start ? start + i : NULL,
                                     C + (size_t)i * ldc + j, ldc, m0, m1, accumulate);
        }
    }
}

void cn_gemm_bf16(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai, ptrdiff_t ak,
                  const cn_bf16_pair *B, int ldb, int accumulate, float *C, int ldc)
{
    a_operand a = {A, ai, ak, NULL, NULL};
    gemm(M, N, Kp, &a, B, ldb, NULL, accumulate, C, ldc);
}

void cn_gemm_bf16_rows_from(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai,
                            ptrdiff_t ak, const cn_bf16_pair *B, int ldb, const float *start,
                            float *C, int ldc)
{
    a_operand a = {A, ai, ak, NULL, NULL};
    gemm(M, N, Kp, &a, B, ldb, start, 0, C, ldc);
}

void cn_gemm_bf16_gathered(int M, int N, int Kp, const cn_bf16_pair *A, const int32_t *arow,
                           const int32_t *acol, const cn_bf16_pair *B, int ldb, int accumulate,
                           float *C, int ldc)
{
    a_operand a = {A, 0, 0, arow, acol};
    gemm(M, N, Kp, &a, B, ldb, NULL, accumulate, C, ldc);
}
