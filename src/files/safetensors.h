/* safetensors.h — what safetensors.c tells the rest of the library beyond the public header:
 * whether bytes begin as a safetensors file does, for messages about a file given where
 * another kind belongs. It reads no file and checks nothing past the header's first byte. */
#ifndef CN_SAFETENSORS_H
#define CN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* 1 when the len bytes begin with an 8-byte little-endian header length that fits in them,
 * followed by the header's opening '{'; else 0. */
int cn_safetensors_signature(const uint8_t *bytes, size_t len);

#endif /* CN_SAFETENSORS_H */
