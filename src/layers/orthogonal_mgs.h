/* The loops of orthogonal.c's modified Gram–Schmidt, included there twice:
 * once in portable C and once for AVX2 (ORTHO_ATTR, ORTHO_NAME set by the
 * includer).  They do the operations of the plain loops (a dot product in
 * four sums, lane l taking the rows i ≡ l mod 4 in ascending order and the
 * tail rows added to lane 0 after them, combined as (s0 + s1) + (s2 + s3);
 * then q −= d·p), in the same order for every column, so they give the
 * plain loops' bits (tests/t-orthogonal.c keeps those loops and compares).
 * What is faster is which operations run side by side: a column's next dot
 * product is summed while its update by the previous column streams past
 * (one pass over the rows instead of two), and two columns share each
 * pass, whose sums are independent and hide each other's addition
 * latency.  Not a header to include anywhere else. */

#ifndef ORTHO_MGS_LOADS
#define ORTHO_MGS_LOADS
#define MGS_LD(v, p) memcpy(&(v), (p), sizeof(v))
#define MGS_ST(p, v) memcpy((p), &(v), sizeof(v))
#endif

/* The four-sum dot product p·q over r rows, as the plain loop sums it. */
ORTHO_ATTR static double ORTHO_NAME(mgs_dot)(const double *p, const double *q, size_t r)
{
    ortho_vec acc = {0, 0, 0, 0}, pv, qv;
    size_t i = 0;
    for (; i + OV <= r; i += OV) MGS_LD(pv, p + i), MGS_LD(qv, q + i), acc += pv * qv;
    double s0 = acc[0];
    for (; i < r; i++) s0 += p[i] * q[i];
    return (s0 + acc[1]) + (acc[2] + acc[3]);
}

/* q −= d·p, and (next not NULL) *dn := next·q of the updated q, summed as
 * mgs_dot sums it: the update's and the next product's rows in one pass. */
ORTHO_ATTR static void ORTHO_NAME(mgs_step)(const double *p, double d, const double *next, double *q, size_t r,
                                             double *dn)
{
    ortho_vec dv = {d, d, d, d}, acc = {0, 0, 0, 0}, pv, qv, nv;
    size_t i = 0;
    if (!next) {
        for (; i + OV <= r; i += OV) MGS_LD(pv, p + i), MGS_LD(qv, q + i), qv -= dv * pv, MGS_ST(q + i, qv);
        for (; i < r; i++) q[i] -= d * p[i];
        return;
    }
    for (; i + OV <= r; i += OV) {
        MGS_LD(pv, p + i), MGS_LD(qv, q + i), MGS_LD(nv, next + i);
        qv -= dv * pv;
        MGS_ST(q + i, qv);
        acc += nv * qv;
    }
    double s0 = acc[0];
    for (; i < r; i++) q[i] -= d * p[i], s0 += next[i] * q[i];
    *dn = (s0 + acc[1]) + (acc[2] + acc[3]);
}

/* mgs_step for two columns a and b against the same p and next. */
ORTHO_ATTR static void ORTHO_NAME(mgs_step2)(const double *p, double da, double db, const double *next, double *a,
                                              double *b, size_t r, double *dna, double *dnb)
{
    if (!next) {
        ORTHO_NAME(mgs_step)(p, da, NULL, a, r, dna);
        ORTHO_NAME(mgs_step)(p, db, NULL, b, r, dnb);
        return;
    }
    ortho_vec av = {da, da, da, da}, bv = {db, db, db, db}, acc_a = {0, 0, 0, 0}, acc_b = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + OV <= r; i += OV) {
        ortho_vec pv, nv, x, y;
        MGS_LD(pv, p + i), MGS_LD(nv, next + i), MGS_LD(x, a + i), MGS_LD(y, b + i);
        x -= av * pv, y -= bv * pv;
        MGS_ST(a + i, x), MGS_ST(b + i, y);
        acc_a += nv * x, acc_b += nv * y;
    }
    double sa = acc_a[0], sb = acc_b[0];
    for (; i < r; i++) a[i] -= da * p[i], b[i] -= db * p[i], sa += next[i] * a[i], sb += next[i] * b[i];
    *dna = (sa + acc_a[1]) + (acc_a[2] + acc_a[3]);
    *dnb = (sb + acc_b[1]) + (acc_b[2] + acc_b[3]);
}

/* For k = k0 … k1−1 in order: d = p_k·q, q −= d·p_k (p_k column k of A,
 * r rows), for the column a and, when b is not NULL, the column b. */
ORTHO_ATTR static void ORTHO_NAME(mgs_sweep)(const double *A, size_t r, size_t k0, size_t k1, double *a, double *b)
{
    if (k0 >= k1) return;
    double da = ORTHO_NAME(mgs_dot)(A + k0 * r, a, r), db = b ? ORTHO_NAME(mgs_dot)(A + k0 * r, b, r) : 0;
    for (size_t k = k0; k < k1; k++) {
        const double *p = A + k * r, *next = k + 1 < k1 ? p + r : NULL;
        if (b) ORTHO_NAME(mgs_step2)(p, da, db, next, a, b, r, &da, &db);
        else ORTHO_NAME(mgs_step)(p, da, next, a, r, &da);
    }
}
