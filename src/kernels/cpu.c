/* cpu.c — what this processor can run, asked of the processor itself: on x86-64 through CPUID
 * (GCC's __builtin_cpu_supports), on arm64 through the hardware capabilities the kernel passes
 * every process (getauxval(AT_HWCAP)), elsewhere nothing beyond the portable kernels. The one
 * file that knows processor families apart; it reads the answer, it does not choose (gemm.c). */
#include "cnnc.h"
#include "kernels/gemm.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux's arch_prctl: ask for an extended state component */
#define XFEATURE_XTILEDATA 18      /* the AMX tiles' data */
#endif

#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1) /* Linux's arm64 hwcap bit for Advanced SIMD (NEON) */
#endif
#endif

int cn_cpu_runs(cn_isa isa)
{
    if (isa == CN_ISA_GENERIC) return 1;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (isa == CN_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == CN_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
#elif defined(__aarch64__)
    if (isa == CN_ISA_NEON) return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#endif
    return 0;
}

int cn_bf16_supported(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

int cn_amx_supported(void)
{
#if defined(__x86_64__)
    if (!cn_bf16_supported()) return 0; /* the operands are packed with AVX512_BF16 */
    unsigned a, b, c, d; /* CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE (clang 14's
                          * __builtin_cpu_supports does not know them) */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24)))
        return 0;
    /* Linux enables the tiles' state per process, on request; this fails on older kernels. */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}
