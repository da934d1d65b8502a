#pragma once
// A whole state as one IValue, as Python's pickle of a nested dict sees it: what rank 0 broadcasts
// (broadcast_from_rank0) and what `dcpp convert` writes into a torch.save file.

#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>

namespace dcpp::detail {

/// `value` as one IValue: a value as it is, a tensor through `on_tensor` (as it is when empty), a
/// StateDict as a Dict[str, Any] in insertion order, a StateList as a List[Any]. Anything not
/// whole (a ShardedTensor, a Stateful) is a CheckpointError (kUsage) that names its key, the
/// dotted path below `key`, and its kind; the caller adds what it was doing.
c10::IValue whole_state_to_ivalue(
    const StateValue& value, const std::string& key,
    const std::function<at::Tensor(const at::Tensor&)>& on_tensor = {});

}  // namespace dcpp::detail
