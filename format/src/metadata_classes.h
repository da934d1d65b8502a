#pragma once
// The Python names the `.metadata` pickle uses, shared by its encoder and decoder.

#include <c10/core/Layout.h>

#include <string_view>
#include <utility>

namespace dcpp::detail::metadata_classes {

inline constexpr std::string_view kMetaModule = "torch.distributed.checkpoint.metadata";
inline constexpr std::string_view kShardModule = "torch.distributed._shard.sharded_tensor.metadata";
inline constexpr std::string_view kFsModule = "torch.distributed.checkpoint.filesystem";
/// DCP's plans: Megatron-Core adds the save's `all_local_plans` to its `.metadata`.
inline constexpr std::string_view kPlannerModule = "torch.distributed.checkpoint.planner";
/// Megatron-Core's classes in a `.metadata`: `MCoreMetadata` (a Metadata subclass of v0.15's
/// distributed optimizer checkpoints, with `mcore_data`) and `MCoreSavePlan` (older plans).
inline constexpr std::string_view kMcoreTorchModule =
    "megatron.core.dist_checkpointing.strategies.torch";

inline constexpr std::pair<at::Layout, std::string_view> kLayouts[] = {
    {at::kStrided, "torch.strided"},      {at::kSparse, "torch.sparse_coo"},
    {at::kSparseCsr, "torch.sparse_csr"}, {at::kSparseCsc, "torch.sparse_csc"},
    {at::kSparseBsr, "torch.sparse_bsr"}, {at::kSparseBsc, "torch.sparse_bsc"},
    {at::kMkldnn, "torch._mkldnn"},
};

}  // namespace dcpp::detail::metadata_classes
