/* gemm_avx2.c — the GEMM kernels of gemm_kernels.inc compiled for the avx2 instruction set
 * (the Makefile gives this file its target flags). Chosen at run time by gemm.c. */
#include "kernels/gemm.h"
#define CN_ISA_SUFFIX avx2
#define CN_VECTOR_FLOATS 8 /* floats in one vector register */
#define CN_VECTOR_REGISTERS 16 /* ymm0..ymm15 */
#define CN_BURN_CHAINS 12 /* vector FMA chains that fit the registers of avx2 */
#define CN_TILE_ROWS 6 /* rows of C a GEMM tile keeps in registers */
#define CN_DOT_ROWS 2 /* rows of C a block of dot products covers */
#include "kernels/gemm_kernels.inc"
