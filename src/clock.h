/* clock.h — the monotonic clock the library times its phases and layers with, in seconds.
 * Only for measuring durations; never wall-clock dates. */
#ifndef CN_CLOCK_H
#define CN_CLOCK_H

#include <time.h>

static inline double cn_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* CN_CLOCK_H */
