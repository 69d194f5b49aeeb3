/*
 * clock-shim: an LD_PRELOAD library that shifts what one process believes the time is, so a fault test can
 * jump a single Redis node's clock (DESIGN §7, F4/F5) without touching the machine's clock.
 *
 * Why not libfaketime: it does not work with Debian's redis-server build. This shim does the least that
 * Redis 7.0 needs. What Redis reads, checked on Debian's 7.0.15 (`nm -D`, `INFO server`):
 *   - key expiry, PTTL/TTL, SET .. PX: mstime()/ustime() -> gettimeofday()         (wall clock)
 *   - event loop timers (serverCron, active expiry): getMonotonicUs() ->
 *     clock_gettime(CLOCK_MONOTONIC) ("monotonic_clock:POSIX clock_gettime", not the TSC variant)
 *   - logs, LASTSAVE, INFO uptime: time() and gettimeofday()
 * So overriding clock_gettime, gettimeofday and time covers every clock Redis consults.
 *
 * Control: the environment variable FENCED_CLOCK_SHIM_FILE names a 32-byte file, mapped shared and read on
 * every call (no syscall), so the offset changes while the process runs:
 *   int64 realtime_offset_ns   added to CLOCK_REALTIME*, CLOCK_TAI, gettimeofday, time
 *   int64 monotonic_offset_ns  added to CLOCK_MONOTONIC*, CLOCK_BOOTTIME*
 *   int64 check                = realtime ^ monotonic ^ MAGIC; a reader that sees a torn write retries
 *   int64 reserved
 * (little-endian, native). CPU-time clocks (PROCESS/THREAD_CPUTIME) are never shifted: they are not time
 * of day and nothing about expiry depends on them. Without the variable, or with an unreadable file, the
 * shim adds nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SHIM_MAGIC 0x66656e636564636cLL /* "fencedcl" */
#define SHIM_FILE_BYTES 32

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime = 0;
static volatile const int64_t *control = 0;
/* 0 = not started, 1 = a thread is initialising, 2 = done (control may still be 0: no shifting). */
static int init_state = 0;
static int64_t last_realtime_ns = 0, last_monotonic_ns = 0;

static void shim_init(void) {
  int expected = 0;
  if (!__atomic_compare_exchange_n(&init_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  /* dlsym may allocate, and the allocator (jemalloc) may ask for the time: such a nested call finds
   * init_state == 1 and takes the raw syscall path below, so there is no recursion. */
  real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  const char *path = getenv("FENCED_CLOCK_SHIM_FILE");
  if (path && *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      void *map = mmap(0, SHIM_FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (map != MAP_FAILED) control = (volatile const int64_t *)map;
    }
  }
  __atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void shim_constructor(void) { shim_init(); }

static int raw_clock_gettime(clockid_t id, struct timespec *ts) {
  if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2 && real_clock_gettime)
    return real_clock_gettime(id, ts);
  return (int)syscall(SYS_clock_gettime, id, ts);
}

/* Reads both offsets; a torn read (the test runner writing at that instant) fails the check and is retried,
 * and after a few failures the last consistent pair is used. */
static void read_offsets(int64_t *realtime_ns, int64_t *monotonic_ns) {
  if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2) shim_init();
  if (!control) {
    *realtime_ns = 0;
    *monotonic_ns = 0;
    return;
  }
  for (int attempt = 0; attempt < 8; attempt++) {
    int64_t r = control[0], m = control[1], c = control[2];
    if ((r ^ m ^ SHIM_MAGIC) == c) {
      __atomic_store_n(&last_realtime_ns, r, __ATOMIC_RELAXED);
      __atomic_store_n(&last_monotonic_ns, m, __ATOMIC_RELAXED);
      *realtime_ns = r;
      *monotonic_ns = m;
      return;
    }
  }
  *realtime_ns = __atomic_load_n(&last_realtime_ns, __ATOMIC_RELAXED);
  *monotonic_ns = __atomic_load_n(&last_monotonic_ns, __ATOMIC_RELAXED);
}

static int64_t offset_for(clockid_t id) {
  int64_t realtime_ns, monotonic_ns;
  switch (id) {
  case CLOCK_REALTIME:
  case CLOCK_REALTIME_COARSE:
  case CLOCK_TAI:
#ifdef CLOCK_REALTIME_ALARM
  case CLOCK_REALTIME_ALARM:
#endif
    read_offsets(&realtime_ns, &monotonic_ns);
    return realtime_ns;
  case CLOCK_MONOTONIC:
  case CLOCK_MONOTONIC_COARSE:
  case CLOCK_MONOTONIC_RAW:
  case CLOCK_BOOTTIME:
#ifdef CLOCK_BOOTTIME_ALARM
  case CLOCK_BOOTTIME_ALARM:
#endif
    read_offsets(&realtime_ns, &monotonic_ns);
    return monotonic_ns;
  default:
    return 0;
  }
}

static void add_ns(struct timespec *ts, int64_t ns) {
  int64_t total = (int64_t)ts->tv_nsec + ns % 1000000000LL;
  int64_t sec = (int64_t)ts->tv_sec + ns / 1000000000LL;
  if (total >= 1000000000LL) {
    total -= 1000000000LL;
    sec += 1;
  } else if (total < 0) {
    total += 1000000000LL;
    sec -= 1;
  }
  ts->tv_sec = (time_t)sec;
  ts->tv_nsec = (long)total;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int rc = raw_clock_gettime(id, ts); /* a null ts fails here with EFAULT */
  if (rc == 0) {
    int64_t offset = offset_for(id);
    if (offset != 0) add_ns(ts, offset);
  }
  return rc;
}

/* glibc marks tv nonnull, yet callers may pass NULL to read only the zone; keep the check. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  if (tz) {
    struct timezone *zone = (struct timezone *)tz;
    zone->tz_minuteswest = 0;
    zone->tz_dsttime = 0;
  }
  if (!tv) return 0;
  struct timespec ts;
  int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc != 0) return rc;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
