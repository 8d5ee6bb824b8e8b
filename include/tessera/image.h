/* tessera/image.h — PNG writing and image decoding through stb_image / stb_image_write (Debian's
 * libstb-dev); a build without it answers TS_ERR_UNSUPPORTED. */
#ifndef TESSERA_IMAGE_H
#define TESSERA_IMAGE_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes t as a PNG file: uint8, [C,H,W] with C in 1 (grey), 3 (RGB), 4 (RGBA), or [H,W] (grey);
 * any device and layout. Other dtypes, ranks or channel counts give TS_ERR_DTYPE / TS_ERR_SHAPE. */
TS_API ts_status ts_image_save_png(const char *path, ts_tensor *t);

/* Decodes an image (PNG, JPEG, BMP, GIF, TGA, PNM... what stb_image reads) into a cpu uint8
 * [C,H,W] tensor. channels 0 keeps the file's own count; 1, 2, 3 or 4 converts to it. */
TS_API ts_tensor *ts_image_read(const char *path, int channels);
TS_API ts_tensor *ts_image_decode(const void *data, size_t nbytes, int channels);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_IMAGE_H */
