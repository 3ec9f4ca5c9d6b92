// The two ceilings of a CPU, measured: FP32 FMA throughput and copy bandwidth. They are the
// sources of the figures in validation/profiles/cpu-*.json (validation/microbench/README.md).
//
//   gcc -O2 -mavx2 -mfma -fopenmp -o cpu_rates cpu_rates.c && ./cpu_rates
//
// FMA: each thread runs chains of independent 256-bit (8 x fp32) fused multiply-adds on
// registers, enough chains to cover the FMA latency on two pipes; 2 FLOPs per lane per FMA.
// Copy: b[i] = a[i] over two float arrays of a given size per thread (256-bit loads, ordinary
// stores), counting bytes read plus bytes written (as STREAM's "Copy" counts them), for working
// sets that fit in L2, in L3, and that do not fit in any cache. Each figure is the best of five
// repetitions. Prints JSON. Run it on a quiet machine.
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { kChains = 12 };

// FP32 FLOP/s of `threads` threads, each running `iters` rounds of kChains FMAs. The chains are
// named variables so that they stay in registers (an array of them ends up on the stack, one load
// and one store per FMA, at gcc -O2).
static double fma_rate(int threads, long iters) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    float sink = 0;
    const double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      const __m256 a = _mm256_set1_ps(1.0000001f);
      const __m256 b = _mm256_set1_ps(0.9999999f);
      const float seed = (float)omp_get_thread_num();
      __m256 c0 = _mm256_set1_ps(seed + 0), c1 = _mm256_set1_ps(seed + 1);
      __m256 c2 = _mm256_set1_ps(seed + 2), c3 = _mm256_set1_ps(seed + 3);
      __m256 c4 = _mm256_set1_ps(seed + 4), c5 = _mm256_set1_ps(seed + 5);
      __m256 c6 = _mm256_set1_ps(seed + 6), c7 = _mm256_set1_ps(seed + 7);
      __m256 c8 = _mm256_set1_ps(seed + 8), c9 = _mm256_set1_ps(seed + 9);
      __m256 c10 = _mm256_set1_ps(seed + 10), c11 = _mm256_set1_ps(seed + 11);
      for (long i = 0; i < iters; ++i) {
        c0 = _mm256_fmadd_ps(c0, a, b);
        c1 = _mm256_fmadd_ps(c1, a, b);
        c2 = _mm256_fmadd_ps(c2, a, b);
        c3 = _mm256_fmadd_ps(c3, a, b);
        c4 = _mm256_fmadd_ps(c4, a, b);
        c5 = _mm256_fmadd_ps(c5, a, b);
        c6 = _mm256_fmadd_ps(c6, a, b);
        c7 = _mm256_fmadd_ps(c7, a, b);
        c8 = _mm256_fmadd_ps(c8, a, b);
        c9 = _mm256_fmadd_ps(c9, a, b);
        c10 = _mm256_fmadd_ps(c10, a, b);
        c11 = _mm256_fmadd_ps(c11, a, b);
      }
      __m256 s0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                                _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
      s0 = _mm256_add_ps(s0, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
      float out[8];
      _mm256_storeu_ps(out, s0);
      sink += out[0];
    }
    const double dt = now() - t0;
    const double flops = (double)threads * (double)iters * kChains * 8.0 * 2.0;
    if (flops / dt > best) {
      best = flops / dt;
    }
    if (sink == 12345.0f) {  // keeps the work alive
      printf("#");
    }
  }
  return best;
}

// Copy bytes/s (read + written) of `threads` threads over `bytes` per array per thread.
static double copy_rate(int threads, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  // Enough passes that each measurement moves at least 4 GB.
  const int passes = (int)(4e9 / (2.0 * (double)bytes * threads)) + 1;
  double best = 0;
#pragma omp parallel num_threads(threads)
  {
    float* a = aligned_alloc(64, n * sizeof(float));
    float* b = aligned_alloc(64, n * sizeof(float));
    for (size_t i = 0; i < n; ++i) {
      a[i] = (float)i;
      b[i] = 0;
    }
    for (int rep = 0; rep < 5; ++rep) {
#pragma omp barrier
      const double t0 = now();
      for (int p = 0; p < passes; ++p) {
        // 256-bit loads and ordinary (write-allocate) stores, as vectorized element-wise
        // kernels do; n is a multiple of 8.
        for (size_t i = 0; i < n; i += 8) {
          _mm256_store_ps(b + i, _mm256_load_ps(a + i));
        }
        __asm__ volatile("" : : "r"(b) : "memory");
      }
#pragma omp barrier
      const double dt = now() - t0;
#pragma omp master
      {
        const double rate = 2.0 * (double)bytes * passes * threads / dt;
        if (rate > best) {
          best = rate;
        }
      }
    }
    free(a);
    free(b);
  }
  return best;
}

int main(void) {
  const int cores = omp_get_num_procs();
  printf("{\n  \"cores\": %d,\n", cores);
  for (int t = 1; t <= cores; t *= 2) {
    printf("  \"fma_fp32_flops_%dthread\": %.4g,\n", t, fma_rate(t, 100000000L / t));
  }
  const size_t sizes[] = {256u << 10, 4u << 20, 256u << 20};
  const char* names[] = {"256KiB", "4MiB", "256MiB"};
  for (int s = 0; s < 3; ++s) {
    for (int t = 1; t <= cores; t *= 2) {
      const int last = s == 2 && t * 2 > cores;
      printf("  \"copy_bytes_per_s_%s_%dthread\": %.4g%s\n", names[s], t, copy_rate(t, sizes[s]),
             last ? "" : ",");
    }
  }
  printf("}\n");
  return 0;
}
