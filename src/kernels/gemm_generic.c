/* gemm_generic.c — the GEMM kernels of gemm_kernels.inc compiled for the portable baseline: the
 * same C, the same tiles and no fused multiply-adds (-ffp-contract=off) on every processor, so
 * that it computes the same bits wherever it runs (SSE2 on x86-64, Advanced SIMD on arm64,
 * scalar code elsewhere). Chosen at run time by gemm.c, or by CNNC_ISA=generic. */
#include "kernels/gemm.h"
#define CN_ISA_SUFFIX generic
#define CN_VECTOR_FLOATS 4     /* floats in one vector register */
#define CN_VECTOR_REGISTERS 16 /* the fewest a target offers (SSE2) */
#define CN_BURN_CHAINS 12      /* vector multiply-add chains that fit the registers */
#define CN_TILE_ROWS 6         /* rows of C a GEMM tile keeps in registers */
#define CN_DOT_ROWS 2          /* rows of C a block of dot products covers */
#include "kernels/gemm_kernels.inc"
