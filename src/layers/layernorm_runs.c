/* layernorm with arguments, layernorm[:N][:eps=E][:affine]: PyTorch's
 * LayerNorm(N, eps=E, elementwise_affine) on the last axis of a token-major
 * sequence.  Each run of N units (default: the whole sample) is normalised
 * by its mean μ and biased variance σ² = mean((x − μ)²):
 *   ŷ = (x − μ)/s,  s = √(σ² + ε),  y = w ⊙ ŷ + b (affine; else y = ŷ),
 * θ = weight[N], bias[N] (the state_dict's order), shared by every run.
 *
 * The Jacobian of one run (J is block diagonal over the runs), D = diag(w),
 * C = I − 11ᵀ/N:
 *   ∂s/∂x = (x − μ)/(N s) = ŷ/N,  so  J = D·J0,  J0 = (C − ŷŷᵀ/N)/s,
 * J0 symmetric, ŷ ⊥ 1.  J0·1 = 0 always, and J0·ŷ = ŷ(1 − ‖ŷ‖²/N)/s with
 * ‖ŷ‖² = Nσ²/s², i.e. J0·ŷ = ŷ·ε/s³:
 *   ε = 0: coker J0 = span{1, ŷ} (plain layernorm's), 2 per run; a constant
 *          run (σ = 0) is outside the domain, as for plain layernorm;
 *   ε > 0: coker J0 = span{1} alone, 1 per run, at every x (a constant run
 *          included: ŷ = 0, J0 = C/s).  On 1^⊥, J0 = (I − ŷŷᵀ/N)/s, whose
 *          inverse is s(I + ŷŷᵀ/(N − ‖ŷ‖²)) and N − ‖ŷ‖² = Nε/s² (formed so,
 *          not by the cancelling subtraction): J0⁺g = s(Cg + ŷ·(ŷᵀCg)·s²/(Nε)).
 *          Its condition number grows like σ²/ε: a small ε leaves the
 *          direction ŷ nearly in the cokernel.
 * With affine weights, coker J = {v : Dv ∈ coker J0} = D⁻¹·coker J0 =
 * span{1/w} (ε > 0) or span{1/w, ŷ/w} (ε = 0), all w_i ≠ 0 (a zero weight
 * adds e_i to the cokernel beyond what the fragment stores: the vijp and
 * cokernel refuse it).  Q is the Gram–Schmidt orthonormal basis of those
 * vectors; the vijp is g_y = (I − QQᵀ)·D⁻¹·J0⁺g_x + Q c, since every
 * solution of g_yᵀJ = g_xᵀ is D⁻¹(J0⁺g_x + coker J0) and c = Qᵀg_y fixes
 * the cokernel part. */
#include "layernorm_runs.h"
#include "args.h"
#include "decimal.h"
#include "scratch.h"
#include "state.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS(L) ((const vo_layernorm_args *)(L)->state)

/* How many weights (and biases) θ holds: one per unit of a run (layernorm),
 * one per channel (groupnorm). */
static size_t n_weights(const vijp_layer *L) { return ARGS(L)->channels ? ARGS(L)->channels : ARGS(L)->run; }

/* The θ index of the weight of unit i of run r (r counts runs over the batch). */
static size_t param_index(const vijp_layer *L, size_t r, size_t i)
{
    if (!ARGS(L)->channels) return i;
    return ((r * ARGS(L)->run + i) % L->in) / (L->in / ARGS(L)->channels);
}


/* ---- the item ---- */

static int bad_item(vijp_error *err, const char *arg, const char *why)
{
    return vijp_fail(err, VIJP_EINVAL, "layernorm[:N][:eps=E][:affine] (N >= 2 units per run, E >= 0 finite): %s in "
                     "'layernorm:%s'", why, arg);
}

