#pragma once
// Plans, write results and metadata as compact bytes, for exchanging them between ranks in one
// message each (not one message per item). The format is private to one version of dcpp: every rank
// of a job runs the same build.

#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>

#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

std::string encode_save_plan(const SavePlan& plan);
SavePlan decode_save_plan(std::string_view bytes);

std::string encode_write_results(const std::vector<WriteResult>& results);
std::vector<WriteResult> decode_write_results(std::string_view bytes);

std::string encode_load_plan(const LoadPlan& plan);
LoadPlan decode_load_plan(std::string_view bytes);

/// The Metadata the coordinator commits, for every rank's return value: cheaper to encode and
/// decode than the `.metadata` pickle.
std::string encode_metadata_message(const Metadata& metadata);
Metadata decode_metadata_message(std::string_view bytes);

/// A list of byte strings as one (each length-prefixed).
std::string encode_strings(const std::vector<std::string>& strings);
std::string encode_string_views(const std::vector<std::string_view>& strings);
std::vector<std::string> decode_strings(std::string_view bytes);

}  // namespace dcpp::detail
