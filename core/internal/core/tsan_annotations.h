#pragma once
// Happens-before annotations for ThreadSanitizer at hand-offs through TBB.
//
// Debian's TBB is not instrumented, so ThreadSanitizer cannot see the synchronisation inside
// tbb::task_arena and tbb::parallel_for: a buffer the driver thread allocated and TBB workers then
// filled would look like a race. At each hand-off through TBB the giving side calls
// DCPP_HAPPENS_BEFORE(addr) and the receiving side DCPP_HAPPENS_AFTER(addr) on the same address,
// telling ThreadSanitizer what TBB guarantees. Nothing else is suppressed: a real race outside
// these hand-offs is still reported. Without ThreadSanitizer both are no-ops.

#if defined(__SANITIZE_THREAD__)
#define DCPP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DCPP_TSAN 1
#endif
#endif

#ifdef DCPP_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define DCPP_HAPPENS_BEFORE(addr) __tsan_release(const_cast<void*>(static_cast<const void*>(addr)))
#define DCPP_HAPPENS_AFTER(addr) __tsan_acquire(const_cast<void*>(static_cast<const void*>(addr)))
#else
#define DCPP_HAPPENS_BEFORE(addr) static_cast<void>(addr)
#define DCPP_HAPPENS_AFTER(addr) static_cast<void>(addr)
#endif
