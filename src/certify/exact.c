/* The exact rank of a double matrix (certify.h: proven rank deficiency).
 *
 * A double is an integer times a power of two, so scaling each row of M by
 * the power of two that makes its smallest entry an integer gives an integer
 * matrix A of the same rank, exactly.  The rank is then pinned from both
 * sides, each side checked independently of how its candidate was found:
 *   lower:  rank(A) >= rank(A mod p) for every prime p (a nonzero minor mod
 *           p is nonzero over Z), by Gaussian elimination mod a 62-bit prime;
 *   upper:  rank(A) <= m − k when k vectors Y (m × k, integer) have
 *           Aᵀ Y = 0, checked by an exact integer product, and are
 *           independent, checked as rank(Y mod p) = k (the lower bound again).
 * FLINT's nullspace (multimodular reduced row echelon form) supplies Y; when
 * both bounds meet, the rank and the cokernel dimension m − rank are proven.
 * A prime that divides a minor can make the bounds miss: another is tried. */
#include "exact.h"
#include <flint/fmpz_mat.h>
#include <flint/nmod_mat.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

/* A := M with row i scaled by 2^(−e_i), e_i the exponent of the lowest set
 * bit over row i's nonzero entries: integers, and the same rank. */
/* x = q·2^z with q odd (x != 0): |q| < 2^53. */
static int64_t odd_part(double x, int *z)
{
    int e;
    int64_t q = (int64_t)ldexp(frexp(x, &e), 53); /* x = q·2^(e−53), exact */
    int t = __builtin_ctzll((uint64_t)(q < 0 ? -q : q));
    *z = e - 53 + t;
    return q / ((int64_t)1 << t); /* exact: t trailing zero bits */
}

/* A := M with row i scaled by 2^(−low_i), low_i the least z over the row's
 * odd parts q·2^z: integers, and the same rank.  Returns 0 if an entry does
 * not read back exactly (a bug here would make every later check vacuous). */
static int integer_rows(fmpz_mat_t A, const double *M, size_t m, size_t n)
{
    for (size_t i = 0; i < m; i++) {
        int low = INT_MAX, z;
        for (size_t k = 0; k < n; k++)
            if (M[i + k * m] != 0 && (odd_part(M[i + k * m], &z), z < low)) low = z;
        for (size_t k = 0; k < n; k++) {
            double x = M[i + k * m];
            fmpz *a = fmpz_mat_entry(A, (slong)i, (slong)k);
            fmpz_zero(a);
            if (x == 0) continue;
            fmpz_set_si(a, (slong)odd_part(x, &z));
            fmpz_mul_2exp(a, a, (ulong)(z - low)); /* z >= low */
            slong e;
            double d = fmpz_get_d_2exp(&e, a); /* a = d·2^e, exact: a has at most 53 significant bits */
            if (ldexp(d, (int)e + low) != x) return 0;
        }
    }
    return 1;
}

static slong rank_mod(const fmpz_mat_t A, mp_limb_t p)
{
    nmod_mat_t B;
    nmod_mat_init(B, fmpz_mat_nrows(A), fmpz_mat_ncols(A), p);
    fmpz_mat_get_nmod_mat(B, A);
    slong r = nmod_mat_rank(B);
    nmod_mat_clear(B);
    return r;
}

int vijp_exact_cokernel(const double *M, size_t m, size_t n, size_t *cokernel_dim)
{
    fmpz_mat_t A, At, Y, Z;
    fmpz_mat_init(A, (slong)m, (slong)n);
    if (!integer_rows(A, M, m, n)) {
        fmpz_mat_clear(A);
        return 0;
    }
    fmpz_mat_init(At, (slong)n, (slong)m);
    fmpz_mat_transpose(At, A);
    fmpz_mat_init(Y, (slong)m, (slong)m);
    slong k = fmpz_mat_nullspace(Y, At); /* the first k columns: a candidate basis of the cokernel */
    fmpz_mat_t Yk;
    fmpz_mat_window_init(Yk, Y, 0, 0, (slong)m, k);
    int proven = 0;
    fmpz_mat_init(Z, (slong)n, k);
    fmpz_mat_mul(Z, At, Yk);
    if (fmpz_mat_is_zero(Z)) {
        mp_limb_t p = UWORD(1) << 62;
        for (int attempt = 0; attempt < 4 && !proven; attempt++) {
            p = n_nextprime(p, 1);
            proven = rank_mod(A, p) == (slong)m - k && (k == 0 || rank_mod(Yk, p) == k);
        }
    }
    fmpz_mat_window_clear(Yk);
    fmpz_mat_clear(Z), fmpz_mat_clear(Y), fmpz_mat_clear(At), fmpz_mat_clear(A);
    if (proven) *cokernel_dim = (size_t)k;
    return proven;
}
