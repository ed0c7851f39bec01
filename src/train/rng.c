/* rng.c — xoshiro256** seeded through splitmix64, and the distributed sampler's per-epoch
 * permutation built on it. The state always travels in a cn_rng owned by the caller; nothing
 * here is global. Not a cryptographic generator. */
#include "cnnc.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void cn_rng_seed(cn_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

uint64_t cn_rng_next(cn_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float cn_rng_uniform(cn_rng *rng)
{
    return (float)(cn_rng_next(rng) >> 40) * 0x1.0p-24f;
}

/* Lemire's multiply-and-reject: unbiased for every bound. */
uint32_t cn_rng_below(cn_rng *rng, uint32_t bound)
{
    uint64_t m = (cn_rng_next(rng) >> 32) * (uint64_t)bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t threshold = (uint32_t)(-bound) % bound;
        while (low < threshold) {
            m = (cn_rng_next(rng) >> 32) * (uint64_t)bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* The stream of epoch e of seed s is a generator seeded from both, so any epoch's order can be
 * rebuilt without replaying the earlier ones (what a resumed run needs). */
void cn_sampler_permutation(uint32_t *perm, uint32_t n, uint64_t seed, int epoch)
{
    cn_rng rng;
    uint64_t mixed =
        seed * 0xD1B54A32D192ED03ull ^ ((uint64_t)(uint32_t)epoch + 0x5851F42D4C957F2Dull);
    cn_rng_seed(&rng, mixed);
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
        uint32_t j = cn_rng_below(&rng, i);
        uint32_t tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }
}
