#pragma once
// Lowering the priority of dcpp's background threads, so they yield the CPU to the training loop.

namespace dcpp::detail {

/// Raises the nice value of the calling thread (only this thread: Linux schedules threads, and
/// setpriority on a thread id changes that thread alone) to `nice` when it is lower. 0 or less
/// does nothing. Never throws; returns whether the thread now runs at `nice` or lower priority.
/// An unprivileged process cannot lower it back: use only on threads dcpp owns or borrows for good.
bool lower_current_thread_priority(int nice);

/// The nice value of the calling thread.
int current_thread_nice();

}  // namespace dcpp::detail
