/* pet-field.c - arithmetic in Z_p, p = 2^31 - 1 (PET §5.1, Theorem 2), beyond the inline
 * operations of pet.h: powers and inverses, the images of integers and doubles, and variable keys
 * for the counter-based random inputs.
 *
 * Invariant: every residue is a uint32_t in [0, p). p is a Mersenne prime, so 2^31 = 1 and a
 * 64-bit product folds to a residue with shifts and masks (pet_fold); 2 is invertible with
 * 2^-1 = 2^30, which maps every dyadic rational (every finite double) into the field exactly. */
#include "pet.h"

#include <math.h>
#include <string.h>

uint32_t pet_pow(uint32_t a, uint64_t e) {
    uint32_t r = 1, b = a >= PET_P ? a - PET_P : a;
    while (e) {
        if (e & 1) r = pet_mul(r, b);
        b = pet_mul(b, b);
        e >>= 1;
    }
    return r;
}

uint32_t pet_inv(uint32_t a) {
    IR_ASSERT(a % PET_P != 0);
    return pet_pow(a, PET_P - 2);
}

uint32_t pet_from_int(int64_t v) {
    if (v >= 0) return pet_fold((uint64_t)v);
    /* -v may not fit for INT64_MIN: fold the magnitude as an unsigned value */
    uint64_t m = (uint64_t)(-(v + 1)) + 1;
    return pet_neg(pet_fold(m));
}

int64_t pet_to_signed(uint32_t r) {
    return r > PET_P / 2 ? (int64_t)r - (int64_t)PET_P : (int64_t)r;
}

bool pet_from_double(double x, uint32_t *r) {
    if (!isfinite(x)) return false;
    if (x == 0) {
        *r = 0;
        return true;
    }
    /* x = f * 2^e with 0.5 <= |f| < 1; f * 2^53 is an integer for every double */
    int e;
    double f = frexp(x, &e);
    int64_t m = (int64_t)ldexp(f, 53);
    e -= 53;
    /* 2^e mod p = 2^(e mod 31), since 2^31 = 1; e mod 31 taken non-negative */
    int sh = ((e % 31) + 31) % 31;
    *r = pet_mul(pet_from_int(m), (uint32_t)1 << sh);
    return true;
}

uint64_t pet_var_key(const char *name) {
    return ir_hash_bytes(name, strlen(name), 0x7065742d6b657973ULL);
}
