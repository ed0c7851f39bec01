/* gemm_amx.c — the bf16 matrix product of gemm_bf16.c on Intel's AMX tiles (TDPBF16PS: a 16 x 16
 * block of fp32 sums takes 16 x 32 bf16 products of two tiles in one instruction), for CPUs and
 * operating systems that offer them (cn_amx_supported in cpu.c; CNNC_BF16 chooses). The operands
 * are gemm_bf16.c's pairs, which are AMX's own layout: A [M, Kp] pairs row by row is a tile of
 * 16 rows of 16 pairs, B [Kp, N] pairs is AMX's "VNNI" layout of 16 pair-rows of 16 columns.
 * Each sum of C starts from its start value (or C, or 0) and takes the pairs in order of k, 16
 * at a time in the tile unit; the bits differ from the AVX512_BF16 kernels'. Only A with
 * contiguous rows (ak = 1). Blocks of 2 x 2 tiles of C, so that four chains of sums run at once
 * (one chain waits on each product's latency); edges go through zero-padded copies. */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm.h"

#define T 16 /* rows of a tile, and pairs (64 bytes) in a row */

/* The tiles, as numbers (the intrinsics paste them into the instructions' text): a block of
 * C [2 x 16 rows, 2 x 16 columns], the two row tiles of A and the two column tiles of B. */
#define C00 0
#define C01 1
#define C10 2
#define C11 3
#define A0 4
#define A1 5
#define B0 6
#define B1 7

/* The tile configuration of LDTILECFG, palette 1. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) tile_config;

/* Tiles for a block whose row tiles have m0 and m1 rows (m1 = 0: no second row of tiles). */
static void configure(int m0, int m1)
{
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    int rows[8] = {[C00] = m0, [C01] = m0, [C10] = m1, [C11] = m1,
                   [A0] = m0, [A1] = m1, [B0] = T, [B1] = T};
    for (int t = 0; t < 8; t++) {
        c.rows[t] = (uint8_t)(rows[t] ? rows[t] : 1);
        c.bytes_per_row[t] = 4 * T;
    }
    _tile_loadconfig(&c);
}

/* The first n <= 16 lanes. */
static inline __mmask16 first(int n) { return (__mmask16)((1u << n) - 1); }

/* rows x words 32-bit words of X (row stride ld) into a tile of 16 x 16 words, zeros around
 * them. */
static const cn_bf16_pair *padded(cn_bf16_pair *copy, const cn_bf16_pair *X, ptrdiff_t ld,
                                  int rows, int words)
{
    for (int r = 0; r < T; r++)
        _mm512_store_si512(copy + r * T,
                           _mm512_maskz_loadu_epi32(r < rows ? first(words) : 0, X + r * ld));
    return copy;
}

/* Where a tile lies, with its stride in bytes. */
typedef struct {
    const cn_bf16_pair *at;
    long stride;
} tile_source;

/* The A tile of rows [0, m) (as many as it is configured for) and pairs [0, kp) from a (row
 * stride ai): a itself when the pairs are whole, else a zero-padded copy. */
static tile_source a_tile(cn_bf16_pair *copy, const cn_bf16_pair *a, ptrdiff_t ai, int m, int kp)
{
    if (kp == T) return (tile_source){a, 4 * ai};
    return (tile_source){padded(copy, a, ai, m, kp), 4 * T};
}

/* The B tile of pairs [0, kp) and columns [0, n) from b (row stride ldb): b itself when both
 * are whole, else a zero-padded copy. */
static tile_source b_tile(cn_bf16_pair *copy, const cn_bf16_pair *b, int ldb, int kp, int n)
{
    if (kp == T && n == T) return (tile_source){b, 4 * (long)ldb};
    return (tile_source){padded(copy, b, ldb, kp, n), 4 * T};
}

