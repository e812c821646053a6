// ThreadSanitizer and C11 threads (linked only into the executables of a
// `thread`-sanitized build; see HARVEST_SANITIZE in CMakeLists.txt).
//
// glibc's C11 thread functions (thrd_create, mtx_*, cnd_*, call_once) call
// its pthread functions internally, past ThreadSanitizer's interceptors. A
// thread librdkafka starts with thrd_create is then unknown to the sanitizer,
// which crashes on that thread's first allocation, and librdkafka's locks are
// invisible to it. These definitions take precedence over glibc's for the
// shared libraries the executable loads, and forward to the pthread
// functions the sanitizer intercepts. They follow glibc's own mapping
// (mtx_t, cnd_t and once_flag are its pthread types in other clothes).
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cstdint>
#include <new>

namespace {

struct Start {
  thrd_start_t fn;
  void* arg;
};

void* trampoline(void* p) {
  const Start s = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  return reinterpret_cast<void*>(static_cast<intptr_t>(s.fn(s.arg)));
}

int code(int rc) {
  switch (rc) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case ETIMEDOUT:
      return thrd_timedout;
    case EBUSY:
      return thrd_busy;
    default:
      return thrd_error;
  }
}

pthread_mutex_t* native(mtx_t* m) {
  return reinterpret_cast<pthread_mutex_t*>(m);
}
pthread_cond_t* native(cnd_t* c) {
  return reinterpret_cast<pthread_cond_t*>(c);
}

}  // namespace

extern "C" {

int thrd_create(thrd_t* thr, thrd_start_t fn, void* arg) {
  auto* s = new (std::nothrow) Start{fn, arg};
  if (!s) return thrd_nomem;
  const int rc = pthread_create(thr, nullptr, trampoline, s);
  if (rc != 0) delete s;
  return code(rc);
}

int thrd_join(thrd_t thr, int* res) {
  void* r = nullptr;
  const int rc = pthread_join(thr, &r);
  if (rc == 0 && res) *res = static_cast<int>(reinterpret_cast<intptr_t>(r));
  return code(rc);
}

int thrd_detach(thrd_t thr) {
  return code(pthread_detach(thr));
}

int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  const int rc = pthread_mutex_init(native(m), &attr);
  pthread_mutexattr_destroy(&attr);
  return code(rc);
}
void mtx_destroy(mtx_t* m) {
  pthread_mutex_destroy(native(m));
}
int mtx_lock(mtx_t* m) {
  return code(pthread_mutex_lock(native(m)));
}
int mtx_trylock(mtx_t* m) {
  return code(pthread_mutex_trylock(native(m)));
}
int mtx_timedlock(mtx_t* __restrict m, const struct timespec* __restrict at) {
  return code(pthread_mutex_timedlock(native(m), at));
}
int mtx_unlock(mtx_t* m) {
  return code(pthread_mutex_unlock(native(m)));
}

int cnd_init(cnd_t* c) {
  return code(pthread_cond_init(native(c), nullptr));
}
void cnd_destroy(cnd_t* c) {
  pthread_cond_destroy(native(c));
}
int cnd_signal(cnd_t* c) {
  return code(pthread_cond_signal(native(c)));
}
int cnd_broadcast(cnd_t* c) {
  return code(pthread_cond_broadcast(native(c)));
}
int cnd_wait(cnd_t* c, mtx_t* m) {
  return code(pthread_cond_wait(native(c), native(m)));
}
int cnd_timedwait(cnd_t* __restrict c, mtx_t* __restrict m, const struct timespec* __restrict at) {
  return code(pthread_cond_timedwait(native(c), native(m), at));
}

void call_once(once_flag* flag, void (*fn)(void)) {
  pthread_once(reinterpret_cast<pthread_once_t*>(flag), fn);
}

}  // extern "C"
