/* error.h — what the library's files share about cn_error besides cn_fail (public, cnnc.h):
 * keeping a message that quotes a file on one line. */
#ifndef CN_ERROR_H
#define CN_ERROR_H

#include "cnnc.h"

/* Replaces control characters (a tensor name or JSON text from a file may hold them) with '?',
 * so that the message stays one line. err may be NULL. */
void cn_keep_one_line(cn_error *err);

#endif /* CN_ERROR_H */
