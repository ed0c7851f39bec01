/* error.c — the one way cnnc reports failures: a formatted message in a caller-owned cn_error,
 * kept on one line when it quotes a file. It does not print or exit; the command line decides
 * what to do with the message. */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"

int cn_fail(cn_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void cn_keep_one_line(cn_error *err)
{
    if (!err) return;
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
}
