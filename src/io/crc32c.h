/* crc32c.h — CRC-32C (Castagnoli, iSCSI), the checksum of TensorBoard's record framing. */
#ifndef TS_IO_CRC32C_H
#define TS_IO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes continuing from crc (0 to start): tsi_crc32c(tsi_crc32c(0, a, na), b, nb)
 * equals the CRC of a followed by b. tsi_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t tsi_crc32c(uint32_t crc, const void *data, size_t n);

/* TensorFlow's masked form, stored in record files so that a CRC of data containing CRCs does not
 * degenerate: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
static inline uint32_t tsi_crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

#endif /* TS_IO_CRC32C_H */
