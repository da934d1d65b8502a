#include <dcpp/checkpoint/megatron_state_dict.h>

#include "core/logging.h"
#include "dist/collectives.h"
#include "dist/spmd_step.h"
#include "format/content_checksum.h"
#include "storage/megatron_object_key.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/whole_value.h>

#include <string>
#include <vector>

namespace dcpp::megatron {

namespace {

std::string dot_joined(const std::vector<int64_t>& numbers) {
  std::string text;
  for (int64_t n : numbers) text += (text.empty() ? "" : ".") + std::to_string(n);
  return text;
}

}  // namespace

std::string sharded_object_key(const std::string& key, const std::vector<int64_t>& global_offset,
                               const std::vector<int64_t>& global_shape) {
  const std::string shard = "offset (" + dot_joined(global_offset) + ") of shape (" +
                            dot_joined(global_shape) + ") of ShardedObject '" + key + "'";
  if (global_shape.empty() || global_offset.size() != global_shape.size()) {
    throw CheckpointError(ErrorKind::kUsage,
                          shard + ": give one offset per dimension of a shape of one or more");
  }
  for (std::size_t d = 0; d < global_shape.size(); ++d) {
    if (global_offset[d] < 0 || global_offset[d] >= global_shape[d]) {
      throw CheckpointError(ErrorKind::kUsage, shard + ": the offset is outside the shape");
    }
  }
  return key + "/shard_" + dot_joined(global_offset) + "_" + dot_joined(global_shape);
}

void add_sharded_object(StateDict& state_dict, const std::string& key, c10::IValue data,
                        const std::vector<int64_t>& global_offset,
                        const std::vector<int64_t>& global_shape) {
  c10::impl::GenericList payload(c10::AnyType::get());  // Megatron's `torch.save([data])`
  payload.push_back(std::move(data));
  state_dict.insert(sharded_object_key(key, global_offset, global_shape),
                    whole_value(std::move(payload)));
}

void add_common_state(StateDict& state_dict, StateDict common, const StateDict& content_metadata) {
  if (!content_metadata.empty()) common.insert_or_assign(kContentMetadataEntry, content_metadata);
  const c10::IValue whole = whole_value(common);
  add_sharded_object(state_dict, "common_state", *whole_value_of(whole), {0}, {1});
}

std::vector<int> common_state_disagreements(
    const StateDict& common, const c10::intrusive_ptr<c10d::ProcessGroup>& group,
    const std::function<StateDict(const StateDict&)>& preprocess) {
  const auto ranks = group ? detail::make_process_group_collectives(group)
                           : detail::make_single_process_collectives();
  std::string digest;
  detail::agree(*ranks, "Megatron-Core common state check", "hashing the common state", [&] {
    const c10::IValue state = whole_value(preprocess ? preprocess(common) : common);
    digest = std::to_string(detail::content_crc32(*whole_value_of(state)));
  });
  const std::vector<std::string> digests = ranks->all_gather(digest);
  std::vector<int> differing;
  for (std::size_t rank = 1; rank < digests.size(); ++rank) {
    if (digests[rank] != digests[0]) differing.push_back(static_cast<int>(rank));
  }
  if (!differing.empty()) {
    std::string listed;
    for (int rank : differing) listed += (listed.empty() ? "" : ", ") + std::to_string(rank);
    detail::logger().warn(
        "the common state of rank(s) {} differs from rank 0's, which Megatron-Core saves alone",
        listed);
  }
  return differing;
}

ShardedObjectMetadata parse_sharded_object_key(const std::string& unique_key) {
  detail::MegatronObjectKey parsed = detail::parse_megatron_object_key(unique_key);
  return ShardedObjectMetadata{std::move(parsed.key), std::move(parsed.global_shape),
                               std::move(parsed.global_offset), unique_key};
}

}  // namespace dcpp::megatron
