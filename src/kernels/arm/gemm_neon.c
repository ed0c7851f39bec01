/* gemm_neon.c — the GEMM kernels of gemm_kernels.inc compiled for arm64's Advanced SIMD (NEON):
 * four floats a vector, fused multiply-adds (the Makefile gives this file -ffp-contract=fast),
 * and 32 vector registers, so that a tile keeps 10 rows of C where x86's 16 registers hold 6:
 * 20 accumulators, 2 vectors of B and the 10 values of A that each step multiplies by lane fill
 * all 32 without a spill (GCC 12's code for 12 rows spilled three accumulators every step). No
 * masked moves: a row's last partial vector goes through the stack. Chosen at run time by
 * gemm.c when the kernel reports Advanced SIMD (cpu.c). */
#include "kernels/gemm.h"
#define CN_ISA_SUFFIX neon
#define CN_VECTOR_FLOATS 4     /* floats in one vector register */
#define CN_VECTOR_REGISTERS 32 /* v0..v31 */
#define CN_BURN_CHAINS 24      /* vector FMA chains: enough for four pipes of latency four */
#define CN_TILE_ROWS 10        /* rows of C a GEMM tile keeps in registers */
#define CN_DOT_ROWS 4          /* rows of C a block of dot products covers */
#include "kernels/gemm_kernels.inc"