int vijp_lnr_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vo_layernorm_args a = {0};
    const char *p = arg;
    for (int first = 1; *p || first; first = 0) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) return bad_item(err, arg, "an empty argument");
        if (first && *p >= '0' && *p <= '9') {
            size_t n = 0;
            const char *q = p;
            if (vijp_arg_count(&q, &n) || q != p + len) return bad_item(err, arg, "a run length that is not a count");
            if (n < 2) return bad_item(err, arg, "a run of fewer than 2 units");
            a.run = n, a.run_given = 1;
        } else if (len > 4 && !strncmp(p, "eps=", 4) && !a.eps_given && !a.affine) {
            char *e = NULL, num[64];
            if (len - 4 >= sizeof num) return bad_item(err, arg, "an eps that is not a number");
            memcpy(num, p + 4, len - 4), num[len - 4] = 0;
            a.eps = strtod(num, &e);
            if (e == num || *e || !isfinite(a.eps) || a.eps < 0) return bad_item(err, arg, "an eps that is not a finite number >= 0");
            a.eps_given = 1;
        } else if (len == 6 && !strncmp(p, "affine", 6) && !a.affine) {
            a.affine = 1;
        } else {
            return bad_item(err, arg, "an unknown, repeated or misplaced argument (the order is N, eps=, affine)");
        }
        p = end ? end + 1 : p + len;
        if (end && !*p) return bad_item(err, arg, "an empty argument");
    }
    if (!a.run_given) a.run = in_width;
    if (in_width < 2 || in_width % a.run)
        return vijp_fail(err, VIJP_EDIM, "layernorm:%s normalizes runs of %zu units: the input width %zu %s", arg, a.run,
                         in_width, in_width ? "is not a multiple of it (>= 2)" : "is unknown: give --width");
    vijp_state_new(L, sizeof a);
    *(vo_layernorm_args *)L->state = a;
    L->in = L->out = in_width;
    return 0;
}

/* groupnorm:GxC[:eps=E][:affine]: PyTorch's GroupNorm(G, C, eps,
 * affine) on a channel-major sample; a group of C/G channels is a run of
 * (C/G)·width/C units, θ = weight[C], bias[C], ε defaulting to PyTorch's 1e-5. */
int vijp_gn_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vo_layernorm_args a = {.eps = 1e-5};
    const char *p = arg;
    int bad = !p || vijp_arg_count(&p, &a.groups) || *p != 'x';
    if (!bad) p++, bad = vijp_arg_count(&p, &a.channels);
    if (bad || a.groups == 0 || a.channels == 0 || a.channels % a.groups)
        return vijp_fail(err, VIJP_EINVAL, "groupnorm needs groupnorm:GxC[:eps=E][:affine] (G groups dividing C "
                         "channels, e.g. groupnorm:2x4), got 'groupnorm%s%s'", arg ? ":" : "", arg ? arg : "");
    if (!strncmp(p, ":eps=", 5)) {
        char *end = NULL;
        a.eps = strtod(p + 5, &end);
        if (end == p + 5 || (*end && *end != ':') || !isfinite(a.eps) || a.eps < 0)
            return vijp_fail(err, VIJP_EINVAL, "groupnorm: eps must be a finite number >= 0, got 'groupnorm:%s'", arg);
        a.eps_given = 1, p = end;
    }
    if (!strcmp(p, ":affine")) a.affine = 1, p += 7;
    if (*p) return vijp_fail(err, VIJP_EINVAL, "groupnorm:GxC[:eps=E][:affine] (in this order): cannot read 'groupnorm:%s'", arg);
    if (in_width == 0 || in_width % a.channels)
        return vijp_fail(err, VIJP_EDIM, "groupnorm:%s: the input width %zu is not a multiple of %zu channels%s", arg,
                         in_width, a.channels, in_width ? "" : " (give --width)");
    a.run = in_width / a.groups;
    if (a.run < 2)
        return vijp_fail(err, VIJP_EDIM, "groupnorm:%s: a group of %zu unit at width %zu has nothing to normalise", arg,
                         a.run, in_width);
    vijp_state_new(L, sizeof a);
    *(vo_layernorm_args *)L->state = a;
    L->in = L->out = in_width;
    return 0;
}

int vijp_lnr_print(const vijp_layer *L, char *buf, size_t size)
{
    char run[48] = "", eps[48] = "", num[32];
    if (ARGS(L)->eps_given) vijp_shortest_decimal(ARGS(L)->eps, num, sizeof num), snprintf(eps, sizeof eps, ":eps=%s", num);
    if (ARGS(L)->channels)
        return snprintf(buf, size, "groupnorm:%zux%zu%s%s", ARGS(L)->groups, ARGS(L)->channels, eps,
                        ARGS(L)->affine ? ":affine" : "");
    if (ARGS(L)->run_given) snprintf(run, sizeof run, ":%zu", ARGS(L)->run);
    return snprintf(buf, size, "layernorm%s%s%s", run, eps, ARGS(L)->affine ? ":affine" : "");
}

