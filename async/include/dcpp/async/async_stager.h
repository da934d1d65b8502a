#pragma once
// Staging: copying a state dict aside so that training may go on changing it while the copy is
// uploaded. DCP's `AsyncStager`.

#include <dcpp/async/future.h>
#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <cstdint>
#include <memory>

namespace dcpp {

/// Copies state dicts into staging buffers that it owns, allocates once and reuses: a stage() of a
/// state dict with the same tensors (same order, shapes and dtypes) as the previous one writes
/// into the same buffers; a changed structure reallocates them (dropping the old ones). Buffers
/// are CPU memory, pinned when the tensor is on CUDA (where libtorch has CUDA).
///
/// What is staged: every tensor and every shard of a ShardedTensor (copied; offsets kept), nested
/// dicts and lists (their structure copied), value leaves (copied), and Stateful objects, whose
/// `state_dict()` is called on the thread that calls stage(), before stage() returns.
///
/// Implementations: make_blocking_stager() (copies on the calling thread) and make_tbb_stager()
/// (copies on a TBB task arena; returns at once). The copy logic is the same.
class DCPP_API AsyncStager {
 public:
  virtual ~AsyncStager() = default;

  /// Starts staging `state_dict`. The returned future completes with the staged copy: the same
  /// tree with every tensor replaced by its staging buffer. Until it completes the caller must not
  /// change the tensors of `state_dict`; after it, the caller may change them freely.
  ///
  /// Never throws: errors (a Stateful whose state_dict() throws, a tensor on an unsupported
  /// device, a failed copy) complete the future with a CheckpointError naming the key.
  ///
  /// The staged tensors ARE the stager's buffers: the next stage() overwrites them. Finish using a
  /// staged copy (upload it) before calling stage() again; AsyncCheckpointer guarantees this.
  /// Thread-safe, but stages run one after the other: a stage() called before the previous
  /// one's future completed first waits for it.
  virtual Future<StateDict> stage(const StateDict& state_dict) = 0;

  /// Blocks until every stage() called so far has completed (successfully or not). Never throws.
  virtual void synchronize_staging() = 0;

  /// DCP's `should_synchronize_after_execute`: when true, AsyncCheckpointer::async_save waits for
  /// staging before it returns (the caller may then change its tensors at once); when false,
  /// async_save returns as soon as the upload is queued and the caller waits on
  /// AsyncSaveResponse::staged before changing its tensors.
  virtual bool should_synchronize_after_execute() const = 0;

  /// Bytes of staging buffers held now (for monitoring memory). Thread-safe.
  virtual int64_t staging_bytes() const = 0;
};

}  // namespace dcpp
