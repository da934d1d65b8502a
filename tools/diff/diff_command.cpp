#include "diff/diff_command.h"

#include "common/json_value.h"
#include "convert/checkpoint_source.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

namespace dcpp::tools {

namespace {

using nlohmann::json;

constexpr int64_t kBlock = 1 << 20;  // elements compared at once

json number_json(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

json describe_tensor(const SourceEntry& entry) {
  return json{{"dtype", c10::toString(entry.dtype)}, {"shape", entry.shape}};
}

// safetensors (and so Hugging Face directories) keep values as JSON text in `__metadata__`.
bool holds_values_as_json(const std::string& format) {
  return format == "safetensors" || format == "huggingface";
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  // memcmp must not see the null data pointer of an empty tensor, even for 0 bytes.
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         (a.numel() == 0 ||
          std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0);
}

}  // namespace

TensorDifference compare_tensors(const at::Tensor& a_in, const at::Tensor& b_in) {
  const bool complex = a_in.is_complex() || b_in.is_complex();
  const at::ScalarType wide = complex ? at::kComplexDouble : at::kDouble;
  const at::Tensor a = a_in.reshape(-1);
  const at::Tensor b = b_in.reshape(-1);
  TensorDifference result;
  for (int64_t start = 0; start < a.numel(); start += kBlock) {
    const int64_t n = std::min(kBlock, a.numel() - start);
    const at::Tensor x = a.narrow(0, start, n).to(wide);
    const at::Tensor y = b.narrow(0, start, n).to(wide);
    const at::Tensor same = x.eq(y).logical_or(x.isnan().logical_and(y.isnan()));
    const at::Tensor nan_mismatch = x.isnan().logical_xor(y.isnan());
    at::Tensor diff = (x - y).abs();
    diff = diff.masked_fill(same.logical_or(nan_mismatch), 0.0);
    at::Tensor magnitude = at::maximum(x.abs(), y.abs());
    at::Tensor rel = diff / magnitude;
    rel = rel.masked_fill(diff.eq(0), 0.0).nan_to_num(1.0, 1.0, 0.0);  // inf/inf -> 1
    result.nan_mismatches += nan_mismatch.sum().item<int64_t>();
    result.differing += same.logical_not().sum().item<int64_t>();
    if (n > 0) {
      result.max_abs = std::max(result.max_abs, diff.max().item<double>());
      result.max_rel = std::max(result.max_rel, rel.max().item<double>());
    }
  }
  return result;
}

json diff_checkpoints(const std::filesystem::path& a_path, const std::filesystem::path& b_path) {
  std::unique_ptr<CheckpointSource> a = open_checkpoint_source(a_path);
  std::unique_ptr<CheckpointSource> b = open_checkpoint_source(b_path);
  std::map<std::string, const SourceEntry*> b_entries;
  for (const SourceEntry& entry : b->entries()) b_entries.emplace(entry.key, &entry);

  json only_in_a = json::array();
  json only_in_b = json::array();
  json changed = json::object();
  int64_t same = 0;
  const bool json_values = holds_values_as_json(a->format()) || holds_values_as_json(b->format());
  std::map<std::string, bool> in_a;
  for (const SourceEntry& ea : a->entries()) {
    in_a.emplace(ea.key, true);
    auto found = b_entries.find(ea.key);
    if (found == b_entries.end()) {
      only_in_a.push_back(ea.key);
      continue;
    }
    const SourceEntry& eb = *found->second;
    if (ea.is_tensor != eb.is_tensor) {
      changed[ea.key] = {{"change", "kind"},
                         {"a", ea.is_tensor ? "tensor" : "value"},
                         {"b", eb.is_tensor ? "tensor" : "value"}};
      continue;
    }
    if (!ea.is_tensor) {
      // Exactly: tensors and arrays inside values by their bytes, floats by their bits; against a
      // format that holds values as JSON text, as JSON (a tuple is a list there).
      const c10::IValue va = a->read_value(ea);
      const c10::IValue vb = b->read_value(eb);
      if (json_values ? to_json(va) == to_json(vb) : identical_values(va, vb)) {
        ++same;
      } else {
        changed[ea.key] = {{"change", "value"}, {"a", to_json(va)}, {"b", to_json(vb)}};
      }
      continue;
    }
    if (ea.shape != eb.shape) {
      changed[ea.key] = {
          {"change", "shape"}, {"a", describe_tensor(ea)}, {"b", describe_tensor(eb)}};
      continue;
    }
    const at::Tensor ta = a->read_tensor(ea);
    const at::Tensor tb = b->read_tensor(eb);
    if (bitwise_equal(ta, tb)) {
      ++same;
      continue;
    }
    const TensorDifference difference = compare_tensors(ta, tb);
    changed[ea.key] = {{"change", ea.dtype != eb.dtype ? "dtype" : "values"},
                       {"a", describe_tensor(ea)},
                       {"b", describe_tensor(eb)},
                       {"max_abs_diff", number_json(difference.max_abs)},
                       {"max_rel_diff", number_json(difference.max_rel)},
                       {"differing_elements", difference.differing},
                       {"nan_mismatches", difference.nan_mismatches}};
  }
  for (const SourceEntry& eb : b->entries()) {
    if (in_a.count(eb.key) == 0) only_in_b.push_back(eb.key);
  }
  const bool equal = only_in_a.empty() && only_in_b.empty() && changed.empty();
  return json{{"equal", equal},          {"a", a_path.string()},    {"b", b_path.string()},
              {"a_format", a->format()}, {"b_format", b->format()}, {"same", same},
              {"only_in_a", only_in_a},  {"only_in_b", only_in_b},  {"changed", changed}};
}

void print_diff(const json& diff, std::ostream& out) {
  for (const json& key : diff["only_in_a"]) out << "only in A: " << key.get<std::string>() << "\n";
  for (const json& key : diff["only_in_b"]) out << "only in B: " << key.get<std::string>() << "\n";
  auto tensor_text = [](const json& t) {
    return t["dtype"].get<std::string>() + " " + t["shape"].dump();
  };
  auto max_text = [](const json& value) {
    return value.is_null() ? std::string("inf") : number_text(value.get<double>());
  };
  for (const auto& [key, change] : diff["changed"].items()) {
    const std::string kind = change["change"];
    out << kind << ": " << key << "  ";
    if (kind == "kind") {
      out << change["a"].get<std::string>() << " -> " << change["b"].get<std::string>();
    } else if (kind == "value") {
      out << change["a"].dump() << " -> " << change["b"].dump();
    } else {
      out << tensor_text(change["a"]) << " -> " << tensor_text(change["b"]);
      if (kind != "shape") {
        int64_t numel = 1;
        for (const json& s : change["a"]["shape"]) numel *= s.get<int64_t>();
        numel = std::max<int64_t>(1, numel);
        out << ", max abs diff " << max_text(change["max_abs_diff"]) << ", max rel diff "
            << max_text(change["max_rel_diff"]) << " ("
            << change["differing_elements"].get<int64_t>() << " of " << numel << " elements differ";
        if (change["nan_mismatches"].get<int64_t>() > 0) {
          out << ", " << change["nan_mismatches"].get<int64_t>() << " NaN on one side only";
        }
        out << ")";
      }
    }
    out << "\n";
  }
  out << (diff["equal"].get<bool>() ? "equal: " : "different: ") << diff["same"].get<int64_t>()
      << " entries equal, " << diff["changed"].size() << " changed, " << diff["only_in_a"].size()
      << " only in A, " << diff["only_in_b"].size() << " only in B\n";
}

void add_diff_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "diff", "Compare two checkpoints: keys, kinds, shapes, dtypes and tensor values");
  auto a = std::make_shared<std::string>();
  auto b = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  command
      ->add_option(
          "A", *a,
          "A checkpoint: DCP directory or s3://BUCKET/PREFIX, torch.save file or safetensors")
      ->required();
  command->add_option("B", *b, "The checkpoint to compare it with (any of the same formats)")
      ->required();
  command->add_flag("--json", *as_json, "Print one JSON object instead of a listing");
  command->callback([=] {
    const json diff = diff_checkpoints(*a, *b);
    if (*as_json) {
      std::cout << diff.dump(1) << "\n";
    } else {
      print_diff(diff, std::cout);
    }
    std::cout.flush();
    if (!diff["equal"].get<bool>()) throw CLI::RuntimeError(1);
  });
}

}  // namespace dcpp::tools
