// SPDX-License-Identifier: GPL-2.0
/*
 * spin-fit: fit the P2P router's DMA cost model to measured latencies.
 *
 * Usage: spin-fit [-p MAX-POINTS] < SAMPLES
 *
 * SAMPLES has one measurement per line, "BYTES NS": how long a read of
 * BYTES took, in nanoseconds (several lines per size are fine).  The
 * router models the DMA time of an n-byte request as a piecewise-linear
 * function through 2 to 8 points "bytes:ns" (flat below the first,
 * extrapolated along the last segment beyond the last; see
 * /sys/kernel/mm/p2p_router/p2p_cost_ns).  spin-fit chooses the points:
 *
 *  - the knees are measured sizes; the smallest and the largest are
 *    always points, and every subset of the sizes in between with at
 *    most MAX-POINTS (default 8) points in all is tried;
 *  - for a given set of knees, the times at the knees come from a
 *    weighted least-squares fit of the interpolated model to every
 *    sample, weighted by 1/ns^2 so that the error that counts is the
 *    relative one (a 4 KiB read and an 8 MiB read matter alike);
 *  - fits that are not non-decreasing (the kernel refuses them) or
 *    that go negative are dropped;
 *  - among the rest, the one with the lowest Bayesian information
 *    criterion, n * ln(RSS / n) + k * ln(n), wins: more knees only when
 *    they buy a clearly better fit.
 *
 * Prints the model on the first line, ready for p2p_cost_ns, then a
 * table, each line starting with '#': size, mean measured time, fitted
 * time and the relative error.  Exits 1 if no model fits (fewer than
 * two sizes, or no monotone fit).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SAMPLES	4096
#define MAX_SIZES	20
#define MAX_POINTS	8

static double sx[MAX_SAMPLES], sy[MAX_SAMPLES];
static int nsamples;
static double size[MAX_SIZES];
static int nsizes;

/* The model through knots k[0..m-1] (values v) at x. */
static double model(const double *k, const double *v, int m, double x)
{
	int j;

	if (x <= k[0])
		return v[0];
	for (j = 1; j < m - 1; j++)
		if (x <= k[j])
			break;
	return v[j - 1] + (x - k[j - 1]) * (v[j] - v[j - 1]) / (k[j] - k[j - 1]);
}

/* Solve the m x m system a * v = b in place; 0 if singular. */
static int solve(double a[MAX_POINTS][MAX_POINTS], double *b, double *v, int m)
{
	int i, j, r, p;

	for (i = 0; i < m; i++) {
		p = i;
		for (r = i + 1; r < m; r++)
			if (fabs(a[r][i]) > fabs(a[p][i]))
				p = r;
		if (fabs(a[p][i]) < 1e-300)
			return 0;
		if (p != i) {
			double t;

			for (j = 0; j < m; j++) {
				t = a[i][j];
				a[i][j] = a[p][j];
				a[p][j] = t;
			}
			t = b[i];
			b[i] = b[p];
			b[p] = t;
		}
		for (r = i + 1; r < m; r++) {
			double f = a[r][i] / a[i][i];

			for (j = i; j < m; j++)
				a[r][j] -= f * a[i][j];
			b[r] -= f * b[i];
		}
	}
	for (i = m - 1; i >= 0; i--) {
		double s = b[i];

		for (j = i + 1; j < m; j++)
			s -= a[i][j] * v[j];
		v[i] = s / a[i][i];
	}
	return 1;
}

/*
 * Weighted least squares for the knot values of knots k[0..m-1]; returns
 * the relative residual sum of squares, or -1 if the fit is unusable.
 */
