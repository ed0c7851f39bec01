/* mix.h — the counter-based hashing that training's random draws are made of (dropout's masks,
 * augmentation's crops and flips): splitmix64's output function and a way to fold numbers into
 * a hash, so that a draw is a function of the numbers that name it (seed, epoch, step, sample,
 * ...) and never of a generator's position. Not a cryptographic hash; no state lives here. */
#ifndef CN_MIX_H
#define CN_MIX_H

#include <stdint.h>

#define CN_MIX_GOLDEN 0x9e3779b97f4a7c15u /* splitmix64's increment */

/* splitmix64's output function: a bijection of 64-bit numbers that mixes every bit. */
static inline uint64_t cn_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* h followed by the number v: different v give different results for the same h. */
static inline uint64_t cn_mix_in(uint64_t h, uint32_t v)
{
    return cn_mix((h + CN_MIX_GOLDEN) ^ v);
}

#endif /* CN_MIX_H */
