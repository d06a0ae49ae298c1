/* CRC32C (Castagnoli), as the crc32c package computes it: the one copy the
 * compiled hot paths share, header-only. magnetar/protocol/_hot.c (the
 * broker's SEND checksums) and pyspark_magnetar/_columns_fetch.c (the Spark
 * reader's entry checksums) each include it, so each extension module keeps
 * its own table: call crc32c_init() once from the module's init.
 *
 * Pure C, no Python object: safe with the GIL released. SSE4.2's crc32
 * instruction when the CPU has it (x86-64, GCC/Clang), else a table.
 *
 * The instruction takes 3 cycles to give its result and a new one can
 * start every cycle, so one chain of them over a buffer runs at a third of
 * the unit's speed. A long buffer is summed as three chains at once, over
 * three adjacent blocks, and the three sums joined: the CRC register is
 * linear, so the sum of X||Y from register c is shift(sum of X from c)
 * ^ (sum of Y from 0), where shift(r) is what L zero bytes do to r (a
 * linear map, kept as four 256-entry tables per block length L, built at
 * init). Blocks of 8 KiB while the buffer holds three of them, then of
 * 256 bytes: a stored batch of ~100 KiB (the broker's segment reads, the
 * Spark reader's entries) takes about a third of the time; short entries
 * take the single chain, as before.
 */
#ifndef MAGNETAR_CRC32C_H
#define MAGNETAR_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc32c_table[256];
static int crc32c_hw = 0;

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

/* Block lengths of the three chains (bytes per chain). */
#define CRC32C_LONG 8192
#define CRC32C_SHORT 256

/* shift(r) for L zero bytes, by the register's four bytes: [k][b] is
 * shift(b << 8k), and shift(r) the XOR of the four bytes' entries. */
static uint32_t crc32c_long_shift[4][256], crc32c_short_shift[4][256];

static inline uint64_t
crc32c_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* One chain of the instruction: register in, register out (no inversion). */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42_chain(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        c = _mm_crc32_u64(c, crc32c_load64(p));
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

static void
crc32c_shift_table(uint32_t table[4][256], size_t len)
{
    static const uint8_t zeros[CRC32C_LONG];
    uint32_t basis[32];
    for (int i = 0; i < 32; i++)
        basis[i] = crc32c_sse42_chain(1u << i, zeros, len);
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if ((b >> j) & 1)
                    v ^= basis[8 * k + j];
            table[k][b] = v;
        }
}

static inline uint32_t
crc32c_shift(uint32_t table[4][256], uint32_t r)
{
    return table[0][r & 0xff] ^ table[1][(r >> 8) & 0xff] ^ table[2][(r >> 16) & 0xff] ^ table[3][r >> 24];
}

/* Three chains over blocks of `len` bytes while 3 * len remain. */
__attribute__((target("sse4.2"))) static inline uint32_t
crc32c_sse42_three(uint32_t crc, const uint8_t **pp, size_t *np, size_t len, uint32_t table[4][256])
{
    const uint8_t *p = *pp;
    size_t n = *np;
    uint64_t c0 = crc;
    while (n >= 3 * len) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + len;
        do {
            c0 = _mm_crc32_u64(c0, crc32c_load64(p));
            c1 = _mm_crc32_u64(c1, crc32c_load64(p + len));
            c2 = _mm_crc32_u64(c2, crc32c_load64(p + 2 * len));
            p += 8;
        } while (p < end);
        c0 = crc32c_shift(table, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = crc32c_shift(table, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * len;
        n -= 3 * len;
    }
    *pp = p;
    *np = n;
    return (uint32_t)c0;
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = crc32c_sse42_three(crc, &p, &n, CRC32C_LONG, crc32c_long_shift);
    crc = crc32c_sse42_three(crc, &p, &n, CRC32C_SHORT, crc32c_short_shift);
    return crc32c_sse42_chain(crc, p, n);
}
#endif

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
    if (crc32c_hw) {
        crc32c_shift_table(crc32c_long_shift, CRC32C_LONG);
        crc32c_shift_table(crc32c_short_shift, CRC32C_SHORT);
    }
#endif
}

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
