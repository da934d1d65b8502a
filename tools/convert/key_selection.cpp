#include "convert/key_selection.h"

#include <dcpp/core/checkpoint_error.h>

#include <set>

namespace dcpp::tools {

namespace {

class SelectedSource final : public CheckpointSource {
 public:
  SelectedSource(std::unique_ptr<CheckpointSource> source, const std::vector<std::string>& prefixes)
      : source_(std::move(source)) {
    for (const SourceEntry& entry : source_->entries()) {
      for (const std::string& prefix : prefixes) {
        if (key_has_prefix(entry.key, prefix)) {
          entries_.push_back(entry);
          originals_.push_back(&entry);
          break;
        }
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

  std::unique_ptr<CheckpointSource> source_;
  std::vector<SourceEntry> entries_;
  std::vector<const SourceEntry*> originals_;
};

}  // namespace

bool key_has_prefix(const std::string& key, const std::string& prefix) {
  return key.size() >= prefix.size() && key.compare(0, prefix.size(), prefix) == 0 &&
         (key.size() == prefix.size() || key[prefix.size()] == '.');
}

std::unique_ptr<CheckpointSource> select_keys(std::unique_ptr<CheckpointSource> source,
                                              const std::vector<std::string>& prefixes,
                                              const std::string& source_name) {
  for (const std::string& prefix : prefixes) {
    bool matched = false;
    for (const SourceEntry& entry : source->entries()) {
      if (key_has_prefix(entry.key, prefix)) {
        matched = true;
        break;
      }
    }
    if (!matched) {
      std::set<std::string> seen;
      std::string top_level;
      for (const SourceEntry& entry : source->entries()) {
        const std::string top = entry.key.substr(0, entry.key.find('.'));
        if (seen.insert(top).second) top_level += (top_level.empty() ? "" : ", ") + top;
      }
      throw CheckpointError(ErrorKind::kNotFound,
                            "--keys '" + prefix + "' matches no key of " + source_name +
                                " (a prefix matches whole '.'-separated components; its top-level "
                                "keys: " +
                                top_level + ")");
    }
  }
  return std::make_unique<SelectedSource>(std::move(source), prefixes);
}

}  // namespace dcpp::tools
