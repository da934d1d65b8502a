#include "convert/key_selection.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <set>

namespace dcpp::tools {

namespace {

class SelectedSource final : public CheckpointSource {
 public:
  // The entries of `source` under one of `prefixes` (`under` true) or under none (false).
  SelectedSource(std::unique_ptr<CheckpointSource> source, const std::vector<std::string>& prefixes,
                 bool under)
      : source_(std::move(source)) {
    for (const SourceEntry& entry : source_->entries()) {
      if (under_any(entry.key, prefixes) == under) {
        entries_.push_back(entry);
        originals_.push_back(&entry);
      }
    }
  }

  std::string format() const override { return source_->format(); }
  const std::vector<SourceEntry>& entries() const override { return entries_; }
  at::Tensor read_tensor(const SourceEntry& entry) override {
    return source_->read_tensor(original(entry));
  }
  c10::IValue read_value(const SourceEntry& entry) override {
    return source_->read_value(original(entry));
  }

 private:
  // The source's own entry for one of ours.
  const SourceEntry& original(const SourceEntry& entry) const {
    return *originals_.at(static_cast<std::size_t>(&entry - entries_.data()));
  }

  static bool under_any(const std::string& key, const std::vector<std::string>& prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](const std::string& prefix) { return key_has_prefix(key, prefix); });
  }

  std::unique_ptr<CheckpointSource> source_;
  std::vector<SourceEntry> entries_;
  std::vector<const SourceEntry*> originals_;
};

}  // namespace

bool key_has_prefix(const std::string& key, const std::string& prefix) {
  return key.size() >= prefix.size() && key.compare(0, prefix.size(), prefix) == 0 &&
         (key.size() == prefix.size() || key[prefix.size()] == '.' || key[prefix.size()] == '/');
}

namespace {

// Throws CheckpointError naming the first of `prefixes` (given with `option`) that matches no
// entry of `source`.
void require_matches(const CheckpointSource& source, const std::vector<std::string>& prefixes,
                     const std::string& option, const std::string& source_name) {
  for (const std::string& prefix : prefixes) {
    bool matched = false;
    for (const SourceEntry& entry : source.entries()) {
      if (key_has_prefix(entry.key, prefix)) {
        matched = true;
        break;
      }
    }
    if (!matched) {
      std::set<std::string> seen;
      std::string top_level;
      for (const SourceEntry& entry : source.entries()) {
        const std::string top = entry.key.substr(0, entry.key.find('.'));
        if (seen.insert(top).second) top_level += (top_level.empty() ? "" : ", ") + top;
      }
      throw CheckpointError(ErrorKind::kNotFound,
                            option + " '" + prefix + "' matches no key of " + source_name +
                                " (a prefix matches whole '.'-separated components; its top-level "
                                "keys: " +
                                top_level + ")");
    }
  }
}

}  // namespace

std::unique_ptr<CheckpointSource> select_keys(std::unique_ptr<CheckpointSource> source,
                                              const std::vector<std::string>& prefixes,
                                              const std::string& source_name) {
  require_matches(*source, prefixes, "--keys", source_name);
  return std::make_unique<SelectedSource>(std::move(source), prefixes, /*under=*/true);
}

std::unique_ptr<CheckpointSource> drop_keys(std::unique_ptr<CheckpointSource> source,
                                            const std::vector<std::string>& prefixes,
                                            const std::string& source_name) {
  require_matches(*source, prefixes, "--drop", source_name);
  return std::make_unique<SelectedSource>(std::move(source), prefixes, /*under=*/false);
}

}  // namespace dcpp::tools
