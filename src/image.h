/* image.h — what image.c (reading image files, PNG through cairo) shares with pgm.c (the PGM
 * parser). Nothing here touches files. */
#ifndef CN_IMAGE_H
#define CN_IMAGE_H

#include "cnnc.h"

/* The refusal of an image of another size than rows x cols (one message for every format). */
int cn_image_size_refused(const char *path, long width, long height, int rows, int cols,
                          cn_error *err);

/* Decodes a whole PGM file (P2 or P5) held in bytes into rows * cols grey pixels (0..255). */
int cn_pgm_decode(const uint8_t *bytes, size_t len, const char *path, int rows, int cols,
                  uint8_t *pixels, cn_error *err);

#endif /* CN_IMAGE_H */
