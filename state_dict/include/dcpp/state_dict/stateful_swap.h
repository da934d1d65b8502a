#pragma once
// The one place dcpp asks Stateful objects for their state: swapped in place (load) or resolved
// into a copy (save, staging, the manager).

#include <dcpp/core/export.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/state_dict.h>

#include <memory>
#include <vector>

namespace dcpp {

/// While alive, every Stateful in a state dict, at any depth (a Stateful inside another's dict
/// too), stands replaced by the dict its state_dict() returned, so a loader fills that dict in
/// place. The destructor puts every Stateful back, whatever happened in between.
///
/// Exception safety: when a state_dict() throws, the constructor puts back every Stateful it had
/// swapped and throws: a CheckpointError (or subclass) as it is, anything else as a CheckpointError
/// naming the key and keeping the message. The caller's dict is as it was, so a retry sees its
/// Statefuls again.
class DCPP_API StatefulSwap {
 public:
  struct Swapped {
    StateValue* slot;  // holds the Stateful's dict while swapped
    std::shared_ptr<Stateful> stateful;
    ObjectPath path;  // of the slot in the root state dict
  };

  explicit StatefulSwap(StateDict& root);
  ~StatefulSwap();
  StatefulSwap(const StatefulSwap&) = delete;
  StatefulSwap& operator=(const StatefulSwap&) = delete;

  /// In swap order: an outer Stateful before the ones inside its dict.
  const std::vector<Swapped>& swapped() const { return swapped_; }

  /// Hands each swapped-in dict, as it is now, to its Stateful's load_state_dict(), innermost
  /// first (an outer dict holds its inner Statefuls' state already), putting each Stateful back
  /// before its call. A throwing load_state_dict() propagates as it is; the Statefuls not yet
  /// handed theirs are put back by the destructor.
  void commit();

  /// Ends the swap keeping the dicts in place of the Statefuls: the destructor restores nothing.
  void release() { swapped_.clear(); }

 private:
  void swap_in(StateValue& value, ObjectPath& path);
  void restore() noexcept;

  std::vector<Swapped> swapped_;
};

/// A copy of `state_dict` with every Stateful (at any depth) replaced by the dict its state_dict()
/// returned. Tensors are shared with the originals, not copied. Throws as StatefulSwap does when a
/// state_dict() throws.
DCPP_API StateDict resolve_statefuls(const StateDict& state_dict);

}  // namespace dcpp
