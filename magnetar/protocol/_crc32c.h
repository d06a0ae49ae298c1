/* CRC32C (Castagnoli), as the crc32c package computes it: the one copy the
 * compiled hot paths share, header-only. magnetar/protocol/_hot.c (the
 * broker's SEND checksums) and pyspark_magnetar/_columns_fetch.c (the Spark
 * reader's entry checksums) each include it, so each extension module keeps
 * its own table: call crc32c_init() once from the module's init.
 *
 * Pure C, no Python object: safe with the GIL released. SSE4.2's crc32
 * instruction when the CPU has it (x86-64, GCC/Clang), else a table.
 */
#ifndef MAGNETAR_CRC32C_H
#define MAGNETAR_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc32c_table[256];
static int crc32c_hw = 0;

static void
crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

/* CRC32C of p[0:n] continuing from `initial` (0 starts a new sum). */
static uint32_t
crc32c(uint32_t initial, const uint8_t *p, size_t n)
{
    uint32_t crc = ~initial;
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc32c_hw)
        return ~crc32c_sse42(crc, p, n);
#endif
    while (n-- > 0)
        crc = crc32c_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#endif