static double fit(const double *k, int m, double *v)
{
	double a[MAX_POINTS][MAX_POINTS] = { { 0 } }, b[MAX_POINTS] = { 0 };
	double rss = 0;
	int i, j;

	for (i = 0; i < nsamples; i++) {
		double w = 1 / (sy[i] * sy[i]), t = 0;
		int lo = 0;

		/* Each sample is a blend of the two knots around it. */
		for (j = 1; j < m - 1 && sx[i] > k[j]; j++)
			;
		lo = j - 1;
		t = (sx[i] - k[lo]) / (k[lo + 1] - k[lo]);
		if (t < 0)
			t = 0;
		a[lo][lo] += w * (1 - t) * (1 - t);
		a[lo][lo + 1] += w * (1 - t) * t;
		a[lo + 1][lo] += w * (1 - t) * t;
		a[lo + 1][lo + 1] += w * t * t;
		b[lo] += w * (1 - t) * sy[i];
		b[lo + 1] += w * t * sy[i];
	}
	if (!solve(a, b, v, m))
		return -1;
	for (j = 0; j < m; j++)
		if (v[j] < 0 || (j && v[j] < v[j - 1]))
			return -1;
	for (i = 0; i < nsamples; i++) {
		double e = (model(k, v, m, sx[i]) - sy[i]) / sy[i];

		rss += e * e;
	}
	return rss;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	double best_k[MAX_POINTS], best_v[MAX_POINTS], best = INFINITY;
	int maxp = MAX_POINTS, best_m = 0, opt, i, j;
	unsigned long mask;
	double x, y;

	while ((opt = getopt(argc, argv, "hp:")) != -1) {
		switch (opt) {
		case 'p':
			maxp = atoi(optarg);
			if (maxp >= 2 && maxp <= MAX_POINTS)
				break;
			/* fall through */
		default:
			fprintf(stderr, "usage: %s [-p 2..%d] < 'bytes ns' lines\n",
				argv[0], MAX_POINTS);
			return opt == 'h' ? 0 : 2;
		}
	}

	while (scanf("%lf %lf", &x, &y) == 2) {
		if (x < 1 || y <= 0 || nsamples == MAX_SAMPLES) {
			fprintf(stderr, "spin-fit: bad or too many samples\n");
			return 2;
		}
		sx[nsamples] = x;
		sy[nsamples++] = y;
		for (j = 0; j < nsizes && size[j] != x; j++)
			;
		if (j == nsizes) {
			if (nsizes == MAX_SIZES) {
				fprintf(stderr, "spin-fit: more than %d sizes\n",
					MAX_SIZES);
				return 2;
			}
			size[nsizes++] = x;
		}
	}
	if (nsizes < 2) {
		fprintf(stderr, "spin-fit: need samples of at least two sizes\n");
		return 1;
	}
	qsort(size, nsizes, sizeof(size[0]), cmp);

	/* Every subset of the inner sizes, as a bit mask. */
	for (mask = 0; mask < 1UL << (nsizes - 2); mask++) {
		double k[MAX_POINTS], v[MAX_POINTS], rss, bic;
		int m = 0;

		if (__builtin_popcountl(mask) + 2 > maxp)
			continue;
		k[m++] = size[0];
		for (j = 1; j < nsizes - 1; j++)
			if (mask & (1UL << (j - 1)))
				k[m++] = size[j];
		k[m++] = size[nsizes - 1];
		rss = fit(k, m, v);
		if (rss < 0)
			continue;
		bic = nsamples * log(rss / nsamples + 1e-12) + m * log(nsamples);
		if (bic < best) {
			best = bic;
			best_m = m;
			memcpy(best_k, k, sizeof(k));
			memcpy(best_v, v, sizeof(v));
		}
	}
	if (!best_m) {
		fprintf(stderr, "spin-fit: no non-decreasing fit\n");
		return 1;
	}

	for (j = 0; j < best_m; j++)
		printf("%s%.0f:%.0f", j ? " " : "", best_k[j], ceil(best_v[j]));
	printf("\n# %10s %12s %12s %7s\n", "bytes", "measured_ns", "fitted_ns",
	       "error");
	for (j = 0; j < nsizes; j++) {
		double sum = 0, f = model(best_k, best_v, best_m, size[j]);
		int n = 0;

		for (i = 0; i < nsamples; i++)
			if (sx[i] == size[j]) {
				sum += sy[i];
				n++;
			}
		printf("# %10.0f %12.0f %12.0f %+6.1f%%\n", size[j], sum / n, f,
		       100 * (f - sum / n) / (sum / n));
	}
	return 0;
}