/* A tile of C [m, n] at c: its first sums (start[r], C, or 0) into tile t, and back. */
#define LOAD_C(t, c, m, n, start, sums)                                                       \
    do {                                                                                      \
        if (!(start) && !accumulate) {                                                        \
            _tile_zero(t);                                                                    \
        } else if (!(start) && (m) == T && (n) == T) {                                        \
            _tile_loadd(t, c, 4 * ldc);                                                       \
        } else {                                                                              \
            for (int r = 0; r < (m); r++)                                                     \
                _mm512_store_ps((sums) + r * T,                                               \
                                (start) ? _mm512_set1_ps((start)[r])                          \
                                        : _mm512_maskz_loadu_ps(first(n), (c) + r * ldc));    \
            _tile_loadd(t, sums, 4 * T);                                                      \
        }                                                                                     \
    } while (0)
#define STORE_C(t, c, m, n, sums)                                                             \
    do {                                                                                      \
        if ((m) == T && (n) == T) {                                                           \
            _tile_stored(t, c, 4 * ldc);                                                      \
        } else {                                                                              \
            _tile_stored(t, sums, 4 * T);                                                     \
            for (int r = 0; r < (m); r++)                                                     \
                _mm512_mask_storeu_ps((c) + r * ldc, first(n), _mm512_load_ps((sums) + r * T)); \
        }                                                                                     \
    } while (0)

void cn_gemm_bf16_amx(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai,
                      const cn_bf16_pair *B, int ldb, const float *start, int accumulate,
                      float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    assert(Kp > 0);
    _Alignas(64) float sums[4][T * T];
    _Alignas(64) cn_bf16_pair copy[4][T * T];
    int configured = -1;
    for (int i = 0; i < M; i += 2 * T) {
        int m0 = M - i < T ? M - i : T, m1 = M - i - T < 0 ? 0 : M - i - T < T ? M - i - T : T;
        if (configured != m0 * 32 + m1) configure(m0, m1), configured = m0 * 32 + m1;
        const cn_bf16_pair *a0 = A + (size_t)i * ai, *a1 = m1 ? a0 + (size_t)T * ai : a0;
        const float *s0 = start ? start + i : NULL, *s1 = start && m1 ? s0 + T : NULL;
        for (int j = 0; j < N; j += 2 * T) {
            int n0 = N - j < T ? N - j : T, n1 = N - j - T < 0 ? 0 : N - j - T < T ? N - j - T : T;
            /* the other tiles' corners only where they exist */
            float *c00 = C + (size_t)i * ldc + j, *c01 = n1 ? c00 + T : c00;
            float *c10 = m1 ? c00 + (size_t)T * ldc : c00, *c11 = n1 ? c10 + T : c10;
            LOAD_C(C00, c00, m0, n0, s0, sums[0]);
            if (n1) LOAD_C(C01, c01, m0, n1, s0, sums[1]);
            if (m1) LOAD_C(C10, c10, m1, n0, s1, sums[2]);
            if (m1 && n1) LOAD_C(C11, c11, m1, n1, s1, sums[3]);
            for (int k = 0; k < Kp; k += T) {
                int kp = Kp - k < T ? Kp - k : T;
                const cn_bf16_pair *b = B + (size_t)k * ldb + j;
                tile_source sa0 = a_tile(copy[0], a0 + k, ai, m0, kp);
                tile_source sb0 = b_tile(copy[2], b, ldb, kp, n0);
                _tile_loadd(A0, sa0.at, sa0.stride);
                _tile_loadd(B0, sb0.at, sb0.stride);
                _tile_dpbf16ps(C00, A0, B0);
                if (n1) {
                    tile_source sb1 = b_tile(copy[3], b + T, ldb, kp, n1);
                    _tile_loadd(B1, sb1.at, sb1.stride);
                    _tile_dpbf16ps(C01, A0, B1);
                }
                if (m1) {
                    tile_source sa1 = a_tile(copy[1], a1 + k, ai, m1, kp);
                    _tile_loadd(A1, sa1.at, sa1.stride);
                    _tile_dpbf16ps(C10, A1, B0);
                    if (n1) _tile_dpbf16ps(C11, A1, B1);
                }
            }
            STORE_C(C00, c00, m0, n0, sums[0]);
            if (n1) STORE_C(C01, c01, m0, n1, sums[1]);
            if (m1) STORE_C(C10, c10, m1, n0, sums[2]);
            if (m1 && n1) STORE_C(C11, c11, m1, n1, sums[3]);
        }
    }
    _tile_release();
}