size_t vijp_lnr_param_count(const vijp_layer *L) { return ARGS(L)->affine ? 2 * n_weights(L) : 0; }

/* kaiming-uniform (PyTorch's default for every layer) gives PyTorch's own
 * initial state, w = 1, b = 0.  The others draw w = ±U(0.5, 1.5) and
 * b = 0.1·N(0, 1), so that the battery sees weights other than 1 (the
 * cokernel D⁻¹·span{…} differs from plain layernorm's only then) and never
 * near 0 (where the layer loses rank). */
int vijp_lnr_init(const vijp_layer *L, vijp_init init, vijp_rng *rng, double *th)
{
    size_t N = n_weights(L);
    for (size_t k = 0; k < N && ARGS(L)->affine; k++) {
        if (init.kind == VIJP_INIT_KAIMING_UNIFORM) {
            th[k] = 1, th[N + k] = 0;
            continue;
        }
        double mag = 0.5 + vijp_rng_uniform(rng);
        th[k] = vijp_rng_uniform(rng) < 0.5 ? -mag : mag;
        th[N + k] = 0.1 * vijp_rng_normal(rng);
    }
    return 0;
}

size_t vijp_lnr_bias_index(const vijp_layer *L, size_t i)
{
    return ARGS(L)->affine ? n_weights(L) + param_index(L, i / ARGS(L)->run, i % ARGS(L)->run) : SIZE_MAX;
}

size_t vijp_lnr_cokernel_per_run(const vijp_layer *L) { return ARGS(L)->eps > 0 ? 1 : 2; }

/* ---- one run ---- */

static double weight(const vijp_layer *L, const double *th, size_t r, size_t i)
{
    return ARGS(L)->affine ? th[param_index(L, r, i)] : 1.0;
}

/* ŷ of one run into yh; returns s = √(σ² + ε) (0 for a constant run at ε = 0, ŷ = 0 then). */
static double normalize_run(const double *x, size_t N, double eps, double *yh)
{
    double mu = 0, s2 = 0;
    for (size_t i = 0; i < N; i++) mu += x[i];
    mu /= (double)N;
    for (size_t i = 0; i < N; i++) yh[i] = x[i] - mu, s2 += yh[i] * yh[i];
    double s = sqrt(s2 / (double)N + eps);
    for (size_t i = 0; i < N; i++) yh[i] = s > 0 ? yh[i] / s : 0.0;
    return s;
}

/* v = (C − ŷŷᵀ/N) u = u − mean(u) − ŷ·mean(ŷ ⊙ u). */
static void project(const double *yh, size_t N, const double *u, double *v)
{
    double m1 = 0, my = 0;
    for (size_t i = 0; i < N; i++) m1 += u[i], my += yh[i] * u[i];
    m1 /= (double)N, my /= (double)N;
    for (size_t i = 0; i < N; i++) v[i] = u[i] - m1 - yh[i] * my;
}

/* Q (N × k, column-major) of one run: Gram–Schmidt on 1/w, then ŷ/w at ε = 0.
 * Returns 0, or VIJP_ESINGULAR where a weight is 0 (or ŷ is: a constant run at ε = 0). */
static int basis_run(const vijp_layer *L, const double *th, size_t r, const double *yh, size_t k, double *Q)
{
    size_t N = ARGS(L)->run;
    double n1 = 0, dot = 0, n2 = 0;
    for (size_t i = 0; i < N; i++) {
        double w = weight(L, th, r, i);
        if (w == 0) return VIJP_ESINGULAR;
        Q[i] = 1 / w, n1 += Q[i] * Q[i];
    }
    for (size_t i = 0; i < N; i++) Q[i] /= sqrt(n1);
    if (k == 1) return 0;
    for (size_t i = 0; i < N; i++) Q[N + i] = yh[i] / weight(L, th, r, i), dot += Q[i] * Q[N + i];
    for (size_t i = 0; i < N; i++) Q[N + i] -= dot * Q[i], n2 += Q[N + i] * Q[N + i];
    if (!(n2 > 0)) return VIJP_ESINGULAR;
    for (size_t i = 0; i < N; i++) Q[N + i] /= sqrt(n2);
    return 0;
}

