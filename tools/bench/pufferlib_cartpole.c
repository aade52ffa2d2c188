/* Steps PufferLib's C CartPole (its cartpole.h, fetched by
 * tools/bench-pufferlib-cartpole, never committed) the way `pronghorn bench
 * env` steps ours: K envs per thread, random actions drawn before timing,
 * 0.2 s warm-up, then env steps per second over a fixed time.
 * Usage: pufferlib_cartpole K THREADS SECONDS */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cartpole.h"

enum { ROWS = 64 };

typedef struct {
  int k;
  int64_t steps;
} Worker;

static atomic_int go, stop;

static void* run(void* arg) {
  Worker* w = arg;
  int k = w->k;
  Cartpole* envs = calloc(k, sizeof(Cartpole));
  float* obs = calloc((size_t)k * 4, sizeof(float));
  float* actions = calloc(k, sizeof(float));
  float* rewards = calloc(k, sizeof(float));
  unsigned char* terminals = calloc(k, 1);
  unsigned char* truncations = calloc(k, 1);
  float* action_rows = malloc(sizeof(float) * k * ROWS);
  unsigned seed = 1;
  for (int i = 0; i < k * ROWS; ++i) action_rows[i] = (float)(rand_r(&seed) % 2);
  for (int i = 0; i < k; ++i) {
    envs[i].observations = obs + 4 * i;
    envs[i].actions = actions + i;
    envs[i].rewards = rewards + i;
    envs[i].terminals = terminals + i;
    envs[i].truncations = truncations + i;
    init(&envs[i]);
    c_reset(&envs[i]);
  }
  int64_t steps = 0;
  for (int64_t row = 0; !atomic_load_explicit(&stop, memory_order_relaxed); ++row) {
    /* The policy writes a new action for every env, as a trainer would. */
    const float* next = action_rows + (size_t)(row % ROWS) * k;
    for (int i = 0; i < k; ++i) actions[i] = next[i];
    for (int i = 0; i < k; ++i) c_step(&envs[i]);
    if (atomic_load_explicit(&go, memory_order_relaxed)) steps += k;
  }
  w->steps = steps;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s K THREADS SECONDS\n", argv[0]);
    return 2;
  }
  int k = atoi(argv[1]), threads = atoi(argv[2]);
  double seconds = atof(argv[3]);
  pthread_t ids[256];
  Worker workers[256];
  for (int t = 0; t < threads; ++t) {
    workers[t] = (Worker){k, 0};
    pthread_create(&ids[t], NULL, run, &workers[t]);
  }
  usleep(200000);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  atomic_store(&go, 1);
  usleep((useconds_t)(seconds * 1e6));
  atomic_store(&stop, 1);
  clock_gettime(CLOCK_MONOTONIC, &b);
  int64_t total = 0;
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL), total += workers[t].steps;
  double elapsed = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  printf("pufferlib cartpole K=%d threads=%d: %.1f M env steps/s (%.2f ns/step/thread, %.1f s)\n",
         k, threads, total / elapsed / 1e6, 1e9 * threads * elapsed / total, elapsed);
  return 0;
}
