/* crc32c.c — CRC-32C by slicing-by-8 over tables built once at first use. */
#include "io/crc32c.h"

#include <pthread.h>

#define POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed: the reflected CRC works LSB first */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[0][i] = c;
    }
    /* table[k][i] is the CRC of byte i followed by k zero bytes, so eight lookups fold 8 bytes */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xFF];
}

uint32_t tsi_crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&table_once, build_tables);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        /* byte-wise assembly keeps this correct on any endianness; compilers fuse it to one load */
        uint32_t lo =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        lo ^= c;
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
            table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
            table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
    }
    while (n-- > 0) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return ~c;
}