/* ---- the operators, run by run ---- */

void vijp_lnr_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y)
{
    size_t N = ARGS(L)->run;
    for (size_t r = 0; r < L->in * B / N; r++) {
        normalize_run(X + r * N, N, ARGS(L)->eps, Y + r * N);
        if (ARGS(L)->affine)
            for (size_t i = 0; i < N; i++) {
                size_t q = param_index(L, r, i);
                Y[r * N + i] = th[q] * Y[r * N + i] + th[n_weights(L) + q];
            }
    }
}

void vijp_lnr_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V)
{
    size_t N = ARGS(L)->run;
    double *yh = vijp_scratch(N);
    for (size_t r = 0; r < L->in * B / N; r++) {
        double s = normalize_run(X + r * N, N, ARGS(L)->eps, yh);
        project(yh, N, U + r * N, V + r * N);
        for (size_t i = 0; i < N; i++) V[r * N + i] = s > 0 ? weight(L, th, r, i) * (V[r * N + i] / s) : 0.0;
    }
    free(yh);
}

/* Gx = J0 (w ⊙ Gy): J0 is symmetric. */
void vijp_lnr_vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx)
{
    size_t N = ARGS(L)->run;
    double *yh = vijp_scratch(2 * N), *h = yh + N;
    for (size_t r = 0; r < L->in * B / N; r++) {
        double s = normalize_run(X + r * N, N, ARGS(L)->eps, yh);
        for (size_t i = 0; i < N; i++) h[i] = weight(L, th, r, i) * Gy[r * N + i];
        project(yh, N, h, Gx + r * N);
        for (size_t i = 0; i < N; i++) Gx[r * N + i] = s > 0 ? Gx[r * N + i] / s : 0.0;
    }
    free(yh);
}

/* ∂/∂w_k = Σ over samples and runs of g_k ŷ_k, ∂/∂b_k = Σ g_k. */
void vijp_lnr_vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gt)
{
    (void)th;
    size_t N = ARGS(L)->run, W = n_weights(L);
    double *yh = vijp_scratch(N);
    memset(Gt, 0, 2 * W * sizeof *Gt);
    for (size_t r = 0; r < L->in * B / N; r++) {
        normalize_run(X + r * N, N, ARGS(L)->eps, yh);
        for (size_t i = 0; i < N; i++) {
            size_t q = param_index(L, r, i);
            Gt[q] += Gy[r * N + i] * yh[i], Gt[W + q] += Gy[r * N + i];
        }
    }
    free(yh);
}

void vijp_lnr_fragment(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *frag)
{
    size_t N = ARGS(L)->run, k = vijp_lnr_cokernel_per_run(L);
    double *yh = vijp_scratch(3 * N), *Q = yh + N;
    for (size_t r = 0; r < L->in * B / N; r++) {
        normalize_run(X + r * N, N, ARGS(L)->eps, yh);
        int bad = basis_run(L, th, r, yh, k, Q);
        for (size_t j = 0; j < k; j++) {
            double c = 0;
            for (size_t i = 0; i < N; i++) c += Q[j * N + i] * Gy[r * N + i];
            frag[r * k + j] = bad ? NAN : c; /* the vijp refuses such a run */
        }
    }
    free(yh);
}

int vijp_lnr_vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx,
                  const double *frag, double *Gy, vijp_error *err)
{
    size_t N = ARGS(L)->run, k = vijp_lnr_cokernel_per_run(L), runs = L->in * B / N;
    double eps = ARGS(L)->eps, *yh = vijp_scratch(4 * N), *Q = yh + N, *z = yh + 3 * N;
    int rc = 0;
    for (size_t r = 0; r < runs && !rc; r++) {
        double s = normalize_run(X + r * N, N, eps, yh);
        if (!(s > 0) || basis_run(L, th, r, yh, k, Q)) {
            rc = vijp_fail(err, VIJP_ESINGULAR, "layernorm vijp: run %zu of sample %zu %s: the cokernel is larger than "
                           "the stored fragment", r % (L->in / N), r / (L->in / N),
                           s > 0 ? "meets a zero weight" : "is constant (sigma = 0, eps = 0)");
            break;
        }
        if (eps > 0) { /* J0⁺g = s(Cg + ŷ·(ŷᵀCg)·s²/(Nε)) */
            double m1 = 0, t = 0;
            for (size_t i = 0; i < N; i++) m1 += Gx[r * N + i];
            m1 /= (double)N;
            for (size_t i = 0; i < N; i++) z[i] = Gx[r * N + i] - m1, t += yh[i] * z[i];
            t *= s * s / ((double)N * eps);
            for (size_t i = 0; i < N; i++) z[i] = s * (z[i] + yh[i] * t);
        } else { /* J0⁺g = s(C − ŷŷᵀ/N)g, the projection off span{1, ŷ} */
            project(yh, N, Gx + r * N, z);
            for (size_t i = 0; i < N; i++) z[i] *= s;
        }
        for (size_t i = 0; i < N; i++) z[i] /= weight(L, th, r, i);
        for (size_t j = 0; j < k; j++) { /* z −= Q(Qᵀz − c) */
            double d = 0;
            for (size_t i = 0; i < N; i++) d += Q[j * N + i] * z[i];
            d -= frag[r * k + j];
            for (size_t i = 0; i < N; i++) z[i] -= Q[j * N + i] * d;
        }
        memcpy(Gy + r * N, z, N * sizeof *z);
    }
    free(yh);
    return rc;
}

/* scale·w_i·(δ_ij + sign·(1 + ŷ_iŷ_j)/N)/s inside each run, 0 across runs:
 * J itself (sign −1, scale 1), or with every term's magnitude (majorant). */
static void run_blocks(const vijp_layer *L, const double *th, const double *x, int majorant, double *J)
{
    size_t n = L->in, N = ARGS(L)->run;
    double *yh = vijp_scratch(N);
    memset(J, 0, n * n * sizeof *J);
    for (size_t r = 0; r < n / N; r++) {
        double s = normalize_run(x + r * N, N, ARGS(L)->eps, yh);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) {
                double *e = &J[(r * N + i) + (r * N + j) * n], w = weight(L, th, r, i);
                if (majorant) *e = 1.01 * fabs(w) * ((i == j) + (1 + fabs(yh[i] * yh[j])) / (double)N) / s;
                else *e = s > 0 ? w * (((i == j) - (1 + yh[i] * yh[j]) / (double)N) / s) : 0.0;
            }
    }
    free(yh);
}

void vijp_lnr_jacobian(const vijp_layer *L, const double *th, const double *x, double *J) { run_blocks(L, th, x, 0, J); }

/* The terms J_ij = w_i(δ_ij − 1/N − ŷ_iŷ_j/N)/s is formed from:
 * |w_i|(δ_ij + 1/N + |ŷ_iŷ_j|/N)/s >= |J_ij| (they can cancel while their
 * rounding errors do not); 1% covers its own rounding. */
void vijp_lnr_jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M)
{
    run_blocks(L, th, x, 1, M);
}

int vijp_lnr_cokernel(const vijp_layer *L, const double *th, const double *x, double *Q, vijp_error *err)
{
    size_t n = L->in, N = ARGS(L)->run, k = vijp_lnr_cokernel_per_run(L), K = k * (n / N);
    double *yh = vijp_scratch(3 * N), *q = yh + N;
    memset(Q, 0, n * K * sizeof *Q);
    int rc = 0;
    for (size_t r = 0; r < n / N && !rc; r++) {
        normalize_run(x + r * N, N, ARGS(L)->eps, yh);
        if (basis_run(L, th, r, yh, k, q))
            rc = vijp_fail(err, VIJP_ESINGULAR, "layernorm cokernel: run %zu meets a zero weight or is constant", r);
        for (size_t j = 0; j < k && !rc; j++)
            for (size_t i = 0; i < N; i++) Q[(r * N + i) + (r * k + j) * n] = q[j * N + i];
    }
    free(yh);
    return rc;
}
